//! The mixture's sampler: the allocation's counts (sum, monotone, the
//! window bound over every window), the schedule (a change of weights
//! leaves the prefix alone), the sources' streams, sharding and purity,
//! bad input.

use loaderx::sampler::{Allocation, MixedSampler, Mode, Sampler, SamplerError, Schedule};

/// Weight sets of 2 to 7 sources, skewed ones included.
fn weight_sets() -> Vec<Vec<f64>> {
    vec![
        vec![3.0, 1.0],
        vec![1.0, 1.0],
        vec![0.7, 0.3],
        vec![1.0, 1000.0],
        vec![5.0, 3.0, 2.0],
        vec![1.0, 1.0, 1.0],
        vec![1.0, 2.0, 100.0],
        vec![1.0, 10.0, 100.0, 1000.0],
        vec![1e-3, 1.0, 1.0, 2.0],
        vec![1.0, 2.0, 4.0, 8.0],
        vec![0.37, std::f64::consts::PI, 2.0, 0.001, 9.5],
        vec![1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
    ]
}

fn counts(a: &Allocation, n: u64) -> Vec<u64> {
    let mut out = vec![0; a.sources()];
    a.counts(n, &mut out).unwrap();
    out
}

#[test]
fn counts_sum_to_n_and_grow_by_one_source_a_sample() {
    for weights in weight_sets() {
        let a = Allocation::new(&weights).unwrap();
        for start in [0u64, 1 << 20, 1 << 40, u64::MAX - 5000] {
            let mut previous = counts(&a, start);
            assert_eq!(previous.iter().sum::<u64>(), start, "{weights:?} at {start}");
            for n in start + 1..start + 5000 {
                let now = counts(&a, n);
                let grew: Vec<usize> = (0..now.len()).filter(|&i| now[i] != previous[i]).collect();
                assert_eq!(grew.len(), 1, "{weights:?}: one source takes sample {}", n - 1);
                assert_eq!(now[grew[0]], previous[grew[0]] + 1, "{weights:?} at {n}");
                previous = now;
            }
        }
    }
}

/// The largest error of any window of steps `a..b` (`0 <= a < b <= steps`),
/// per source, against `(b - a) * batch * w_i / W`.
fn worst_window_errors(a: &Allocation, batch: u64, steps: u64) -> Vec<f64> {
    let weights = a.weights();
    let total: u64 = weights.iter().sum();
    let prefix: Vec<Vec<u64>> = (0..=steps).map(|k| counts(a, k * batch)).collect();
    let mut worst = vec![0.0f64; weights.len()];
    for from in 0..steps {
        for to in from + 1..=steps {
            for (i, w) in worst.iter_mut().enumerate() {
                let got = (prefix[to as usize][i] - prefix[from as usize][i]) as f64;
                let exact = ((to - from) * batch) as f64 * weights[i] as f64 / total as f64;
                *w = w.max((got - exact).abs());
            }
        }
    }
    worst
}

#[test]
fn every_window_of_steps_is_within_the_bound() {
    for weights in weight_sets() {
        let a = Allocation::new(&weights).unwrap();
        for batch in [1u64, 7, 64, 256] {
            let worst = worst_window_errors(&a, batch, 300);
            for (i, &err) in worst.iter().enumerate() {
                let bound = a.bound(i).unwrap();
                assert!(err < bound, "{weights:?} batch {batch} source {i}: error {err} >= bound {bound}");
                assert!(bound < 3.36, "{weights:?} source {i}: bound {bound}");
            }
        }
    }
}

#[test]
fn two_sources_are_within_one_and_three_or_four_within_two() {
    for weights in weight_sets() {
        let a = Allocation::new(&weights).unwrap();
        let limit = match weights.len() {
            2 => 1.0,
            3 | 4 => 2.0,
            _ => continue,
        };
        for i in 0..weights.len() {
            assert!(a.bound(i).unwrap() <= limit, "{weights:?} source {i}");
        }
        for batch in [1, 3, 128] {
            for err in worst_window_errors(&a, batch, 400) {
                assert!(err < limit, "{weights:?} batch {batch}: {err}");
            }
        }
    }
}

#[test]
fn integer_weights_give_exact_counts_at_whole_periods() {
    let a = Allocation::new(&[5.0, 3.0, 2.0]).unwrap();
    for period in [1u64, 7, 1 << 33] {
        assert_eq!(counts(&a, 10 * period), [5 * period, 3 * period, 2 * period]);
    }
}

#[test]
fn a_change_of_weights_leaves_the_samples_before_it_alone() {
    let (batch, k) = (64usize, 40u64);
    let one = Schedule::new(batch, &[(0, vec![3.0, 1.0, 1.0])]).unwrap();
    let two = Schedule::new(batch, &[(0, vec![3.0, 1.0, 1.0]), (k, vec![1.0, 1.0, 6.0])]).unwrap();
    let at = |s: &Schedule, n: u64| {
        let mut out = vec![0; 3];
        s.counts(n, &mut out).unwrap();
        out
    };
    for n in 0..=k * batch as u64 {
        assert_eq!(at(&one, n), at(&two, n), "sample {n}");
    }
    // After k: the new weights, counted from the counts at k.
    let base = at(&two, k * batch as u64);
    let new = Allocation::new(&[1.0, 1.0, 6.0]).unwrap();
    for n in 0..5000u64 {
        let expect: Vec<u64> = counts(&new, n).iter().zip(&base).map(|(c, b)| c + b).collect();
        assert_eq!(at(&two, k * batch as u64 + n), expect);
    }
}

#[test]
fn the_stream_of_a_sampler_is_its_batches_one_after_another() {
    for mode in [Mode::Sequential, Mode::Iid, Mode::Cyclic] {
        for (len, batch) in [(10u64, 4usize), (1000, 1), (1000, 300), (5, 8), (1 << 33, 7)] {
            let s = Sampler::new(len, batch, mode, 11).unwrap();
            let flat: Vec<u64> = (0..40).flat_map(|step| s.batch(step)).collect();
            let b = s.batch_len();
            for (start, n) in [(0usize, flat.len()), (3, 17), (b * 2 + 1, b * 5), (flat.len() - 1, 1)] {
                let mut out = vec![0; n];
                s.fill_stream(start as u64, &mut out);
                assert_eq!(out, flat[start..start + n], "{mode:?} len {len} batch {batch} from {start}");
            }
        }
    }
}

fn global_draws(s: &MixedSampler, step: u64) -> Vec<(u32, u64)> {
    let d = s.draw(step).unwrap();
    d.sources.iter().copied().zip(d.indices.iter().copied()).collect()
}

#[test]
fn hosts_split_the_global_batch_and_resume_elastically() {
    let modes = [Mode::Cyclic, Mode::Iid, Mode::Sequential];
    let global = MixedSampler::new(&[1000, 37, 5000], &modes, 9, 64, &[(0, vec![5.0, 1.0, 2.0])]).unwrap();
    for hosts in [2usize, 4, 8] {
        let shards: Vec<MixedSampler> = (0..hosts).map(|h| global.shard(h, hosts).unwrap()).collect();
        for step in [0u64, 1, 2, 99, 1 << 30] {
            let whole = global.draw(step).unwrap();
            let parts: Vec<_> = shards.iter().map(|s| s.draw(step).unwrap()).collect();
            for source in 0..3u32 {
                // Source after source on every host; a source's samples are
                // its stream in order, so the hosts' runs of a source concatenate
                // (in host order) to the global batch's run.
                let of = |d: &loaderx::sampler::Draw| -> Vec<u64> {
                    d.sources.iter().zip(&d.indices).filter(|(s, _)| **s == source).map(|(_, i)| *i).collect()
                };
                let joined: Vec<u64> = parts.iter().flat_map(of).collect();
                assert_eq!(joined, of(&whole), "{hosts} hosts, step {step}, source {source}");
            }
            assert!(parts.iter().all(|p| p.indices.len() == 64 / hosts));
        }
    }
}

#[test]
fn draws_are_pure_functions_of_seed_step_and_weights() {
    let modes = [Mode::Iid, Mode::Cyclic];
    let make = |seed| MixedSampler::new(&[100, 200], &modes, seed, 32, &[(0, vec![1.0, 3.0])]).unwrap();
    let (a, b, c) = (make(5), make(5), make(6));
    for step in [0u64, 3, 1 << 40] {
        assert_eq!(global_draws(&a, step), global_draws(&b, step));
        let (da, dc) = (a.draw(step).unwrap(), c.draw(step).unwrap());
        assert_eq!(da.sources, dc.sources, "which source is a function of step and weights");
        assert_ne!(da.indices, dc.indices, "which record depends on the seed");
    }
}

#[test]
fn a_cyclic_source_covers_its_records_once_a_cycle() {
    let modes = [Mode::Cyclic, Mode::Cyclic];
    let lens = [97u64, 1000];
    let s = MixedSampler::new(&lens, &modes, 3, 48, &[(0, vec![1.0, 2.0])]).unwrap();
    let mut seen: Vec<Vec<u64>> = vec![Vec::new(), Vec::new()];
    for step in 0..200 {
        let d = s.draw(step).unwrap();
        for (&src, &index) in d.sources.iter().zip(&d.indices) {
            seen[src as usize].push(index);
        }
    }
    for (source, indices) in seen.iter().enumerate() {
        let len = lens[source] as usize;
        assert!(indices.len() >= 3 * len, "source {source} saw {} samples", indices.len());
        for cycle in indices.chunks_exact(len) {
            let mut sorted = cycle.to_vec();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..len as u64).collect::<Vec<_>>(), "source {source}");
        }
    }
}

#[test]
fn bad_weights_and_schedules_are_refused() {
    let bad = |weights: Vec<f64>| Allocation::new(&weights).unwrap_err();
    assert_eq!(bad(vec![]), SamplerError::NoWeights);
    for w in [0.0, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        match bad(vec![1.0, w]) {
            SamplerError::BadWeight { segment: 0, source: 1, weight } => {
                assert!(weight.is_nan() && w.is_nan() || weight == w)
            }
            e => panic!("{w}: {e:?}"),
        }
    }
    assert!(matches!(bad(vec![1.0, 1e-20]), SamplerError::BadWeight { source: 1, .. }));
    let seg = |s: &[(u64, Vec<f64>)]| Schedule::new(8, s).unwrap_err();
    assert_eq!(seg(&[]), SamplerError::NoWeights);
    assert_eq!(seg(&[(1, vec![1.0])]), SamplerError::ScheduleOrder { segment: 0, start: 1, after: None });
    assert_eq!(
        seg(&[(0, vec![1.0]), (5, vec![1.0]), (5, vec![2.0])]),
        SamplerError::ScheduleOrder { segment: 2, start: 5, after: Some(5) }
    );
    assert_eq!(
        seg(&[(0, vec![1.0, 2.0]), (5, vec![1.0])]),
        SamplerError::WeightCount { segment: 1, expected: 2, got: 1 }
    );
    assert!(matches!(seg(&[(0, vec![1.0]), (3, vec![f64::NAN])]), SamplerError::BadWeight { segment: 1, .. }));
    assert_eq!(seg(&[(0, vec![1.0]), (u64::MAX, vec![1.0])]), SamplerError::PositionOverflow { step: u64::MAX });
    assert_eq!(Schedule::new(0, &[(0, vec![1.0])]).unwrap_err(), SamplerError::ZeroBatch);
    let modes = [Mode::Iid; 2];
    assert_eq!(
        MixedSampler::new(&[5, 5], &modes, 0, 8, &[(0, vec![1.0])]).unwrap_err(),
        SamplerError::WeightCount { segment: 0, expected: 2, got: 1 }
    );
    assert_eq!(
        MixedSampler::new(&[5, 0], &modes, 0, 8, &[(0, vec![1.0, 1.0])]).unwrap_err(),
        SamplerError::EmptyIndexSpace
    );
    let s = MixedSampler::new(&[5, 5], &modes, 0, 8, &[(0, vec![1.0, 1.0])]).unwrap();
    assert_eq!(s.shard(0, 3).unwrap_err(), SamplerError::ShardsDoNotDivideBatch { batch_len: 8, count: 3 });
    assert_eq!(s.shard(2, 2).unwrap_err(), SamplerError::ShardIndexOutOfRange { index: 2, count: 2 });
    assert_eq!(s.shard(0, 0).unwrap_err(), SamplerError::ZeroShards);
    assert_eq!(s.draw(u64::MAX).unwrap_err(), SamplerError::PositionOverflow { step: u64::MAX });
}
