//! A cut document's replies made one: each chunk's records placed in the whole document (a
//! character span through the chunk's own place in it, with how it was found), then merged
//! across the chunks' overlaps and across passes.
//!
//! The merge keeps one mention per record *and place*: a record with the same identity (as the
//! prompt's matching compares records) whose span overlaps a kept one's is the same mention,
//! seen again by an overlapping chunk or another pass, and is folded into it; the same record at
//! a place that does not overlap is another mention and is kept (scoring then treats it by the
//! prompt's match rule, as any repeated record). A record that cannot be placed is folded only
//! into an unplaced one with the same identity from the same chunk (another pass over the same
//! text): unplaced records of different chunks cannot be told apart, so none is dropped.
//! LangExtract's merge instead keeps the first record at any span whatever its class and never
//! merges an ungrounded one, so ungrounded records multiply with its passes.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::locate::Words;
use super::matching::Matcher;
use super::score::identity;
use crate::chunk::Anchor;

/// How an extracted record was found in the text it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum SpanStatus {
    /// Every grounding field found as written in its chunk.
    Exact,
    /// Found, some field only as the words most like it (the matching's grounding similarity).
    Fuzzy,
    /// Found only with the context given before its chunk (the end of the chunk before): some
    /// field is quoted from the context, not from the text it was asked about.
    Context,
    /// Not found: a grounding field's text is nowhere in the chunk or its context.
    NotFound,
    /// Nothing to look for: no grounding field holds text (`{"type": "year", "value": 1843}`).
    /// Not placed, and not ungrounded either, as a whole document's grounding judges it.
    NoText,
}

impl SpanStatus {
    pub const ALL: [SpanStatus; 5] = [
        SpanStatus::Exact,
        SpanStatus::Fuzzy,
        SpanStatus::Context,
        SpanStatus::NotFound,
        SpanStatus::NoText,
    ];
}

/// One chunk of a document as a cell read it.
#[derive(Debug, Clone, Copy)]
pub struct ChunkText<'a> {
    /// From 1, as the chunker numbers them.
    pub index: u32,
    pub text: &'a str,
    /// Where the document's own characters begin in `text`, as [`crate::chunk::Chunk::anchor`]
    /// (`None`: not known).
    pub anchor: Option<Anchor>,
    /// The context given before it, and where the document's characters begin in it.
    pub context: Option<(&'a str, Option<Anchor>)>,
}

/// One kept mention of a merged record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Mention {
    /// The chunk (from 1) and pass (from 0) it was first found in.
    pub chunk: u32,
    pub pass: u32,
    /// Its span in the whole document, in characters, end exclusive (absent: not placed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub start: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub end: Option<usize>,
    pub status: SpanStatus,
    /// Other mentions folded into this one (the same record at an overlapping place, from an
    /// overlapping chunk or another pass).
    #[serde(default, skip_serializing_if = "is_zero")]
    #[cfg_attr(feature = "ts", ts(as = "Option<u32>", optional))]
    pub merged: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A document's records after the merge: each kept record with its mention, in the order they
/// were first found (chunk by chunk, pass by pass).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Merged {
    pub objects: Vec<Value>,
    pub mentions: Vec<Mention>,
    /// Records folded into a kept one.
    pub folded: usize,
}

/// Merges a document's chunk replies, one reply at a time ([`Merger::add`]).
pub struct Merger<'m> {
    m: &'m Matcher,
    merged: Merged,
    /// Kept mentions by identity.
    by_identity: HashMap<String, Kept>,
}

/// One identity's kept mentions (indexes into `merged`), found by where they are: a name a
/// book mentions thousands of times is compared with the few kept near each new mention, not
/// with every one.
#[derive(Default)]
struct Kept {
    /// Placed ones by their start.
    by_start: BTreeMap<usize, Vec<usize>>,
    /// The longest placed span: a kept span overlapping `b` starts after `b.start − longest`.
    longest: usize,
    /// The first unplaced one of each chunk.
    unplaced: HashMap<u32, usize>,
}

impl Kept {
    /// The first kept mention (in the order kept) that `mention` repeats: one whose span
    /// overlaps its span, or, unplaced as it is, the first unplaced one of its chunk.
    fn repeated(&self, mentions: &[Mention], mention: &Mention) -> Option<usize> {
        let Some(b) = span_of(mention) else {
            return self.unplaced.get(&mention.chunk).copied();
        };
        self.by_start
            .range(b.start.saturating_sub(self.longest)..b.end)
            .flat_map(|(_, kept)| kept.iter().copied())
            .filter(|&k| span_of(&mentions[k]).is_some_and(|a| a.start < b.end && b.start < a.end))
            .min()
    }

    fn keep(&mut self, k: usize, mention: &Mention) {
        match span_of(mention) {
            Some(a) => {
                self.longest = self.longest.max(a.end - a.start);
                self.by_start.entry(a.start).or_default().push(k);
            }
            None => {
                self.unplaced.entry(mention.chunk).or_insert(k);
            }
        }
    }
}

impl<'m> Merger<'m> {
    pub fn new(m: &'m Matcher) -> Merger<'m> {
        Merger {
            m,
            merged: Merged::default(),
            by_identity: HashMap::new(),
        }
    }

    /// Place each of `objects` (one reply: chunk `chunk`, pass `pass`) in the document and keep
    /// it, or fold it into the kept mention it repeats. Returns each object's own mention (before
    /// folding), in order.
    pub fn add(&mut self, chunk: &ChunkText<'_>, pass: u32, objects: &[Value]) -> Vec<Mention> {
        let words = Words::new(self.m, chunk.text);
        let context = chunk
            .context
            .map(|(text, start)| (Words::new(self.m, text), text, start));
        // How often each identity came before in this reply: its n-th mention is placed at its
        // n-th place where it is written that often.
        let mut seen: HashMap<String, usize> = HashMap::new();
        let mut own = Vec::with_capacity(objects.len());
        for o in objects {
            let id = identity(self.m, o);
            let nth = seen.entry(id.clone()).or_insert(0);
            let mention = self.place(chunk, &words, context.as_ref(), o, *nth, pass);
            *nth += 1;
            own.push(mention.clone());
            let same = self
                .by_identity
                .get(&id)
                .and_then(|kept| kept.repeated(&self.merged.mentions, &mention));
            match same {
                Some(k) => {
                    self.merged.mentions[k].merged += 1;
                    self.merged.folded += 1;
                }
                None => {
                    self.by_identity
                        .entry(id)
                        .or_default()
                        .keep(self.merged.objects.len(), &mention);
                    self.merged.objects.push(o.clone());
                    self.merged.mentions.push(mention);
                }
            }
        }
        own
    }

    /// The records kept so far.
    pub fn objects(&self) -> &[Value] {
        &self.merged.objects
    }

    pub fn finish(self) -> Merged {
        self.merged
    }

    /// Where `object` (the `nth` of its identity in its reply) stands in the document.
    fn place(
        &self,
        chunk: &ChunkText<'_>,
        words: &Words<'_>,
        context: Option<&(Words<'_>, &str, Option<Anchor>)>,
        object: &Value,
        nth: usize,
        pass: u32,
    ) -> Mention {
        let mut mention = Mention {
            chunk: chunk.index,
            pass,
            start: None,
            end: None,
            status: SpanStatus::NotFound,
            merged: 0,
        };
        let fields = self.fields(object);
        if fields.is_empty() {
            mention.status = SpanStatus::NoText;
            return mention;
        }
        // Each field where the chunk has it, else where its context has it (in document
        // characters); a field found in neither leaves the record unplaced.
        let mut span: Option<(Option<usize>, Option<usize>)> = None;
        let (mut exact, mut from_context) = (true, false);
        for f in &fields {
            let found = match words.find_nth(f, nth) {
                Some((at, e)) => {
                    exact &= e;
                    in_document(chunk.text, chunk.anchor, at)
                }
                None => {
                    let Some((at, text, anchor)) = context.and_then(|(cw, text, anchor)| {
                        Some((cw.find_nth(f, nth)?, *text, *anchor))
                    }) else {
                        return mention;
                    };
                    from_context = true;
                    in_document(text, anchor, at.0)
                }
            };
            span = Some(match (span, found) {
                (None, f) => f,
                (Some((Some(s), Some(e))), (Some(fs), Some(fe))) => {
                    (Some(s.min(fs)), Some(e.max(fe)))
                }
                _ => (None, None),
            });
        }
        mention.status = match (from_context, exact) {
            (true, _) => SpanStatus::Context,
            (false, true) => SpanStatus::Exact,
            (false, false) => SpanStatus::Fuzzy,
        };
        if let Some((start, end)) = span {
            (mention.start, mention.end) = (start, end);
        }
        mention
    }

    /// The texts `object` is grounded by: its type's grounding fields that hold a word (an
    /// empty field, or one of punctuation alone, has nothing to look for, as grounding against
    /// a whole document judges it).
    fn fields(&self, object: &Value) -> Vec<String> {
        let rule = self.m.rule(self.m.type_of(object));
        let has_words = |v: &str| {
            super::normalize::as_grounded(v, self.m.normalize)
                .split_whitespace()
                .next()
                .is_some()
        };
        self.m
            .ground_of(rule, object)
            .into_iter()
            .filter_map(|f| object.get(&f)?.as_str().map(str::to_string))
            .filter(|v| has_words(v))
            .collect()
    }
}

/// Bytes `span` of `text`, whose byte `anchor.byte` is character `anchor.start` of the
/// document, as the document's characters (`None`: the text's place is not known, or the span
/// begins before the document's characters do).
fn in_document(
    text: &str,
    anchor: Option<Anchor>,
    span: Range<usize>,
) -> (Option<usize>, Option<usize>) {
    let Some(Anchor {
        byte: from,
        start: at,
        ..
    }) = anchor.filter(|a| a.byte <= span.start)
    else {
        return (None, None);
    };
    let s = at + text[from..span.start].chars().count();
    let e = s + text[span.start..span.end].chars().count();
    (Some(s), Some(e))
}

fn span_of(m: &Mention) -> Option<Range<usize>> {
    Some(m.start?..m.end?)
}

/// Counts of mentions by how they were found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct SpanCounts {
    pub exact: usize,
    pub fuzzy: usize,
    pub context: usize,
    pub not_found: usize,
    /// Records with no text to ground (absent from reports written before it was counted).
    #[serde(default)]
    pub no_text: usize,
}

impl SpanCounts {
    pub fn of<'a>(mentions: impl IntoIterator<Item = &'a Mention>) -> SpanCounts {
        let mut c = SpanCounts::default();
        for m in mentions {
            c.add(m.status);
        }
        c
    }

    pub fn add(&mut self, status: SpanStatus) {
        match status {
            SpanStatus::Exact => self.exact += 1,
            SpanStatus::Fuzzy => self.fuzzy += 1,
            SpanStatus::Context => self.context += 1,
            SpanStatus::NotFound => self.not_found += 1,
            SpanStatus::NoText => self.no_text += 1,
        }
    }

    pub fn plus(self, o: SpanCounts) -> SpanCounts {
        SpanCounts {
            exact: self.exact + o.exact,
            fuzzy: self.fuzzy + o.fuzzy,
            context: self.context + o.context,
            not_found: self.not_found + o.not_found,
            no_text: self.no_text + o.no_text,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::chunk::{ChunkSettings, Chunker, chunk};
    use crate::eval::MatchSpec;
    use serde_json::json;

    fn matcher() -> Matcher {
        Matcher::new(&MatchSpec::default(), None)
    }

    fn entity(name: &str) -> Value {
        json!({"type": "entity", "name": name})
    }

    fn text<'a>(c: &'a crate::chunk::Chunk) -> ChunkText<'a> {
        ChunkText {
            index: c.index as u32,
            text: &c.text,
            anchor: c.anchor,
            context: None,
        }
    }

    /// The document's characters between a mention's start and end.
    fn at(doc: &str, m: &Mention) -> String {
        doc.chars()
            .skip(m.start.unwrap())
            .take(m.end.unwrap() - m.start.unwrap())
            .collect()
    }

    /// The kept mention a new one repeats, found by place, is the one a look at every kept
    /// mention of its identity in turn finds: the first kept whose span overlaps, or for an
    /// unplaced one the first unplaced of its chunk (seeded drawn mentions, empty and long
    /// spans among them).
    #[test]
    fn the_mention_repeated_is_the_first_kept_one_it_overlaps() {
        let mut g = crate::eval::reference::Seeded::new(
            "the_mention_repeated_is_the_first_kept_one_it_overlaps",
        );
        for round in 0..300 {
            let (mut kept, mut all) = (Kept::default(), Vec::<usize>::new());
            let mut mentions: Vec<Mention> = Vec::new();
            for _ in 0..g.below(40) {
                let placed = g.below(5) > 0;
                let start = g.below(200);
                let len = if g.below(10) == 0 {
                    g.below(80)
                } else {
                    g.below(8)
                };
                let mention = Mention {
                    chunk: g.below(4) as u32,
                    pass: 0,
                    start: placed.then_some(start),
                    end: placed.then_some(start + len),
                    status: SpanStatus::Exact,
                    merged: 0,
                };
                let oracle = all.iter().copied().find(|&k| {
                    let had = &mentions[k];
                    match (span_of(had), span_of(&mention)) {
                        (Some(a), Some(b)) => a.start < b.end && b.start < a.end,
                        (None, None) => had.chunk == mention.chunk,
                        _ => false,
                    }
                });
                assert_eq!(
                    kept.repeated(&mentions, &mention),
                    oracle,
                    "KERF_TEST_SEED={}, round {round}: {mention:?}",
                    g.seed
                );
                if oracle.is_none() {
                    kept.keep(mentions.len(), &mention);
                    all.push(mentions.len());
                    mentions.push(mention);
                }
            }
        }
    }

    #[test]
    fn a_record_in_an_overlap_is_counted_once_and_a_genuine_repeat_is_kept() {
        // "Ada Lovelace" sits in both chunks' overlap; "Babbage" is written twice, far apart.
        let doc = "Babbage built engines. Ada Lovelace wrote notes. Later Babbage sold nothing.";
        let settings = ChunkSettings {
            chunker: Chunker::Recursive,
            size: 50,
            overlap: 30,
        };
        let chunks = chunk(doc, &settings).unwrap();
        assert!(chunks.len() >= 2, "{chunks:?}");
        let m = matcher();
        let mut merger = Merger::new(&m);
        for c in &chunks {
            // Every chunk's reply names what it holds.
            let objects: Vec<Value> = ["Ada Lovelace", "Babbage"]
                .iter()
                .filter(|n| c.text.contains(*n))
                .flat_map(|n| std::iter::repeat_n(entity(n), c.text.matches(*n).count()))
                .collect();
            merger.add(&text(c), 0, &objects);
        }
        let merged = merger.finish();
        let names: Vec<(&str, String)> = merged
            .objects
            .iter()
            .zip(&merged.mentions)
            .map(|(o, mn)| (o["name"].as_str().unwrap(), at(doc, mn)))
            .collect();
        assert_eq!(
            names.iter().filter(|(n, _)| *n == "Ada Lovelace").count(),
            1,
            "{names:?}"
        );
        assert_eq!(
            names.iter().filter(|(n, _)| *n == "Babbage").count(),
            2,
            "{names:?}"
        );
        for (n, placed) in &names {
            assert_eq!(n, placed);
        }
        // The two Babbages are at their own places.
        let starts: Vec<usize> = merged
            .objects
            .iter()
            .zip(&merged.mentions)
            .filter(|(o, _)| o["name"] == "Babbage")
            .map(|(_, mn)| mn.start.unwrap())
            .collect();
        assert_eq!(starts, vec![0, doc.find("Later Babbage").unwrap() + 6]);
        assert!(merged.folded >= 1);
        assert!(
            merged
                .mentions
                .iter()
                .all(|m| m.status == SpanStatus::Exact)
        );
    }

    #[test]
    fn passes_fold_into_one_mention_and_unplaced_records_fold_only_within_their_chunk() {
        let doc = "Rubisco fixes carbon.\n\nChlorophyll absorbs light.";
        let chunks = chunk(
            doc,
            &ChunkSettings {
                chunker: Chunker::Recursive,
                size: 30,
                overlap: 0,
            },
        )
        .unwrap();
        assert_eq!(chunks.len(), 2);
        let m = matcher();
        let mut merger = Merger::new(&m);
        for pass in 0..3 {
            merger.add(
                &text(&chunks[0]),
                pass,
                &[entity("Rubisco"), entity("Unicorn")],
            );
            merger.add(
                &text(&chunks[1]),
                pass,
                &[entity("Chlorophyll"), entity("Unicorn")],
            );
        }
        let merged = merger.finish();
        let names: Vec<&str> = merged
            .objects
            .iter()
            .map(|o| o["name"].as_str().unwrap())
            .collect();
        // Each placed record once; the invented one once per chunk (two chunks cannot be told
        // apart), never once per pass.
        assert_eq!(names, ["Rubisco", "Unicorn", "Chlorophyll", "Unicorn"]);
        assert_eq!(merged.folded, 8);
        assert_eq!(merged.mentions[0].merged, 2);
        assert_eq!(merged.mentions[1].status, SpanStatus::NotFound);
        assert_eq!(merged.mentions[1].start, None);
        assert_eq!(at(doc, &merged.mentions[2]), "Chlorophyll");
        assert_eq!(merged.mentions[2].chunk, 2);
    }

    #[test]
    fn records_in_token_windows_that_split_characters_are_placed_and_folded_across_overlaps() {
        // Japanese takes several tokens a character: windows of 8 tokens split characters.
        let doc = "東京と大阪と京都と名古屋と札幌と福岡と神戸と横浜。";
        let names = [
            "東京",
            "大阪",
            "京都",
            "名古屋",
            "札幌",
            "福岡",
            "神戸",
            "横浜",
        ];
        let chunks = chunk(
            doc,
            &ChunkSettings {
                chunker: Chunker::Token,
                size: 8,
                overlap: 4,
            },
        )
        .unwrap();
        assert!(chunks.iter().any(|c| c.start.is_none()), "{chunks:?}");
        let m = matcher();
        let mut merger = Merger::new(&m);
        for c in &chunks {
            let found: Vec<Value> = names
                .iter()
                .filter(|n| c.text.contains(*n))
                .map(|n| entity(n))
                .collect();
            merger.add(&text(c), 0, &found);
        }
        let merged = merger.finish();
        let kept: Vec<(&str, String)> = merged
            .objects
            .iter()
            .zip(&merged.mentions)
            .map(|(o, mn)| (o["name"].as_str().unwrap(), at(doc, mn)))
            .collect();
        // Each name once, at its own characters, however many windows held it.
        let want: Vec<(&str, String)> = names.iter().map(|n| (*n, n.to_string())).collect();
        assert_eq!(kept, want);
        assert!(merged.folded > 0);
    }

    #[test]
    fn a_record_with_no_text_to_ground_is_said_to_be_so_not_counted_as_not_found() {
        let doc = "Babbage was born in 1791.";
        let m = matcher();
        let mut merger = Merger::new(&m);
        let chunk = ChunkText {
            index: 1,
            text: doc,
            anchor: Some(Anchor::whole(0, doc.chars().count())),
            context: None,
        };
        let year = json!({"type": "year", "value": 1791});
        let own = merger.add(&chunk, 0, &[entity("Babbage"), year.clone(), year]);
        assert_eq!(own[1].status, SpanStatus::NoText);
        // An empty name, or one of punctuation alone, has nothing to look for either.
        for name in ["", " — "] {
            let own = Merger::new(&m).add(&chunk, 0, &[entity(name)]);
            assert_eq!(own[0].status, SpanStatus::NoText, "{name:?}");
            let g = crate::eval::Grounding::new(&m, doc);
            assert!(g.ungrounded(&m, &[entity(name)]).is_empty(), "{name:?}");
        }
        assert_eq!((own[1].start, own[1].end), (None, None));
        let counts = SpanCounts::of(&merger.finish().mentions);
        // The year twice in one reply cannot be told from once: folded, as unplaced records
        // of one chunk are.
        assert_eq!((counts.exact, counts.not_found, counts.no_text), (1, 0, 1));
        // What a report written before the count was there reads as none.
        let old: SpanCounts =
            serde_json::from_str(r#"{"exact":1,"fuzzy":0,"context":0,"not_found":2}"#).unwrap();
        assert_eq!((old.not_found, old.no_text), (2, 0));
    }

    #[test]
    fn a_record_quoted_only_from_the_context_is_said_to_be_so_and_placed_there() {
        let doc = "Ada Lovelace wrote. Babbage built.";
        let m = matcher();
        let mut merger = Merger::new(&m);
        let chunk2 = ChunkText {
            index: 2,
            text: "Babbage built.",
            anchor: Some(Anchor::whole(20, 34)),
            context: Some(("Lovelace wrote. ", Some(Anchor::whole(4, 20)))),
        };
        let own = merger.add(
            &chunk2,
            0,
            &[entity("Lovelace"), entity("Babbage"), entity("Lovelase")],
        );
        assert_eq!(own[0].status, SpanStatus::Context);
        assert_eq!(at(doc, &own[0]), "Lovelace");
        assert_eq!(own[1].status, SpanStatus::Exact);
        assert_eq!(at(doc, &own[1]), "Babbage");
        assert_eq!(own[2].status, SpanStatus::Context, "fuzzy in the context");
        let counts = SpanCounts::of(&own);
        assert_eq!((counts.exact, counts.context), (1, 2));
        // A relation whose subject is in the context and its object in the chunk: placed
        // across the boundary.
        let rel = json!({"type": "relationship", "subject": "Lovelace", "predicate": "p", "object": "Babbage"});
        let own = merger.add(&chunk2, 1, &[rel]);
        assert_eq!(own[0].status, SpanStatus::Context);
        assert_eq!(at(doc, &own[0]), "Lovelace wrote. Babbage");
    }

    #[test]
    fn a_near_spelling_is_fuzzy_and_placed_in_characters_past_multibyte_text() {
        let doc = "Größe: the enzyme rubisco fixes carbon dioxide.";
        let chunks = chunk(
            doc,
            &ChunkSettings {
                chunker: Chunker::Recursive,
                size: 100,
                overlap: 0,
            },
        )
        .unwrap();
        let m = matcher();
        let mut merger = Merger::new(&m);
        let own = merger.add(&text(&chunks[0]), 0, &[entity("carbon dioxid")]);
        assert_eq!(own[0].status, SpanStatus::Fuzzy);
        assert_eq!(at(doc, &own[0]), "carbon dioxide");
    }
}
