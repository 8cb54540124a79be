//! Each worker's share of the completed requests (an even split is 1 / workers).

use super::RunPlots;
use super::chart::{Bars, bar_chart};
use super::units::Unit;

pub fn plot(p: &RunPlots) -> Result<String, String> {
    let cats: Vec<String> = p.worker_share.iter().map(|w| w.0.to_string()).collect();
    bar_chart(&Bars {
        title: &format!("Load share per worker: {}", p.name),
        x_label: "worker",
        y_label: "share of completed requests",
        y_unit: Unit::Fraction,
        categories: &cats,
        series: &[(
            "share".into(),
            p.worker_share.iter().map(|w| Some(w.1)).collect(),
        )],
    })
}
