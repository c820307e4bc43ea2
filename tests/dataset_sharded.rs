//! Sharded datasets: writes that roll over into new shards (at
//! `shard_records`, small here so that the tests are fast), reads and
//! appends against an in-memory oracle, gathers across shard boundaries,
//! shards opened from many threads at once, and the errors of bad or
//! mismatched shard tables and shards.

use std::path::Path;

use loaderx::dataset::{
    DType, Dataset, DatasetError, RaggedDataset, SHARDS_FILE, ShardTable, WriteOptions, shard_dir, write_dataset,
    write_dataset_iter, write_ragged,
};
use loaderx::{Codec, Options, Zrecord};

const CODECS: [Codec; 3] = [Codec::Raw, Codec::Zstd, Codec::ZstdDict];

/// `n` records of `per` u16, record `i` starting at `i` (so every record
/// tells its index), mildly compressible.
fn records(from: usize, n: usize, per: usize) -> Vec<u16> {
    (from..from + n).flat_map(|i| (0..per).map(move |j| (i * 7 + j / 3) as u16)).collect()
}

fn sharded(codec: Codec, shard_records: u64) -> WriteOptions {
    WriteOptions { shard_records: Some(shard_records), chunk_bytes: 256, ..WriteOptions::codec(codec) }
}

/// Every record of `ds`, one gather, against the oracle.
fn assert_fixed(ds: &Dataset, oracle: &[u16], per: usize) {
    assert_eq!(ds.len() as usize * per, oracle.len(), "length");
    let all: Vec<u64> = (0..ds.len()).collect();
    let mut got = vec![0u16; oracle.len()];
    ds.gather_into(&all, &mut got).unwrap();
    assert!(got == oracle, "contents differ");
}

/// Indices that cross every shard boundary, in a scrambled order.
fn scrambled(len: u64) -> Vec<u64> {
    (0..len).map(|i| (i * 7919 + 13) % len).collect()
}

#[test]
fn writes_shards_and_reads_them_back() {
    let dir = tempfile::tempdir().unwrap();
    let (n, per) = (300usize, 12usize);
    let data = records(0, n, per);
    for codec in CODECS {
        let path = dir.path().join(codec.name());
        assert_eq!(write_dataset(&path, &data, &[per], &sharded(codec, 70)).unwrap(), n as u64);
        let ds = Dataset::open(&path).unwrap();
        assert!(ds.is_sharded());
        assert_eq!((ds.len(), ds.shards()), (300, 5), "{codec:?}");
        assert_eq!(ds.shard_extent(4), Some((280, 20)));
        assert_fixed(&ds, &data, per);
        let idx = scrambled(ds.len());
        let mut got = vec![0u16; idx.len() * per];
        ds.gather_into(&idx, &mut got).unwrap();
        for (k, &i) in idx.iter().enumerate() {
            assert_eq!(got[k * per..][..per], data[i as usize * per..][..per], "record {i} ({codec:?})");
        }
        // Each shard is a complete dataset by itself.
        // (The root is shard 0: opened as a dataset it is the whole one.)
        assert_eq!(Zrecord::open_read_only(&path).unwrap().len(), 70);
        for k in 1..5 {
            let alone = Dataset::open(shard_dir(&path, k)).unwrap();
            assert_eq!(alone.len(), if k < 4 { 70 } else { 20 });
            assert_eq!(alone.get(0).unwrap().as_bytes(), bytemuck::cast_slice::<u16, u8>(&data[k * 70 * per..][..per]));
            assert_eq!(alone.shard(0).unwrap().has_dict(), codec == Codec::ZstdDict);
        }
        let m = ShardTable::read(&loaderx::io::real::RealFs, &path).unwrap().unwrap();
        assert_eq!(m.sealed, [70, 70, 70, 70]);
    }
}

#[test]
fn a_dataset_that_fits_stays_one_store() {
    let dir = tempfile::tempdir().unwrap();
    let data = records(0, 50, 4);
    write_dataset(dir.path(), &data, &[4], &sharded(Codec::Zstd, 50)).unwrap();
    assert!(!dir.path().join(SHARDS_FILE).exists());
    let ds = Dataset::open(dir.path()).unwrap();
    assert!(!ds.is_sharded());
    assert_eq!(ds.shards(), 1);
    assert_fixed(&ds, &data, 4);
    // The next record starts a shard; the root keeps its 50.
    write_dataset(dir.path(), &records(50, 1, 4), &[4], &sharded(Codec::Zstd, 50)).unwrap();
    let ds = Dataset::open(dir.path()).unwrap();
    assert_eq!((ds.is_sharded(), ds.shards(), ds.len()), (true, 2, 51));
    assert_fixed(&ds, &records(0, 51, 4), 4);
}

#[test]
fn appends_against_the_oracle() {
    let dir = tempfile::tempdir().unwrap();
    let per = 5;
    let mut oracle: Vec<u16> = Vec::new();
    let mut rng = 0x1234_5678u64;
    for call in 0..25 {
        rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let n = (rng >> 33) as usize % 23;
        let batch = records(oracle.len() / per, n, per);
        let shard_records = [9, 9, 13][call % 3];
        let written = if call % 2 == 0 {
            write_dataset(dir.path(), &batch, &[per], &sharded(Codec::Zstd, shard_records)).unwrap()
        } else {
            let rows: Vec<&[u16]> = batch.chunks(per).collect();
            write_dataset_iter(dir.path(), &[per], rows, &sharded(Codec::Zstd, shard_records)).unwrap()
        };
        assert_eq!(written as usize, n);
        oracle.extend_from_slice(&batch);
        let ds = Dataset::open(dir.path()).unwrap();
        assert_fixed(&ds, &oracle, per);
        for k in 0..ds.shards() {
            let (_, count) = ds.shard_extent(k).unwrap();
            assert!(count <= 13 && (count > 0 || ds.is_empty()), "shard {k} holds {count}");
        }
    }
}

#[test]
fn ragged_shards_gather_and_pad_across_boundaries() {
    let dir = tempfile::tempdir().unwrap();
    let seqs: Vec<Vec<i32>> = (0..200).map(|i| (0..(i * 37 % 11)).map(|j| i * 100 + j).collect()).collect();
    for codec in CODECS {
        let path = dir.path().join(codec.name());
        write_ragged(&path, &[], &seqs[..120], &sharded(codec, 45)).unwrap();
        write_ragged(&path, &[], &seqs[120..], &sharded(codec, 45)).unwrap();
        let rds = RaggedDataset::open(&path).unwrap();
        assert_eq!((rds.len(), rds.shards()), (200, 5));
        let idx = scrambled(200);
        let batch = rds.gather(&idx).unwrap();
        for (k, &i) in idx.iter().enumerate() {
            let rows = batch.rows(k).unwrap();
            assert_eq!(&batch.values.as_slice::<i32>().unwrap()[rows], &seqs[i as usize][..], "{i}");
        }
        let padded = rds.gather_padded(&idx, Some(12), -1i32).unwrap();
        assert_eq!(padded, batch.pad(Some(12), -1i32).unwrap());
        assert_eq!(rds.row_counts(&[44, 45, 199]).unwrap(), [44 * 37 % 11, 45 * 37 % 11, 199 * 37 % 11]);
    }
}

#[test]
fn shards_open_once_from_many_threads() {
    let dir = tempfile::tempdir().unwrap();
    let data = records(0, 400, 3);
    write_dataset(dir.path(), &data, &[3], &sharded(Codec::Raw, 10)).unwrap();
    let ds = Dataset::open(dir.path()).unwrap();
    assert_eq!(ds.shards(), 40);
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let ds = &ds;
            let data = &data;
            s.spawn(move || {
                for i in (0..400u64).map(|i| (i * 13 + t * 51) % 400) {
                    let mut got = [0u16; 3];
                    ds.get_into(i, &mut got).unwrap();
                    assert_eq!(got[..], data[i as usize * 3..][..3]);
                }
            });
        }
    });
}

#[test]
fn out_of_range_names_the_dataset_length() {
    let dir = tempfile::tempdir().unwrap();
    write_dataset(dir.path(), &records(0, 30, 2), &[2], &sharded(Codec::Raw, 10)).unwrap();
    let ds = Dataset::open(dir.path()).unwrap();
    for idx in [&[30u64][..], &[0, 30], &[5, 25, u64::MAX]] {
        let mut dst = vec![0u16; idx.len() * 2];
        match ds.gather_into(idx, &mut dst) {
            Err(DatasetError::IndexOutOfRange { len: 30, .. }) => {}
            other => panic!("{idx:?}: {other:?}"),
        }
    }
}

#[test]
fn refresh_sees_new_shards() {
    let dir = tempfile::tempdir().unwrap();
    write_dataset(dir.path(), &records(0, 15, 2), &[2], &sharded(Codec::Raw, 10)).unwrap();
    let ds = Dataset::open(dir.path()).unwrap();
    assert_eq!(ds.get(12).unwrap().as_bytes(), bytemuck::cast_slice::<u16, u8>(&records(12, 1, 2)));
    write_dataset(dir.path(), &records(15, 20, 2), &[2], &sharded(Codec::Raw, 10)).unwrap();
    assert_eq!(ds.len(), 15);
    assert_eq!(ds.refresh().unwrap(), 35);
    assert_eq!(ds.shards(), 4);
    assert_fixed(&ds, &records(0, 35, 2), 2);
}

#[test]
fn appending_another_dtype_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    write_dataset(dir.path(), &records(0, 15, 2), &[2], &sharded(Codec::Raw, 10)).unwrap();
    let e = write_dataset(dir.path(), &[1f32, 2.0], &[2], &sharded(Codec::Raw, 10)).unwrap_err();
    assert!(matches!(e, DatasetError::Incompatible { .. }), "{e}");
    let e = write_dataset(dir.path(), &[1u16, 2, 3], &[3], &WriteOptions::default()).unwrap_err();
    assert!(matches!(e, DatasetError::Incompatible { .. }), "{e}");
    assert_eq!(Dataset::open(dir.path()).unwrap().len(), 15);
}

/// A dataset of 3 shards of 10, 10 and 5 records.
fn three_shards(path: &Path) {
    write_dataset(path, &records(0, 25, 2), &[2], &sharded(Codec::Zstd, 10)).unwrap();
}

fn replace_shard_table(path: &Path, from: &str, to: &str) {
    let file = path.join(SHARDS_FILE);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains(from), "{text}");
    std::fs::write(&file, text.replacen(from, to, 1)).unwrap();
}

#[test]
fn bad_shard_tables_are_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    for (k, (from, to)) in [
        ("\"records\": 10", "\"records\": 16777217"),
        ("\"records\": 10", "\"records\": 99999999999999999999"),
        ("\"dir\": \"shard-000001\"", "\"dir\": \"../x\""),
        ("\"format\": \"loaderx-sharded\"", "\"format\": \"x\""),
        ("{", "["),
    ]
    .into_iter()
    .enumerate()
    {
        let path = dir.path().join(k.to_string());
        three_shards(&path);
        replace_shard_table(&path, from, to);
        let e = Dataset::open(&path).unwrap_err();
        assert!(matches!(e, DatasetError::ShardTable { .. }), "{from} -> {to}: {e}");
        assert!(e.to_string().contains("shards.json"), "{e}");
        // A writer refuses it too.
        assert!(write_dataset(&path, &records(0, 1, 2), &[2], &sharded(Codec::Zstd, 10)).is_err());
    }
}

#[test]
fn mismatched_shards_are_errors_at_first_use() {
    let dir = tempfile::tempdir().unwrap();
    // A missing shard: the open (which opens only the last) succeeds, its first read fails.
    let path = dir.path().join("missing");
    three_shards(&path);
    std::fs::rename(shard_dir(&path, 1), path.join("elsewhere")).unwrap();
    let ds = Dataset::open(&path).unwrap();
    assert_eq!(ds.get(3).unwrap().as_bytes(), bytemuck::cast_slice::<u16, u8>(&records(3, 1, 2)));
    assert!(matches!(ds.get(12), Err(DatasetError::ShardMissing { shard: 1, .. })), "{:?}", ds.get(12));
    // A missing last shard: the open fails.
    std::fs::rename(path.join("elsewhere"), shard_dir(&path, 1)).unwrap();
    std::fs::rename(shard_dir(&path, 2), path.join("elsewhere")).unwrap();
    assert!(matches!(Dataset::open(&path), Err(DatasetError::ShardMissing { shard: 2, .. })));

    // A shard of another schema.
    let path = dir.path().join("schema");
    three_shards(&path);
    let schema = shard_dir(&path, 1).join("schema.json");
    std::fs::write(&schema, std::fs::read_to_string(&schema).unwrap().replace("<u2", "<i2")).unwrap();
    let ds = Dataset::open(&path).unwrap();
    let e = ds.get(11).unwrap_err();
    assert!(matches!(e, DatasetError::ShardSchema { shard: 1, .. }), "{e}");
    assert!(e.to_string().contains("shard-000001"), "{e}");

    // A shard shorter than the shard table says (a record deleted behind its back).
    let path = dir.path().join("short");
    three_shards(&path);
    Zrecord::open_with(shard_dir(&path, 1), Options::default()).unwrap().delete(&[4]).unwrap();
    let ds = Dataset::open(&path).unwrap();
    assert_eq!(ds.len(), 25);
    let e = ds.get(10).unwrap_err();
    assert!(matches!(e, DatasetError::ShardLength { shard: 1, holds: 9, shard_table: 10, .. }), "{e}");
    assert!(ds.get(20).is_ok());
}

#[test]
fn a_leftover_shard_directory_is_reused_only_empty() {
    let dir = tempfile::tempdir().unwrap();
    // A rollover that crashed before the shard table leaves an empty store.
    three_shards(dir.path());
    Zrecord::open(shard_dir(dir.path(), 3)).unwrap();
    write_dataset(dir.path(), &records(25, 10, 2), &[2], &sharded(Codec::Zstd, 10)).unwrap();
    assert_fixed(&Dataset::open(dir.path()).unwrap(), &records(0, 35, 2), 2);
    // One holding records is not this writer's.
    let store = Zrecord::open(shard_dir(dir.path(), 4)).unwrap();
    store.append(&[0u8; 4], 1, 4, Codec::Raw).unwrap();
    drop(store);
    let e = write_dataset(dir.path(), &records(35, 6, 2), &[2], &sharded(Codec::Zstd, 10)).unwrap_err();
    assert!(matches!(e, DatasetError::ShardNotEmpty { holds: 1, .. }), "{e}");
    // The 5 records that fitted the last shard are in; nothing else.
    assert_fixed(&Dataset::open(dir.path()).unwrap(), &records(0, 40, 2), 2);
}

#[test]
fn the_shard_table_is_the_documented_text() {
    let dir = tempfile::tempdir().unwrap();
    write_dataset(dir.path(), &records(0, 25, 2), &[2], &sharded(Codec::Raw, 10)).unwrap();
    let text = std::fs::read_to_string(dir.path().join(SHARDS_FILE)).unwrap();
    let want = r#"{
  "format": "loaderx-sharded",
  "version": 1,
  "schema": {
    "format": "loaderx-zrecord",
    "version": 1,
    "dtype": "<u2",
    "shape": [
      2
    ],
    "codec": "raw"
  },
  "shards": [
    {
      "dir": ".",
      "records": 10
    },
    {
      "dir": "shard-000001",
      "records": 10
    },
    {
      "dir": "shard-000002"
    }
  ]
}
"#;
    assert_eq!(text, want);
    assert_eq!(DType::parse("<u2").unwrap().itemsize(), 2);
}

#[test]
fn a_pending_delete_counts_as_either_and_a_writer_settles_it() {
    let dir = tempfile::tempdir().unwrap();
    three_shards(dir.path());
    let m = ShardTable::read(&loaderx::io::real::RealFs, dir.path()).unwrap().unwrap();
    let marked = ShardTable { pending: Some(loaderx::dataset::Pending { shard: 1, records: 9 }), ..m.clone() };
    marked.write(&loaderx::io::real::RealFs, dir.path()).unwrap();
    // Not deleted yet: the recorded 10.
    assert_eq!(Dataset::open(dir.path()).unwrap().len(), 25);
    // Deleted (the crash fell before the shard table's last step): the 9.
    Zrecord::open(shard_dir(dir.path(), 1)).unwrap().delete(&[9]).unwrap();
    let ds = Dataset::open(dir.path()).unwrap();
    assert_eq!(ds.len(), 24);
    assert_fixed(&ds, &[records(0, 19, 2), records(20, 5, 2)].concat(), 2);
    drop(ds);
    // A writer's open records the count and drops the mark.
    write_dataset(dir.path(), &records(25, 1, 2), &[2], &sharded(Codec::Zstd, 10)).unwrap();
    let settled = ShardTable::read(&loaderx::io::real::RealFs, dir.path()).unwrap().unwrap();
    assert_eq!((settled.sealed, settled.pending), (vec![10, 9], None));
    // Neither count: an error naming the shard.
    let m = ShardTable::read(&loaderx::io::real::RealFs, dir.path()).unwrap().unwrap();
    ShardTable { pending: Some(loaderx::dataset::Pending { shard: 0, records: 3 }), ..m }
        .write(&loaderx::io::real::RealFs, dir.path())
        .unwrap();
    Zrecord::open(dir.path()).unwrap().delete(&[0]).unwrap();
    assert!(matches!(Dataset::open(dir.path()), Err(DatasetError::ShardLength { shard: 0, holds: 9, .. })));
}

#[test]
fn deletes_by_global_index_shard_by_shard() {
    use loaderx::dataset::ShardedMutation;
    let dir = tempfile::tempdir().unwrap();
    three_shards(dir.path());
    let mut m = ShardedMutation::open(dir.path(), false).unwrap();
    assert!(m.delete(&[3, 25]).is_err());
    assert_eq!(m.counts(), [10, 10, 5]);
    let done = m.delete(&[3, 3, 19, 24, 0]).unwrap();
    let parts: Vec<(usize, u64, u64)> = done.iter().map(|d| (d.shard, d.before, d.after)).collect();
    assert_eq!(parts, [(0, 10, 8), (1, 10, 9), (2, 5, 4)]);
    drop(m);
    // Swap-with-last within each shard (higher indices first).
    let mut shards: Vec<Vec<u16>> = (0..3).map(|k| records(k * 10, if k < 2 { 10 } else { 5 }, 2)).collect();
    for (k, local) in [(0usize, 3usize), (0, 0), (1, 9), (2, 4)] {
        let n = shards[k].len() / 2;
        let last = shards[k][(n - 1) * 2..].to_vec();
        shards[k].truncate((n - 1) * 2);
        if local < n - 1 {
            shards[k][local * 2..local * 2 + 2].copy_from_slice(&last);
        }
    }
    let ds = Dataset::open(dir.path()).unwrap();
    assert_fixed(&ds, &shards.concat(), 2);
    let m = ShardTable::read(&loaderx::io::real::RealFs, dir.path()).unwrap().unwrap();
    assert_eq!((m.sealed, m.pending), (vec![8, 9], None));
}

#[test]
fn zero_byte_records_shard_too() {
    let dir = tempfile::tempdir().unwrap();
    let empty: Vec<Vec<u16>> = vec![Vec::new(); 25];
    assert_eq!(write_dataset_iter(dir.path(), &[0], &empty, &sharded(Codec::Raw, 10)).unwrap(), 25);
    let ds = Dataset::open(dir.path()).unwrap();
    assert_eq!((ds.len(), ds.shards()), (25, 3));
    assert_eq!(ds.gather(&[0, 24, 11]).unwrap().shape(), &[3, 0]);
}

/// A store's capacity, not a chosen size: 2^24 + 3 records roll over into a
/// second shard by themselves, and the records past 2^24 read back exactly.
#[test]
fn a_full_store_rolls_over_by_itself() {
    let dir = tempfile::tempdir().unwrap();
    let n = (1usize << 24) + 3;
    let data: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
    write_dataset(dir.path(), &data, &[], &WriteOptions::codec(Codec::Raw)).unwrap();
    let ds = Dataset::open(dir.path()).unwrap();
    assert_eq!((ds.len(), ds.shards(), ds.shard_extent(1)), (n as u64, 2, Some((1 << 24, 3))));
    let idx: Vec<u64> = ((1 << 24) - 4..n as u64).chain([0, 1 << 23]).collect();
    let mut got = vec![0u8; idx.len()];
    ds.gather_into(&idx, &mut got).unwrap();
    assert_eq!(got, idx.iter().map(|&i| data[i as usize]).collect::<Vec<u8>>());
    assert_eq!(Zrecord::open_read_only(dir.path()).unwrap().len(), 1 << 24);
}
