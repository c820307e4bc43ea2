//! The zstd_dict speed/ratio curve on one dataset: dictionary size, level
//! and search parameters against compression ratio and MiB/s, with the
//! store's frame settings (content checksum on, dictionary ID and content
//! size off). It answers whether a setting reaches the reference's ratio at
//! several times its speed (docs/benchmarks.md, "zstd_dict").
//!
//! ```text
//! cargo bench -p loaderx --bench dict_sweep -- DIR/image.npy [--records 2000]
//! ```
//!
//! `DIR` as `benches/compare/make_data.py` writes it. The dictionary is
//! trained on all the records taken, at 1/100 of their bytes
//! (`default_dict_size`) and larger.

use std::time::Instant;

use rayon::prelude::*;
use zstd::zstd_safe::{CParameter, Strategy};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn main() -> Res<()> {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let path = args.next().ok_or("usage: dict_sweep FILE.npy [--records N]")?;
    let mut records = 2000usize;
    while let Some(arg) = args.next() {
        if arg == "--records" {
            records = args.next().ok_or("--records N")?.parse()?;
        }
    }
    let header = loaderx::dataset::read_npy_header(&path)?;
    let bytes = std::fs::read(&path)?;
    let data = &bytes[header.data_offset as usize..];
    let row_bytes = header.row_bytes;
    let n = records.min(header.count as usize);
    let recs: Vec<&[u8]> = (0..n).map(|k| &data[k * row_bytes..(k + 1) * row_bytes]).collect();
    let sample: Vec<u8> = recs.concat();
    let sizes = vec![row_bytes; n];
    println!("{path}: {n} records of {row_bytes} B, {} threads", rayon::current_num_threads());
    let default = loaderx::default_dict_size(sample.len());
    let searches: Vec<(&str, i32, Vec<CParameter>)> = vec![
        ("level 3", 3, vec![]),
        ("level 9 (default)", 9, vec![]),
        ("level 12", 12, vec![]),
        ("level 9, btopt", 9, vec![CParameter::Strategy(Strategy::ZSTD_btopt)]),
        (
            "level 9, btopt, search 3, target 32",
            9,
            vec![CParameter::Strategy(Strategy::ZSTD_btopt), CParameter::SearchLog(3), CParameter::TargetLength(32)],
        ),
        ("level 16", 16, vec![]),
        ("level 19 (the reference's)", 19, vec![]),
    ];
    for dict_bytes in [default, 4 * default] {
        let dict = zstd::dict::from_continuous(&sample, &sizes, dict_bytes)?;
        for (name, level, params) in &searches {
            let started = Instant::now();
            let stored: usize = recs
                .par_iter()
                .map_init(
                    || {
                        let mut c = zstd::bulk::Compressor::with_dictionary(*level, &dict).expect("a compressor");
                        c.include_checksum(true).expect("checksum");
                        c.include_dictid(false).expect("dictid");
                        c.include_contentsize(false).expect("content size");
                        for p in params {
                            c.set_parameter(*p).expect("a parameter");
                        }
                        (c, vec![0u8; zstd::zstd_safe::compress_bound(row_bytes)])
                    },
                    |(c, buf), r| c.compress_to_buffer(r, &mut buf[..]).expect("compresses"),
                )
                .sum();
            let seconds = started.elapsed().as_secs_f64();
            println!(
                "dict {:>9} B  {:<38} ratio {:>8.5}  {:>6.0} MiB/s",
                dict.len(),
                name,
                (n * row_bytes) as f64 / stored as f64,
                (n * row_bytes) as f64 / seconds / (1 << 20) as f64
            );
        }
    }
    Ok(())
}
