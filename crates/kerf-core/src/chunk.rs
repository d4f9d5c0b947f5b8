//! Chunkers that cut a document exactly as TrustGraph's do (trustgraph-flow 2.11.1:
//! `trustgraph/chunking/recursive/chunker.py` and `trustgraph/chunking/token/chunker.py`), so a
//! chunk size measured here is the one deployed there.
//!
//! - **Recursive**: TrustGraph's own recursive splitter (not langchain's, which it once used):
//!   split on the first of `\n\n`, `\n`, a space that occurs in the text (else into characters),
//!   dropping the separator; pieces shorter than the size are merged, joined by that separator,
//!   into chunks of at most the size, the next chunk starting with the last pieces of this one
//!   while they fit in the overlap; a piece not shorter than the size is split again with the
//!   next separators (or, with none left, kept whole). Chunks that are only whitespace, as
//!   Python's `str.strip()` judges it, are dropped; nothing else is stripped. Sizes are counted
//!   in characters as Python counts them (code points). Every chunk is a run of the document's
//!   own characters (consecutive pieces joined by the separator that stood between them), so its
//!   place in the document is exact: `start` and `end`, in characters, end exclusive.
//! - **Token**: cl100k_base (the vocabulary compiled into `tiktoken-rs`, laid out as a table at
//!   build time), windows of `size` tokens advancing by `size - overlap`, each decoded as
//!   Python's tiktoken decodes (bytes that are not whole UTF-8 characters become U+FFFD). A
//!   document holding a special token's text (`<|endoftext|>`) is refused, as tiktoken's `encode`
//!   refuses it there. Documents are tokenised by `cl100k` (tiktoken's tokens, several times
//!   faster), a document of two megabytes or more in parts of a megabyte or more, one per core.

use std::borrow::Cow;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

mod cl100k;

/// Which of TrustGraph's chunkers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub enum Chunker {
    /// `trustgraph/chunking/recursive`: sizes in characters.
    Recursive,
    /// `trustgraph/chunking/token`: sizes in cl100k_base tokens.
    Token,
}

impl Chunker {
    pub const ALL: [Chunker; 2] = [Chunker::Recursive, Chunker::Token];

    pub fn as_str(self) -> &'static str {
        match self {
            Chunker::Recursive => "recursive",
            Chunker::Token => "token",
        }
    }

    /// What the size counts.
    pub fn unit(self) -> &'static str {
        match self {
            Chunker::Recursive => "characters",
            Chunker::Token => "tokens",
        }
    }

    /// The processor's own defaults (its `--chunk-size` / `--chunk-overlap`): recursive
    /// 2000/100, token 250/15.
    pub fn processor_defaults(self) -> ChunkSettings {
        let (size, overlap) = match self {
            Chunker::Recursive => (2000, 100),
            Chunker::Token => (250, 15),
        };
        ChunkSettings {
            chunker: self,
            size,
            overlap,
        }
    }

    /// What a deployed TrustGraph flow (2.8 and after) gives this chunker: its flow parameters
    /// `chunk-size` 2000 and `chunk-overlap` 50 override the processor's on every message (so
    /// the token chunker, chosen in such a flow, cuts at 2,000 tokens).
    pub fn flow_defaults(self) -> ChunkSettings {
        ChunkSettings {
            chunker: self,
            size: 2000,
            overlap: 50,
        }
    }
}

impl std::fmt::Display for Chunker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a document is cut: the chunker, its size and its overlap (in its unit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ChunkSettings {
    pub chunker: Chunker,
    pub size: usize,
    pub overlap: usize,
}

impl ChunkSettings {
    /// A size of 0, or an overlap not smaller than the size (TrustGraph's token chunker would
    /// never advance), is refused.
    pub fn check(&self) -> Result<()> {
        if self.size == 0 {
            return Err(Error::Usage("--chunk-size must be at least 1".to_string()));
        }
        if self.overlap >= self.size {
            return Err(Error::Usage(format!(
                "--chunk-overlap {} must be smaller than --chunk-size {} (a chunk would never move past its overlap)",
                self.overlap, self.size
            )));
        }
        Ok(())
    }
}

/// The document's own characters in a chunk's text: from byte `byte` of the text, the
/// document's characters `start..end` (a token window that splits a character holds U+FFFD
/// before and after them, which the document does not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Anchor {
    pub byte: usize,
    pub start: usize,
    pub end: usize,
}

impl Anchor {
    /// A text that is the document's characters `start..end`, all of it.
    pub fn whole(start: usize, end: usize) -> Anchor {
        Anchor {
            byte: 0,
            start,
            end,
        }
    }
}

/// One chunk of a document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Chunk {
    /// From 1, as TrustGraph numbers them.
    pub index: usize,
    pub text: String,
    /// Where it stands in the document, in characters (end exclusive). Every recursive chunk
    /// has one; a token window only when its bytes are whole characters (one that splits a
    /// character decodes to U+FFFD, which the document does not hold).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub start: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub end: Option<usize>,
    /// The document's own characters in `text`: what records found in the chunk are placed
    /// by, and the part of the document it holds whole. `start..end` from its first byte when
    /// it has them; for a token window that splits a character, those between the U+FFFD its
    /// first and last bytes decode to; none when it holds no whole character. Not written out:
    /// `start` and `end` are the chunk's place, exactly.
    #[serde(skip)]
    #[cfg_attr(feature = "ts", ts(skip))]
    pub anchor: Option<Anchor>,
}

/// A [`Chunk`] that borrows its text from the document where it is the document's own (every
/// recursive chunk, every token window of whole characters): what `kerf chunk --json` writes, without copying a 10 MB document's
/// chunks first. Serialised exactly as a `Chunk`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChunkRef<'a> {
    pub index: usize,
    pub text: Cow<'a, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end: Option<usize>,
    /// As [`Chunk::anchor`].
    #[serde(skip)]
    pub anchor: Option<Anchor>,
}

impl ChunkRef<'_> {
    /// As [`Chunk::held`].
    pub fn held(&self) -> Option<std::ops::Range<usize>> {
        self.anchor.map(|a| a.start..a.end)
    }

    pub fn into_owned(self) -> Chunk {
        Chunk {
            index: self.index,
            text: self.text.into_owned(),
            start: self.start,
            end: self.end,
            anchor: self.anchor,
        }
    }
}

impl Chunk {
    /// The document's characters the chunk holds whole (`None`: not known): its place, or for a
    /// token window that splits a character, those between the U+FFFD it opens and ends with.
    pub fn held(&self) -> Option<std::ops::Range<usize>> {
        self.anchor.map(|a| a.start..a.end)
    }
}

/// Cut `text` as `settings` say.
pub fn chunk(text: &str, settings: &ChunkSettings) -> Result<Vec<Chunk>> {
    Ok(chunk_refs(text, settings)?
        .into_iter()
        .map(ChunkRef::into_owned)
        .collect())
}

/// [`chunk`], each chunk borrowing the document's text where it can.
pub fn chunk_refs<'a>(text: &'a str, settings: &ChunkSettings) -> Result<Vec<ChunkRef<'a>>> {
    settings.check()?;
    match settings.chunker {
        Chunker::Recursive => Ok(recursive(text, settings.size, settings.overlap)),
        Chunker::Token => token(text, settings.size, settings.overlap),
    }
}

const SEPARATORS: [&str; 4] = ["\n\n", "\n", " ", ""];

/// Whitespace as Python's `str.isspace()` judges it: Unicode's White_Space, plus the four
/// information separators (U+001C–U+001F), whose bidirectional class is B or S.
fn py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Whether `s.strip()` would leave something.
fn has_content(s: &str) -> bool {
    s.chars().any(|c| !py_space(c))
}

/// The recursive chunker's chunks, with their places in characters.
fn recursive(doc: &str, size: usize, overlap: usize) -> Vec<ChunkRef<'_>> {
    let mut found = Found {
        doc,
        // Room for about as many chunks as the document will have (up to 65,536: a tiny size
        // on a large document grows from there): grown by doubling from nothing, the list took
        // a fresh page of memory at every size on the way.
        chunks: Vec::with_capacity((doc.len() / (size - overlap) + 1).min(1 << 16)),
    };
    split_text(doc, 0..doc.len(), 0, &SEPARATORS, size, overlap, &mut found);
    found
        .chunks
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            let (start, end) = (p.char_start, p.char_start + p.chars);
            ChunkRef {
                index: i + 1,
                text: Cow::Borrowed(&doc[p.bytes]),
                start: Some(start),
                end: Some(end),
                anchor: Some(Anchor::whole(start, end)),
            }
        })
        .collect()
}

/// A piece of the document, or a chunk of joined pieces: its bytes, and its place in
/// characters. Each piece's characters are counted once, as it is split off; a chunk's place
/// follows from its pieces' (a second pass counting up to every chunk's edges was a sixth of a
/// 10 MB document's time).
#[derive(Clone)]
struct Piece {
    bytes: Range<usize>,
    char_start: usize,
    chars: usize,
}

/// The chunks found so far, in the document's order.
struct Found<'d> {
    doc: &'d str,
    chunks: Vec<Piece>,
}

impl Found<'_> {
    /// A chunk, unless it is only whitespace (left out at every level there).
    fn add(&mut self, chunk: Piece) {
        if has_content(&self.doc[chunk.bytes.clone()]) {
            self.chunks.push(chunk);
        }
    }
}

/// `_split_text` over the byte range `piece` of `doc`, whose first character is the document's
/// `char_start`-th: the chunks found added to `out`. The pieces are streamed, not gathered: a
/// 10 MB text without a blank line is a million and more words.
fn split_text(
    doc: &str,
    piece: Range<usize>,
    char_start: usize,
    separators: &[&str],
    size: usize,
    overlap: usize,
    out: &mut Found,
) {
    let text = &doc[piece.clone()];
    let mut separator = separators[separators.len() - 1];
    let mut deeper: &[&str] = &[];
    for (i, sep) in separators.iter().enumerate() {
        if sep.is_empty() {
            separator = sep;
            break;
        }
        if memchr::memmem::find(text.as_bytes(), sep.as_bytes()).is_some() {
            separator = sep;
            deeper = &separators[i + 1..];
            break;
        }
    }
    // The run of pieces shorter than the size being merged (`good_splits` there).
    let sep_chars = separator.chars().count();
    let mut merging = Merge::new(sep_chars, size, overlap);
    let mut each = |p: Piece, out: &mut Found| {
        if p.chars < size {
            merging.push(p, out);
            return;
        }
        merging.finish(out);
        if deeper.is_empty() {
            out.add(p);
        } else {
            split_text(doc, p.bytes, p.char_start, deeper, size, overlap, out);
        }
    };
    if separator.is_empty() {
        for (n, (i, c)) in text.char_indices().enumerate() {
            let at = piece.start + i;
            let one = Piece {
                bytes: at..at + c.len_utf8(),
                char_start: char_start + n,
                chars: 1,
            };
            each(one, out);
        }
    } else {
        // Where the next piece begins, in bytes of `text` and in the document's characters.
        let (mut from, mut at_char) = (0, char_start);
        let piece_at = |from: usize, to: usize, at_char: usize, chars: usize| Piece {
            bytes: piece.start + from..piece.start + to,
            char_start: at_char,
            chars,
        };
        let sep = separator.as_bytes();
        if let [sep] = *sep {
            // One byte (a space, a line feed): the pieces and their characters in one pass over
            // the bytes. Searching for each separator and then counting each piece's characters
            // cost two calls a word, a third of a long line's time.
            let mut chars = 0;
            for (at, &b) in text.as_bytes().iter().enumerate() {
                if b == sep {
                    each(piece_at(from, at, at_char, chars), out);
                    from = at + 1;
                    at_char += chars + 1;
                    chars = 0;
                } else {
                    // A character is counted at its first byte (not a continuation byte).
                    chars += usize::from((b as i8) >= -0x40);
                }
            }
            each(piece_at(from, text.len(), at_char, chars), out);
        } else {
            for at in memchr::memmem::find_iter(text.as_bytes(), sep) {
                // Python's `split` takes non-overlapping separators from the left.
                if at < from {
                    continue;
                }
                let chars = text[from..at].chars().count();
                each(piece_at(from, at, at_char, chars), out);
                from = at + sep.len();
                at_char += chars + sep_chars;
            }
            let chars = text[from..].chars().count();
            each(piece_at(from, text.len(), at_char, chars), out);
        }
    }
    merging.finish(out);
}

/// `_merge_splits`, fed one piece at a time: consecutive pieces (ranges of the document, each
/// with its length in characters) into chunks of at most `size` characters with their
/// separators, each chunk after the first beginning with the last pieces of the one before
/// that fit in `overlap`. A chunk of joined consecutive pieces is the document's range from the
/// first to the last.
struct Merge {
    sep_len: usize,
    size: usize,
    overlap: usize,
    /// The pieces of the chunk being made (`current` there), from `first` on; and that chunk's
    /// length with separators. A vector the chunk moves along, the pieces before `first`
    /// dropped once a chunk is out: a double-ended queue's pushes and pops were a quarter of a
    /// long line's time.
    pieces: Vec<Piece>,
    first: usize,
    total: usize,
}

impl Merge {
    fn new(sep_len: usize, size: usize, overlap: usize) -> Self {
        Merge {
            sep_len,
            size,
            overlap,
            pieces: Vec::new(),
            first: 0,
            total: 0,
        }
    }

    /// The chunk of the pieces from `first` on: from the first one's start to the last one's end.
    fn joined(&self) -> Option<Piece> {
        let current = &self.pieces[self.first..];
        let (first, last) = (current.first()?, current.last()?);
        Some(Piece {
            bytes: first.bytes.start..last.bytes.end,
            char_start: first.char_start,
            chars: last.char_start + last.chars - first.char_start,
        })
    }

    #[inline]
    fn push(&mut self, p: Piece, out: &mut Found) {
        let sep = if self.pieces.len() == self.first {
            0
        } else {
            self.sep_len
        };
        if self.total + p.chars + sep > self.size
            && let Some(chunk) = self.joined()
        {
            out.add(chunk);
            while self.total > self.overlap && self.pieces.len() - self.first > 1 {
                self.total -= self.pieces[self.first].chars + self.sep_len;
                self.first += 1;
            }
            if self.total > self.overlap {
                self.first = self.pieces.len();
                self.total = 0;
            }
            self.pieces.drain(..self.first);
            self.first = 0;
        }
        self.total += p.chars;
        self.pieces.push(p);
        if self.pieces.len() - self.first > 1 {
            self.total += self.sep_len;
        }
    }

    /// The run of short pieces ended: its last chunk, and a fresh start for the next run.
    fn finish(&mut self, out: &mut Found) {
        if let Some(chunk) = self.joined() {
            out.add(chunk);
        }
        self.pieces.clear();
        self.first = 0;
        self.total = 0;
    }
}

/// The characters that begin in `doc[from..to]` (byte offsets that may fall inside a
/// character: a character is counted where its first byte is). Counted by `str`'s own count,
/// which reads a word at a time: a filter over the bytes went byte by byte (overflow checks
/// keep its sum from being vectorised), a fifth of the token chunker's time.
fn count_chars_between(doc: &str, from: usize, to: usize) -> usize {
    let ceil = |at: usize| {
        (at..=doc.len())
            .find(|&b| doc.is_char_boundary(b))
            .unwrap_or(doc.len())
    };
    doc.get(ceil(from)..ceil(to))
        .map_or(0, |s| s.chars().count())
}

/// A document is encoded with the pattern read by hand (`cl100k`), in parts of at least this
/// length on the machine's cores (a part costs a thread; under a megabyte one is enough).
const PART_BYTES: usize = 1 << 20;

/// How many bytes each of cl100k_base's tokens for `doc` is (the tokens exactly as tiktoken's
/// `encode_ordinary` gives them; each is 128 bytes or fewer): a chunker needs where the tokens
/// are, and only that. A byte each, a fortieth of the memory that the tokens and their places
/// as `usize` took; a 10 MB document's pages zeroed by the kernel were a fifth of the command's
/// time.
fn token_lens(doc: &str) -> Vec<u8> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    lens_in_parts(doc, cores.min(doc.len() / PART_BYTES))
}

/// [`token_lens`], `doc` cut at seams (below) into at most `parts` parts encoded side by side.
fn lens_in_parts(doc: &str, parts: usize) -> Vec<u8> {
    use rayon::prelude::*;
    let cl = cl100k::Cl100k::get();
    let seams = seams(doc, parts);
    // A token is a byte or more: room for as many as the bytes never moves a vector (and pages
    // reserved but not written cost nothing).
    let mut parts: Vec<Vec<u8>> = seams
        .par_windows(2)
        .enumerate()
        .map(|(k, w)| {
            let mut lens = Vec::with_capacity(if k == 0 { doc.len() } else { w[1] - w[0] });
            cl.token_lens(&doc[w[0]..w[1]], &mut lens);
            lens
        })
        .collect();
    let mut lens = std::mem::take(&mut parts[0]);
    for part in &parts[1..] {
        lens.extend_from_slice(part);
    }
    lens
}

/// Byte offsets that cut `doc` into at most `parts` parts of about equal length, first 0 and
/// last `doc.len()`, each cut at a seam: where the text before ends in an ASCII letter and the
/// text after begins with a space, or before ends in a line feed and after begins with an ASCII
/// letter. In tiktoken's pre-tokenising pattern, a piece that holds such a letter ends with it
/// (no alternative goes on from a letter into a space), and one that holds such a line feed
/// ends with it, in the whole text (`\s*[\r\n]`, a letter following) as at the end of the part
/// (`\s++$`); no alternative looks behind where a piece starts. So the pieces of the parts are
/// the pieces of the whole, and the tokens of the parts, end to end, the tokens of the whole
/// (tested on seeded random text at every seam). A text without seams (one written without
/// Latin letters, or with none before a space or after a line feed) stays whole.
fn seams(doc: &str, parts: usize) -> Vec<usize> {
    let b = doc.as_bytes();
    let is_seam = |p: usize| {
        (b[p - 1].is_ascii_alphabetic() && b[p] == b' ')
            || (b[p - 1] == b'\n' && b[p].is_ascii_alphabetic())
    };
    let mut cuts = vec![0];
    for i in 1..parts {
        let from = (i * b.len() / parts).max(cuts[cuts.len() - 1] + 1);
        match (from..b.len()).find(|&p| is_seam(p)) {
            Some(p) => cuts.push(p),
            None => break,
        }
    }
    cuts.push(b.len());
    cuts
}

/// The token chunker's windows.
fn token(doc: &str, size: usize, overlap: usize) -> Result<Vec<ChunkRef<'_>>> {
    // tiktoken's `encode` refuses a special token's text unless allowed (TrustGraph allows
    // none): the same refusal, with its place. Each special token opens with `<|` (tested):
    // one pass finds those.
    let special = memchr::memmem::find_iter(doc.as_bytes(), b"<|").find_map(|at| {
        cl100k::SPECIAL
            .iter()
            .find(|t| doc.as_bytes()[at..].starts_with(t.as_bytes()))
            .map(|t| (at, t))
    });
    if let Some((at, t)) = special {
        return Err(Error::Usage(format!(
            "the document holds the special token `{t}` at character {}: TrustGraph's token chunker (tiktoken's encode) refuses it; use the recursive chunker, or take it out",
            doc[..at].chars().count()
        )));
    }
    // A window's bytes are the document's, from its first token's start to the next token's.
    let lens = token_lens(doc);
    let bytes_of = |tokens: &[u8]| {
        tokens
            .iter()
            .fold(0usize, |n, &len| n.wrapping_add(usize::from(len)))
    };
    let tokens = lens.len();
    let mut chunks = Vec::with_capacity(tokens / (size - overlap) + 1);
    let mut start = 0;
    // Where token `start` begins in the document, in bytes and in characters.
    let (mut at_byte, mut at_char) = (0, 0);
    while start < tokens {
        let end = (start + size).min(tokens);
        let to = at_byte + bytes_of(&lens[start..end]);
        let bytes = &doc.as_bytes()[at_byte..to];
        // A window whose bytes are whole characters is the document's own text, at its place;
        // one that splits a character holds U+FFFD the document does not, and has none. Its
        // whole characters still stand somewhere: from the first character to begin in it
        // (`at_char`: the one split began before), past the U+FFFD its first bytes decode to
        // (as many as Python's decoder gives), to the last to end in it.
        let first = (at_byte..=to)
            .find(|&b| doc.is_char_boundary(b))
            .unwrap_or(to);
        let last = (first..=to)
            .rev()
            .find(|&b| doc.is_char_boundary(b))
            .unwrap_or(first);
        let lead = first - at_byte;
        let held = count_chars_between(doc, first, last);
        let anchor = (last > first).then(|| Anchor {
            byte: String::from_utf8_lossy(&bytes[..lead]).len(),
            start: at_char,
            end: at_char + held,
        });
        let whole = lead == 0 && last == to;
        let (text, place) = if whole {
            (
                Cow::Borrowed(&doc[at_byte..to]),
                Some((at_char, at_char + held)),
            )
        } else {
            (
                Cow::Owned(String::from_utf8_lossy(bytes).into_owned()),
                None,
            )
        };
        chunks.push(ChunkRef {
            index: chunks.len() + 1,
            text,
            start: place.map(|p| p.0),
            end: place.map(|p| p.1),
            anchor,
        });
        if start + size >= tokens {
            break;
        }
        let next = start + size - overlap;
        let next_byte = at_byte + bytes_of(&lens[start..next]);
        // The characters before the next window: a whole window's less those in the overlap
        // (a few tokens), rather than counting most of the window a second time.
        at_char += if whole {
            held - count_chars_between(doc, next_byte, to)
        } else {
            count_chars_between(doc, at_byte, next_byte)
        };
        (start, at_byte) = (next, next_byte);
    }
    Ok(chunks)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn settings(chunker: Chunker, size: usize, overlap: usize) -> ChunkSettings {
        ChunkSettings {
            chunker,
            size,
            overlap,
        }
    }

    fn cut(text: &str, size: usize, overlap: usize) -> Vec<String> {
        chunk(text, &settings(Chunker::Recursive, size, overlap))
            .unwrap()
            .into_iter()
            .map(|c| c.text)
            .collect()
    }

    /// Worked by hand through TrustGraph's code.
    #[test]
    fn paragraphs_merge_up_to_the_size_with_their_separator() {
        assert_eq!(cut("aaa\n\nbbb\n\nccc", 8, 0), ["aaa\n\nbbb", "ccc"]);
        // The overlap carries the last piece that fits in it.
        assert_eq!(cut("aa bb cc dd", 5, 2), ["aa bb", "bb cc", "cc dd"]);
        // A word longer than the size is cut into characters.
        assert_eq!(cut("abcdef", 4, 0), ["abcd", "ef"]);
        // Only whitespace, as Python judges it (U+001F included), is dropped.
        assert_eq!(cut("a\n\n\u{1f}\u{a0}\n\nb", 3, 0), ["a", "b"]);
    }

    #[test]
    fn every_recursive_chunk_is_the_documents_own_characters() {
        // Every level of the splitter: paragraphs, lines, words, and the characters of a word
        // longer than a chunk.
        let doc = "Grüße aus Köln.\n\nZwei Wörter 🎉 hier.\nNoch eine Zeile mit e\u{301}.\n\n\n\nEnde \
                   der Donaudampfschiffahrtsgesellschaftskapitänsmütze 🎉.";
        let settings = settings(Chunker::Recursive, 12, 4);
        let chars: Vec<char> = doc.chars().collect();
        let chunks = chunk(doc, &settings).unwrap();
        assert!(chunks.len() > 3);
        for c in &chunks {
            let (s, e) = (c.start.unwrap(), c.end.unwrap());
            assert_eq!(chars[s..e].iter().collect::<String>(), c.text);
        }
    }

    #[test]
    fn a_token_window_of_whole_characters_has_its_place_and_one_that_splits_one_has_none() {
        // Emoji and CJK take several tokens per character: small windows split some.
        let doc = "Plain words first. 日本語の文 🎉👩‍👩‍👧 then more plain words to close.";
        let chars: Vec<char> = doc.chars().collect();
        let chunks = chunk(doc, &settings(Chunker::Token, 3, 1)).unwrap();
        let placed = chunks.iter().filter(|c| c.start.is_some()).count();
        assert!(placed > 3 && placed < chunks.len(), "{chunks:?}");
        for c in &chunks {
            match (c.start, c.end) {
                (Some(s), Some(e)) => {
                    assert_eq!(chars[s..e].iter().collect::<String>(), c.text)
                }
                _ => assert!(
                    c.text.contains('\u{fffd}') || !doc.contains(&c.text),
                    "{c:?}"
                ),
            }
            // Its whole characters are the document's where its anchor says, between any U+FFFD
            // it opens and ends with; a window inside one character has none.
            let Some(a) = c.anchor else {
                assert!(c.text.chars().all(|ch| ch == '\u{fffd}'), "{c:?}");
                continue;
            };
            let there: String = chars[a.start..a.end].iter().collect();
            assert!(c.text[a.byte..].starts_with(&there), "{c:?}");
            let (before, after) = (&c.text[..a.byte], &c.text[a.byte + there.len()..]);
            assert!(
                before
                    .chars()
                    .chain(after.chars())
                    .all(|ch| ch == '\u{fffd}'),
                "{c:?}"
            );
            if let (Some(s), Some(e)) = (c.start, c.end) {
                assert_eq!(a, Anchor::whole(s, e));
            }
        }
        assert!(
            chunks.iter().any(|c| c.anchor.is_some_and(|a| a.byte > 0)),
            "{chunks:?}"
        );
    }

    /// The seams' promise, checked against tiktoken itself: at every seam of seeded random
    /// text (words, numbers, contractions, punctuation, runs of spaces, tabs, CR LF, no-break
    /// and ideographic spaces, accents, combining marks, Japanese, emoji), the tokens of the two
    /// sides end to end are the whole's; and a document cut into parts on threads is too.
    #[test]
    fn tokens_cut_at_a_seam_are_the_wholes() {
        const BITS: &[&str] = &[
            "word", "Word", "a", "I", "'s", "'LL", "n't", " ", " ", "  ", "\t", "\n", "\n\n",
            "\r\n", " \n", "\u{a0}", "\u{3000}", "12", "2026", "1234567", ".", ",", "!?", "--",
            "(", "\"", "é", "e\u{301}", "東京", "ｶﾞ", "🦀", "\u{fffd}", "x1", "_", "$",
        ];
        let bpe = tiktoken_rs::cl100k_base_singleton();
        let mut g = crate::eval::reference::Seeded::new("tokens_cut_at_a_seam_are_the_wholes");
        for _ in 0..300 {
            let doc: String = (0..g.below(60) + 1)
                .map(|_| BITS[g.below(BITS.len())])
                .collect();
            let whole = bpe.encode_ordinary(&doc);
            for p in 1..doc.len() {
                let b = doc.as_bytes();
                let seam = (b[p - 1].is_ascii_alphabetic() && b[p] == b' ')
                    || (b[p - 1] == b'\n' && b[p].is_ascii_alphabetic());
                if seam {
                    let mut parts = bpe.encode_ordinary(&doc[..p]);
                    parts.extend(bpe.encode_ordinary(&doc[p..]));
                    assert_eq!(
                        parts, whole,
                        "KERF_TEST_SEED={}: {doc:?} cut at {p}",
                        g.seed
                    );
                }
            }
            for parts in [2, 3, 7] {
                assert_eq!(
                    lens_in_parts(&doc, parts),
                    tiktoken_lens(&doc),
                    "KERF_TEST_SEED={}: {doc:?} in {parts} parts",
                    g.seed
                );
            }
        }
        // Cut where the parts meet a seam, not elsewhere; a text without one stays whole.
        let doc = "alpha beta\ngamma delta";
        assert_eq!(seams(doc, 3), [0, 11, 16, doc.len()]);
        assert_eq!(seams("東京大学の研究", 3), [0, "東京大学の研究".len()]);
    }

    /// A document past `PART_BYTES` goes the other way (the pattern read by hand, in as many
    /// parts as there are cores for): the same tokens and places as tiktoken's own encoder
    /// gives; and in four parts, whatever the cores.
    #[test]
    fn a_large_document_has_tiktokens_tokens_and_places() {
        const BITS: &[&str] = &[
            "word", " Word", "'s", " ", "  ", "\n", "\n\n", "\r\n", "2026", ".", ", ", "é", "東京",
            "🦀", "\u{a0}", "x",
        ];
        let mut g =
            crate::eval::reference::Seeded::new("a_large_document_has_tiktokens_tokens_and_places");
        let mut doc = String::new();
        while doc.len() <= PART_BYTES + 1000 {
            doc.push_str(BITS[g.below(BITS.len())]);
        }
        let theirs = tiktoken_lens(&doc);
        assert!(token_lens(&doc) == theirs, "KERF_TEST_SEED={}", g.seed);
        assert!(seams(&doc, 4).len() == 5, "KERF_TEST_SEED={}", g.seed);
        assert!(
            lens_in_parts(&doc, 4) == theirs,
            "KERF_TEST_SEED={}",
            g.seed
        );
        let bytes: usize = theirs.iter().map(|&n| usize::from(n)).sum();
        assert_eq!(bytes, doc.len());
        // Every window's place: its text is the document's characters there, or, split, its
        // whole characters are.
        let at: Vec<usize> = doc
            .char_indices()
            .map(|(b, _)| b)
            .chain([doc.len()])
            .collect();
        for (size, overlap) in [(250, 15), (7, 3), (1, 0)] {
            let chunks = chunk(&doc, &settings(Chunker::Token, size, overlap)).unwrap();
            assert!(chunks.len() > 100, "{size}/{overlap}");
            for c in &chunks {
                // A window inside one character holds none whole.
                let Some(a) = c.anchor else {
                    assert!(c.text.chars().all(|ch| ch == '\u{fffd}'), "{c:?}");
                    continue;
                };
                let there = &doc[at[a.start]..at[a.end]];
                match (c.start, c.end) {
                    (Some(s), Some(e)) => {
                        assert_eq!(&doc[at[s]..at[e]], c.text, "{size}/{overlap}")
                    }
                    _ => assert!(
                        c.text[a.byte..].starts_with(there),
                        "{size}/{overlap}: {c:?}"
                    ),
                }
            }
        }
    }

    /// How many bytes each of tiktoken's own tokens for `doc` is.
    fn tiktoken_lens(doc: &str) -> Vec<u8> {
        let bpe = tiktoken_rs::cl100k_base_singleton();
        bpe._decode_native_and_split(bpe.encode_ordinary(doc))
            .map(|bytes| u8::try_from(bytes.len()).unwrap())
            .collect()
    }

    #[test]
    fn bad_settings_and_special_tokens_are_refused() {
        let zero = settings(Chunker::Token, 0, 0);
        assert!(
            chunk("x", &zero)
                .unwrap_err()
                .to_string()
                .contains("at least 1")
        );
        let wide = settings(Chunker::Recursive, 10, 10);
        assert!(
            chunk("x", &wide)
                .unwrap_err()
                .to_string()
                .contains("smaller than")
        );
        let token = Chunker::Token.processor_defaults();
        let e = chunk("ab <|endoftext|>", &token).unwrap_err().to_string();
        assert!(e.contains("`<|endoftext|>` at character 3"), "{e}");
        // The first of several, found by the `<|` each opens with.
        let e = chunk("é <| x <|fim_prefix|> <|endoftext|>", &token)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`<|fim_prefix|>` at character 7"), "{e}");
        assert!(cl100k::SPECIAL.iter().all(|t| t.starts_with("<|")));
    }
}
