"""Parity with the real peer: TrustGraph's PromptManager (trustgraph-flow 2.11.1).

The same replies go to TrustGraph's `PromptManager.invoke` (its real parse + validate path) and to
`kerf parse --json`. Kerf must return the same objects wherever TrustGraph is right, and more
wherever TrustGraph loses data. Then Kerf's TrustGraph export must load in
`PromptManager.load_config` and render exactly what `kerf render` renders.

Run by scripts/test with the venv made by scripts/peer-venv; prints 'N passed, N failed'.
"""

import asyncio
import importlib.util
import json
import logging
import os
import subprocess
import sys
import types
from pathlib import Path

logging.disable(logging.CRITICAL)

# trustgraph.base's __init__ imports the whole service stack (pulsar, prometheus, …). The prompt
# manager needs one function from it, so load only that module, from the installed package.
_spec = importlib.util.find_spec("trustgraph")
_base_dir = Path(list(_spec.submodule_search_locations)[0]) / "base"
_base = types.ModuleType("trustgraph.base")
_base.__path__ = [str(_base_dir)]
sys.modules["trustgraph.base"] = _base
from trustgraph.base.schema_compatibility import is_strict_mode_compatible  # noqa: E402

_base.is_strict_mode_compatible = is_strict_mode_compatible
from trustgraph.template.prompt_manager import PromptManager  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
KERF = os.environ.get("KERF_BIN", "kerf")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from checks import Checks  # noqa: E402

checks = Checks()
check = checks.check


def tg_objects(response_type, schema, reply):
    pm = PromptManager()
    pm.load_config({"template.t": json.dumps({"prompt": "x", "response-type": response_type, "schema": schema})})

    async def llm(**_):
        return reply

    try:
        out = asyncio.run(pm.invoke("t", {}, llm))
    except RuntimeError:
        return []
    if response_type == "json":
        return out if isinstance(out, list) else [out]
    return out


def kerf(*args, stdin=None):
    p = subprocess.run([KERF, *args], input=stdin, capture_output=True, text=True, cwd=REPO)
    return p


def kerf_objects(response_type, schema_path, reply):
    p = kerf("parse", "-", "--type", response_type, "--schema", str(schema_path), "--json", stdin=reply)
    if p.returncode not in (0, 1):
        raise RuntimeError(f"kerf parse exited {p.returncode}: {p.stderr}")
    return json.loads(p.stdout)["objects"]


UNION = json.loads((REPO / "schemas/agent-kg-extract.schema.json").read_text())
UNION_ARRAY = json.loads((REPO / "schemas/agent-kg-extract-array.schema.json").read_text())
D1 = {"type": "definition", "entity": "DNA", "definition": "Molecule carrying genetic instructions"}
R1 = {"type": "relationship", "subject": "DNA", "predicate": "located in", "object": "cell nucleus", "object-entity": True}
D2 = {"type": "definition", "entity": "RNA", "definition": "Molecule that carries genetic information"}
R2 = {"type": "relationship", "subject": "RNA", "predicate": "transcribed from", "object": "DNA", "object-entity": True}
ALL = [D1, R1, D2, R2]


def line(o):
    return json.dumps(o)


def lines(objs):
    return "\n".join(line(o) for o in objs)


def pretty(objs):
    return "\n".join(json.dumps(o, indent=2) for o in objs)


# (name, response type, reply, expected Kerf objects, does TrustGraph lose data here?)
CASES = [
    # TrustGraph is right: Kerf must agree exactly.
    ("jsonl plain", "jsonl", lines(ALL), ALL, False),
    ("jsonl blank lines", "jsonl", "\n" + line(D1) + "\n\n" + line(R1) + "\n\n", [D1, R1], False),
    ("jsonl ``` fence", "jsonl", "```\n" + lines(ALL) + "\n```", ALL, False),
    ("jsonl ```json fence", "jsonl", "```json\n" + lines(ALL) + "\n```", ALL, False),
    ("jsonl truncated last line", "jsonl", lines(ALL) + "\n" + line(D1)[:25], ALL, False),
    ("jsonl invalid line between", "jsonl", line(D1) + "\n{\"type\": definition}\n" + line(R1), [D1, R1], False),
    ("jsonl schema failure", "jsonl", line(D1) + "\n" + line({**R1, "object-entity": "yes"}) + "\n" + line(D2), [D1, D2], False),
    ("jsonl unknown type", "jsonl", line({"type": "event", "name": "x"}) + "\n" + line(D1), [D1], False),
    ("jsonl CRLF", "jsonl", lines(ALL).replace("\n", "\r\n"), ALL, False),
    ("json array", "json", json.dumps(ALL), ALL, False),
    ("json array in ```json fence", "json", "Here:\n```json\n" + json.dumps(ALL, indent=2) + "\n```", ALL, False),
    ("json truncated array", "json", json.dumps(ALL)[:-30], [], False),
    ("json invalid element fails all", "json", json.dumps([D1, {**R1, "object-entity": "yes"}]), [], False),
    # TrustGraph loses data: Kerf must recover more.
    ("jsonl ```jsonl fence mid-reply", "jsonl", "Sure, here you go:\n```jsonl\n" + lines(ALL) + "\n```", ALL, False),
    ("jsonl pretty-printed objects", "jsonl", pretty(ALL), ALL, True),
    ("jsonl one-line array", "jsonl", json.dumps(ALL), ALL, True),
    ("jsonl multi-line array", "jsonl", "[\n" + ",\n".join(line(o) for o in ALL) + "\n]", ALL, True),
    ("jsonl cut multi-line array", "jsonl", "[\n" + ",\n".join(line(o) for o in ALL) + ",\n" + line(D1)[:20], ALL, True),
    ("jsonl two objects per line", "jsonl", line(D1) + " " + line(R1) + "\n" + line(D2) + ", " + line(R2), ALL, True),
    ("jsonl list markers", "jsonl", "\n".join(f"{i}. {line(o)}" for i, o in enumerate(ALL, 1)), ALL, True),
    ("jsonl BOM", "jsonl", "\ufeff" + lines(ALL), ALL, True),
    ("jsonl ```ndjson fence", "jsonl", "```ndjson\n" + lines(ALL) + "\n```", ALL, False),
    ("jsonl prose then object", "jsonl", "Result: " + line(D1) + "\n" + line(R1), [D1, R1], True),
]


def same_order_subset(small, big):
    it = iter(big)
    return all(any(x == y for y in it) for x in small)


for name, rt, reply, expected, tg_loses in CASES:
    schema_path = REPO / ("schemas/agent-kg-extract.schema.json" if rt == "jsonl" else "schemas/agent-kg-extract-array.schema.json")
    schema = UNION if rt == "jsonl" else UNION_ARRAY
    tg = tg_objects(rt, schema, reply)
    k = kerf_objects(rt, schema_path, reply)
    if k != expected:
        check(name, False, f"kerf returned {k}, expected {expected}")
        continue
    if not same_order_subset(tg, k):
        check(name, False, f"TrustGraph returned objects Kerf did not: tg={tg} kerf={k}")
        continue
    if tg_loses:
        check(f"{name} (TrustGraph {len(tg)}, Kerf {len(k)})", len(k) > len(tg), "expected Kerf to recover more")
    else:
        check(f"{name} ({len(k)} objects)", True)

# Export: Kerf's bundle loads in TrustGraph's PromptManager and renders exactly like `kerf render`.
prompt_files = sorted((REPO / "prompts").glob("*.json"))
p = kerf("export", *map(str, prompt_files), "--to", "trustgraph-bundle")
check("kerf export --to trustgraph-bundle", p.returncode == 0, p.stderr)
bundle = json.loads(p.stdout)
pm = PromptManager()
try:
    pm.load_config(bundle)
    check(f"PromptManager.load_config loads {len(pm.prompts)} templates", len(pm.prompts) == len(prompt_files))
except Exception as e:  # noqa: BLE001
    check("PromptManager.load_config", False, repr(e))
for pf in prompt_files:
    prompt = json.loads(pf.read_text())
    pid = prompt["id"]
    sample = (pf.parent / prompt["sample-input"]).read_text()
    r = kerf("render", str(pf), "--sample", "--json")
    kerf_rendered = json.loads(r.stdout)
    # TrustGraph's load_config ignores per-template terms; pass them as input, as a caller would.
    tg_input = {**prompt.get("terms", {}), "text": sample}
    tg_user = pm.render(pid, tg_input)
    tg_system = pm.system_template.render(tg_input)
    # TrustGraph has one global system template: the bundle's, which is this prompt's own unless
    # the prompts disagree (kerf export says so, and keeps each prompt's under `kerf.system`).
    expected_system = kerf_rendered["system"] if prompt.get("system") == json.loads(bundle["system"]) else json.loads(bundle["system"])
    ok = tg_user == kerf_rendered["user"] and tg_system == expected_system
    detail = ""
    if not ok:
        import difflib

        detail = "\n" + "\n".join(difflib.unified_diff(kerf_rendered["user"].splitlines(), tg_user.splitlines(), "kerf", "trustgraph", lineterm=""))
    if tg_system != expected_system:
        detail += f"\nsystem: kerf {expected_system!r} vs trustgraph {tg_system!r}"
    check(f"{pid}: TrustGraph renders the exported template like kerf", ok, detail)
    expected_type = "text" if prompt["response-type"] == "delimited" else prompt["response-type"]
    check(f"{pid}: TrustGraph sees response-type {expected_type}", pm.prompts[pid].response_type == expected_type)

# Values printed whole: `{{ value }}` is Python's str() in TrustGraph (ibis); Kerf must send the
# same bytes. Terms go through JSON on both sides, as they do in production.
PRINT_TERMS = json.loads(json.dumps({
    "docs": ["first document", "it's the second", 'say "hi"', "both ' and \""],
    "schema": {"name": "crops", "primary": True, "fields": [{"name": "yield", "type": "float", "required": False, "enum": None}]},
    "nested": {"a": [1, 2.0, {"b": [True, False, None]}], "c": {}, "d": []},
    "strings": ["é", "日本語", "emoji 😀", "tab\tnew\nline\r", "ctrl \x01 \x7f", "zw\u200bsp", "nbsp\xa0", "ls\u2028",
                "pua\ue000", "back\\slash", "", "\U000f0000"],
    "numbers": [0, -1, 42, 2**53, 2**63 - 1, 1.0, -0.0, 2.5, 0.1, 1e16, 1.5e16, 1e15, 1.5e-7, 0.0001, 1e-05, 123456789.123, 1e300, -3.25],
    "flags": [True, False, None],
    "t": True, "f": False, "n": None, "i": 7, "x": 3.0, "s": "plain 'text'",
}))
PRINT_TEMPLATES = {
    "print-whole": "Docs: {{ docs }}\nSchema: {{ schema }}\nNested: {{ nested }}\nStrings: {{ strings }}\n"
                   "Numbers: {{ numbers }}\nFlags: {{ flags }}\nScalars: {{ t }} {{ f }} {{ n }} {{ i }} {{ x }} {{ s }}\n",
    "print-parts": "{% for k, v in schema.items() %}{{ k }} = {{ v }}\n{% endfor %}Fields: {{ schema.fields }}\n"
                   "{% for d in docs %}- {{ d }}\n{% endfor %}Second flag: {{ flags.1 }}\n",
    "print-join": "{{ docs|join(', ') }}\n{{ flags|join(' | ') }}\n{{ numbers|join(',') }}\n{{ nested.a|join('; ') }}\n",
}
work = Path(os.environ.get("TMPDIR", "/tmp")) / f"kerf-parity-{os.getpid()}"
work.mkdir(parents=True, exist_ok=True)
terms_path = work / "terms.json"
terms_path.write_text(json.dumps(PRINT_TERMS))
pm = PromptManager()
pm.load_config({f"template.{k}": json.dumps({"prompt": v, "response-type": "text"}) for k, v in PRINT_TEMPLATES.items()})
for pid, template in PRINT_TEMPLATES.items():
    pf = work / f"{pid}.json"
    pf.write_text(json.dumps({"id": pid, "prompt": template, "response-type": "text"}))
    r = kerf("render", str(pf), "--terms", str(terms_path), "--json")
    if r.returncode != 0:
        check(f"{pid}: kerf render", False, r.stderr)
        continue
    kerf_user = json.loads(r.stdout)["user"]
    tg_user = pm.render(pid, PRINT_TERMS)
    detail = ""
    if kerf_user != tg_user:
        import difflib

        detail = "\n" + "\n".join(difflib.unified_diff(kerf_user.splitlines(), tg_user.splitlines(), "kerf", "trustgraph", lineterm=""))
    check(f"{pid}: values print byte for byte as TrustGraph prints them", kerf_user == tg_user, detail)

# `object-schema` (the key TrustGraph's own shipped jsonl prompts use) survives import → export,
# so production keeps doing what it did: PromptManager ignores that key and does not validate.
# Kerf validates with it, and says what TrustGraph does (kerf check warns, kerf lint's trustgraph).
OS_TEMPLATE = {"prompt": "Extract from {{ text }}", "response-type": "jsonl", "object-schema": UNION}
OS_CONFIG = {"system": json.dumps("Be helpful."), "template-index": json.dumps(["os-extract"]),
             "template.os-extract": json.dumps(OS_TEMPLATE)}
OS_REPLY = lines([D1, {**R1, "object-entity": "yes"}, D2])  # the middle object fails the schema


def tg_invoke(config, pid, reply):
    pm = PromptManager()
    pm.load_config(config)

    async def llm(**_):
        return reply

    return asyncio.run(pm.invoke(pid, {"text": "x"}, llm))


before = tg_invoke(OS_CONFIG, "os-extract", OS_REPLY)
(work / "os-config.json").write_text(json.dumps(OS_CONFIG))
out_dir = work / "imported"
p = kerf("import", str(work / "os-config.json"), "--out-dir", str(out_dir), "--force")
check("object-schema: kerf import", p.returncode == 0, p.stderr)
imported = json.loads((out_dir / "os-extract.json").read_text())
check("object-schema: the imported prompt file keeps the key", "object-schema" in imported and "schema" not in imported, json.dumps(imported)[:300])
p = kerf("export", str(out_dir / "os-extract.json"), "--to", "trustgraph-bundle")
exported = json.loads(p.stdout)
template = json.loads(exported["template.os-extract"])
check("object-schema: kerf export keeps the key", "object-schema" in template and "schema" not in template, json.dumps(template)[:300])
after = tg_invoke(exported, "os-extract", OS_REPLY)
check(f"object-schema: TrustGraph returns the same objects after the round trip ({len(before)} → {len(after)})", before == after and len(after) == 3, f"before={before} after={after}")
renamed = tg_invoke({**OS_CONFIG, "template.os-extract": json.dumps({**{k: v for k, v in OS_TEMPLATE.items() if k != "object-schema"}, "schema": UNION})}, "os-extract", OS_REPLY)
check(f"object-schema: renamed to schema, TrustGraph validates ({len(renamed)} objects)", len(renamed) == 2, f"{renamed}")
p = kerf("parse", "-", "--prompt", str(out_dir / "os-extract.json"), "--json", stdin=OS_REPLY)
kerf_parsed = json.loads(p.stdout)["objects"] if p.stdout else []
check("object-schema: Kerf still validates with it (2 objects)", kerf_parsed == [D1, D2], f"{kerf_parsed} {p.stderr}")
p = kerf("check", str(out_dir / "os-extract.json"))
check("object-schema: kerf check says TrustGraph ignores it", "TrustGraph ignores `object-schema`" in p.stdout + p.stderr, p.stdout + p.stderr)
p = kerf("lint", str(out_dir / "os-extract.json"), "--provider", "trustgraph", "--json")
findings = json.loads(p.stdout)["findings"] if p.stdout else []
check("object-schema: kerf lint has the trustgraph finding", any(f["provider"] == "trustgraph" and f["keyword"] == "object-schema" and f["severity"] == "ignored" for f in findings), p.stdout + p.stderr)

print(f"{checks.passed} passed, {checks.failed} failed")
sys.exit(1 if checks.failed else 0)
