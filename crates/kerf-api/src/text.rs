//! Offsets as the window reads them. Rust indexes a text by UTF-8 bytes, a JavaScript string by
//! UTF-16 units: every offset sent to the page (an object's place in a reply, a cut, a
//! grounding span) is converted here, once, so the page indexes its strings directly.

/// Byte offsets into a text as UTF-16 offsets (identity for ASCII).
pub(crate) struct Utf16<'t> {
    text: &'t str,
    /// `table[b]`: the UTF-16 offset of byte `b`, for texts that are not all ASCII.
    table: Option<Vec<u32>>,
}

impl<'t> Utf16<'t> {
    pub(crate) fn new(text: &'t str) -> Self {
        let table = (!text.is_ascii()).then(|| {
            let mut table = vec![0u32; text.len() + 1];
            let mut units = 0u32;
            for (at, c) in text.char_indices() {
                // Inside a character: where it starts (never asked, see `ceil`).
                table[at..at + c.len_utf8()].fill(units);
                units += c.len_utf16() as u32;
            }
            table[text.len()] = units;
            table
        });
        Utf16 { text, table }
    }

    /// The UTF-16 offset of byte `b`, a character boundary.
    pub(crate) fn at(&self, b: usize) -> u32 {
        match &self.table {
            None => b as u32,
            Some(t) => t[b.min(self.text.len())],
        }
    }

    /// The UTF-16 offset of the first character boundary at or after byte `b`: where a count
    /// that changes at `b` is first seen by a cut (cuts fall on boundaries).
    pub(crate) fn ceil(&self, mut b: usize) -> u32 {
        b = b.min(self.text.len());
        while !self.text.is_char_boundary(b) {
            b += 1;
        }
        self.at(b)
    }
}

/// Byte offsets into a text that grows (a reply as it streams) as UTF-16 offsets, asked in
/// increasing order: each is counted on from the last, so a whole reply costs one pass.
#[derive(Debug, Default)]
pub(crate) struct Utf16Cursor {
    byte: usize,
    units: u32,
}

impl Utf16Cursor {
    /// The UTF-16 offset of byte `b` of `text`, a character boundary (an offset before the last
    /// one asked is counted from the start again).
    pub(crate) fn at(&mut self, text: &str, b: usize) -> u32 {
        let b = b.min(text.len());
        if b < self.byte {
            *self = Self::default();
        }
        self.units += text[self.byte..b]
            .chars()
            .map(|c| c.len_utf16() as u32)
            .sum::<u32>();
        self.byte = b;
        self.units
    }
}

#[cfg(test)]
mod tests {
    use super::{Utf16, Utf16Cursor};

    #[test]
    fn a_cursor_counts_on_as_a_table_does_and_starts_over_when_asked_behind() {
        let text = "é😀x{\"a\":\"ü\"}";
        let table = Utf16::new(text);
        let mut cursor = Utf16Cursor::default();
        let bounds: Vec<usize> = (0..=text.len())
            .filter(|&b| text.is_char_boundary(b))
            .collect();
        for &b in &bounds {
            assert_eq!(cursor.at(text, b), table.at(b), "at byte {b}");
        }
        assert_eq!(cursor.at(text, 2), 1, "behind the last: counted again");
        assert_eq!(cursor.at(text, 6), 3);
    }

    #[test]
    fn byte_offsets_become_utf16_offsets_past_accents_and_emoji() {
        let text = "é😀x";
        let u = Utf16::new(text);
        assert_eq!(text.len(), 7);
        assert_eq!(u.at(0), 0);
        assert_eq!(u.at(2), 1, "after é (2 bytes, 1 unit)");
        assert_eq!(u.at(6), 3, "after 😀 (4 bytes, 2 units)");
        assert_eq!(u.at(7), 4);
        assert_eq!(u.ceil(3), 3, "inside 😀: the boundary after it");
        assert_eq!(Utf16::new("plain").at(3), 3);
    }
}
