//! `cat --text`: records as lines of text, `INDEX<TAB>VALUE`. A dataset's
//! record is its values by the schema's dtype, nested as its shape (a
//! ragged record as its rows); a plain store's is its bytes, escaped
//! (`\n`, `\t`, `\\`, `\'`, `\"`, `\xNN`; printable ASCII as it is). A
//! table's text column is its strings (control characters and `\`
//! escaped), and its bytes column its bytes, escaped.

use std::path::Path;

use loaderx::dataset::{ByteOrder, DType, Kind, Layout, Schema};
use loaderx::format::column_of_dir_name;
use loaderx::io::real::RealFs;
use loaderx::table::{ColumnType, Commit};

use crate::CliResult;
use crate::out::CliError;

/// How a record becomes text: by a schema, or as escaped bytes.
pub enum TextFormat {
    /// A dataset's values: the dtype, the dims of a record (fixed) or of a row (ragged).
    Values { dtype: DType, dims: Vec<usize>, ragged: bool, unit: usize },
    /// A plain store's bytes, or a table's bytes column.
    Bytes,
    /// A table's text column: each record a string.
    Text,
}

/// The kind of the table column whose directory `path` is (`col-K` beside
/// a `table.json` that lists column K), if it is one.
pub fn table_column_kind(path: &Path) -> Option<ColumnType> {
    let k = column_of_dir_name(path.file_name()?.to_str()?)?;
    let commit = Commit::read(&RealFs, path.parent()?).ok()?;
    commit.columns.get(k).map(|(_, kind)| *kind)
}

impl TextFormat {
    /// The format for a store with `schema` (`None`: a plain store), which
    /// is a table's column of `column` kind if given. Errors when a record's
    /// values cannot be told apart (elements or rows of no bytes).
    pub fn new(schema: Option<&Schema>, column: Option<ColumnType>) -> CliResult<TextFormat> {
        match column {
            Some(ColumnType::Utf8) => return Ok(TextFormat::Text),
            Some(ColumnType::Bytes) => return Ok(TextFormat::Bytes),
            _ => {}
        }
        let Some(schema) = schema else { return Ok(TextFormat::Bytes) };
        let unit = schema.row_bytes()?;
        if unit == 0 {
            return Err(CliError::new(format!(
                "the schema's {} has rows of no bytes: no values to print as text (cat without --text writes the bytes)",
                schema.describe()
            ))
            .into());
        }
        let ragged = matches!(schema.layout, Layout::Ragged { .. });
        Ok(TextFormat::Values { dtype: schema.dtype, dims: schema.shape().to_vec(), ragged, unit })
    }

    /// Record `index`, whose bytes are `bytes`, as one line (with its newline).
    pub fn line(&self, index: u64, bytes: &[u8]) -> CliResult<String> {
        let value = match self {
            TextFormat::Bytes => bytes.escape_ascii().to_string(),
            TextFormat::Text => match std::str::from_utf8(bytes) {
                Ok(text) => escape_text(text),
                Err(e) => return Err(CliError::new(format!("record {index} is not UTF-8: {e}")).into()),
            },
            TextFormat::Values { dtype, dims, ragged, unit } => {
                let mut dims = dims.clone();
                if *ragged {
                    if !bytes.len().is_multiple_of(*unit) {
                        return Err(not_rows(index, bytes.len(), *unit));
                    }
                    dims.insert(0, bytes.len() / unit);
                } else if bytes.len() != *unit {
                    return Err(CliError::new(format!(
                        "record {index} is {} bytes, not the schema's {unit}; cannot print it as values",
                        bytes.len()
                    ))
                    .into());
                }
                let size = dtype.itemsize();
                let values: Vec<String> = bytes.chunks_exact(size).map(|e| element(dtype, e)).collect();
                nested(&values, &dims)
            }
        };
        Ok(format!("{index}\t{value}\n"))
    }
}

/// `text` on one line: `\\` and control characters escaped (`\n`, `\t`,
/// `\u{..}`), every other character as it is.
fn escape_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '\\' || c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

fn not_rows(index: u64, len: usize, unit: usize) -> Box<dyn std::error::Error> {
    CliError::new(format!("record {index} is {len} bytes, not whole {unit}-byte rows; cannot print it as values"))
        .into()
}

/// `values` (row-major) nested as `dims`, NumPy's list form: `[[1, 2], [3, 4]]`;
/// a scalar record (no dims) is its one value.
fn nested(values: &[String], dims: &[usize]) -> String {
    let Some((&outer, inner)) = dims.split_first() else {
        return values.first().cloned().unwrap_or_default();
    };
    let chunk: usize = inner.iter().product();
    let parts: Vec<String> =
        (0..outer).map(|i| nested(values.get(i * chunk..(i + 1) * chunk).unwrap_or(&[]), inner)).collect();
    format!("[{}]", parts.join(", "))
}

/// `N` bytes of `e` in the machine's order, from the dtype's `order`.
fn word<const N: usize>(e: &[u8], order: ByteOrder) -> [u8; N] {
    let mut w = [0u8; N];
    w.copy_from_slice(&e[..N]);
    if order != ByteOrder::NATIVE && order != ByteOrder::NotApplicable {
        w.reverse();
    }
    w
}

/// One element as NumPy prints it (`True`, `-3`, `0.5`, `(1+2j)`, `b'ab'`,
/// `'text'`); a kind or size with no number form here (float128, complex256,
/// void) as its escaped bytes.
fn element(dtype: &DType, e: &[u8]) -> String {
    let o = dtype.byte_order();
    match (dtype.kind(), e.len()) {
        (Kind::Bool, 1) => if e[0] != 0 { "True" } else { "False" }.to_string(),
        (Kind::Int, 1) => (e[0] as i8).to_string(),
        (Kind::Int, 2) => i16::from_ne_bytes(word(e, o)).to_string(),
        (Kind::Int, 4) => i32::from_ne_bytes(word(e, o)).to_string(),
        (Kind::Int, 8) => i64::from_ne_bytes(word(e, o)).to_string(),
        (Kind::Uint, 1) => e[0].to_string(),
        (Kind::Uint, 2) => u16::from_ne_bytes(word(e, o)).to_string(),
        (Kind::Uint, 4) => u32::from_ne_bytes(word(e, o)).to_string(),
        (Kind::Uint, 8) => u64::from_ne_bytes(word(e, o)).to_string(),
        (Kind::Float, 2) => format!("{:?}", f16_to_f32(u16::from_ne_bytes(word(e, o)))),
        (Kind::Float, 4) => format!("{:?}", f32::from_ne_bytes(word(e, o))),
        (Kind::Float, 8) => format!("{:?}", f64::from_ne_bytes(word(e, o))),
        (Kind::Complex, 8 | 16) => {
            let half = e.len() / 2;
            let (re, im) = (element_float(&e[..half], o), element_float(&e[half..], o));
            if im.starts_with('-') { format!("({re}{im}j)") } else { format!("({re}+{im}j)") }
        }
        (Kind::Bytes, _) => format!("b'{}'", e.split(|&b| b == 0).next().unwrap_or(&[]).escape_ascii()),
        (Kind::Unicode, _) => {
            let chars = e.chunks_exact(4).map(|c| u32::from_ne_bytes(word(c, o))).take_while(|&c| c != 0);
            let text: String = chars.map(|c| char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER)).collect();
            format!("'{}'", text.escape_default())
        }
        _ => format!("b'{}'", e.escape_ascii()),
    }
}

/// A float of 4 or 8 bytes, for a complex's halves.
fn element_float(e: &[u8], o: ByteOrder) -> String {
    if e.len() == 4 {
        format!("{:?}", f32::from_ne_bytes(word(e, o)))
    } else {
        format!("{:?}", f64::from_ne_bytes(word(e, o)))
    }
}

/// An IEEE half-precision float, widened exactly.
fn f16_to_f32(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0f32 } else { 1.0 };
    let exp = i32::from((h >> 10) & 0x1f);
    let frac = f32::from(h & 0x3ff);
    match exp {
        0 => sign * frac * 2f32.powi(-24),
        31 if frac == 0.0 => sign * f32::INFINITY,
        31 => f32::NAN,
        _ => sign * (1.0 + frac / 1024.0) * 2f32.powi(exp - 15),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_its_characters_on_one_line() {
        let f = TextFormat::Text;
        assert_eq!(f.line(3, "héllo wörld".as_bytes()).unwrap(), "3\théllo wörld\n");
        assert_eq!(f.line(0, b"a\nb\tc\\").unwrap(), "0\ta\\nb\\tc\\\\\n");
        assert!(f.line(1, &[0xff, 0xfe]).unwrap_err().to_string().contains("record 1 is not UTF-8"));
    }

    #[test]
    fn elements_by_dtype() {
        let d = |s: &str| DType::parse(s).unwrap();
        assert_eq!(element(&d("<i4"), &(-7i32).to_le_bytes()), "-7");
        assert_eq!(element(&d(">u2"), &[1, 2]), "258");
        assert_eq!(element(&d("<f4"), &0.5f32.to_le_bytes()), "0.5");
        assert_eq!(element(&d("<f8"), &1f64.to_le_bytes()), "1.0");
        assert_eq!(element(&d("<f2"), &0x3c00u16.to_le_bytes()), "1.0");
        assert_eq!(element(&d("<f2"), &0xc000u16.to_le_bytes()), "-2.0");
        assert_eq!(element(&d("|b1"), &[1]), "True");
        assert_eq!(element(&d("|S4"), b"ab\0\0"), "b'ab'");
        let mut c = 1f32.to_le_bytes().to_vec();
        c.extend_from_slice(&(-2f32).to_le_bytes());
        assert_eq!(element(&d("<c8"), &c), "(1.0-2.0j)");
        let u: Vec<u8> = ['h', 'i', '\0'].iter().flat_map(|&ch| (ch as u32).to_le_bytes()).collect();
        assert_eq!(element(&d("<U3"), &u), "'hi'");
    }

    #[test]
    fn nesting_follows_the_shape() {
        let v: Vec<String> = (0..6).map(|i| i.to_string()).collect();
        assert_eq!(nested(&v, &[2, 3]), "[[0, 1, 2], [3, 4, 5]]");
        assert_eq!(nested(&v[..1], &[]), "0");
        assert_eq!(nested(&[], &[0, 3]), "[]");
    }
}
