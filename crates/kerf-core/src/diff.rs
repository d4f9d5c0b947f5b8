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
}

/// Compare `a` (before) with `b` (after). Equal objects match first; of the rest, an object in
/// `a` pairs with the object in `b` of the same `type` (when there is one) sharing the most
/// equal fields, as long as at least half of their fields agree — so a definition whose text was
/// reworded is "changed", while two unrelated objects are one removed and one added.
pub fn objects(a: &[Value], b: &[Value]) -> ObjectDiff {
    let mut rest_b: Vec<Option<&Value>> = b.iter().map(Some).collect();
    let mut rest_a: Vec<&Value> = Vec::new();
    let mut unchanged = 0;
    for x in a {
        match rest_b.iter().position(|y| *y == Some(x)) {
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
    for x in rest_a {
        let best = rest_b
            .iter()
            .enumerate()
            .filter_map(|(i, y)| y.map(|y| (i, y)))
            .filter_map(|(i, y)| similarity(x, y).map(|s| (s, i)))
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

/// The share of fields two objects agree on, if they may be the same object: same `type`, and at
/// least half of the fields of the larger agreeing (excluding `type`). `None` otherwise.
fn similarity(x: &Value, y: &Value) -> Option<f64> {
    let (Value::Object(x), Value::Object(y)) = (x, y) else {
        return None;
    };
    if x.get("type") != y.get("type") {
        return None;
    }
    let fields = |m: &Map<String, Value>| m.keys().filter(|k| *k != "type").count();
    let total = fields(x).max(fields(y));
    let same = x
        .iter()
        .filter(|(k, v)| *k != "type" && y.get(*k) == Some(v))
        .count();
    (total > 0 && same > 0 && same * 2 >= total).then(|| same as f64 / total as f64)
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
