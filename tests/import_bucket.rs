//! Imports from a bucket (`BucketFs` over `object_store`'s in-memory
//! backend): Parquet files by a prefix and by a glob, WebDataset tars and
//! JSON Lines, each checked value by value against the same import from
//! local files; a rerun is done; the fingerprint follows an object's
//! entity tag; a tar's members cost far fewer GETs than members; an object
//! replaced during an import is an error, a missing one names its URL.
//! The same against SeaweedFS is in `tests/remote/s3.rs`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{Int64Array, LargeStringArray, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use loaderx::import::{
    Format, ImportError, ImportOptions, ImportSummary, SourceOptions, import, open_source, open_source_in,
};
use loaderx::io::Vfs;
use loaderx::io::remote::{BucketFs, Location, RemoteOptions};
use loaderx::table::{Table, TableColumn};
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

/// The bucket's objects, and a runtime to put them with.
struct Bucket {
    store: Arc<InMemory>,
    rt: tokio::runtime::Runtime,
}

impl Bucket {
    fn new() -> Bucket {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        Bucket { store: Arc::new(InMemory::new()), rt }
    }

    fn put(&self, key: &str, bytes: Vec<u8>) {
        let key = ObjectPath::parse(key).unwrap();
        self.rt.block_on(self.store.put(&key, PutPayload::from(bytes))).unwrap();
    }

    /// A filesystem over the bucket, paths `s3://bucket/KEY`.
    fn fs(&self) -> Arc<BucketFs> {
        let store: Arc<dyn ObjectStore> = self.store.clone();
        let location = Location::with_store(store, "s3://bucket", "", RemoteOptions::default()).unwrap();
        Arc::new(BucketFs::new(location))
    }
}

fn parquet(start: i64, n: i64) -> Vec<u8> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("text", DataType::LargeUtf8, false),
    ]));
    let ids = Int64Array::from_iter_values(start..start + n);
    let texts = LargeStringArray::from_iter_values((start..start + n).map(|i| format!("row {i}")));
    let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(ids), Arc::new(texts)]).unwrap();
    let mut out = Vec::new();
    let mut writer = parquet::arrow::ArrowWriter::try_new(&mut out, schema, None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    out
}

/// A tar of `n` samples from `start`: `KEY.bin` (300 bytes) and `KEY.cls`.
fn tar(start: usize, n: usize) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for i in start..start + n {
        let members = [
            (format!("s{i:05}.bin"), vec![(i % 251) as u8; 300]),
            (format!("s{i:05}.cls"), i.to_string().into_bytes()),
        ];
        for (name, data) in members {
            let mut header = tar::Header::new_gnu();
            header.set_size(data.len() as u64);
            header.set_mode(0o644);
            header.set_entry_type(tar::EntryType::Regular);
            builder.append_data(&mut header, name, &data[..]).unwrap();
        }
    }
    builder.into_inner().unwrap()
}

fn run(fs: Arc<dyn Vfs>, inputs: &[&str], dest: &Path) -> Result<ImportSummary, ImportError> {
    let inputs: Vec<PathBuf> = inputs.iter().map(PathBuf::from).collect();
    let mut opened = open_source_in(fs, None, &inputs, &SourceOptions::default())?;
    import(&mut *opened.source, dest, &ImportOptions::default(), &mut |_| Ok(()))
}

/// Every row of column `name` of the table at `dest`, each its bytes.
fn column(dest: &Path, name: &str) -> Vec<Vec<u8>> {
    let table = Table::open(dest).unwrap();
    let rows: Vec<u64> = (0..table.rows()).collect();
    match table.column(name) {
        Some(TableColumn::Fixed(d)) => {
            let mut out = vec![0u8; rows.len() * d.row_bytes()];
            d.gather_bytes(&rows, &mut out).unwrap();
            out.chunks(d.row_bytes()).map(<[u8]>::to_vec).collect()
        }
        _ => table.values(name, &rows).unwrap(),
    }
}

#[test]
fn parquet_by_prefix_and_by_glob_lands_as_from_local_files() {
    let bucket = Bucket::new();
    let local = tempfile::tempdir().unwrap();
    for (k, name) in ["a.parquet", "b.parquet"].iter().enumerate() {
        let bytes = parquet(k as i64 * 1000, 700);
        std::fs::write(local.path().join(name), &bytes).unwrap();
        bucket.put(&format!("sets/tokens/{name}"), bytes);
    }
    bucket.put("sets/tokens/README.md", b"not an input".to_vec());
    let fs = bucket.fs();
    assert_eq!(Format::detect_in(&*fs, Path::new("s3://bucket/sets/tokens")), Some(Format::Parquet));
    assert_eq!(fs.list_dir(Path::new("s3://bucket/sets")).unwrap(), ["tokens"]);
    let dest = local.path().join("from-bucket");
    let done = run(fs.clone(), &["s3://bucket/sets/tokens"], &dest).unwrap();
    assert_eq!(done.rows, 1400);
    let mut source = open_source(None, &[local.path().to_path_buf()], &SourceOptions::default()).unwrap().source;
    let from_local = local.path().join("from-local");
    import(&mut *source, &from_local, &ImportOptions::default(), &mut |_| Ok(())).unwrap();
    for name in ["id", "text"] {
        assert_eq!(column(&dest, name), column(&from_local, name), "{name}");
    }
    assert_eq!(column(&dest, "text")[1399], b"row 1699");
    let again = run(bucket.fs(), &["s3://bucket/sets/tokens"], &dest).unwrap();
    assert!(again.already_done && again.rows == 0, "a rerun of the same objects is done: {again:?}");
    let glob = local.path().join("glob");
    assert_eq!(run(bucket.fs(), &["s3://bucket/sets/tokens/b*.parquet"], &glob).unwrap().rows, 700);
    assert_eq!(column(&glob, "id")[0], 1000i64.to_le_bytes());
}

#[test]
fn the_fingerprint_follows_the_objects_entity_tag() {
    let bucket = Bucket::new();
    bucket.put("d/a.parquet", parquet(0, 50));
    let inputs = [PathBuf::from("s3://bucket/d/a.parquet")];
    let open = || open_source_in(bucket.fs(), None, &inputs, &SourceOptions::default()).unwrap().source.fingerprint();
    let first = open();
    assert_eq!(open(), first, "the same object, the same fingerprint");
    bucket.put("d/a.parquet", parquet(1, 50));
    assert_ne!(open(), first, "an object put again has another entity tag");
}

#[test]
fn a_tars_members_take_few_requests_and_land_whole() {
    let bucket = Bucket::new();
    bucket.put("wds/shard-000.tar", tar(0, 400));
    bucket.put("wds/shard-001.tar", tar(400, 400));
    let fs = bucket.fs();
    let local = tempfile::tempdir().unwrap();
    let dest = local.path().join("t");
    let done = run(fs.clone(), &["s3://bucket/wds/shard-{000..001}.tar"], &dest).unwrap();
    assert_eq!(done.rows, 800);
    let bins = column(&dest, "bin");
    let classes = column(&dest, "cls");
    for i in [0usize, 399, 400, 799] {
        assert_eq!(bins[i], vec![(i % 251) as u8; 300]);
        assert_eq!(classes[i], (i as i64).to_le_bytes());
    }
    // 1,600 members and their headers; each shard (about 850 KB) is fetched
    // in a few 4 MiB read-ahead windows, not a request a member.
    let requests = fs.counters().requests;
    assert!(requests < 40, "{requests} GETs for 1,600 members");
}

#[test]
fn jsonl_lines_are_read_through_the_window() {
    let bucket = Bucket::new();
    let lines: String = (0..3000).map(|i| format!("{{\"id\": {i}, \"text\": \"line {i}\"}}\n")).collect();
    bucket.put("j/part-0.jsonl", lines.into_bytes());
    let local = tempfile::tempdir().unwrap();
    let dest = local.path().join("t");
    assert_eq!(run(bucket.fs(), &["s3://bucket/j/part-0.jsonl"], &dest).unwrap().rows, 3000);
    assert_eq!(column(&dest, "text")[2999], b"line 2999");
}

#[test]
fn a_replaced_object_fails_the_import_and_a_missing_one_names_its_url() {
    let bucket = Bucket::new();
    // More than one read-ahead window, so the import reads again after
    // the object is replaced.
    let lines = |base: u64| -> Vec<u8> {
        (base..base + 800_000).flat_map(|i| format!("{{\"id\": {i}}}\n").into_bytes()).collect()
    };
    assert!(lines(0).len() > 2 * loaderx::io::remote::BUCKET_READ_AHEAD);
    bucket.put("r/a.jsonl", lines(0));
    let local = tempfile::tempdir().unwrap();
    let inputs = [PathBuf::from("s3://bucket/r/a.jsonl")];
    let opts = SourceOptions { infer_rows: Some(1), ..Default::default() };
    let mut opened = open_source_in(bucket.fs(), None, &inputs, &opts).unwrap();
    bucket.put("r/a.jsonl", lines(1));
    let err = import(&mut *opened.source, &local.path().join("t"), &ImportOptions::default(), &mut |_| Ok(()));
    let message = err.unwrap_err().to_string();
    assert!(message.contains("s3://bucket/r/a.jsonl") && message.contains("the object changed"), "{message}");
    assert!(Table::open(local.path().join("t")).map_or(true, |t| t.rows() == 0), "nothing of the changed object");
    let missing = run(bucket.fs(), &["s3://bucket/r/none.parquet"], &local.path().join("u")).unwrap_err();
    assert!(missing.to_string().contains("s3://bucket/r/none.parquet"), "{missing}");
}
