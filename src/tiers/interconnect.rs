//! The interconnect between workers: NVLink within a node, RDMA (one NIC per GPU) across nodes. It
//! carries the KV of a prefilled request from its prefill worker to its decode worker (prefill/decode
//! disaggregation), as NIXL does for vLLM, SGLang and Dynamo.
//!
//! A transfer between two workers uses the sending worker's output port and the receiving worker's
//! input port of the path's kind (NVLink or NIC). Each GPU of a tensor-parallel replica moves its own
//! shard over its own port, so `bytes` of KV take `latency + bytes / min(tp) / bandwidth`, where the
//! bandwidth is the slower side's per-GPU figure. Ports serve one transfer at a time in the order asked:
//! a transfer starts when both ports are free.
//!
//! Bandwidths: NVLink per direction from the GPU catalogue ([`crate::hardware::gpu::GpuSpec::link_bw`],
//! the datasheet's bidirectional figure halved) unless `[interconnect] nvlink_gb_per_s` overrides it;
//! RDMA 50 GB/s per GPU by default (one 400 Gb/s ConnectX-7 NIC per GPU, as NVIDIA's DGX H100 and HGX
//! reference designs pair them). Latencies are order-of-magnitude defaults (a few microseconds for an
//! RDMA read or an NVLink copy, plus the transfer engine's bookkeeping) that a scenario can override.
//!
//! Invariants: a port's `free_at` never decreases; bytes carried = what each booking asked for.

use serde::{Deserialize, Serialize};

use crate::config::Positive;
use crate::time::{SimDuration, SimTime};

/// `[interconnect]`: how workers reach each other's GPU memory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InterconnectSpec {
    /// NVLink bandwidth per GPU and direction within a node, GB/s; default: the GPU catalogue's.
    #[serde(default)]
    pub nvlink_gb_per_s: Option<Positive>,
    /// Fixed latency of one transfer over NVLink.
    #[serde(default = "defaults::nvlink_latency")]
    pub nvlink_latency: SimDuration,
    /// RDMA bandwidth per GPU and direction across nodes, GB/s (one NIC per GPU).
    #[serde(default = "defaults::rdma_gb_per_s")]
    pub rdma_gb_per_s: Positive,
    /// Fixed latency of one transfer over RDMA.
    #[serde(default = "defaults::rdma_latency")]
    pub rdma_latency: SimDuration,
    /// Whether workers on different nodes are linked at all (`false`: only NVLink within a node).
    #[serde(default = "defaults::across_nodes")]
    pub across_nodes: bool,
    /// Peer transfer: a worker routed a request whose prefix another worker's GPU cache holds beyond
    /// its own pulls those blocks over this interconnect when that beats recomputing them.
    #[serde(default)]
    pub peer_transfer: bool,
    /// Hot-prefix replication: prefixes requested faster than a threshold are copied to more workers
    /// over this interconnect ([`crate::tiers::hot_prefix`]); `None` (the default) copies nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication: Option<crate::tiers::hot_prefix::ReplicationSpec>,
}

mod defaults {
    use super::*;
    pub fn nvlink_latency() -> SimDuration {
        SimDuration(10_000)
    }
    pub fn rdma_gb_per_s() -> Positive {
        Positive(50.0)
    }
    pub fn rdma_latency() -> SimDuration {
        SimDuration(25_000)
    }
    pub fn across_nodes() -> bool {
        true
    }
}

impl Default for InterconnectSpec {
    fn default() -> Self {
        InterconnectSpec {
            nvlink_gb_per_s: None,
            nvlink_latency: defaults::nvlink_latency(),
            rdma_gb_per_s: defaults::rdma_gb_per_s(),
            rdma_latency: defaults::rdma_latency(),
            across_nodes: defaults::across_nodes(),
            peer_transfer: false,
            replication: None,
        }
    }
}

/// The kind of path between two workers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathKind {
    Nvlink = 0,
    Rdma = 1,
}

/// Where a worker sits and what its GPUs can move.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// Its node: workers with the same node share NVLink.
    pub node: usize,
    /// GPUs of the replica.
    pub gpus: u32,
    /// NVLink bandwidth per GPU and direction, bytes/s (the catalogue's, or the scenario's).
    pub nvlink_bytes_per_s: f64,
}

/// One port: the time it is next free and the bytes it carried.
#[derive(Clone, Debug, Default)]
struct Port {
    free_at: SimTime,
    bytes: f64,
}

/// Time to move `bytes_per_gpu` over a link of `bytes_per_s` with a fixed `latency`, the link idle:
/// `latency + bytes_per_gpu / bytes_per_s`. Pure: the pricing any router or planner may use.
pub fn transfer_time(bytes_per_gpu: f64, bytes_per_s: f64, latency: SimDuration) -> SimDuration {
    latency + SimDuration::from_secs_f64(bytes_per_gpu / bytes_per_s)
}

/// The fleet's interconnect: every worker's ports, [out, in] per path kind.
#[derive(Debug)]
pub struct Fabric {
    endpoints: Vec<Endpoint>,
    ports: Vec<[[Port; 2]; 2]>,
    rdma_bytes_per_s: f64,
    latency: [SimDuration; 2],
    across_nodes: bool,
}

impl Fabric {
    /// Idle ports for `endpoints` (indexed by worker) under `spec`.
    pub fn new(spec: &InterconnectSpec, endpoints: Vec<Endpoint>) -> Self {
        let ports = endpoints.iter().map(|_| Default::default()).collect();
        Fabric {
            endpoints,
            ports,
            rdma_bytes_per_s: spec.rdma_gb_per_s.0 * 1e9,
            latency: [spec.nvlink_latency, spec.rdma_latency],
            across_nodes: spec.across_nodes,
        }
    }

    /// The path from worker `from` to worker `to`, or `None` when they have no link.
    pub fn path(&self, from: usize, to: usize) -> Option<PathKind> {
        if self.endpoints[from].node == self.endpoints[to].node {
            Some(PathKind::Nvlink)
        } else if self.across_nodes {
            Some(PathKind::Rdma)
        } else {
            None
        }
    }

    /// Per-GPU bytes/s of `kind` between `from` and `to` (the slower side's), and the GPUs that carry
    /// the shards in parallel.
    fn lanes(&self, kind: PathKind, from: usize, to: usize) -> (f64, u32) {
        let (a, b) = (&self.endpoints[from], &self.endpoints[to]);
        let bw = match kind {
            PathKind::Nvlink => a.nvlink_bytes_per_s.min(b.nvlink_bytes_per_s),
            PathKind::Rdma => self.rdma_bytes_per_s,
        };
        (bw, a.gpus.min(b.gpus).max(1))
    }

    /// How long moving `bytes` (all GPUs' shards together) from `from` to `to` takes on idle ports,
    /// or `None` without a link.
    pub fn idle_time(&self, from: usize, to: usize, bytes: f64) -> Option<SimDuration> {
        let kind = self.path(from, to)?;
        let (bw, gpus) = self.lanes(kind, from, to);
        Some(transfer_time(
            bytes / f64::from(gpus),
            bw,
            self.latency[kind as usize],
        ))
    }

    /// When a transfer of `bytes` from `from` to `to` asked for at `now` would end (queued behind both
    /// ports' earlier transfers), without booking it; `None` without a link.
    pub fn quote(&self, from: usize, to: usize, bytes: f64, now: SimTime) -> Option<SimTime> {
        let kind = self.path(from, to)?;
        let k = kind as usize;
        let start = now
            .max(self.ports[from][k][0].free_at)
            .max(self.ports[to][k][1].free_at);
        Some(start + self.idle_time(from, to, bytes)?)
    }

    /// Books a transfer of `bytes` from `from` to `to` at `now` on both sides' ports; returns when it
    /// ends, or `None` without a link (nothing booked).
    pub fn book(&mut self, from: usize, to: usize, bytes: f64, now: SimTime) -> Option<SimTime> {
        let kind = self.path(from, to)?;
        let k = kind as usize;
        let end = self.quote(from, to, bytes, now)?;
        // The latency is paid by the transfer; the ports are busy for the bytes only.
        let busy_until = SimTime(end.0 - self.latency[k].0);
        for (w, dir) in [(from, 0), (to, 1)] {
            let p = &mut self.ports[w][k][dir];
            p.free_at = p.free_at.max(busy_until);
            p.bytes += bytes;
        }
        Some(end)
    }

    /// Bytes sent by worker `w` over paths of `kind`.
    pub fn bytes_sent(&self, w: usize, kind: PathKind) -> f64 {
        self.ports[w][kind as usize][0].bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fabric(across: bool) -> Fabric {
        let spec = InterconnectSpec {
            nvlink_gb_per_s: None,
            nvlink_latency: SimDuration(10_000),
            rdma_gb_per_s: Positive(50.0),
            rdma_latency: SimDuration(25_000),
            across_nodes: across,
            peer_transfer: false,
            replication: None,
        };
        let ep = |node, gpus| Endpoint {
            node,
            gpus,
            nvlink_bytes_per_s: 450e9,
        };
        // Workers 0 and 1 share node 0; worker 2 is alone on node 1 with TP 2.
        Fabric::new(&spec, vec![ep(0, 1), ep(0, 1), ep(1, 2)])
    }

    #[test]
    fn nvlink_within_a_node_and_rdma_across() {
        let f = fabric(true);
        assert_eq!(f.path(0, 1), Some(PathKind::Nvlink));
        assert_eq!(f.path(0, 2), Some(PathKind::Rdma));
        // 0.9 GB over NVLink at 450 GB/s: 2 ms + 10 µs.
        assert_eq!(f.idle_time(0, 1, 0.9e9), Some(SimDuration(2_010_000)));
        // 1 GB over RDMA, one GPU on the sending side (min TP 1): 20 ms + 25 µs.
        assert_eq!(f.idle_time(0, 2, 1e9), Some(SimDuration(20_025_000)));
    }

    #[test]
    fn no_link_across_nodes_when_the_fabric_has_none() {
        let mut f = fabric(false);
        assert_eq!(f.path(1, 2), None);
        assert_eq!(f.book(1, 2, 1e9, SimTime::ZERO), None);
        assert_eq!(f.bytes_sent(1, PathKind::Rdma), 0.0);
    }

    #[test]
    fn transfers_queue_on_either_side() {
        let mut f = fabric(true);
        let t0 = SimTime::ZERO;
        // 0 → 2 over RDMA: 20 ms of bytes, ends at 20.025 ms.
        let a = f.book(0, 2, 1e9, t0).unwrap();
        assert_eq!(a, t0 + SimDuration(20_025_000));
        // 1 → 2 shares worker 2's input port: it starts when the bytes of the first are through
        // (20 ms) and ends 20.025 ms later.
        let b = f.book(1, 2, 1e9, t0).unwrap();
        assert_eq!(b, t0 + SimDuration(40_025_000));
        // 1 → 0 over NVLink uses other ports: not delayed.
        let c = f.book(1, 0, 0.9e9, t0).unwrap();
        assert_eq!(c, t0 + SimDuration(2_010_000));
        assert_eq!(f.bytes_sent(1, PathKind::Rdma), 1e9);
    }
}
