//! Multi-Instance GPU (MIG) slices: a GPU cut into instances with their own streaming multiprocessors,
//! memory, L2 and memory controllers, running at once with no interference between them.
//!
//! A MIG-capable GPU has 7 compute slices (each 1/7 of its SMs) and 8 memory slices (each 1/8 of its
//! memory, with its share of the memory controllers and so of the bandwidth). A profile `Ng.Mgb` takes N
//! compute slices and the memory slices that carry M GB; the profiles and their fractions are those of
//! NVIDIA's MIG User Guide, "Supported MIG Profiles" (docs.nvidia.com/datacenter/tesla/mig-user-guide,
//! the A100 tables, whose 80 GB names and fractions the H100, H200 and B200 tables repeat at their own
//! sizes): 1g (1/7 SMs, 1/8 memory), 1g with double memory (1/7, 2/8), 2g (2/7, 2/8), 3g (3/7, 4/8), 4g
//! (4/7, 4/8) and 7g (the whole GPU). The `+me` media-extension variants differ only in video decoders
//! and are not listed.
//!
//! What a slice means for the step model: its tensor peaks are the GPU's × its SM fraction, its memory
//! bandwidth and memory the GPU's × its memory fraction; efficiencies are the whole GPU's (an
//! assumption: no public kernel measurements per slice were found). A slice has no NVLink peer access,
//! so an engine on one runs at tensor parallelism 1.
//!
//! Instances on one GPU must fit its slices: compute slices add up to at most 7, memory slices to at
//! most 8. (NVIDIA's placement rules forbid a few layouts within those sums; they are not checked.)

use super::GpuId;

/// One MIG profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MigProfile {
    /// Compute slices, of 7.
    pub compute: u32,
    /// Memory slices, of 8.
    pub memory: u32,
}

/// (compute slices, memory slices) of each profile, in the guide's order.
const SLICES: [(u32, u32); 6] = [(1, 1), (1, 2), (2, 2), (3, 4), (4, 4), (7, 8)];

impl MigProfile {
    /// Compute slices a GPU has.
    pub const COMPUTE_SLICES: u32 = 7;
    /// Memory slices a GPU has.
    pub const MEMORY_SLICES: u32 = 8;

    /// The profile called `name` (`"3g.40gb"`) on `gpu`, or why there is none.
    pub fn parse(gpu: GpuId, name: &str) -> Result<Self, String> {
        let names = Self::names(gpu);
        if names.is_empty() {
            return Err(format!(
                "{} has no MIG: MIG slices exist on the A100, H100, H200 and B200",
                gpu.as_str()
            ));
        }
        SLICES
            .iter()
            .zip(&names)
            .find(|(_, n)| n.as_str() == name)
            .map(|(&(compute, memory), _)| MigProfile { compute, memory })
            .ok_or_else(|| {
                format!(
                    "`{name}` is not a MIG profile of the {}: one of {}",
                    gpu.as_str(),
                    names.join(", ")
                )
            })
    }

    /// The profile names of `gpu` (empty where it has no MIG), as `nvidia-smi mig -lgip` lists them.
    pub fn names(gpu: GpuId) -> Vec<String> {
        // The memory of one memory slice, GB, as the profile names count it.
        let slice_gb = match gpu {
            GpuId::A100_40gb => 5,
            GpuId::A100 | GpuId::H100 => 10,
            GpuId::H200 => 18,
            GpuId::B200 => 23,
            GpuId::L40s | GpuId::L4 | GpuId::Mi300x => return Vec::new(),
        };
        // The names round the 2- and 4-slice memories as the guide prints them (H200: 35 and 71 GB,
        // B200: 45 and 90 GB; the whole GPU is its catalogue size).
        let whole_gb = match gpu {
            GpuId::A100_40gb => 40,
            GpuId::A100 | GpuId::H100 => 80,
            GpuId::H200 => 141,
            GpuId::B200 => 180,
            GpuId::L40s | GpuId::L4 | GpuId::Mi300x => unreachable!("no MIG"),
        };
        let gb = |m: u32| match (gpu, m) {
            (_, 8) => whole_gb,
            (GpuId::H200, 2) => 35,
            (GpuId::H200, 4) => 71,
            (GpuId::B200, 2) => 45,
            (GpuId::B200, 4) => 90,
            _ => slice_gb * m,
        };
        SLICES
            .iter()
            .map(|&(c, m)| format!("{c}g.{}gb", gb(m)))
            .collect()
    }

    /// Its name on `gpu` (`"3g.40gb"`), as [`MigProfile::names`] lists it.
    pub fn name(self, gpu: GpuId) -> String {
        let i = SLICES
            .iter()
            .position(|&(c, m)| (c, m) == (self.compute, self.memory))
            .expect("a listed profile");
        Self::names(gpu).swap_remove(i)
    }

    /// Its share of the GPU's SMs (and tensor peaks).
    pub fn compute_fraction(self) -> f64 {
        f64::from(self.compute) / f64::from(Self::COMPUTE_SLICES)
    }

    /// Its share of the GPU's memory and memory bandwidth.
    pub fn memory_fraction(self) -> f64 {
        f64::from(self.memory) / f64::from(Self::MEMORY_SLICES)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_are_named_as_the_guide_names_them() {
        assert_eq!(
            MigProfile::names(GpuId::H100),
            [
                "1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"
            ]
        );
        assert_eq!(
            MigProfile::names(GpuId::A100_40gb),
            [
                "1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"
            ]
        );
        assert_eq!(
            MigProfile::names(GpuId::H200),
            [
                "1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"
            ]
        );
        let p = MigProfile::parse(GpuId::H100, "3g.40gb").unwrap();
        assert_eq!((p.compute, p.memory), (3, 4));
        assert_eq!(
            (p.compute_fraction(), p.memory_fraction()),
            (3.0 / 7.0, 0.5)
        );
        let e = MigProfile::parse(GpuId::H100, "3g.20gb").unwrap_err();
        assert!(e.contains("3g.40gb") && e.contains("h100"), "{e}");
        let e = MigProfile::parse(GpuId::L40s, "1g.10gb").unwrap_err();
        assert!(e.contains("no MIG"), "{e}");
    }
}
