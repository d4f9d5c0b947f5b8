//! The hash that places cl100k_base's tokens in the table the build script lays out
//! (`build.rs`) and that the token chunker looks pieces up in (`cl100k::Vocab`), and what a slot
//! keeps of a token: both include this file, so the two cannot differ.

/// A piece's first 16 bytes as two little-endian words, zero after its end. Read with a few
/// overlapping loads whatever the length, never byte by byte: copying a short piece into a
/// buffer and reading the buffer back as a word stalled every lookup (the load waits for the
/// copy's narrow stores).
#[inline(always)]
pub(crate) fn words(b: &[u8]) -> (u64, u64) {
    let n = b.len();
    if let (Some(first), Some(last)) = (b.first_chunk::<8>(), b.last_chunk::<8>()) {
        let lo = u64::from_le_bytes(*first);
        let hi = match b.get(8..).and_then(<[u8]>::first_chunk::<8>) {
            Some(second) => u64::from_le_bytes(*second),
            // The last eight bytes, shifted down past those the first word holds.
            None if n > 8 => u64::from_le_bytes(*last) >> (8 * (16 - n)),
            None => 0,
        };
        return (lo, hi);
    }
    if let (Some(first), Some(last)) = (b.first_chunk::<4>(), b.last_chunk::<4>()) {
        let (first, last) = (u32::from_le_bytes(*first), u32::from_le_bytes(*last));
        return (u64::from(first) | u64::from(last) << (8 * (n - 4)), 0);
    }
    match b {
        [] => (0, 0),
        // The first, middle and last bytes: together, all of them (the same byte where they
        // meet, so or-ing is harmless).
        [first, .., last] | [first @ last] => {
            let mid = b.get(n / 2).copied().unwrap_or_default();
            let lo = u64::from(*first)
                | u64::from(mid) << (8 * (n / 2))
                | u64::from(*last) << (8 * (n - 1));
            (lo, 0)
        }
    }
}

/// The hash of `bytes`; its top bits pick a token's first slot. FxHash's rotate, xor and
/// multiply, a word at a time, seeded with the length: pieces are a few bytes long, and this is
/// two rounds for one of up to 16.
/// (The build script's: the chunker reads the words once and calls [`hash_words`].)
#[allow(dead_code)]
#[inline(always)]
pub(crate) fn hash(bytes: &[u8]) -> u64 {
    let (lo, hi) = words(bytes);
    hash_words(bytes, lo, hi)
}

/// [`hash`], `bytes`' [`words`] already read.
#[inline(always)]
pub(crate) fn hash_words(bytes: &[u8], lo: u64, hi: u64) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mix = |h: u64, w: u64| (h.rotate_left(5) ^ w).wrapping_mul(K);
    let mut h = mix(mix((bytes.len() as u64).wrapping_mul(K), lo), hi);
    if bytes.len() > 16 {
        for c in bytes[16..].chunks(8) {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            h = mix(h, u64::from_le_bytes(w));
        }
    }
    h
}

/// How many ordinary tokens cl100k_base has (the special ones come after): the ranks the table
/// holds. The build script lays out this many; the library reads it only in tests.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) const ORDINARY: u32 = 100_256;

/// A slot's rank bits: cl100k_base's 100,256 ordinary ranks fit in 17; the token's length is
/// kept above them.
pub(crate) const RANK_MASK: u32 = (1 << 17) - 1;

/// How many of a token's first bytes its slot holds: a slot is these and a u32, 16 bytes, four
/// to a cache line.
pub(crate) const HEAD: usize = 12;

/// `bytes`' first `HEAD` bytes, zero after its end, as [`words`] reads them: the first word
/// whole and the low half of the second.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn head(bytes: &[u8]) -> [u8; HEAD] {
    let mut h = [0u8; HEAD];
    let n = bytes.len().min(HEAD);
    h[..n].copy_from_slice(&bytes[..n]);
    h
}
