"""Peak memory of `kerf eval` where an eval is large (issue 36, item 13): replies at the reply cap,
and a dataset of a million rows.

(a) Large replies. A loopback OpenAI-compatible server answers every chat completion with a
    JSONL reply of more than KERF_MAX_REPLY_MIB (64 MiB) of valid records (the row's expected
    records first, then made-up definitions), streamed as SSE; Kerf keeps what arrived before
    the cap and measures the cell (`truncated`). The eval is 2 prompts (agent-kg-extract and a
    copy of it under another id, its twin) × 4 budgets × 1 row = 8 cells, each holding a reply
    at the cap. The eval itself is measured (with each binary, each into its own history);
    then, on the first one's history, each of these:
      kerf eval show --json · kerf eval rescore --json · kerf eval report --html
(b) A big dataset. ROWS rows (default 1,000,000) of JSONL, each a short document with its
    expected records (the shipped datasets/knowledge-graph.jsonl's, cycled):
      kerf eval --dry-run                    plans the eval: every row checked and rendered
      kerf eval (a real start)               up to its first request, which the server holds;
                                             the process is killed then (its peak so far is
                                             read from /proc/PID/status, VmHWM)

Peak memory is the process's peak resident set (GNU time's %M, or VmHWM); wall time is process
start to exit (to the first request for the start). With --baseline OLD_KERF, every
run is also made with OLD_KERF, alternating, on the same history and dataset, and the outputs
of the two binaries are compared byte for byte (sha256 of stdout and of the HTML file).

    python3 bench/eval-memory/bench.py --kerf KERF [--baseline OLD_KERF] [--rows N] [--reps N]
        [--skip-replies] [--skip-dataset] [--out results.json]
"""

import argparse
import hashlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PROMPT = REPO / "prompts/agent-kg-extract.json"
MIB = 1 << 20


def args():
    p = argparse.ArgumentParser()
    p.add_argument("--kerf", required=True)
    p.add_argument("--baseline")
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--reps", type=int, default=1)
    p.add_argument("--reply-mib", type=int, default=70, help="what the server sends per reply (Kerf keeps 64 MiB)")
    p.add_argument("--skip-replies", action="store_true")
    p.add_argument("--skip-dataset", action="store_true")
    p.add_argument("--out", default=str(HERE / "results.json"))
    return p.parse_args()


def shipped():
    return [json.loads(line) for line in open(REPO / "datasets/knowledge-graph.jsonl", encoding="utf-8")]


class Server:
    """Loopback chat completions: `body` (bytes, an SSE stream) for every request, or, with `hold`,
    no answer at all (the request is noted in `first`, then held until the client goes)."""

    def __init__(self, body=b"", hold=False):
        self.body, self.hold = body, hold
        self.first = threading.Event()
        self.requests = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                out = json.dumps({"object": "list", "data": [{"id": "loopback", "object": "model"}]}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def do_POST(self):
                self.rfile.read(int(self.headers.get("content-length", 0)))
                server.requests += 1
                server.first.set()
                if server.hold:
                    time.sleep(3600)
                    return
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(server.body)))
                self.end_headers()
                try:
                    view = memoryview(server.body)
                    for i in range(0, len(view), MIB):
                        self.wfile.write(view[i:i + MIB])
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self):
        self.httpd.shutdown()


def sse_reply(expected, mib):
    """An SSE stream of a JSONL reply: `expected`, then made-up definitions, past `mib` MiB."""
    base = {"id": "chatcmpl-bench", "created": 0, "model": "loopback", "object": "chat.completion.chunk"}
    lines = [json.dumps({k: v for k, v in r.items() if k != "aliases"}) for r in expected]
    n = 0
    parts, size, text = [], 0, []
    while size < mib * MIB:
        while sum(len(t) + 1 for t in text) < 60_000:
            if lines:
                text.append(lines.pop(0))
            else:
                text.append(json.dumps({"type": "definition", "entity": f"Made-up thing {n}",
                                        "definition": f"A thing the document does not name, number {n}, said at length to look like a model's"}))
                n += 1
        chunk = dict(base, choices=[{"index": 0, "delta": {"content": "\n".join(text) + "\n"}, "finish_reason": None}])
        event = f"data: {json.dumps(chunk)}\n\n".encode()
        parts.append(event)
        size += len(event)
        text = []
    end = dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}])
    parts.append(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode())
    return b"".join(parts), n


def measured(cmd, env, cwd):
    """Runs `cmd` under /usr/bin/time; returns (seconds, peak RSS bytes, exit code, stdout bytes,
    stderr text). The peak is GNU time's %M for the process it starts: a process started by
    this (large) Python would carry Python's own peak in its rusage from the fork and exec."""
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    with tempfile.NamedTemporaryFile("r") as timing:
        start = time.perf_counter()
        proc = subprocess.run(["/usr/bin/time", "-o", timing.name, "-f", "%M %x"] + cmd, env=env, cwd=cwd,
                              stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        seconds = time.perf_counter() - start
        lines = [line for line in open(timing.name).read().splitlines() if line.strip()]
    peak_kib, code = lines[-1].split()
    out.seek(0)
    err.seek(0)
    return seconds, int(peak_kib) * 1024, int(code), out.read(), err.read().decode(errors="replace")


def until_first_request(cmd, env, cwd, server, limit=3600):
    """Runs `cmd` until `server` sees its first request; returns (seconds, peak RSS bytes then)."""
    server.first.clear()
    err = tempfile.TemporaryFile()
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL)
    while not server.first.wait(0.05):
        if proc.poll() is not None:
            err.seek(0)
            raise SystemExit(f"{cmd[0]} ended ({proc.returncode}) before its first request: {err.read().decode()[-3000:]}")
        if time.perf_counter() - start > limit:
            proc.kill()
            raise SystemExit("no request in time")
    seconds = time.perf_counter() - start
    with open(f"/proc/{proc.pid}/status") as f:
        hwm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return seconds, hwm


def kerf_env(home):
    return dict(os.environ, KERF_DATA_DIR=str(home), KERF_CONFIG_DIR=str(home), KERF_KEYRING="kernel", NO_COLOR="1")


def add_provider(kerf, env, url):
    subprocess.run([kerf, "providers", "add", "bench", "--kind", "openai", "--base-url", url, "--model", "loopback", "--no-key"],
                   env=env, check=True, capture_output=True)


def fmt(run):
    return f"{run['seconds']:8.2f} s  peak {run['peak_bytes'] / MIB:8.1f} MiB"


def replies(opts, tmp, binaries):
    """(a): 8 cells at the reply cap, then show / rescore / report of them with each binary."""
    row = shipped()[0]
    expected = row["expected"]["agent-kg-extract"]
    data = tmp / "one-row.jsonl"
    data.write_text(json.dumps({"id": row["id"], "input": row["input"], "expected": {"agent-kg-extract": expected}}) + "\n")
    # The second prompt: the same file under another id, the first one its twin (so it scores
    # against the same expected records).
    twin = json.loads(PROMPT.read_text())
    twin["id"], twin["twin"] = "agent-kg-extract-b", "agent-kg-extract"
    prompt_b = tmp / "agent-kg-extract-b.json"
    prompt_b.write_text(json.dumps(twin, indent=1))
    body, made_up = sse_reply(expected, opts.reply_mib)
    print(f"(a) each reply: {len(body) / MIB:.1f} MiB of SSE ({made_up} made-up records after the {len(expected)} expected); Kerf keeps 64 MiB", flush=True)
    server = Server(body)
    # The eval itself, with each binary (each into its own history); the first one's history is
    # the one the reading commands are measured on.
    evals, homes = {}, {}
    for label, kerf in binaries:
        home = tmp / f"replies-home-{label}"
        home.mkdir()
        env = kerf_env(home)
        add_provider(kerf, env, server.url)
        cmd = [kerf, "eval", str(data), "--prompt", str(PROMPT), "--prompt", str(prompt_b), "--provider", "bench",
               "--max-tokens", "1024,2048,4096,8192", "--constrain", "none", "--concurrency", "1", "--json"]
        seconds, peak, code, out, err = measured(cmd, env, REPO)
        report = json.loads(out) if out else None
        assert report and len(report["cells"]) == 8, f"{label}: the eval did not measure 8 cells (exit {code}): {err[-3000:]}"
        want = "truncated" if len(body) > 64 * MIB else "ok"
        assert all(c["status"] == want for c in report["cells"]), [c["status"] for c in report["cells"]]
        objects = [c["objects"] for c in report["cells"]]
        db = sum(f.stat().st_size for f in home.rglob("*") if f.is_file())
        evals[label] = {"seconds": seconds, "peak_bytes": peak, "history_bytes": db}
        print(f"    kerf eval       {label:<9} {seconds:8.2f} s  peak {peak / MIB:8.1f} MiB  ({objects[0]} objects per cell; history {db / MIB:.0f} MiB)", flush=True)
        homes.setdefault("first", (home, env, report))
        if home != homes["first"][0]:
            shutil.rmtree(home)
    server.close()
    home, env, report = homes["first"]
    experiment = str(report["experiment"])
    commands = {
        "show --json": ["eval", "show", experiment, "--json"],
        "rescore --json": ["eval", "rescore", experiment, "--json"],
        "report --html": ["eval", "report", experiment, "--html", "{html}"],
    }
    results, digests = {}, {}
    for rep in range(opts.reps):
        order = binaries if rep % 2 == 0 else list(reversed(binaries))
        for name, argv in commands.items():
            for label, kerf in order:
                html = tmp / f"report-{label}.html"
                cmd = [kerf] + [a.replace("{html}", str(html)) for a in argv]
                seconds, peak, code, out, err = measured(cmd, env, REPO)
                assert code == 0, f"{label} {name} exited {code}: {err[-3000:]}"
                produced = html.read_bytes() if name.startswith("report") else out
                digest = hashlib.sha256(produced).hexdigest()
                digests.setdefault(name, {}).setdefault(label, digest)
                assert digests[name][label] == digest, f"{label} {name}: output changed between runs"
                results.setdefault(name, {}).setdefault(label, []).append(
                    {"seconds": seconds, "peak_bytes": peak, "output_bytes": len(produced), "sha256": digest})
                print(f"    {name:<15} {label:<9} {fmt(results[name][label][-1])}  output {len(produced) / MIB:7.1f} MiB", flush=True)
                if html.exists():
                    html.unlink()
    same = {name: len(set(d.values())) == 1 for name, d in digests.items()}
    if len(binaries) > 1:
        print(f"    same output from both binaries: {same}", flush=True)
    shutil.rmtree(home)
    return {"cells": 8, "reply_sse_mib": len(body) / MIB, "objects_per_cell": report["cells"][0]["objects"],
            "history_mib": evals[binaries[0][0]]["history_bytes"] / MIB, "eval": evals, "runs": results, "same_output": same}


def big_dataset(opts, tmp, binaries):
    """(b): a dataset of `rows` rows, planned (--dry-run) and started up to its first request."""
    base = shipped()
    data = tmp / "big.jsonl"
    with open(data, "w", encoding="utf-8") as f:
        for n in range(opts.rows):
            b = base[n % len(base)]
            text = b["input"].split(". ")[0] + f". (Document {n}.)"
            rec = [{k: v for k, v in r.items() if k != "aliases"} for r in b["expected"]["agent-kg-extract"][:2]]
            f.write(json.dumps({"id": f"{b['id']}-{n}", "input": text, "expected": {"agent-kg-extract": rec}}) + "\n")
    size = data.stat().st_size
    print(f"(b) {opts.rows} rows, {size / MIB:.0f} MiB of JSONL", flush=True)
    server = Server(hold=True)
    results = {}
    common = ["eval", str(data), "--prompt", str(PROMPT), "--provider", "bench", "--max-tokens", "1024", "--constrain", "none", "--yes"]
    for rep in range(opts.reps):
        order = binaries if rep % 2 == 0 else list(reversed(binaries))
        for label, kerf in order:
            home = tmp / f"data-home-{label}-{rep}"
            home.mkdir()
            env = kerf_env(home)
            add_provider(kerf, env, server.url)
            seconds, peak, code, out, err = measured([kerf] + common + ["--dry-run"], env, REPO)
            assert code == 0, f"{label} --dry-run exited {code}: {err[-3000:]}"
            results.setdefault("dry run", {}).setdefault(label, []).append({"seconds": seconds, "peak_bytes": peak, "plan": err.strip().splitlines()[-1]})
            print(f"    dry run     {label:<9} {fmt(results['dry run'][label][-1])}  {err.strip().splitlines()[-1]}", flush=True)
            seconds, peak = until_first_request([kerf] + common, env, REPO, server)
            results.setdefault("start to first request", {}).setdefault(label, []).append({"seconds": seconds, "peak_bytes": peak})
            print(f"    start       {label:<9} {fmt(results['start to first request'][label][-1])}", flush=True)
            shutil.rmtree(home)
    server.close()
    data.unlink()
    return {"rows": opts.rows, "dataset_mib": size / MIB, "runs": results}


def main():
    opts = args()
    binaries = [("after", opts.kerf)] + ([("before", opts.baseline)] if opts.baseline else [])
    tmp = Path(tempfile.mkdtemp(prefix="kerf-bench-eval-memory-"))
    results = {"date": time.strftime("%Y-%m-%d"), "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB",
               "binaries": dict(binaries)}
    try:
        if not opts.skip_replies:
            results["replies"] = replies(opts, tmp, binaries)
        if not opts.skip_dataset:
            results["dataset"] = big_dataset(opts, tmp, binaries)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    Path(opts.out).write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {opts.out}")


if __name__ == "__main__":
    sys.exit(main())
