#!/usr/bin/env python3
"""Throughput of one eval through a LiteLLM proxy over one vs two `llama-server`s on the bundled
model, with `--concurrency auto` (Kerf's default) and with fixed numbers; one server without the
proxy as the baseline. Each set-up gets fresh servers and a fresh Kerf data folder (nothing cached)
and runs the same eval: ROWS rows of datasets/knowledge-graph.jsonl, the JSON-array prompt held to
its schema (`json_schema`), temperature 0, a 256-token budget, one request per cell
(`--max-requests 1`: no repair requests, so every set-up does the same work).

The machine's cores are split evenly: one server gets every core (--threads = cores) and two
get half each, and the slots are split the same way (one server: 4, two: 2 each), so each set-up
has the same CPU and the same number of requests the servers decode together.

Stdlib only; reuses the process handling of tests/router/router_test.py. Writes
bench/router/results.json and prints a table.

  python3 bench/router/bench.py --kerf K --llama-server L --model M --litellm X [--rows N] [--reps N]
"""

import argparse
import datetime
import importlib.util
import json
import os
import platform
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
spec = importlib.util.spec_from_file_location("router_test", os.path.join(REPO, "tests", "router", "router_test.py"))
rt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rt)

SLOTS = 4  # in all, split among the servers


def setups(fixed):
    yield {"name": "one server, no proxy, auto", "servers": 1, "proxy": False, "concurrency": "auto"}
    for servers in (1, 2):
        yield {"name": f"proxy over {servers}, auto", "servers": servers, "proxy": True, "concurrency": "auto"}
        for n in fixed:
            yield {"name": f"proxy over {servers}, fixed {n}", "servers": servers, "proxy": True, "concurrency": str(n)}


def lscpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        m = re.search(r"Model name:\s*(.+)", out)
        return m.group(1).strip() if m else platform.processor()
    except OSError:
        return platform.processor()


def one(a, setup, rows, cores):
    procs = rt.Processes()
    with tempfile.TemporaryDirectory(prefix="kerf-router-bench-") as tmp:
        try:
            threads = max(1, cores // setup["servers"])
            slots = max(1, SLOTS // setup["servers"])

            def llama(port):
                return [
                    a.llama_server, "--model", a.model, "--ctx-size", str(2048 * slots),
                    "--parallel", str(slots), "--threads", str(threads),
                    "--host", "127.0.0.1", "--port", str(port),
                ]  # fmt: skip

            ports = [
                rt.start_server(procs, f"server-{i}", llama, "/health", tmp=tmp)
                for i in range(setup["servers"])
            ]
            key = "sk-" + secrets.token_hex(24)
            if setup["proxy"]:
                config_path = os.path.join(tmp, "litellm.yaml")
                config = rt.litellm_config(ports, key, health=True)
                config["general_settings"]["health_check_interval"] = a.health_interval
                with open(config_path, "w") as f:
                    json.dump(config, f, indent=2)
                env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_LOG="ERROR")
                env.pop("LITELLM_MASTER_KEY", None)
                for _ in range(3):
                    port = rt.free_port()
                    procs.start(
                        "litellm",
                        [a.litellm, "--config", config_path, "--host", "127.0.0.1", "--port", str(port)],
                        os.path.join(tmp, "litellm.log"),
                        env=env,
                    )
                    if rt.wait_up(procs, "litellm", f"http://127.0.0.1:{port}/health/readiness"):
                        break
                    procs.stop("litellm")
                else:
                    raise RuntimeError("the LiteLLM proxy did not come up")
                url, auth = f"http://127.0.0.1:{port}/v1", ["--key-env", "KERF_ROUTER_TEST_KEY"]
            else:
                url, auth = f"http://127.0.0.1:{ports[0]}/v1", ["--no-key"]
            home = os.path.join(tmp, "kerf")
            os.makedirs(home)
            kerf = rt.Kerf(a.kerf, home, "KERF_ROUTER_TEST_KEY", key)
            kerf.run(
                "providers", "add", "bench", "--kind", "openai", "--base-url", url,
                "--model", rt.MODEL_NAME, "--structured", "json_schema", *auth,
            )  # fmt: skip
            # one request per cell (no repair requests): the same work in every set-up
            args = kerf.eval_args("bench", rows) + ["--concurrency", setup["concurrency"], "--max-requests", "1"]
            load_before = os.getloadavg()[0]
            start = time.monotonic()
            r = kerf.run(*args, check=False)
            seconds = time.monotonic() - start
            report = json.loads(r.stdout)
            prov = report["providers"][0]
            return {
                **setup,
                "threads_per_server": threads,
                "slots_per_server": slots,
                "exit": r.returncode,
                "cells": prov["cells"],
                "failed": prov["failed"],
                "truncated": prov["truncated"],
                "completion_tokens": prov["completion_tokens"],
                "seconds": round(seconds, 2),
                "cells_per_s": round(prov["measured"] / seconds, 3),
                "output_tokens_per_s": round(prov["completion_tokens"] / seconds, 2),
                "latency_p50_s": prov["seconds_p50"],
                "latency_p95_s": prov["seconds_p95"],
                # the 1-minute load average before the set-up's own eval started: above ~0.5
                # something else was using the CPU (its servers' start-up counts too)
                "load_before": round(load_before, 2),
            }
        finally:
            procs.stop_all()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kerf", default=os.environ.get("KERF_BIN"), required=not os.environ.get("KERF_BIN"))
    ap.add_argument("--llama-server", default=os.environ.get("LLAMA_SERVER"), required=not os.environ.get("LLAMA_SERVER"))
    ap.add_argument("--model", default=os.environ.get("MODEL"), required=not os.environ.get("MODEL"))
    ap.add_argument("--litellm", default=os.environ.get("LITELLM"), required=not os.environ.get("LITELLM"))
    ap.add_argument("--rows", type=int, default=16)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--fixed", default="4", help="fixed --concurrency values, comma-separated")
    ap.add_argument("--health-interval", type=int, default=5, help="the proxy's health_check_interval")
    ap.add_argument("--only", default="", help="run only the set-ups whose name contains this")
    a = ap.parse_args()
    # a SIGTERM ends the set-up under way through its `finally` (its servers and proxy stopped)
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
    cores = os.cpu_count() or 1
    fixed = [int(x) for x in a.fixed.split(",") if x]
    runs = []
    for rep in range(a.reps):
        for setup in setups(fixed):
            if a.only and a.only not in setup["name"]:
                continue
            r = one(a, setup, a.rows, cores)
            r["rep"] = rep
            runs.append(r)
            print(
                f"{r['name']:<28} {r['cells']:>3} cells {r['failed']} failed  {r['seconds']:>7.1f} s  "
                f"{r['cells_per_s']:.3f} cells/s  {r['output_tokens_per_s']:.1f} out tok/s  "
                f"p50 {r['latency_p50_s']} s  p95 {r['latency_p95_s']} s",
                flush=True,
            )
    litellm_version = subprocess.run(
        [os.path.join(os.path.dirname(a.litellm), "python"), "-c", "import importlib.metadata as m; print(m.version('litellm'))"],
        capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    server_version = subprocess.run([a.llama_server, "--version"], capture_output=True, text=True)
    result = {
        "date": datetime.date.today().isoformat(),
        "machine": f"{lscpu_model()}, {cores} cores ({platform.machine()}), "
        f"{round(os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30)} GiB",
        "litellm": litellm_version,
        "llama_server": (server_version.stdout + server_version.stderr).strip().splitlines()[0:1],
        "model": os.path.basename(a.model),
        "eval": {
            "rows": a.rows,
            "prompt": "prompts/agent-kg-extract-array.json",
            "structured": "json_schema",
            "temperature": 0,
            "max_tokens": 256,
            "max_requests": 1,
        },
        "proxy": {"routing_strategy": "simple-shuffle", "num_retries": 3, "health_check_interval": a.health_interval},
        "slots_in_all": SLOTS,
        "runs": runs,
    }
    with open(os.path.join(HERE, "results.json"), "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print(f"wrote {os.path.relpath(os.path.join(HERE, 'results.json'), REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
