//! What the subcommands share: the CLI's own error, byte counts and rates for
//! people, JSON objects for scripts, the progress bar, writing to stdout.

use std::error::Error as StdError;
use std::fmt;
use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressState, ProgressStyle};
use loaderx::io::Vfs;
use loaderx::io::real::RealFs;
#[cfg(feature = "remote")]
use loaderx::io::remote::{RemoteFs, RemoteOptions, is_url};
use loaderx::{Options, ReadMode, Zrecord};

/// An error the CLI itself detects, with the error that caused it if any.
#[derive(Debug)]
pub struct CliError {
    message: String,
    source: Option<Box<dyn StdError>>,
}

impl CliError {
    pub fn new(message: impl Into<String>) -> CliError {
        CliError { message: message.into(), source: None }
    }

    pub fn with_source(message: impl Into<String>, source: impl StdError + 'static) -> CliError {
        CliError { message: message.into(), source: Some(Box::new(source)) }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl StdError for CliError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source.as_deref()
    }
}

/// Why a CLI built without the `remote` feature refuses a URL, and what to do.
#[cfg(not(feature = "remote"))]
pub const WITHOUT_REMOTE: &str = "this loaderx was built without the `remote` feature, so it cannot reach \
     object storage: install it with `cargo install --path cli --features remote`";

/// True for a store named by URL (`s3://bucket/prefix`).
pub fn is_remote(path: &Path) -> bool {
    path.to_str().is_some_and(is_url)
}

/// The URL test of `loaderx::io::remote::is_url`, for a build without the
/// `remote` feature, where that module is absent: a URL is refused with
/// [`WITHOUT_REMOTE`] rather than taken for a directory name.
#[cfg(not(feature = "remote"))]
fn is_url(path: &str) -> bool {
    path.starts_with("s3://") || path.starts_with("s3a://")
}

/// The filesystem of the published store at `url`, and the path it is open at.
#[cfg(feature = "remote")]
fn connect(path: &Path, url: &str) -> Result<(Arc<dyn Vfs>, PathBuf), loaderx::Error> {
    let fs = RemoteFs::connect(url, RemoteOptions::from_env()).map_err(|source| loaderx::Error::Io {
        path: path.into(),
        op: "read manifest.json",
        source,
    })?;
    let root = PathBuf::from(fs.root());
    Ok((Arc::new(fs), root))
}

/// Without the `remote` feature, a URL is an error that says how to get it.
#[cfg(not(feature = "remote"))]
fn connect(path: &Path, _url: &str) -> Result<(Arc<dyn Vfs>, PathBuf), loaderx::Error> {
    let source = io::Error::new(io::ErrorKind::Unsupported, WITHOUT_REMOTE);
    Err(loaderx::Error::Io { path: path.into(), op: "read manifest.json", source })
}

/// The store at `path` (a directory, or the URL of a published store),
/// open read-only with reads in `read_mode`; the filesystem it is on and
/// the path it is open at.
pub fn open_read_only(path: &Path, read_mode: ReadMode) -> Result<(Zrecord, Arc<dyn Vfs>, PathBuf), loaderx::Error> {
    let (vfs, at): (Arc<dyn Vfs>, PathBuf) = match path.to_str().filter(|p| is_url(p)) {
        Some(url) => connect(path, url)?,
        None => (Arc::new(RealFs), path.to_path_buf()),
    };
    let store = Zrecord::open_in(vfs.clone(), &at, Options { read_only: true, read_mode, ..Options::default() })?;
    Ok((store, vfs, at))
}

/// Checks that `path` holds a store before a command opens it for writing
/// (which would create one): a read-only open, which takes no writer flock
/// and holds the readers' lock only until it returns (waiting for a delete
/// or compaction elsewhere if `wait`). A store with an interrupted delete
/// or compaction pending passes: the open for writing finishes it.
pub fn require_store(path: &Path, wait: bool) -> Result<(), loaderx::Error> {
    match Zrecord::open_with(path, Options { read_only: true, wait, ..Options::default() }) {
        Ok(_) | Err(loaderx::Error::RecoveryNeeded { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Opens the store at `path` for a delete or compaction, which waits for
/// readers elsewhere to close if `wait` (and fails at once otherwise).
pub fn open_to_mutate(path: &Path, wait: bool) -> Result<Zrecord, loaderx::Error> {
    require_store(path, wait)?;
    Zrecord::open_with(path, Options { wait, ..Options::default() })
}

/// `12345 (12.1 KiB)`; below 1 KiB just `N B`.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    format!("{bytes} ({v:.1} {})", UNITS[unit])
}

pub const MIB: f64 = (1u64 << 20) as f64;

/// `count / seconds`, 0 for an empty interval.
pub fn per_second(count: f64, elapsed: Duration) -> f64 {
    let s = elapsed.as_secs_f64();
    if s > 0.0 { count / s } else { 0.0 }
}

/// A JSON object written field by field, keys in the order given.
pub struct Json(String);

impl Json {
    pub fn object() -> Json {
        Json(String::from("{"))
    }

    fn key(&mut self, key: &str) {
        if self.0.len() > 1 {
            self.0.push(',');
        }
        self.0.push_str(&serde_json::Value::from(key).to_string());
        self.0.push(':');
    }

    /// A field with any value serde_json makes (numbers, strings, bools,
    /// `Option`s as `null`, vectors as arrays; a non-finite float is `null`).
    pub fn field(mut self, key: &str, value: impl Into<serde_json::Value>) -> Json {
        self.key(key);
        self.0.push_str(&value.into().to_string());
        self
    }

    /// A field whose value is already JSON text (a nested object or array).
    pub fn raw(mut self, key: &str, json: &str) -> Json {
        self.key(key);
        self.0.push_str(json);
        self
    }

    pub fn finish(mut self) -> String {
        self.0.push('}');
        self.0
    }
}

/// A JSON array of already-rendered values.
pub fn json_array(items: impl IntoIterator<Item = String>) -> String {
    let items: Vec<String> = items.into_iter().collect();
    format!("[{}]", items.join(","))
}

/// Rows `key value`, keys padded to one column.
pub fn table(rows: &[(&str, String)]) -> String {
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0).max(14);
    rows.iter().map(|(k, v)| format!("{k:<width$} {v}\n")).collect()
}

/// Writes `text` to stdout and flushes.
pub fn print(text: &str) -> io::Result<()> {
    let mut stdout = io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()
}

/// A progress bar on stderr, or `None` when stderr is not a terminal (a
/// pipe, a file, a test): scripts get no control characters.
pub fn progress_bar(len: u64, what: &str, bytes: bool) -> Option<ProgressBar> {
    if !io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::new(len).with_style(bar_style(what, bytes));
    bar.enable_steady_tick(Duration::from_millis(200));
    Some(bar)
}

/// The bar: `what`, elapsed time, the bar, counts with a whole-number rate
/// (indicatif's `{per_sec}` prints four decimals), the time left.
pub fn bar_style(what: &str, bytes: bool) -> ProgressStyle {
    let counts = if bytes { "{bytes}/{total_bytes} ({bytes_per_sec})" } else { "{human_pos}/{human_len} ({rate})" };
    let template = format!("{what} [{{elapsed_precise}}] {{wide_bar}} {counts} eta {{eta}}");
    ProgressStyle::with_template(&template).unwrap_or_else(|_| ProgressStyle::default_bar()).with_key(
        "rate",
        |state: &ProgressState, w: &mut dyn fmt::Write| {
            let _ = w.write_str(&rate(state.per_sec()));
        },
    )
}

/// A phase without counts (a dictionary being trained): `what`, elapsed
/// time, a spinner and `{msg}`.
pub fn phase_style(what: &str) -> ProgressStyle {
    let template = format!("{what} [{{elapsed_precise}}] {{spinner}} {{msg}}");
    ProgressStyle::with_template(&template).unwrap_or_else(|_| ProgressStyle::default_spinner())
}

/// `per_sec` as the bar shows it: whole units with thousands separators.
pub fn rate(per_sec: f64) -> String {
    let whole = if per_sec.is_finite() && per_sec > 0.0 { per_sec.round() as u64 } else { 0 };
    format!("{}/s", indicatif::HumanCount(whole))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_bytes() {
        assert_eq!(human(0), "0 B");
        assert_eq!(human(1023), "1023 B");
        assert_eq!(human(1536), "1536 (1.5 KiB)");
        assert_eq!(human(3 << 30), "3221225472 (3.0 GiB)");
    }

    #[test]
    fn json_objects() {
        let inner = Json::object().field("a", 1u64).finish();
        let text = Json::object()
            .field("s", "q\"\n")
            .field("n", None::<u64>)
            .field("f", f64::NAN)
            .raw("o", &inner)
            .raw("l", &json_array(["1".to_string(), "2".to_string()]))
            .finish();
        assert_eq!(text, r#"{"s":"q\"\n","n":null,"f":null,"o":{"a":1},"l":[1,2]}"#);
        let parsed: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(parsed["o"]["a"], 1);
    }

    #[test]
    fn bar_rates_are_whole_numbers() {
        assert_eq!(rate(1234.5678), "1,235/s");
        assert_eq!(rate(0.4), "0/s");
        assert_eq!(rate(f64::NAN), "0/s");
        // Both templates parse (an unknown key would fall back to the default style).
        for template in ["convert [{elapsed_precise}] {spinner} {msg}", "x {human_pos}/{human_len} ({rate})"] {
            assert!(ProgressStyle::with_template(template).is_ok(), "{template}");
        }
    }

    #[test]
    fn rates() {
        assert_eq!(per_second(10.0, Duration::ZERO), 0.0);
        assert_eq!(per_second(10.0, Duration::from_secs(2)), 5.0);
    }
}
