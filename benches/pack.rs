//! Sequence packing (`loader::pack`): packing efficiency (the fraction of
//! non-padding slots) and throughput in tokens per second on one core, on
//! batches of 64 sequences of lengths uniform in 10..200 (int32 tokens),
//! `seq_len` 512. Medians of 5 runs of 2,000 batches, after 200 warm-up.
//!
//! ```text
//! cargo bench -p loaderx --bench pack
//! ```

use std::time::Instant;

use loaderx::dataset::{Ragged, Tensor};
use loaderx::loader::pack;

fn batch(x: &mut u64) -> Ragged {
    let mut values: Vec<i32> = Vec::new();
    let mut splits = vec![0u64];
    for _ in 0..64 {
        *x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let len = 10 + (*x >> 33) as usize % 191;
        values.extend((0..len).map(|j| j as i32 + 1));
        splits.push(values.len() as u64);
    }
    let n = values.len();
    Ragged { values: Tensor::from_slice(&values, &[n]).expect("a tensor"), row_splits: splits }
}

fn main() {
    let mut x = 7u64;
    let batches: Vec<Ragged> = (0..2000).map(|_| batch(&mut x)).collect();
    let tokens: usize = batches.iter().map(|b| b.values.len()).sum();
    for b in &batches[..200] {
        std::hint::black_box(pack(b, 512, false).expect("packed"));
    }
    let mut rates = Vec::new();
    let mut efficiency = 0.0;
    for _ in 0..5 {
        let (mut placed, mut slots) = (0usize, 0usize);
        let t0 = Instant::now();
        for b in &batches {
            let p = pack(b, 512, false).expect("packed");
            placed += p.placed;
            slots += p.slots();
            std::hint::black_box(&p);
        }
        rates.push(tokens as f64 / t0.elapsed().as_secs_f64());
        efficiency = placed as f64 / slots as f64;
    }
    rates.sort_by(f64::total_cmp);
    println!(
        "pack: 64 sequences of 10..200 int32 tokens into rows of 512: efficiency {efficiency:.4}, {:.1} M tokens/s (one core, median of 5)",
        rates[2] / 1e6
    );
}
