//! `fleetsim trace gen|stats|convert`.

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::TraceCommand;
use crate::output;
use crate::workload::synthetic::window_end;
use crate::workload::trace::TraceFormat;
use crate::workload::trace::tools::{self, Output};

pub(super) fn trace(command: TraceCommand) -> Result<()> {
    match command {
        TraceCommand::Gen {
            scenario,
            out,
            to,
            block_size,
            set,
            force,
        } => {
            let s = super::load_checked(&scenario, &set, force)?;
            // Never write over what the scenario reads: itself, a trace it replays, a rate curve.
            let mut inputs = vec![scenario.clone()];
            inputs.extend(s.workload.path.as_deref().map(|p| s.workload.resolve(p)));
            inputs.extend(
                s.workload
                    .rate_curve
                    .as_ref()
                    .map(|c| s.workload.resolve(&c.path)),
            );
            let inputs: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
            output::check_file(&out, &inputs)?;
            let rows = s
                .workload
                .rows(s.seed, window_end(s.duration), s.max_requests)
                .map_err(anyhow::Error::msg)?;
            let target = Output {
                path: &out,
                format: to.into(),
                block_size,
            };
            let n = tools::write_rows(rows, &scenario.display().to_string(), target)
                .map_err(anyhow::Error::msg)?;
            eprintln!("wrote {n} requests to {}", out.display());
            Ok(())
        }
        TraceCommand::Stats {
            trace,
            read,
            block_size,
            json,
        } => {
            let (format, report, notes) = tools::stats(&trace, &read.options(), block_size)?;
            if json {
                let mut v = serde_json::to_value(&report)?;
                v["file"] = serde_json::json!(trace.display().to_string());
                v["format"] = serde_json::json!(format.as_str());
                v["notes"] = serde_json::json!(notes);
                outln!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                outln!("{} ({format})", trace.display());
                out!("{}", report.to_text());
                for note in notes {
                    outln!("note: {note}");
                }
            }
            Ok(())
        }
        TraceCommand::Convert {
            input,
            output,
            read,
            to,
            block_size,
        } => {
            let to: TraceFormat = to.into();
            let target = Output {
                path: &output,
                format: to,
                block_size,
            };
            let (n, notes) =
                tools::convert(&input, &read.options(), target).map_err(anyhow::Error::msg)?;
            for note in notes {
                eprintln!("note: {note}");
            }
            eprintln!("wrote {n} requests to {} ({to})", output.display());
            Ok(())
        }
    }
}
