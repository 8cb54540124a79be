//! The GPU catalogue: dense peak throughput, memory, bandwidth and interconnect, each with its source.

use serde::{Deserialize, Serialize};

/// A GPU in the catalogue. Ids are lowercase in scenario files (`h100`, `mi300x`, ...).
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum GpuId {
    A100,
    #[serde(rename = "a100-40gb")]
    A100_40gb,
    H100,
    H200,
    B200,
    L40s,
    L4,
    Mi300x,
}

impl GpuId {
    /// Every GPU, in catalogue order.
    pub const ALL: [GpuId; 8] = [
        GpuId::A100,
        GpuId::A100_40gb,
        GpuId::H100,
        GpuId::H200,
        GpuId::B200,
        GpuId::L40s,
        GpuId::L4,
        GpuId::Mi300x,
    ];

    /// The catalogue id as written in scenario files.
    pub fn as_str(self) -> &'static str {
        self.spec().id
    }

    /// This GPU's datasheet numbers.
    pub fn spec(self) -> &'static GpuSpec {
        match self {
            GpuId::A100 => &A100,
            GpuId::A100_40gb => &A100_40GB,
            GpuId::H100 => &H100,
            GpuId::H200 => &H200,
            GpuId::B200 => &B200,
            GpuId::L40s => &L40S,
            GpuId::L4 => &L4,
            GpuId::Mi300x => &MI300X,
        }
    }
}

/// Datasheet numbers for one GPU (dense tensor throughput: no 2:4 sparsity).
#[derive(Debug, Clone, Serialize)]
pub struct GpuSpec {
    /// Catalogue id.
    pub id: &'static str,
    /// Marketing name.
    pub name: &'static str,
    /// Dense BF16 tensor-core peak, FLOP/s.
    pub bf16_flops: f64,
    /// Dense FP8 tensor-core peak, FLOP/s; `None` where the GPU has no FP8 tensor cores (A100): FP8 weights
    /// then run as weight-only quantisation (W8A16), computing at the BF16 peak.
    pub fp8_flops: Option<f64>,
    /// Device memory as the driver reports it, bytes.
    pub memory_bytes: f64,
    /// Peak memory bandwidth, bytes/s.
    pub memory_bw: f64,
    /// GPU-to-GPU bandwidth per direction used by tensor-parallel all-reduce, bytes/s.
    pub link_bw: f64,
    /// Where these numbers come from.
    pub source: &'static str,
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
const MIB: f64 = 1024.0 * 1024.0;

/// NVIDIA A100-SXM4-80GB.
pub static A100: GpuSpec = GpuSpec {
    id: "a100",
    name: "NVIDIA A100-SXM4-80GB",
    bf16_flops: 312e12,
    fp8_flops: None,
    memory_bytes: 80.0 * GIB,
    memory_bw: 2.039e12,
    link_bw: 300e9,
    source: "NVIDIA A100 datasheet (2021): 312 TFLOPS dense BF16, 80 GB HBM2e at 2,039 GB/s, NVLink 3 600 GB/s bidirectional",
};

/// NVIDIA A100-SXM4-40GB: the A100's compute with less and slower HBM2.
pub static A100_40GB: GpuSpec = GpuSpec {
    id: "a100-40gb",
    name: "NVIDIA A100-SXM4-40GB",
    bf16_flops: 312e12,
    fp8_flops: None,
    memory_bytes: 40.0 * GIB,
    memory_bw: 1.555e12,
    link_bw: 300e9,
    source: "NVIDIA A100 datasheet (2021): 312 TFLOPS dense BF16, 40 GB HBM2 at 1,555 GB/s, NVLink 3 600 GB/s bidirectional",
};

/// NVIDIA H100-SXM5-80GB.
pub static H100: GpuSpec = GpuSpec {
    id: "h100",
    name: "NVIDIA H100-SXM5-80GB",
    bf16_flops: 989.4e12,
    fp8_flops: Some(1978.9e12),
    memory_bytes: 81559.0 * MIB,
    memory_bw: 3.35e12,
    link_bw: 450e9,
    source: "NVIDIA H100 datasheet (2023): 989 TFLOPS dense BF16, 1,979 dense FP8, 3.35 TB/s HBM3, NVLink 4 900 GB/s bidirectional; 81,559 MiB as nvidia-smi reports",
};

/// NVIDIA H200-SXM-141GB.
pub static H200: GpuSpec = GpuSpec {
    id: "h200",
    name: "NVIDIA H200-SXM-141GB",
    bf16_flops: 989.4e12,
    fp8_flops: Some(1978.9e12),
    memory_bytes: 143771.0 * MIB,
    memory_bw: 4.8e12,
    link_bw: 450e9,
    source: "NVIDIA H200 datasheet (2024): H100 compute, 141 GB HBM3e at 4.8 TB/s, NVLink 4 900 GB/s bidirectional; 143,771 MiB as nvidia-smi reports",
};

/// NVIDIA B200 (HGX B200, 1,000 W).
pub static B200: GpuSpec = GpuSpec {
    id: "b200",
    name: "NVIDIA B200-180GB",
    bf16_flops: 2.25e15,
    fp8_flops: Some(4.5e15),
    memory_bytes: 180e9,
    memory_bw: 8.0e12,
    link_bw: 900e9,
    source: "NVIDIA HGX B200 datasheet (2025): 2.25 PFLOPS dense BF16, 4.5 dense FP8 per GPU, 180 GB HBM3e at 8 TB/s, NVLink 5 1.8 TB/s bidirectional",
};

/// NVIDIA L40S (PCIe, no NVLink).
pub static L40S: GpuSpec = GpuSpec {
    id: "l40s",
    name: "NVIDIA L40S-48GB",
    bf16_flops: 362.05e12,
    fp8_flops: Some(733e12),
    memory_bytes: 46068.0 * MIB,
    memory_bw: 864e9,
    link_bw: 32e9,
    source: "NVIDIA L40S datasheet (2023): 362 TFLOPS dense BF16, 733 dense FP8, 48 GB GDDR6 at 864 GB/s, PCIe Gen4 x16 (32 GB/s per direction); 46,068 MiB as nvidia-smi reports",
};

/// NVIDIA L4 (PCIe, no NVLink).
pub static L4: GpuSpec = GpuSpec {
    id: "l4",
    name: "NVIDIA L4-24GB",
    bf16_flops: 121e12,
    fp8_flops: Some(242e12),
    memory_bytes: 23034.0 * MIB,
    memory_bw: 300e9,
    link_bw: 32e9,
    source: "NVIDIA L4 datasheet (2023): 242 TFLOPS BF16 and 485 FP8 with sparsity (121 and 242 dense), 24 GB GDDR6 at 300 GB/s, PCIe Gen4 x16 (32 GB/s per direction), 72 W; 23,034 MiB as nvidia-smi reports",
};

/// AMD Instinct MI300X.
pub static MI300X: GpuSpec = GpuSpec {
    id: "mi300x",
    name: "AMD Instinct MI300X-192GB",
    bf16_flops: 1307.4e12,
    fp8_flops: Some(2614.9e12),
    memory_bytes: 192.0 * GIB,
    memory_bw: 5.3e12,
    link_bw: 448e9,
    source: "AMD Instinct MI300X datasheet (2023): 1,307 TFLOPS dense BF16, 2,615 dense FP8, 192 GB HBM3 at 5.3 TB/s, Infinity Fabric 7 links x 64 GB/s per direction",
};
