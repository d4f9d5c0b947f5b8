//! Scoring hand-worked cases: every figure below was worked out on paper from the definitions
//! (tp = matched pairs, fp = extracted − tp, fn = expected − tp; precision null when nothing was
//! extracted, recall null when nothing was expected, F1 null only when both are empty).

use kerf_core::eval::{Grounding, MatchSpec, Matcher, ScoreReport, score};
use kerf_core::{CompiledSchema, Prompt};
use serde_json::{Value, json};

/// The shipped prompt without its own `match`, so the cases below work from the defaults (or
/// the spec each one gives).
fn agent_kg() -> Prompt {
    let mut p =
        Prompt::load(&crate::support::repo().join("prompts/agent-kg-extract.json")).unwrap();
    p.file.match_spec = None;
    p
}

fn def(entity: &str, definition: &str) -> Value {
    json!({"type": "definition", "entity": entity, "definition": definition})
}

fn rel(s: &str, p: &str, o: &str) -> Value {
    json!({"type": "relationship", "subject": s, "predicate": p, "object": o, "object-entity": true})
}

fn with_spec(spec: Value) -> Matcher {
    let p = agent_kg();
    let spec: MatchSpec = serde_json::from_value(spec).unwrap();
    Matcher::new(&spec, p.parser.item_schema())
}

#[test]
fn defaults_come_from_the_schema_and_leave_free_text_out() {
    let m = agent_kg().matcher();
    assert_eq!(m.discriminator.as_deref(), Some("type"));
    assert_eq!(m.rule("definition").keys, ["entity"]);
    assert_eq!(
        m.rule("relationship").keys,
        ["subject", "predicate", "object", "object-entity"]
    );
    // The predicate names a relation: not looked up in the input; a boolean is never.
    assert_eq!(m.rule("relationship").ground, ["subject", "object"]);
    let explained = m.explain();
    assert!(
        explained.contains("type `definition`: identity `entity`"),
        "{explained}"
    );
    assert!(
        explained.contains("`definition` left out: free text (its name)"),
        "{explained}"
    );
}

#[test]
fn normalisation_matches_case_punctuation_quotes_and_articles() {
    let m = agent_kg().matcher();
    let expected = [
        def("Northern Lighthouse Board", "x"),
        rel("Ada Lovelace", "wrote", "notes"),
    ];
    let actual = [
        def("the northern-lighthouse board.", "y"),
        rel("\"ADA LOVELACE\"", "Wrote", "Notes"),
    ];
    let s = score(&m, &expected, &actual);
    assert_eq!((s.counts.tp, s.counts.fp, s.counts.fn_), (2, 0, 0));
    assert_eq!(s.counts.f1(), Some(1.0));
    assert!(s.matched.iter().all(|p| p.similarity == 1.0));
    // Without normalisation none of them matches.
    let raw = with_spec(json!({"normalize": false}));
    let s = score(&raw, &expected, &actual);
    assert_eq!((s.counts.tp, s.counts.fp, s.counts.fn_), (0, 2, 2));
    assert_eq!(s.counts.precision(), Some(0.0));
    assert_eq!(s.counts.f1(), Some(0.0));
}

#[test]
fn aliases_let_another_name_match() {
    let m = agent_kg().matcher();
    let expected = [
        json!({"type": "definition", "entity": "Ada Lovelace", "definition": "x",
        "aliases": {"entity": ["Augusta Ada King", "Countess of Lovelace"]}}),
    ];
    let s = score(&m, &expected, &[def("augusta ada king", "x")]);
    assert_eq!(s.counts.tp, 1);
    assert_eq!(
        s.matched[0].similarity, 1.0,
        "an alias is an exact match, not a partial one"
    );
    let s = score(&m, &expected, &[def("Ada King", "x")]);
    assert_eq!((s.counts.tp, s.counts.fp, s.counts.fn_), (0, 1, 1));
}

#[test]
fn fuzzy_pairs_count_as_matched_and_are_listed_as_partial() {
    // "chloroplast" vs "chloroplasts": 1 edit in 12 characters, similarity 11/12 = 0.9167.
    let m = with_spec(json!({"fuzzy": 0.9}));
    let expected = [def("chloroplasts", "organelles"), def("stroma", "fluid")];
    let actual = [
        def("chloroplast", "organelles"),
        def("thylakoid", "membranes"),
    ];
    let s = score(&m, &expected, &actual);
    assert_eq!((s.counts.tp, s.counts.fp, s.counts.fn_), (1, 1, 1));
    assert!((s.matched[0].similarity - 11.0 / 12.0).abs() < 1e-12);
    let report = ScoreReport::new(&s, &expected, &actual, None);
    assert_eq!(report.partial.len(), 1);
    assert_eq!(report.partial[0].actual["entity"], "chloroplast");
    // At the default threshold (exact after normalisation) it is a miss and a spurious record.
    let s = score(&agent_kg().matcher(), &expected, &actual);
    assert_eq!((s.counts.tp, s.counts.fp, s.counts.fn_), (0, 2, 2));
}

#[test]
fn matching_is_one_to_one_and_a_duplicate_is_spurious() {
    let m = agent_kg().matcher();
    let expected = [def("stroma", "a")];
    let actual = [def("Stroma", "a"), def("stroma", "b")];
    let s = score(&m, &expected, &actual);
    assert_eq!((s.counts.tp, s.counts.fp, s.counts.fn_), (1, 1, 0));
    // precision 1/2, recall 1/1, F1 2/(2+1+0) = 2/3
    assert_eq!(s.counts.precision(), Some(0.5));
    assert_eq!(s.counts.recall(), Some(1.0));
    assert_eq!(s.counts.f1(), Some(2.0 / 3.0));
    assert_eq!(s.spurious.len(), 1);
}

#[test]
fn with_repeats_once_a_repeated_record_is_not_scored_again() {
    let m = with_spec(json!({"repeats": "once"}));
    // "Stroma" twice (the second differently written and defined: the same identity once
    // normalised), a relation twice, and a record the row does not expect, twice.
    let expected = [def("stroma", "a"), rel("stroma", "holds", "thylakoids")];
    let actual = [
        def("Stroma", "a"),
        rel("stroma", "holds", "thylakoids"),
        def("lumen", "c"),
        def("the stroma", "b"),
        rel("Stroma", "holds", "thylakoids"),
        def("lumen", "d"),
    ];
    let s = score(&m, &expected, &actual);
    // tp 2; the lumen once spurious; the three repeats neither.
    assert_eq!((s.counts.tp, s.counts.fp, s.counts.fn_), (2, 1, 0));
    assert_eq!(s.repeats, [(3, 0), (4, 1), (5, 2)]);
    assert_eq!(s.spurious, [2]);
    // The default counts each repeat as spurious.
    let s = score(&agent_kg().matcher(), &expected, &actual);
    assert_eq!((s.counts.tp, s.counts.fp, s.counts.fn_), (2, 4, 0));
    assert!(s.repeats.is_empty());
    // A record the row expects twice is still found twice only by two extractions.
    let twice = [def("stroma", "a"), def("stroma", "a")];
    let s = score(&m, &twice, &[def("stroma", "a"), def("stroma", "a")]);
    assert_eq!((s.counts.tp, s.counts.fp, s.counts.fn_), (1, 0, 1));
}

#[test]
fn the_assignment_is_optimal_not_greedy() {
    // E0 = "light", E1 = "lights"; A0 = "lights" matches E1 exactly and E0 fuzzily (5/6 = 0.83),
    // A1 = "light" matches E0 exactly. Greedy in order would pair E0–A0 at best and leave one
    // unmatched in some orders; the optimum pairs both exactly.
    let m = with_spec(json!({"fuzzy": 0.8}));
    let expected = [def("light", "a"), def("lights", "b")];
    let actual = [def("lights", "b"), def("light", "a")];
    let s = score(&m, &expected, &actual);
    assert_eq!(s.counts.tp, 2);
    assert!(s.matched.iter().all(|p| p.similarity == 1.0));
    assert_eq!((s.matched[0].expected, s.matched[0].actual), (0, 1));
    // Every pairing of E0 "abcd", E1 "abcf" with A0 "abce", A1 "abcd" reaches 0.7 (3 of 4
    // letters): two pairs either way, and the closer total is E0–A1 (1.0) + E1–A0 (0.75).
    let m = with_spec(json!({"fuzzy": 0.7}));
    let expected = [def("abcd", "a"), def("abcf", "b")];
    let actual = [def("abce", "x"), def("abcd", "y")];
    let s = score(&m, &expected, &actual);
    let pairs: Vec<_> = s
        .matched
        .iter()
        .map(|p| (p.expected, p.actual, p.similarity))
        .collect();
    assert_eq!(pairs, [(0, 1, 1.0), (1, 0, 0.75)]);
}

/// Exact pairs come first: an extracted record that is exactly an expected one is credited to
/// it, even where trading it for two near misses would pair one more. E0 "abcdef" is exactly
/// A0 and near A1 "abcdefz" (1 edit in 7: 0.857); E1 "abcdeg" is near A0 (1 in 6: 0.833) but
/// not A1 (2 in 7: 0.714, under 0.8). The most pairs would be E0–A1 and E1–A0, both fuzzy; the
/// exact pair E0–A0 stands instead.
#[test]
fn an_exact_pair_is_never_traded_for_two_near_misses() {
    let m = with_spec(json!({"fuzzy": 0.8}));
    let expected = [def("abcdef", "a"), def("abcdeg", "b")];
    let actual = [def("abcdef", "a"), def("abcdefz", "b")];
    // Each near miss on its own is a pair.
    let alone = |e: usize, a: usize| score(&m, &expected[e..=e], &actual[a..=a]).counts.tp;
    assert_eq!((alone(0, 1), alone(1, 0), alone(1, 1)), (1, 1, 0));
    let s = score(&m, &expected, &actual);
    let pairs: Vec<_> = s
        .matched
        .iter()
        .map(|p| (p.expected, p.actual, p.similarity))
        .collect();
    assert_eq!(pairs, [(0, 0, 1.0)]);
    assert_eq!((s.counts.tp, s.counts.fp, s.counts.fn_), (1, 1, 1));
}

/// 2,000 distinct names found exactly on both sides, at `fuzzy: 0` (every pair a candidate) and
/// as numbered records at 0.8 (each near its neighbours): no fuzzy comparison is made at all,
/// since exact pairs fill every class (they once cost 4 million comparisons and a flow over
/// them: 368 s, and 44–83 s). Counted, not timed. Then a few changed names: only those are
/// compared, with the extracted records no exact pair needs.
#[test]
fn names_found_exactly_cost_no_fuzzy_comparison() {
    use kerf_core::eval::score::compared;
    let names: Vec<String> = (0..2000).map(|i| format!("record number {i}")).collect();
    let records: Vec<Value> = names.iter().map(|n| def(n, "x")).collect();
    for fuzzy in [0.0, 0.8] {
        let m = with_spec(json!({"fuzzy": fuzzy}));
        compared::reset();
        let s = score(&m, &records, &records);
        assert_eq!(s.counts.tp, 2000, "fuzzy {fuzzy}");
        assert!(
            s.matched
                .iter()
                .all(|p| p.similarity == 1.0 && p.expected == p.actual)
        );
        assert_eq!(compared::count(), 0, "fuzzy {fuzzy}");
    }
    // Ten extracted names changed by a letter: ten wanted records are left for fuzzy pairs,
    // compared with the ten extracted records left, not with all 2,000.
    let mut actual = records.clone();
    for i in (0..2000).step_by(200) {
        actual[i] = def(&format!("record numbex {i}"), "x");
    }
    let m = with_spec(json!({"fuzzy": 0.8}));
    compared::reset();
    let s = score(&m, &records, &actual);
    assert_eq!(s.counts.tp, 2000);
    assert_eq!(s.matched.iter().filter(|p| p.similarity < 1.0).count(), 10);
    assert!(compared::count() <= 10 * 10, "{}", compared::count());
}

#[test]
fn empty_sets_follow_the_null_rules() {
    let m = agent_kg().matcher();
    let s = score(&m, &[], &[]);
    assert_eq!(
        (s.counts.precision(), s.counts.recall(), s.counts.f1()),
        (None, None, None)
    );
    // Nothing extracted: precision null, recall 0, F1 0.
    let s = score(&m, &[def("a", "b")], &[]);
    assert_eq!(
        (s.counts.precision(), s.counts.recall(), s.counts.f1()),
        (None, Some(0.0), Some(0.0))
    );
    // Nothing expected: recall null, precision 0, F1 0.
    let s = score(&m, &[], &[def("a", "b")]);
    assert_eq!(
        (s.counts.precision(), s.counts.recall(), s.counts.f1()),
        (Some(0.0), None, Some(0.0))
    );
    let json = serde_json::to_value(s.counts.scores()).unwrap();
    assert_eq!(
        json,
        json!({"tp": 0, "fp": 1, "fn": 0, "precision": 0.0, "recall": null, "f1": 0.0})
    );
}

#[test]
fn by_type_keeps_each_record_type_apart() {
    let m = agent_kg().matcher();
    // Same text in a definition and a relationship's subject never pair across types.
    let expected = [def("stroma", "a"), rel("stroma", "part of", "chloroplast")];
    let actual = [def("stroma", "a"), rel("stroma", "inside", "chloroplast")];
    let s = score(&m, &expected, &actual);
    assert_eq!(s.by_type["definition"].tp, 1);
    let r = s.by_type["relationship"];
    assert_eq!((r.tp, r.fp, r.fn_), (0, 1, 1));
    assert_eq!((s.counts.tp, s.counts.fp, s.counts.fn_), (1, 1, 1));
    // F1 overall = 2/(2+1+1) = 0.5
    assert_eq!(s.counts.f1(), Some(0.5));
}

#[test]
fn declared_keys_replace_the_defaults_and_other_fields_are_agreement() {
    let m = with_spec(json!({"keys": {"relationship": ["subject", "object"]}}));
    let expected = [rel("Ada", "wrote", "Notes")];
    let actual = [rel("ada", "authored", "notes")];
    let s = score(&m, &expected, &actual);
    assert_eq!(s.counts.tp, 1);
    // The predicate is now agreement, not identity: "wrote" vs "authored" share no bigram.
    let a = s.agreement["relationship:predicate"];
    assert_eq!((a.pairs, a.mean()), (1, Some(0.0)));
    assert_eq!(s.agreement["relationship:object-entity"].mean(), Some(1.0));
}

#[test]
fn a_prompt_without_a_discriminator_scores_under_star() {
    let schema = json!({"type": "object", "properties": {"name": {"type": "string"},
        "summary": {"type": "string"}, "confidence": {"type": "number"}},
        "required": ["name", "summary", "confidence"]});
    let compiled = CompiledSchema::compile(&schema, "test").unwrap();
    let m = Matcher::new(&MatchSpec::default(), Some(&compiled));
    assert_eq!(m.discriminator, None);
    assert_eq!(m.rule("*").keys, ["name"]);
    let s = score(
        &m,
        &[json!({"name": "A", "summary": "s", "confidence": 0.9})],
        &[json!({"name": "a", "summary": "t", "confidence": 0.2})],
    );
    assert_eq!(s.by_type["*"].tp, 1);
}

#[test]
fn grounding_finds_names_in_the_input_and_flags_the_rest() {
    let m = agent_kg().matcher();
    let input = "Chloroplasts hold chlorophyll. The Calvin cycle runs in the stroma.";
    let g = Grounding::new(&m, input);
    let actual = [
        def("chlorophyll", "x"),
        def("Calvin Cycle", "x"),
        def("chloroplast", "x"), // one letter short of a word in the text: fuzzy-grounded
        def("mitochondria", "x"), // not in the text
        rel("stroma", "hosts", "Calvin cycle"),
        rel("stroma", "hosts", "ATP synthase"),
    ];
    assert_eq!(g.ungrounded(&m, &actual), [3, 5]);
    // Whole words only: "roma" is inside "stroma" but is not a word of the text.
    assert!(!g.contains("roma"));
}

#[test]
fn micro_sums_and_macro_averages_skipping_null_rows() {
    use kerf_core::eval::{Tally, score_all};
    let m = agent_kg().matcher();
    // Row 1: 1 of 2 found, nothing spurious: F1 2/(2+0+1) = 2/3.
    // Row 2: both sets empty: F1 null, skipped by the macro mean.
    // Row 3: nothing expected, one extracted: F1 0.
    let e1 = [def("a", "x"), def("b", "x")];
    let a1 = [def("a", "x")];
    let a3 = [def("c", "x")];
    let docs: Vec<(&[Value], &[Value])> = vec![(&e1, &a1), (&[], &[]), (&[], &a3)];
    let mut tally = Tally::default();
    for s in score_all(&m, &docs) {
        tally.add(&s);
    }
    let t = tally.totals();
    assert_eq!((t.micro.tp, t.micro.fp, t.micro.fn_), (1, 1, 1));
    assert_eq!(t.micro.f1, Some(0.5));
    assert_eq!(t.macro_f1, Some((2.0 / 3.0 + 0.0) / 2.0));
    assert_eq!(t.documents, 3);
    assert_eq!(t.by_type["definition"].macro_f1, Some(1.0 / 3.0));
    // The relationship type was in no row: its counts are zero and every figure null.
    assert_eq!(t.by_type["relationship"].micro.f1, None);
    assert_eq!(t.by_type["relationship"].macro_f1, None);
}

// Issue 36, item 9: hostile replies. These pin what the fast paths answer on the cases that
// took minutes and gigabytes before (the speed itself is the `score` bench's to measure, not a
// test's): the same figures the record-by-record definitions give.

/// `n` copies of a record on both sides pair one to one, in order, and the copies beyond the
/// other side's count are missed or spurious.
#[test]
fn identical_records_on_both_sides_pair_one_to_one_in_order() {
    let m = agent_kg().matcher();
    let expected = vec![def("Stroma", "fluid"); 3_002];
    let actual = vec![def("the stroma", "a fluid"); 3_000];
    let s = score(&m, &expected, &actual);
    assert_eq!((s.counts.tp, s.counts.fp, s.counts.fn_), (3_000, 0, 2));
    assert!(
        s.matched
            .iter()
            .enumerate()
            .all(|(i, p)| (p.expected, p.actual, p.similarity) == (i, i, 1.0))
    );
    assert_eq!(s.missed, [3_000, 3_001]);
    // Agreement over every pair: "fluid" / "a fluid" (Sørensen–Dice of bigrams, spaces out).
    let a = s.agreement["definition:definition"];
    assert_eq!(a.pairs, 3_000);
}

/// Repeats among other candidates: the assignment stays optimal over classes. 400 "stroma"
/// and one "stromas" expected; 400 "stroma" and one "stroma x" extracted, at `fuzzy` 0.7:
/// "stromas" can only pair with a "stroma" (6/7) or "stroma x" (6/8), and taking a "stroma" for
/// it would leave an expected "stroma" to "stroma x" (6/8) — the best total pairs every
/// "stroma" exactly and "stromas" with "stroma x".
#[test]
fn repeats_among_fuzzy_candidates_keep_the_optimal_assignment() {
    let m = with_spec(json!({"fuzzy": 0.7}));
    let mut expected = vec![def("stroma", "a"); 400];
    expected.push(def("stromas", "b"));
    let mut actual = vec![def("stroma", "a"); 400];
    actual.push(def("stroma x", "b"));
    let s = score(&m, &expected, &actual);
    assert_eq!((s.counts.tp, s.counts.fp, s.counts.fn_), (401, 0, 0));
    let partial: Vec<_> = s.matched.iter().filter(|p| p.is_partial()).collect();
    assert_eq!(partial.len(), 1);
    assert_eq!((partial[0].expected, partial[0].actual), (400, 400));
    assert!((partial[0].similarity - 0.75).abs() < 1e-12);
}

/// Draws from a fixed seed (xorshift64): the hostile inputs are the same on every run.
struct Draws(u64);

impl Draws {
    /// A number in `0..n` (n > 0).
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// A made-up word over a syllable alphabet.
fn made_up_word(x: &mut Draws) -> String {
    const SYLLABLES: &[&str] = &[
        "ka", "lo", "mi", "ren", "tor", "vas", "el", "qui", "dra", "sen", "po", "lu", "bar",
    ];
    (0..2 + x.below(3))
        .map(|_| SYLLABLES[x.below(SYLLABLES.len())])
        .collect()
}

#[test]
fn an_invented_long_name_is_ungrounded_and_a_near_copy_is_grounded() {
    let m = agent_kg().matcher();
    let mut x = Draws(0x5eed_0001);
    let vocabulary: Vec<String> = (0..300).map(|_| made_up_word(&mut x)).collect();
    let pick = |x: &mut Draws| vocabulary[x.below(vocabulary.len())].clone();
    let mut document = String::new();
    while document.len() < 12_000 {
        let sentence: Vec<String> = (0..9).map(|_| pick(&mut x)).collect();
        document.push_str(&sentence.join(" "));
        document.push_str(". ");
    }
    let mut invented = String::new();
    while invented.len() < 3_600 {
        invented.push_str(&pick(&mut x));
        invented.push(' ');
    }
    // 3.6 KB of the text itself from word 200 on, normalised, with one letter in 60 changed.
    let words: Vec<&str> = document
        .split([' ', '.'])
        .filter(|w| !w.is_empty())
        .collect();
    let mut copied = String::new();
    for w in &words[200..] {
        if copied.len() >= 3_600 {
            break;
        }
        copied.push_str(w);
        copied.push(' ');
    }
    let near: String = copied
        .trim_end()
        .chars()
        .enumerate()
        .map(|(i, c)| if i % 60 == 59 { 'q' } else { c })
        .collect();
    let g = Grounding::new(&m, &document);
    let actual = [def(&invented, "made up"), def(&near, "copied")];
    assert_eq!(g.ungrounded(&m, &actual), [0]);
    // Whole words, exactly: a run of the text is grounded without any distance.
    assert!(g.contains(words[10..400].join(" ").as_str()));
}

/// 2,000 distinct random names expected; 2,000 extracted, every other one a gold name with one
/// letter changed (similarity 15/16 ≥ 0.85) and the rest new random names (random 16-letter
/// names are about 14 edits apart): exactly the changed ones pair, each with its own.
#[test]
fn many_distinct_names_pair_only_with_their_own_misspelling() {
    let m = with_spec(json!({"fuzzy": 0.85}));
    let mut x = Draws(0x5eed_0003);
    let mut random_name = || -> String {
        (0..16)
            .map(|_| char::from(b'a' + x.below(26) as u8))
            .collect()
    };
    let gold: Vec<String> = (0..2_000).map(|_| random_name()).collect();
    let mut extracted = Vec::new();
    for (i, g) in gold.iter().enumerate() {
        if i % 2 == 0 {
            let mut c: Vec<char> = g.chars().collect();
            c[i % 16] = if c[i % 16] == 'z' { 'y' } else { 'z' };
            extracted.push(c.into_iter().collect::<String>());
        } else {
            extracted.push(random_name());
        }
    }
    let expected: Vec<Value> = gold.iter().map(|n| def(n, "x")).collect();
    let actual: Vec<Value> = extracted.iter().map(|n| def(n, "x")).collect();
    let s = score(&m, &expected, &actual);
    assert_eq!(
        (s.counts.tp, s.counts.fp, s.counts.fn_),
        (1_000, 1_000, 1_000)
    );
    assert!(
        s.matched
            .iter()
            .all(|p| p.expected == p.actual && p.expected % 2 == 0 && p.similarity == 15.0 / 16.0)
    );
}
