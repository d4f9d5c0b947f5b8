//! cl100k_base's tokens as tiktoken's `encode_ordinary` gives them (TrustGraph's token chunker),
//! several times faster. tiktoken cuts a text into pieces with one regular expression, then
//! merges each piece's bytes into tokens; the expression, run by a backtracking engine for its
//! look-ahead, was three fifths of `kerf chunk --chunker token`'s time. Here it is read by hand
//! (`Cl100k::piece_end`, one branch per alternative, in its order), over the very character
//! classes its engine uses (`\p{L}`, `\p{N}`, `\s` and the case folds of `(?i)`, taken from
//! `regex-syntax`, the parser under tiktoken's engine). Each piece is then looked up whole in the
//! vocabulary, as tiktoken does first, and merged as tiktoken's `byte_pair_merge` merges when it
//! is not a token (by tiktoken's own encoder when it is a long one: `LONG_PIECE`); the chunker's
//! encoder remembers the pieces it has met and their tokens' lengths (`Seen`), so a word met
//! again is neither looked up nor merged. The
//! vocabulary is `tiktoken-rs`'s, read back token by token through its decoder at build time and
//! laid out as a table compiled in (`build.rs`): nothing is built when the chunker starts.
//! Checked against `tiktoken-rs` on seeded random text (the tests below) and against Python's
//! tiktoken by the chunker parity tests.

use std::ops::Range;
use std::sync::LazyLock;

use regex_syntax::hir::{Class, HirKind};
use rustc_hash::FxHashMap;

/// tiktoken's cl100k_base pattern (tiktoken 0.8 and later, possessive), for the record: the
/// alternatives `piece_end` takes in this order.
#[cfg(test)]
const PATTERN: &str = r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s";

/// Pieces this long or longer are merged by tiktoken's own encoder, which has a merge for long
/// pieces that is not quadratic (`byte_pair_split` is).
const LONG_PIECE: usize = 100;

#[path = "vocab_hash.rs"]
mod vocab_hash;
include!(concat!(env!("OUT_DIR"), "/cl100k_special.rs"));

/// cl100k_base's ordinary tokens as `build.rs` laid them out: their bytes end to end, where each
/// starts, and an open-addressed table keyed by `vocab_hash::hash`, each slot a token's first
/// bytes, its rank and its length.
pub(super) struct Vocab {
    bytes: &'static [u8],
    offsets: &'static [u8],
    slots: &'static [u8],
}

/// The table on a cache line's edge, so that no slot straddles two.
#[repr(C, align(64))]
struct Aligned<T: ?Sized>(T);

const SLOTS_LEN: usize = include_bytes!(concat!(env!("OUT_DIR"), "/cl100k_slots.bin")).len();
static SLOTS: &Aligned<[u8; SLOTS_LEN]> = &Aligned(*include_bytes!(concat!(
    env!("OUT_DIR"),
    "/cl100k_slots.bin"
)));

pub(super) static VOCAB: Vocab = Vocab {
    bytes: include_bytes!(concat!(env!("OUT_DIR"), "/cl100k_bytes.bin")),
    offsets: include_bytes!(concat!(env!("OUT_DIR"), "/cl100k_offsets.bin")),
    slots: &SLOTS.0,
};

/// A slot's bytes.
const SLOT: usize = vocab_hash::HEAD + 4;

/// The `i`th little-endian u32 of `table` (`u32::MAX` past its end).
fn word(table: &[u8], i: usize) -> u32 {
    table
        .get(4 * i..4 * i + 4)
        .and_then(|w| w.try_into().ok())
        .map_or(u32::MAX, u32::from_le_bytes)
}

impl Vocab {
    /// Token `rank`'s bytes.
    pub(super) fn bytes(&self, rank: u32) -> &'static [u8] {
        let (start, end) = (
            word(self.offsets, rank as usize),
            word(self.offsets, rank as usize + 1),
        );
        self.bytes
            .get(start as usize..end as usize)
            .unwrap_or_default()
    }

    /// The rank of the token whose bytes are `piece`, if one is.
    #[inline]
    pub(super) fn rank(&self, piece: &[u8]) -> Option<u32> {
        const HEAD: usize = vocab_hash::HEAD;
        let slots = self.slots.len() / SLOT;
        let mask = slots - 1;
        // The piece's first 16 bytes, read once for the hash and the comparison (a slot holds
        // a token's first 12).
        let (lo, hi) = vocab_hash::words(piece);
        let h = vocab_hash::hash_words(piece, lo, hi);
        let hi = hi as u32;
        let mut i = (h >> (64 - slots.trailing_zeros())) as usize;
        loop {
            let slot: &[u8; SLOT] = self.slots.get(i * SLOT..i * SLOT + SLOT)?.try_into().ok()?;
            let [s @ .., m0, m1, m2, m3] = *slot;
            let meta = u32::from_le_bytes([m0, m1, m2, m3]);
            if meta == u32::MAX {
                return None;
            }
            let [a0, a1, a2, a3, a4, a5, a6, a7, b0, b1, b2, b3] = s;
            if (meta >> 17) as usize == piece.len()
                && u64::from_le_bytes([a0, a1, a2, a3, a4, a5, a6, a7]) == lo
                && u32::from_le_bytes([b0, b1, b2, b3]) == hi
            {
                let rank = meta & vocab_hash::RANK_MASK;
                if piece.len() <= HEAD || self.bytes(rank).get(HEAD..) == piece.get(HEAD..) {
                    return Some(rank);
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// `piece` (not itself a token, at least two bytes) merged into tokens as tiktoken's
    /// `byte_pair_merge` merges it: the pair whose joined bytes have the lowest rank first, the
    /// leftmost of equals, until no pair joins into a token; each token given to `token` with
    /// its length.
    fn merge(&self, piece: &[u8], token: &mut impl FnMut(u32, usize)) {
        let rank_of = |a: usize, b: usize| {
            piece
                .get(a..b)
                .and_then(|p| self.rank(p))
                .unwrap_or(u32::MAX)
        };
        // (where a part starts, the rank of it joined with the next part)
        let mut parts: Vec<(usize, u32)> = (0..piece.len() - 1)
            .map(|i| (i, rank_of(i, i + 2)))
            .collect();
        parts.push((piece.len() - 1, u32::MAX));
        parts.push((piece.len(), u32::MAX));
        let lowest = |parts: &[(usize, u32)]| {
            parts[..parts.len() - 1].iter().enumerate().fold(
                (u32::MAX, usize::MAX),
                |m, (i, &(_, r))| if r < m.0 { (r, i) } else { m },
            )
        };
        let mut min = lowest(&parts);
        while min.0 != u32::MAX {
            let i = min.1;
            // The rank of part `j` joined with the one after it, once part `i + 1` is gone.
            let joined = |parts: &[(usize, u32)], j: usize| {
                if j + 3 < parts.len() {
                    rank_of(parts[j].0, parts[j + 3].0)
                } else {
                    u32::MAX
                }
            };
            if i > 0 {
                parts[i - 1].1 = joined(&parts, i - 1);
            }
            parts[i].1 = joined(&parts, i);
            parts.remove(i + 1);
            min = lowest(&parts);
        }
        for w in parts.windows(2) {
            token(rank_of(w[0].0, w[1].0), w[1].0 - w[0].0);
        }
    }
}

/// Slots in the memory of pieces met (`1 << SEEN_BITS` at most, fewer for a short text), one
/// memory per part a document is encoded in: 16,384 of 32 bytes, 512 KB, which a core's
/// second-level cache holds. On the knowledge-graph documents, 3% of the pieces are not found
/// in it (first met, or another piece took their slot), against 10% with 4,096 slots.
const SEEN_BITS: u32 = 14;
/// The most tokens a remembered piece may have.
const SEEN_TOKENS: usize = 5;

/// A piece met before and the lengths of its tokens, in a slot picked by its hash (a later piece
/// with the same slot takes it over). A piece is known by its length and its first 16 bytes,
/// and when longer by the text where it was met.
#[derive(Clone, Copy)]
struct Seen {
    lo: u64,
    hi: u64,
    /// Where the piece was met in the text.
    at: usize,
    /// Its length in bytes; 0 in an empty slot.
    len: u16,
    tokens: u8,
    lens: [u8; SEEN_TOKENS],
}

impl Seen {
    const EMPTY: Seen = Seen {
        lo: 0,
        hi: 0,
        at: 0,
        len: 0,
        tokens: 0,
        lens: [0; SEEN_TOKENS],
    };

    /// Whether this is `piece` (of `text`; its first 16 bytes `lo`, `hi`).
    #[inline]
    fn holds(&self, text: &[u8], piece: &[u8], lo: u64, hi: u64) -> bool {
        usize::from(self.len) == piece.len()
            && self.lo == lo
            && self.hi == hi
            && (piece.len() <= 16 || text.get(self.at..self.at + piece.len()) == Some(piece))
    }
}

/// What the pattern tells apart in a character.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `\p{L}`.
    Letter,
    /// `\p{N}`.
    Number,
    /// `\r` or `\n` (also `\s`).
    LineBreak,
    /// The rest of `\s`.
    Space,
    /// Neither.
    Other,
}

pub(super) struct Cl100k {
    ascii: [Kind; 128],
    /// Sorted, disjoint inclusive ranges, for characters past ASCII.
    letters: Vec<(char, char)>,
    numbers: Vec<(char, char)>,
    spaces: Vec<(char, char)>,
    /// For a contraction's letters: each character `(?i)` takes for one of `s d m t l v e r`,
    /// and that letter.
    folds: FxHashMap<char, char>,
}

static CL100K: LazyLock<Cl100k> = LazyLock::new(Cl100k::new);

/// A class's ranges as the regular-expression engine reads them.
fn class(pattern: &str) -> Vec<(char, char)> {
    let hir = regex_syntax::parse(pattern).expect("a class regex-syntax parses");
    match hir.kind() {
        HirKind::Class(Class::Unicode(c)) => {
            c.ranges().iter().map(|r| (r.start(), r.end())).collect()
        }
        other => panic!("{pattern} is not a Unicode class: {other:?}"),
    }
}

fn within(ranges: &[(char, char)], c: char) -> bool {
    ranges
        .binary_search_by(|&(lo, hi)| {
            if hi < c {
                std::cmp::Ordering::Less
            } else if lo > c {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

impl Cl100k {
    pub(super) fn get() -> &'static Cl100k {
        &CL100K
    }

    fn new() -> Cl100k {
        let mut folds = FxHashMap::default();
        for letter in ['s', 'd', 'm', 't', 'l', 'v', 'e', 'r'] {
            for (lo, hi) in class(&format!("(?i:[{letter}])")) {
                for c in lo..=hi {
                    folds.insert(c, letter);
                }
            }
        }
        let mut cl = Cl100k {
            ascii: [Kind::Other; 128],
            letters: class(r"\p{L}"),
            numbers: class(r"\p{N}"),
            spaces: class(r"\s"),
            folds,
        };
        for b in 0..128u8 {
            cl.ascii[b as usize] = cl.classify(b as char);
        }
        cl
    }

    fn classify(&self, c: char) -> Kind {
        if c == '\r' || c == '\n' {
            Kind::LineBreak
        } else if within(&self.letters, c) {
            Kind::Letter
        } else if within(&self.numbers, c) {
            Kind::Number
        } else if within(&self.spaces, c) {
            Kind::Space
        } else {
            Kind::Other
        }
    }

    /// The character at byte `i` (a boundary, before the end): its kind and its length.
    #[inline]
    fn at(&self, s: &str, i: usize) -> (Kind, char, usize) {
        let b = s.as_bytes()[i];
        if b < 0x80 {
            return (self.ascii[b as usize], b as char, 1);
        }
        let c = s[i..].chars().next().unwrap_or('\u{fffd}');
        (self.classify(c), c, c.len_utf8())
    }

    fn kind_at(&self, s: &str, i: usize) -> Option<Kind> {
        (i < s.len()).then(|| self.at(s, i).0)
    }

    /// Past the run of characters of `kind` that starts at `i`.
    fn run(&self, s: &str, mut i: usize, kind: Kind) -> usize {
        if kind == Kind::Letter {
            // Most letters are ASCII: told by arithmetic, not by a second load from the table
            // (that load, waiting on the byte's, was two fifths of the chunker's scanning).
            let b = s.as_bytes();
            while b.get(i).is_some_and(u8::is_ascii_alphabetic) {
                i += 1;
            }
            if b.get(i).is_none_or(|&c| c < 0x80) {
                return i;
            }
        }
        while i < s.len() {
            let (k, _, n) = self.at(s, i);
            if k != kind {
                break;
            }
            i += n;
        }
        i
    }

    /// Where the contraction after an apostrophe ending at `i` ends, if one is there.
    fn contraction(&self, s: &str, i: usize) -> Option<usize> {
        let mut chars = s[i..].chars();
        let c1 = chars.next()?;
        let f1 = *self.folds.get(&c1)?;
        if matches!(f1, 's' | 'd' | 'm' | 't') {
            return Some(i + c1.len_utf8());
        }
        let c2 = chars.next()?;
        let f2 = *self.folds.get(&c2)?;
        matches!((f1, f2), ('l', 'l') | ('v', 'e') | ('r', 'e'))
            .then(|| i + c1.len_utf8() + c2.len_utf8())
    }

    /// Where the piece that starts at byte `i` ends: the pattern's alternatives, in order.
    fn piece_end(&self, s: &str, i: usize) -> usize {
        let (k0, c0, n0) = self.at(s, i);
        let after = i + n0;
        // '(?i:[sdmt]|ll|ve|re)
        if c0 == '\''
            && let Some(end) = self.contraction(s, after)
        {
            return end;
        }
        // [^\r\n\p{L}\p{N}]?+\p{L}++
        if k0 == Kind::Letter {
            return self.run(s, after, Kind::Letter);
        }
        if k0 != Kind::LineBreak
            && k0 != Kind::Number
            && self.kind_at(s, after) == Some(Kind::Letter)
        {
            return self.run(s, after, Kind::Letter);
        }
        // \p{N}{1,3}+
        if k0 == Kind::Number {
            let mut end = after;
            for _ in 0..2 {
                match (end < s.len()).then(|| self.at(s, end)) {
                    Some((Kind::Number, _, n)) => end += n,
                    _ => break,
                }
            }
            return end;
        }
        // ' ?[^\s\p{L}\p{N}]++[\r\n]*+'
        let others = if k0 == Kind::Other {
            Some(i)
        } else if c0 == ' ' && self.kind_at(s, after) == Some(Kind::Other) {
            Some(after)
        } else {
            None
        };
        if let Some(from) = others {
            let end = self.run(s, from, Kind::Other);
            return self.run(s, end, Kind::LineBreak);
        }
        // What is left starts with white space: its whole run, the last line break in it, and
        // where its last character begins.
        let (mut end, mut last_break, mut last_start) = (i, None, i);
        while end < s.len() {
            let (k, _, n) = self.at(s, end);
            if k != Kind::Space && k != Kind::LineBreak {
                break;
            }
            if k == Kind::LineBreak {
                last_break = Some(end + n);
            }
            last_start = end;
            end += n;
        }
        // \s++$
        if end == s.len() {
            return end;
        }
        // \s*[\r\n]
        if let Some(b) = last_break {
            return b;
        }
        // \s+(?!\S), else \s
        if last_start > i { last_start } else { after }
    }

    /// The tokens of the piece `text[piece]`, each given to `token` with its length in bytes.
    #[inline]
    fn piece_tokens(&self, text: &str, piece: Range<usize>, token: &mut impl FnMut(u32, usize)) {
        let bytes = &text.as_bytes()[piece.clone()];
        match VOCAB.rank(bytes) {
            Some(rank) => token(rank, bytes.len()),
            // Rare (a run of 100 letters or symbols that is no token): tiktoken's own
            // vocabulary is built for it, once.
            None if bytes.len() >= LONG_PIECE => {
                for rank in tiktoken_rs::cl100k_base_singleton().encode_ordinary(&text[piece]) {
                    token(rank, VOCAB.bytes(rank).len());
                }
            }
            None => VOCAB.merge(bytes, token),
        }
    }

    /// cl100k_base's tokens for `text`, as tiktoken's `encode_ordinary` gives them.
    #[cfg(test)]
    pub(super) fn encode(&self, text: &str) -> Vec<u32> {
        let mut tokens = Vec::with_capacity(text.len() / 4);
        let mut i = 0;
        while i < text.len() {
            let end = self.piece_end(text, i);
            self.piece_tokens(text, i..end, &mut |rank, _| tokens.push(rank));
            i = end;
        }
        tokens
    }

    /// How many bytes each of `text`'s tokens is, pushed onto `lens` (the tokens alone: a chunker
    /// needs where they are, not which they are; every token is 128 bytes or fewer, `build.rs`
    /// checks). A piece met again (most are: a text's words repeat) takes its tokens' lengths
    /// from [`Seen`] instead of the vocabulary.
    pub(super) fn token_lens(&self, text: &str, lens: &mut Vec<u8>) {
        let b = text.as_bytes();
        // A slot for every 16 bytes of a short text (a piece is four or five), 256 at least.
        let bits = (text.len() / 16)
            .clamp(256, 1 << SEEN_BITS)
            .next_power_of_two()
            .trailing_zeros();
        let mut seen = vec![Seen::EMPTY; 1 << bits];
        let mut i = 0;
        while i < text.len() {
            let end = self.piece_end(text, i);
            let piece = &b[i..end];
            let (lo, hi) = vocab_hash::words(piece);
            let h = vocab_hash::hash_words(piece, lo, hi);
            let entry = &mut seen[(h >> (64 - bits)) as usize];
            if entry.holds(b, piece, lo, hi) {
                lens.extend_from_slice(&entry.lens[..usize::from(entry.tokens)]);
            } else {
                let mut fresh = Seen {
                    lo,
                    hi,
                    at: i,
                    len: u16::try_from(piece.len()).unwrap_or(0),
                    tokens: 0,
                    lens: [0; SEEN_TOKENS],
                };
                self.piece_tokens(text, i..end, &mut |_, len| {
                    // A token is 128 bytes or fewer (`build.rs`).
                    let len = len as u8;
                    lens.push(len);
                    match fresh.lens.get_mut(usize::from(fresh.tokens)) {
                        Some(slot) => {
                            *slot = len;
                            fresh.tokens += 1;
                        }
                        // Too many tokens to keep: a length of 0 is never met.
                        None => fresh.len = 0,
                    }
                });
                if fresh.len != 0 {
                    *entry = fresh;
                }
            }
            i = end;
        }
    }

    /// The pieces of `text`, for the tests.
    #[cfg(test)]
    fn pieces<'a>(&self, text: &'a str) -> Vec<&'a str> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < text.len() {
            let end = self.piece_end(text, i);
            out.push(&text[i..end]);
            i = end;
        }
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Text drawn from pieces that exercise every alternative and every class: words and
    /// contractions in every case (and `ſ`, which `(?i)` takes for `s`), numbers of every
    /// length and script, punctuation, runs of every kind of white space before a word, a
    /// number, punctuation and the end, CR LF, marks, unspaced scripts, emoji, long words.
    const BITS: &[&str] = &[
        "word",
        "Word",
        "a",
        "I",
        "'s",
        "'S",
        "'ſ",
        "'LL",
        "'lL",
        "'ve",
        "'RE",
        "'d",
        "'M",
        "'t",
        "n't",
        "'x",
        "''",
        "'",
        " ",
        " ",
        "  ",
        "   ",
        "\t",
        "\n",
        "\n\n",
        "\r\n",
        "\r",
        " \n",
        "\n ",
        "\u{a0}",
        "\u{3000}",
        "\u{85}",
        "\u{2028}",
        "\u{b}",
        "\u{c}",
        "\u{1f}",
        "12",
        "2026",
        "1234567",
        "٣٤",
        "½",
        "Ⅻ",
        ".",
        ",",
        "!?",
        "--",
        "(",
        "\"",
        "...\n",
        "é",
        "e\u{301}",
        "\u{301}",
        "東京",
        "ｶﾞ",
        "한국어",
        "ไทย",
        "🦀",
        "👍🏽",
        "\u{fffd}",
        "\u{200d}",
        "x1",
        "_",
        "$",
        "€",
        "ß",
        "İ",
        "K",
        "Ω",
        "ǅ",
        "ʰ",
        "\u{0}",
    ];

    fn draw(g: &mut crate::eval::reference::Seeded) -> String {
        let long = [
            "a".repeat(150),
            "東".repeat(60),
            "🦀".repeat(40),
            " ".repeat(120),
        ];
        (0..g.below(40) + 1)
            .map(|_| match g.below(50) {
                0 => long[g.below(long.len())].clone(),
                _ => BITS[g.below(BITS.len())].to_string(),
            })
            .collect()
    }

    /// The same pieces as tiktoken's own pattern, and the same tokens as its encoder, on
    /// seeded random text; the whole vocabulary read back.
    #[test]
    fn pieces_and_tokens_are_tiktokens() {
        let cl = Cl100k::get();
        let regex = fancy_regex::Regex::new(PATTERN).unwrap();
        let bpe = tiktoken_rs::cl100k_base_singleton();
        // Every token's bytes as tiktoken decodes them, each found again by its bytes alone.
        for (rank, bytes) in (0..vocab_hash::ORDINARY)
            .zip(bpe._decode_native_and_split((0..vocab_hash::ORDINARY).collect()))
        {
            assert_eq!(VOCAB.bytes(rank), bytes, "token {rank}");
            assert_eq!(VOCAB.rank(&bytes), Some(rank), "token {rank}");
        }
        assert_eq!(
            VOCAB.bytes(vocab_hash::ORDINARY),
            b"",
            "past the ordinary tokens"
        );
        assert_eq!(
            VOCAB.rank(b"<|endoftext|>"),
            None,
            "a special token is not ordinary"
        );
        let mut g = crate::eval::reference::Seeded::new("pieces_and_tokens_are_tiktokens");
        for _ in 0..3000 {
            let text = draw(&mut g);
            let theirs: Vec<&str> = regex
                .find_iter(&text)
                .map(|m| m.unwrap().as_str())
                .collect();
            assert_eq!(
                cl.pieces(&text),
                theirs,
                "KERF_TEST_SEED={}: {text:?}",
                g.seed
            );
            assert_eq!(
                cl.encode(&text),
                bpe.encode_ordinary(&text),
                "KERF_TEST_SEED={}: {text:?}",
                g.seed
            );
        }
    }

    /// A piece's two words are its first 16 bytes, zero after its end, at every length; a slot's
    /// head is the first 12 of them.
    #[test]
    fn words_are_the_first_sixteen_bytes() {
        let text: Vec<u8> = (1..=40).collect();
        for n in 0..=40 {
            let b = &text[..n];
            let mut padded = [0u8; 16];
            padded[..n.min(16)].copy_from_slice(&b[..n.min(16)]);
            let want = (
                u64::from_le_bytes(padded[..8].try_into().unwrap()),
                u64::from_le_bytes(padded[8..].try_into().unwrap()),
            );
            assert_eq!(vocab_hash::words(b), want, "{n} bytes");
            assert_eq!(vocab_hash::head(b), padded[..vocab_hash::HEAD], "{n} bytes");
        }
    }

    /// Pieces met again take their tokens from memory: the same ends as tiktoken's, for pieces
    /// that share their first 16 bytes and length but not the rest, pieces of more tokens than
    /// are remembered, and more pieces than slots (each slot taken over many times).
    #[test]
    fn a_piece_met_again_has_tiktokens_tokens() {
        let bpe = tiktoken_rs::cl100k_base_singleton();
        let mut text = String::new();
        for round in 0..3 {
            for i in 0..6000usize {
                // Letters only, so that each is one piece of a few tokens: 1,728 tails in 16,384
                // slots share some, and alone tell those pieces apart (cut differently).
                let tail: String = (0..3)
                    .map(|k| char::from(b"etaoinqzxjkv"[i / 12usize.pow(k) % 12]))
                    .collect();
                text.push_str(&format!(" interpretation{tail} abc{i}"));
                text.push_str([" Kerf", " kerfuffle", " 東京大学", " 🦀🦀"][(i + round) % 4]);
            }
        }
        let mut lens = Vec::new();
        Cl100k::get().token_lens(&text, &mut lens);
        let theirs: Vec<u8> = bpe
            ._decode_native_and_split(bpe.encode_ordinary(&text))
            .map(|b| b.len() as u8)
            .collect();
        assert!(
            lens == theirs,
            "{} tokens, tiktoken's {}",
            lens.len(),
            theirs.len()
        );
    }

    /// Cases worked through the pattern by hand.
    #[test]
    fn pieces_by_hand() {
        let cl = Cl100k::get();
        assert_eq!(cl.pieces("I'm here"), ["I", "'m", " here"]);
        assert_eq!(cl.pieces("it'll"), ["it", "'ll"]);
        assert_eq!(cl.pieces("'ſ"), ["'ſ"]);
        assert_eq!(cl.pieces("12345 x"), ["123", "45", " x"]);
        assert_eq!(cl.pieces("a  b"), ["a", " ", " b"]);
        assert_eq!(cl.pieces("a \n\n b"), ["a", " \n\n", " b"]);
        assert_eq!(cl.pieces("a  "), ["a", "  "]);
        assert_eq!(cl.pieces(" !!\n\nx"), [" !!\n\n", "x"]);
        assert_eq!(cl.pieces("\u{a0}word"), ["\u{a0}word"]);
        assert_eq!(cl.pieces("e\u{301}t\u{e9}"), ["e", "\u{301}t\u{e9}"]);
    }
}
