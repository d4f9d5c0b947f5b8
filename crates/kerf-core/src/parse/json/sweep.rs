//! Salvage sweeps: the exact byte curve of salvage mode over every prefix of a reply, without
//! parsing every prefix again.

use super::*;

/// The exact byte curve of salvage mode over `text` (BOM already removed): `(offset, count)`
/// steps, the count holding from `offset` to the next step, where the count at `c` is
/// `salvage(&text[..c]).objects.len()`.
///
/// Why this is exact without re-parsing every prefix:
/// - The region a prefix's value is looked for in depends only on where the fences fall: before
///   the opening fence, the whole prefix; on the fence's own line, nothing; inside the block, the
///   block so far; from the closing fence on, the block — fixed, so the count is too.
/// - Within a region, each candidate opening's read goes one way for prefixes that end before a
///   settling point (cut off) and another from it on (complete at its end, or broken at the first
///   non-blank character from where it breaks). So the choice of value only changes where a
///   candidate appears or settles — at most two points per candidate (64 at most). At each such
///   point the real `choose` runs on the prefix.
/// - While an array is chosen, a prefix recovers exactly the elements of the longest prefix's walk
///   that end within it, plus — when it ends inside a bare scalar element — that shorter read if
///   it is a value and accepted (`[1` of `[12`; `[true` of `[truex`, broken whole). One walk gives
///   every element's end.
/// - While an object or a bare scalar is chosen, the count (0 or 1) can only change where one of
///   its top-level tokens starts or ends; the real parser runs at each of those points (the cost
///   grows with the number of top-level members, not with the reply's length).
///
/// `None` when `stop` said so (asked between the prefixes evaluated, and at the end).
pub(crate) fn salvage_curve(
    text: &str,
    parser: &Parser,
    vars: &Map<String, Value>,
    stop: &dyn Fn() -> bool,
) -> Option<Vec<(usize, usize)>> {
    let len = text.len();
    let lines = LineIndex::new(text);
    let mut scratch = ParseReport::default();
    let mut sweep = SalvageSweep {
        salvager: Salvager {
            text,
            lines: &lines,
            report: &mut scratch,
            parser,
            vars,
            scalar_reads: None,
            resyncs: Vec::new(),
        },
        steps: Vec::new(),
        stop,
    };
    match text.find("```") {
        None => sweep.region(0, 0, len + 1),
        Some(open) => {
            sweep.region(0, 0, open + 3);
            // On the opening fence's line the block has no content yet: one value for all.
            let content = next_line_start(text, open);
            sweep.eval_at(open + 3);
            match text[content..].find("```") {
                Some(i) => {
                    let close = content + i + 3;
                    sweep.region(content, content, close);
                    sweep.eval_at(close);
                }
                None => sweep.region(content, content, len + 1),
            }
        }
    }
    (!stop()).then_some(sweep.steps)
}

struct SalvageSweep<'a, 'r> {
    salvager: Salvager<'a, 'r>,
    steps: Vec<(usize, usize)>,
    /// The sweep's stop check (a cancel token's `is_cancelled`).
    stop: &'a dyn Fn() -> bool,
}

impl SalvageSweep<'_, '_> {
    fn push(&mut self, offset: usize, count: usize) {
        match self.steps.last_mut() {
            Some(last) if last.0 == offset => last.1 = count,
            Some(last) if last.1 == count => {}
            _ => self.steps.push((offset, count)),
        }
    }

    /// The real parser on the prefix of `c` bytes.
    fn eval_at(&mut self, c: usize) {
        let text = self.salvager.text;
        if c > text.len() {
            return;
        }
        let c = floor_char_boundary(text, c);
        let n = salvage(&text[..c], self.salvager.parser, self.salvager.vars)
            .objects
            .len();
        self.push(c, n);
    }

    /// Prefixes `c` in `[lo, hi)` whose value is looked for in `[start, c)`.
    fn region(&mut self, start: usize, lo: usize, hi: usize) {
        let text = self.salvager.text;
        let hi = hi.min(text.len() + 1);
        if lo >= hi {
            return;
        }
        let longest = hi - 1;
        let mut cuts = vec![lo];
        self.salvager.choose(start, longest, |at, read| {
            cuts.push(at + 1);
            cuts.extend(settle_points(text, read, longest));
        });
        let mut cuts: Vec<usize> = cuts
            .into_iter()
            .filter(|&c| c >= lo && c < hi)
            .map(|c| floor_char_boundary(text, c).max(lo))
            .collect();
        cuts.sort_unstable();
        cuts.dedup();
        let mut walked: Option<ArrayWalk> = None;
        let mut object: Option<ObjectWalk> = None;
        for (k, &b) in cuts.iter().enumerate() {
            if (self.stop)() {
                return;
            }
            let b2 = cuts.get(k + 1).copied().unwrap_or(hi);
            match self.salvager.choose(start, b, |_, _| {}) {
                Choice::At(a) if text.as_bytes()[a] == b'[' => {
                    if walked.as_ref().is_none_or(|w| w.at != a) {
                        walked = Some(self.walk(a, longest));
                    }
                    // Moved out and back, not cloned: one walk serves every interval.
                    if let Some(w) = walked.take() {
                        self.array_steps(&w.ends, &w.reads, b, b2);
                        walked = Some(w);
                    }
                }
                Choice::At(a) => {
                    if object.as_ref().is_none_or(|w| w.at != a) {
                        object = Some(self.walk_object(a, longest));
                    }
                    if let Some(w) = object.take() {
                        self.object_at(&w, b);
                        for c in object_probes(&self.salvager, a, b2) {
                            if (self.stop)() {
                                break;
                            }
                            if c > b && c < b2 {
                                self.object_at(&w, c);
                            }
                        }
                        object = Some(w);
                    }
                }
                Choice::Bare => {
                    self.eval_at(b);
                    for c in bare_probes(text, start, longest) {
                        if (self.stop)() {
                            break;
                        }
                        if c > b && c < b2 {
                            self.eval_at(c);
                        }
                    }
                }
            }
        }
    }

    /// Walk the array at `a` over `[a, end)`: the ends of its accepted elements, and where its
    /// bare scalar elements were read.
    fn walk(&mut self, a: usize, end: usize) -> ArrayWalk {
        self.salvager.scalar_reads = Some(Vec::new());
        self.salvager.resyncs.clear();
        let items = self.salvager.parser.items.as_ref();
        // Only where the elements end is kept, not the elements.
        let mut ends = Vec::new();
        self.salvager
            .walk_array(a, end, items, Sink::Ends(&mut ends));
        let reads = self.salvager.scalar_reads.take().unwrap_or_default();
        // An element found after a resync exists for a prefix only once the element that broke
        // reads as broken: it counts from then (or from its own end, if later).
        let resyncs = std::mem::take(&mut self.salvager.resyncs);
        for &(first, from) in &resyncs {
            for e in ends.iter_mut().skip(first) {
                *e = (*e).max(from);
            }
        }
        self.salvager.report.dropped.clear();
        ArrayWalk { at: a, ends, reads }
    }

    /// Walk the object at `a` over `[a, end)` once, noting at each step's start what the
    /// recovered object holds so far (see [`ObjectWalk`]).
    fn walk_object(&mut self, a: usize, end: usize) -> ObjectWalk {
        let parser = self.salvager.parser;
        let root = parser.schema.as_ref().map(|s| s.raw().clone());
        let mut watched: Vec<(String, usize)> = root
            .as_ref()
            .and_then(|r| r.get("required"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .chain(parser.post.ensure.iter().map(String::as_str))
            .map(|k| (k.to_string(), usize::MAX))
            .collect();
        watched.sort();
        watched.dedup();
        self.salvager.report.dropped.clear();
        let mut out = Map::new();
        let mut marks = vec![a + 1];
        let (mut first_key, mut first_drop) = (usize::MAX, usize::MAX);
        while let Some(&pos) = marks.last() {
            let keys = out.len();
            let Step::Next(next) = self.salvager.object_step(pos, end, root.as_ref(), &mut out)
            else {
                break;
            };
            marks.push(next);
            let m = marks.len() - 1;
            if out.len() > keys {
                first_key = first_key.min(m);
                // A step adds at most one key, at the end (insertion order is kept).
                if let Some((k, _)) = out.iter().next_back()
                    && let Ok(w) = watched.binary_search_by(|(name, _)| name.as_str().cmp(k))
                {
                    watched[w].1 = m;
                }
            }
            if first_drop == usize::MAX && !self.salvager.report.dropped.is_empty() {
                first_drop = m;
            }
        }
        self.salvager.report.dropped.clear();
        ObjectWalk {
            at: a,
            root,
            marks,
            first_key,
            first_drop,
            watched,
        }
    }

    /// The count (0 or 1) for the prefix of `c` bytes while the object of `w` is what salvage
    /// takes: the walk's state at the last step that starts at or before `c`, then only the
    /// step `c` cuts through, read for real. The work per prefix is that one member, not the
    /// whole object, so a sweep of an object is linear in its length.
    fn object_at(&mut self, w: &ObjectWalk, c: usize) {
        let text = self.salvager.text;
        if c > text.len() {
            return;
        }
        let c = floor_char_boundary(text, c);
        let Some(i) = w.marks.partition_point(|&m| m <= c).checked_sub(1) else {
            // Not past the `{` yet: not this object's prefix (the choice says otherwise).
            return self.eval_at(c);
        };
        self.salvager.report.dropped.clear();
        let mut tail = Map::new();
        let mut pos = w.marks[i];
        let ended = loop {
            match self
                .salvager
                .object_step(pos, c, w.root.as_ref(), &mut tail)
            {
                Step::Next(next) => pos = next,
                Step::Closed => break Some(true),
                Step::Ended => break Some(false),
                Step::Stopped => break None,
            }
        };
        let present = |k: &str| {
            tail.contains_key(k)
                || w.watched
                    .binary_search_by(|(name, _)| name.as_str().cmp(k))
                    .is_ok_and(|at| w.watched[at].1 <= i)
        };
        if let Some(complete) = ended {
            self.salvager
                .object_end(complete, 0, w.root.as_ref(), present);
        }
        let empty = w.first_key > i && tail.is_empty();
        let dropped = w.first_drop <= i || !self.salvager.report.dropped.is_empty();
        self.salvager.report.dropped.clear();
        let n = if empty && dropped {
            0
        } else {
            // `finish` reads only the `ensure` keys (after passthrough and drop): an object of
            // just those present decides as the whole object would.
            let post = &self.salvager.parser.post;
            let probe: Map<String, Value> = post
                .ensure
                .iter()
                .filter(|k| present(k))
                .map(|k| (k.clone(), Value::Null))
                .collect();
            let mut report = ParseReport::default();
            Acceptor {
                schema: None,
                post,
                vars: self.salvager.vars,
            }
            .finish(&mut report, 0, (0, c), Value::Object(probe));
            report.objects.len()
        };
        self.push(c, n);
    }

    /// Steps for prefixes in `[b, b2)` while the array's walk is what they recover.
    fn array_steps(
        &mut self,
        ends: &[usize],
        reads: &[(usize, usize, usize)],
        b: usize,
        b2: usize,
    ) {
        let text = self.salvager.text;
        let mut events = vec![b];
        events.extend(ends.iter().copied().filter(|&e| e > b && e < b2));
        for &(p, last, reached) in reads {
            if last < b || p + 1 >= b2 {
                continue;
            }
            events.extend((p + 1).max(b).max(reached)..=(last + 1).min(b2 - 1));
        }
        // A change inside a character shows at the next character boundary.
        for c in events.iter_mut() {
            while !text.is_char_boundary(*c) {
                *c += 1;
            }
        }
        events.retain(|&c| c < b2);
        events.sort_unstable();
        events.dedup();
        for (n, c) in events.into_iter().enumerate() {
            if n % 1024 == 0 && (self.stop)() {
                return;
            }
            let complete = ends.partition_point(|&e| e <= c);
            let partial = match reads.binary_search_by(|r| r.0.cmp(&c)) {
                Ok(_) | Err(0) => 0,
                Err(i) => {
                    let (p, last, reached) = reads[i - 1];
                    if c <= last && c >= reached {
                        self.scalar_at(p, c)
                    } else {
                        0
                    }
                }
            };
            self.push(c, complete + partial);
        }
    }

    /// Whether the bare scalar element at `p`, cut at `c`, is read and accepted as an element.
    fn scalar_at(&mut self, p: usize, c: usize) -> usize {
        let Read::Value(v, _) = self.salvager.read(p, c) else {
            return 0;
        };
        let mut report = ParseReport::default();
        Acceptor {
            schema: self.salvager.parser.items.as_ref(),
            post: &self.salvager.parser.post,
            vars: self.salvager.vars,
        }
        .accept(&mut report, 0, (0, c), v);
        report.objects.len()
    }
}
