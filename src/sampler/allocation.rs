//! [`Allocation`]: how many of the first `n` samples of a mixture each
//! source gets, for one weight vector. The owner of the mixture's
//! proportions.
//!
//! The sources are the leaves of a binary tree built by Huffman's rule
//! (the two lightest nodes merged first, ties to the lower index; for four
//! sources, the pairing of two pairs instead when its largest bound is
//! smaller), each node weighing the sum of its leaves. The root's count is `n`; a node's
//! count `N` goes to its children as `round(N * w_left / w)` (half up) and
//! the rest. So:
//!
//! - the counts sum to `n` (every node's children sum to it);
//! - each count is non-decreasing in `n`, by 0 or 1 a sample (a rounded
//!   `N * r` with `r <= 1` grows by at most one when `N` grows by one, so
//!   both children do): the samples of a source are the positions where
//!   its count grows, and source `i`'s `j`-th sample is the one that takes
//!   its count from `j` to `j + 1`;
//! - over any window of samples a source's count differs from its exact
//!   share by less than its [`bound`](Allocation::bound), `sum over the
//!   nodes from the source up to a child of the root of w_i / w_node`: each
//!   rounding on the way adds less than one to the window's error, scaled
//!   by the share of the source below it. Two sources: below 1. Three or
//!   four: below 2 (every source at depth 2 at most). Huffman's rule makes
//!   node weights grow at least like the Fibonacci numbers up the tree, so
//!   every bound is below 3.36.
//!
//! No closed form gives every count within 1 of exact at every `n` for
//! three or more sources and keeps them monotone (the house-monotone quota
//! methods are sequential); this one is exact in integer arithmetic and
//! costs O(sources) for any `n`, with no replay.
//!
//! Weights are positive and finite. Integer weights (up to 2^53, summing
//! below 2^62) are used as they are; weights that are whole at some power
//! of ten up to 10^9 (0.7, 0.3: to a few units in the last place) are
//! scaled to those integers; any other set is scaled so the largest is
//! 2^40 and rounded (each proportion then within 2^-40 of the given one).

use super::error::SamplerError;

/// The integer weight the largest one becomes when weights are not whole.
const SCALE: f64 = (1u64 << 40) as f64;
/// Integer weights are used as they are up to this (exact in `f64`).
const EXACT: f64 = (1u64 << 53) as f64;
/// At most this many sources (source ids are `u32`; counts stay in `u128`).
pub const MAX_SOURCES: usize = 1 << 16;

/// A tree node: a source (leaf) or a merge of two nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Node {
    weight: u64,
    /// `(left, right)` node numbers for a merge; `None` for a leaf.
    children: Option<(usize, usize)>,
}

/// The per-source counts of the first `n` samples of a mixture for one
/// weight vector. See the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allocation {
    /// Leaves `0..sources` (the sources), then the merges in order; the
    /// root is last.
    nodes: Vec<Node>,
    sources: usize,
}

impl Allocation {
    /// The allocation for `weights`, one per source. Errors if there is no
    /// weight, more than [`MAX_SOURCES`], or a weight is not finite and
    /// positive, or too small beside the largest to be represented.
    pub fn new(weights: &[f64]) -> Result<Allocation, SamplerError> {
        let integers = integer_weights(weights)?;
        let sources = integers.len();
        let leaves: Vec<Node> = integers.iter().map(|&weight| Node { weight, children: None }).collect();
        // Huffman: repeatedly merge the two lightest open nodes (lower node
        // number first on ties). O(sources^2), once per weight vector.
        let mut nodes = leaves.clone();
        let mut open: Vec<usize> = (0..sources).collect();
        while open.len() > 1 {
            let a = take_lightest(&mut open, &nodes);
            let b = take_lightest(&mut open, &nodes);
            let weight = nodes[a].weight + nodes[b].weight;
            nodes.push(Node { weight, children: Some((a, b)) });
            open.push(nodes.len() - 1);
        }
        let mut best = Allocation { nodes, sources };
        // Four sources: each pairing puts every source at depth 2, where
        // its bound is below 2 (Huffman's chain can reach 2.5); the pairing
        // with the smallest largest bound is taken if it beats Huffman's.
        if sources == 4 {
            for (a, b, c, d) in [(0, 1, 2, 3), (0, 2, 1, 3), (0, 3, 1, 2)] {
                let mut nodes = leaves.clone();
                let (left, right) = (integers[a] + integers[b], integers[c] + integers[d]);
                nodes.push(Node { weight: left, children: Some((a, b)) });
                nodes.push(Node { weight: right, children: Some((c, d)) });
                nodes.push(Node { weight: left + right, children: Some((4, 5)) });
                let pairing = Allocation { nodes, sources };
                if pairing.largest_bound() < best.largest_bound() {
                    best = pairing;
                }
            }
        }
        Ok(best)
    }

    fn largest_bound(&self) -> f64 {
        (0..self.sources).filter_map(|i| self.bound(i)).fold(0.0, f64::max)
    }

    /// The number of sources.
    pub fn sources(&self) -> usize {
        self.sources
    }

    /// The integer weights the allocation uses, one per source.
    pub fn weights(&self) -> Vec<u64> {
        self.nodes[..self.sources].iter().map(|n| n.weight).collect()
    }

    /// Writes into `out` (one slot per source) how many of the first `n`
    /// samples each source gets. O(sources). Errors if `out` has the wrong
    /// length.
    pub fn counts(&self, n: u64, out: &mut [u64]) -> Result<(), SamplerError> {
        if out.len() != self.sources {
            return Err(SamplerError::OutputLength { expected: self.sources, got: out.len() });
        }
        if self.sources == 1 {
            out[0] = n;
            return Ok(());
        }
        let mut count = vec![0u64; self.nodes.len()];
        *count.last_mut().expect("a tree has a root") = n;
        // Merges come after their children, so walking back from the root
        // reaches every node after its parent.
        for v in (self.sources..self.nodes.len()).rev() {
            let (left, right) = self.nodes[v].children.expect("a merge has children");
            let total = count[v];
            let to_left = share(total, self.nodes[left].weight, self.nodes[v].weight);
            count[left] = to_left;
            count[right] = total - to_left;
        }
        out.copy_from_slice(&count[..self.sources]);
        Ok(())
    }

    /// Source `source`'s bound: over any window of samples its count is
    /// within less than this of `window * w_source / W`. `None` past the
    /// last source.
    pub fn bound(&self, source: usize) -> Option<f64> {
        if source >= self.sources {
            return None;
        }
        let w = self.nodes[source].weight as f64;
        let root = self.nodes.len() - 1;
        let mut sum = 0.0;
        let mut at = source;
        while at != root {
            sum += w / self.nodes[at].weight as f64;
            at = self.parent(at);
        }
        Some(sum)
    }

    fn parent(&self, node: usize) -> usize {
        (self.sources..self.nodes.len())
            .find(|&v| self.nodes[v].children.is_some_and(|(l, r)| l == node || r == node))
            .expect("every node but the root has a parent")
    }
}

/// `round(total * part / whole)`, halves up, exactly (`part <= whole`, so at
/// most `total`).
fn share(total: u64, part: u64, whole: u64) -> u64 {
    let (total, part, whole) = (u128::from(total), u128::from(part), u128::from(whole));
    ((2 * total * part + whole) / (2 * whole)) as u64
}

fn take_lightest(open: &mut Vec<usize>, nodes: &[Node]) -> usize {
    let at = (0..open.len()).min_by_key(|&k| (nodes[open[k]].weight, open[k])).expect("two open nodes");
    open.swap_remove(at)
}

/// The weights as integers (see the module docs), checked.
fn integer_weights(weights: &[f64]) -> Result<Vec<u64>, SamplerError> {
    if weights.is_empty() {
        return Err(SamplerError::NoWeights);
    }
    if weights.len() > MAX_SOURCES {
        return Err(SamplerError::TooManySources { count: weights.len(), max: MAX_SOURCES });
    }
    for (source, &weight) in weights.iter().enumerate() {
        if !(weight.is_finite() && weight > 0.0) {
            return Err(SamplerError::BadWeight { segment: 0, source, weight });
        }
    }
    let max = weights.iter().copied().fold(0.0, f64::max);
    for digits in 0..=9 {
        let scale = 10f64.powi(digits);
        // Each whole weight exact in an f64, and their sum (every node's
        // weight) below 2^62, so that `share` stays inside a u128.
        if max * scale > EXACT || max * scale * weights.len() as f64 > (1u64 << 62) as f64 {
            break;
        }
        let whole: Option<Vec<u64>> = weights
            .iter()
            .map(|&w| {
                let x = w * scale;
                let r = x.round();
                // Whole to a few units in the last place: 0.7 * 10 is 7.000000000000001.
                ((x - r).abs() <= 4.0 * f64::EPSILON * x && r >= 1.0).then_some(r as u64)
            })
            .collect();
        if let Some(whole) = whole {
            return Ok(whole);
        }
    }
    weights
        .iter()
        .enumerate()
        .map(|(source, &w)| {
            let scaled = (w / max * SCALE).round();
            if scaled < 1.0 {
                Err(SamplerError::BadWeight { segment: 0, source, weight: w })
            } else {
                Ok(scaled as u64)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_become_the_integers_they_name() {
        assert_eq!(integer_weights(&[3.0, 1.0]).unwrap(), [3, 1]);
        assert_eq!(integer_weights(&[0.7, 0.3]).unwrap(), [7, 3]);
        assert_eq!(integer_weights(&[0.5, 0.25, 0.125]).unwrap(), [500, 250, 125]);
        let odd = integer_weights(&[1.0, std::f64::consts::PI]).unwrap();
        assert_eq!(odd[1], 1 << 40);
        assert_eq!(odd[0], ((1u64 << 40) as f64 / std::f64::consts::PI).round() as u64);
    }

    #[test]
    fn a_huffman_tree_merges_the_lightest_first() {
        let a = Allocation::new(&[1.0, 10.0, 100.0, 1000.0, 10000.0]).unwrap();
        let weights: Vec<u64> = a.nodes.iter().map(|n| n.weight).collect();
        assert_eq!(weights, [1, 10, 100, 1000, 10000, 11, 111, 1111, 11111]);
        assert!((a.bound(1).unwrap() - (1.0 + 10.0 / 11.0 + 10.0 / 111.0 + 10.0 / 1111.0)).abs() < 1e-12);
        assert_eq!(a.bound(4).unwrap(), 1.0);
        assert_eq!(a.bound(5), None);
    }

    #[test]
    fn four_sources_take_a_pairing_when_huffman_chains_them() {
        // Huffman: ((1, 1000), 1000), 2000): source 1 at depth 3, bound 2.4985.
        let a = Allocation::new(&[1.0, 1000.0, 1000.0, 2000.0]).unwrap();
        let weights: Vec<u64> = a.nodes.iter().map(|n| n.weight).collect();
        assert_eq!(weights, [1, 1000, 1000, 2000, 1001, 3000, 4001]);
        assert!(a.largest_bound() < 2.0);
        // Where Huffman is already better, it stays.
        let b = Allocation::new(&[1.0, 1.0, 1.0, 100.0]).unwrap();
        assert_eq!(b.nodes.iter().map(|n| n.weight).collect::<Vec<_>>(), [1, 1, 1, 100, 2, 3, 103]);
    }

    #[test]
    fn shares_round_half_up() {
        assert_eq!(share(3, 1, 2), 2);
        assert_eq!(share(2, 1, 4), 1);
        assert_eq!(share(1, 1, 4), 0);
        assert_eq!(share(u64::MAX, 1, 1), u64::MAX);
    }
}
