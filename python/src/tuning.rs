//! The loader's tuning arguments: `num_workers="auto"`,
//! `prefetch_size="auto"` and `memory_budget=` (bytes, or a size such as
//! `"2GiB"`), turned into the crate's [`Autotune`] limits.

use loaderx::loader::{Autotune, Tuning};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::errors::value_error;

/// The budget when tuning without `memory_budget=`.
pub const DEFAULT_BUDGET: u64 = 1 << 30;

/// A count argument that may be `"auto"`: `None` for auto.
pub fn count_or_auto(name: &str, value: &Bound<'_, PyAny>) -> PyResult<Option<usize>> {
    if let Ok(text) = value.extract::<String>() {
        return match text.as_str() {
            "auto" => Ok(None),
            _ => Err(value_error(format!("{name} must be an int or \"auto\", got {text:?}"))),
        };
    }
    match value.extract::<usize>() {
        Ok(n) => Ok(Some(n)),
        Err(_) => Err(PyTypeError::new_err(format!(
            "{name} must be a non-negative int or \"auto\", not {}",
            value.get_type().name()?
        ))),
    }
}

/// Bytes from an int or a size string: a number (decimals allowed) and
/// a unit, `B`, `KB` / `MB` / `GB` / `TB` (powers of 1000) or `KiB` /
/// `MiB` / `GiB` / `TiB` (powers of 1024), case-insensitive.
pub fn byte_size(value: &Bound<'_, PyAny>) -> PyResult<u64> {
    if let Ok(n) = value.extract::<u64>() {
        return Ok(n);
    }
    let Ok(text) = value.extract::<String>() else {
        return Err(PyTypeError::new_err(format!(
            "memory_budget must be bytes (an int) or a size such as \"2GiB\", not {}",
            value.get_type().name()?
        )));
    };
    parse_size(&text).ok_or_else(|| {
        value_error(format!(
            "memory_budget {text:?} is not a size: a number and one of B, KB, MB, GB, TB, KiB, MiB, GiB, TiB"
        ))
    })
}

fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "b" => 1.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        "kib" => 1024.0,
        "mib" => 1024f64.powi(2),
        "gib" => 1024f64.powi(3),
        "tib" => 1024f64.powi(4),
        _ => return None,
    };
    let bytes = (number * scale).round();
    (bytes.is_finite() && bytes >= 0.0 && bytes < u64::MAX as f64).then_some(bytes as u64)
}

/// The tuning limits, or `None` for fixed settings: tuning is on when
/// `num_workers` or `prefetch_size` is `"auto"` or a budget is given. An
/// int `num_workers` is then the most workers; `"auto"`, the cores this
/// process may use.
pub fn limits(workers: Option<usize>, prefetch: Option<usize>, budget: Option<u64>) -> Option<Autotune> {
    if workers.is_some() && prefetch.is_some() && budget.is_none() {
        return None;
    }
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    Some(Autotune { memory_budget: budget.unwrap_or(DEFAULT_BUDGET), max_workers: workers.unwrap_or(cores) })
}

/// `stats()["tuning"]`: the setting now, the budget's window limit, and
/// the decisions with their reasons.
pub fn tuning_dict<'py>(py: Python<'py>, tuning: &Tuning) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("memory_budget", tuning.limits.memory_budget)?;
    d.set_item("workers", tuning.setting.map(|s| s.workers))?;
    d.set_item("window", tuning.setting.map(|s| s.window))?;
    d.set_item("window_limit", tuning.window_limit)?;
    d.set_item("decided", tuning.decided)?;
    let decisions = PyList::empty(py);
    for decision in &tuning.decisions {
        let item = PyDict::new(py);
        item.set_item("step", decision.step)?;
        item.set_item("workers", decision.setting.workers)?;
        item.set_item("window", decision.setting.window)?;
        item.set_item("reason", &decision.reason)?;
        decisions.append(item)?;
    }
    d.set_item("decisions", decisions)?;
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("2GiB"), Some(2 << 30));
        assert_eq!(parse_size("1.5 kb"), Some(1500));
        assert_eq!(parse_size("512MB"), Some(512_000_000));
        assert_eq!(parse_size("7B"), Some(7));
        for bad in ["", "GiB", "2", "2 XB", "-1GiB", "1e99TiB", "1.2.3MB", "NaN GiB"] {
            assert_eq!(parse_size(bad), None, "{bad:?}");
        }
    }
}
