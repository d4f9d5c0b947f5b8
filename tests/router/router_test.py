#!/usr/bin/env python3
"""A fleet behind a real router: Kerf's `kerf eval` through a pinned LiteLLM proxy in front of two
`llama-server`s on the bundled model.

  1. The same eval on one `llama-server` directly and through the proxy over two: every cell
     finished, and the same objects cell by cell (temperature 0, one slot and one thread per
     server, the same binary and model: each request is computed alone, so the servers answer it
     token for token alike; several slots batch requests together and change the last digits).
  2. An eval through the proxy while one of the two servers is killed (SIGKILL) in the middle of
     a reply, once a drawn number of cells has been stored: every cell finishes except, at most,
     the proxy re-sends the requests the dead server had not begun, and Kerf itself sends again
     the one whose reply it was streaming (a reply that has begun cannot move): every cell
     finishes in that one eval, nothing is left pending, a resume sends nothing, and the objects
     are still the ones the direct eval extracted.

Stdlib only. Paths from the arguments or the environment:
  --kerf / KERF_BIN          the kerf binary
  --llama-server / LLAMA_SERVER
  --model / MODEL            the bundled GGUF model
  --litellm / LITELLM        the `litellm` executable (`bash scripts/router-venv | tail -n 1`)
KERF_TEST_SEED draws the kill point (printed; set it to replay). ROUTER_TEST_ROWS (default 8)
and ROUTER_TEST_KILL_ROWS (default 12) size the two evals; ROUTER_TEST_HEALTH=0 leaves the
proxy's health-check routing out (to watch the trap it guards against: that run is expected to
fail); ROUTER_TEST_LOGS=DIR keeps the servers' and the proxy's logs there. Every process it starts is stopped when it ends, however it ends. The last line reads
`N passed, M failed (router)`; the exit status is 0 only when M is 0.
"""

import argparse
import ctypes
import json
import os
import random
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests"))
from checks import Checks  # noqa: E402

DATASET = os.path.join(REPO, "datasets", "knowledge-graph.jsonl")
PROMPT = os.path.join(REPO, "prompts", "agent-kg-extract-array.json")
MODEL_NAME = "smollm2"
FINISHED = ("ok", "truncated")


def log(msg):
    print(msg, flush=True)


# --- processes ----------------------------------------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def _die_with_parent():
    # Each child runs in its own process group (killed as a group below) and gets SIGKILL
    # should this script itself be killed with no chance to clean up.
    os.setsid()
    if _libc is not None:
        _libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Processes:
    """Every process this test starts; `stop_all` ends them (and their children)."""

    def __init__(self):
        self.procs = {}

    def start(self, name, argv, log_path, env=None):
        out = open(log_path, "wb")
        p = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=_die_with_parent,
        )
        out.close()
        self.procs[name] = (p, log_path)
        return p

    def kill(self, name, sig=signal.SIGKILL):
        p, _ = self.procs[name]
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            pass
        p.wait()

    def stop(self, name):
        p, _ = self.procs.pop(name)
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(p.pid, signal.SIGKILL)  # what is left of its group
        except (ProcessLookupError, PermissionError):
            pass
        p.wait()

    def stop_all(self):
        for name in list(self.procs):
            self.stop(name)

    def tail(self, name, lines=40):
        _, path = self.procs[name]
        with open(path, "rb") as f:
            return b"\n".join(f.read().splitlines()[-lines:]).decode(errors="replace")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_ok(url, headers=None, timeout=2):
    try:
        req = urllib.request.Request(url, headers=headers or {})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def wait_up(procs, name, url, headers=None, deadline_s=300):
    p, _ = procs.procs[name]
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if p.poll() is not None:
            return False
        if http_ok(url, headers):
            return True
        time.sleep(0.3)
    return False


def start_server(procs, name, argv_for_port, ready_path, headers=None, tmp=None):
    """Started on a free port, waited for until `ready_path` answers 200; if something took the
    port between picking and binding it, started again on another (3 tries)."""
    for attempt in range(3):
        port = free_port()
        log_path = os.path.join(tmp, f"{name}.log")
        procs.start(name, argv_for_port(port), log_path)
        if wait_up(procs, name, f"http://127.0.0.1:{port}{ready_path}", headers):
            return port
        text = procs.tail(name)
        procs.stop(name)
        if "address already in use" not in text.lower():
            raise RuntimeError(f"{name} did not come up:\n{text}")
        log(f"# port {port} was taken before {name} bound it; again ({attempt + 1} of 3)")
    raise RuntimeError(f"{name}: no free port in 3 tries")


# --- the router's configuration -------------------------------------------------------------


def litellm_config(server_ports, master_key, health=True):
    """The proxy's config (JSON is YAML): one model group over the servers. What makes a killed
    server drop out of rotation, and why, is in docs/src/router.md."""
    deployments = [
        {
            "model_name": MODEL_NAME,
            "litellm_params": {
                "model": f"openai/{MODEL_NAME}",
                "api_base": f"http://127.0.0.1:{port}/v1",
                "api_key": "none",
            },
            # the probe is a real completion: one token keeps it cheap
            "model_info": {"health_check_max_tokens": 1},
        }
        for port in server_ports
    ]
    config = {
        "model_list": deployments,
        "router_settings": {"num_retries": 3, "routing_strategy": "simple-shuffle"},
        "general_settings": {"master_key": master_key},
    }
    if health:
        config["general_settings"].update(
            {
                "background_health_checks": True,
                "health_check_interval": 2,
                "enable_health_check_routing": True,
            }
        )
    return config


# --- kerf ----------------------------------------------------------------------------------------


class Kerf:
    def __init__(self, binary, home, key_env, key):
        self.binary = binary
        self.retries = {}  # by cell: the retries Kerf's own client made, and why
        self.env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY")
        }
        self.env.update(
            {"KERF_DATA_DIR": home, "KERF_CONFIG_DIR": home, "KERF_KEYRING": "kernel", key_env: key}
        )

    def run(self, *args, check=True):
        r = subprocess.run(
            [self.binary, *args], cwd=REPO, env=self.env, capture_output=True, text=True
        )
        if check and r.returncode != 0:
            raise RuntimeError(f"kerf {' '.join(args)}: exit {r.returncode}\n{r.stdout}\n{r.stderr}")
        return r

    def eval_args(self, provider, rows):
        return [
            "eval", DATASET, "--prompt", PROMPT, "--provider", provider,
            "--temperature", "0", "--max-tokens", "256", "--limit", str(rows), "--json",
        ]  # fmt: skip

    def cells(self, report):
        """Each cell's (status, finish reason, objects) by (row, prompt, budget, repeat), the
        objects as the history stored them."""
        out = self.run("history", "export", "--experiment", str(report["experiment"])).stdout
        runs = {}
        for line in out.splitlines():
            r = json.loads(line)
            runs[int(r["id"])] = r
        cells = {}
        for c in report["cells"]:
            run = runs.get(c["run"]) or {}
            objects = (run.get("report") or {}).get("objects")
            key = (c["row"], c["prompt"], c["max_tokens"], c["repeat"])
            cells[key] = (c["status"], c["finish_reason"], objects)
            self.retries[key] = [r if isinstance(r, str) else r.get("why") for r in (run.get("details") or {}).get("retries") or []]
        return cells

    def finished_runs(self, provider):
        r = self.run("history", "list", "--provider", provider, "--limit", "0", "--json", check=False)
        if r.returncode != 0:
            return 0
        try:
            return sum(1 for x in json.loads(r.stdout) if x.get("status") in FINISHED)
        except ValueError:
            return 0


# --- checks --------------------------------------------------------------------------------------


def whole(report, rows):
    """(ok, detail): every cell of the report finished, none failed, none pending."""
    prov = report["providers"][0]
    statuses = sorted({c["status"] for c in report["cells"]})
    ok = (
        len(report["cells"]) == rows
        and prov["cells"] == rows
        and prov["failed"] == 0
        and report["pending"] == 0
        and all(c["status"] in FINISHED for c in report["cells"])
    )
    detail = (
        f"{len(report['cells'])} cells (want {rows}), failed {prov['failed']}, "
        f"pending {report['pending']}, statuses {statuses}"
    )
    return ok, detail


def streaming(port):
    """Whether the llama-server on `port` is in the middle of a reply (its one slot has decoded
    a token of a request it is still processing), from its `/slots`."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/slots", timeout=2) as r:
            slots = json.load(r)
    except (urllib.error.URLError, OSError, ValueError):
        return False
    return any(
        s.get("is_processing") and (s.get("next_token") or [{}])[0].get("n_decoded", 0) >= 2
        for s in slots
    )


def completions(server_log):
    """Replies of more than one token in a llama-server's log (a health probe asks for one)."""
    return sum(
        1
        for m in re.finditer(r"\|\s+eval time =\s+[\d.]+ ms /\s+(\d+) tokens", server_log)
        if int(m.group(1)) > 1
    )


def differing(a, b):
    keys = sorted(set(a) | set(b))
    return [k for k in keys if a.get(k) != b.get(k)]


def describe_diff(a, b, keys):
    lines = []
    for k in keys[:3]:
        lines.append(f"  {k}: direct {json.dumps(a.get(k))[:300]}")
        lines.append(f"  {' ' * len(str(k))}  router {json.dumps(b.get(k))[:300]}")
    return "\n" + "\n".join(lines)


# --- main ----------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kerf", default=os.environ.get("KERF_BIN"))
    ap.add_argument("--llama-server", default=os.environ.get("LLAMA_SERVER"))
    ap.add_argument("--model", default=os.environ.get("MODEL"))
    ap.add_argument("--litellm", default=os.environ.get("LITELLM"))
    a = ap.parse_args()
    missing = [n for n in ("kerf", "llama_server", "model", "litellm") if not getattr(a, n)]
    if missing:
        ap.error("missing: " + ", ".join(missing))
    rows = int(os.environ.get("ROUTER_TEST_ROWS", "8"))
    kill_rows = int(os.environ.get("ROUTER_TEST_KILL_ROWS", "12"))
    health = os.environ.get("ROUTER_TEST_HEALTH", "1") != "0"
    seed = int(os.environ.get("KERF_TEST_SEED") or secrets.randbits(63))
    log(f"# random moments: KERF_TEST_SEED={seed} (set it to replay this run's draws)")
    rng = random.Random(seed)

    checks = Checks(say=log)
    procs = Processes()

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    with tempfile.TemporaryDirectory(prefix="kerf-router-") as tmp:
        try:
            run(a, tmp, procs, checks, rng, rows, kill_rows, health)
        except SystemExit:
            raise
        except BaseException as e:  # noqa: BLE001 - reported as a failed check, then cleaned up
            checks.check("the router test ran to its end", False, f"{type(e).__name__}: {e}")
        finally:
            procs.stop_all()
            keep = os.environ.get("ROUTER_TEST_LOGS")
            if keep:  # the servers', the proxy's logs and its config, for a look afterwards
                os.makedirs(keep, exist_ok=True)
                for name in os.listdir(tmp):
                    if name.endswith((".log", ".yaml")):
                        shutil.copy(os.path.join(tmp, name), keep)
    log(f"{checks.passed} passed, {checks.failed} failed (router)")
    return 0 if checks.failed == 0 else 1


def run(a, tmp, procs, checks, rng, rows, kill_rows, health):
    def llama(port):
        # One slot, one thread, no prompt cache: two servers share the 2 cores of a small
        # machine without spinning against each other, and every request is computed alone
        # and whole (never batched with another, never on a prefix another left in the cache),
        # so the same request gets the same tokens from either server.
        return [
            a.llama_server, "--model", a.model, "--ctx-size", "4096", "--parallel", "1",
            "--threads", "1", "--no-cache-prompt", "--host", "127.0.0.1", "--port", str(port),
        ]  # fmt: skip

    ports = [start_server(procs, name, llama, "/health", tmp=tmp) for name in ("server-a", "server-b")]
    log(f"# llama-server a on {ports[0]}, b on {ports[1]}")

    key = "sk-" + secrets.token_hex(24)
    config_path = os.path.join(tmp, "litellm.yaml")
    with open(config_path, "w") as f:
        json.dump(litellm_config(ports, key, health), f, indent=2)
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_LOG="ERROR")
    env.pop("LITELLM_MASTER_KEY", None)

    def proxy(port):
        return [a.litellm, "--config", config_path, "--host", "127.0.0.1", "--port", str(port)]

    def start_proxy(port):
        procs.start("litellm", proxy(port), os.path.join(tmp, "litellm.log"), env=env)

    # start_server with the proxy's own environment
    for attempt in range(3):
        proxy_port = free_port()
        start_proxy(proxy_port)
        if wait_up(procs, "litellm", f"http://127.0.0.1:{proxy_port}/health/readiness"):
            break
        text = procs.tail("litellm")
        procs.stop("litellm")
        if "address already in use" not in text.lower() or attempt == 2:
            raise RuntimeError(f"the LiteLLM proxy did not come up:\n{text}")
    log(f"# LiteLLM proxy on {proxy_port} (health-check routing {'on' if health else 'off'})")

    home = os.path.join(tmp, "kerf")
    os.makedirs(home)
    kerf = Kerf(a.kerf, home, "KERF_ROUTER_TEST_KEY", key)
    for name, url, auth in (
        ("direct", f"http://127.0.0.1:{ports[0]}/v1", ["--no-key"]),
        ("fleet", f"http://127.0.0.1:{proxy_port}/v1", ["--key-env", "KERF_ROUTER_TEST_KEY"]),
        ("fleet-kill", f"http://127.0.0.1:{proxy_port}/v1", ["--key-env", "KERF_ROUTER_TEST_KEY"]),
    ):
        kerf.run(
            "providers", "add", name, "--kind", "openai", "--base-url", url, "--model", MODEL_NAME,
            "--structured", "json_schema", *auth,
        )  # fmt: skip

    # 1. one server directly vs two behind the proxy
    direct = json.loads(kerf.run(*kerf.eval_args("direct", max(rows, kill_rows))).stdout)
    ok, detail = whole(direct, max(rows, kill_rows))
    checks.check(f"one llama-server directly: every cell of {max(rows, kill_rows)} finished", ok, detail)
    direct_cells = kerf.cells(direct)
    objects = sum(len(v[2] or []) for v in direct_cells.values())
    checks.check(
        "the direct eval extracted objects to compare", objects > 0, f"{objects} objects in all"
    )

    fleet = json.loads(kerf.run(*kerf.eval_args("fleet", rows)).stdout)
    ok, detail = whole(fleet, rows)
    checks.check(f"through the proxy over two servers: every cell of {rows} finished", ok, detail)
    fleet_cells = kerf.cells(fleet)
    want = {k: v for k, v in direct_cells.items() if k[0] in {c[0] for c in fleet_cells}}
    diff = differing(want, fleet_cells)
    checks.check(
        "through the proxy: the same status, finish reason and objects as directly, cell by cell",
        not diff,
        f"{len(diff)} of {len(want)} cells differ" + describe_diff(want, fleet_cells, diff),
    )
    served = [completions(procs.tail(n, 10**6)) for n in ("server-a", "server-b")]
    checks.check(
        "the proxy spread the eval over both servers",
        all(s > 0 for s in served) and sum(served) >= rows,
        f"replies longer than a health probe's one token, per server: {served}",
    )

    # 2. one server killed mid-eval, in the middle of a reply it is streaming
    # early: server b then all but surely gets more requests (the proxy picks at random)
    kill_after = rng.randint(1, max(1, kill_rows // 4))
    log(
        f"# the kill: server b gets SIGKILL once {kill_after} of {kill_rows} cells are stored "
        "and it is streaming a reply"
    )
    p = subprocess.Popen(
        [a.kerf, *kerf.eval_args("fleet-kill", kill_rows)],
        cwd=REPO,
        env=kerf.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    killed_at = None
    try:
        while p.poll() is None:
            done = kerf.finished_runs("fleet-kill")
            if done >= kill_after and streaming(ports[1]):
                procs.kill("server-b")
                killed_at = done
                break
            time.sleep(0.1)
        out, err = p.communicate(timeout=900)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    checks.check(
        "server b was killed mid-reply while the eval ran",
        killed_at is not None and killed_at < kill_rows,
        f"killed after {killed_at} stored cells of {kill_rows}",
    )
    log(f"# kerf eval exit {p.returncode}; stderr: {err.strip()[-400:]}")
    try:
        killed = json.loads(out)
    except ValueError:
        checks.check("the eval with a server killed printed its report", False, out[-2000:])
        return
    # The proxy re-sends every request the dead server had not begun to answer (health-check
    # routing takes it out of rotation, its retries cover the seconds before the next probe).
    # The reply it was streaming cannot move: the proxy ends that stream with an error event,
    # and Kerf sends that cell again itself (a server without a price: nothing is bought twice),
    # so the eval is whole without a resume.
    ok, detail = whole(killed, kill_rows)
    checks.check(
        f"one server killed mid-reply: every cell of {kill_rows} finished, none left pending",
        ok and p.returncode == 0,
        f"exit {p.returncode}; {detail}",
    )
    listed = kerf.run("history", "list", "--provider", "fleet-kill", "--limit", "0", "--json").stdout
    broken = [x for x in json.loads(listed) if x.get("status") not in FINISHED]
    log(f"# runs the kill broke, sent again by Kerf: {len(broken)}")
    checks.check(
        "the reply the dead server was streaming is kept as a broken run, and its cell was sent again",
        len(broken) <= 1 and len(json.loads(listed)) == kill_rows + len(broken),
        f"{len(json.loads(listed))} runs for {kill_rows} cells; broken: {json.dumps(broken)[:1500]}",
    )
    resumed = json.loads(kerf.run("eval", "resume", str(killed["experiment"]), "--json").stdout)
    ok, detail = whole(resumed, kill_rows)
    checks.check(
        "a resume then finds nothing to send and reports the same whole eval",
        ok and len(json.loads(kerf.run("history", "list", "--provider", "fleet-kill", "--limit", "0", "--json").stdout)) == len(json.loads(listed)),
        detail,
    )
    kerf.retries = {}
    killed_cells = kerf.cells(resumed)
    retried = {k[0]: v for k, v in kerf.retries.items() if v}
    log(f"# cells Kerf's client retried itself: {json.dumps(retried)[:1500] if retried else 'none'}")
    diff = differing(direct_cells, killed_cells)
    checks.check(
        "one server killed: still the objects extracted directly, cell by cell",
        not diff,
        f"{len(diff)} of {len(direct_cells)} cells differ" + describe_diff(direct_cells, killed_cells, diff),
    )
    proxy_log = procs.tail("litellm", 10**6)
    log(
        "# the proxy answered an error after spending its retries "
        f"{proxy_log.count('No fallback was attempted')} time(s); health-check routing "
        f"{'on' if health else 'off (ROUTER_TEST_HEALTH=0)'}"
    )


if __name__ == "__main__":
    sys.exit(main())
