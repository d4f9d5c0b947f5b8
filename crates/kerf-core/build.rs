//! cl100k_base's vocabulary laid out at build time, so the token chunker starts with it in place
//! instead of building tiktoken-rs's tables at run time (70 ms) and keying them again (30 ms).
//! The tokens are tiktoken-rs's own, read back rank by rank through its decoder: the same crate,
//! the same version, that the chunker is checked against. Written to `OUT_DIR`:
//!
//! - `cl100k_bytes.bin`: every ordinary token's bytes, in rank order, end to end;
//! - `cl100k_offsets.bin`: where each starts in them, then where the last ends (u32, LE);
//! - `cl100k_slots.bin`: an open-addressed table of 2^18 slots of 16 bytes, each token in the
//!   first free slot from the one its hash's top bits pick (`vocab_hash.rs`): its first 12 bytes
//!   (zero after its end), then a u32 (LE) holding its rank in the low 17 bits and its length
//!   above them (`u32::MAX`: an empty slot). A lookup is one read of one cache line, nearly
//!   always: 97% of the tokens are 12 bytes or shorter, and a longer one's rest is read only
//!   when its length and first 12 bytes match;
//! - `cl100k_special.rs`: the special tokens' texts, which tiktoken's `encode` refuses.

use std::io::Write;
use std::path::PathBuf;

#[path = "src/chunk/vocab_hash.rs"]
mod vocab_hash;

const ORDINARY: u32 = vocab_hash::ORDINARY;
/// Slots in the table: a power of two, the table under two fifths full.
const SLOT_BITS: u32 = 18;
/// Bytes a slot holds a token's start in.
const HEAD: usize = vocab_hash::HEAD;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=src/chunk/vocab_hash.rs");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let bpe = tiktoken_rs::cl100k_base().expect("tiktoken-rs builds cl100k_base");
    let tokens: Vec<Vec<u8>> = bpe
        ._decode_native_and_split((0..ORDINARY).collect())
        .collect();
    assert_eq!(tokens.len(), ORDINARY as usize);

    let mut bytes = Vec::new();
    let mut offsets = Vec::with_capacity(4 * (tokens.len() + 1));
    for t in &tokens {
        offsets.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        bytes.extend_from_slice(t);
    }
    offsets.extend_from_slice(&(bytes.len() as u32).to_le_bytes());

    // Each slot: (the token's first bytes, rank | length << 17), empty as (zeros, u32::MAX).
    let mut slots = vec![([0u8; HEAD], u32::MAX); 1 << SLOT_BITS];
    let mask = slots.len() - 1;
    const {
        assert!(
            ORDINARY <= vocab_hash::RANK_MASK,
            "ranks fit below the length"
        )
    };
    for (rank, t) in tokens.iter().enumerate() {
        let h = vocab_hash::hash(t);
        let mut i = (h >> (64 - SLOT_BITS)) as usize;
        while slots[i].1 != u32::MAX {
            assert_ne!(
                &tokens[(slots[i].1 & vocab_hash::RANK_MASK) as usize],
                t,
                "cl100k_base holds a token twice"
            );
            i = (i + 1) & mask;
        }
        // The token chunker keeps each token's length in a byte (`Cl100k::token_lens`).
        assert!(t.len() <= 128, "a token is 128 bytes or fewer");
        slots[i] = (vocab_hash::head(t), rank as u32 | (t.len() as u32) << 17);
    }
    let slot_bytes: Vec<u8> = slots
        .iter()
        .flat_map(|(head, meta)| head.iter().copied().chain(meta.to_le_bytes()))
        .collect();

    let mut special: Vec<String> = bpe
        .special_tokens()
        .into_iter()
        .map(str::to_string)
        .collect();
    special.sort();
    let mut rs = String::from(
        "/// cl100k_base's special tokens' texts (from tiktoken-rs, at build time).\n\
         pub(super) const SPECIAL: &[&str] = &[\n",
    );
    for s in &special {
        rs.push_str(&format!("    {s:?},\n"));
    }
    rs.push_str("];\n");

    for (name, data) in [
        ("cl100k_bytes.bin", &bytes),
        ("cl100k_offsets.bin", &offsets),
        ("cl100k_slots.bin", &slot_bytes),
        ("cl100k_special.rs", &rs.into_bytes()),
    ] {
        std::fs::File::create(out.join(name))
            .and_then(|mut f| f.write_all(data))
            .expect("OUT_DIR is writable");
    }
}
