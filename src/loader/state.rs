//! [`LoaderState`]: a loader's checkpoint, and the one check that a saved
//! state fits the loader it is loaded into.
//!
//! A loader's batches are a pure function of (seed, step, sharding, data),
//! so its state is small: the step of the next batch, and what the batch
//! of a step depends on, which a resumed loader must share. That is the
//! seed (but in sequential mode, which ignores it), the mode, the global
//! batch size (a step is one global batch, so another size moves every
//! record), and the identity of the sources: each stream's name, kind,
//! dtype, record shape and length, and a mixture's weight schedule and
//! per-source modes. The sharding is recorded but may differ on resume
//! (elastic resume): every host's slice is cut from the same global batch.
//!
//! The state's serialized form is a small JSON object
//! ([`LoaderState::to_json`]), which the Python binding hands out as a
//! dict (`DataLoader.state_dict()`); [`LoaderState::from_json`] reads it
//! back as untrusted input.

use serde_json::{Value, json};

use super::batch::Stream;
use super::error::LoaderError;
use crate::sampler::Mode;

/// The `format` field of a serialized state.
pub const STATE_FORMAT: &str = "loaderx.loader_state";
/// The version of the serialized state this build writes and reads.
pub const STATE_VERSION: u64 = 1;
/// The most streams (summed over sources) a serialized state may name,
/// and the most entries of a mixture's schedule: bounds what a foreign
/// state can make us allocate.
pub const STATE_ITEMS_MAX: usize = 1 << 16;

/// A mixture's weights over steps: `(start_step, weights)`, as
/// [`Mixture::schedule`](super::Mixture::schedule) gives them.
pub type Weights = Vec<(u64, Vec<f64>)>;

/// A loader's checkpoint: see the [module docs](self).
#[derive(Clone, Debug, PartialEq)]
pub struct LoaderState {
    /// The step of the next batch.
    pub step: u64,
    /// The sampler's seed.
    pub seed: u64,
    /// The sampler's mode.
    pub mode: Mode,
    /// Records per global batch (across all shards).
    pub batch_size: usize,
    /// `(index, count)` of the host that saved it.
    pub shard: (usize, usize),
    /// The streams: one source without a mixture, one per mixture source.
    pub sources: Vec<SourceIdentity>,
    /// A mixture's weight schedule (`(start_step, weights)`); `None`
    /// without a mixture.
    pub schedule: Option<Weights>,
}

/// What a source's streams hold.
#[derive(Clone, Debug, PartialEq)]
pub struct SourceIdentity {
    /// A mixture source's own mode, if not the loader's.
    pub mode: Option<Mode>,
    /// Its streams, in the loader's order.
    pub streams: Vec<StreamIdentity>,
}

/// What one stream holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamIdentity {
    /// The stream's name.
    pub name: String,
    /// Ragged (rows per record) or fixed.
    pub ragged: bool,
    /// NumPy's `dtype.str` of its elements.
    pub dtype: String,
    /// A record's shape (fixed) or a row's (ragged).
    pub shape: Vec<usize>,
    /// Its records.
    pub len: u64,
}

impl StreamIdentity {
    /// The identity of `stream`, named `name`.
    pub fn of(name: &str, stream: &Stream) -> StreamIdentity {
        let (ragged, dtype, shape) = match stream {
            Stream::Fixed(d) => (false, d.dtype(), d.shape().to_vec()),
            Stream::Ragged(d) => (true, d.dtype(), d.item_shape().to_vec()),
        };
        StreamIdentity { name: name.to_string(), ragged, dtype: dtype.to_string(), shape, len: stream.len() }
    }

    fn describe(&self) -> String {
        let kind = if self.ragged { "ragged records of rows" } else { "records" };
        format!("{} {kind} of shape {:?}, {} records", self.dtype, self.shape, self.len)
    }
}

/// The name of a mode in a serialized state (the reference's names).
pub fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Sequential => "sequential",
        Mode::Iid => "iid",
        Mode::Cyclic => "cyclic",
    }
}

fn parse_mode(name: &str) -> Result<Mode, LoaderError> {
    match name {
        "sequential" => Ok(Mode::Sequential),
        "iid" => Ok(Mode::Iid),
        "cyclic" => Ok(Mode::Cyclic),
        _ => Err(invalid(format!("mode {name:?} is none of \"sequential\", \"iid\", \"cyclic\""))),
    }
}

fn invalid(what: String) -> LoaderError {
    LoaderError::State(format!("not a loader state: {what}"))
}

fn mismatch(what: String) -> LoaderError {
    LoaderError::State(format!("the state does not fit this loader: {what}"))
}

impl LoaderState {
    /// Checks that this (saved) state fits `current`, the state of the
    /// loader it is loaded into: the same batches at every step, up to
    /// the sharding, which may differ.
    pub fn check_fits(&self, current: &LoaderState) -> Result<(), LoaderError> {
        if self.batch_size != current.batch_size {
            return Err(mismatch(format!(
                "it was saved with batch_size={} and this loader has batch_size={}: a step is one global batch, \
                 so a step of one is not a step of the other (the shard count may differ, the global batch may not)",
                self.batch_size, current.batch_size
            )));
        }
        if self.mode != current.mode {
            return Err(mismatch(format!(
                "it was saved in mode {:?} and this loader's mode is {:?}",
                mode_name(self.mode),
                mode_name(current.mode)
            )));
        }
        let seeded = self.mode != Mode::Sequential || self.sources.iter().any(|s| s.mode.is_some());
        if seeded && self.seed != current.seed {
            return Err(mismatch(format!(
                "it was saved with seed={} and this loader has seed={}: build the loader with seed={}",
                self.seed, current.seed, self.seed
            )));
        }
        self.check_sources(current)
    }

    fn check_sources(&self, current: &LoaderState) -> Result<(), LoaderError> {
        match (&self.schedule, &current.schedule) {
            (None, Some(_)) => {
                return Err(mismatch("it is of a loader over streams, this one is over a Mixture".into()));
            }
            (Some(_), None) => {
                return Err(mismatch("it is of a loader over a Mixture, this one is over streams".into()));
            }
            (Some(a), Some(b)) if a != b => {
                return Err(mismatch(format!("its mixture's weight schedule is {a:?}, this loader's is {b:?}")));
            }
            _ => {}
        }
        if self.sources.len() != current.sources.len() {
            return Err(mismatch(format!(
                "it has {} mixture sources, this loader has {}",
                self.sources.len(),
                current.sources.len()
            )));
        }
        for (k, (saved, now)) in self.sources.iter().zip(&current.sources).enumerate() {
            let at = if self.schedule.is_some() { format!("mixture source {k}: ") } else { String::new() };
            if saved.mode != now.mode {
                return Err(mismatch(format!("{at}its mode is {:?}, this loader's is {:?}", saved.mode, now.mode)));
            }
            check_streams(&at, &saved.streams, &now.streams)?;
        }
        Ok(())
    }
}

/// The same streams, in any order: by name, each with the same identity.
fn check_streams(at: &str, saved: &[StreamIdentity], now: &[StreamIdentity]) -> Result<(), LoaderError> {
    let names = |s: &[StreamIdentity]| {
        let mut names: Vec<String> = s.iter().map(|i| i.name.clone()).collect();
        names.sort();
        names
    };
    if names(saved) != names(now) {
        return Err(mismatch(format!(
            "{at}it is of streams {:?}, this loader has {:?}: is it another dataset's?",
            names(saved),
            names(now)
        )));
    }
    for s in saved {
        let n = now.iter().find(|n| n.name == s.name).expect("the same names");
        if s != n {
            return Err(mismatch(format!(
                "{at}stream {:?} held {} and now holds {}: is it another dataset's, or was the dataset written to \
                 since?",
                s.name,
                s.describe(),
                n.describe()
            )));
        }
    }
    Ok(())
}

impl LoaderState {
    /// The state as a JSON object (see `docs/loader.md`, "Checkpoints").
    pub fn to_json(&self) -> Value {
        let sources: Vec<Value> = self.sources.iter().map(source_json).collect();
        let schedule = self.schedule.as_ref().map(|s| s.iter().map(|(step, w)| json!([step, w])).collect::<Vec<_>>());
        json!({
            "format": STATE_FORMAT,
            "version": STATE_VERSION,
            "step": self.step,
            "seed": self.seed,
            "mode": mode_name(self.mode),
            "batch_size": self.batch_size,
            "shard_index": self.shard.0,
            "shard_count": self.shard.1,
            "sources": sources,
            "schedule": schedule,
        })
    }

    /// Reads a state that [`to_json`](Self::to_json) wrote: every field is
    /// checked, and anything else is [`LoaderError::State`].
    pub fn from_json(value: &Value) -> Result<LoaderState, LoaderError> {
        let object = value.as_object().ok_or_else(|| invalid("not an object".into()))?;
        let format = object.get("format").and_then(Value::as_str);
        if format != Some(STATE_FORMAT) {
            return Err(invalid(format!("its \"format\" is {format:?}, not {STATE_FORMAT:?}")));
        }
        let version = u64_field(value, "version")?;
        if version != STATE_VERSION {
            return Err(invalid(format!(
                "it is of version {version}, and this build reads version {STATE_VERSION}: load it with the \
                 version of loaderx_rs that saved it"
            )));
        }
        let sources = items(value, "sources")?.iter().map(source_from_json).collect::<Result<Vec<_>, _>>()?;
        let streams: usize = sources.iter().map(|s| s.streams.len()).sum();
        if sources.is_empty() || streams > STATE_ITEMS_MAX {
            return Err(invalid(format!("it has {} sources of {streams} streams", sources.len())));
        }
        Ok(LoaderState {
            step: u64_field(value, "step")?,
            seed: u64_field(value, "seed")?,
            mode: parse_mode(str_field(value, "mode")?)?,
            batch_size: usize_field(value, "batch_size")?,
            shard: (usize_field(value, "shard_index")?, usize_field(value, "shard_count")?),
            sources,
            schedule: schedule_from_json(value.get("schedule"))?,
        })
    }
}

fn source_json(source: &SourceIdentity) -> Value {
    let streams: Vec<Value> = source
        .streams
        .iter()
        .map(|s| {
            let kind = if s.ragged { "ragged" } else { "fixed" };
            json!({"name": s.name, "kind": kind, "dtype": s.dtype, "shape": s.shape, "len": s.len})
        })
        .collect();
    json!({"mode": source.mode.map(mode_name), "streams": streams})
}

fn source_from_json(value: &Value) -> Result<SourceIdentity, LoaderError> {
    let mode = match value.get("mode") {
        None | Some(Value::Null) => None,
        Some(_) => Some(parse_mode(str_field(value, "mode")?)?),
    };
    let streams = items(value, "streams")?.iter().map(stream_from_json).collect::<Result<Vec<_>, _>>()?;
    Ok(SourceIdentity { mode, streams })
}

fn stream_from_json(value: &Value) -> Result<StreamIdentity, LoaderError> {
    let ragged = match str_field(value, "kind")? {
        "fixed" => false,
        "ragged" => true,
        other => return Err(invalid(format!("a stream's kind is {other:?}, not \"fixed\" or \"ragged\""))),
    };
    let shape = items(value, "shape")?
        .iter()
        .map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok()))
        .collect::<Option<Vec<usize>>>()
        .ok_or_else(|| invalid("a stream's shape is not a list of sizes".into()))?;
    Ok(StreamIdentity {
        name: str_field(value, "name")?.to_string(),
        ragged,
        dtype: str_field(value, "dtype")?.to_string(),
        shape,
        len: u64_field(value, "len")?,
    })
}

fn schedule_from_json(value: Option<&Value>) -> Result<Option<Weights>, LoaderError> {
    let Some(entries) = value.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let bad = || invalid("its \"schedule\" is not a list of [step, [weights]]".into());
    let entries = entries.as_array().filter(|e| e.len() <= STATE_ITEMS_MAX).ok_or_else(bad)?;
    let mut schedule = Vec::with_capacity(entries.len());
    for entry in entries {
        let Some([step, weights]) = entry.as_array().map(Vec::as_slice) else {
            return Err(bad());
        };
        let weights = weights.as_array().filter(|w| w.len() <= STATE_ITEMS_MAX).ok_or_else(bad)?;
        let weights = weights.iter().map(Value::as_f64).collect::<Option<Vec<f64>>>().ok_or_else(bad)?;
        schedule.push((step.as_u64().ok_or_else(bad)?, weights));
    }
    Ok(Some(schedule))
}

fn field<'v>(value: &'v Value, name: &str) -> Result<&'v Value, LoaderError> {
    value.get(name).ok_or_else(|| invalid(format!("it has no {name:?}")))
}

fn u64_field(value: &Value, name: &str) -> Result<u64, LoaderError> {
    field(value, name)?.as_u64().ok_or_else(|| invalid(format!("its {name:?} is not a non-negative integer")))
}

fn usize_field(value: &Value, name: &str) -> Result<usize, LoaderError> {
    usize::try_from(u64_field(value, name)?).map_err(|_| invalid(format!("its {name:?} is too large")))
}

fn str_field<'v>(value: &'v Value, name: &str) -> Result<&'v str, LoaderError> {
    field(value, name)?.as_str().ok_or_else(|| invalid(format!("its {name:?} is not a string")))
}

fn items<'v>(value: &'v Value, name: &str) -> Result<&'v [Value], LoaderError> {
    let list = field(value, name)?.as_array().ok_or_else(|| invalid(format!("its {name:?} is not a list")))?;
    if list.len() > STATE_ITEMS_MAX {
        return Err(invalid(format!("its {name:?} has {} items", list.len())));
    }
    Ok(list)
}

impl std::str::FromStr for LoaderState {
    type Err = LoaderError;

    /// Reads a state from JSON text ([`LoaderState::from_json`]).
    fn from_str(text: &str) -> Result<LoaderState, LoaderError> {
        let value: Value = serde_json::from_str(text).map_err(|e| invalid(format!("not JSON: {e}")))?;
        LoaderState::from_json(&value)
    }
}
