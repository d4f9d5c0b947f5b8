//! The accepted objects of a report, held compactly (issue 36, item 12).
//!
//! A [`serde_json::Value`] is 80 bytes before any heap (with `preserve_order`), so a reply of ten
//! million `{}` lines held as a `Vec<Value>` takes 800 MB whatever else is done. [`Objects`]
//! holds each accepted value as its compact JSON text (what `serde_json::to_string` writes: key
//! order kept, no spaces), all in one buffer, with where each one ends in an [`Ends`] (a byte or
//! two per object). Values are handed out on demand ([`Objects::get`], [`Objects::iter`]) by a
//! reader of exactly that text, which gives back the very value that was written (floats
//! included, bit for bit: serde_json's own reader rounds some long floats differently), so the
//! JSON a report prints is byte for byte what printing the values themselves gave.

use std::borrow::Borrow;
use std::fmt;

use serde::de::{SeqAccess, Visitor};
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Number, Value};

/// Entries between two marks of an [`Ends`]: a lookup by index decodes at most this many.
const MARK_EVERY: usize = 64;

/// A sequence of offsets held as the differences between neighbours (zigzag LEB128: one byte
/// for a difference under 64), with a mark every [`MARK_EVERY`] entries for lookups by index.
/// Offsets that grow by small steps — where a reply's objects end, where each object's text ends
/// in an [`Objects`] buffer — take a byte or two each instead of eight.
#[derive(Clone, Default)]
pub struct Ends {
    bytes: Vec<u8>,
    /// For entries 0, 64, 128, …: where the entry's difference starts in `bytes`, and the value
    /// of the entry before it (0 for the first).
    marks: Vec<(usize, usize)>,
    len: usize,
    /// The last value pushed (0 when empty).
    last: usize,
}

fn zigzag(from: usize, to: usize) -> u64 {
    let d = (to as u64).wrapping_sub(from as u64) as i64;
    ((d << 1) ^ (d >> 63)) as u64
}

fn unzigzag(from: usize, z: u64) -> usize {
    let d = ((z >> 1) as i64) ^ -((z & 1) as i64);
    (from as u64).wrapping_add(d as u64) as usize
}

fn put_varint(out: &mut Vec<u8>, mut z: u64) {
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// The varint at `bytes[pos..]` and the offset after it.
fn get_varint(bytes: &[u8], mut pos: usize) -> (u64, usize) {
    let mut z = 0u64;
    let mut shift = 0;
    while let Some(&b) = bytes.get(pos) {
        pos += 1;
        z |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            break;
        }
        shift += 7;
    }
    (z, pos)
}

impl Ends {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn push(&mut self, value: usize) {
        if self.len.is_multiple_of(MARK_EVERY) {
            self.marks.push((self.bytes.len(), self.last));
        }
        put_varint(&mut self.bytes, zigzag(self.last, value));
        self.last = value;
        self.len += 1;
    }

    pub fn last(&self) -> Option<usize> {
        (self.len > 0).then_some(self.last)
    }

    /// The entry at `i`.
    pub fn get(&self, i: usize) -> Option<usize> {
        (i < self.len).then(|| self.iter_from(i).next().unwrap_or(0))
    }

    /// The entries in order.
    pub fn iter(&self) -> EndsIter<'_> {
        self.iter_from(0)
    }

    /// The entries from index `start` on (none when `start` is past the end).
    pub fn iter_from(&self, start: usize) -> EndsIter<'_> {
        if start >= self.len {
            return EndsIter {
                bytes: &self.bytes,
                pos: self.bytes.len(),
                prev: self.last,
                left: 0,
            };
        }
        let (mut pos, mut prev) = self.marks[start / MARK_EVERY];
        for _ in 0..start % MARK_EVERY {
            let (z, next) = get_varint(&self.bytes, pos);
            prev = unzigzag(prev, z);
            pos = next;
        }
        EndsIter {
            bytes: &self.bytes,
            pos,
            prev,
            left: self.len - start,
        }
    }

    /// Where entry `i`'s difference starts in `bytes` and the value before it (`i <= len`).
    fn locate(&self, i: usize) -> (usize, usize) {
        if i == self.len {
            return (self.bytes.len(), self.last);
        }
        let it = self.iter_from(i);
        (it.pos, it.prev)
    }

    /// Keep the first `n` entries.
    pub fn truncate(&mut self, n: usize) {
        if n >= self.len {
            return;
        }
        let (pos, prev) = self.locate(n);
        self.bytes.truncate(pos);
        self.marks.truncate(n.div_ceil(MARK_EVERY));
        self.len = n;
        self.last = prev;
    }

    pub fn clear(&mut self) {
        self.truncate(0);
    }

    /// Move every entry of `other` to the end of this one.
    pub fn append(&mut self, other: &mut Ends) {
        if self.is_empty() {
            std::mem::swap(self, other);
            return;
        }
        self.extend(other.iter());
        other.clear();
    }

    /// Add `by` to every entry from index `start` on.
    pub fn shift_from(&mut self, start: usize, by: usize) {
        if by == 0 || start >= self.len {
            return;
        }
        // Only the difference at `start` changes (and the values the marks after it hold).
        let (pos, prev) = self.locate(start);
        let (z, after) = get_varint(&self.bytes, pos);
        let value = unzigzag(prev, z);
        let mut encoded = Vec::with_capacity(10);
        put_varint(&mut encoded, zigzag(prev, value.wrapping_add(by)));
        let grown = encoded.len() as isize - (after - pos) as isize;
        self.bytes.splice(pos..after, encoded);
        for (k, mark) in self.marks.iter_mut().enumerate() {
            let entry = k * MARK_EVERY;
            if entry > start {
                mark.0 = mark.0.wrapping_add_signed(grown);
                mark.1 = mark.1.wrapping_add(by);
            }
        }
        self.last = self.last.wrapping_add(by);
    }

    /// The entries as a vector.
    pub fn to_vec(&self) -> Vec<usize> {
        self.iter().collect()
    }

    /// Bytes held on the heap (capacity, not only what is used).
    pub fn heap_bytes(&self) -> usize {
        self.bytes.capacity() + self.marks.capacity() * size_of::<(usize, usize)>()
    }
}

/// The entries of an [`Ends`], in order.
#[derive(Clone)]
pub struct EndsIter<'a> {
    bytes: &'a [u8],
    pos: usize,
    prev: usize,
    left: usize,
}

impl Iterator for EndsIter<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        if self.left == 0 {
            return None;
        }
        let (z, next) = get_varint(self.bytes, self.pos);
        self.pos = next;
        self.prev = unzigzag(self.prev, z);
        self.left -= 1;
        Some(self.prev)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for EndsIter<'_> {}

impl<'a> IntoIterator for &'a Ends {
    type Item = usize;
    type IntoIter = EndsIter<'a>;

    fn into_iter(self) -> EndsIter<'a> {
        self.iter()
    }
}

impl Extend<usize> for Ends {
    fn extend<I: IntoIterator<Item = usize>>(&mut self, iter: I) {
        for v in iter {
            self.push(v);
        }
    }
}

impl FromIterator<usize> for Ends {
    fn from_iter<I: IntoIterator<Item = usize>>(iter: I) -> Self {
        let mut ends = Ends::new();
        ends.extend(iter);
        ends
    }
}

impl From<Vec<usize>> for Ends {
    fn from(v: Vec<usize>) -> Self {
        v.into_iter().collect()
    }
}

/// The encoding is a function of the entries alone, so equal entries are equal bytes.
impl PartialEq for Ends {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.bytes == other.bytes
    }
}

impl PartialEq<Vec<usize>> for Ends {
    fn eq(&self, other: &Vec<usize>) -> bool {
        self.len == other.len() && self.iter().eq(other.iter().copied())
    }
}

impl fmt::Debug for Ends {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// JSON values held as their compact text in one buffer: see the module docs. Serialised (and
/// read back) as a JSON array of the values.
#[derive(Clone, Default)]
pub struct Objects {
    /// The values' compact JSON, one after the other.
    text: String,
    /// Where each value's text ends in `text`.
    bounds: Ends,
    /// `serde_json` writes to a byte buffer: each value is written here, then appended to `text`.
    scratch: Vec<u8>,
}

impl Objects {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.bounds.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bounds.is_empty()
    }

    /// Append a value (as its compact JSON text).
    pub fn push<V: Borrow<Value>>(&mut self, value: V) {
        self.scratch.clear();
        // Writing a `Value` to memory cannot fail (its keys are strings, its numbers finite).
        if serde_json::to_writer(&mut self.scratch, value.borrow()).is_err() {
            self.scratch.clear();
            self.scratch.extend_from_slice(b"null");
        }
        // serde_json writes UTF-8.
        self.text
            .push_str(std::str::from_utf8(&self.scratch).unwrap_or("null"));
        self.bounds.push(self.text.len());
        if self.scratch.capacity() > 64 * 1024 {
            self.scratch = Vec::new();
        }
    }

    /// The value at `i`.
    pub fn get(&self, i: usize) -> Option<Value> {
        self.raw(i).map(decode)
    }

    pub fn first(&self) -> Option<Value> {
        self.get(0)
    }

    pub fn last(&self) -> Option<Value> {
        self.len().checked_sub(1).and_then(|i| self.get(i))
    }

    /// The compact JSON text of the value at `i` (what `serde_json::to_string` gives for it).
    pub fn raw(&self, i: usize) -> Option<&str> {
        self.raws_from(i).next()
    }

    /// The values in order, each read from its text as it is reached.
    pub fn iter(&self) -> Iter<'_> {
        self.iter_from(0)
    }

    /// The values from index `start` on.
    pub fn iter_from(&self, start: usize) -> Iter<'_> {
        Iter {
            raws: self.raws_from(start),
        }
    }

    /// The values' compact JSON texts in order.
    pub fn raws(&self) -> Raws<'_> {
        self.raws_from(0)
    }

    /// The values' compact JSON texts from index `start` on.
    pub fn raws_from(&self, start: usize) -> Raws<'_> {
        let from = match start.checked_sub(1) {
            None => 0,
            Some(i) => self.bounds.get(i).unwrap_or(self.text.len()),
        };
        Raws {
            text: &self.text,
            from,
            ends: self.bounds.iter_from(start),
        }
    }

    /// Keep the first `n` values.
    pub fn truncate(&mut self, n: usize) {
        if n >= self.len() {
            return;
        }
        let end = match n.checked_sub(1) {
            None => 0,
            Some(i) => self.bounds.get(i).unwrap_or(0),
        };
        self.text.truncate(end);
        self.bounds.truncate(n);
    }

    pub fn clear(&mut self) {
        self.text.clear();
        self.bounds.clear();
    }

    /// Move every value of `other` to the end of this one.
    pub fn append(&mut self, other: &mut Objects) {
        if self.is_empty() {
            std::mem::swap(&mut self.text, &mut other.text);
            std::mem::swap(&mut self.bounds, &mut other.bounds);
            return;
        }
        self.extend_from(other, 0);
        other.clear();
    }

    /// Copy the values of `other` from index `start` on to the end of this one.
    pub fn extend_from(&mut self, other: &Objects, start: usize) {
        let base = self.text.len();
        let from = match start.checked_sub(1) {
            None => 0,
            Some(i) => other.bounds.get(i).unwrap_or(other.text.len()),
        };
        self.text
            .push_str(&other.text[from.min(other.text.len())..]);
        for end in other.bounds.iter_from(start) {
            self.bounds.push(base + (end - from));
        }
    }

    /// Whether the first values of this one are exactly `prefix`'s.
    pub fn starts_with(&self, prefix: &Objects) -> bool {
        prefix.len() <= self.len()
            && self.text.starts_with(prefix.text.as_str())
            && self
                .bounds
                .iter()
                .zip(prefix.bounds.iter())
                .all(|(a, b)| a == b)
    }

    /// The values, each read from its text.
    pub fn to_vec(&self) -> Vec<Value> {
        self.iter().collect()
    }

    /// Bytes held on the heap (capacity, not only what is used).
    pub fn heap_bytes(&self) -> usize {
        self.text.capacity() + self.bounds.heap_bytes() + self.scratch.capacity()
    }
}

/// The values of an [`Objects`], read one by one.
#[derive(Clone)]
pub struct Iter<'a> {
    raws: Raws<'a>,
}

impl Iterator for Iter<'_> {
    type Item = Value;

    fn next(&mut self) -> Option<Value> {
        self.raws.next().map(decode)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.raws.size_hint()
    }
}

impl ExactSizeIterator for Iter<'_> {}

/// The compact JSON texts of an [`Objects`], in order.
#[derive(Clone)]
pub struct Raws<'a> {
    text: &'a str,
    from: usize,
    ends: EndsIter<'a>,
}

impl<'a> Iterator for Raws<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let end = self.ends.next()?;
        let raw = self.text.get(self.from..end).unwrap_or("null");
        self.from = end;
        Some(raw)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.ends.size_hint()
    }
}

impl ExactSizeIterator for Raws<'_> {}

impl<'a> IntoIterator for &'a Objects {
    type Item = Value;
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl<V: Borrow<Value>> Extend<V> for Objects {
    fn extend<I: IntoIterator<Item = V>>(&mut self, iter: I) {
        for v in iter {
            self.push(v);
        }
    }
}

impl<V: Borrow<Value>> FromIterator<V> for Objects {
    fn from_iter<I: IntoIterator<Item = V>>(iter: I) -> Self {
        let mut objects = Objects::new();
        objects.extend(iter);
        objects
    }
}

impl From<Vec<Value>> for Objects {
    fn from(v: Vec<Value>) -> Self {
        v.into_iter().collect()
    }
}

/// Same values written the same way: the same text. (Stricter than comparing `Value`s, whose
/// maps compare regardless of key order: two reports are equal when they print the same.)
impl PartialEq for Objects {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text && self.bounds == other.bounds
    }
}

/// Compared as `Value`s, one by one.
impl PartialEq<[Value]> for Objects {
    fn eq(&self, other: &[Value]) -> bool {
        self.len() == other.len() && self.iter().zip(other).all(|(a, b)| a == *b)
    }
}

impl PartialEq<Vec<Value>> for Objects {
    fn eq(&self, other: &Vec<Value>) -> bool {
        *self == other[..]
    }
}

impl<const N: usize> PartialEq<[Value; N]> for Objects {
    fn eq(&self, other: &[Value; N]) -> bool {
        *self == other[..]
    }
}

impl fmt::Debug for Objects {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// A JSON array of the values, each read from its text and serialised as a `Value` is (so a
/// pretty printer indents them as it always did).
impl Serialize for Objects {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.len()))?;
        for v in self.iter() {
            seq.serialize_element(&v)?;
        }
        seq.end()
    }
}

/// From a JSON array of values, each written to the buffer as it is read.
impl<'de> Deserialize<'de> for Objects {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Seq;
        impl<'de> Visitor<'de> for Seq {
            type Value = Objects;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an array of JSON values")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Objects, A::Error> {
                let mut objects = Objects::new();
                while let Some(v) = seq.next_element::<Value>()? {
                    objects.push(v);
                }
                Ok(objects)
            }
        }
        d.deserialize_seq(Seq)
    }
}

/// The value whose compact JSON text is `raw`. Reads only what `serde_json` writes for a value
/// (and a little more: any escape, blanks); anything else falls back to serde_json's reader,
/// which is not expected to happen (a debug build says so).
fn decode(raw: &str) -> Value {
    let mut reader = Reader {
        b: raw.as_bytes(),
        s: raw,
        i: 0,
    };
    match reader.value() {
        Some(v) if reader.i == raw.len() => v,
        _ => {
            debug_assert!(false, "not a value's compact JSON: {raw}");
            serde_json::from_str(raw).unwrap_or(Value::Null)
        }
    }
}

/// A reader of compact JSON text that returns exactly the value that was written: integers as
/// the `u64`/`i64` they were, floats through Rust's correctly rounded parser (the shortest text
/// `serde_json` writes for an `f64` reads back as that `f64`).
struct Reader<'a> {
    b: &'a [u8],
    s: &'a str,
    i: usize,
}

impl Reader<'_> {
    fn eat(&mut self, c: u8) -> Option<()> {
        (self.b.get(self.i) == Some(&c)).then(|| self.i += 1)
    }

    fn literal(&mut self, word: &str, v: Value) -> Option<Value> {
        self.s[self.i..].starts_with(word).then(|| {
            self.i += word.len();
            v
        })
    }

    fn value(&mut self) -> Option<Value> {
        match *self.b.get(self.i)? {
            b'{' => {
                self.i += 1;
                let mut members: Vec<(String, Value)> = Vec::new();
                if self.eat(b'}').is_none() {
                    loop {
                        let key = self.string()?;
                        self.eat(b':')?;
                        members.push((key, self.value()?));
                        if self.eat(b',').is_none() {
                            self.eat(b'}')?;
                            break;
                        }
                    }
                }
                // Exactly as long as it needs to be.
                Some(Value::Object(members.into_iter().collect::<Map<_, _>>()))
            }
            b'[' => {
                self.i += 1;
                let mut items = Vec::new();
                if self.eat(b']').is_none() {
                    loop {
                        items.push(self.value()?);
                        if self.eat(b',').is_none() {
                            self.eat(b']')?;
                            break;
                        }
                    }
                }
                items.shrink_to_fit();
                Some(Value::Array(items))
            }
            b'"' => self.string().map(Value::String),
            b't' => self.literal("true", Value::Bool(true)),
            b'f' => self.literal("false", Value::Bool(false)),
            b'n' => self.literal("null", Value::Null),
            _ => self.number(),
        }
    }

    fn number(&mut self) -> Option<Value> {
        let start = self.i;
        let mut float = false;
        while let Some(&c) = self.b.get(self.i) {
            match c {
                b'0'..=b'9' | b'-' | b'+' => {}
                b'.' | b'e' | b'E' => float = true,
                _ => break,
            }
            self.i += 1;
        }
        let t = &self.s[start..self.i];
        let n = if float {
            Number::from_f64(t.parse::<f64>().ok()?)?
        } else if t.starts_with('-') {
            Number::from(t.parse::<i64>().ok()?)
        } else {
            Number::from(t.parse::<u64>().ok()?)
        };
        Some(Value::Number(n))
    }

    fn string(&mut self) -> Option<String> {
        self.eat(b'"')?;
        let mut out: Option<String> = None;
        loop {
            let run = memchr::memchr2(b'"', b'\\', &self.b[self.i..])?;
            let plain = &self.s[self.i..self.i + run];
            self.i += run;
            if self.b[self.i] == b'"' {
                self.i += 1;
                return Some(match out {
                    Some(mut s) => {
                        s.push_str(plain);
                        s
                    }
                    None => plain.to_string(),
                });
            }
            let s = out.get_or_insert_with(String::new);
            s.push_str(plain);
            // At a backslash.
            let c = match *self.b.get(self.i + 1)? {
                b'"' => '"',
                b'\\' => '\\',
                b'/' => '/',
                b'b' => '\u{8}',
                b'f' => '\u{c}',
                b'n' => '\n',
                b'r' => '\r',
                b't' => '\t',
                b'u' => {
                    let hi = self.hex_escape()?;
                    let c = if (0xD800..0xDC00).contains(&hi) {
                        let lo = self.hex_escape()?;
                        if !(0xDC00..0xE000).contains(&lo) {
                            return None;
                        }
                        char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))?
                    } else {
                        char::from_u32(hi)?
                    };
                    s.push(c);
                    continue;
                }
                _ => return None,
            };
            self.i += 2;
            s.push(c);
        }
    }

    /// The `\uXXXX` escape at `self.i`; leaves `self.i` after it.
    fn hex_escape(&mut self) -> Option<u32> {
        if self.b.get(self.i..self.i + 2) != Some(b"\\u") {
            return None;
        }
        let digits = self.s.get(self.i + 2..self.i + 6)?;
        if !digits.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        self.i += 6;
        u32::from_str_radix(digits, 16).ok()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn round_trip(v: &Value) {
        let mut o = Objects::new();
        o.push(v);
        let back = o.get(0).expect("one value");
        assert_eq!(&back, v);
        assert_eq!(
            back.to_string(),
            v.to_string(),
            "key order and number forms"
        );
        assert_eq!(o.raw(0), Some(v.to_string().as_str()));
    }

    #[test]
    fn values_come_back_exactly() {
        for v in [
            json!({}),
            json!([]),
            json!(null),
            json!("a \"quoted\" \\ line\nwith\ttabs \u{1} \u{7f} é 𝄞 \u{2028}"),
            json!({"b": 1, "a": [1, -2, 2.5, -0.0, 1e300, 5e-324, true, false, null], "": {}}),
            json!([[[[]]], {"x": {"y": {"z": []}}}]),
            json!(u64::MAX),
            json!(i64::MIN),
            json!(0.1 + 0.2),
            json!(1e16),
            json!(123456789012345680000.0),
        ] {
            round_trip(&v);
        }
    }

    #[test]
    fn floats_come_back_bit_for_bit() {
        // serde_json's default reader is off by one ulp on some of these; the values must not be.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let f = f64::from_bits(x);
            if f.is_finite() {
                let v = json!(f);
                let mut o = Objects::new();
                o.push(&v);
                assert_eq!(o.get(0).and_then(|v| v.as_f64()).map(f64::to_bits), Some(x));
            }
        }
    }

    #[test]
    fn escapes_and_odd_text_are_read() {
        assert_eq!(decode(r#""\ud834\udd1e\u00e9\/""#), json!("𝄞é/"));
        assert_eq!(decode(r#"{"a":"\u0000"}"#), json!({"a": "\u{0}"}));
    }

    #[test]
    fn ends_index_truncate_and_shift() {
        let values: Vec<usize> = (0..1000).map(|i| i * 3 + (i % 7) * 1000).collect();
        let mut ends: Ends = values.iter().copied().collect();
        assert_eq!(ends.to_vec(), values);
        for i in [0, 1, 63, 64, 65, 500, 999] {
            assert_eq!(ends.get(i), Some(values[i]));
            assert_eq!(ends.iter_from(i).collect::<Vec<_>>(), values[i..]);
        }
        assert_eq!(ends.get(1000), None);
        let mut shifted = ends.clone();
        shifted.shift_from(130, 1_000_000);
        let expect: Vec<usize> = values
            .iter()
            .enumerate()
            .map(|(i, &v)| if i >= 130 { v + 1_000_000 } else { v })
            .collect();
        assert_eq!(shifted.to_vec(), expect);
        assert_eq!(shifted, expect.iter().copied().collect::<Ends>());
        ends.truncate(129);
        assert_eq!(ends.to_vec(), values[..129]);
        ends.push(5);
        assert_eq!(ends.last(), Some(5));
        assert_eq!(ends.len(), 130);
        let mut again: Ends = values[..129].iter().copied().collect();
        again.push(5);
        assert_eq!(ends, again);
    }

    #[test]
    fn objects_slice_append_and_compare() {
        let all: Vec<Value> = (0..200)
            .map(|i| json!({"i": i, "s": "x".repeat(i % 5)}))
            .collect();
        let objects: Objects = all.iter().collect();
        assert_eq!(objects, all);
        assert_eq!(objects.len(), 200);
        assert_eq!(objects.get(130), Some(all[130].clone()));
        assert_eq!(objects.iter_from(150).collect::<Vec<_>>(), all[150..]);
        let mut head: Objects = all[..70].iter().collect();
        assert!(objects.starts_with(&head));
        let mut tail = Objects::new();
        tail.extend_from(&objects, 70);
        head.append(&mut tail);
        assert!(tail.is_empty());
        assert_eq!(head, objects);
        let mut cut = objects.clone();
        cut.truncate(3);
        assert_eq!(cut, all[..3]);
        assert_eq!(
            serde_json::to_string_pretty(&objects).ok(),
            serde_json::to_string_pretty(&all).ok()
        );
        let back: Objects =
            serde_json::from_str(&serde_json::to_string(&objects).unwrap_or_default())
                .expect("reads back");
        assert_eq!(back, objects);
    }
}
