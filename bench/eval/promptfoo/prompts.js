// promptfoo's side of bench/eval: the two prompts as chat messages, exactly as Kerf renders them.
// bench.py renders each prompt once through `kerf render` with a placeholder for the document
// and passes the result in KERF_BENCH_RENDERED; each test's `text` replaces the placeholder.
'use strict';

const rendered = JSON.parse(require('fs').readFileSync(process.env.KERF_BENCH_RENDERED, 'utf8'));

function prompt(id) {
  const { system, user, placeholder } = rendered[id];
  return ({ vars }) => [
    { role: 'system', content: system },
    { role: 'user', content: user.split(placeholder).join(vars.text) },
  ];
}

module.exports.jsonl = prompt('agent-kg-extract');
module.exports.array = prompt('agent-kg-extract-array');
