//! A `.npy` header's length field is bytes from disk: it may not size an
//! allocation before it is checked against the file. The test binary counts
//! the largest single allocation, so it fails on an allocation of the field's
//! size even where overcommit would let it succeed (the fuzzing finding of
//! `npyz::header::read_header` allocating `malloc(4294967294)` for a 12-byte
//! file, docs/fuzzing.md F8).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use loaderx::dataset::{DatasetError, WriteOptions, write_dataset_npy};

/// The system allocator, recording the largest size asked of it.
struct Largest;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call forwards to `System` with the same arguments; the only
// addition is an atomic update, which neither allocates nor unwinds.
unsafe impl GlobalAlloc for Largest {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which is `System`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: as `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with this layout (every allocation goes through it).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        // SAFETY: as `dealloc`; the caller upholds `realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Largest = Largest;

/// Far above anything the conversion of a tiny file needs, far below the
/// lengths the field can claim.
const ALLOCATION_BOUND: usize = 64 << 20;

/// The only test in this binary, so no other test's allocations count.
#[test]
fn a_header_length_past_the_file_is_refused_without_allocating_it() {
    let dir = tempfile::tempdir().unwrap();
    let dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
    let cases: [(&str, Vec<u8>, &str); 3] = [
        // Version 2.0, a 32-bit length field of 0xFFFF_FFFE and nothing after it.
        ("v2-huge", b"\x93NUMPY\x02\x00\xfe\xff\xff\xff".to_vec(), "says 4294967294 bytes"),
        // Version 3.0, a real header whose field claims 3 GiB.
        ("v3-huge", npy([3, 0], &(3u32 << 30).to_le_bytes(), dict), "says 3221225472 bytes"),
        // Version 1.0, one byte more than the file holds.
        ("v1-short", npy([1, 0], &(dict.len() as u16 + 9).to_le_bytes(), dict), "past the end of the file"),
    ];
    for (name, bytes, says) in cases {
        let file = dir.path().join(format!("{name}.npy"));
        std::fs::write(&file, &bytes).unwrap();
        LARGEST.store(0, Ordering::Relaxed);
        let got = write_dataset_npy(dir.path().join(name), &file, &WriteOptions::default());
        let largest = LARGEST.load(Ordering::Relaxed);
        assert!(largest < ALLOCATION_BOUND, "{name}: an allocation of {largest} bytes");
        match got {
            Err(DatasetError::Npy { reason, .. }) => assert!(reason.contains(says), "{name}: {reason}"),
            other => panic!("{name}: {other:?}"),
        }
    }
    // The honest file converts (the check refuses only lengths past the file).
    let file = dir.path().join("honest.npy");
    std::fs::write(&file, npy([1, 0], &(dict.len() as u16).to_le_bytes(), dict)).unwrap();
    assert_eq!(write_dataset_npy(dir.path().join("honest"), &file, &WriteOptions::default()).unwrap(), 2);
}

/// A `.npy` file: magic, `version`, the length field as given, `dict`, and
/// 8 data bytes (two `<f4`).
fn npy(version: [u8; 2], length_field: &[u8], dict: &str) -> Vec<u8> {
    let mut out = b"\x93NUMPY".to_vec();
    out.extend_from_slice(&version);
    out.extend_from_slice(length_field);
    out.extend_from_slice(dict.as_bytes());
    out.extend_from_slice(&[0; 8]);
    out
}
