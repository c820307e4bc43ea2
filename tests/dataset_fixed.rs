//! Fixed-shape datasets: typed and byte-level gathers against an in-memory
//! oracle, schema.json byte for byte and its strict parsing, appends,
//! conversion from .npy (written with npyz here) and from iterators.

use std::path::Path;

use loaderx::Codec;
use loaderx::dataset::{
    DType, Dataset, DatasetError, RaggedDataset, Schema, WriteOptions, write_dataset, write_dataset_bytes,
    write_dataset_iter, write_dataset_npy, write_ragged,
};
use npyz::WriterBuilder;

/// xorshift64*: deterministic test data.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// `n` records of `per` floats, smooth (compressible) with some noise.
fn floats(n: usize, per: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng(seed | 1);
    (0..n * per).map(|i| ((i % per) as f32 * 0.1 + (i / per) as f32).sin() + (rng.below(8) as f32) * 1e-3).collect()
}

const CODECS: [Codec; 3] = [Codec::Raw, Codec::Zstd, Codec::ZstdDict];

#[test]
fn typed_gathers_match_the_oracle() {
    let dir = tempfile::tempdir().unwrap();
    let (n, shape) = (300usize, [3usize, 5]);
    let per = 15;
    let data = floats(n, per, 7);
    for codec in CODECS {
        let path = dir.path().join(codec.name());
        assert_eq!(write_dataset(&path, &data, &shape, &WriteOptions::codec(codec)).unwrap(), n as u64);
        let ds = Dataset::open(&path).unwrap();
        assert_eq!(
            (ds.len(), ds.shape(), ds.dtype(), ds.row_bytes()),
            (n as u64, &shape[..], DType::parse("<f4").unwrap(), 60)
        );
        assert_eq!(ds.schema().codec, codec);
        assert_eq!(ds.shard(0).unwrap().has_dict(), codec == Codec::ZstdDict);
        let mut rng = Rng(11);
        for batch in [0usize, 1, 7, 64, 299] {
            let indices: Vec<u64> = (0..batch).map(|_| rng.below(n as u64)).collect();
            let want: Vec<f32> = indices.iter().flat_map(|&i| data[i as usize * per..][..per].to_vec()).collect();
            let mut got = vec![0f32; batch * per];
            ds.gather_into(&indices, &mut got).unwrap();
            assert_eq!(got, want, "{codec:?} batch {batch}");
            let tensor = ds.gather(&indices).unwrap();
            assert_eq!(tensor.shape(), &[batch, 3, 5]);
            assert_eq!(tensor.as_slice::<f32>().unwrap(), &want[..]);
            let mut bytes = vec![0u8; batch * 60];
            ds.gather_bytes(&indices, &mut bytes).unwrap();
            assert_eq!(bytes, bytemuck::cast_slice::<f32, u8>(&want));
        }
        let one = ds.get(42).unwrap();
        assert_eq!(one.shape(), &shape);
        assert_eq!(one.as_slice::<f32>().unwrap(), &data[42 * per..43 * per]);
        let mut rec = [0f32; 15];
        ds.get_into(299, &mut rec).unwrap();
        assert_eq!(&rec[..], &data[299 * per..]);
    }
}

#[test]
fn scalars_and_every_element_type() {
    let dir = tempfile::tempdir().unwrap();
    let labels: Vec<i64> = (0..1000).map(|i| i * 3 - 7).collect();
    write_dataset(dir.path().join("i8"), &labels, &[], &WriteOptions::default()).unwrap();
    let ds = Dataset::open(dir.path().join("i8")).unwrap();
    assert_eq!((ds.shape(), ds.dtype().to_string()), (&[][..], "<i8".to_string()));
    let mut out = [0i64; 3];
    ds.gather_into(&[999, 0, 500], &mut out).unwrap();
    assert_eq!(out, [labels[999], labels[0], labels[500]]);
    assert_eq!(ds.get(3).unwrap().shape(), &[] as &[usize]);

    let bytes: Vec<u8> = (0..=255).collect();
    write_dataset(dir.path().join("u1"), &bytes, &[16], &WriteOptions::default()).unwrap();
    let text = std::fs::read_to_string(dir.path().join("u1/schema.json")).unwrap();
    assert!(text.contains("\"dtype\": \"|u1\""), "{text}");
    let u1 = Dataset::open(dir.path().join("u1")).unwrap();
    let mut rec = [0u8; 16];
    u1.get_into(15, &mut rec).unwrap();
    assert_eq!(&rec[..], &bytes[240..]);

    // Byte-level writing of a dtype with no Rust element type (float16).
    let halves = vec![0u8; 2 * 8 * 10];
    write_dataset_bytes(dir.path().join("f2"), DType::parse("<f2").unwrap(), &[8], &halves, &WriteOptions::default())
        .unwrap();
    let f2 = Dataset::open(dir.path().join("f2")).unwrap();
    assert_eq!((f2.len(), f2.row_bytes()), (10, 16));
    let mut raw = vec![1u8; 32];
    f2.gather_bytes(&[9, 0], &mut raw).unwrap();
    assert_eq!(raw, vec![0u8; 32]);
    assert!(matches!(f2.gather(&[0]).unwrap().as_slice::<u16>(), Err(DatasetError::DtypeMismatch { .. })));
}

#[test]
fn dtype_and_buffer_mismatches_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    write_dataset(dir.path(), &floats(10, 4, 1), &[4], &WriteOptions::default()).unwrap();
    let ds = Dataset::open(dir.path()).unwrap();
    let err = ds.gather_into(&[0], &mut [0i32; 4]).unwrap_err();
    assert!(
        matches!(&err, DatasetError::DtypeMismatch { stored, requested } if stored == "<f4" && requested == "<i4"),
        "{err}"
    );
    assert!(matches!(ds.gather_into(&[0], &mut [0f64; 2]), Err(DatasetError::DtypeMismatch { .. })));
    assert!(matches!(ds.gather_into(&[0, 1], &mut [0f32; 4]), Err(DatasetError::ShapeMismatch(_))));
    assert!(matches!(ds.gather_into(&[0], &mut [0f32; 5]), Err(DatasetError::ShapeMismatch(_))));
    assert!(matches!(
        ds.gather_bytes(&[10], &mut [0u8; 16]),
        Err(DatasetError::Store(loaderx::Error::IndexOutOfRange { .. }))
    ));
    assert!(matches!(ds.gather(&[u64::MAX]), Err(DatasetError::Store(_))));
    // A directory that does not exist says so; one without a schema is not a dataset.
    let missing = Dataset::open(dir.path().join("missing")).unwrap_err();
    assert!(matches!(missing, DatasetError::NoDataset { .. }), "{missing:?}");
    assert!(missing.to_string().contains("no such directory"), "{missing}");
    std::fs::create_dir(dir.path().join("empty")).unwrap();
    assert!(matches!(Dataset::open(dir.path().join("empty")), Err(DatasetError::NoSchema { .. })));
    assert!(matches!(RaggedDataset::open(dir.path()), Err(DatasetError::WrongKind { ragged: false, .. })));
}

#[test]
fn schema_text_is_the_references_byte_for_byte() {
    // Strings from Python: json.dumps(schema, indent=2) + "\n".
    let fixed = "{\n  \"format\": \"loaderx-zrecord\",\n  \"version\": 1,\n  \"dtype\": \"<f4\",\n  \"shape\": [\n    64\n  ],\n  \"codec\": \"zstd\"\n}\n";
    let ragged = "{\n  \"format\": \"loaderx-zrecord\",\n  \"version\": 1,\n  \"ragged\": true,\n  \"dtype\": \"<i4\",\n  \"item_shape\": [],\n  \"codec\": \"zstd\"\n}\n";
    let image = "{\n  \"format\": \"loaderx-zrecord\",\n  \"version\": 1,\n  \"dtype\": \"|u1\",\n  \"shape\": [\n    64,\n    64,\n    3\n  ],\n  \"codec\": \"raw\"\n}\n";
    let p = Path::new("schema.json");
    for (text, schema) in [
        (fixed, Schema::fixed(DType::parse("<f4").unwrap(), vec![64], Codec::Zstd).unwrap()),
        (ragged, Schema::ragged(DType::parse("<i4").unwrap(), vec![], Codec::Zstd).unwrap()),
        (image, Schema::fixed(DType::parse("|u1").unwrap(), vec![64, 64, 3], Codec::Raw).unwrap()),
    ] {
        assert_eq!(schema.to_json(), text);
        assert_eq!(Schema::parse(text, p).unwrap(), schema);
    }
    // What write_dataset leaves on disk.
    let dir = tempfile::tempdir().unwrap();
    write_dataset(dir.path(), &vec![0f32; 64 * 3], &[64], &WriteOptions::default()).unwrap();
    assert_eq!(std::fs::read_to_string(dir.path().join("schema.json")).unwrap(), fixed);
    write_ragged(dir.path().join("r"), &[], &[vec![1i32, 2], vec![]], &WriteOptions::default()).unwrap();
    assert_eq!(std::fs::read_to_string(dir.path().join("r/schema.json")).unwrap(), ragged);
}

#[test]
fn schema_parsing_is_strict() {
    let p = Path::new("schema.json");
    let with = |key: &str, value: &str| {
        let mut fields = vec![
            ("format", "\"loaderx-zrecord\"".to_string()),
            ("version", "1".into()),
            ("dtype", "\"<f4\"".into()),
            ("shape", "[2, 3]".into()),
            ("codec", "\"zstd\"".into()),
        ];
        fields.retain(|(k, _)| *k != key);
        if !value.is_empty() {
            fields.push((key, value.to_string()));
        }
        let body: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\": {v}")).collect();
        format!("{{{}}}", body.join(", "))
    };
    assert!(Schema::parse(&with("extra", "\"ignored\""), p).is_ok());
    type Check = fn(&DatasetError) -> bool;
    let cases: Vec<(String, Check)> = vec![
        (with("format", "\"npy\""), |e| matches!(e, DatasetError::UnknownFormat { .. })),
        (with("version", "2"), |e| matches!(e, DatasetError::UnsupportedVersion { .. })),
        (with("version", "1.0"), |e| matches!(e, DatasetError::UnsupportedVersion { .. })),
        (with("dtype", "\"float32\""), |e| matches!(e, DatasetError::UnknownDtype { .. })),
        (with("dtype", "\"|O8\""), |e| matches!(e, DatasetError::UnknownDtype { .. })),
        (with("dtype", "\"<f3\""), |e| matches!(e, DatasetError::UnknownDtype { .. })),
        (with("codec", "\"lz4\""), |e| matches!(e, DatasetError::UnknownCodec { .. })),
        (with("shape", "[2, -1]"), |e| matches!(e, DatasetError::Schema { .. })),
        (with("shape", "\"2\""), |e| matches!(e, DatasetError::Schema { .. })),
        (with("shape", ""), |e| matches!(e, DatasetError::Schema { .. })),
        (with("dtype", "4"), |e| matches!(e, DatasetError::Schema { .. })),
        (with("ragged", "1"), |e| matches!(e, DatasetError::Schema { .. })),
        (with("ragged", "true"), |e| matches!(e, DatasetError::Schema { .. })), // no item_shape
        (with("shape", "[1024, 1024]"), |e| matches!(e, DatasetError::RecordTooLarge { .. })),
        (with("shape", "[18446744073709551615, 16]"), |e| matches!(e, DatasetError::RecordTooLarge { .. })),
        ("not json".into(), |e| matches!(e, DatasetError::Schema { .. })),
        ("[1, 2]".into(), |e| matches!(e, DatasetError::Schema { .. })),
    ];
    for (text, ok) in cases {
        let err = Schema::parse(&text, p).unwrap_err();
        assert!(ok(&err), "{text}: {err}");
        assert!(!err.to_string().is_empty());
    }
    // Zero-byte ragged rows cannot be counted.
    let zero_rows = with("ragged", "true").replace("\"shape\"", "\"item_shape\"").replace("[2, 3]", "[0]");
    assert!(matches!(Schema::parse(&zero_rows, p), Err(DatasetError::ShapeMismatch(_))));
}

#[test]
fn appending_to_an_existing_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let a = floats(50, 6, 1);
    let b = floats(30, 6, 2);
    write_dataset(dir.path(), &a, &[2, 3], &WriteOptions::codec(Codec::Zstd)).unwrap();
    // Another codec asked for: the dataset keeps its own (as the reference).
    write_dataset(dir.path(), &b, &[2, 3], &WriteOptions::codec(Codec::Raw)).unwrap();
    let ds = Dataset::open(dir.path()).unwrap();
    assert_eq!((ds.len(), ds.schema().codec), (80, Codec::Zstd));
    let all: Vec<u64> = (0..80).collect();
    let mut got = vec![0f32; 80 * 6];
    ds.gather_into(&all, &mut got).unwrap();
    assert_eq!(got, [a, b].concat());
    drop(ds);

    for (result, what) in [
        (write_dataset(dir.path(), &[0f32; 6], &[6], &WriteOptions::default()), "shape"),
        (write_dataset(dir.path(), &[0f64; 6], &[2, 3], &WriteOptions::default()), "dtype"),
        (write_ragged(dir.path(), &[2, 3], &[vec![0f32; 6]], &WriteOptions::default()), "ragged"),
    ] {
        let err = result.unwrap_err();
        assert!(matches!(err, DatasetError::Incompatible { .. }), "{what}: {err}");
        assert!(err.to_string().contains("<f4(2, 3)"), "{what}: {err}");
    }
    assert_eq!(Dataset::open(dir.path()).unwrap().len(), 80, "a refused append writes nothing");
}

#[test]
fn slices_that_do_not_fit_the_shape_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let opts = WriteOptions::default();
    assert!(matches!(write_dataset(dir.path(), &[0f32; 7], &[2], &opts), Err(DatasetError::ShapeMismatch(_))));
    assert!(matches!(write_dataset(dir.path(), &[0f32; 0], &[0], &opts), Err(DatasetError::ShapeMismatch(_))));
    assert!(matches!(
        write_dataset(dir.path(), &[0u8; 4], &[1 << 20, 2], &opts),
        Err(DatasetError::RecordTooLarge { .. })
    ));
    // Nothing was created by the refused calls.
    assert!(!dir.path().join("schema.json").exists());
    // An empty dataset is a dataset.
    write_dataset(dir.path(), &[0f32; 0], &[2], &opts).unwrap();
    assert_eq!(Dataset::open(dir.path()).unwrap().len(), 0);
}

#[test]
fn from_an_iterator_in_bounded_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let data = floats(500, 8, 3);
    for codec in CODECS {
        let path = dir.path().join(codec.name());
        // 100 bytes per call: 3 records of 32 bytes each time.
        let opts = WriteOptions { chunk_bytes: 100, ..WriteOptions::codec(codec) };
        let n = write_dataset_iter(&path, &[8], data.chunks(8).map(|r| r.to_vec()), &opts).unwrap();
        assert_eq!(n, 500);
        let ds = Dataset::open(&path).unwrap();
        let all: Vec<u64> = (0..500).rev().collect();
        let mut got = vec![0f32; 500 * 8];
        ds.gather_into(&all, &mut got).unwrap();
        let want: Vec<f32> = data.chunks(8).rev().flatten().copied().collect();
        assert_eq!(got, want, "{codec:?}");
    }
    let err =
        write_dataset_iter(dir.path().join("bad"), &[8], [vec![0f32; 8], vec![0f32; 7]], &WriteOptions::default())
            .unwrap_err();
    assert!(matches!(err, DatasetError::ShapeMismatch(_)), "{err}");
}

fn write_npy<T: npyz::AutoSerialize + Copy>(path: &Path, shape: &[u64], data: &[T]) {
    let file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut w = npyz::WriteOptions::new().default_dtype().shape(shape).writer(file).begin_nd().unwrap();
    w.extend(data.iter().copied()).unwrap();
    w.finish().unwrap();
}

#[test]
fn converting_npy_files() {
    let dir = tempfile::tempdir().unwrap();
    // (n, 4, 3) float32, streamed 5 records per call.
    let data = floats(1000, 12, 5);
    write_npy(&dir.path().join("data.npy"), &[1000, 4, 3], &data);
    for codec in CODECS {
        let out = dir.path().join(format!("data-{}", codec.name()));
        let opts = WriteOptions { chunk_bytes: 5 * 48, ..WriteOptions::codec(codec) };
        assert_eq!(write_dataset_npy(&out, dir.path().join("data.npy"), &opts).unwrap(), 1000);
        let ds = Dataset::open(&out).unwrap();
        assert_eq!((ds.shape(), ds.len()), (&[4, 3][..], 1000));
        let t = ds.gather(&(0..1000).collect::<Vec<u64>>()).unwrap();
        assert_eq!(t.as_slice::<f32>().unwrap(), &data[..], "{codec:?}");
    }
    // A 1-D label array: a dataset of scalars.
    let labels: Vec<i64> = (0..777).map(|i| i * i).collect();
    write_npy(&dir.path().join("labels.npy"), &[777], &labels);
    write_dataset_npy(dir.path().join("labels"), dir.path().join("labels.npy"), &WriteOptions::default()).unwrap();
    let ds = Dataset::open(dir.path().join("labels")).unwrap();
    assert_eq!((ds.shape(), ds.dtype().to_string()), (&[][..], "<i8".to_string()));
    let mut out = [0i64; 2];
    ds.gather_into(&[776, 3], &mut out).unwrap();
    assert_eq!(out, [776 * 776, 9]);
    // uint8 images: "|u1".
    let pixels: Vec<u8> = (0..10 * 8 * 8 * 3).map(|i| (i * 7 % 251) as u8).collect();
    write_npy(&dir.path().join("img.npy"), &[10, 8, 8, 3], &pixels);
    write_dataset_npy(dir.path().join("img"), dir.path().join("img.npy"), &WriteOptions::codec(Codec::Raw)).unwrap();
    let img = Dataset::open(dir.path().join("img")).unwrap();
    assert_eq!(img.schema().to_json(), std::fs::read_to_string(dir.path().join("img/schema.json")).unwrap());
    assert_eq!(img.gather(&[9]).unwrap().as_bytes(), &pixels[9 * 192..]);
    // Appending a second file of the same dtype and shape.
    write_dataset_npy(dir.path().join("img"), dir.path().join("img.npy"), &WriteOptions::default()).unwrap();
    assert_eq!(Dataset::open(dir.path().join("img")).unwrap().len(), 20);
    assert!(matches!(
        write_dataset_npy(dir.path().join("img"), dir.path().join("labels.npy"), &WriteOptions::default()),
        Err(DatasetError::Incompatible { .. })
    ));
}

#[test]
fn bad_npy_files_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let opts = WriteOptions::default();
    let npy = |name: &str| dir.path().join(name);
    // Truncated data.
    write_npy(&npy("t.npy"), &[100, 4], &vec![1f32; 400]);
    let len = std::fs::metadata(npy("t.npy")).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(npy("t.npy")).unwrap().set_len(len - 4).unwrap();
    // Not a .npy file at all; empty; Fortran order.
    std::fs::write(npy("garbage.npy"), b"this is not a numpy file, not at all").unwrap();
    std::fs::write(npy("empty.npy"), b"").unwrap();
    {
        let file = std::io::BufWriter::new(std::fs::File::create(npy("f.npy")).unwrap());
        let mut w = npyz::WriteOptions::new()
            .default_dtype()
            .shape(&[2, 3])
            .order(npyz::Order::Fortran)
            .writer(file)
            .begin_nd()
            .unwrap();
        w.extend([1f32; 6]).unwrap();
        w.finish().unwrap();
    }
    for name in ["t.npy", "garbage.npy", "empty.npy", "f.npy"] {
        let err = write_dataset_npy(dir.path().join(format!("out-{name}")), npy(name), &opts).unwrap_err();
        assert!(matches!(err, DatasetError::Npy { .. }), "{name}: {err}");
        assert!(!dir.path().join(format!("out-{name}")).exists(), "{name}: nothing written");
    }
    let err = write_dataset_npy(dir.path().join("x"), npy("missing.npy"), &opts).unwrap_err();
    assert!(matches!(err, DatasetError::Io { .. }), "{err}");
}

/// Finding 3 of issue 18: a `zstd_dict` write whose records are too few to
/// train a dictionary on fails before anything is created, and the path
/// then takes a plain write; a dataset that already exists is left as it was.
#[test]
fn an_untrainable_dictionary_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let data = floats(5, 4, 3);
    let dict = WriteOptions::codec(Codec::ZstdDict);
    for (name, result) in [
        ("slice", write_dataset(dir.path().join("slice"), &data, &[4], &dict)),
        ("iter", write_dataset_iter(dir.path().join("iter"), &[4], data.chunks(4), &dict)),
        ("ragged", write_ragged(dir.path().join("ragged"), &[], data.chunks(4), &dict)),
    ] {
        let path = dir.path().join(name);
        match result {
            Err(DatasetError::DictionaryTraining { path: named, records: 5, bytes: 80, .. }) => {
                assert_eq!(named, path)
            }
            other => panic!("{name}: {other:?}"),
        }
        assert!(!path.exists(), "{name}: {:?}", std::fs::read_dir(&path).map(|d| d.count()));
        // The next write, with the default codec, makes the dataset.
        assert_eq!(write_dataset(&path, &data, &[4], &WriteOptions::default()).unwrap(), 5, "{name}");
    }
    // An existing empty directory stays empty.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    assert!(matches!(write_dataset(&empty, &data, &[4], &dict), Err(DatasetError::DictionaryTraining { .. })));
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
    // Enough records train, and the dataset reads back.
    let many = floats(400, 16, 5);
    let path = dir.path().join("many");
    assert_eq!(write_dataset(&path, &many, &[16], &dict).unwrap(), 400);
    let ds = Dataset::open(&path).unwrap();
    assert!(ds.shard(0).unwrap().has_dict());
    let mut got = vec![0f32; 16];
    ds.gather_into(&[399], &mut got).unwrap();
    assert_eq!(got, many[399 * 16..]);
}

/// A plain store that has its dictionary (and no schema) takes a
/// `zstd_dict` write of a few records: no dictionary is trained for it.
#[test]
fn a_plain_store_with_a_dictionary_takes_a_small_zstd_dict_write() {
    let dir = tempfile::tempdir().unwrap();
    let store = loaderx::Zrecord::open(dir.path()).unwrap();
    let sample = floats(400, 16, 9);
    let bytes: &[u8] = bytemuck::cast_slice(&sample);
    store.train_dict(bytes, &vec![64; 400], 4096).unwrap();
    drop(store);
    let few = floats(5, 16, 4);
    assert_eq!(write_dataset(dir.path(), &few, &[16], &WriteOptions::codec(Codec::ZstdDict)).unwrap(), 5);
    let ds = Dataset::open(dir.path()).unwrap();
    let mut got = vec![0f32; 16];
    ds.gather_into(&[4], &mut got).unwrap();
    assert_eq!(got, few[4 * 16..]);
}
