//! The hash that places cl100k_base's tokens in the table the build script lays out
//! (`build.rs`) and that the token chunker looks pieces up in (`cl100k::Vocab`): both include
//! this file, so the two cannot differ. FxHash's rotate, xor and multiply, eight bytes at a
//! time, seeded with the length: pieces are a few bytes long, and this is one or two rounds.

/// The hash of `bytes`; its top bits pick a token's first slot.
pub(crate) fn hash(bytes: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mix = |h: u64, w: [u8; 8]| (h.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(K);
    let mut h = (bytes.len() as u64).wrapping_mul(K);
    let mut words = bytes.chunks_exact(8);
    for c in &mut words {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        h = mix(h, w);
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        h = mix(h, w);
    }
    h
}

/// A slot's rank bits: cl100k_base's 100,256 ordinary ranks fit in 17.
pub(crate) const RANK_MASK: u32 = (1 << 17) - 1;

/// The bits of `hash` a slot keeps above the rank: 15 the slot's index (the top bits) does not
/// use, so a lookup that meets another token's slot tells them apart, nearly always, without
/// reading its bytes.
pub(crate) fn tag(hash: u64) -> u32 {
    (hash as u32) & !RANK_MASK
}
