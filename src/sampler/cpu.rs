//! x86-64 only: the vector features of this CPU that the sampler's kernels are compiled
//! for, detected once per process.
//!
//! `is_x86_feature_detected!` is a load and a test per feature; the sampler
//! asks for three or four on every batch, so a batch of one index would pay
//! for them every time (and under a fuzzer's compare tracing each test is a
//! call). [`Cpu::features`] reads one cached word instead. The dispatch that
//! runs a `#[target_feature]` kernel relies on the fields being exactly what
//! detection said: they are only ever set here.

use std::sync::OnceLock;

/// Which of the sampler's kernels this CPU can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Cpu {
    /// AVX-512F, AVX-512 IFMA and POPCNT: the permutation's
    /// [`avx512`](super::feistel) kernel.
    pub(crate) avx512_ifma: bool,
    /// AVX-512F.
    pub(crate) avx512f: bool,
    /// AVX-512F and AVX-512DQ: the i.i.d. kernel's AVX-512 build.
    pub(crate) avx512dq: bool,
    /// AVX2.
    pub(crate) avx2: bool,
}

impl Cpu {
    /// The features of this CPU (detected on the first call).
    #[inline]
    pub(crate) fn features() -> Cpu {
        static FEATURES: OnceLock<Cpu> = OnceLock::new();
        *FEATURES.get_or_init(Cpu::detect)
    }

    fn detect() -> Cpu {
        use std::arch::is_x86_feature_detected as has;
        let avx512f = has!("avx512f");
        Cpu {
            avx512_ifma: avx512f && has!("avx512ifma") && has!("popcnt"),
            avx512f,
            avx512dq: avx512f && has!("avx512dq"),
            avx2: has!("avx2"),
        }
    }
}
