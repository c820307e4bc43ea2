//! [`Mixture`]: a loader's streams drawn from several sources by weights.
//!
//! Every source is a set of streams with the same names, dtypes and shapes
//! (one dataset per stream name). Each step's samples are shared out among
//! the sources by the [`MixedSampler`] (proportions exact over every window
//! of steps, up to a bound: below 1 sample for two sources, 2 for three
//! or four); each source's records come from its own sampler, in its own
//! mode. The loader's batch holds this host's samples source after source,
//! one column per stream name, and [`Batch::source`] says which source
//! each record is from.
//!
//! ```
//! use loaderx::dataset::{Dataset, WriteOptions, write_dataset};
//! use loaderx::loader::{DataLoader, Mixture};
//! let dir = tempfile::tempdir()?;
//! let (a, b) = (dir.path().join("a"), dir.path().join("b"));
//! write_dataset(&a, &(0..100).collect::<Vec<i64>>(), &[], &WriteOptions::default())?;
//! write_dataset(&b, &(1000..1050).collect::<Vec<i64>>(), &[], &WriteOptions::default())?;
//! let mixture = Mixture::new([3.0, 1.0])
//!     .source([("x", Dataset::open(&a)?)])
//!     .source([("x", Dataset::open(&b)?)])
//!     .weights_from(100, [1.0, 1.0]); // from step 100 on, half and half
//! let mut loader = DataLoader::builder().mixture(mixture).batch_size(8).seed(7).build()?;
//! let batch = loader.next_batch()?;
//! let source = batch.source().unwrap();
//! assert_eq!(source.iter().filter(|&&s| s == 0).count(), 6); // 3/4 of 8
//! let x = batch.dense("x").unwrap().as_slice::<i64>()?;
//! for (k, &value) in x.iter().enumerate() {
//!     assert_eq!(value >= 1000, source[k] == 1);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::sync::Arc;
use std::time::Instant;

use super::batch::{Batch, Column, Stream};
use super::error::LoaderError;
use super::skip;
use super::state::{SourceIdentity, StreamIdentity};
use crate::dataset::{Dataset, Pool, RaggedDataset};
use crate::sampler::{Draw, MixedSampler, Mode};

/// Sources of streams and their weights over steps; given to
/// [`LoaderBuilder::mixture`](super::LoaderBuilder::mixture) in place of
/// streams. See the [module docs](self).
#[derive(Clone, Debug)]
pub struct Mixture {
    sources: Vec<Source>,
    schedule: Vec<(u64, Vec<f64>)>,
}

/// One source: its streams by name, and its mode if not the loader's.
type Source = (Vec<(String, Stream)>, Option<Mode>);

impl Mixture {
    /// A mixture with `weights` from step 0 on, one per source (added with
    /// [`source`](Self::source), in that order). Weights are relative
    /// (`[3, 1]` is three quarters and a quarter) and must be finite and
    /// positive; the loader's `build` checks them.
    pub fn new(weights: impl Into<Vec<f64>>) -> Mixture {
        Mixture { sources: Vec::new(), schedule: vec![(0, weights.into())] }
    }

    /// Adds a source: its streams by name, sampled in the loader's mode.
    pub fn source<N: Into<String>, S: Into<Stream>>(self, streams: impl IntoIterator<Item = (N, S)>) -> Mixture {
        self.add(streams, None)
    }

    /// Adds a source sampled in `mode` rather than the loader's.
    pub fn source_in_mode<N: Into<String>, S: Into<Stream>>(
        self,
        streams: impl IntoIterator<Item = (N, S)>,
        mode: Mode,
    ) -> Mixture {
        self.add(streams, Some(mode))
    }

    fn add<N: Into<String>, S: Into<Stream>>(
        mut self,
        streams: impl IntoIterator<Item = (N, S)>,
        mode: Option<Mode>,
    ) -> Mixture {
        let streams = streams.into_iter().map(|(n, s)| (n.into(), s.into())).collect();
        self.sources.push((streams, mode));
        self
    }

    /// From step `step` on, `weights`: the batches before `step` stay what
    /// they were, the ones after follow these weights, each source's count
    /// continuing from its count at `step`. Steps go up from one call to
    /// the next.
    pub fn weights_from(mut self, step: u64, weights: impl Into<Vec<f64>>) -> Mixture {
        self.schedule.push((step, weights.into()));
        self
    }

    /// The number of sources.
    pub fn len(&self) -> usize {
        self.sources.len()
    }

    /// True if no source was added.
    pub fn is_empty(&self) -> bool {
        self.sources.is_empty()
    }

    /// The weight schedule: `(start_step, weights)`, the first at step 0.
    pub fn schedule(&self) -> &[(u64, Vec<f64>)] {
        &self.schedule
    }

    /// What each source's streams hold, for a [`LoaderState`](super::LoaderState).
    pub(super) fn identity(&self) -> Vec<SourceIdentity> {
        let identity = |(streams, mode): &Source| SourceIdentity {
            mode: *mode,
            streams: streams.iter().map(|(n, s)| StreamIdentity::of(n, s)).collect(),
        };
        self.sources.iter().map(identity).collect()
    }

    /// Checks the sources against each other and the weights, as `build`
    /// does (which checks them again against its batch size and hosts).
    pub fn check(&self) -> Result<(), LoaderError> {
        self.clone().plan(1, Mode::Iid, 0).map(|_| ())
    }

    /// Checks the sources against each other and makes the sampler.
    pub(super) fn plan(self, batch: usize, mode: Mode, seed: u64) -> Result<Mixed, LoaderError> {
        let Some((first, _)) = self.sources.first() else {
            return Err(LoaderError::NoSources);
        };
        let names: Vec<String> = first.iter().map(|(n, _)| n.clone()).collect();
        let mut sources = Vec::with_capacity(self.sources.len());
        let mut lens = Vec::with_capacity(self.sources.len());
        for (k, (streams, _)) in self.sources.iter().enumerate() {
            let len = super::check_streams(streams)?;
            sources.push(in_order(k, streams, first, &names)?);
            lens.push(len);
        }
        let modes: Vec<Mode> = self.sources.iter().map(|(_, m)| m.unwrap_or(mode)).collect();
        let sampler = MixedSampler::new(&lens, &modes, seed, batch, &self.schedule)?;
        Ok(Mixed { names, sources, sampler })
    }
}

/// Source `k`'s streams in the order of source 0's names, each checked to
/// hold the same records as source 0's stream of that name.
fn in_order(
    k: usize,
    streams: &[(String, Stream)],
    first: &[(String, Stream)],
    names: &[String],
) -> Result<Vec<Stream>, LoaderError> {
    let mut got: Vec<String> = streams.iter().map(|(n, _)| n.clone()).collect();
    let mut expected = names.to_vec();
    got.sort();
    expected.sort();
    if got != expected {
        return Err(LoaderError::SourceStreams { source: k, expected, got });
    }
    let mut out = Vec::with_capacity(names.len());
    for (name, model) in first {
        let stream = &streams.iter().find(|(n, _)| n == name).expect("the same names").1;
        let (want, have) = (describe(model), describe(stream));
        if want != have {
            return Err(LoaderError::SourceSchema { source: k, stream: name.clone(), expected: want, got: have });
        }
        out.push(stream.clone());
    }
    Ok(out)
}

/// What a stream's records are: kind, dtype, shape.
fn describe(stream: &Stream) -> String {
    match stream {
        Stream::Fixed(d) => format!("{} records of shape {:?}", d.dtype(), d.shape()),
        Stream::Ragged(d) => format!("ragged {} records of rows of shape {:?}", d.dtype(), d.item_shape()),
    }
}

/// A checked mixture: what the workers need.
pub(super) struct Mixed {
    /// The stream names (the batch's columns), in source 0's order.
    names: Vec<String>,
    /// Per source, its streams in `names` order.
    sources: Vec<Vec<Stream>>,
    pub(super) sampler: MixedSampler,
}

impl Mixed {
    /// This host's share (`Sampler::shard`'s checks).
    pub(super) fn shard(self, index: usize, count: usize) -> Result<Mixed, LoaderError> {
        let sampler = self.sampler.shard(index, count)?;
        Ok(Mixed { sampler, ..self })
    }

    /// Every source's streams.
    pub(super) fn streams(&self) -> Vec<&Stream> {
        self.sources.iter().flatten().collect()
    }

    /// The number of streams (columns).
    pub(super) fn columns(&self) -> usize {
        self.names.len()
    }

    /// The batch of `step` before any transform: this host's samples,
    /// every stream gathered from each source's datasets in turn. Sets
    /// `sampled` to the time the samples were drawn. With `skip`, a damaged
    /// record is replaced from its own source ([`skip`](super::skip)).
    pub(super) fn gather(
        &self,
        step: u64,
        pools: &[Option<Arc<Pool>>],
        sampled: &mut Instant,
        skip: bool,
    ) -> Result<Batch, LoaderError> {
        let Draw { sources, mut indices, counts } = self.sampler.draw(step)?;
        *sampled = Instant::now();
        // A replacement comes from the damaged record's own source.
        let len_of = |k: usize| self.sources[sources[k] as usize][0].len();
        let readable = |k: usize, index: u64| {
            let source = sources[k] as usize;
            for (column, name) in self.names.iter().enumerate() {
                let stream = format!("{name} (source {source})");
                if !skip::judge(self.sources[source][column].gather(&[index], None), step, &stream)? {
                    return Ok(false);
                }
            }
            Ok(true)
        };
        let gather = |indices: &[u64]| self.gather_columns(step, indices, &counts, pools);
        let (batch, skipped) = skip::gather_skipping(skip, &mut indices, gather, len_of, readable)?;
        Ok(Batch::with_indices(batch, indices).with_source(sources).with_skipped(skipped))
    }

    /// Every column of the batch of `indices`, `counts[s]` of them from
    /// source `s` in turn.
    fn gather_columns(
        &self,
        step: u64,
        indices: &[u64],
        counts: &[usize],
        pools: &[Option<Arc<Pool>>],
    ) -> Result<Batch, LoaderError> {
        let mut batch = Batch::new(step, Vec::new());
        for (column, name) in self.names.iter().enumerate() {
            let gathered = self.gather_column(column, indices, counts, pools[column].as_ref());
            let gathered = gathered.map_err(|(source, e)| LoaderError::Gather {
                step,
                stream: format!("{name} (source {source})"),
                source: e,
            })?;
            batch.insert(name.clone(), gathered);
        }
        Ok(batch)
    }

    fn gather_column(
        &self,
        column: usize,
        indices: &[u64],
        counts: &[usize],
        pool: Option<&Arc<Pool>>,
    ) -> Result<Column, (usize, crate::dataset::DatasetError)> {
        let mut runs = Vec::with_capacity(self.sources.len());
        let mut at = 0;
        for (source, &n) in counts.iter().enumerate() {
            runs.push((source, &indices[at..at + n]));
            at += n;
        }
        let kept: Vec<(usize, &[u64])> = runs.into_iter().filter(|(_, r)| !r.is_empty()).collect();
        match &self.sources[0][column] {
            Stream::Fixed(_) => {
                let parts: Vec<(&Dataset, &[u64])> =
                    kept.iter().map(|&(s, r)| (fixed(&self.sources[s][column]), r)).collect();
                Dataset::gather_parts(&parts, pool).map(Column::Dense).map_err(|(k, e)| (kept[k].0, e))
            }
            Stream::Ragged(_) => {
                let parts: Vec<(&RaggedDataset, &[u64])> =
                    kept.iter().map(|&(s, r)| (ragged(&self.sources[s][column]), r)).collect();
                RaggedDataset::gather_parts(&parts, pool).map(Column::Ragged).map_err(|(k, e)| (kept[k].0, e))
            }
        }
    }
}

fn fixed(stream: &Stream) -> &Dataset {
    match stream {
        Stream::Fixed(d) => d,
        Stream::Ragged(_) => unreachable!("checked at build: a column's streams are all of one kind"),
    }
}

fn ragged(stream: &Stream) -> &RaggedDataset {
    match stream {
        Stream::Ragged(d) => d,
        Stream::Fixed(_) => unreachable!("checked at build: a column's streams are all of one kind"),
    }
}
