//! Placement: where a record goes given the frontier, and where the frontier
//! is after it. The rules every writer (append, compaction, recovery) places
//! by: a record never straddles two chunks, and the last byte of a chunk is
//! never used, so the frontier stays representable as a `u32` offset.

use crate::format::{CHUNK_BYTES_MAX, CHUNKS_MAX, Frontier, Loc};

impl Frontier {
    /// Where a record of `len` stored bytes goes when the frontier is
    /// `self`, and the frontier after it; `None` when the chunks are
    /// exhausted.
    pub(crate) fn place(self, len: u32) -> Option<(Loc, Frontier)> {
        let mut at = self;
        // `>=`: the frontier must stay representable, so the last byte of a
        // chunk is never used.
        if u64::from(at.offset) + u64::from(len) >= CHUNK_BYTES_MAX {
            at = Frontier { chunk: at.chunk.checked_add(1).filter(|c| u32::from(*c) < CHUNKS_MAX)?, offset: 0 };
        }
        let next = Frontier { chunk: at.chunk, offset: at.offset + len };
        Some((Loc { chunk: at.chunk, offset: at.offset }, next))
    }

    /// The frontier right after `phys` bytes at `loc` (the next chunk's start
    /// when they reach the chunk's end).
    pub(crate) fn after(loc: Loc, phys: u32) -> Frontier {
        let end = u64::from(loc.offset) + u64::from(phys);
        if end >= CHUNK_BYTES_MAX {
            Frontier { chunk: loc.chunk + 1, offset: 0 }
        } else {
            Frontier { chunk: loc.chunk, offset: end as u32 }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn place_rolls_over_and_never_straddles() {
        let at = |chunk, offset| Frontier { chunk, offset };
        assert_eq!(at(0, 10).place(5), Some((Loc { chunk: 0, offset: 10 }, at(0, 15))));
        let near_end = (CHUNK_BYTES_MAX - 4) as u32;
        assert_eq!(at(0, near_end).place(4), Some((Loc { chunk: 1, offset: 0 }, at(1, 4))));
        assert_eq!(at(0, near_end).place(3), Some((Loc { chunk: 0, offset: near_end }, at(0, u32::MAX))));
        assert_eq!(at(0, near_end).place(0), Some((Loc { chunk: 0, offset: near_end }, at(0, near_end))));
        assert_eq!(at(4095, near_end).place(4), None);
    }

    #[test]
    fn after_is_the_end_of_the_bytes() {
        let loc = Loc { chunk: 2, offset: 100 };
        assert_eq!(Frontier::after(loc, 28), Frontier { chunk: 2, offset: 128 });
        let last = Loc { chunk: 2, offset: (CHUNK_BYTES_MAX - 8) as u32 };
        assert_eq!(Frontier::after(last, 8), Frontier { chunk: 3, offset: 0 });
    }
}
