//! p50 and p95 TTFT by conversation turn (turn 0 is a session's cold first request).

use super::RunPlots;
use super::chart::{Bars, bar_chart};
use super::units::Unit;

pub fn plot(p: &RunPlots) -> Result<String, String> {
    let cats: Vec<String> = p.ttft_by_turn.iter().map(|g| g.0.clone()).collect();
    bar_chart(&Bars {
        title: &format!("TTFT by conversation turn: {}", p.name),
        x_label: "conversation turn",
        y_label: "TTFT",
        y_unit: Unit::Milliseconds,
        categories: &cats,
        series: &[
            (
                "p50".into(),
                p.ttft_by_turn.iter().map(|g| Some(g.1)).collect(),
            ),
            (
                "p95".into(),
                p.ttft_by_turn.iter().map(|g| Some(g.2)).collect(),
            ),
        ],
    })
}
