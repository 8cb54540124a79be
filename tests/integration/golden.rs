//! Golden snapshot of the quickstart scenario's summary: any change to it is reviewed on purpose
//! (`cargo insta review`).

use crate::common::{run, scenario_path};
use fleetsim::scenario::Scenario;

#[test]
fn quickstart_summary_is_unchanged() {
    let s = Scenario::load(&scenario_path("quickstart.toml"), &[]).unwrap();
    let json = run(&s).0.to_json();
    insta::assert_snapshot!("quickstart_summary_json", json);
}
