//! The header of a `.npy` file, NumPy's format 1.0, 2.0 and 3.0: the magic
//! `\x93NUMPY`, a version, a little-endian length field (16 bits in 1.0, 32
//! in 2.0 and 3.0) and that many bytes of header text, a Python dict literal
//! as NumPy writes it:
//!
//! ```text
//! {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
//! ```
//!
//! padded with spaces and ended by a newline. The data starts right after the
//! text. This module owns the parse of that text: one pass, linear in its
//! length, over the subset of Python's literals a header can hold (strings,
//! integers with Python 2's `L` suffix, `True`/`False`/`None`, tuples,
//! lists and dicts), with bracket nesting bounded by
//! [`NPY_HEADER_NESTING_MAX`] and the text by [`NPY_HEADER_BYTES_MAX`]. The
//! header's bytes are input: every error is a message naming the byte it
//! stopped at, never a panic, and no length from the file sizes an
//! allocation before it is checked against the bytes there are.
//!
//! As NumPy does, the dict must have exactly the keys `descr`,
//! `fortran_order` and `shape` (in any order), `shape` a tuple of
//! non-negative integers and `fortran_order` a bool. A structured `descr` (a
//! list of fields) is parsed and returned as its text, for the caller to
//! refuse by name.

/// Largest header read (NumPy writes a few hundred bytes).
pub(crate) const NPY_HEADER_BYTES_MAX: u64 = 1 << 20;

/// Deepest bracket nesting accepted in a header. NumPy's own headers nest
/// two levels (`{'shape': (..)}`), a structured dtype a few more.
pub(crate) const NPY_HEADER_NESTING_MAX: usize = 8;

/// Most dimensions a shape may have (NumPy 2's `NPY_MAXDIMS`).
pub(crate) const NPY_DIMS_MAX: usize = 64;

/// A header's `descr`: a dtype string, or a structured dtype's field list
/// (its text, as written).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Descr {
    Plain(String),
    Structured(String),
}

/// What a header's text says, and where the data starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HeaderDict {
    pub(crate) descr: Descr,
    pub(crate) fortran_order: bool,
    pub(crate) shape: Vec<u64>,
    /// The first byte after the header text.
    pub(crate) data_offset: usize,
}

/// Where the header text starts and the length its field gives it, for the
/// versions read here; `None` for another version or a prefix cut before
/// the field. The caller has checked the magic.
pub(crate) fn header_text_field(head: &[u8]) -> Option<(usize, usize)> {
    match (head.get(6)?, head.get(7)?) {
        (1, 0) => Some((10, u16::from_le_bytes([*head.get(8)?, *head.get(9)?]) as usize)),
        (2, 0) | (3, 0) => Some((12, u32::from_le_bytes(head.get(8..12)?.try_into().ok()?) as usize)),
        _ => None,
    }
}

/// Parses the header at the start of `head` (the file's first bytes, at
/// most [`NPY_HEADER_BYTES_MAX`]).
pub(crate) fn parse_header(head: &[u8]) -> Result<HeaderDict, String> {
    const MAGIC: &[u8] = b"\x93NUMPY";
    if !head.starts_with(MAGIC) {
        return Err("no \\x93NUMPY magic at the start: not a .npy file".into());
    }
    let Some((text_at, text_len)) = header_text_field(head) else {
        return Err(match (head.get(6), head.get(7)) {
            (Some(major), Some(minor)) if !matches!((major, minor), (1..=3, 0)) => {
                format!("format version {major}.{minor} is not one of 1.0, 2.0 and 3.0")
            }
            _ => "the file ends inside the preamble (the version and the header's length field)".into(),
        });
    };
    let Some(text) = text_at.checked_add(text_len).and_then(|end| head.get(text_at..end)) else {
        return Err(format!(
            "the header length field says {text_len} bytes, past the end of the file or the \
             {NPY_HEADER_BYTES_MAX}-byte header limit ({} bytes after the length field)",
            head.len() - text_at.min(head.len())
        ));
    };
    if head[6] == 3 && std::str::from_utf8(text).is_err() {
        return Err("a version 3.0 header text is not UTF-8".into());
    }
    let (descr, fortran_order, shape) = Parser { text, at: 0, depth: 0 }.header()?;
    Ok(HeaderDict { descr, fortran_order, shape, data_offset: text_at + text_len })
}

/// A cursor over the header text.
struct Parser<'a> {
    text: &'a [u8],
    at: usize,
    depth: usize,
}

impl<'a> Parser<'a> {
    /// The whole text: the dict, then only whitespace.
    fn header(mut self) -> Result<(Descr, bool, Vec<u64>), String> {
        let (mut descr, mut fortran_order, mut shape) = (None, None, None);
        self.open(b'{', "the header's dict")?;
        let mut first = true;
        while self.more(b'}', &mut first)? {
            let key = self.string().map_err(|_| self.error("expected a quoted key"))?;
            self.skip_ws();
            self.expect(b':', "':' after a key")?;
            match key {
                b"descr" => once(&mut descr, self.descr()?, "descr")?,
                b"fortran_order" => once(&mut fortran_order, self.boolean()?, "fortran_order")?,
                b"shape" => once(&mut shape, self.shape()?, "shape")?,
                other => {
                    return Err(format!(
                        "the header has a key '{}' besides 'descr', 'fortran_order' and 'shape'",
                        String::from_utf8_lossy(other).escape_debug()
                    ));
                }
            }
        }
        self.skip_ws();
        if self.at != self.text.len() {
            return Err(self.error("expected only whitespace after the header's dict"));
        }
        match (descr, fortran_order, shape) {
            (Some(d), Some(f), Some(s)) => Ok((d, f, s)),
            (d, f, _) => {
                let missing = if d.is_none() {
                    "descr"
                } else if f.is_none() {
                    "fortran_order"
                } else {
                    "shape"
                };
                Err(format!("the header has no '{missing}' key"))
            }
        }
    }

    /// A dtype string, or a structured dtype's list kept as text.
    fn descr(&mut self) -> Result<Descr, String> {
        self.skip_ws();
        match self.peek() {
            Some(b'\'' | b'"') => Ok(Descr::Plain(String::from_utf8_lossy(self.string()?).into_owned())),
            Some(b'[') => {
                let start = self.at;
                self.skip_value()?;
                Ok(Descr::Structured(String::from_utf8_lossy(&self.text[start..self.at]).into_owned()))
            }
            _ => Err(self.error("'descr' is neither a dtype string nor a list of fields")),
        }
    }

    fn boolean(&mut self) -> Result<bool, String> {
        self.skip_ws();
        let start = self.at;
        match self.word() {
            b"True" => Ok(true),
            b"False" => Ok(false),
            _ => {
                self.at = start;
                Err(self.error("'fortran_order' is neither True nor False"))
            }
        }
    }

    /// A tuple of non-negative integers (a 1-tuple with its comma).
    fn shape(&mut self) -> Result<Vec<u64>, String> {
        self.open(b'(', "'shape' as a tuple")?;
        let mut dims = Vec::new();
        let (mut first, mut comma) = (true, false);
        while self.more(b')', &mut first)? {
            if dims.len() == NPY_DIMS_MAX {
                return Err(format!("the shape has more than {NPY_DIMS_MAX} dimensions"));
            }
            dims.push(self.dimension()?);
            self.skip_ws();
            comma = self.peek() == Some(b',');
        }
        if dims.len() == 1 && !comma {
            return Err(format!("'shape' is ({}), an integer: a 1-tuple is written ({},)", dims[0], dims[0]));
        }
        Ok(dims)
    }

    /// A decimal integer, with Python 2's `L` suffix allowed.
    fn dimension(&mut self) -> Result<u64, String> {
        self.skip_ws();
        let start = self.at;
        let word = self.word();
        let digits = word.strip_suffix(b"L").or_else(|| word.strip_suffix(b"l")).unwrap_or(word);
        if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
            self.at = start;
            return Err(self.error(if self.peek() == Some(b'-') {
                "a negative dimension"
            } else {
                "expected a dimension (a non-negative integer)"
            }));
        }
        digits.iter().try_fold(0u64, |n, &d| n.checked_mul(10)?.checked_add(u64::from(d - b'0'))).ok_or_else(|| {
            self.at = start;
            self.error("a dimension overflows 64 bits")
        })
    }

    /// Any literal, checked for its syntax and skipped.
    fn skip_value(&mut self) -> Result<(), String> {
        self.skip_ws();
        match self.peek() {
            Some(b'\'' | b'"') => self.string().map(drop),
            Some(open @ (b'(' | b'[' | b'{')) => self.skip_sequence(open),
            _ => {
                // A name or a number, signed: the signs in a loop, not a
                // recursion a run of them could make deep.
                while matches!(self.peek(), Some(b'-' | b'+')) {
                    self.at += 1;
                    self.skip_ws();
                }
                if self.word().is_empty() {
                    return Err(self.error("expected a value"));
                }
                Ok(())
            }
        }
    }

    /// A tuple, list or dict whose items are skipped.
    fn skip_sequence(&mut self, open: u8) -> Result<(), String> {
        let close = match open {
            b'(' => b')',
            b'[' => b']',
            _ => b'}',
        };
        self.open(open, "a sequence")?;
        let mut first = true;
        while self.more(close, &mut first)? {
            self.skip_value()?;
            if open == b'{' {
                self.skip_ws();
                self.expect(b':', "':' after a key")?;
                self.skip_value()?;
            }
        }
        Ok(())
    }

    /// `open`, one level deeper.
    fn open(&mut self, open: u8, what: &str) -> Result<(), String> {
        self.skip_ws();
        self.expect(open, what)?;
        self.depth += 1;
        if self.depth > NPY_HEADER_NESTING_MAX {
            return Err(format!("the header nests brackets deeper than {NPY_HEADER_NESTING_MAX} levels"));
        }
        Ok(())
    }

    /// Between the items of a sequence: false (and one level up) at
    /// `close`, true before the next item; a trailing comma allowed.
    fn more(&mut self, close: u8, first: &mut bool) -> Result<bool, String> {
        self.skip_ws();
        if !std::mem::take(first) && self.peek() != Some(close) {
            self.expect(b',', "',' or the closing bracket")?;
            self.skip_ws();
        }
        if self.peek() != Some(close) {
            return Ok(true);
        }
        self.at += 1;
        self.depth -= 1;
        Ok(false)
    }

    /// A quoted string's content (escapes skipped over, not decoded).
    fn string(&mut self) -> Result<&'a [u8], String> {
        self.skip_ws();
        let Some(quote @ (b'\'' | b'"')) = self.peek() else { return Err(self.error("expected a quoted string")) };
        let start = self.at + 1;
        let mut i = start;
        while let Some(&b) = self.text.get(i) {
            match b {
                b'\\' => i += 2,
                b'\n' => break,
                _ if b == quote => {
                    self.at = i + 1;
                    return Ok(&self.text[start..i]);
                }
                _ => i += 1,
            }
        }
        Err(self.error("a string without its closing quote"))
    }

    /// The run of letters, digits, `_` and `.` here (a name or a number).
    fn word(&mut self) -> &'a [u8] {
        let start = self.at;
        while self.peek().is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.') {
            self.at += 1;
        }
        &self.text[start..self.at]
    }

    fn expect(&mut self, byte: u8, what: &str) -> Result<(), String> {
        if self.peek() != Some(byte) {
            return Err(self.error(&format!("expected {what}")));
        }
        self.at += 1;
        Ok(())
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r' | b'\x0c')) {
            self.at += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.at).copied()
    }

    /// `what`, at the cursor's byte of the header text.
    fn error(&self, what: &str) -> String {
        match self.peek() {
            Some(b) => format!("{what} at byte {} of the header text (found {:?})", self.at, char::from(b)),
            None => format!("{what} at the end of the header text ({} bytes)", self.text.len()),
        }
    }
}

/// Sets a key's value, refusing it twice.
fn once<T>(slot: &mut Option<T>, value: T, key: &str) -> Result<(), String> {
    if slot.replace(value).is_some() {
        return Err(format!("the header has the key '{key}' twice"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A version 1.0 header around `dict`, padded as NumPy pads it.
    fn v1(dict: &str) -> Vec<u8> {
        let mut text = dict.as_bytes().to_vec();
        while !(10 + text.len() + 1).is_multiple_of(64) {
            text.push(b' ');
        }
        text.push(b'\n');
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&(text.len() as u16).to_le_bytes());
        out.extend_from_slice(&text);
        out
    }

    fn plain(descr: &str, fortran_order: bool, shape: &[u64]) -> HeaderDict {
        HeaderDict { descr: Descr::Plain(descr.into()), fortran_order, shape: shape.to_vec(), data_offset: 0 }
    }

    #[test]
    fn reads_what_numpy_writes() {
        for (dict, want) in [
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", plain("<f4", false, &[3, 4])),
            ("{'descr': '|u1', 'fortran_order': False, 'shape': (7,), }", plain("|u1", false, &[7])),
            ("{'descr': '<i8', 'fortran_order': True, 'shape': (), }", plain("<i8", true, &[])),
            (
                "{'descr': '<U10', 'fortran_order': False, 'shape': (0, 4294967296), }",
                plain("<U10", false, &[0, 1 << 32]),
            ),
            // Another key order, double quotes, no trailing comma, Python 2's longs, spaces and newlines.
            ("{\"shape\": (2L,3L),'fortran_order':False,\n 'descr':\"<f8\"}", plain("<f8", false, &[2, 3])),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (18446744073709551615,), }",
                plain("<f4", false, &[u64::MAX]),
            ),
        ] {
            let file = v1(dict);
            assert_eq!(parse_header(&file), Ok(HeaderDict { data_offset: file.len(), ..want }), "{dict}");
        }
    }

    #[test]
    fn a_structured_descr_is_returned_as_its_text() {
        let dict = "{'descr': [('a', '<f4', (2,)), ('b', [('c', '<i8')])], 'fortran_order': False, 'shape': (7,), }";
        let got = parse_header(&v1(dict)).unwrap();
        assert_eq!(got.descr, Descr::Structured("[('a', '<f4', (2,)), ('b', [('c', '<i8')])]".into()));
        assert_eq!(got.shape, [7]);
    }

    #[test]
    fn versions_2_and_3_have_a_32_bit_field() {
        let dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }\n";
        for version in [2, 3] {
            let mut file = vec![0x93, b'N', b'U', b'M', b'P', b'Y', version, 0];
            file.extend_from_slice(&(dict.len() as u32).to_le_bytes());
            file.extend_from_slice(dict.as_bytes());
            file.extend_from_slice(&[0; 20]);
            let got = parse_header(&file).unwrap();
            assert_eq!((got.shape.as_slice(), got.data_offset), (&[5][..], 12 + dict.len()));
        }
        let mut bad_utf8 = b"\x93NUMPY\x03\x00\x04\x00\x00\x00{'\xff".to_vec();
        bad_utf8.push(b'}');
        assert!(parse_header(&bad_utf8[..16]).unwrap_err().contains("not UTF-8"));
    }

    #[test]
    fn refuses_what_numpy_refuses_with_a_reason() {
        let deep = format!("{{'descr': {}'<f4'{}, }}", "[".repeat(54), "]".repeat(54));
        for (dict, why) in [
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (3), }", "a 1-tuple is written (3,)"),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (-3,), }", "a negative dimension"),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (18446744073709551616,), }", "overflows 64 bits"),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (3.5,), }", "expected a dimension"),
            ("{'descr': '<f4', 'fortran_order': 0, 'shape': (3,), }", "neither True nor False"),
            ("{'descr': '<f4', 'fortran_order': False, }", "no 'shape' key"),
            ("{'fortran_order': False, 'shape': (1,)}", "no 'descr' key"),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", "a key 'x' besides"),
            ("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", "'descr' twice"),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} x", "only whitespace after"),
            ("{'descr': '<f4' 'fortran_order': False, 'shape': (1,)}", "expected ',' or the closing bracket"),
            ("{'descr': '<f4, 'fortran_order': False}", "expected ',' or the closing bracket at byte 17"),
            ("{'descr' '<f4'}", "expected ':' after a key"),
            ("{'descr': 7, 'fortran_order': False, 'shape': (1,)}", "neither a dtype string"),
            ("['descr']", "expected the header's dict"),
            ("{'descr': '<f4", "without its closing quote"),
            ("{'descr': [('a', '<f4'),", "expected a value at the end"),
            (deep.as_str(), "deeper than 8 levels"),
        ] {
            let err = parse_header(&v1(dict)).unwrap_err();
            assert!(err.contains(why), "{dict}: {err}");
        }
        let many = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({}), }}", "1, ".repeat(65));
        assert!(parse_header(&v1(&many)).unwrap_err().contains("more than 64 dimensions"));
    }

    #[test]
    fn refuses_a_header_length_past_the_bytes_read() {
        let dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }";
        let mut file = v1(dict);
        let len = u16::from_le_bytes([file[8], file[9]]) + 1;
        file[8..10].copy_from_slice(&len.to_le_bytes());
        assert!(parse_header(&file).unwrap_err().contains(&format!("says {len} bytes")));
        // Version 2.0: a 32-bit field, 0xFFFF_FFFE in a 12-byte file.
        let err = parse_header(b"\x93NUMPY\x02\x00\xfe\xff\xff\xff").unwrap_err();
        assert!(err.contains("says 4294967294 bytes") && err.contains("(0 bytes after"), "{err}");
        assert!(parse_header(b"\x93NUMPY\x02\x00\xfe\xff").unwrap_err().contains("ends inside the preamble"));
        assert!(parse_header(b"\x93NUMPY\x04\x00\xfe\xff\xff\xff").unwrap_err().contains("version 4.0"));
        assert!(parse_header(b"\x93NUMPX\x01\x00").unwrap_err().contains("magic"));
    }

    #[test]
    fn time_is_linear_in_the_text() {
        // Nesting at the bound, repeated to the 1 MiB limit, and every prefix
        // of a header: each parse visits each byte a bounded number of times,
        // so these finish at once (the previous parser was exponential in
        // the depth: fuzzing finding F5).
        let unit = format!("{}1{}, ", "(".repeat(6), ",)".repeat(6));
        let dict = format!("{{'descr': [{}], 'fortran_order': False, 'shape': (1,)}}", unit.repeat(40_000));
        let mut file = b"\x93NUMPY\x02\x00".to_vec();
        file.extend_from_slice(&(dict.len() as u32).to_le_bytes());
        file.extend_from_slice(dict.as_bytes());
        assert!(matches!(parse_header(&file).unwrap().descr, Descr::Structured(_)));
        let honest = v1("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }");
        for cut in 0..honest.len() {
            assert!(parse_header(&honest[..cut]).is_err(), "cut at {cut}");
        }
    }
}
