//! [`ShardIndex`]: a global u64 record index to (shard, local index), by
//! a prefix sum of the shards' record counts, in O(log shards).

use super::error::DatasetError;

/// The prefix sum of shard counts: `starts[k]` is shard `k`'s first global
/// index, `starts[shards]` the total.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardIndex {
    starts: Vec<u64>,
}

impl ShardIndex {
    /// The index of shards of `counts` records; an overflowing total is an error.
    pub fn new(counts: &[u64]) -> Result<ShardIndex, DatasetError> {
        let mut starts = Vec::with_capacity(counts.len() + 1);
        let mut at = 0u64;
        starts.push(0);
        for &n in counts {
            at = at.checked_add(n).ok_or_else(|| {
                DatasetError::InvalidArgument(format!("shard counts overflow u64 at shard {}", starts.len() - 1))
            })?;
            starts.push(at);
        }
        Ok(ShardIndex { starts })
    }

    /// Total records.
    pub fn len(&self) -> u64 {
        *self.starts.last().expect("starts holds at least the 0")
    }

    /// True if no shard holds a record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of shards.
    pub fn shards(&self) -> usize {
        self.starts.len() - 1
    }

    /// Shard `k`'s first global index.
    pub fn start(&self, k: usize) -> u64 {
        self.starts[k]
    }

    /// Shard `k`'s record count.
    pub fn count(&self, k: usize) -> u64 {
        self.starts[k + 1] - self.starts[k]
    }

    /// The shard holding global record `index` and its index there;
    /// `None` past the end. Empty shards hold nothing and are skipped.
    pub fn locate(&self, index: u64) -> Option<(usize, u64)> {
        if index >= self.len() {
            return None;
        }
        // The last start at or below `index`: the first start above it, less one.
        let k = self.starts.partition_point(|&s| s <= index) - 1;
        Some((k, index - self.starts[k]))
    }
}

#[cfg(test)]
mod tests {
    use super::ShardIndex;

    /// A naive oracle: walk the shards.
    fn walk(counts: &[u64], mut index: u64) -> Option<(usize, u64)> {
        for (k, &n) in counts.iter().enumerate() {
            if index < n {
                return Some((k, index));
            }
            index -= n;
        }
        None
    }

    #[test]
    fn locates_like_a_walk() {
        let counts = [3u64, 0, 0, 5, 1, 0, 2];
        let index = ShardIndex::new(&counts).unwrap();
        assert_eq!(index.len(), 11);
        for i in 0..13 {
            assert_eq!(index.locate(i), walk(&counts, i), "{i}");
        }
    }

    #[test]
    fn maps_past_2_pow_32() {
        // 300 full shards of 2^24: 5,033,164,800 records, past u32.
        let full = 1u64 << 24;
        let mut counts = vec![full; 300];
        counts[7] = 12_345;
        let index = ShardIndex::new(&counts).unwrap();
        assert!(index.len() > 1 << 32);
        let start_9 = 8 * full + 12_345;
        assert_eq!(index.locate(start_9), Some((9, 0)));
        assert_eq!(index.locate(start_9 - 1), Some((8, full - 1)));
        for i in [0, full - 1, full, 7 * full + 12_344, 1 << 32, (1 << 32) + 1, index.len() - 1] {
            assert_eq!(index.locate(i), walk(&counts, i), "{i}");
        }
        assert_eq!(index.locate(index.len()), None);
        assert_eq!(index.locate(u64::MAX), None);
    }

    #[test]
    fn refuses_overflowing_counts() {
        assert!(ShardIndex::new(&[u64::MAX, 1]).is_err());
        assert!(ShardIndex::new(&[u64::MAX]).is_ok());
    }
}
