//! Pickling and subclassing. Each class opens in `__init__`, its
//! `__new__` accepting any arguments and making an unopened object, so a
//! Python subclass's `__init__` may take arguments of its own and call
//! `super().__init__(...)`, as with the reference's plain Python classes.
//!
//! Pickling goes by what the object was opened with: `__reduce__` names
//! [`_restore`]`(cls, base, args, kwargs)`, which makes the object with
//! `base.__new__(cls)` and opens it with `base.__init__(obj, *args,
//! **kwargs)` (not the subclass's `__init__`, whose arguments may differ);
//! a subclass's `__dict__` travels as the pickle's state. Under the spawn or
//! forkserver start method the child reopens what the parent had open.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple, PyType};

use crate::errors::type_error;

/// An object of `cls` (a subclass of `base`, or `base`) opened by
/// `base.__init__` with `args` and `kwargs`: the other half of `__reduce__`.
#[pyfunction]
pub fn _restore<'py>(
    cls: &Bound<'py, PyType>,
    base: &Bound<'py, PyType>,
    args: &Bound<'py, PyTuple>,
    kwargs: &Bound<'py, PyDict>,
) -> PyResult<Bound<'py, PyAny>> {
    if !cls.is_subclass(base)? {
        return Err(type_error(format!("{} is not a subclass of {}", cls.name()?, base.name()?)));
    }
    let obj = base.call_method1("__new__", (cls,))?;
    let all: Vec<Bound<'py, PyAny>> = std::iter::once(obj.clone()).chain(args.iter()).collect();
    let all = PyTuple::new(cls.py(), all)?;
    base.getattr("__init__")?.call(all, Some(kwargs))?;
    Ok(obj)
}

/// `__reduce__`'s value for `obj`, an object of `base` or of a subclass,
/// that `base.__init__(*args, **kwargs)` reopens.
pub fn reduce<'py>(
    obj: &Bound<'py, PyAny>,
    base: &Bound<'py, PyType>,
    args: Bound<'py, PyTuple>,
    kwargs: Bound<'py, PyDict>,
) -> PyResult<Bound<'py, PyTuple>> {
    let py = obj.py();
    let restore = py.import("loaderx_rs")?.getattr("_restore")?;
    let state = obj.getattr("__dict__").unwrap_or_else(|_| py.None().into_bound(py));
    let call =
        PyTuple::new(py, [obj.get_type().into_any(), base.clone().into_any(), args.into_any(), kwargs.into_any()])?;
    PyTuple::new(py, [restore, call.into_any(), state])
}
