//! Objects at a location: uploading a local file or bytes (in parts when
//! large; the entity tag read back), a file's new version beside the one a
//! manifest lists, removing the version a new manifest replaced, or any one
//! object. What
//! a push (`mod.rs`) and an adoption (`adopt.rs`) write goes through here.

use std::io;

use object_store::{ObjectStore, ObjectStoreExt, PutPayload, WriteMultipart};

use crate::io::remote::{Location, Manifest, ObjectInfo, RemoteError, RemoteErrorKind};
use crate::io::{VfsFile, read_exact_at};

/// Bytes read or written at a time, and the multipart part size.
pub(super) const PIECE_BYTES: usize = 8 << 20;
/// Objects at least this long are uploaded in parts.
const MULTIPART_BYTES: u64 = 16 << 20;
/// Parts of one upload in flight.
const PARTS_IN_FLIGHT: usize = 4;

/// One object to publish: its name and where its bytes come from.
pub(super) enum Source {
    /// `len` bytes of a local file from offset 0.
    File { file: Box<dyn VfsFile>, len: u64 },
    /// Bytes in memory (the `meta.zr` image).
    Memory(Vec<u8>),
}

impl Source {
    pub(super) fn len(&self) -> u64 {
        match self {
            Source::File { len, .. } => *len,
            Source::Memory(bytes) => bytes.len() as u64,
        }
    }

    /// The bytes `offset..offset + buf.len()`.
    pub(super) fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        match self {
            Source::File { file, .. } => read_exact_at(&**file, buf, offset),
            Source::Memory(bytes) => {
                buf.copy_from_slice(&bytes[offset as usize..offset as usize + buf.len()]);
                Ok(())
            }
        }
    }

    pub(super) fn crc32(&self) -> io::Result<u32> {
        let mut hasher = crc32fast::Hasher::new();
        let mut buf = vec![0; PIECE_BYTES.min(self.len() as usize)];
        let mut offset = 0;
        while offset < self.len() {
            let n = (self.len() - offset).min(PIECE_BYTES as u64) as usize;
            self.read(offset, &mut buf[..n])?;
            hasher.update(&buf[..n]);
            offset += n as u64;
        }
        Ok(hasher.finalize())
    }
}

/// Uploads `bytes` as a new version of file `name` at `to`: the object
/// `name.VERSION`, never the one a reader of the manifest in place reads
/// (a failure before the next manifest is uploaded leaves that reader
/// whole). Returns it as a manifest lists it.
pub(super) fn upload_version(to: &Location, name: &str, bytes: Vec<u8>) -> io::Result<ObjectInfo> {
    let (size, crc32) = (bytes.len() as u64, crc32fast::hash(&bytes));
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let key = format!("{name}.{nanos:016x}{crc32:08x}");
    let etag = upload(to, &key, &Source::Memory(bytes))?;
    Ok(ObjectInfo { size, crc32, etag, key: Some(key) })
}

/// After `new` replaced `old` at `at`: removes the version of file `name`
/// that `old` listed and `new` does not.
pub(super) fn remove_replaced(at: &Location, old: Option<&Manifest>, new: &Manifest, name: &str) -> io::Result<()> {
    let key = |m: &Manifest| m.objects.get(name).map(|o| o.key.clone().unwrap_or_else(|| name.to_string()));
    let Some(stale) = old.and_then(key).filter(|k| Some(k) != key(new).as_ref()) else { return Ok(()) };
    remove(at, &stale)
}

/// Removes object `name` at `at`; one already gone is no error.
pub(super) fn remove(at: &Location, name: &str) -> io::Result<()> {
    let path = at.key(name);
    at.fetcher().run(async |store| match store.delete(&path).await {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
        Err(e) => Err(e.into()),
    })
}

/// The entity tag of `name` if the server holds it with the size `listed` says
/// (and the same tag, where both have one): then it need not be uploaded.
pub(super) fn still_held(to: &Location, name: &str, listed: &ObjectInfo) -> io::Result<Option<Option<String>>> {
    let key = to.key(name);
    to.fetcher().run(async |store| match store.head(&key).await {
        Ok(meta) if meta.size == listed.size && (listed.etag.is_none() || meta.e_tag == listed.etag) => {
            Ok(Some(meta.e_tag))
        }
        Ok(_) | Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    })
}

/// Uploads `source` as `name` (in parts when large); returns the entity tag
/// the server gives it (from a HEAD, which is what readers will see).
pub(super) fn upload(to: &Location, name: &str, source: &Source) -> io::Result<Option<String>> {
    let key = to.key(name);
    let timeout = to.fetcher().options().request_timeout;
    to.fetcher().run(async |store| {
        if source.len() < MULTIPART_BYTES {
            let mut bytes = vec![0; source.len() as usize];
            source.read(0, &mut bytes)?;
            tokio::time::timeout(timeout, store.put(&key, PutPayload::from(bytes))).await.map_err(|_| {
                io::Error::new(io::ErrorKind::TimedOut, format!("{name}: no answer within {timeout:?}"))
            })??;
        } else {
            upload_parts(&*store, &key, source).await?;
        }
        let meta = store.head(&key).await?;
        if meta.size != source.len() {
            let detail = format!("{} bytes after the upload of {}", meta.size, source.len());
            return Err(RemoteError::new(&format!("{}/{name}", to.url()), RemoteErrorKind::Changed, detail).into_io());
        }
        Ok(meta.e_tag)
    })
}

async fn upload_parts(store: &dyn ObjectStore, key: &object_store::path::Path, source: &Source) -> io::Result<()> {
    let upload = store.put_multipart(key).await?;
    let mut writer = WriteMultipart::new_with_chunk_size(upload, PIECE_BYTES);
    let mut buf = vec![0; PIECE_BYTES];
    let mut offset = 0;
    while offset < source.len() {
        let n = (source.len() - offset).min(PIECE_BYTES as u64) as usize;
        if let Err(e) = source.read(offset, &mut buf[..n]) {
            let _ = writer.abort().await;
            return Err(e);
        }
        if let Err(e) = writer.wait_for_capacity(PARTS_IN_FLIGHT).await {
            let _ = writer.abort().await;
            return Err(e.into());
        }
        writer.write(&buf[..n]);
        offset += n as u64;
    }
    writer.finish().await?;
    Ok(())
}
