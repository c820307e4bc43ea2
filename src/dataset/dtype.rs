//! Element types: NumPy's dtype strings (`"<f4"`, `"|u1"`, `"<i8"`), parsed
//! strictly, and the Rust types a typed gather may read them as.
//!
//! A dataset's `schema.json` names its element type the way NumPy's
//! `dtype.str` spells it: a byte-order character (`<` little, `>` big, `|`
//! not applicable), a kind character and a size in bytes (in characters for
//! `U`). [`DType::parse`] accepts exactly the strings NumPy's `np.dtype`
//! accepts in that form and [`DType`]'s `Display` prints NumPy's canonical
//! `dtype.str`, so a schema round-trips through both.

use std::fmt;

use super::error::DatasetError;

/// Byte order of a multi-byte element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ByteOrder {
    /// `<`
    Little,
    /// `>`
    Big,
    /// `|`: single bytes, byte strings, opaque bytes.
    NotApplicable,
}

impl ByteOrder {
    /// The byte order of this machine.
    pub const NATIVE: ByteOrder = if cfg!(target_endian = "big") { ByteOrder::Big } else { ByteOrder::Little };
}

/// What an element is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `b`: NumPy's bool (one byte).
    Bool,
    /// `i`: signed integer.
    Int,
    /// `u`: unsigned integer.
    Uint,
    /// `f`: IEEE float.
    Float,
    /// `c`: complex (two floats).
    Complex,
    /// `S`: fixed-size byte string.
    Bytes,
    /// `U`: fixed-size UCS-4 string (size counted in characters).
    Unicode,
    /// `V`: opaque bytes (NumPy's void, also its spelling of a structured dtype).
    Void,
}

impl Kind {
    fn char(self) -> char {
        match self {
            Kind::Bool => 'b',
            Kind::Int => 'i',
            Kind::Uint => 'u',
            Kind::Float => 'f',
            Kind::Complex => 'c',
            Kind::Bytes => 'S',
            Kind::Unicode => 'U',
            Kind::Void => 'V',
        }
    }
}

/// A NumPy element type, as a dataset's schema names it.
///
/// ```
/// use loaderx::dataset::{DType, Element};
/// let f4 = DType::parse("<f4").unwrap();
/// assert_eq!(f4, f32::DTYPE);
/// assert_eq!(f4.itemsize(), 4);
/// assert_eq!(DType::parse("|u1").unwrap().to_string(), "|u1");
/// assert!(DType::parse("float32").is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DType {
    kind: Kind,
    /// The size field of the string (characters for `U`, bytes otherwise).
    size: usize,
    order: ByteOrder,
}

impl DType {
    /// The element type of `kind`, `size` and `order`, normalised as NumPy
    /// does (no byte order for one-byte and string kinds). Errors on a size
    /// NumPy has no such type of.
    pub fn new(kind: Kind, size: usize, order: ByteOrder) -> Result<DType, DatasetError> {
        let bad = |reason: &str| DatasetError::UnknownDtype {
            dtype: format!("{}{}", kind.char(), size),
            reason: reason.to_string(),
        };
        let valid = match kind {
            Kind::Bool => size == 1,
            Kind::Int | Kind::Uint => matches!(size, 1 | 2 | 4 | 8),
            Kind::Float => matches!(size, 2 | 4 | 8 | 16),
            Kind::Complex => matches!(size, 8 | 16 | 32),
            Kind::Bytes | Kind::Void | Kind::Unicode => true,
        };
        if !valid {
            return Err(bad("NumPy has no such element size"));
        }
        if size.checked_mul(4).is_none() {
            return Err(bad("size too large"));
        }
        Ok(DType::normalised(kind, size, order))
    }

    /// As [`DType::new`] without the checks (for constants).
    const fn normalised(kind: Kind, size: usize, order: ByteOrder) -> DType {
        let no_order = match kind {
            Kind::Bytes | Kind::Void => true,
            Kind::Bool | Kind::Int | Kind::Uint => size == 1,
            // Size 4 per character: '<U1' keeps its byte order, as NumPy.
            Kind::Float | Kind::Complex | Kind::Unicode => false,
        };
        DType { kind, size, order: if no_order { ByteOrder::NotApplicable } else { order } }
    }

    /// A native-order numeric type (for [`Element::DTYPE`]).
    pub const fn native(kind: Kind, size: usize) -> DType {
        DType::normalised(kind, size, ByteOrder::NATIVE)
    }

    /// Parses a NumPy dtype string in `dtype.str` form: an optional
    /// byte-order character (`<`, `>`, `|`, `=`; `|` and `=` mean native for
    /// a multi-byte number, as in NumPy), a kind character among `b i u f c S
    /// U V`, and a decimal size. Anything else (`"float32"`, `"O"`,
    /// `"<M8[ns]"`, structured descriptions) is [`DatasetError::UnknownDtype`].
    pub fn parse(text: &str) -> Result<DType, DatasetError> {
        let bad = |reason: &str| DatasetError::UnknownDtype { dtype: text.to_string(), reason: reason.to_string() };
        let (order, rest) = match text.chars().next() {
            Some('<') => (ByteOrder::Little, &text[1..]),
            Some('>') => (ByteOrder::Big, &text[1..]),
            Some('|') | Some('=') => (ByteOrder::NATIVE, &text[1..]),
            _ => (ByteOrder::NATIVE, text),
        };
        let mut rest_chars = rest.chars();
        let kind = match rest_chars.next() {
            Some('b') => Kind::Bool,
            Some('i') => Kind::Int,
            Some('u') => Kind::Uint,
            Some('f') => Kind::Float,
            Some('c') => Kind::Complex,
            Some('S') => Kind::Bytes,
            Some('U') => Kind::Unicode,
            Some('V') => Kind::Void,
            Some(c) => return Err(bad(&unsupported_kind(c))),
            None => return Err(bad("empty")),
        };
        let digits = rest_chars.as_str();
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.len() > 12 {
            return Err(bad("expected a decimal size after the kind character"));
        }
        let size: usize = digits.parse().map_err(|_| bad("size out of range"))?;
        DType::new(kind, size, order).map_err(|_| bad("NumPy has no such element size"))
    }

    /// The kind.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The byte order.
    pub fn byte_order(&self) -> ByteOrder {
        self.order
    }

    /// Bytes per element (4 per character for `U`).
    pub fn itemsize(&self) -> usize {
        if self.kind == Kind::Unicode { self.size * 4 } else { self.size }
    }
}

impl fmt::Display for DType {
    /// NumPy's `dtype.str`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let order = match self.order {
            ByteOrder::Little => '<',
            ByteOrder::Big => '>',
            ByteOrder::NotApplicable => '|',
        };
        write!(f, "{order}{}{}", self.kind.char(), self.size)
    }
}

/// A Rust type a typed gather reads elements as: plain old data whose bytes
/// are the native-order NumPy type [`Element::DTYPE`].
pub trait Element: bytemuck::Pod + Send + Sync + 'static {
    /// The NumPy dtype this type reads.
    const DTYPE: DType;
}

macro_rules! element {
    ($($t:ty => $kind:ident),* $(,)?) => {$(
        impl Element for $t {
            const DTYPE: DType = DType::native(Kind::$kind, std::mem::size_of::<$t>());
        }
    )*};
}

element!(u8 => Uint, i8 => Int, u16 => Uint, i16 => Int, u32 => Uint, i32 => Int, u64 => Uint, i64 => Int,
         f32 => Float, f64 => Float);

/// Why kind character `c` is refused, in NumPy's words for the kind.
fn unsupported_kind(c: char) -> String {
    let name = match c {
        'O' => "object (Python objects)",
        'M' => "datetime64",
        'm' => "timedelta64",
        'T' => "StringDType (variable-length str)",
        _ => "an unknown kind",
    };
    format!(
        "{name} arrays are not supported (kind {c:?}; supported: bool, int, uint, float, complex, bytes S, str U, void V)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_strings() {
        for (given, canonical) in [
            ("<f4", "<f4"),
            ("|u1", "|u1"),
            ("<u1", "|u1"),
            ("<i8", "<i8"),
            (">i8", ">i8"),
            ("|b1", "|b1"),
            ("|S7", "|S7"),
            ("|V12", "|V12"),
            ("<U3", "<U3"),
            ("<c16", "<c16"),
            ("<f2", "<f2"),
            ("f4", "<f4"),
            ("=f8", "<f8"),
        ] {
            assert_eq!(DType::parse(given).unwrap().to_string(), canonical, "{given}");
        }
        assert_eq!(DType::parse("<U3").unwrap().itemsize(), 12);
    }

    #[test]
    fn rejects() {
        for bad in ["", "<", "float32", "<f3", "<i3", "|O8", "<M8[ns]", "<f", "<f4 ", "<f-4", "b2", "<f99999999999999"]
        {
            assert!(matches!(DType::parse(bad), Err(DatasetError::UnknownDtype { .. })), "{bad:?}");
        }
    }
}
