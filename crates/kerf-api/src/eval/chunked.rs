//! Evals over cut documents (`kerf eval --chunk-size …`): each document is cut as TrustGraph
//! cuts it ([`kerf_core::chunk`]), each chunk is a cell of its own — the same cells, keyed by
//! their chunk size, context, chunk and pass, run by the one cell runner, resumed and cached as
//! any other — and a document's chunk replies are merged into one before it is scored
//! ([`kerf_core::eval::mentions`]; the report's [`super::report`] does it).
//!
//! A chunk's request holds the chunk alone under the prompt's input variable; with context, the
//! end of the chunk before comes first, marked as LangExtract marks it (`[Previous text]: ...`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use kerf_core::Prompt;
use kerf_core::chunk::{self, Anchor, Chunk, ChunkSettings};
use kerf_core::eval::dataset::Row;
use kerf_core::eval::mentions::ChunkText;
use serde_json::{Map, Value};

pub use crate::experiments::spec::Chunking;

use crate::error::{ApiError, Code, Result};

/// Passes over each chunk, at most (`--passes`).
pub const MAX_PASSES: u32 = 20;
/// Context characters, at most (`--context-chars`).
pub const MAX_CONTEXT_CHARS: u32 = 1_000_000;
/// What comes before a chunk's context in its request.
pub const CONTEXT_MARK: &str = "[Previous text]: ...";

impl Chunking {
    /// The chunker's settings at `size`.
    pub fn settings(&self, size: u32) -> ChunkSettings {
        ChunkSettings {
            chunker: self.chunker,
            size: size as usize,
            overlap: self.overlap as usize,
        }
    }

    /// Sizes and contexts sorted, each once; every size above the overlap, passes within
    /// 1..=[`MAX_PASSES`], contexts within [`MAX_CONTEXT_CHARS`].
    pub fn checked(mut self) -> Result<Chunking> {
        let usage = |m: String| ApiError::new(Code::Usage, m);
        self.sizes.sort_unstable();
        self.sizes.dedup();
        self.context_chars.sort_unstable();
        self.context_chars.dedup();
        if self.sizes.is_empty() {
            return Err(usage("--chunk-size: give one or more sizes".into()));
        }
        for &size in &self.sizes {
            self.settings(size)
                .check()
                .map_err(|e| usage(e.to_string()))?;
        }
        if self.passes == 0 || self.passes > MAX_PASSES {
            return Err(usage(format!(
                "--passes {}: give 1 to {MAX_PASSES} passes over each chunk",
                self.passes
            )));
        }
        if self.context_chars.is_empty() {
            self.context_chars = vec![0];
        }
        if let Some(&c) = self.context_chars.iter().find(|&&c| c > MAX_CONTEXT_CHARS) {
            return Err(usage(format!(
                "--context-chars {c}: give 0 to {MAX_CONTEXT_CHARS} characters"
            )));
        }
        Ok(self)
    }

    /// Cells of one document per (prompt, provider, budget, constraint, repeat): its chunks at
    /// every size (`chunks`: the count at each size, in `sizes`' order), with each context and
    /// pass.
    pub fn cells_per_document(&self, chunks: &[u32]) -> u64 {
        chunks.iter().map(|&n| u64::from(n)).sum::<u64>()
            * self.context_chars.len() as u64
            * u64::from(self.passes)
    }
}

/// The document `prompt` reads of `row`, cut at `size`: an error naming the row when it has
/// none, or when the chunker refuses it.
pub(crate) fn cut(
    prompt: &Prompt,
    row: &Row,
    chunking: &Chunking,
    size: u32,
) -> Result<Vec<Chunk>> {
    let doc = row.document(prompt).ok_or_else(|| {
        ApiError::new(
            Code::Usage,
            format!(
                "{}: prompt `{}`: the row has no document under `{}` to cut into chunks",
                row.place(),
                prompt.id(),
                prompt.file.input_variable()
            ),
        )
    })?;
    chunk::chunk(doc, &chunking.settings(size)).map_err(|e| {
        ApiError::new(
            Code::Usage,
            format!("{}: prompt `{}`: {e}", row.place(), prompt.id()),
        )
    })
}

/// The context chunk `i` is given: the last `context` characters of the chunk before, and
/// where the document's characters begin in them (as [`Chunk::anchor`]; when that chunk's place
/// is known).
pub(crate) fn context_of(
    chunks: &[Chunk],
    i: usize,
    context: u32,
) -> Option<(&str, Option<Anchor>)> {
    if context == 0 || i == 0 {
        return None;
    }
    let before = chunks.get(i - 1)?;
    let n = before.text.chars().count();
    let skip = n.saturating_sub(context as usize);
    let at = before
        .text
        .char_indices()
        .nth(skip)
        .map_or(before.text.len(), |(b, _)| b);
    let anchor = before.anchor.map(|a| match a.byte.checked_sub(at) {
        // The context opens inside the U+FFFD before the document's characters.
        Some(lead) => Anchor { byte: lead, ..a },
        None => Anchor {
            byte: 0,
            start: (a.start + before.text[a.byte..at].chars().count()).min(a.end),
            end: a.end,
        },
    });
    Some((&before.text[at..], anchor))
}

/// Chunk `i` as its cell reads it: its text, its place, and its context.
pub(crate) fn chunk_text(chunks: &[Chunk], i: usize, context: u32) -> Option<ChunkText<'_>> {
    let c = chunks.get(i)?;
    Some(ChunkText {
        index: c.index as u32,
        text: &c.text,
        anchor: c.anchor,
        context: context_of(chunks, i, context),
    })
}

/// What chunk `i`'s request holds under the prompt's input variable: the chunk, after its
/// marked context.
pub(crate) fn input_of(chunks: &[Chunk], i: usize, context: u32) -> String {
    let text = chunks.get(i).map_or("", |c| c.text.as_str());
    match context_of(chunks, i, context) {
        Some((tail, _)) if !tail.is_empty() => format!("{CONTEXT_MARK}{tail}\n\n{text}"),
        _ => text.to_string(),
    }
}

/// The variables `prompt` renders chunk `i` of `row` with: the eval's `set`, the row's own,
/// and chunk `i`'s input under the input variable, where the document would be.
pub(crate) fn chunk_vars(
    prompt: &Prompt,
    set: &Map<String, Value>,
    row: &Row,
    chunks: &[Chunk],
    i: usize,
    context: u32,
) -> Map<String, Value> {
    let mut vars = set.clone();
    vars.extend(row.vars_with_input(prompt, Value::String(input_of(chunks, i, context))));
    vars
}

/// Which cut: a prompt's index, a row's, and the size.
pub(crate) type CutKey = (usize, usize, u32);

/// An eval's cuts: how many chunks each document has at each size (known before the matrix is
/// made, so its cells can be listed), and the last document cut (cells come a document at a
/// time, so its chunks are cut once, not once per cell).
#[derive(Default)]
pub struct Cuts {
    counts: HashMap<CutKey, u32>,
    last: Last<CutKey, Vec<Chunk>>,
}

impl Cuts {
    /// Note that document `key` has `n` chunks.
    pub(crate) fn set_count(&mut self, key: CutKey, n: u32) {
        self.counts.insert(key, n);
    }

    /// The chunks of document `key` (0 when it was not counted).
    pub(crate) fn count(&self, key: CutKey) -> u32 {
        self.counts.get(&key).copied().unwrap_or(0)
    }

    /// Document `key`'s chunks: the last cut if it is this one, else `make`'s.
    pub(crate) fn of(
        &self,
        key: CutKey,
        make: impl FnOnce() -> Result<Vec<Chunk>>,
    ) -> Result<Arc<Vec<Chunk>>> {
        self.last.of(key, make)
    }
}

/// The last value made, by its key: cells come a document at a time, so what each of a
/// document's cells needs (its row, its chunks) is made once for them all, and only one is
/// held.
pub(crate) struct Last<K, V> {
    last: Mutex<Option<(K, Arc<V>)>>,
}

impl<K, V> Default for Last<K, V> {
    fn default() -> Self {
        Last {
            last: Mutex::new(None),
        }
    }
}

impl<K: PartialEq, V> Last<K, V> {
    /// The value for `key`: the last one made if it is this one, else `make`'s (kept instead).
    pub(crate) fn of(&self, key: K, make: impl FnOnce() -> Result<V>) -> Result<Arc<V>> {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((k, v)) = last.as_ref()
            && *k == key
        {
            return Ok(v.clone());
        }
        let v = Arc::new(make()?);
        *last = Some((key, v.clone()));
        Ok(v)
    }
}

impl std::fmt::Debug for Cuts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cuts")
            .field("documents", &self.counts.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use kerf_core::chunk::Chunker;

    fn chunks() -> Vec<Chunk> {
        chunk::chunk(
            "Ada wrote notes.\n\nBabbage built engines.",
            &ChunkSettings {
                chunker: Chunker::Recursive,
                size: 24,
                overlap: 0,
            },
        )
        .unwrap()
    }

    /// A chunk's variables are the row's with the chunk in the document's place, as if the
    /// document had been set and then replaced, key order included; the document wherever the
    /// row holds it (its `input`, or a variable of the input's name).
    #[test]
    fn a_chunks_variables_are_the_rows_with_the_chunk_in_the_documents_place() {
        let prompt = Prompt::load(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../prompts/agent-kg-extract.json"),
        )
        .unwrap();
        let name = prompt.file.input_variable().to_string();
        let set: Map<String, Value> =
            serde_json::from_value(serde_json::json!({"z": 1, "lang": "en"})).unwrap();
        let mut in_vars = Map::new();
        in_vars.insert("lang".into(), Value::from("fr"));
        in_vars.insert(name.clone(), Value::from("the whole document"));
        in_vars.insert("b".into(), Value::from(2));
        let rows = [
            (
                Some("the whole document".to_string()),
                serde_json::from_value(serde_json::json!({"lang": "fr", "b": 2})).unwrap(),
            ),
            (None, in_vars.clone()),
            (Some("the whole document".to_string()), in_vars),
        ];
        let c = chunks();
        for (input, vars) in rows {
            let row: Row = serde_json::from_value(serde_json::json!({
                "id": "r", "file": "d.jsonl", "line": 1, "input": input, "vars": vars, "expected": null
            }))
            .unwrap();
            for context in [0, 100] {
                let mut before = crate::eval::row_vars(&prompt, &set, &row);
                before.insert(name.clone(), Value::String(input_of(&c, 1, context)));
                let now = chunk_vars(&prompt, &set, &row, &c, 1, context);
                assert_eq!(
                    now.iter().collect::<Vec<_>>(),
                    before.iter().collect::<Vec<_>>()
                );
            }
        }
    }

    #[test]
    fn a_chunk_is_sent_alone_or_after_the_marked_end_of_the_one_before() {
        let c = chunks();
        assert_eq!(c.len(), 2);
        assert_eq!(input_of(&c, 1, 0), "Babbage built engines.");
        assert_eq!(input_of(&c, 0, 100), "Ada wrote notes.");
        assert_eq!(
            input_of(&c, 1, 6),
            "[Previous text]: ...notes.\n\nBabbage built engines."
        );
        let (tail, at) = context_of(&c, 1, 6).unwrap();
        assert_eq!(tail, "notes.");
        assert_eq!(at, Some(Anchor::whole(10, 16)));
        // More context than the chunk before has: all of it.
        assert_eq!(context_of(&c, 1, 1000).unwrap().0, "Ada wrote notes.");
        // A token window that opened inside a character: its U+FFFD are not the document's, and
        // the context's place counts from its first whole character.
        let split = |text: &str, anchor| Chunk {
            index: 1,
            text: text.to_string(),
            start: None,
            end: None,
            anchor,
        };
        let anchor = |byte, start| Anchor {
            byte,
            start,
            end: 43,
        };
        let c = [
            split("\u{fffd}\u{fffd}東京と", Some(anchor(6, 40))),
            split("x", None),
        ];
        assert_eq!(context_of(&c, 1, 2).unwrap(), ("京と", Some(anchor(0, 41))));
        assert_eq!(
            context_of(&c, 1, 4).unwrap(),
            ("\u{fffd}東京と", Some(anchor(3, 40)))
        );
    }

    #[test]
    fn settings_are_checked_and_sorted() {
        let c = Chunking {
            chunker: Chunker::Recursive,
            sizes: vec![4000, 1000, 1000],
            overlap: 50,
            passes: 1,
            context_chars: vec![],
        }
        .checked()
        .unwrap();
        assert_eq!(c.sizes, [1000, 4000]);
        assert_eq!(c.context_chars, [0]);
        assert_eq!(c.cells_per_document(&[4, 1]), 5);
        let bad = Chunking {
            sizes: vec![40],
            overlap: 50,
            ..c.clone()
        };
        assert!(bad.checked().unwrap_err().message.contains("smaller than"));
        let passes = Chunking { passes: 0, ..c };
        assert!(passes.checked().unwrap_err().message.contains("--passes 0"));
    }
}
