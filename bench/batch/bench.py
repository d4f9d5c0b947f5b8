"""A 10,000-request eval by batch against a loopback OpenAI Batch API: how big the input file
is, how long `kerf eval --batch` takes to plan, store and submit it, and how long
`kerf eval collect` takes to download, fold and score the results.

The server follows OpenAI's documented shapes (POST /v1/files with purpose=batch, POST
/v1/batches, GET /v1/batches/ID, GET /v1/files/ID/content) and answers every chat line with
the document's expected records as JSONL, so the eval scores F1 1.0 when every result is
folded in. Results go to bench/batch/results.json.

    python3 bench/batch/bench.py --kerf PATH [--rows N] [--budgets A,B] [--reps N]
"""

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class State:
    def __init__(self):
        self.lock = threading.Lock()
        self.files = {}
        self.batches = {}
        self.uploaded = []
        self.n = 0


def reply_for(body):
    """The canned chat completion for one line: the document's records, one per line."""
    text = json.dumps(body["messages"])
    m = re.search(r"Entity number (\d+)", text)
    n = m.group(1) if m else "0"
    content = json.dumps({"type": "definition", "entity": f"Entity {n}", "definition": f"Definition {n}"})
    return {
        "id": "chatcmpl-x",
        "object": "chat.completion",
        "model": body.get("model"),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": len(text) // 4, "completion_tokens": len(content) // 4},
    }


def handler(state):
    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def send(self, code, payload, ctype="application/json"):
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            if self.path == "/v1/files":
                boundary = self.headers["content-type"].split("boundary=")[1].encode()
                start = body.index(b"\r\n\r\n", body.index(b'name="file"')) + 4
                end = body.rindex(b"\r\n--" + boundary + b"--")
                data = body[start:end]
                with state.lock:
                    state.n += 1
                    fid = f"file-{state.n}"
                    state.files[fid] = data
                    state.uploaded.append(len(data))
                return self.send(200, {"id": fid, "object": "file", "bytes": len(data), "purpose": "batch"})
            if self.path == "/v1/batches":
                req = json.loads(body)
                lines = state.files[req["input_file_id"]].decode().splitlines()
                out = []
                for line in lines:
                    v = json.loads(line)
                    out.append(json.dumps({"id": "r", "custom_id": v["custom_id"],
                                           "response": {"status_code": 200, "request_id": "r", "body": reply_for(v["body"])},
                                           "error": None}))
                out.reverse()  # results come back in any order
                with state.lock:
                    state.n += 1
                    bid = f"batch_{state.n}"
                    state.files[f"out-{bid}"] = ("\n".join(out) + "\n").encode()
                    state.batches[bid] = len(lines)
                return self.send(200, {"id": bid, "object": "batch", "status": "validating"})
            self.send(404, {"error": {"message": "not here"}})

        def do_GET(self):
            m = re.fullmatch(r"/v1/batches/([^/]+)", self.path)
            if m:
                n = state.batches[m.group(1)]
                return self.send(200, {"id": m.group(1), "object": "batch", "status": "completed",
                                       "output_file_id": f"out-{m.group(1)}", "error_file_id": None,
                                       "request_counts": {"total": n, "completed": n, "failed": 0}})
            m = re.fullmatch(r"/v1/files/([^/]+)/content", self.path)
            if m:
                return self.send(200, state.files[m.group(1)], "application/binary")
            self.send(404, {"error": {"message": "not here"}})

    return H


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kerf", required=True)
    ap.add_argument("--rows", type=int, default=5000)
    ap.add_argument("--budgets", default="256,1024")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    state = State()
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler(state))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    runs = []
    for rep in range(args.reps):
        work = tempfile.mkdtemp(prefix="kerf-batch-bench-")
        env = dict(os.environ, KERF_CONFIG_DIR=work, KERF_DATA_DIR=work, KERF_KEYRING="kernel")
        kerf = lambda *a, **kw: subprocess.run([args.kerf, *a], env=env, cwd=ROOT, capture_output=True, text=True, **kw)
        add = kerf("providers", "add", "bench", "--kind", "openai", "--base-url", url, "--model", "gpt-4o-mini", "--no-key", "--batch-api")
        assert add.returncode == 0, add.stderr
        data = os.path.join(work, "rows.jsonl")
        with open(data, "w") as f:
            for i in range(args.rows):
                f.write(json.dumps({"id": f"r{i}", "input": f"Entity number {i} is a thing worth defining.",
                                    "expected": [{"type": "definition", "entity": f"Entity {i}", "definition": f"Definition {i}"}]}) + "\n")
        before = len(state.uploaded)
        t0 = time.perf_counter()
        sent = kerf("eval", data, "--prompt", "prompts/agent-kg-extract.json", "--provider", "bench",
                    "--max-tokens", args.budgets, "--constrain", "none", "--batch", "--yes", "--json")
        submit_s = time.perf_counter() - t0
        assert sent.returncode == 0, sent.stderr
        experiment = json.loads(sent.stdout)["experiment"]
        requests = sum(b["requests"] for b in json.loads(sent.stdout)["batches"])
        t0 = time.perf_counter()
        got = kerf("eval", "collect", str(experiment), "--json")
        collect_s = time.perf_counter() - t0
        assert got.returncode == 0, got.stderr
        report = json.loads(got.stdout)
        # The report alone (scoring every cell from the history), to tell the fold's share.
        t0 = time.perf_counter()
        shown = kerf("eval", "show", str(experiment), "--json")
        report_s = time.perf_counter() - t0
        assert shown.returncode == 0, shown.stderr
        f1 = [line["f1"] for line in report["summary"]]
        assert all(x == 1.0 for x in f1), f1
        runs.append({"requests": requests, "file_bytes": sum(state.uploaded[before:]),
                     "submit_seconds": round(submit_s, 3), "collect_seconds": round(collect_s, 3),
                     "report_seconds": round(report_s, 3), "fold_seconds": round(collect_s - report_s, 3),
                     "history_bytes": os.path.getsize(os.path.join(work, "history.sqlite"))})
        print(json.dumps(runs[-1]), file=sys.stderr)
        shutil.rmtree(work, ignore_errors=True)
    med = lambda k: sorted(r[k] for r in runs)[len(runs) // 2]
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "kerf": os.path.relpath(args.kerf, os.environ.get("CARGO_TARGET_DIR", ROOT)),
        "runs": runs,
        "median": {k: med(k) for k in ("requests", "file_bytes", "submit_seconds", "collect_seconds", "report_seconds", "fold_seconds")},
    }
    with open(os.path.join(ROOT, "bench", "batch", "results.json"), "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(json.dumps(result["median"]))


if __name__ == "__main__":
    main()
