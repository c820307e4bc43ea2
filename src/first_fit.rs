//! First fit: the lowest slot whose value is at least a given size, over
//! slots whose values only shrink, in O(log slots) per query and update.
//! A tree of the largest value under each node. Compaction's fill uses it
//! over holes (`store/fill.rs`), packing over rows (`loader/pack.rs`).

/// Slots `0..len` with a value each.
#[derive(Debug)]
pub(crate) struct FirstFit {
    /// `tree[1]` is the root; slot `k` is the leaf `tree[leaves + k]`.
    tree: Vec<u64>,
    leaves: usize,
}

impl FirstFit {
    /// Slots with these values.
    pub(crate) fn new(values: impl ExactSizeIterator<Item = u64>) -> FirstFit {
        let leaves = values.len().next_power_of_two().max(1);
        let mut tree = vec![0u64; 2 * leaves];
        for (k, value) in values.enumerate() {
            tree[leaves + k] = value;
        }
        for node in (1..leaves).rev() {
            tree[node] = tree[2 * node].max(tree[2 * node + 1]);
        }
        FirstFit { tree, leaves }
    }

    /// The lowest slot whose value is at least `size`.
    pub(crate) fn find(&self, size: u64) -> Option<usize> {
        if self.tree[1] < size {
            return None;
        }
        let mut node = 1;
        while node < self.leaves {
            node = if self.tree[2 * node] >= size { 2 * node } else { 2 * node + 1 };
        }
        Some(node - self.leaves)
    }

    /// Slot `k`'s value.
    pub(crate) fn value(&self, k: usize) -> u64 {
        self.tree[self.leaves + k]
    }

    /// Sets slot `k`'s value.
    pub(crate) fn set(&mut self, k: usize, value: u64) {
        let mut node = self.leaves + k;
        self.tree[node] = value;
        while node > 1 {
            node /= 2;
            self.tree[node] = self.tree[2 * node].max(self.tree[2 * node + 1]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::FirstFit;

    #[test]
    fn finds_the_lowest_slot_that_holds_the_size() {
        let mut fit = FirstFit::new([3u64, 9, 2, 9, 5].into_iter());
        assert_eq!(fit.find(4), Some(1));
        assert_eq!(fit.find(10), None);
        fit.set(1, 1);
        assert_eq!(fit.find(4), Some(3));
        assert_eq!(fit.find(1), Some(0));
        assert_eq!(fit.value(3), 9);
        let empty = FirstFit::new(std::iter::empty());
        assert_eq!(empty.find(1), None);
        assert_eq!(empty.find(0), Some(0), "size 0 fits the (empty) first slot");
    }
}
