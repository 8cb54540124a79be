//! On-demand rental prices per GPU-hour, each with its source, for `fleetsim size`'s costs. A scenario's
//! `[prices]` table overrides them (your negotiated or reserved rates); a GPU with no published price here
//! must be priced there before `size` can cost it.

use super::GpuId;

/// A catalogue price: US dollars per GPU-hour, on demand, and where it comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Price {
    pub usd_per_gpu_hour: f64,
    pub source: &'static str,
}

/// The catalogue's on-demand price of `gpu`, if a public one is recorded.
pub fn catalogue_price(gpu: GpuId) -> Option<Price> {
    let (usd, source) = match gpu {
        GpuId::A100 => (
            1.30,
            "Mercatus GPU index, May 2026: A100 80GB on-demand $1.10–1.50/GPU-h at specialty clouds (midpoint)",
        ),
        GpuId::H100 => (
            3.00,
            "Mercatus GPU index, May 2026: H100 SXM5 on-demand $2.50–3.50/GPU-h at specialty clouds (midpoint); AIMultiple GPU index, May 2026: median $2.95",
        ),
        GpuId::H200 => (
            4.00,
            "Mercatus GPU index, May 2026: H200 SXM5 on-demand $3.50–4.50/GPU-h at specialty clouds (midpoint)",
        ),
        GpuId::B200 => (
            5.25,
            "Lyceum Technologies, March 2026: B200 on-demand $4.50–6.00/GPU-h at specialised clouds (midpoint)",
        ),
        GpuId::A100_40gb | GpuId::L40s | GpuId::L4 | GpuId::Mi300x => return None,
    };
    Some(Price {
        usd_per_gpu_hour: usd,
        source,
    })
}
