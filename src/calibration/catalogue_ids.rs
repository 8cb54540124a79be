//! Catalogue ids as the validation files write them (`h100`, `llama-3.1-8b`, `fp8`): the same spelling as
//! scenarios and `fleetsim catalog`.

use crate::hardware::{GpuId, ModelId, Precision};

/// The GPU whose id is `s`.
pub fn gpu(s: &str) -> Option<GpuId> {
    GpuId::ALL.into_iter().find(|g| g.as_str() == s)
}

/// The model whose id is `s`.
pub fn model(s: &str) -> Option<ModelId> {
    ModelId::ALL.into_iter().find(|m| m.as_str() == s)
}

/// The precision whose id is `s`.
pub fn precision(s: &str) -> Option<Precision> {
    Precision::ALL.into_iter().find(|p| p.as_str() == s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_catalogue_id_reads_back() {
        for g in GpuId::ALL {
            assert_eq!(gpu(g.as_str()), Some(g));
        }
        for m in ModelId::ALL {
            assert_eq!(model(m.as_str()), Some(m));
        }
        for p in Precision::ALL {
            assert_eq!(precision(p.as_str()), Some(p));
        }
        assert_eq!(gpu("H100"), None);
    }
}
