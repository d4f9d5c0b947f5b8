//! Byte offsets to 1-based line numbers, and the small lexical helpers the parsers share.

/// Line starts of a text, for turning byte offsets into 1-based line numbers.
pub(crate) struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    pub fn new(text: &str) -> Self {
        let mut starts = Vec::with_capacity(text.len() / 64 + 1);
        starts.push(0);
        starts.extend(memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i + 1));
        LineIndex { starts }
    }

    /// 1-based line containing byte `offset`.
    pub fn line_of(&self, offset: usize) -> usize {
        match self.starts.binary_search(&offset) {
            Ok(i) => i + 1,
            Err(i) => i,
        }
    }

    /// Byte offset where 1-based `line` starts (the text's length past the last line).
    pub fn start_of(&self, line: usize, len: usize) -> usize {
        self.starts
            .get(line.saturating_sub(1))
            .copied()
            .unwrap_or(len)
    }
}

/// 1-based line containing byte `offset` of `text` ([`LineIndex::line_of`] without an index).
pub(crate) fn line_of(text: &str, offset: usize) -> usize {
    1 + memchr::memchr_iter(b'\n', &text.as_bytes()[..offset.min(text.len())]).count()
}

/// Byte offset where 1-based `line` of `text` starts, the text's length past the last line
/// ([`LineIndex::start_of`] without an index).
pub(crate) fn line_start(text: &str, line: usize) -> usize {
    match line.checked_sub(2) {
        None => 0,
        Some(n) => memchr::memchr_iter(b'\n', text.as_bytes())
            .nth(n)
            .map_or(text.len(), |i| i + 1),
    }
}

/// 1-based line numbers for offsets visited in increasing order, counting newlines as it goes
/// (the bytes were just read by the parser, so this stays in cache; no index to build). It keeps
/// no reference to the text, so a streaming parser can keep it while its buffer grows.
#[derive(Debug, Clone)]
pub(crate) struct LineCounter {
    pos: usize,
    line: usize,
}

impl Default for LineCounter {
    fn default() -> Self {
        LineCounter { pos: 0, line: 1 }
    }
}

impl LineCounter {
    /// Line of `offset` in `text`; offsets must not go backwards, and `text` may only grow.
    pub fn line_at(&mut self, text: &str, offset: usize) -> usize {
        debug_assert!(offset >= self.pos);
        let offset = offset.min(text.len());
        if offset > self.pos {
            self.line += memchr::memchr_iter(b'\n', &text.as_bytes()[self.pos..offset]).count();
            self.pos = offset;
        }
        self.line
    }
}

/// The largest char boundary at or before `i` (serde_json's error columns can point inside a
/// multi-byte character).
pub(crate) fn floor_char_boundary(text: &str, i: usize) -> usize {
    let mut i = i.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Offset just past the end of the line containing `pos` (after its `\n`), or `text.len()`.
pub(crate) fn next_line_start(text: &str, pos: usize) -> usize {
    memchr::memchr(b'\n', &text.as_bytes()[pos..])
        .map(|i| pos + i + 1)
        .unwrap_or(text.len())
}

/// Offset of the `\n` ending the line containing `pos`, or `text.len()`.
pub(crate) fn line_end(text: &str, pos: usize) -> usize {
    memchr::memchr(b'\n', &text.as_bytes()[pos..])
        .map(|i| pos + i)
        .unwrap_or(text.len())
}

/// Whether only spaces/tabs stand between the start of `pos`'s line and `pos`.
pub(crate) fn at_line_start(text: &str, pos: usize) -> bool {
    text.as_bytes()[..pos]
        .iter()
        .rev()
        .take_while(|&&b| b != b'\n')
        .all(|&b| b == b' ' || b == b'\t' || b == b'\r')
}

/// A Markdown code fence line (```` ``` ````, ```` ```jsonl ````, `~~~`), given the line's text
/// from its first non-blank character.
pub(crate) fn is_fence(rest_of_line: &str) -> bool {
    rest_of_line.starts_with("```") || rest_of_line.starts_with("~~~")
}

/// Length of a list marker at the start of a line (`- `, `* `, `• `, `12. `, `3) `), if any.
pub(crate) fn list_marker_len(s: &str) -> Option<usize> {
    for m in ["- ", "* ", "• "] {
        if s.starts_with(m) {
            return Some(m.len());
        }
    }
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0 && digits < 5 {
        let rest = &s.as_bytes()[digits..];
        if rest.len() >= 2 && (rest[0] == b'.' || rest[0] == b')') && rest[1] == b' ' {
            return Some(digits + 2);
        }
    }
    None
}

/// Truncate long text for a drop's detail.
pub(crate) fn excerpt(s: &str) -> String {
    let s = s.trim();
    const MAX: usize = 80;
    if s.chars().count() <= MAX {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(MAX).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counted_lines_agree_with_the_index() {
        for text in ["", "a", "\n", "ab\ncd\n\nef", "\n\nx\n"] {
            let index = LineIndex::new(text);
            for offset in 0..=text.len() {
                assert_eq!(
                    line_of(text, offset),
                    index.line_of(offset),
                    "{text:?} {offset}"
                );
            }
            for line in 0..6 {
                assert_eq!(
                    line_start(text, line),
                    index.start_of(line, text.len()),
                    "{text:?} {line}"
                );
            }
        }
    }
}
