//! The one report shape every parser returns: accepted objects in order, every dropped piece with
//! where and why, and whether the reply was cut off.

use serde::{Deserialize, Serialize};

use crate::objects::{Ends, Objects};

/// Why a piece of a reply was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum DropKind {
    /// Text that looked like JSON but does not parse.
    InvalidJson,
    /// Parsed, but failed the schema (the detail lists every violation with its JSON pointer).
    Schema,
    /// An incomplete piece at the end of a reply that was cut off.
    Truncated,
    /// A JSON value that is not an object where an object was expected.
    NotObject,
    /// A delimited record with the wrong number of fields.
    FieldCount,
    /// A delimited record whose tag names no known record type.
    UnknownRecord,
    /// A line of prose (neither JSON nor a record).
    Prose,
    /// Dropped by the prompt's `ensure` rule: a required field is absent.
    MissingField,
    /// Dropped by the prompt's `coerce` rule: a value that cannot be converted to the schema's type.
    Coerce,
    /// The schema could not be checked: a `pattern` took more steps than the regex engine allows
    /// (a backtracking pattern). The object is not accepted, but it is not called invalid either:
    /// the pattern needs simplifying, not the reply repairing.
    Unchecked,
}

impl DropKind {
    /// Whether the model can be asked to fix this drop (a repair turn): not a piece cut off by
    /// the budget, not a check Kerf itself could not finish.
    pub fn is_repairable(self) -> bool {
        !matches!(self, DropKind::Truncated | DropKind::Unchecked)
    }
}

impl DropKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DropKind::InvalidJson => "invalid_json",
            DropKind::Schema => "schema",
            DropKind::Truncated => "truncated",
            DropKind::NotObject => "not_object",
            DropKind::FieldCount => "field_count",
            DropKind::UnknownRecord => "unknown_record",
            DropKind::Prose => "prose",
            DropKind::MissingField => "missing_field",
            DropKind::Coerce => "coerce",
            DropKind::Unchecked => "unchecked",
        }
    }
}

impl std::fmt::Display for DropKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One piece of the reply that was not accepted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dropped {
    /// 1-based line of the reply where the piece starts.
    pub line: usize,
    pub kind: DropKind,
    pub detail: String,
}

/// What a parser made of one reply. `kerf parse --json` prints exactly these three keys.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ParseReport {
    /// The accepted objects, in the order they appear in the reply: held as their compact JSON
    /// text (see [`Objects`]), handed out as `Value`s on demand; serialised as a JSON array.
    pub objects: Objects,
    /// Every piece that was not accepted, in order.
    pub dropped: Vec<Dropped>,
    /// Whether the reply was cut off (an incomplete last piece, a missing completion delimiter,
    /// an unclosed array or fence).
    pub truncated: bool,
    /// What the parser noticed that is neither an object nor a drop (a reply cut inside a UTF-8
    /// character; LightRAG records after the completion delimiter). Absent when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// For each accepted object, the byte offset where the text that made it ends (after its
    /// closing brace, or its record's terminator). Sweeps are built from these; not part of the
    /// `--json` interface. Held as differences (a byte or two per object).
    #[serde(skip)]
    pub ends: Ends,
    /// For each accepted object, the byte offset where the text that made it starts (its
    /// opening brace, its record's first character; for strict `json`, where the whole value
    /// starts). With `ends`, where each object sits in the reply (see
    /// [`Parser::spans`](crate::parse::Parser::spans)); not part of the `--json` interface.
    #[serde(skip)]
    pub starts: Ends,
}

impl ParseReport {
    pub(crate) fn drop(&mut self, line: usize, kind: DropKind, detail: impl Into<String>) {
        self.dropped.push(Dropped {
            line,
            kind,
            detail: detail.into(),
        });
    }
    /// How many pieces were dropped of each kind, in the order the kinds first appear.
    pub fn drop_counts(&self) -> DropCounts {
        let mut counts: Vec<(DropKind, usize)> = Vec::new();
        for d in &self.dropped {
            match counts.iter_mut().find(|(k, _)| *k == d.kind) {
                Some((_, n)) => *n += 1,
                None => counts.push((d.kind, 1)),
            }
        }
        DropCounts(counts)
    }

    /// The drop counts as people read them: `2 schema, 1 truncated` (empty when nothing dropped).
    pub fn drop_summary(&self) -> String {
        self.drop_counts().to_string()
    }

    /// Nothing usable came out while something was dropped: the CLI's "input failed" case.
    pub fn failed(&self) -> bool {
        self.objects.is_empty() && !self.dropped.is_empty()
    }
}

/// Drops counted by kind, in the order the kinds first appear. Serialised as a map
/// (`{"schema": 2, "truncated": 1}`); displayed as people read it (`2 schema, 1 truncated`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DropCounts(pub Vec<(DropKind, usize)>);

impl DropCounts {
    /// Every drop, whatever its kind.
    pub fn total(&self) -> usize {
        self.0.iter().map(|(_, n)| n).sum()
    }
}

impl std::fmt::Display for DropCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (k, n)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{n} {k}")?;
        }
        Ok(())
    }
}

/// Read back in the map's order (a stored compare opened again).
impl<'de> Deserialize<'de> for DropCounts {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Counts;
        impl<'de> serde::de::Visitor<'de> for Counts {
            type Value = DropCounts;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("drop counts by kind")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<DropCounts, A::Error> {
                let mut counts = Vec::new();
                while let Some(entry) = map.next_entry::<DropKind, usize>()? {
                    counts.push(entry);
                }
                Ok(DropCounts(counts))
            }
        }
        d.deserialize_map(Counts)
    }
}

impl Serialize for DropCounts {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (kind, n) in &self.0 {
            map.serialize_entry(kind, n)?;
        }
        map.end()
    }
}
