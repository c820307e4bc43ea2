//! The type mapping (`docs/import.md`, "Type mapping"): an Arrow schema
//! becomes the table's columns ([`Mapping::new`]), and a record batch the
//! [`Values`] of [`TableWriter::append`](crate::table::TableWriter::append)
//! ([`Mapping::convert`]), with no copy of a value where the layout allows:
//! a primitive array's values buffer is already records back to back, and
//! a list's offsets cut its values buffer into the rows' items.
//!
//! | Arrow | column |
//! |---|---|
//! | integer, float, bool scalars | fixed, shape `()` (bool `\|b1`) |
//! | `FixedSizeList` (nested), `arrow.fixed_shape_tensor` | fixed of that shape |
//! | `List`, `LargeList` of numbers or of fixed-size lists of numbers | ragged |
//! | `Binary`, `LargeBinary`, `BinaryView`, `FixedSizeBinary` | bytes |
//! | `Utf8`, `LargeUtf8`, `Utf8View` | utf8 |
//! | dictionary-encoded | its values' type, decoded |
//! | struct | its fields, flattened to `a.b` columns |

use arrow_array::cast::AsArray;
use arrow_array::types::Float16Type;
use arrow_array::{Array, ArrayRef, ArrowPrimitiveType, RecordBatch};
use arrow_buffer::{Buffer, NullBuffer};
use arrow_schema::{DataType, Field, Schema};

use super::error::ImportError;
use crate::Codec;
use crate::dataset::{DType, Kind, packed_items};
use crate::table::{ColumnSpec, ColumnType, Values};

/// The field metadata key naming an Arrow extension type.
const EXTENSION_NAME: &str = "ARROW:extension:name";
/// The field metadata key holding an extension type's parameters.
const EXTENSION_METADATA: &str = "ARROW:extension:metadata";
/// Arrow's canonical fixed-shape tensor extension type.
const FIXED_SHAPE_TENSOR: &str = "arrow.fixed_shape_tensor";

/// How the columns of a source become the table's: which, under what
/// names, with what codec, and what fills their nulls. Every option names
/// a column by its source name (a struct's field flattened to `a.b`).
#[derive(Clone, Debug, Default)]
pub struct ColumnOptions {
    /// The columns to import, in this order (`None`: all, in the source's).
    pub select: Option<Vec<String>>,
    /// `(source name, table name)`: a column's name in the table.
    pub rename: Vec<(String, String)>,
    /// Every column's codec, unless `codecs` names it (`None`: by the
    /// column's kind, [`kind_codec`]).
    pub codec: Option<Codec>,
    /// `(source name, codec)`: a column's own codec.
    pub codecs: Vec<(String, Codec)>,
    /// `(source name, value)`: the value that fills the column's nulls,
    /// parsed for its type: a number or `true`/`false` for a fixed column
    /// (every element of a null row takes it), numbers separated by commas
    /// for a ragged one (the empty string: an empty row), the text itself
    /// for bytes and utf8 columns. A null in a column without one is
    /// [`ImportError::Null`].
    pub fill_null: Vec<(String, String)>,
}

/// A source's schema mapped to a table's columns.
#[derive(Debug)]
pub struct Mapping {
    columns: Vec<Mapped>,
}

/// One table column: where it is in a batch and how it converts.
#[derive(Debug)]
struct Mapped {
    /// The source name (flattened).
    source: String,
    /// The indices down the struct fields, from the batch's column.
    path: Vec<usize>,
    /// The table column.
    spec: ColumnSpec,
    /// A fixed column's record bytes, a ragged column's item row bytes.
    row_bytes: usize,
    /// The bytes that fill a null row (a record, or an item).
    fill: Option<Vec<u8>>,
}

/// A batch's column cut for the writer: a fixed column's records, or one
/// byte string per row, borrowed from the batch's buffers.
pub enum Cut<'a> {
    /// Records back to back.
    Fixed(&'a [u8]),
    /// One value per row.
    Items(Vec<&'a [u8]>),
    /// One value per row, back to back as Arrow holds them (no null to
    /// fill): row `k` the `lens[k]` bytes after those before it.
    Packed(&'a [u8], Vec<u32>),
}

impl<'a> Cut<'a> {
    /// The column's values for [`TableWriter::append`](crate::table::TableWriter::append).
    pub fn values(&self) -> Values<'_> {
        match self {
            Cut::Fixed(bytes) => Values::Fixed(bytes),
            Cut::Items(items) => Values::Items(items),
            Cut::Packed(data, lens) => Values::Packed { data, lens },
        }
    }

    /// One value per row, for a bytes, text or ragged column's cut; none
    /// for a fixed column's.
    pub fn items(&self) -> Vec<&'a [u8]> {
        match self {
            Cut::Fixed(_) => Vec::new(),
            Cut::Items(items) => items.clone(),
            Cut::Packed(data, lens) => packed_items(data, lens).into_iter().flatten().collect(),
        }
    }

    /// The bytes of the values.
    pub fn bytes(&self) -> usize {
        match self {
            Cut::Fixed(bytes) | Cut::Packed(bytes, _) => bytes.len(),
            Cut::Items(items) => items.iter().map(|i| i.len()).sum(),
        }
    }
}

/// One batch converted: borrow [`Converted::values`] for the writer.
pub struct Converted {
    /// Each column's leaf array (structs descended, dictionaries decoded)
    /// and the rows' nulls (its own and its structs').
    leaves: Vec<(ArrayRef, Option<NullBuffer>)>,
    /// Fixed columns' records where they had to be built (bools, fills).
    built: Vec<Option<Buffer>>,
}

impl Mapping {
    /// The columns `schema` maps to under `opts`; a type outside the
    /// mapping is [`ImportError::ColumnType`] naming the column and type.
    pub fn new(schema: &Schema, opts: &ColumnOptions) -> Result<Mapping, ImportError> {
        let mut all = Vec::new();
        for (k, field) in schema.fields().iter().enumerate() {
            flatten(field, field.name().clone(), vec![k], &mut all);
        }
        let names: Vec<&str> = all.iter().map(|(name, _, _)| name.as_str()).collect();
        let unknown = |what: &str, name: &str| {
            ImportError::InvalidArgument(format!(
                "{what} names column {name:?}, which the source does not have; its columns: {}",
                names.join(", ")
            ))
        };
        for (name, what) in opts.rename.iter().map(|(n, _)| (n, "--rename")).chain(
            opts.codecs
                .iter()
                .map(|(n, _)| (n, "--codec"))
                .chain(opts.fill_null.iter().map(|(n, _)| (n, "--fill-null"))),
        ) {
            if !names.contains(&name.as_str()) {
                return Err(unknown(what, name));
            }
        }
        let chosen: Vec<usize> = match &opts.select {
            None => (0..all.len()).collect(),
            Some(select) => select
                .iter()
                .map(|name| names.iter().position(|n| n == name).ok_or_else(|| unknown("--columns", name)))
                .collect::<Result<_, _>>()?,
        };
        let mut columns = Vec::with_capacity(chosen.len());
        for k in chosen {
            let (source, path, field) = &all[k];
            columns.push(Mapped::new(source, path.clone(), field, opts)?);
        }
        if columns.is_empty() {
            return Err(ImportError::InvalidArgument("no column to import".to_string()));
        }
        Ok(Mapping { columns })
    }

    /// The table's columns.
    pub fn specs(&self) -> Vec<ColumnSpec> {
        self.columns.iter().map(|c| c.spec.clone()).collect()
    }

    /// `batch`'s columns prepared; a null without a fill is
    /// [`ImportError::Null`], its row counted as `first_row` + the row in
    /// the batch.
    pub fn convert(&self, batch: &RecordBatch, first_row: u64) -> Result<Converted, ImportError> {
        let mut leaves = Vec::with_capacity(self.columns.len());
        let mut built = Vec::with_capacity(self.columns.len());
        for column in &self.columns {
            let (leaf, nulls) = column.leaf(batch)?;
            if let Some(row) = nulls.as_ref().and_then(|n| n.iter().position(|valid| !valid))
                && column.fill.is_none()
            {
                return Err(ImportError::Null { column: column.source.clone(), row: first_row + row as u64 });
            }
            let own = column.records(&leaf, nulls.as_ref(), first_row)?;
            leaves.push((leaf, nulls));
            built.push(own);
        }
        Ok(Converted { leaves, built })
    }

    /// `converted` cut into each column's records or items; hand
    /// [`Cut::values`] of each to the writer.
    pub fn cut<'a>(&'a self, converted: &'a Converted) -> Vec<Cut<'a>> {
        let parts = self.columns.iter().zip(&converted.leaves).zip(&converted.built);
        parts.map(|((column, (leaf, nulls)), built)| column.cut(leaf, nulls.as_ref(), built.as_ref())).collect()
    }
}

/// A column's codec when no option names one: zstd for text, which it
/// compresses well; raw for numbers and bytes. On the token corpus of
/// `docs/benchmarks.md` ("Import") zstd shrinks token ids by a third but
/// costs the import 2.2x its time and every cold read a decompression; the
/// bytes of a training set are mostly encoded images or audio, which zstd
/// does not shrink.
pub fn kind_codec(kind: ColumnType) -> Codec {
    match kind {
        ColumnType::Utf8 => Codec::Zstd,
        ColumnType::Fixed | ColumnType::Ragged | ColumnType::Bytes => Codec::Raw,
    }
}

/// `field` as columns: itself, or a struct's fields (recursively) named
/// `name.field`; each with its indices down the structs.
fn flatten(field: &Field, name: String, path: Vec<usize>, out: &mut Vec<(String, Vec<usize>, Field)>) {
    match field.data_type() {
        DataType::Struct(fields) => {
            for (k, child) in fields.iter().enumerate() {
                let mut at = path.clone();
                at.push(k);
                flatten(child, format!("{name}.{}", child.name()), at, out);
            }
        }
        _ => out.push((name, path, field.clone())),
    }
}

impl Mapped {
    /// The column `field` at `path`, named `source` in the input.
    fn new(source: &str, path: Vec<usize>, field: &Field, opts: &ColumnOptions) -> Result<Mapped, ImportError> {
        let lookup = |pairs: &[(String, String)]| pairs.iter().find(|(n, _)| n == source).map(|(_, v)| v.clone());
        let name = lookup(&opts.rename).unwrap_or_else(|| source.to_string());
        let mut spec = column_spec(&name, field)
            .map_err(|reason| ImportError::ColumnType { column: source.to_string(), reason })?;
        let own = opts.codecs.iter().find(|(n, _)| n == source).map(|(_, codec)| *codec);
        let codec = own.or(opts.codec).unwrap_or_else(|| kind_codec(spec.kind));
        spec = spec.with_codec(codec);
        let elements: usize = spec.shape.iter().product();
        let row_bytes = spec.dtype.itemsize() * elements;
        let fill =
            match lookup(&opts.fill_null) {
                None => None,
                Some(text) => Some(parse_fill(&spec, &text).map_err(|reason| {
                    ImportError::InvalidArgument(format!("--fill-null {source}={text:?}: {reason}"))
                })?),
            };
        Ok(Mapped { source: source.to_string(), path, spec, row_bytes, fill })
    }

    /// The column's array in `batch` (structs descended, a dictionary
    /// decoded) and its rows' nulls, `None` if it has none.
    fn leaf(&self, batch: &RecordBatch) -> Result<(ArrayRef, Option<NullBuffer>), ImportError> {
        let mut array = batch.column(self.path[0]).clone();
        let mut nulls: Option<NullBuffer> = None;
        for &k in &self.path[1..] {
            let parent = array.as_struct();
            nulls = NullBuffer::union(nulls.as_ref(), parent.nulls());
            array = parent.column(k).clone();
        }
        if let DataType::Dictionary(_, value) = array.data_type() {
            array = arrow_cast::cast(&array, value).map_err(|e| ImportError::ColumnType {
                column: self.source.clone(),
                reason: format!("decoding its dictionary: {e}"),
            })?;
        }
        nulls = NullBuffer::union(nulls.as_ref(), array.logical_nulls().as_ref());
        Ok((array, nulls.filter(|n| n.null_count() > 0)))
    }

    /// A null inside a row that is not itself null: [`ImportError::Null`].
    fn check_inside(&self, inside: &[usize], nulls: Option<&NullBuffer>, first_row: u64) -> Result<(), ImportError> {
        match inside.iter().find(|&&row| !nulls.is_some_and(|n| n.is_null(row))) {
            Some(&row) => Err(ImportError::Null { column: self.source.clone(), row: first_row + row as u64 }),
            None => Ok(()),
        }
    }

    /// A fixed column's records (nulls filled), or a ragged column's item
    /// rows back to back; `None` for bytes and text.
    fn records(
        &self,
        leaf: &ArrayRef,
        nulls: Option<&NullBuffer>,
        first_row: u64,
    ) -> Result<Option<Buffer>, ImportError> {
        match self.spec.kind {
            ColumnType::Fixed => {
                self.check_inside(&null_inside(leaf.as_ref(), 0, leaf.len()), nulls, first_row)?;
                let records = fixed_bytes(leaf.as_ref(), 0, leaf.len());
                let (Some(nulls), Some(fill)) = (nulls, &self.fill) else {
                    return Ok(Some(records));
                };
                let mut filled = records.as_slice().to_vec();
                for row in nulls.iter().enumerate().filter(|(_, valid)| !valid).map(|(row, _)| row) {
                    filled[row * self.row_bytes..(row + 1) * self.row_bytes].copy_from_slice(fill);
                }
                Ok(Some(Buffer::from_vec(filled)))
            }
            ColumnType::Ragged => {
                let (values, offsets) = list_parts(leaf);
                let mut inside = null_rows(values.as_ref(), 0, values.len());
                inside.extend(null_inside(values.as_ref(), 0, values.len()));
                let mut rows: Vec<usize> =
                    inside.into_iter().map(|j| offsets.partition_point(|&o| o <= j).saturating_sub(1)).collect();
                rows.sort_unstable();
                self.check_inside(&rows, nulls, first_row)?;
                Ok(Some(fixed_bytes(values.as_ref(), 0, values.len())))
            }
            ColumnType::Bytes | ColumnType::Utf8 => Ok(None),
        }
    }

    /// The column cut for the writer: records, or one value per row (a
    /// null row's the fill; [`Mapping::convert`] refused nulls without one).
    fn cut<'a>(&'a self, leaf: &'a ArrayRef, nulls: Option<&NullBuffer>, built: Option<&'a Buffer>) -> Cut<'a> {
        if nulls.is_none()
            && let Some(packed) = self.packed(leaf, built)
        {
            return packed;
        }
        let fill = self.fill.as_deref().unwrap_or_default();
        let is_null = |row: usize| nulls.is_some_and(|n| n.is_null(row));
        let rows = 0..leaf.len();
        let items: Vec<&[u8]> = match (self.spec.kind, built) {
            (ColumnType::Fixed, Some(records)) => return Cut::Fixed(records.as_slice()),
            (ColumnType::Ragged, Some(values)) => {
                let (_, offsets) = list_parts(leaf);
                let bytes = values.as_slice();
                let w = self.row_bytes;
                rows.map(|r| if is_null(r) { fill } else { &bytes[offsets[r] * w..offsets[r + 1] * w] }).collect()
            }
            _ => {
                let value = binary_values(leaf);
                rows.map(|r| if is_null(r) { fill } else { value(r) }).collect()
            }
        };
        Cut::Items(items)
    }
}

impl Mapped {
    /// A ragged, bytes or text column's rows as Arrow packs them, when it
    /// does: a list's values, a binary or string array's bytes (not a
    /// view's, which are not back to back, nor a fixed-size binary's).
    fn packed<'a>(&self, leaf: &'a ArrayRef, built: Option<&'a Buffer>) -> Option<Cut<'a>> {
        match (self.spec.kind, built) {
            (ColumnType::Fixed, _) => None,
            (ColumnType::Ragged, Some(values)) => packed_rows(values.as_slice(), &list_parts(leaf).1, self.row_bytes),
            (_, _) => {
                let (values, offsets): (&[u8], Vec<usize>) = match leaf.data_type() {
                    DataType::Binary => binary_parts(leaf.as_binary::<i32>()),
                    DataType::LargeBinary => binary_parts(leaf.as_binary::<i64>()),
                    DataType::Utf8 => string_parts(leaf.as_string::<i32>()),
                    DataType::LargeUtf8 => string_parts(leaf.as_string::<i64>()),
                    _ => return None,
                };
                packed_rows(values, &offsets, 1)
            }
        }
    }
}

/// Rows `offsets[r]..offsets[r + 1]`, in elements of `w` bytes, of
/// `values` as one slice and the rows' lengths; `None` where Arrow's
/// offsets do not give one (a row of more than `u32::MAX` bytes, or out of
/// order or of range: the per-row path then says what is wrong).
fn packed_rows<'a>(values: &'a [u8], offsets: &[usize], w: usize) -> Option<Cut<'a>> {
    let (first, last) = (offsets.first()?.checked_mul(w)?, offsets.last()?.checked_mul(w)?);
    let lens = offsets.windows(2).map(|p| u32::try_from(p[1].checked_sub(p[0])?.checked_mul(w)?).ok());
    let lens: Vec<u32> = lens.collect::<Option<_>>()?;
    Some(Cut::Packed(values.get(first..last)?, lens))
}

/// A binary array's bytes and its offsets into them.
fn binary_parts<O: arrow_array::OffsetSizeTrait>(array: &arrow_array::GenericBinaryArray<O>) -> (&[u8], Vec<usize>) {
    (array.values().as_slice(), array.value_offsets().iter().map(|o| o.as_usize()).collect())
}

/// A string array's bytes and its offsets into them.
fn string_parts<O: arrow_array::OffsetSizeTrait>(array: &arrow_array::GenericStringArray<O>) -> (&[u8], Vec<usize>) {
    (array.values().as_slice(), array.value_offsets().iter().map(|o| o.as_usize()).collect())
}

/// A list array's values and its offsets (from the values' start), as `usize`.
fn list_parts(list: &ArrayRef) -> (ArrayRef, Vec<usize>) {
    match list.data_type() {
        DataType::LargeList(_) => {
            let l = list.as_list::<i64>();
            (l.values().clone(), l.value_offsets().iter().map(|&o| o as usize).collect())
        }
        _ => {
            let l = list.as_list::<i32>();
            (l.values().clone(), l.value_offsets().iter().map(|&o| o as usize).collect())
        }
    }
}

/// A bytes or text array's value of a row, as bytes.
fn binary_values<'a>(array: &'a ArrayRef) -> Box<dyn Fn(usize) -> &'a [u8] + 'a> {
    match array.data_type() {
        DataType::Binary => Box::new(|r| array.as_binary::<i32>().value(r)),
        DataType::LargeBinary => Box::new(|r| array.as_binary::<i64>().value(r)),
        DataType::BinaryView => Box::new(|r| array.as_binary_view().value(r)),
        DataType::FixedSizeBinary(_) => Box::new(|r| array.as_fixed_size_binary().value(r)),
        DataType::Utf8 => Box::new(|r| array.as_string::<i32>().value(r).as_bytes()),
        DataType::LargeUtf8 => Box::new(|r| array.as_string::<i64>().value(r).as_bytes()),
        _ => Box::new(|r| array.as_string_view().value(r).as_bytes()),
    }
}

/// Elements `start..start + len` of a number, bool or fixed-size list
/// array as records back to back: Arrow's values buffer, shared, for
/// numbers; a byte per value for bools (Arrow packs them in bits).
fn fixed_bytes(array: &dyn Array, start: usize, len: usize) -> Buffer {
    match array.data_type() {
        DataType::Boolean => {
            let bools = array.as_boolean();
            Buffer::from_vec((start..start + len).map(|i| u8::from(bools.value(i))).collect::<Vec<u8>>())
        }
        DataType::FixedSizeList(_, n) => {
            let n = *n as usize;
            fixed_bytes(array.as_fixed_size_list().values().as_ref(), start * n, len * n)
        }
        dt => {
            let width = dt.primitive_width().expect("the mapping takes numbers only");
            let data = array.to_data();
            data.buffers()[0].slice_with_length((data.offset() + start) * width, len * width)
        }
    }
}

/// The elements of `start..start + len` that are null.
fn null_rows(array: &dyn Array, start: usize, len: usize) -> Vec<usize> {
    match array.logical_nulls() {
        Some(nulls) if nulls.null_count() > 0 => (start..start + len).filter(|&i| nulls.is_null(i)).collect(),
        _ => Vec::new(),
    }
}

/// The rows of `start..start + len` of a fixed-size list array (nested or
/// not) with a null element inside; none for other arrays.
fn null_inside(array: &dyn Array, start: usize, len: usize) -> Vec<usize> {
    let DataType::FixedSizeList(_, n) = array.data_type() else {
        return Vec::new();
    };
    let n = *n as usize;
    let child = array.as_fixed_size_list().values();
    let mut rows = null_rows(child.as_ref(), start * n, len * n);
    rows.extend(null_inside(child.as_ref(), start * n, len * n));
    let mut rows: Vec<usize> = rows.into_iter().map(|j| j / n).collect();
    rows.sort_unstable();
    rows.dedup();
    rows
}

/// The table column `field` maps to, named `name`, or why it maps to none.
fn column_spec(name: &str, field: &Field) -> Result<ColumnSpec, String> {
    let dt = match field.data_type() {
        DataType::Dictionary(_, value) => value.as_ref(),
        dt => dt,
    };
    if field.metadata().get(EXTENSION_NAME).is_some_and(|n| n == FIXED_SHAPE_TENSOR) {
        let (dtype, shape) = tensor(field)?;
        return Ok(ColumnSpec::fixed(name, dtype, &shape));
    }
    Ok(match dt {
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView | DataType::FixedSizeBinary(_) => {
            ColumnSpec::bytes(name)
        }
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => ColumnSpec::utf8(name),
        DataType::List(item) | DataType::LargeList(item) => {
            let (dtype, shape) = fixed_type(item.data_type(), false)?;
            ColumnSpec::ragged(name, dtype, &shape)
        }
        dt => {
            let (dtype, shape) = fixed_type(dt, true)?;
            ColumnSpec::fixed(name, dtype, &shape)
        }
    })
}

/// The element type and record shape of a number (bool if `bool_ok`) or
/// fixed-size list (nested) type.
fn fixed_type(dt: &DataType, bool_ok: bool) -> Result<(DType, Vec<usize>), String> {
    let code = match dt {
        DataType::Boolean if bool_ok => "|b1",
        DataType::Int8 => "|i1",
        DataType::Int16 => "<i2",
        DataType::Int32 => "<i4",
        DataType::Int64 => "<i8",
        DataType::UInt8 => "|u1",
        DataType::UInt16 => "<u2",
        DataType::UInt32 => "<u4",
        DataType::UInt64 => "<u8",
        DataType::Float16 => "<f2",
        DataType::Float32 => "<f4",
        DataType::Float64 => "<f8",
        DataType::FixedSizeList(item, n) if *n > 0 => {
            let (dtype, mut shape) = fixed_type(item.data_type(), bool_ok)?;
            shape.insert(0, *n as usize);
            return Ok((dtype, shape));
        }
        dt => {
            return Err(format!(
                "type {dt} maps to no table column (numbers, bools, fixed-size lists and tensors of them, \
                 lists of numbers, binary, strings, dictionaries and structs of these do)"
            ));
        }
    };
    Ok((DType::parse(code).expect("a dtype"), Vec::new()))
}

/// An `arrow.fixed_shape_tensor` field's element type and shape (its
/// metadata's `shape`; a permutation other than the identity is refused).
fn tensor(field: &Field) -> Result<(DType, Vec<usize>), String> {
    let metadata = field.metadata().get(EXTENSION_METADATA).map(String::as_str).unwrap_or("{}");
    let json: serde_json::Value =
        serde_json::from_str(metadata).map_err(|e| format!("a fixed_shape_tensor's metadata is not JSON: {e}"))?;
    let dims = |key: &str| -> Option<Vec<usize>> {
        json.get(key)?.as_array()?.iter().map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok())).collect()
    };
    let shape = dims("shape").ok_or("a fixed_shape_tensor's metadata has no shape")?;
    if dims("permutation").is_some_and(|p| p.iter().enumerate().any(|(k, &d)| k != d)) {
        return Err("a fixed_shape_tensor with a permutation other than the identity is not supported".to_string());
    }
    let (dtype, storage) = fixed_type(field.data_type(), true)?;
    let elements = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    if storage.len() != 1 || Some(storage[0]) != elements {
        return Err(format!("a fixed_shape_tensor of shape {shape:?} stored as {}", field.data_type()));
    }
    Ok((dtype, shape))
}

/// The bytes of a null row's fill, `text` parsed for `spec`'s column.
fn parse_fill(spec: &ColumnSpec, text: &str) -> Result<Vec<u8>, String> {
    match spec.kind {
        ColumnType::Bytes | ColumnType::Utf8 => Ok(text.as_bytes().to_vec()),
        ColumnType::Fixed => {
            let one = parse_number(spec.dtype, text)?;
            Ok(one.repeat(spec.shape.iter().product()))
        }
        ColumnType::Ragged => {
            let numbers: Vec<&str> = if text.trim().is_empty() { Vec::new() } else { text.split(',').collect() };
            let per_item: usize = spec.shape.iter().product();
            if !numbers.len().is_multiple_of(per_item.max(1)) {
                return Err(format!("{} numbers are not whole items of shape {:?}", numbers.len(), spec.shape));
            }
            let mut bytes = Vec::new();
            for n in numbers {
                bytes.extend(parse_number(spec.dtype, n.trim())?);
            }
            Ok(bytes)
        }
    }
}

/// `text` as one element of `dtype`, little-endian.
fn parse_number(dtype: DType, text: &str) -> Result<Vec<u8>, String> {
    let size = dtype.itemsize();
    let bad = || format!("{text:?} is not a {} value", dtype);
    match dtype.kind() {
        Kind::Bool => match text {
            "true" | "1" => Ok(vec![1]),
            "false" | "0" => Ok(vec![0]),
            _ => Err(bad()),
        },
        Kind::Int | Kind::Uint => {
            let v: i128 = text.parse().map_err(|_| bad())?;
            let bits = 8 * size as u32;
            let (lo, hi) = if dtype.kind() == Kind::Int {
                (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
            } else {
                (0, (1i128 << bits) - 1)
            };
            if v < lo || v > hi {
                return Err(format!("{text} is out of the range of {}", dtype));
            }
            Ok(v.to_le_bytes()[..size].to_vec())
        }
        Kind::Float => {
            let v: f64 = text.parse().map_err(|_| bad())?;
            Ok(match size {
                2 => <Float16Type as ArrowPrimitiveType>::Native::from_f64(v).to_le_bytes().to_vec(),
                4 => (v as f32).to_le_bytes().to_vec(),
                _ => v.to_le_bytes().to_vec(),
            })
        }
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::types::Int32Type;
    use arrow_array::{LargeBinaryArray, ListArray, StringArray};

    use super::*;

    /// A sliced batch (its arrays' offsets not at 0) of text, large binary
    /// and a list, and the rows each column must give.
    fn sliced() -> (RecordBatch, Vec<Vec<Vec<u8>>>) {
        let text: Vec<String> = (0..9).map(|i| "é".repeat(i % 4)).collect();
        let blob: Vec<Vec<u8>> = (0..9).map(|i| vec![i as u8; i % 3]).collect();
        let ids: Vec<Vec<i32>> = (0..9usize).map(|i| (0..(i % 5) as i32).collect()).collect();
        let schema = Schema::new(vec![
            Field::new("s", DataType::Utf8, false),
            Field::new("b", DataType::LargeBinary, false),
            Field::new("ids", DataType::new_list(DataType::Int32, true), false),
        ]);
        let arrays: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from_iter_values(&text)),
            Arc::new(LargeBinaryArray::from_iter_values(&blob)),
            Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(
                ids.iter().map(|v| Some(v.iter().map(|&x| Some(x)))),
            )),
        ];
        let batch = RecordBatch::try_new(Arc::new(schema), arrays).unwrap().slice(3, 5);
        let want = vec![
            text[3..8].iter().map(|t| t.as_bytes().to_vec()).collect(),
            blob[3..8].to_vec(),
            ids[3..8].iter().map(|v| v.iter().flat_map(|x| x.to_le_bytes()).collect()).collect(),
        ];
        (batch, want)
    }

    #[test]
    fn arrow_values_are_cut_packed_where_they_lie_and_the_rows_are_the_slices() {
        let (batch, want) = sliced();
        let mapping = Mapping::new(&batch.schema(), &ColumnOptions::default()).unwrap();
        let converted = mapping.convert(&batch, 0).unwrap();
        let cuts = mapping.cut(&converted);
        for (cut, want) in cuts.iter().zip(&want) {
            assert!(matches!(cut, Cut::Packed(..)), "a column without nulls is cut packed");
            assert_eq!(cut.items(), want.iter().map(Vec::as_slice).collect::<Vec<_>>());
            assert_eq!(cut.bytes(), want.iter().map(Vec::len).sum::<usize>());
        }
    }

    #[test]
    fn a_column_with_a_filled_null_is_cut_one_slice_per_row() {
        let schema = Schema::new(vec![Field::new("s", DataType::Utf8, true)]);
        let array: ArrayRef = Arc::new(StringArray::from(vec![Some("a"), None, Some("cd")]));
        let batch = RecordBatch::try_new(Arc::new(schema), vec![array]).unwrap();
        let opts = ColumnOptions { fill_null: vec![("s".into(), "?".into())], ..Default::default() };
        let mapping = Mapping::new(&batch.schema(), &opts).unwrap();
        let converted = mapping.convert(&batch, 0).unwrap();
        let cuts = mapping.cut(&converted);
        assert!(matches!(&cuts[0], Cut::Items(items) if items == &[b"a".as_slice(), b"?", b"cd"]));
    }

    #[test]
    fn offsets_that_do_not_give_a_packed_slice_give_none() {
        assert!(packed_rows(b"abcdef", &[0, 2, 6], 1).is_some());
        assert!(packed_rows(b"abcdef", &[0, 2, 7], 1).is_none(), "past the values");
        assert!(packed_rows(b"abcdef", &[3, 2, 6], 1).is_none(), "out of order");
        assert!(packed_rows(b"abcdef", &[0, usize::MAX], 2).is_none(), "overflowing");
        assert!(packed_rows(&[], &[], 1).is_none(), "no offsets");
    }
}
