//! Prompt and generated tokens computed again, by cause.

use super::RunPlots;
use super::chart::{Bars, bar_chart};
use super::units::Unit;

pub fn plot(p: &RunPlots) -> Result<String, String> {
    let cats: Vec<String> = p.recompute.iter().map(|c| c.0.clone()).collect();
    bar_chart(&Bars {
        title: &format!("Recomputed tokens by cause: {}", p.name),
        x_label: "cause",
        y_label: "tokens recomputed",
        y_unit: Unit::Count,
        categories: &cats,
        series: &[(
            "tokens".into(),
            p.recompute.iter().map(|c| Some(c.1 as f64)).collect(),
        )],
    })
}
