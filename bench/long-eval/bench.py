"""A long document through Kerf's chunked eval and through LangExtract, side by side, against the
same loopback server (bench/long-eval/server.py: the same records for both, each in the tool's
own form).

The document is the shipped knowledge-graph documents, shuffled round after round and joined by
blank lines until it is MB megabytes, its expected records the union of theirs. Kerf cuts it with
the recursive chunker at 2000 characters (overlap 100) and runs the JSONL prompt at a budget no
reply reaches (`kerf eval … --json`: requests, places every record in the document, merges the
chunks' records, scores the document, keeps every run in its SQLite history); then
`kerf eval show --json` and `kerf eval report --html` read it all back from the history.
LangExtract (`lx.extract`, OpenAI provider, JSON mode) cuts it at 2000 characters and aligns
every extraction to the text. Both at the same concurrency, the server answering at once, so
what is measured is each tool's own work.

For each: wall time, CPU time (the process and its children; the server is neither) and peak
memory (the process tree's resident set, sampled every 20 ms; bench/eval's measure). The runs
alternate between the tools. Results go to bench/long-eval/results.json.

    KERF_BIN=… LX_PYTHON=… python3 bench/long-eval/bench.py [--mb 1,5] [--reps 3] [--concurrency 16]
"""

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "bench/eval"))
from bench import measured  # noqa: E402  (bench/eval's measure: wall, CPU, tree peak)

PROMPT = REPO / "prompts/agent-kg-extract.json"
SIZE, OVERLAP, BUDGET = 2000, 100, 4096
KEYS = {"definition": ("entity",), "relationship": ("subject", "object")}


def document(tmp, mb):
    """One row: the shipped documents, round after round in a fresh order, to `mb` megabytes."""
    rows = [json.loads(line) for line in (REPO / "datasets/knowledge-graph.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    rng = random.Random(int(mb * 1e6))
    parts, used, total = [], [], 0
    while total < mb * 1e6:
        order = rows[:]
        rng.shuffle(order)
        for r in order:
            if total >= mb * 1e6:
                break
            parts.append(r["input"])
            used.append(r)
            total += len(r["input"].encode()) + 2
    seen, expected = set(), []
    for r in used:
        for rec in r["expected"]["agent-kg-extract"]:
            key = (rec["type"],) + tuple(rec[k].casefold() for k in KEYS[rec["type"]])
            if key not in seen:
                seen.add(key)
                expected.append(rec)
    path = tmp / f"document-{mb:g}mb.jsonl"
    row = {"id": f"document-{mb:g}mb", "input": "\n\n".join(parts), "expected": {"agent-kg-extract": expected}}
    path.write_text(json.dumps(row, ensure_ascii=False) + "\n", encoding="utf-8")
    return path, len(row["input"]), len(expected)


def stats(url):
    with urllib.request.urlopen(url.removesuffix("/v1") + "/stats") as r:
        return json.load(r)


def run_kerf(kerf, tmp, doc, url, opts, tag):
    home = tmp / f"kerf-{tag}"
    home.mkdir()
    env = dict(os.environ, KERF_DATA_DIR=str(home), KERF_CONFIG_DIR=str(home), KERF_KEYRING="kernel")
    subprocess.run([kerf, "providers", "add", "bench", "--kind", "openai", "--base-url", url, "--model", "loopback", "--no-key"], env=env, check=True, capture_output=True)
    before = stats(url)["requests"]
    phases = {}
    cmd = [kerf, "eval", str(doc), "--prompt", str(PROMPT), "--provider", "bench", "--chunker", "recursive", "--chunk-size", str(SIZE),
           "--chunk-overlap", str(OVERLAP), "--max-tokens", str(BUDGET), "--concurrency", str(opts.concurrency), "--json", "--yes"]
    for name, c in [("eval", cmd), ("show", [kerf, "eval", "show", "--json"]), ("report", [kerf, "eval", "report", "--html", str(home / "report.html")])]:
        seconds, peak, cpu, r = measured(c, env, REPO)
        assert r.returncode == 0, f"kerf {name} exited {r.returncode}: {r.stderr[-2000:]}"
        phases[name] = {"seconds": seconds, "cpu_seconds": cpu, "peak_bytes": peak}
        if name == "eval":
            report = json.loads(r.stdout)
    line = report["summary"][0]
    chunks = report["cells"][0]["chunks"]
    found = {"requests": stats(url)["requests"] - before, "records": report["cells"][0]["objects"],
             "placed": chunks["spans"], "tp": line["tp"], "fp": line["fp"], "fn": line["fn"], "cut": chunks["cut"]}
    return phases, found


def run_langextract(py, doc, url, opts):
    before = stats(url)["requests"]
    seconds, peak, cpu, r = measured([py, str(HERE / "lx_extract.py"), str(doc), url, str(SIZE), str(opts.concurrency)], dict(os.environ), REPO)
    assert r.returncode == 0, f"LangExtract exited {r.returncode}: {r.stderr[-2000:]}"
    out = json.loads(r.stdout.strip().splitlines()[-1])
    return {"seconds": seconds, "cpu_seconds": cpu, "peak_bytes": peak}, {"requests": stats(url)["requests"] - before, "records": out["extractions"], "alignment": out["alignment"]}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mb", default="1")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--concurrency", type=int, default=16)
    opts = p.parse_args()
    kerf, py = os.environ["KERF_BIN"], os.environ["LX_PYTHON"]
    tmp = Path(tempfile.mkdtemp(prefix="kerf-bench-long-eval-"))
    server = subprocess.Popen([sys.executable, str(HERE / "server.py"), "0"], stdout=subprocess.PIPE, text=True)
    results = {"date": time.strftime("%Y-%m-%d"), "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores",
               "kerf": subprocess.run([kerf, "--version"], capture_output=True, text=True).stdout.strip(),
               "langextract": subprocess.run([py, "-c", "import importlib.metadata as m; print(m.version('langextract'))"], capture_output=True, text=True).stdout.strip(),
               "chunk_size": SIZE, "overlap": OVERLAP, "budget": BUDGET, "concurrency": opts.concurrency, "documents": []}
    try:
        url = f"http://127.0.0.1:{server.stdout.readline().strip()}/v1"
        for mb in [float(x) for x in opts.mb.split(",")]:
            doc, chars, expected = document(tmp, mb)
            print(f"{mb:g} MB document: {chars} characters, {expected} expected records", flush=True)
            runs = {"kerf": [], "langextract": []}
            found = {}
            for rep in range(opts.reps):
                for tool in ("kerf", "langextract") if rep % 2 == 0 else ("langextract", "kerf"):
                    if tool == "kerf":
                        phases, f = run_kerf(kerf, tmp, doc, url, opts, f"{mb:g}-{rep}")
                        e = phases["eval"]
                        print(f"  kerf        run {rep + 1}: eval {e['seconds']:6.2f} s (CPU {e['cpu_seconds']:6.2f} s, {e['peak_bytes'] / 2**20:6.0f} MiB) · show {phases['show']['seconds']:5.2f} s · report {phases['report']['seconds']:5.2f} s · {f}", flush=True)
                        runs["kerf"].append(phases)
                    else:
                        e, f = run_langextract(py, doc, url, opts)
                        print(f"  langextract run {rep + 1}: {e['seconds']:6.2f} s (CPU {e['cpu_seconds']:6.2f} s, {e['peak_bytes'] / 2**20:6.0f} MiB) · {f}", flush=True)
                        runs["langextract"].append({"extract": e})
                    found[tool] = f
            med = lambda rs, phase, k: statistics.median(r[phase][k] for r in rs)
            summary = {f"kerf {ph}": {k: med(runs["kerf"], ph, k) for k in ("seconds", "cpu_seconds", "peak_bytes")} for ph in ("eval", "show", "report")}
            summary["langextract extract"] = {k: med(runs["langextract"], "extract", k) for k in ("seconds", "cpu_seconds", "peak_bytes")}
            print(f"\n| {mb:g} MB | wall (median of {opts.reps}) | CPU | peak memory |\n| --- | ---: | ---: | ---: |")
            for name, s in summary.items():
                print(f"| {name} | {s['seconds']:.1f} s | {s['cpu_seconds']:.1f} s | {s['peak_bytes'] / 2**20:.0f} MiB |")
            print(flush=True)
            results["documents"].append({"mb": mb, "characters": chars, "expected": expected, "found": found, "runs": runs, "median": summary})
    finally:
        server.terminate()
    (HERE / "results.json").write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
