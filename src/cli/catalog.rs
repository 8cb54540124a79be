//! `fleetsim catalog`: the GPUs, models, precisions, policies and profiles fleetsim knows.

use crate::hardware::{GpuId, ModelId, PerfModel, Precision, profile};
use crate::routing::PolicyConfig;

/// The catalogue as text tables.
pub fn catalog() -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let _ = writeln!(o, "GPUs (dense peaks)");
    let _ = writeln!(
        o,
        "  {:<8} {:<28} {:>10} {:>10} {:>9} {:>10} {:>9}",
        "id", "name", "BF16 TF/s", "FP8 TF/s", "mem GiB", "HBM TB/s", "link GB/s"
    );
    for g in GpuId::ALL {
        let s = g.spec();
        let _ = writeln!(
            o,
            "  {:<8} {:<28} {:>10.0} {:>10} {:>9.1} {:>10.2} {:>9.0}",
            s.id,
            s.name,
            s.bf16_flops / 1e12,
            s.fp8_flops
                .map_or("-".to_string(), |f| format!("{:.0}", f / 1e12)),
            s.memory_bytes / (1u64 << 30) as f64,
            s.memory_bw / 1e12,
            s.link_bw / 1e9
        );
    }
    let _ = writeln!(
        o,
        "\nMIG slices (`mig = ...` in [[workers]]; SMs in sevenths, memory and bandwidth in eighths)"
    );
    for g in GpuId::ALL {
        let names = crate::hardware::mig::MigProfile::names(g);
        if !names.is_empty() {
            let _ = writeln!(o, "  {:<9} {}", g.as_str(), names.join(", "));
        }
    }
    let _ = writeln!(
        o,
        "\nGPU prices (on demand, US$ per GPU-hour, for `size`; a scenario's [prices] table overrides them)"
    );
    for g in GpuId::ALL {
        let _ = match crate::hardware::price::catalogue_price(g) {
            Some(p) => writeln!(
                o,
                "  {:<9} {:>5.2}  {}",
                g.as_str(),
                p.usd_per_gpu_hour,
                p.source
            ),
            None => writeln!(
                o,
                "  {:<9} {:>5}  no public price recorded: set one in [prices]",
                g.as_str(),
                "-"
            ),
        };
    }
    let _ = writeln!(o, "\nModels");
    let _ = writeln!(
        o,
        "  {:<14} {:>8} {:>8} {:>7} {:>9} {:>14}",
        "id", "params B", "active B", "layers", "kv heads", "KV KiB/token"
    );
    for m in ModelId::ALL {
        let s = m.spec();
        let active = s.active_block_params() + 2.0 * s.embedding_params();
        let _ = writeln!(
            o,
            "  {:<14} {:>8.2} {:>8.2} {:>7} {:>9} {:>14.0}",
            s.id,
            s.total_params() / 1e9,
            active / 1e9,
            s.layers,
            s.kv_heads,
            s.kv_bytes_per_token(2.0) / 1024.0
        );
    }
    let _ = writeln!(
        o,
        "\nPrecisions: {}",
        Precision::ALL.map(Precision::as_str).join(", ")
    );
    let _ = writeln!(o, "Routing policies: {}", PolicyConfig::NAMES.join(", "));
    let _ = writeln!(
        o,
        "\nCalibrated step-time profiles (others borrow the nearest, spec-scaled; docs/calibration.md)"
    );
    let _ = writeln!(
        o,
        "  {:<30} {:<22} {:>12} {:>12}",
        "profile", "data", "fit median", "fit max"
    );
    for p in profile::builtin() {
        let (median, max) = p
            .fit
            .as_ref()
            .map_or((f64::NAN, f64::NAN), |f| (f.median_error, f.max_error));
        let _ = writeln!(
            o,
            "  {:<30} {:<22} {:>11.1}% {:>11.1}%",
            p.key().to_string(),
            p.source,
            median * 100.0,
            max * 100.0
        );
    }
    let p = PerfModel::calibrated(GpuId::H100, ModelId::Llama31_8b, 1, Precision::Bf16);
    let _ = writeln!(
        o,
        "\nExample (h100, llama-3.1-8b, tp 1, bf16, {}): 2,048-token prefill {:.1} ms, batch-1 decode step {:.2} ms",
        p.provenance.profile,
        p.prefill_seconds(2048, 0) * 1e3,
        p.decode_step_seconds(1, 1024) * 1e3
    );
    o
}
