//! Data the benches share (`#[path = "common/mod.rs"] mod common;`).

/// `records` records of `floats` float32 each, as `benches/compare/
/// make_data.py`'s float set, approximately: a sine of random frequency,
/// phase and amplitude plus a little noise (zstd level 3: about 1.1x), from
/// a fixed xorshift seed.
pub fn float_data(records: usize, floats: usize) -> Vec<f32> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut rand = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut out = Vec::with_capacity(records * floats);
    for _ in 0..records {
        let (freq, phase, amp) = (1.0 + 19.0 * rand(), std::f64::consts::TAU * rand(), 0.5 + 1.5 * rand());
        for i in 0..floats {
            let t = i as f64 / (floats - 1) as f64;
            let noise = 0.01 * (rand() + rand() + rand() - 1.5) * 2.0;
            out.push((amp * (std::f64::consts::TAU * freq * t + phase).sin() + noise) as f32);
        }
    }
    out
}
