//! One write at a time per published location: `.staging/write.lock`, an
//! object created by a conditional PUT (`If-None-Match: *`), which one
//! creator wins and every other is refused. Two writes that adopted at once
//! would number their new shards from the same place
//! (`docs/crash-safety.md`, "Adopting published tables"); the lock makes
//! the second one fail before it writes anything.
//!
//! The holder removes the lock when its write ends, committed or not. A
//! killed holder leaves it: the lock is under `.staging/`, so a gc of the
//! location (`gc.rs`) removes it once it is older than the gc's bound.
//! A server that ignores the precondition grants every lock; a second
//! conditional PUT of the lock just taken tells (`LockTaken::unenforced`).

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use crate::error::{Error, Result};
use crate::format::STAGING_DIR;
use crate::io::remote::Location;

/// The lock's name under `.staging/`.
pub const WRITE_LOCK_FILE: &str = "write.lock";

/// The most bytes of a lock object read to say who holds it.
const LOCK_BYTES_MAX: usize = 4096;

/// What [`lock_writes`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LockTaken {
    /// The caller holds the lock. `unenforced`: the server granted a
    /// second conditional create of it too, so it excludes no other write.
    Held {
        /// True when the server ignores `If-None-Match`.
        unenforced: bool,
    },
    /// Another write holds it: its holder and since when (the lock's
    /// text, `holder SECONDS`).
    Refused(String),
}

/// Takes the write lock of `dest` for `holder` (a write's id: letters,
/// digits, `-` and `_`).
pub fn lock_writes(dest: &Location, holder: &str) -> Result<LockTaken> {
    if holder.is_empty()
        || holder.len() > 64
        || !holder.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(Error::InvalidArgument(format!("{holder:?}: a lock holder is 1 to 64 letters, digits, - or _")));
    }
    let since = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let text = format!("{holder} {since}");
    let key = lock_key(dest);
    let create = || PutOptions { mode: PutMode::Create, ..PutOptions::default() };
    dest.fetcher()
        .run(async |store| {
            match store.put_opts(&key, PutPayload::from(text.clone().into_bytes()), create()).await {
                Ok(_) => {}
                Err(object_store::Error::AlreadyExists { .. }) => {
                    let held = read_lock(store.as_ref(), &key).await?.unwrap_or_default();
                    return Ok(LockTaken::Refused(String::from_utf8_lossy(&held).into_owned()));
                }
                Err(e) => return Err(e.into()),
            }
            let again = store.put_opts(&key, PutPayload::from(text.clone().into_bytes()), create()).await;
            match again {
                Err(object_store::Error::AlreadyExists { .. }) => Ok(LockTaken::Held { unenforced: false }),
                Ok(_) => Ok(LockTaken::Held { unenforced: true }),
                Err(e) => Err(e.into()),
            }
        })
        .map_err(lock_error(dest, "lock"))
}

/// Removes the write lock of `dest` if `holder` holds it; returns whether
/// it did. A lock another write took (after a gc removed this one's) stays.
pub fn unlock_writes(dest: &Location, holder: &str) -> Result<bool> {
    let key = lock_key(dest);
    dest.fetcher()
        .run(async |store| {
            let Some(held) = read_lock(store.as_ref(), &key).await? else {
                return Ok(false);
            };
            if held.split(|&b| b == b' ').next() != Some(holder.as_bytes()) {
                return Ok(false);
            }
            store.delete(&key).await?;
            Ok(true)
        })
        .map_err(lock_error(dest, "unlock"))
}

/// The lock's first [`LOCK_BYTES_MAX`] bytes (its object is input), or
/// `None` if there is none.
async fn read_lock(store: &dyn ObjectStore, key: &ObjectPath) -> std::io::Result<Option<Bytes>> {
    let range = GetOptions { range: Some(GetRange::Bounded(0..LOCK_BYTES_MAX as u64)), ..GetOptions::default() };
    match store.get_opts(key, range).await {
        Ok(got) => Ok(Some(got.bytes().await?)),
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// An I/O error of `op` on the lock of `dest`, naming the lock's URL.
fn lock_error(dest: &Location, op: &'static str) -> impl FnOnce(std::io::Error) -> Error {
    let path = format!("{}/{STAGING_DIR}/{WRITE_LOCK_FILE}", dest.url()).into();
    move |source| Error::Io { path, op, source }
}

fn lock_key(dest: &Location) -> ObjectPath {
    dest.child(STAGING_DIR).key(WRITE_LOCK_FILE)
}
