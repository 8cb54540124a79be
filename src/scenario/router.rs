//! `[router]` checked against the fleet whose caches it compares.

use super::Scenario;

impl Scenario {
    /// Checks that the router can compare caches across the fleet.
    pub(super) fn validate_router(&self) -> Result<(), (String, String)> {
        if self.router.policy.build().needs_cache_view() {
            let bs = self.workers[0].block_size;
            if self.workers.iter().any(|g| g.block_size != bs) {
                return Err((
                    "router.policy".into(),
                    format!(
                        "{} compares cached prefixes across workers: every worker group needs the same block_size",
                        self.router.policy.name()
                    ),
                ));
            }
        }
        Ok(())
    }
}
