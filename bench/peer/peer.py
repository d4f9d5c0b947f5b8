"""Kerf against TrustGraph's real prompt manager, measured in one run on one machine.

1. Parse + validate: extraction replies (a oneOf definition/relationship union) of 1k, 10k and 100k
   objects, as a JSON array and as JSONL, through
   - TrustGraph's `PromptManager.invoke` (its real parse + per-object `jsonschema.validate` path),
   - a tuned Python baseline (same parse, one precompiled validator, `is_valid`),
   - `kerf parse` (the release CLI, whole process: start, read, parse, validate, summary).
2. Sweeps: a 1,000-object JSONL reply (and its JSON array twin) cut at 1,000 evenly spaced offsets
   and re-parsed each time the peer's way, against `kerf sweep` at *every* byte offset.
3. Sweep growth: `kerf sweep` at every byte of 1k / 10k / 100k-object replies.

Prints a table of medians and ratios and writes bench/peer/results.json.
"""

import asyncio
import importlib.util
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

logging.disable(logging.CRITICAL)

_spec = importlib.util.find_spec("trustgraph")
_base = types.ModuleType("trustgraph.base")
_base.__path__ = [str(Path(list(_spec.submodule_search_locations)[0]) / "base")]
sys.modules["trustgraph.base"] = _base
from trustgraph.base.schema_compatibility import is_strict_mode_compatible  # noqa: E402

_base.is_strict_mode_compatible = is_strict_mode_compatible
import jsonschema  # noqa: E402
from trustgraph.template.prompt_manager import PromptManager  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
KERF = os.environ.get("KERF_BIN", "kerf")
QUICK = "--quick" in sys.argv
LINE_SCHEMA = json.loads((REPO / "schemas/agent-kg-extract.schema.json").read_text())
ARRAY_SCHEMA = json.loads((REPO / "schemas/agent-kg-extract-array.schema.json").read_text())
TMP = Path(tempfile.mkdtemp(prefix="kerf-peer-"))


def objects(n):
    out = []
    for i in range(n):
        if i % 2 == 0:
            out.append({"type": "definition", "entity": f"entity {i}", "definition": f"A molecule or process described in paragraph {i} of the source text"})
        else:
            out.append({"type": "relationship", "subject": f"entity {i}", "predicate": "located in", "object": f"compartment {i % 17}", "object-entity": True})
    return out


def reply(n, fmt):
    objs = objects(n)
    if fmt == "jsonl":
        return "\n".join(json.dumps(o) for o in objs)
    return "[\n" + ",\n".join(json.dumps(o) for o in objs) + "\n]"


def timed(fn, reps):
    times = []
    result = None
    for _ in range(reps):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), result


def tg_manager(fmt):
    pm = PromptManager()
    schema = LINE_SCHEMA if fmt == "jsonl" else ARRAY_SCHEMA
    pm.load_config({"template.t": json.dumps({"prompt": "x", "response-type": fmt if fmt == "jsonl" else "json", "schema": schema})})
    return pm


def tg_parse(pm, text):
    async def llm(**_):
        return text

    try:
        out = asyncio.run(pm.invoke("t", {}, llm))
    except RuntimeError:
        return 0
    return len(out)


LINE_VALIDATOR = jsonschema.Draft202012Validator(LINE_SCHEMA)
ARRAY_VALIDATOR = jsonschema.Draft202012Validator(ARRAY_SCHEMA)


def tuned_parse(text, fmt):
    if fmt == "jsonl":
        n = 0
        for line in text.split("\n"):
            line = line.strip()
            if not line or line.startswith("```"):
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            if LINE_VALIDATOR.is_valid(obj):
                n += 1
        return n
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return 0
    return len(value) if ARRAY_VALIDATOR.is_valid(value) else 0


def kerf(*args):
    p = subprocess.run([KERF, *args], capture_output=True, text=True)
    if p.returncode not in (0, 1):
        raise RuntimeError(p.stderr)
    return p.stdout


def kerf_parse(path, fmt):
    schema = REPO / ("schemas/agent-kg-extract.schema.json" if fmt == "jsonl" else "schemas/agent-kg-extract-array.schema.json")
    out = kerf("parse", str(path), "--type", "json" if fmt == "json" else "jsonl", "--schema", str(schema), "--summary")
    # "<file>: jsonl, N object(s) accepted, …"
    return int(out.split(", ")[1].split(" ")[0])


def kerf_sweep(path, fmt):
    schema = REPO / ("schemas/agent-kg-extract.schema.json" if fmt == "jsonl" else "schemas/agent-kg-extract-array.schema.json")
    out = json.loads(kerf("sweep", str(path), "--type", "json" if fmt == "json" else "jsonl", "--schema", str(schema), "--json"))
    return out


results = {"date": time.strftime("%Y-%m-%d"), "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}", "parse": [], "sweep": [], "growth": []}
sizes = [1000, 10000] if QUICK else [1000, 10000, 100000]

print(f"# Kerf vs TrustGraph PromptManager — {results['date']}, {results['machine']}\n")
print("## Parse + validate (objects/s, median)\n")
print("| objects | format | TrustGraph | tuned Python | kerf parse | kerf ÷ tuned | kerf ÷ TrustGraph |")
print("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
for n in sizes:
    for fmt in ["jsonl", "json"]:
        text = reply(n, fmt)
        path = TMP / f"reply-{n}.{fmt}.txt"
        path.write_text(text)
        pm = tg_manager(fmt)
        reps_tg = 1 if n >= 100000 else 3
        t_tg, got_tg = timed(lambda: tg_parse(pm, text), reps_tg)
        t_tuned, got_tuned = timed(lambda: tuned_parse(text, fmt), 3 if n < 100000 else 1)
        t_kerf, got_kerf = timed(lambda: kerf_parse(path, fmt), 5)
        assert got_tg == got_tuned == got_kerf == n, (got_tg, got_tuned, got_kerf, n)
        row = {"objects": n, "format": fmt, "trustgraph_s": t_tg, "tuned_python_s": t_tuned, "kerf_s": t_kerf}
        results["parse"].append(row)
        print(f"| {n:,} | {fmt} | {n / t_tg:,.0f} | {n / t_tuned:,.0f} | {n / t_kerf:,.0f} | {t_tuned / t_kerf:.1f}× | {t_tg / t_kerf:.1f}× |")

print("\n## Sweep of a 1,000-object reply (seconds, median)\n")
print("| format | peer: re-parse at 1,000 cuts | kerf sweep: every byte offset | cuts kerf evaluates | kerf faster by |")
print("| --- | ---: | ---: | ---: | ---: |")
for fmt in ["jsonl", "json"]:
    text = reply(1000, fmt)
    path = TMP / f"sweep-1000.{fmt}.txt"
    path.write_text(text)
    pm = tg_manager(fmt)
    cuts = [round(i * len(text) / 1000) for i in range(1, 1001)]
    # The peer's way: cut, parse, validate — with the tuned parser (TrustGraph's own path is slower still).
    t_peer, curve = timed(lambda: [tuned_parse(text[:c], fmt) for c in cuts], 1 if not QUICK else 1)
    t_kerf, sweep = timed(lambda: kerf_sweep(path, fmt), 5)
    # Same answers where both looked.
    pts = sweep["points"]

    def at(c):
        v = 0
        for o, n in pts:
            if o <= c:
                v = n
            else:
                break
        return v

    assert all(at(c) == curve[i] for i, c in enumerate(cuts)), "kerf sweep disagrees with the re-parse"
    results["sweep"].append({"format": fmt, "objects": 1000, "bytes": len(text), "peer_1000_cuts_s": t_peer, "kerf_every_byte_s": t_kerf})
    print(f"| {fmt} | {t_peer:.3f} | {t_kerf:.3f} | {len(text) + 1:,} | {t_peer / t_kerf:.1f}× |")

print("\n## kerf sweep growth (every byte offset, JSONL)\n")
print("| objects | bytes | seconds | µs per 1k bytes |")
print("| ---: | ---: | ---: | ---: |")
for n in sizes:
    text = reply(n, "jsonl")
    path = TMP / f"growth-{n}.jsonl.txt"
    path.write_text(text)
    t, _ = timed(lambda: kerf_sweep(path, "jsonl"), 5)
    results["growth"].append({"objects": n, "bytes": len(text), "kerf_sweep_s": t})
    print(f"| {n:,} | {len(text):,} | {t:.3f} | {t / len(text) * 1e9:.1f} |")

out = REPO / "bench/peer/results.json"
out.write_text(json.dumps(results, indent=2) + "\n")
print(f"\nwrote {out}")
