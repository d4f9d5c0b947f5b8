"""`--concurrency auto` against fixed numbers, on a loopback server with a fixed capacity that
answers 429 (with `retry-after-ms`) to a request past it: a small capacity (the client must back
off) and a large one (it must grow). Each run is the same eval (ROWS rows of the knowledge-graph
dataset, made distinct, × 2 prompts, one 1,024-token budget) in a fresh data folder; the server
answers each request it takes after DELAY seconds. Reported: wall time, cells/s against the
capacity's ideal (cells × delay / capacity), cells failed (a request refused past its retries),
429s, the most the server answered at once.
KERF_MAX_REFUSALS is raised so a fixed number far past the capacity is measured, not stopped.
Results go to bench/concurrency/results.json.

    python3 bench/concurrency/bench.py [--rows N] [--delay S] [--capacities 4,32] [--fixed 4,16]
"""

import argparse
import datetime
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
spec = importlib.util.spec_from_file_location("eval_bench", REPO / "bench/eval/bench.py")
eval_bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(eval_bench)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=120)
    ap.add_argument("--delay", type=float, default=0.25)
    ap.add_argument("--capacities", default="4,32")
    ap.add_argument("--fixed", default="4,16")
    a = ap.parse_args()
    kerf = os.environ.get("KERF_BIN", "kerf")
    tmp = Path(tempfile.mkdtemp(prefix="kerf-bench-concurrency-"))
    data, _ = eval_bench.dataset(tmp, a.rows)
    cells = 2 * a.rows
    runs = []
    for capacity in [int(c) for c in a.capacities.split(",")]:
        server = subprocess.Popen([sys.executable, str(REPO / "bench/eval/server.py"), str(data), "agent-kg-extract", str(a.delay), str(capacity)],
                                  stdout=subprocess.PIPE, text=True)  # fmt: skip
        try:
            base = f"http://127.0.0.1:{server.stdout.readline().strip()}"
            stats = lambda: json.load(urllib.request.urlopen(base + "/stats"))  # noqa: E731
            stats()
            ideal = cells * a.delay / capacity
            for concurrency in ["auto", *a.fixed.split(",")]:
                home = tmp / f"kerf-{capacity}-{concurrency}"
                home.mkdir()
                env = dict(os.environ, KERF_DATA_DIR=str(home), KERF_CONFIG_DIR=str(home), KERF_KEYRING="kernel", KERF_MAX_REFUSALS="100000")
                subprocess.run([kerf, "providers", "add", "bench", "--kind", "openai", "--base-url", base + "/v1", "--model", "loopback", "--no-key"],
                               env=env, check=True, capture_output=True)  # fmt: skip
                t0 = time.perf_counter()
                r = subprocess.run([kerf, "eval", str(data), "--prompt", str(eval_bench.PROMPTS["jsonl"]), "--prompt", str(eval_bench.PROMPTS["array"]),
                                    "--provider", "bench", "--max-tokens", "1024", "--constrain", "none", "--concurrency", concurrency, "--json", "--yes"],
                                   env=env, cwd=REPO, capture_output=True, text=True)  # fmt: skip
                seconds = time.perf_counter() - t0
                # A fixed number far past the capacity fails cells (each spends its retries on
                # 429s): that is part of what is measured, so the eval may exit 2.
                assert r.returncode in (0, 2) and r.stdout, f"kerf eval exited {r.returncode}: {r.stderr[-2000:]}"
                report = json.loads(r.stdout)
                assert len(report["cells"]) == cells, "not every cell reported"
                failed = sum(1 for c in report["cells"] if c["status"] != "ok" and c["status"] != "truncated")
                s = stats()
                run = {"capacity": capacity, "concurrency": concurrency, "cells": cells, "failed": failed, "seconds": round(seconds, 2),
                       "cells_per_s": round((cells - failed) / seconds, 2), "of_ideal": round(ideal / seconds * (cells - failed) / cells, 3),
                       "refused": s["refused"], "peak_at_server": s["peak"]}  # fmt: skip
                runs.append(run)
                print(f"capacity {capacity:>3}, --concurrency {concurrency:>4}: {failed:>3} failed, {seconds:6.2f} s, {run['cells_per_s']:6.2f} cells/s "
                      f"({run['of_ideal'] * 100:5.1f} % of the ideal {ideal:.2f} s), {s['refused']:>5} refused, at most {s['peak']} at once", flush=True)  # fmt: skip
        finally:
            server.terminate()
    result = {
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "rows": a.rows,
        "delay_s": a.delay,
        "runs": runs,
    }
    (HERE / "results.json").write_text(json.dumps(result, indent=1) + "\n")
    print("wrote bench/concurrency/results.json")


if __name__ == "__main__":
    main()
