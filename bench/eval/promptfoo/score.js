// promptfoo's side of bench/eval: a javascript assertion that scores one reply the way Kerf's
// `agent-kg-extract` prompts say (`match`): records matched one to one per type, on identity
// fields (a definition's entity; a relationship's subject and object), after normalisation
// (NFKC, case folded, runs of whitespace and punctuation collapsed, a leading article dropped),
// an expected record's `aliases` accepted. It returns tp/fp/fn as named scores so the benchmark
// can add them up and check that both tools counted the same.
'use strict';

const KEYS = { definition: ['entity'], relationship: ['subject', 'object'] };

function norm(v) {
  if (typeof v !== 'string') return JSON.stringify(v);
  let s = v.normalize('NFKC').toLowerCase().replace(/[\s\p{P}]+/gu, ' ').trim();
  for (const article of ['the ', 'a ', 'an ']) {
    if (s.length > article.length && s.startsWith(article)) {
      s = s.slice(article.length);
      break;
    }
  }
  return s;
}

// The reply's records: a JSON array, or one JSON object per line (lines that do not parse, or
// are not objects, are dropped, as Kerf drops them).
function records(output) {
  const text = String(output).trim();
  if (text.startsWith('[')) {
    try {
      return JSON.parse(text).filter((r) => r && typeof r === 'object');
    } catch {
      return [];
    }
  }
  const out = [];
  for (const line of text.split('\n')) {
    try {
      const r = JSON.parse(line);
      if (r && typeof r === 'object' && !Array.isArray(r)) out.push(r);
    } catch {}
  }
  return out;
}

function accepts(expected, actual, keys) {
  return keys.every((field) => {
    const names = [expected[field], ...((expected.aliases || {})[field] || [])].map(norm);
    return names.includes(norm(actual[field]));
  });
}

// The largest one-to-one matching (augmenting paths, Kuhn's algorithm).
function maxMatching(expected, actual, keys) {
  const owner = new Array(actual.length).fill(-1);
  const edges = expected.map((e) => actual.flatMap((a, j) => (accepts(e, a, keys) ? [j] : [])));
  const augment = (i, seen) => {
    for (const j of edges[i]) {
      if (seen[j]) continue;
      seen[j] = true;
      if (owner[j] < 0 || augment(owner[j], seen)) {
        owner[j] = i;
        return true;
      }
    }
    return false;
  };
  let tp = 0;
  for (let i = 0; i < expected.length; i++) if (augment(i, new Array(actual.length).fill(false))) tp++;
  return tp;
}

module.exports = (output, context) => {
  const expected = JSON.parse(context.vars.expected);
  const actual = records(output);
  let tp = 0;
  for (const [type, keys] of Object.entries(KEYS)) {
    tp += maxMatching(
      expected.filter((r) => r.type === type),
      actual.filter((r) => r.type === type),
      keys,
    );
  }
  const fp = actual.length - tp;
  const fn = expected.length - tp;
  const f1 = 2 * tp + fp + fn === 0 ? 1 : (2 * tp) / (2 * tp + fp + fn);
  return {
    pass: true,
    score: f1,
    reason: `tp ${tp}, fp ${fp}, fn ${fn}`,
    namedScores: { tp, fp, fn },
  };
};
