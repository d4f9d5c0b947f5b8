//! Truncation sweeps: for every cut offset of a complete reply, how many objects the parser would
//! accept from the prefix up to that offset — computed from one parse of the whole reply, not by
//! re-parsing each prefix.
//!
//! The definition the tests hold it to: `sweep.at(c) == parse(prefix(c)).objects.len()` for every
//! cut `c`, where a byte cut inside a UTF-8 character counts as the preceding boundary.
//!
//! Why one parse is enough:
//! - `jsonl`: an accepted object is accepted by every prefix that contains its closing brace, and
//!   by no shorter one; what the scanner does before it does not depend on text after it (a broken
//!   piece resumes at or after its error). So the count at `c` is the number of accepted objects
//!   whose text ends at or before `c`.
//! - `delimited`: likewise, a record counts once its terminator (record delimiter, newline, or the
//!   completion delimiter) is in the prefix.
//! - `json` (strict): a prefix yields objects only when its body — the first closed fence block,
//!   or else the whole prefix — is one complete valid value. That happens on at most a few short
//!   intervals (the value's end up to the next non-blank character; from the closing fence on; the
//!   digits of a bare number), which are found once and evaluated with the real parser.
//!
//! - `json` (salvage): the value salvage picks can change with the prefix, but only where one of
//!   at most 64 candidate openings appears or settles; between those points the count follows the
//!   chosen array's element ends (see `parse::json::salvage_curve` for the argument).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::cancel::CancelToken;
use crate::error::{Error, Result};
use crate::parse::Parser;
use crate::prompt::ResponseType;

/// The byte-level curve: `steps[i] = (offset, count)` means the count is `count` for cuts at
/// `offset` and beyond, up to the next step. The first step is at offset 0.
#[derive(Debug, Clone, PartialEq)]
pub struct ByteCurve {
    pub len: usize,
    pub steps: Vec<(usize, usize)>,
}

impl ByteCurve {
    /// Objects recovered by the prefix of `c` bytes (`c` past the end counts as the whole reply).
    pub fn at(&self, c: usize) -> usize {
        let c = c.min(self.len);
        match self.steps.binary_search_by(|(o, _)| o.cmp(&c)) {
            Ok(i) => self.steps[i].1,
            Err(0) => 0,
            Err(i) => self.steps[i - 1].1,
        }
    }

    fn from_ends(len: usize, ends: &[usize]) -> Self {
        let mut steps = vec![(0, 0)];
        for (i, &e) in ends.iter().enumerate() {
            let n = i + 1;
            match steps.last_mut() {
                Some(last) if last.0 == e => last.1 = n,
                _ => steps.push((e, n)),
            }
        }
        ByteCurve { len, steps }
    }
}

/// Build the byte curve of `text` for `parser`. `cancel` is checked between the prefixes the
/// curve evaluates (a cancelled sweep is `Error::Cancelled`).
pub fn byte_curve(
    parser: &Parser,
    text: &str,
    vars: &Map<String, Value>,
    cancel: &CancelToken,
) -> Result<ByteCurve> {
    byte_curve_until(parser, text, vars, &|| cancel.is_cancelled())
}

/// [`byte_curve`] with its stop check given as `stop`, asked where `byte_curve` asks its token
/// (before it starts, between the prefixes it evaluates, and before it returns): once it has
/// said `true` the sweep ends with `Error::Cancelled`, whatever it says after. Tests use it to
/// stop a sweep at a known check instead of at a moment.
pub fn byte_curve_until(
    parser: &Parser,
    text: &str,
    vars: &Map<String, Value>,
    stop: &dyn Fn() -> bool,
) -> Result<ByteCurve> {
    // Once stopped, stopped for good: a predicate that changed its mind must not turn a cut-short
    // sweep into a curve.
    let stopped = std::cell::Cell::new(false);
    let stop = &|| {
        if stop() {
            stopped.set(true);
        }
        stopped.get()
    };
    if stop() {
        return Err(Error::Cancelled);
    }
    match parser.response_type() {
        ResponseType::Jsonl | ResponseType::Delimited => {
            let mut ends = parser.parse(text, vars).ends.to_vec();
            // Ends come in text order already; sort defensively so the curve is monotone.
            ends.sort_unstable();
            Ok(ByteCurve::from_ends(text.len(), &ends))
        }
        ResponseType::Json if parser.salvage() => {
            let stripped = text.strip_prefix('\u{feff}').unwrap_or(text);
            let bom = text.len() - stripped.len();
            let mut steps = crate::parse::salvage_curve(stripped, parser, vars, stop)
                .ok_or(Error::Cancelled)?;
            // Offsets are into the text as given; a cut inside the BOM recovers what "" does.
            steps.iter_mut().skip(1).for_each(|s| s.0 += bom);
            Ok(ByteCurve {
                len: text.len(),
                steps,
            })
        }
        ResponseType::Json => strict_json_curve(parser, text, vars, stop),
        ResponseType::Text => Err(Error::Usage(
            "a `text` reply is always one object; sweep json, jsonl or delimited".into(),
        )),
    }
}

/// The exact curve for strict JSON: evaluate the real parser on the few intervals where a prefix
/// can be one complete value (see the module docs), zero elsewhere.
fn strict_json_curve(
    parser: &Parser,
    text: &str,
    vars: &Map<String, Value>,
    stop: &dyn Fn() -> bool,
) -> Result<ByteCurve> {
    let len = text.len();
    let count = |c: usize| {
        parser
            .parse(
                &text[..crate::parse::lines::floor_char_boundary(text, c)],
                vars,
            )
            .objects
            .len()
    };
    // Intervals [start, end) with a constant count.
    let mut intervals: Vec<(usize, usize, usize)> = Vec::new();
    let body_start = text.strip_prefix('\u{feff}').map(|_| 3).unwrap_or(0);
    let s = text[body_start..]
        .find(|c: char| !c.is_whitespace())
        .map(|i| body_start + i);
    // A closed fence block fixes the body from the closing fence on.
    let fence_close_end = text.find("```").and_then(|open| {
        let content = crate::parse::lines::next_line_start(text, open);
        text[content..].find("```").map(|close| content + close + 3)
    });
    let whole_prefix_limit = fence_close_end.unwrap_or(len + 1);
    let blank_run_end = |from: usize| {
        // Prefixes up to and including the blank run after `from` parse alike; the first prefix
        // that takes in the next non-blank character does not (a cut inside that character
        // still counts as the boundary before it).
        text[from..]
            .char_indices()
            .find(|(_, c)| !c.is_whitespace())
            .map(|(i, c)| from + i + c.len_utf8())
            .unwrap_or(len + 1)
            .min(whole_prefix_limit)
    };
    if let Some(s) = s {
        if matches!(text.as_bytes()[s], b'-' | b'0'..=b'9') {
            // A bare number: each prefix of its characters may itself be a number ("-3" of "-3.5").
            let run_end = s + text[s..]
                .bytes()
                .take_while(|b| b"-+.eE0123456789".contains(b))
                .count();
            for c in s + 1..=run_end.min(whole_prefix_limit.saturating_sub(1)) {
                if stop() {
                    return Err(Error::Cancelled);
                }
                intervals.push((c, c + 1, count(c)));
            }
            let hi = blank_run_end(run_end);
            if run_end + 1 < hi {
                intervals.push((run_end + 1, hi, count(run_end)));
            }
        } else {
            if let Some(e) = crate::parse::value_end(text, s, len) {
                let hi = blank_run_end(e);
                if e < hi {
                    intervals.push((e, hi, count(e)));
                }
            }
        }
    }
    if let Some(f) = fence_close_end {
        intervals.push((f, len + 1, count(f)));
    }
    intervals.sort_unstable();
    let mut steps = vec![(0, 0)];
    let push = |o: usize, n: usize, steps: &mut Vec<(usize, usize)>| match steps.last_mut() {
        Some(last) if last.0 == o => last.1 = n,
        Some(last) if last.1 == n => {}
        _ => steps.push((o, n)),
    };
    for (a, b, n) in intervals {
        if a > len {
            continue;
        }
        push(a, n, &mut steps);
        if b <= len {
            push(b, 0, &mut steps);
        }
    }
    Ok(ByteCurve { len, steps })
}

/// The unit cuts are counted in.
#[derive(Debug, Clone)]
pub enum Unit {
    Byte,
    Char,
    /// Token cuts: the byte offset after each token of the whole reply, from a named tokenizer.
    Token {
        name: String,
        boundaries: Vec<usize>,
    },
}

impl Unit {
    pub fn name(&self) -> String {
        match self {
            Unit::Byte => "byte".into(),
            Unit::Char => "char".into(),
            Unit::Token { name, .. } => format!("token:{name}"),
        }
    }
}

/// A sweep in one unit, with its metrics. `points` holds offset 0, every offset where the count
/// changes, and the final offset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "StoredSweep")]
pub struct Sweep {
    pub total: usize,
    pub points: Vec<(usize, usize)>,
    pub score: f64,
    pub unit: String,
    /// Number of cut units in the whole reply (the final offset).
    #[serde(skip)]
    pub length: usize,
}

/// A sweep as it is written (a stored experiment's result): its length is its last point's.
#[derive(Deserialize)]
struct StoredSweep {
    total: usize,
    points: Vec<(usize, usize)>,
    score: f64,
    unit: String,
}

impl From<StoredSweep> for Sweep {
    fn from(s: StoredSweep) -> Self {
        Sweep {
            length: s.points.last().map_or(0, |p| p.0),
            total: s.total,
            points: s.points,
            score: s.score,
            unit: s.unit,
        }
    }
}

impl Sweep {
    /// Build the sweep of `curve` in `unit` over `text`.
    pub fn new(curve: &ByteCurve, text: &str, unit: &Unit) -> Self {
        // Byte offset of every cut, in unit order: cut u ↦ byte offset.
        let (length, mut points) = match unit {
            Unit::Byte => {
                let pts: Vec<(usize, usize)> = curve.steps.clone();
                (text.len(), pts)
            }
            Unit::Char => {
                let mut pts = Vec::with_capacity(curve.steps.len());
                let mut chars = 0;
                let mut last_byte = 0;
                for &(o, n) in &curve.steps {
                    chars += text[last_byte..o].chars().count();
                    last_byte = o;
                    pts.push((chars, n));
                }
                (chars + text[last_byte..].chars().count(), pts)
            }
            Unit::Token { boundaries, .. } => {
                let mut pts = vec![(0, curve.at(0))];
                for (k, &b) in boundaries.iter().enumerate() {
                    let n = curve.at(crate::parse::lines::floor_char_boundary(text, b));
                    if pts.last().is_some_and(|p| p.1 != n) {
                        pts.push((k + 1, n));
                    }
                }
                (boundaries.len(), pts)
            }
        };
        // Keep only changes, then close with the final offset.
        points.dedup_by(|b, a| b.1 == a.1);
        let total = curve.at(curve.len);
        if points.last().is_none_or(|p| p.0 != length) {
            points.push((length, total));
        }
        let score = score(&points, length, total);
        Sweep {
            total,
            points,
            score,
            unit: unit.name(),
            length,
        }
    }

    /// Objects recovered by a cut after `u` units.
    pub fn at(&self, u: usize) -> usize {
        match self.points.binary_search_by(|(o, _)| o.cmp(&u)) {
            Ok(i) => self.points[i].1,
            Err(0) => 0,
            Err(i) => self.points[i - 1].1,
        }
    }

    /// Objects recovered at the median cut.
    pub fn median(&self) -> usize {
        self.at(self.length / 2)
    }

    /// The first cut offset at which an object is recovered, if any.
    pub fn first_object(&self) -> Option<usize> {
        self.points.iter().find(|p| p.1 > 0).map(|p| p.0)
    }

    /// Objects recovered when `fraction` (0–1) of the reply was emitted.
    pub fn at_fraction(&self, fraction: f64) -> usize {
        self.at((fraction.clamp(0.0, 1.0) * self.length as f64).floor() as usize)
    }
}

/// The JSONL-vs-JSON-array difference in one sentence, read off two sweeps of the same
/// extraction — a JSONL reply's and its JSON-array twin's — cut at one place in both: after
/// `fraction` (0–1) of the longer reply's units. What each format keeps there, and each
/// resilience score (the mean, over every cut, of the share of objects kept).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Headline {
    /// Where both replies are cut, as a share of the longer one.
    pub fraction: f64,
    /// The cut, in the sweeps' unit: after this many tokens (bytes, characters).
    pub cut: usize,
    /// The sweeps' unit (`token:o200k_base`, `byte`, `char`).
    pub unit: String,
    pub jsonl_kept: usize,
    pub jsonl_total: usize,
    pub array_kept: usize,
    pub array_total: usize,
    pub jsonl_score: f64,
    pub array_score: f64,
}

/// Where the headline cuts by default: half the reply, well before any array closes.
pub const HEADLINE_FRACTION: f64 = 0.5;

impl Headline {
    pub fn of(jsonl: &Sweep, array: &Sweep, fraction: f64) -> Headline {
        let longer = jsonl.length.max(array.length);
        let cut = (fraction.clamp(0.0, 1.0) * longer as f64).floor() as usize;
        Headline {
            fraction,
            cut,
            unit: jsonl.unit.clone(),
            jsonl_kept: jsonl.at(cut),
            jsonl_total: jsonl.total,
            array_kept: array.at(cut),
            array_total: array.total,
            jsonl_score: jsonl.score,
            array_score: array.score,
        }
    }

    /// "cut after 174 tokens (50% of the reply): JSONL keeps 4 of 10 objects, the JSON array 0
    /// of 10; resilience 0.44 vs 0.00".
    pub fn sentence(&self) -> String {
        let unit = match self.unit.split(':').next() {
            Some("token") => "tokens",
            Some("char") => "characters",
            _ => "bytes",
        };
        format!(
            "cut after {} {unit} ({:.0}% of the reply): JSONL keeps {} of {} objects, the JSON array {} of {}; resilience {:.2} vs {:.2}",
            self.cut,
            self.fraction * 100.0,
            self.jsonl_kept,
            self.jsonl_total,
            self.array_kept,
            self.array_total,
            self.jsonl_score,
            self.array_score
        )
    }
}

/// Mean over all cut points `0..=length` of objects recovered ÷ total.
fn score(points: &[(usize, usize)], length: usize, total: usize) -> f64 {
    if total == 0 {
        return 0.0;
    }
    let mut sum: u128 = 0;
    for (i, &(o, n)) in points.iter().enumerate() {
        let next = points.get(i + 1).map(|p| p.0).unwrap_or(length + 1);
        sum += (next.saturating_sub(o)) as u128 * n as u128;
    }
    sum as f64 / ((length as f64 + 1.0) * total as f64)
}

/// Tokenizers known by name (no network: their vocabularies are compiled in).
pub const TOKENIZERS: &[&str] = &["o200k_base", "cl100k_base"];

/// How many `o200k_base` tokens `text` is (the prompt editor's count of a rendered prompt).
pub fn token_count(text: &str) -> usize {
    tiktoken_rs::o200k_base_singleton()
        .encode_ordinary(text)
        .len()
}

/// The token-cut unit for `text` with the tokenizer `name`: the byte offset after each token.
pub fn token_unit(name: &str, text: &str) -> Result<Unit> {
    let bpe = match name {
        "o200k_base" => tiktoken_rs::o200k_base_singleton(),
        "cl100k_base" => tiktoken_rs::cl100k_base_singleton(),
        other => {
            return Err(Error::Usage(format!(
                "unknown tokenizer `{other}` (known: {}; GGUF tokenizers arrive with local models)",
                TOKENIZERS.join(", ")
            )));
        }
    };
    let tokens = bpe.encode_ordinary(text);
    let mut boundaries = Vec::with_capacity(tokens.len());
    let mut at = 0;
    for bytes in bpe._decode_native_and_split(tokens) {
        at += bytes.len();
        boundaries.push(at);
    }
    debug_assert_eq!(at, text.len(), "token bytes tile the text");
    Ok(Unit::Token {
        name: name.to_string(),
        boundaries,
    })
}

/// Sweep `text` with `parser` in `unit`, until done or `cancel` is set.
pub fn sweep(
    parser: &Parser,
    text: &str,
    vars: &Map<String, Value>,
    unit: &Unit,
    cancel: &CancelToken,
) -> Result<Sweep> {
    Ok(Sweep::new(
        &byte_curve(parser, text, vars, cancel)?,
        text,
        unit,
    ))
}
