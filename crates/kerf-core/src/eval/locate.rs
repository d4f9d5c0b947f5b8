//! Where an extracted record sits in its document: the byte span of the words that ground each
//! of its identity fields, for the window's review of a cell (the document with each record's
//! place highlighted). The same words grounding compares ([`super::Grounding`]): each word of
//! the document normalised on its own, so a match maps back to the original text.

use std::ops::Range;
use std::sync::OnceLock;

use rustc_hash::FxHashMap;
use serde_json::Value;

use super::distance::{runs_within, similarity_from};
use super::matching::Matcher;
use super::normalize::{
    Compacted, as_grounded, compact, compact_spans, is_separator, joins_previous, normalize,
    spaced, stands_alone,
};

/// A word of the document: its normalised text and its bytes in the original.
struct Word<'a> {
    text: std::borrow::Cow<'a, str>,
    span: Range<usize>,
}

/// The document's words, as grounding reads them, with where each is in `input`.
pub struct Words<'a> {
    words: Vec<Word<'a>>,
    /// The words joined as similarity reads a run of them ([`compact`]), with each word's span
    /// there in characters: made at the first lookup that needs a fuzzy place.
    joined: OnceLock<Compacted>,
    /// Each word's places, by its text: made at the first lookup.
    index: OnceLock<FxHashMap<String, Vec<usize>>>,
    normalize: bool,
    fuzzy: f64,
}

impl<'a> Words<'a> {
    pub fn new(m: &Matcher, input: &'a str) -> Words<'a> {
        let mut words = Vec::new();
        let mut start = None;
        let push = |s: usize, e: usize, words: &mut Vec<Word<'a>>| {
            let piece = &input[s..e];
            if m.normalize {
                // A piece can still split in two once normalised (a ligature, a full-width
                // separator, a compatibility character for two ideographs): each part keeps the
                // piece's span.
                for w in spaced(&normalize(piece)).split_whitespace() {
                    words.push(Word {
                        text: w.to_string().into(),
                        span: s..e,
                    });
                }
            } else {
                words.push(Word {
                    text: piece.into(),
                    span: s..e,
                });
            }
        };
        // A character that stands alone is a word of its own, however it is written beside the
        // next, with the marks that join it: open until a character that does not.
        let mut alone: Option<usize> = None;
        for (i, c) in input.char_indices() {
            if let Some(s) = alone {
                if joins_previous(c) {
                    continue;
                }
                push(s, i, &mut words);
                alone = None;
            }
            let split = if m.normalize {
                is_separator(c)
            } else {
                c.is_whitespace()
            };
            if !split && stands_alone(c) {
                if let Some(s) = start.take() {
                    push(s, i, &mut words);
                }
                alone = Some(i);
                continue;
            }
            match (split, start) {
                (true, Some(s)) => {
                    push(s, i, &mut words);
                    start = None;
                }
                (false, None) => start = Some(i),
                _ => {}
            }
        }
        if let Some(s) = alone.or(start) {
            push(s, input.len(), &mut words);
        }
        Words {
            words,
            joined: OnceLock::new(),
            index: OnceLock::new(),
            normalize: m.normalize,
            fuzzy: m.ground_fuzzy,
        }
    }

    /// The bytes of `input` that ground `value`: its words in a row, else the run of words (one
    /// more or one fewer than its own) most like it, reaching the grounding similarity. `None`:
    /// nothing there grounds it.
    pub fn locate(&self, value: &str) -> Option<Range<usize>> {
        self.find(value).map(|(span, _)| span)
    }

    /// `value` as the document's words are held: normalised when the matching normalises.
    fn as_read(&self, value: &str) -> String {
        as_grounded(value, self.normalize)
    }

    /// The places `v` (already [`as_read`](Self::as_read)) is written as its words in a row, in
    /// order, found as they are asked for: from the places of its first word (an index made at
    /// the first lookup), so a book's thousands of records are not each a pass over it.
    fn written<'s>(&'s self, v: &'s str) -> impl Iterator<Item = Range<usize>> + 's {
        let wanted: Vec<&str> = v.split_whitespace().collect();
        let k = wanted.len();
        let firsts: &[usize] = match wanted.first() {
            Some(first) => self
                .index
                .get_or_init(|| {
                    let mut index: FxHashMap<String, Vec<usize>> = FxHashMap::default();
                    for (i, w) in self.words.iter().enumerate() {
                        index.entry(w.text.to_string()).or_default().push(i);
                    }
                    index
                })
                .get(*first)
                .map_or(&[], Vec::as_slice),
            None => &[],
        };
        firsts
            .iter()
            .copied()
            .filter(move |&i| {
                i + k <= self.words.len()
                    && self.words[i..i + k]
                        .iter()
                        .zip(&wanted)
                        .all(|(w, x)| w.text == *x)
            })
            .map(move |i| self.words[i].span.start..self.words[i + k - 1].span.end)
    }

    /// Every place `value` is written, as its words in a row, in order (none found fuzzily).
    pub fn find_all(&self, value: &str) -> Vec<Range<usize>> {
        self.written(&self.as_read(value)).collect()
    }

    /// [`Words::find`] for the `n`-th (0-based) mention of `value` in a reply: its `n`-th place
    /// as written when it is written that often (a record extracted twice from one text is
    /// two of its mentions, in order), else its first place.
    pub fn find_nth(&self, value: &str, n: usize) -> Option<(Range<usize>, bool)> {
        if n > 0
            && let Some(span) = self.written(&self.as_read(value)).nth(n)
        {
            return Some((span, true));
        }
        self.find(value)
    }

    /// The words as held (normalised) and their bytes in the document, for the tests' oracle.
    #[cfg(test)]
    pub(crate) fn held(&self) -> Vec<(&str, Range<usize>)> {
        self.words
            .iter()
            .map(|w| (&*w.text, w.span.clone()))
            .collect()
    }

    /// [`Words::locate`], saying whether the words were found as written (`true`) or only as
    /// the run most like them (`false`: a fuzzy place).
    pub fn find(&self, value: &str) -> Option<(Range<usize>, bool)> {
        let v = self.as_read(value);
        let k = v.split_whitespace().count();
        if k == 0 || self.words.is_empty() {
            return None;
        }
        let span = |i: usize, n: usize| self.words[i].span.start..self.words[i + n - 1].span.end;
        if let Some(at) = self.written(&v).next() {
            return Some((at, true));
        }
        // The run most like it, by similarity, then fewest words, then first; the same runs
        // grounding compares, found by the same search, so a record grounded is placed.
        let (joined, at) = self
            .joined
            .get_or_init(|| compact_spans(self.words.iter().map(|w| &*w.text)));
        let pattern: Vec<char> = compact(v.split_whitespace()).chars().collect();
        let mut best: Option<(f64, usize, usize)> = None;
        let lengths = k.saturating_sub(1).max(1)..=k + 1;
        runs_within(joined, at, &pattern, lengths, self.fuzzy, |i, n, d| {
            let len = at[i + n - 1].1 - at[i].0;
            let s = similarity_from(d, len.max(pattern.len()));
            if best.is_none_or(|(b, bn, bi)| s > b || (s == b && (n, i) < (bn, bi))) {
                best = Some((s, n, i));
            }
            true
        });
        best.map(|(_, n, i)| (span(i, n), false))
    }
}

/// One identity field of a record and where it is grounded in the document (`None`: nowhere).
#[derive(Debug, Clone, PartialEq)]
pub struct FieldPlace {
    pub field: String,
    pub span: Option<Range<usize>>,
    /// Found as written, not only as the words most like it.
    pub exact: bool,
}

/// Where each of `object`'s grounding fields (its type's `ground` fields: its identity, unless
/// the prompt's `match` says otherwise) sits in the document `words` were read from. A field
/// that is not a string has no place; a record is grounded when every field has one (what
/// [`super::Grounding::ungrounded`] decides, here with the place).
pub fn places(m: &Matcher, words: &Words<'_>, object: &Value) -> Vec<FieldPlace> {
    let rule = m.rule(m.type_of(object));
    m.ground_of(rule, object)
        .into_iter()
        .filter_map(|f| {
            let value = object.get(&f)?.as_str()?;
            let found = words.find(value);
            Some(FieldPlace {
                exact: found.as_ref().is_some_and(|(_, exact)| *exact),
                span: found.map(|(span, _)| span),
                field: f,
            })
        })
        .collect()
}

/// Where `object` stands in the document `words` were read from, as one span over its
/// grounding fields' places: where they are written closest together (a relation whose subject
/// is named on the first page and again beside its object on the ninth stands on the ninth),
/// else — some field not written as it is — over each field's [`places`]. `None`: some field
/// has no place, or the record has no field to place.
pub fn record_span(m: &Matcher, words: &Words<'_>, object: &Value) -> Option<Range<usize>> {
    let rule = m.rule(m.type_of(object));
    let values: Vec<&str> = m
        .ground_of(rule, object)
        .into_iter()
        .filter_map(|f| object.get(&f)?.as_str())
        .collect();
    if values.is_empty() {
        return None;
    }
    let all: Vec<Vec<Range<usize>>> = values.iter().map(|v| words.find_all(v)).collect();
    if all.iter().any(Vec::is_empty) {
        let mut span: Option<Range<usize>> = None;
        for f in places(m, words, object) {
            let s = f.span?;
            span = Some(match span {
                None => s,
                Some(a) => a.start.min(s.start)..a.end.max(s.end),
            });
        }
        return span;
    }
    // The smallest window holding a place of every field: the places of all fields in order of
    // their start, swept with a window that keeps one of each.
    let mut marks: Vec<(usize, Range<usize>)> = all
        .into_iter()
        .enumerate()
        .flat_map(|(f, places)| places.into_iter().map(move |p| (f, p)))
        .collect();
    marks.sort_by_key(|(_, p)| (p.start, p.end));
    let fields = values.len();
    let mut count = vec![0usize; fields];
    let mut held = 0;
    let mut best: Option<Range<usize>> = None;
    let mut from = 0;
    // The window's marks by decreasing end (a phrase may end after a later one): its front is
    // the window's end, kept as the window moves, so a field written thousands of times costs
    // a pass, not a pass per place.
    let mut ends: std::collections::VecDeque<usize> = std::collections::VecDeque::new();
    for to in 0..marks.len() {
        let f = marks[to].0;
        count[f] += 1;
        if count[f] == 1 {
            held += 1;
        }
        while ends
            .back()
            .is_some_and(|&i| marks[i].1.end <= marks[to].1.end)
        {
            ends.pop_back();
        }
        ends.push_back(to);
        while held == fields {
            while ends.front().is_some_and(|&i| i < from) {
                ends.pop_front();
            }
            let end = ends.front().map_or(marks[to].1.end, |&i| marks[i].1.end);
            let window = marks[from].1.start..end;
            if best.as_ref().is_none_or(|b| window.len() < b.len()) {
                best = Some(window);
            }
            let g = marks[from].0;
            count[g] -= 1;
            if count[g] == 0 {
                held -= 1;
            }
            from += 1;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::eval::MatchSpec;

    #[test]
    fn a_record_stands_where_its_fields_are_written_closest_together() {
        let m = Matcher::new(
            &serde_json::from_value(serde_json::json!({"keys": {"*": ["subject", "object"]}}))
                .unwrap(),
            None,
        );
        let doc =
            "Ada wrote notes. Many pages follow here. Babbage built engines; Ada met Babbage.";
        let words = Words::new(&m, doc);
        let r = serde_json::json!({"subject": "Ada", "object": "Babbage"});
        let span = record_span(&m, &words, &r).unwrap();
        assert_eq!(
            &doc[span], "Ada met Babbage",
            "the closest pair, not the first of each"
        );
        // A field written nowhere as it is: over each field's first place (fuzzy included).
        let r = serde_json::json!({"subject": "Ada", "object": "Babage"});
        let span = record_span(&m, &words, &r).unwrap();
        assert_eq!(span.start, 0);
        // Nothing to place.
        assert_eq!(
            record_span(&m, &words, &serde_json::json!({"value": 3})),
            None
        );
        assert_eq!(words.find_all("Ada").len(), 2);
        assert!(words.find_all("Lovelace").is_empty());
        // A field written thousands of times beside one written once: one pass (this would
        // take minutes with the window's end found afresh at every place).
        let long = format!("{} Lovelace met Babbage.", "Babbage spoke. ".repeat(20_000));
        let words = Words::new(&m, &long);
        let r = serde_json::json!({"subject": "Lovelace", "object": "Babbage"});
        let span = record_span(&m, &words, &r).unwrap();
        assert_eq!(&long[span], "Lovelace met Babbage");
    }

    fn matcher() -> Matcher {
        Matcher::new(&MatchSpec::default(), None)
    }

    #[test]
    fn a_name_is_found_where_it_is_written_whatever_its_case_and_punctuation() {
        let doc = "Photosynthesis happens in the Chloroplast. The  CELL-WALL holds it.";
        let m = matcher();
        let w = Words::new(&m, doc);
        let at = w.locate("chloroplast").unwrap();
        assert_eq!(&doc[at], "Chloroplast");
        let at = w.locate("cell wall").unwrap();
        assert_eq!(&doc[at], "CELL-WALL");
        assert_eq!(w.locate("mitochondrion"), None);
    }

    #[test]
    fn a_near_spelling_is_placed_on_the_words_most_like_it() {
        let doc = "The enzyme rubisco fixes carbon dioxide in plants.";
        let m = matcher();
        let w = Words::new(&m, doc);
        let at = w.locate("carbon dioxid").unwrap();
        assert_eq!(&doc[at], "carbon dioxide");
    }

    /// A long document (a book's worth of words) still gets fuzzy places, wherever they are,
    /// as grounding finds them.
    #[test]
    fn a_near_spelling_is_placed_deep_in_a_long_document() {
        let m = matcher();
        let filler = "The committee reviewed the quarterly figures again. ".repeat(12_000);
        let doc = format!("{filler}Later the Rubisco Activase enzyme was named. {filler}");
        let w = Words::new(&m, &doc);
        assert!(w.words.len() > 100_000);
        let (at, exact) = w.find("rubisco activaze").unwrap();
        assert!(!exact);
        assert_eq!(&doc[at], "Rubisco Activase");
        assert!(crate::eval::Grounding::new(&m, &doc).contains("rubisco activaze"));
        // Nothing like it anywhere: no place, and not grounded.
        assert_eq!(w.find("photosystem"), None);
    }

    /// A text opening on an article keeps it as a word: a chunk from the middle of a document
    /// can open on a grade, and Japanese writes "Company A" as A社.
    #[test]
    fn a_text_opening_on_an_article_keeps_it() {
        let m = matcher();
        for (text, value, there) in [
            ("A is the top grade.", "A", "A"),
            ("A社の売上は増えた。", "A社", "A社"),
            ("The東京タワー is tall", "the東京", "The東京"),
        ] {
            let at = Words::new(&m, text).locate(value);
            assert_eq!(at.map(|r| &text[r]), Some(there), "{value} in {text}");
        }
    }

    #[test]
    fn places_agree_with_grounding() {
        let doc = "Ada Lovelace wrote the first program for the Analytical Engine.";
        let m = matcher();
        let w = Words::new(&m, doc);
        let g = crate::eval::Grounding::new(&m, doc);
        let objects = [
            serde_json::json!({"type": "entity", "name": "Ada Lovelace"}),
            serde_json::json!({"type": "entity", "name": "Charles Babbage"}),
        ];
        let ungrounded = g.ungrounded(&m, &objects);
        for (i, o) in objects.iter().enumerate() {
            let p = places(&m, &w, o);
            let placed = p.iter().all(|f| f.span.is_some());
            assert_eq!(placed, !ungrounded.contains(&i), "{o}");
        }
        let p = places(&m, &w, &objects[0]);
        assert_eq!(&doc[p[0].span.clone().unwrap()], "Ada Lovelace");
    }

    #[test]
    fn a_name_in_text_written_without_spaces_is_found_and_grounded() {
        // Japanese, Chinese and Thai put no spaces between words; Korean joins its particles.
        let cases = [
            ("東京と大阪と京都を訪れた。", "大阪", "大阪"),
            ("光合成は葉緑体で行われる。", "葉緑体", "葉緑体"),
            ("我们在北京大学学习。", "北京大学", "北京大学"),
            ("서울에서 회의가 열렸다.", "서울", "서울"),
            ("ผมไปกรุงเทพเมื่อวาน", "กรุงเทพ", "กรุงเทพ"),
            ("ｶﾀｶﾅの名前", "カタカナ", "ｶﾀｶﾅ"),
            // Marks that NFKC folds into the kana before them stay with it.
            ("東京ｶﾞｽの本社", "東京ｶﾞｽ", "東京ｶﾞｽ"),
            ("東京ｶﾞｽの本社", "東京ガス", "東京ｶﾞｽ"),
            // A near spelling: one ideograph off in nine.
            (
                "東京都庁第一本庁舎は新宿にある。",
                "東京都庁第二本庁舎",
                "東京都庁第一本庁舎",
            ),
        ];
        for normalise in [true, false] {
            let spec = MatchSpec {
                normalize: Some(normalise),
                ..MatchSpec::default()
            };
            let m = Matcher::new(&spec, None);
            for (doc, name, there) in cases {
                if !normalise && there.contains('ｶ') && name != there {
                    continue; // Without NFKC, half-width kana are not the full-width ones.
                }
                let w = Words::new(&m, doc);
                let at = w.locate(name).unwrap_or_else(|| panic!("{name} in {doc}"));
                assert_eq!(&doc[at], there, "{name} in {doc}");
                let g = crate::eval::Grounding::new(&m, doc);
                assert!(g.contains(name), "{name} grounded in {doc}");
            }
            // Not there at all: neither placed nor grounded; nor is another university one
            // ideograph away (a character is a word, but similarity reads the name whole).
            for (doc, name) in [(cases[0].0, "名古屋"), ("我们在南京大学学习。", "北京大学")]
            {
                assert_eq!(Words::new(&m, doc).locate(name), None, "{name} in {doc}");
                assert!(
                    !crate::eval::Grounding::new(&m, doc).contains(name),
                    "{name} in {doc}"
                );
            }
        }
    }
}
