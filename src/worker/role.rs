//! A worker's part in prefill/decode disaggregation.

use serde::{Deserialize, Serialize};

/// What a worker does with a request (`role` of a `[[workers]]` group).
///
/// A fleet with no `prefill` or `decode` worker is aggregated: every request runs whole on one worker.
/// Otherwise a request's prompt is prefilled on a prefill-capable worker (`prefill` or `both`), and, when
/// that worker is a `prefill` one, its KV moves over the interconnect to a decode-capable worker
/// (`decode` or `both`), which produces every output token.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Prefill and decode (an aggregated worker).
    #[default]
    Both,
    /// Prefill only: computes a prompt's KV and hands the request off.
    Prefill,
    /// Decode only: takes handed-off requests.
    Decode,
}

impl Role {
    /// Whether the worker takes new requests (prefills them).
    pub fn prefills(self) -> bool {
        self != Role::Decode
    }

    /// Whether the worker takes handed-off requests (decodes them).
    pub fn decodes(self) -> bool {
        self != Role::Prefill
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Both => "both",
            Role::Prefill => "prefill",
            Role::Decode => "decode",
        }
    }
}
