//! Catalogue ids as the validation files write them (`h100`, `llama-3.1-8b`, `fp8`): the same spelling as
//! scenarios and `fleetsim catalog`, and the row reader those files share (a fixed header, then rows
//! whose first four columns name a configuration; errors name file, line and column).

use super::CalibrationError;
use crate::hardware::{GpuId, ModelId, Precision};

/// One data row of a validation CSV, with what its parser needs to name a bad field.
pub struct Row<'a> {
    record: &'a csv::StringRecord,
    columns: &'static [&'static str],
    file: &'a str,
    line: u64,
}

impl Row<'_> {
    /// Field `i`, trimmed (empty when the row is short).
    pub fn field(&self, i: usize) -> &str {
        self.record.get(i).unwrap_or("").trim()
    }

    /// The error for field `i`: `file:line: column: what, got `value``.
    pub fn bad(&self, i: usize, what: &str) -> CalibrationError {
        CalibrationError {
            location: format!("{}:{}", self.file, self.line),
            message: format!("{}: {what}, got `{}`", self.columns[i], self.field(i)),
        }
    }

    /// Columns 0–3: GPU, model, TP (1, 2, 4 or 8) and precision.
    pub fn configuration(&self) -> Result<(GpuId, ModelId, u32, Precision), CalibrationError> {
        let gpu = gpu(self.field(0)).ok_or_else(|| self.bad(0, "not a GPU of the catalogue"))?;
        let model =
            model(self.field(1)).ok_or_else(|| self.bad(1, "not a model of the catalogue"))?;
        let tp = match self.field(2).parse::<u32>() {
            Ok(t @ (1 | 2 | 4 | 8)) => t,
            _ => return Err(self.bad(2, "expected 1, 2, 4 or 8")),
        };
        let precision =
            precision(self.field(3)).ok_or_else(|| self.bad(3, "expected bf16 or fp8"))?;
        Ok((gpu, model, tp, precision))
    }

    /// Field `i` as a whole number above zero (a token or request count).
    pub fn positive_count(&self, i: usize) -> Result<u32, CalibrationError> {
        self.field(i)
            .parse::<u32>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| self.bad(i, "expected a positive whole number"))
    }

    /// Fails on the first of `fields` that is empty.
    pub fn required(&self, fields: &[usize]) -> Result<(), CalibrationError> {
        match fields.iter().find(|&&i| self.field(i).is_empty()) {
            Some(&i) => Err(self.bad(i, "must not be empty")),
            None => Ok(()),
        }
    }
}

/// Runs `predict` on every point, an error naming `file` and the point's `label`.
pub fn predict_each<P, R>(
    points: &[P],
    file: &str,
    label: impl Fn(&P) -> String,
    predict: impl Fn(&P) -> Result<R, String>,
) -> Result<Vec<R>, CalibrationError> {
    points
        .iter()
        .map(|p| {
            predict(p).map_err(|message| CalibrationError {
                location: file.into(),
                message: format!("{}: {message}", label(p)),
            })
        })
        .collect()
}

/// Reads `text` (CSV with exactly the header `columns`), naming `file` in errors, and turns every row
/// into a `T` with `parse_row`. An unreadable or wrong header, an unreadable row or no rows at all is an
/// error.
pub fn read_rows<T>(
    text: &str,
    file: &str,
    columns: &'static [&'static str],
    mut parse_row: impl FnMut(&Row<'_>) -> Result<T, CalibrationError>,
) -> Result<Vec<T>, CalibrationError> {
    let err = |line: u64, message: String| CalibrationError {
        location: format!("{file}:{line}"),
        message,
    };
    let mut reader = csv::ReaderBuilder::new().from_reader(text.as_bytes());
    let header = reader
        .headers()
        .map_err(|e| err(1, format!("unreadable header: {e}")))?
        .clone();
    if header.iter().collect::<Vec<_>>() != columns {
        return Err(err(
            1,
            format!("the header must be `{}`", columns.join(",")),
        ));
    }
    let mut rows = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| {
            let line = e.position().map_or(0, |p| p.line());
            err(line, format!("unreadable row: {e}"))
        })?;
        let line = record.position().map_or(0, |p| p.line());
        rows.push(parse_row(&Row {
            record: &record,
            columns,
            file,
            line,
        })?);
    }
    if rows.is_empty() {
        return Err(err(1, "no rows".into()));
    }
    Ok(rows)
}

/// The GPU whose id is `s`.
pub fn gpu(s: &str) -> Option<GpuId> {
    GpuId::ALL.into_iter().find(|g| g.as_str() == s)
}

/// The model whose id is `s`.
pub fn model(s: &str) -> Option<ModelId> {
    ModelId::ALL.into_iter().find(|m| m.as_str() == s)
}

/// The precision whose id is `s`.
pub fn precision(s: &str) -> Option<Precision> {
    Precision::ALL.into_iter().find(|p| p.as_str() == s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_catalogue_id_reads_back() {
        for g in GpuId::ALL {
            assert_eq!(gpu(g.as_str()), Some(g));
        }
        for m in ModelId::ALL {
            assert_eq!(model(m.as_str()), Some(m));
        }
        for p in Precision::ALL {
            assert_eq!(precision(p.as_str()), Some(p));
        }
        assert_eq!(gpu("H100"), None);
    }
}
