//! What changed between two runs' objects: added, removed, changed (the same object with some
//! fields different) and unchanged — the object-set half of `kerf history diff`.

use serde::Serialize;
use serde_json::{Map, Value};

/// Two object lists compared as sets (duplicates count).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ObjectDiff {
    /// Only in the second list.
    pub added: Vec<Value>,
    /// Only in the first list.
    pub removed: Vec<Value>,
    /// Pairs judged to be the same object with different fields: `(first, second)`.
    pub changed: Vec<(Value, Value)>,
    /// Objects in both, equal.
    pub unchanged: usize,
    /// Pairing stopped at [`MAX_PAIRING_WORK`]: objects left unpaired are counted as removed
    /// and added, though some may be changed versions of each other.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub bounded: bool,
}

/// The most candidate comparisons pairing may make (exact matches cost nothing against it).
/// Two runs of 20,000 objects took minutes when every leftover was compared with every other;
/// with the index below real runs stay far under this, and a pathological pair (thousands of
/// objects sharing one field value) stops here, saying so, instead of running on.
pub const MAX_PAIRING_WORK: usize = 5_000_000;

/// Compare `a` (before) with `b` (after). Equal objects match first (by a canonical text of
/// each, so in linear time); of the rest, an object in `a` pairs with the object in `b` of the
/// same `type` (when there is one) sharing the most equal fields, as long as at least half of
/// their fields agree — so a definition whose text was reworded is "changed", while two
/// unrelated objects are one removed and one added. Candidates come from an index of
/// (type, field, value): only objects sharing a field value are ever compared.
pub fn objects(a: &[Value], b: &[Value]) -> ObjectDiff {
    use std::collections::HashMap;
    let mut rest_b: Vec<Option<&Value>> = b.iter().map(Some).collect();
    let mut by_text: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, y) in b.iter().enumerate().rev() {
        by_text.entry(canonical(y)).or_default().push(i);
    }
    let mut rest_a: Vec<&Value> = Vec::new();
    let mut unchanged = 0;
    for x in a {
        // Popped from the end of a list built in reverse: the first equal object in `b` first.
        match by_text.get_mut(&canonical(x)).and_then(Vec::pop) {
            Some(i) => {
                rest_b[i] = None;
                unchanged += 1;
            }
            None => rest_a.push(x),
        }
    }
    let mut diff = ObjectDiff {
        unchanged,
        ..ObjectDiff::default()
    };
    // (type, field, value) → the unmatched objects of `b` with that field value, in order.
    let mut index: HashMap<(String, String, String), Vec<usize>> = HashMap::new();
    for (i, y) in rest_b.iter().enumerate() {
        if let Some(Value::Object(m)) = y {
            let t = canonical_opt(m.get("type"));
            for (k, v) in m.iter().filter(|(k, _)| *k != "type") {
                index
                    .entry((t.clone(), k.clone(), canonical(v)))
                    .or_default()
                    .push(i);
            }
        }
    }
    let mut work = 0usize;
    let mut shared: HashMap<usize, usize> = HashMap::new();
    for x in rest_a {
        let Value::Object(m) = x else {
            diff.removed.push(x.clone());
            continue;
        };
        if work > MAX_PAIRING_WORK {
            diff.bounded = true;
            diff.removed.push(x.clone());
            continue;
        }
        shared.clear();
        let t = canonical_opt(m.get("type"));
        for (k, v) in m.iter().filter(|(k, _)| *k != "type") {
            if let Some(list) = index.get(&(t.clone(), k.clone(), canonical(v))) {
                work += list.len();
                for &i in list.iter().filter(|&&i| rest_b[i].is_some()) {
                    *shared.entry(i).or_default() += 1;
                }
            }
        }
        let fields = |m: &Map<String, Value>| m.keys().filter(|k| *k != "type").count();
        let mine = fields(m);
        // The best candidate: the highest share of agreeing fields, then the earliest.
        let best = shared
            .iter()
            .filter_map(|(&i, &same)| {
                let Some(Value::Object(other)) = rest_b[i] else {
                    return None;
                };
                let total = mine.max(fields(other));
                (total > 0 && same * 2 >= total).then(|| (same as f64 / total as f64, i))
            })
            .max_by(|p, q| p.0.total_cmp(&q.0).then(q.1.cmp(&p.1)));
        match best {
            Some((_, i)) => {
                let y = rest_b[i].take().cloned().unwrap_or(Value::Null);
                diff.changed.push((x.clone(), y));
            }
            None => diff.removed.push(x.clone()),
        }
    }
    diff.added = rest_b.into_iter().flatten().cloned().collect();
    diff
}

/// A text equal for equal values (object keys sorted, at every level), for hashing.
fn canonical(v: &Value) -> String {
    fn write(v: &Value, out: &mut String) {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                out.push('{');
                for (n, k) in keys.into_iter().enumerate() {
                    if n > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(k.clone()).to_string());
                    out.push(':');
                    write(&m[k], out);
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (n, item) in items.iter().enumerate() {
                    if n > 0 {
                        out.push(',');
                    }
                    write(item, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    write(v, &mut out);
    out
}

fn canonical_opt(v: Option<&Value>) -> String {
    v.map(canonical).unwrap_or_default()
}

/// The fields that differ between two objects: `(field, before, after)`, `Null` where absent.
pub fn changed_fields(a: &Value, b: &Value) -> Vec<(String, Value, Value)> {
    let empty = Map::new();
    let (a, b) = (
        a.as_object().unwrap_or(&empty),
        b.as_object().unwrap_or(&empty),
    );
    let mut keys: Vec<&String> = a.keys().collect();
    keys.extend(b.keys().filter(|k| !a.contains_key(*k)));
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| {
            (
                k.clone(),
                a.get(k).cloned().unwrap_or(Value::Null),
                b.get(k).cloned().unwrap_or(Value::Null),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn equal_objects_match_reworded_ones_change_unrelated_ones_add_and_remove() {
        let a = [
            json!({"type": "definition", "entity": "DNA", "definition": "a molecule"}),
            json!({"type": "definition", "entity": "RNA", "definition": "a copy"}),
            json!({"type": "relationship", "subject": "DNA", "predicate": "in", "object": "nucleus"}),
        ];
        let b = [
            json!({"type": "definition", "entity": "RNA", "definition": "a copy"}),
            json!({"type": "definition", "entity": "DNA", "definition": "the genetic molecule"}),
            json!({"type": "relationship", "subject": "cell", "predicate": "has", "object": "wall"}),
        ];
        let d = objects(&a, &b);
        assert_eq!(d.unchanged, 1);
        assert_eq!(d.changed.len(), 1);
        assert_eq!(d.changed[0].0["entity"], "DNA");
        assert_eq!(
            changed_fields(&d.changed[0].0, &d.changed[0].1),
            vec![(
                "definition".into(),
                json!("a molecule"),
                json!("the genetic molecule")
            )]
        );
        assert_eq!(d.removed, vec![a[2].clone()]);
        assert_eq!(d.added, vec![b[2].clone()]);
    }

    /// Security review, finding 13: `history diff` of two 20,000-object runs did not finish in
    /// 300 s (every leftover object compared with every other). Exact matches are found by
    /// hash and pairing only compares objects sharing a field value, within a work bound.
    #[test]
    fn large_runs_diff_in_linear_time_and_pathological_pairing_is_bounded() {
        let run = |n: usize, tweak: &str| -> Vec<Value> {
            (0..n)
                .map(|i| json!({"type": "definition", "entity": format!("e{i}"), "definition": format!("d{i}{tweak}")}))
                .collect()
        };
        let (a, mut b) = (run(20_000, ""), run(20_000, ""));
        b[7] = json!({"type": "definition", "entity": "e7", "definition": "reworded"});
        b.push(json!({"type": "definition", "entity": "new", "definition": "x"}));
        let d = objects(&a, &b);
        assert_eq!(
            (d.unchanged, d.changed.len(), d.added.len(), d.removed.len()),
            (19_999, 1, 1, 0)
        );
        assert!(!d.bounded);
        // Everything differs, but every object shares the same `predicate`: the index alone
        // would compare all pairs, so the work bound stops it and says so.
        let rel = |i: usize, side: &str| json!({"type": "relationship", "subject": format!("{side}{i}"), "predicate": "is", "object": format!("{side}o{i}"), "note": format!("{side}{i}")});
        let a: Vec<Value> = (0..5_000).map(|i| rel(i, "a")).collect();
        let b: Vec<Value> = (0..5_000).map(|i| rel(i, "b")).collect();
        let d = objects(&a, &b);
        assert!(d.bounded);
        assert_eq!(d.removed.len() + d.changed.len(), 5_000);
        assert_eq!(d.added.len() + d.changed.len(), 5_000);
    }

    #[test]
    fn keys_in_another_order_are_the_same_object() {
        let d = objects(
            &[json!({"a": 1, "b": [{"x": 1, "y": 2}]})],
            &[json!({"b": [{"y": 2, "x": 1}], "a": 1})],
        );
        assert_eq!(d.unchanged, 1);
    }

    #[test]
    fn duplicates_count_and_types_never_pair() {
        let x = json!({"type": "a", "k": 1});
        let d = objects(
            &[x.clone(), x.clone()],
            &[x.clone(), json!({"type": "b", "k": 1})],
        );
        assert_eq!(d.unchanged, 1);
        assert_eq!(d.removed, vec![x]);
        assert_eq!(d.added.len(), 1);
        assert!(d.changed.is_empty());
    }
}
