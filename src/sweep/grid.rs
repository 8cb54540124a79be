//! The grid of a sweep: `--grid key=v1,v2,...` axes, their cartesian product in grid order, and shards.
//!
//! Invariants:
//! - Points are numbered in grid order: the first axis varies slowest, the last fastest (like nested
//!   loops written in the order the axes were given), so point numbers do not depend on sharding.
//! - Shard `I/N` holds exactly the points whose number `p` has `p % N == I`: the shards partition the grid,
//!   and round-robin assignment spreads every axis's expensive values over all shards.

use thiserror::Error;

/// A grid that cannot be used, said in the user's words.
#[derive(Debug, Error, PartialEq)]
pub enum GridError {
    #[error("give at least one --grid KEY=V1,V2,... (an empty grid sweeps nothing)")]
    Empty,
    #[error("--grid {0}: expected KEY=V1,V2,... (e.g. workers.0.count=4,8,16)")]
    NoEquals(String),
    #[error("--grid {0}: no values after `=`")]
    NoValues(String),
    #[error(
        "--grid {spec}: the value list has an empty entry (two commas in a row, or a trailing comma)"
    )]
    EmptyValue { spec: String },
    #[error("--grid {key}: the key is given twice; put all its values in one --grid")]
    Duplicate { key: String },
    #[error("--grid {spec}: the value `{value}` is listed twice")]
    DuplicateValue { spec: String, value: String },
    #[error("--shard {0}: expected I/N with 0 <= I < N (e.g. 0/4 .. 3/4)")]
    BadShard(String),
    #[error(
        "--shard {index}/{count}: shard index {index} is out of range: shards are numbered 0 to {last}"
    )]
    ShardOutOfRange { index: u64, count: u64, last: u64 },
}

/// One swept key and its values, as given.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Axis {
    pub key: String,
    pub values: Vec<String>,
}

/// The axes of a sweep, in the order given.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Grid {
    pub axes: Vec<Axis>,
}

impl Grid {
    /// Parses `--grid` arguments. Keys are checked against the scenario later, by loading every point.
    pub fn parse(specs: &[String]) -> Result<Grid, GridError> {
        if specs.is_empty() {
            return Err(GridError::Empty);
        }
        let mut axes: Vec<Axis> = Vec::new();
        for spec in specs {
            let (key, list) = spec
                .split_once('=')
                .ok_or_else(|| GridError::NoEquals(spec.clone()))?;
            let key = key.trim();
            if key.is_empty() {
                return Err(GridError::NoEquals(spec.clone()));
            }
            if list.trim().is_empty() {
                return Err(GridError::NoValues(spec.clone()));
            }
            let values: Vec<String> = list.split(',').map(|v| v.trim().to_string()).collect();
            if values.iter().any(String::is_empty) {
                return Err(GridError::EmptyValue { spec: spec.clone() });
            }
            for (i, v) in values.iter().enumerate() {
                if values[..i].contains(v) {
                    return Err(GridError::DuplicateValue {
                        spec: spec.clone(),
                        value: v.clone(),
                    });
                }
            }
            if axes.iter().any(|a| a.key == key) {
                return Err(GridError::Duplicate { key: key.into() });
            }
            axes.push(Axis {
                key: key.to_string(),
                values,
            });
        }
        Ok(Grid { axes })
    }

    /// Number of points (the product of the axes' lengths).
    pub fn len(&self) -> usize {
        self.axes.iter().map(|a| a.values.len()).product()
    }

    /// Whether the grid has no point (never, for a parsed grid).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value index along each axis of point `p` (grid order: the last axis varies fastest).
    pub fn coordinates(&self, p: usize) -> Vec<usize> {
        let mut rest = p;
        let mut coords = vec![0; self.axes.len()];
        for (i, a) in self.axes.iter().enumerate().rev() {
            coords[i] = rest % a.values.len();
            rest /= a.values.len();
        }
        coords
    }

    /// The `key=value` overrides of point `p`, in axis order.
    pub fn overrides(&self, p: usize) -> Vec<String> {
        self.coordinates(p)
            .iter()
            .zip(&self.axes)
            .map(|(&c, a)| format!("{}={}", a.key, a.values[c]))
            .collect()
    }
}

/// A deterministic 1/N of the grid: `I/N`, 0-based (Slurm's `SLURM_ARRAY_TASK_ID` with `--array=0-(N-1)`,
/// Kubernetes' `JOB_COMPLETION_INDEX`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub index: u64,
    pub count: u64,
}

impl Shard {
    /// The whole grid.
    pub const ALL: Shard = Shard { index: 0, count: 1 };

    /// Parses `I/N`.
    pub fn parse(s: &str) -> Result<Shard, GridError> {
        let bad = || GridError::BadShard(s.to_string());
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let index: u64 = i.trim().parse().map_err(|_| bad())?;
        let count: u64 = n.trim().parse().map_err(|_| bad())?;
        if count == 0 {
            return Err(bad());
        }
        if index >= count {
            return Err(GridError::ShardOutOfRange {
                index,
                count,
                last: count - 1,
            });
        }
        Ok(Shard { index, count })
    }

    /// Whether point `p` belongs to this shard.
    pub fn holds(&self, p: usize) -> bool {
        p as u64 % self.count == self.index
    }

    /// Whether this is the whole grid.
    pub fn is_all(&self) -> bool {
        self.count == 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid(specs: &[&str]) -> Result<Grid, GridError> {
        Grid::parse(&specs.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn points_follow_grid_order_last_axis_fastest() {
        let g = grid(&["a=1,2", "b=x,y,z"]).unwrap();
        assert_eq!(g.len(), 6);
        // Nested loops: for a in [1, 2] { for b in [x, y, z] }.
        let all: Vec<String> = (0..6).map(|p| g.overrides(p).join(" ")).collect();
        assert_eq!(
            all,
            [
                "a=1 b=x", "a=1 b=y", "a=1 b=z", "a=2 b=x", "a=2 b=y", "a=2 b=z"
            ]
        );
    }

    #[test]
    fn bad_grids_are_refused() {
        assert_eq!(grid(&[]), Err(GridError::Empty));
        assert!(matches!(grid(&["a"]), Err(GridError::NoEquals(_))));
        assert!(matches!(grid(&["a="]), Err(GridError::NoValues(_))));
        assert!(matches!(
            grid(&["a=1,,2"]),
            Err(GridError::EmptyValue { .. })
        ));
        assert!(matches!(
            grid(&["a=1", "a=2"]),
            Err(GridError::Duplicate { .. })
        ));
        assert!(matches!(
            grid(&["a=1,1"]),
            Err(GridError::DuplicateValue { .. })
        ));
    }

    #[test]
    fn shards_partition_the_grid() {
        assert_eq!(
            Shard::parse("3/3"),
            Err(GridError::ShardOutOfRange {
                index: 3,
                count: 3,
                last: 2
            })
        );
        assert!(Shard::parse("0/0").is_err());
        assert!(Shard::parse("x").is_err());
        let shards: Vec<Shard> = (0..3)
            .map(|i| Shard::parse(&format!("{i}/3")).unwrap())
            .collect();
        for p in 0..20 {
            assert_eq!(shards.iter().filter(|s| s.holds(p)).count(), 1, "point {p}");
        }
    }
}
