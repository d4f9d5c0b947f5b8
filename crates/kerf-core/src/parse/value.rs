//! JSON values read with no spare capacity, for the objects a report keeps.
//!
//! serde_json's own `Value` reader grows each object's map one key at a time: with
//! `preserve_order` the map's entry vector follows its hash table's capacity (3, 7, 14, …), so an
//! object of 4 keys keeps room for 7 entries of 104 bytes each, and arrays keep their doubling
//! slack. A report holds every object of a reply until it is dropped, so that slack multiplies:
//! [`Compact`] reads the very same value (same parser, same errors at the same offsets, same
//! key order and duplicate-key rule) into maps and arrays of exactly their length.

use std::cell::RefCell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// A JSON value read as serde_json reads a [`Value`], without spare capacity.
pub(crate) struct Compact(pub Value);

impl<'de> de::Deserialize<'de> for Compact {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        ValueSeed.deserialize(deserializer).map(Compact)
    }
}

thread_local! {
    /// Buffers for the members of the maps being read (one per nesting level in use), kept
    /// across values so that reading an object costs no allocation besides the value's own.
    static MEMBERS: RefCell<Vec<Vec<(String, Value)>>> = const { RefCell::new(Vec::new()) };
}

/// A buffer larger than this is not kept for the next value.
const KEEP_MEMBERS: usize = 256;

struct ValueSeed;

impl<'de> DeserializeSeed<'de> for ValueSeed {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(ValueSeed)
    }
}

/// The visits of serde_json's own `Value` visitor (for a JSON reader, without
/// `arbitrary_precision` or `raw_value`), but for the two containers.
impl<'de> Visitor<'de> for ValueSeed {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_i128<E: de::Error>(self, value: i128) -> Result<Value, E> {
        let de = de::value::I128Deserializer::new(value);
        de::Deserialize::deserialize(de).map(Value::Number)
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_u128<E: de::Error>(self, value: u128) -> Result<Value, E> {
        let de = de::value::U128Deserializer::new(value);
        de::Deserialize::deserialize(de).map(Value::Number)
    }

    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        Ok(Number::from_f64(value).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(String::from(value)))
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        ValueSeed.deserialize(deserializer)
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(ValueSeed)? {
            items.push(item);
        }
        items.shrink_to_fit();
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut members = MEMBERS.with(|m| m.borrow_mut().pop()).unwrap_or_default();
        let read = (|| -> Result<(), A::Error> {
            while let Some(key) = map.next_key::<String>()? {
                let value = map.next_value_seed(ValueSeed)?;
                members.push((key, value));
            }
            Ok(())
        })();
        // Built with the exact capacity; a repeated key keeps its first place and takes the
        // last value, as serde_json's `Map::insert` does.
        let object = read.map(|()| Value::Object(members.drain(..).collect::<Map<_, _>>()));
        members.clear();
        if members.capacity() <= KEEP_MEMBERS {
            MEMBERS.with(|m| m.borrow_mut().push(members));
        }
        object
    }
}

/// What [`Elements`] read: a top-level array (its elements handed over one by one), or any
/// other value.
pub(crate) enum Top {
    Array,
    Value(Value),
}

/// Reads one value exactly as [`Compact`] does (same parser, same errors at the same offsets),
/// except that a top-level array is never built: each element goes to the closure as soon as it
/// is read, so a reply's array takes the memory of one element at a time.
pub(crate) struct Elements<F>(pub F);

impl<'de, F: FnMut(Value)> DeserializeSeed<'de> for Elements<F> {
    type Value = Top;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Top, D::Error> {
        deserializer.deserialize_any(self)
    }
}

/// [`ValueSeed`]'s visits, but for a sequence.
impl<'de, F: FnMut(Value)> Visitor<'de> for Elements<F> {
    type Value = Top;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        ValueSeed.expecting(formatter)
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Top, E> {
        ValueSeed.visit_bool(value).map(Top::Value)
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Top, E> {
        ValueSeed.visit_i64(value).map(Top::Value)
    }

    fn visit_i128<E: de::Error>(self, value: i128) -> Result<Top, E> {
        ValueSeed.visit_i128(value).map(Top::Value)
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Top, E> {
        ValueSeed.visit_u64(value).map(Top::Value)
    }

    fn visit_u128<E: de::Error>(self, value: u128) -> Result<Top, E> {
        ValueSeed.visit_u128(value).map(Top::Value)
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Top, E> {
        ValueSeed.visit_f64(value).map(Top::Value)
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Top, E> {
        ValueSeed.visit_str(value).map(Top::Value)
    }

    fn visit_string<E: de::Error>(self, value: String) -> Result<Top, E> {
        ValueSeed.visit_string(value).map(Top::Value)
    }

    fn visit_none<E: de::Error>(self) -> Result<Top, E> {
        ValueSeed.visit_none().map(Top::Value)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Top, D::Error> {
        ValueSeed.visit_some(deserializer).map(Top::Value)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Top, E> {
        ValueSeed.visit_unit().map(Top::Value)
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Top, A::Error> {
        while let Some(item) = seq.next_element_seed(ValueSeed)? {
            (self.0)(item);
        }
        Ok(Top::Array)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Top, A::Error> {
        ValueSeed.visit_map(map).map(Top::Value)
    }
}

/// A JSON value read exactly as [`Compact`] reads it (the same calls into the same parser, so
/// the same values are accepted and the same errors raised at the same offsets), keeping
/// nothing: for finding where a value ends without holding it.
pub(crate) struct Skim;

impl<'de> de::Deserialize<'de> for Skim {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        SkimSeed.deserialize(deserializer).map(|()| Skim)
    }
}

struct SkimSeed;

impl<'de> DeserializeSeed<'de> for SkimSeed {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(SkimSeed)
    }
}

impl<'de> Visitor<'de> for SkimSeed {
    type Value = ();

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        ValueSeed.expecting(formatter)
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<(), E> {
        ValueSeed.visit_bool(value).map(drop)
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<(), E> {
        ValueSeed.visit_i64(value).map(drop)
    }

    fn visit_i128<E: de::Error>(self, value: i128) -> Result<(), E> {
        ValueSeed.visit_i128(value).map(drop)
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<(), E> {
        ValueSeed.visit_u64(value).map(drop)
    }

    fn visit_u128<E: de::Error>(self, value: u128) -> Result<(), E> {
        ValueSeed.visit_u128(value).map(drop)
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<(), E> {
        ValueSeed.visit_f64(value).map(drop)
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_string<E: de::Error>(self, _: String) -> Result<(), E> {
        Ok(())
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        SkimSeed.deserialize(deserializer)
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(SkimSeed)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        // Keys read as `Compact` reads them (as `String`s).
        while map.next_key::<String>()?.is_some() {
            map.next_value_seed(SkimSeed)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn both(text: &str) -> (Result<Value, String>, Result<Value, String>) {
        let theirs = serde_json::from_str::<Value>(text).map_err(|e| e.to_string());
        let ours = serde_json::from_str::<Compact>(text)
            .map(|c| c.0)
            .map_err(|e| e.to_string());
        (theirs, ours)
    }

    #[test]
    fn reads_what_serde_json_reads() {
        for text in [
            r#"{"b": 1, "a": [1, 2.5, -3, 1e400, true, null, "x\u00e9\n"], "c": {"d": {}}}"#,
            r#"{"k": 1, "j": 2, "k": 3}"#,
            r#"[{"a": 1}, [], {}, [[[]]], 18446744073709551615, -9223372036854775808]"#,
            r#"{"a": 1, "b": 2, "c": 3, "d": 4, "e": {"f": [1, 2, 3, 4, 5]}}"#,
            r#"{"a": x}"#,
            r#"{"a": 1"#,
            r#"{1: 2}"#,
            r#"[1, 2,]"#,
            "\"\\ud800\"",
            &format!("{}1{}", "[".repeat(200), "]".repeat(200)),
        ] {
            let (theirs, ours) = both(text);
            assert_eq!(ours, theirs, "{text}");
            // Skimmed: the same verdict, the same error.
            let skim = serde_json::from_str::<Skim>(text)
                .map(|_| ())
                .map_err(|e| e.to_string());
            assert_eq!(skim, theirs.clone().map(|_| ()), "{text}");
            // Element by element: the same elements, the same error.
            let mut items = Vec::new();
            let mut de = serde_json::Deserializer::from_str(text);
            let read = Elements(|v| items.push(v))
                .deserialize(&mut de)
                .and_then(|top| de.end().map(|()| top))
                .map(|top| match top {
                    Top::Array => Value::Array(std::mem::take(&mut items)),
                    Top::Value(v) => v,
                })
                .map_err(|e| e.to_string());
            assert_eq!(read, theirs, "{text}");
            if let (Ok(a), Ok(b)) = (&theirs, &ours) {
                // Same keys in the same order.
                assert_eq!(a.to_string(), b.to_string());
            }
        }
    }
}
