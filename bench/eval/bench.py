"""Kerf's eval against promptfoo's, side by side in one run on one machine (issue 20).

Both tools evaluate the same dataset (ROWS documents, made from the shipped
datasets/knowledge-graph.jsonl, each input marked `(Document N.)` so every prompt is distinct)
with the same two prompts (agent-kg-extract, JSONL, and its JSON-array twin), against the same
loopback OpenAI-compatible server (bench/eval/server.py) that answers every request after DELAY
seconds, at concurrency 16, caches off. Kerf scores with its own matching; promptfoo with a
javascript assertion written for the same precision/recall/F1 (bench/eval/promptfoo/score.js).

For each tool: wall time (process start to exit), CPU time (user + system, its own and its
children's) and peak memory (the resident set of the process and all its descendants, sampled
every 20 ms). The runs alternate between the tools so that drift in the machine's load hits
both. The benchmark checks that both tools sent the same conversations (the server's digest of
every request's messages) and counted the same tp/fp/fn, then prints medians and writes
bench/eval/results.json.

    KERF_BIN=… PROMPTFOO="NODE ENTRY" python3 bench/eval/bench.py [--rows N] [--reps N] [--delay S] [--concurrency N]

With --providers N, Kerf alone runs the same eval on one provider and on N side by side (the
loopback server under N names, each at the same concurrency: N times the requests), alternating,
and prints both runs' wall and CPU time: what a second and third model cost in one experiment.
Its results go to bench/eval/providers.json.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PROMPTS = {"jsonl": REPO / "prompts/agent-kg-extract.json", "array": REPO / "prompts/agent-kg-extract-array.json"}
PLACEHOLDER = "\u2063KERF-DOCUMENT\u2063"


def args():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=500)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--delay", type=float, default=0.25)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--providers", type=int, default=0)
    return p.parse_args()


def dataset(tmp, rows):
    shipped = [json.loads(line) for line in open(REPO / "datasets/knowledge-graph.jsonl", encoding="utf-8")]
    data, tests = [], []
    for n in range(rows):
        base = shipped[n % len(shipped)]
        text = f"{base['input']} (Document {n}.)"
        expected = base["expected"]["agent-kg-extract"]
        data.append({"id": f"{base['id']}-{n}", "input": text, "expected": {"agent-kg-extract": expected}})
        # promptfoo expands a list-valued var into one test per item, so the gold set travels as text.
        tests.append({"description": f"{base['id']}-{n}", "vars": {"text": text, "expected": json.dumps(expected)}})
    path = tmp / "data.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in data), encoding="utf-8")
    (tmp / "tests.json").write_text(json.dumps(tests), encoding="utf-8")
    return path, sum(len(r["expected"]["agent-kg-extract"]) for r in data)


def rendered(kerf, tmp):
    """Each prompt's system and user messages as Kerf renders them, the document a placeholder."""
    out = {}
    for path in PROMPTS.values():
        r = subprocess.run([kerf, "render", str(path), "--var", f"text={PLACEHOLDER}"], capture_output=True, text=True, check=True)
        system, user = r.stdout.split("--- user ---\n", 1)
        system = system.removeprefix("--- system ---\n").removesuffix("\n")
        pid = json.loads(path.read_text())["id"]
        out[pid] = {"system": system, "user": user.removesuffix("\n"), "placeholder": PLACEHOLDER}
        assert PLACEHOLDER in user, f"{path}: the document is not in the user message"
    file = tmp / "rendered.json"
    file.write_text(json.dumps(out), encoding="utf-8")
    return file


def tree_rss(root):
    """Resident memory of `root` and its descendants, in bytes."""
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        try:
            with open(f"/proc/{pid}/statm") as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            pass
    return total


def measured(cmd, env, cwd):
    """Runs `cmd`; returns (seconds, peak bytes, CPU seconds, completed process)."""
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
    peak, done = 0, threading.Event()

    def sample():
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_rss(proc.pid))
            done.wait(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    code = proc.returncode = os.waitstatus_to_exitcode(status)
    done.set()
    sampler.join()
    out.seek(0)
    err.seek(0)
    cpu = usage.ru_utime + usage.ru_stime
    return seconds, peak, cpu, subprocess.CompletedProcess(cmd, code, out.read().decode(), err.read().decode())


def run_kerf(kerf, tmp, data, url, opts, rep, providers=1):
    home = tmp / f"kerf-{rep}-{providers}"
    home.mkdir()
    env = dict(os.environ, KERF_DATA_DIR=str(home), KERF_CONFIG_DIR=str(home), KERF_KEYRING="kernel")
    names = ["bench"] if providers == 1 else [f"bench{i + 1}" for i in range(providers)]
    for name in names:
        subprocess.run([kerf, "providers", "add", name, "--kind", "openai", "--base-url", url, "--model", "loopback", "--no-key"], env=env, check=True, capture_output=True)
    cmd = [kerf, "eval", str(data), "--prompt", str(PROMPTS["jsonl"]), "--prompt", str(PROMPTS["array"]), "--provider", ",".join(names),
           "--max-tokens", "1024", "--constrain", "none", "--concurrency", str(opts.concurrency), "--json", "--yes"]
    seconds, peak, cpu, r = measured(cmd, env, REPO)
    assert r.returncode == 0, f"kerf eval exited {r.returncode}: {r.stderr[-2000:]}"
    report = json.loads(r.stdout)
    assert len(report["cells"]) == 2 * opts.rows * providers and all(c["finish_reason"] == "stop" for c in report["cells"]), "kerf: not every cell measured"
    totals = {k: sum(line[k] for line in report["summary"]) for k in ("tp", "fp", "fn")}
    return seconds, peak, cpu, totals


def side_by_side(kerf, tmp, data, url, opts):
    """Kerf on one provider and on `opts.providers` side by side, alternating: wall, CPU, peak."""
    n = opts.providers
    runs = {1: [], n: []}
    for rep in range(opts.reps):
        for k in (1, n) if rep % 2 == 0 else (n, 1):
            seconds, peak, cpu, t = run_kerf(kerf, tmp, data, url, opts, rep, k)
            with urllib.request.urlopen(url.removesuffix("/v1") + "/stats") as r:
                sent = json.load(r)
            assert sent["requests"] == 2 * opts.rows * k, f"{k} providers: {sent['requests']} requests"
            runs[k].append({"seconds": seconds, "peak_bytes": peak, "cpu_seconds": cpu})
            print(f"  {k} provider(s) run {rep + 1}: {seconds:6.2f} s, CPU {cpu:6.2f} s, peak {peak / 2**20:7.1f} MiB, tp {t['tp']} fp {t['fp']} fn {t['fn']}", flush=True)
    ideal = opts.rows * 2 * opts.delay / opts.concurrency
    print(f"\n| providers | requests | wall (median of {opts.reps}) | ÷ ideal {ideal:.2f} s | CPU time | peak memory |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    median = {}
    for k, rs in runs.items():
        m = {"seconds": statistics.median(x["seconds"] for x in rs), "cpu_seconds": statistics.median(x["cpu_seconds"] for x in rs),
             "peak_mib": statistics.median(x["peak_bytes"] for x in rs) / 2**20}
        median[k] = m
        print(f"| {k} | {2 * opts.rows * k} | {m['seconds']:.2f} s | {m['seconds'] / ideal:.2f}× | {m['cpu_seconds']:.2f} s | {m['peak_mib']:.0f} MiB |")
    results = {
        "date": time.strftime("%Y-%m-%d"), "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores",
        "kerf": subprocess.run([kerf, "--version"], capture_output=True, text=True).stdout.strip(),
        "rows": opts.rows, "prompts": 2, "concurrency_per_provider": opts.concurrency, "delay_s": opts.delay, "ideal_s": ideal,
        "runs": {str(k): v for k, v in runs.items()}, "median": {str(k): v for k, v in median.items()},
    }
    (HERE / "providers.json").write_text(json.dumps(results, indent=1) + "\n")


def run_promptfoo(promptfoo, tmp, rendered_file, url, opts, rep):
    home = tmp / f"promptfoo-{rep}"
    home.mkdir()
    config = {
        "description": "kerf bench/eval",
        "prompts": [
            {"id": f"file://{HERE}/promptfoo/prompts.js:jsonl", "label": "agent-kg-extract"},
            {"id": f"file://{HERE}/promptfoo/prompts.js:array", "label": "agent-kg-extract-array"},
        ],
        "providers": [{"id": "openai:chat:loopback", "config": {"apiBaseUrl": url, "apiKey": "none", "max_tokens": 1024}}],
        "defaultTest": {"assert": [{"type": "javascript", "value": f"file://{HERE}/promptfoo/score.js"}]},
        "tests": f"file://{tmp}/tests.json",
    }
    # JSON is YAML, and promptfoo reads YAML.
    (home / "promptfooconfig.yaml").write_text(json.dumps(config, indent=1), encoding="utf-8")
    env = dict(os.environ, PROMPTFOO_CONFIG_DIR=str(home), PROMPTFOO_DISABLE_TELEMETRY="1", PROMPTFOO_DISABLE_UPDATE="1",
               KERF_BENCH_RENDERED=str(rendered_file), OPENAI_API_KEY="none", NODE_NO_WARNINGS="1")
    node, entry = promptfoo.split(" ", 1)
    cmd = [node, entry, "eval", "-c", "promptfooconfig.yaml", "-j", str(opts.concurrency), "--no-cache", "--no-progress-bar",
           "--no-table", "-o", "results.json"]
    seconds, peak, cpu, r = measured(cmd, env, home)
    assert r.returncode in (0, 100), f"promptfoo eval exited {r.returncode}: {r.stderr[-2000:]}{r.stdout[-2000:]}"
    results = json.loads((home / "results.json").read_text())["results"]["results"]
    assert len(results) == 2 * opts.rows, f"promptfoo: {len(results)} results"
    errors = [x.get("error") for x in results if x.get("error")]
    assert not errors, f"promptfoo: {len(errors)} errors, e.g. {errors[0]}"
    totals = {k: sum(int(x["namedScores"][k]) for x in results) for k in ("tp", "fp", "fn")}
    return seconds, peak, cpu, totals


def main():
    opts = args()
    kerf = os.environ.get("KERF_BIN", "kerf")
    tmp = Path(tempfile.mkdtemp(prefix="kerf-bench-eval-"))
    if opts.providers:
        data, _ = dataset(tmp, opts.rows)
        server = subprocess.Popen([sys.executable, str(HERE / "server.py"), str(data), "agent-kg-extract", str(opts.delay)], stdout=subprocess.PIPE, text=True)
        try:
            url = f"http://127.0.0.1:{server.stdout.readline().strip()}/v1"
            with urllib.request.urlopen(url.removesuffix("/v1") + "/stats"):
                pass
            side_by_side(kerf, tmp, data, url, opts)
        finally:
            server.terminate()
        return
    promptfoo = os.environ["PROMPTFOO"]
    data, expected_records = dataset(tmp, opts.rows)
    rendered_file = rendered(kerf, tmp)
    server = subprocess.Popen([sys.executable, str(HERE / "server.py"), str(data), "agent-kg-extract", str(opts.delay)], stdout=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{server.stdout.readline().strip()}/v1"
        ideal = opts.rows * 2 * opts.delay / opts.concurrency
        print(f"{opts.rows} rows × 2 prompts, concurrency {opts.concurrency}, server answers in {opts.delay * 1000:.0f} ms: ideal {ideal:.2f} s", flush=True)
        runs = {"kerf": [], "promptfoo": []}
        totals, conversations = {}, {}
        with urllib.request.urlopen(url.removesuffix("/v1") + "/stats"):
            pass
        for rep in range(opts.reps):
            for tool in ("kerf", "promptfoo") if rep % 2 == 0 else ("promptfoo", "kerf"):
                if tool == "kerf":
                    seconds, peak, cpu, t = run_kerf(kerf, tmp, data, url, opts, rep)
                else:
                    seconds, peak, cpu, t = run_promptfoo(promptfoo, tmp, rendered_file, url, opts, rep)
                with urllib.request.urlopen(url.removesuffix("/v1") + "/stats") as r:
                    sent = json.load(r)
                assert sent["requests"] == 2 * opts.rows, f"{tool}: {sent['requests']} requests"
                runs[tool].append({"seconds": seconds, "peak_bytes": peak, "cpu_seconds": cpu})
                totals.setdefault(tool, t)
                assert totals[tool] == t, f"{tool}: counts changed between runs: {totals[tool]} then {t}"
                conversations.setdefault(tool, sent["digest"])
                print(f"  {tool:<9} run {rep + 1}: {seconds:6.2f} s, CPU {cpu:6.2f} s, peak {peak / 2**20:7.1f} MiB, tp {t['tp']} fp {t['fp']} fn {t['fn']}", flush=True)
        assert conversations["kerf"] == conversations["promptfoo"], "the tools sent different conversations"
        assert totals["kerf"] == totals["promptfoo"], f"the tools disagree: kerf {totals['kerf']}, promptfoo {totals['promptfoo']}"
    finally:
        server.terminate()
    t = totals["kerf"]
    p, r = t["tp"] / (t["tp"] + t["fp"]), t["tp"] / (t["tp"] + t["fn"])
    summary = {}
    for tool, rs in runs.items():
        summary[tool] = {"seconds": statistics.median(x["seconds"] for x in rs), "cpu_seconds": statistics.median(x["cpu_seconds"] for x in rs),
                         "peak_mib": statistics.median(x["peak_bytes"] for x in rs) / 2**20}
    k, f = summary["kerf"], summary["promptfoo"]
    print(f"\nboth tools sent the same {2 * opts.rows} conversations and counted tp {t['tp']}, fp {t['fp']}, fn {t['fn']} ({2 * expected_records} expected, over both prompts): micro P {p:.4f}, R {r:.4f}, F1 {2 * p * r / (p + r):.4f}")
    print(f"\n| tool | wall (median of {opts.reps}) | ÷ ideal {ideal:.2f} s | CPU time | peak memory |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for tool, s in summary.items():
        print(f"| {tool} | {s['seconds']:.2f} s | {s['seconds'] / ideal:.2f}× | {s['cpu_seconds']:.2f} s | {s['peak_mib']:.0f} MiB |")
    print(f"\npromptfoo ÷ kerf: wall {f['seconds'] / k['seconds']:.2f}×, CPU {f['cpu_seconds'] / k['cpu_seconds']:.1f}×, peak memory {f['peak_mib'] / k['peak_mib']:.1f}×")
    node, entry = promptfoo.split(" ", 1)
    versions = {
        "kerf": subprocess.run([kerf, "--version"], capture_output=True, text=True).stdout.strip(),
        "promptfoo": subprocess.run([node, entry, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1],
        "node": subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip(),
    }
    results = {
        "date": time.strftime("%Y-%m-%d"), "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores", "versions": versions,
        "rows": opts.rows, "prompts": 2, "concurrency": opts.concurrency, "delay_s": opts.delay, "ideal_s": ideal,
        "counts": t, "same_conversations": True, "runs": runs, "median": summary,
    }
    (HERE / "results.json").write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
