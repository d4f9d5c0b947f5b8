"""`kerf chunk` beside TrustGraph's Python chunkers on the same 10 MB texts, whole process each
(start, read, chunk, and Kerf's JSON Lines written to a file): the recursive chunker at the
processor's defaults (2000/100) and the token chunker at its (250/15). Both must give the same
number of chunks. Two texts from the shipped knowledge-graph documents, repeated: paragraphs
(blank lines between documents: the splitter merges paragraphs) and one long line (spaces only,
as text pulled out of a PDF can be: the splitter merges words, a million and more).
Results go to bench/chunk/results.json.

    python3 bench/chunk/bench.py --kerf K --python PEER_PY --assets TIKTOKEN_RS_ASSETS [--mb 10] [--reps 3]
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


def timed(cmd, out=None):
    """Seconds for `cmd`, and what it printed (written to the file `out` when given, as a user
    would redirect 10 MB of JSON Lines, rather than piped through this script)."""
    with open(out, "w") if out else open(os.devnull, "w") as sink:
        t0 = time.perf_counter()
        r = subprocess.run(cmd, stdout=sink if out else subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        seconds = time.perf_counter() - t0
    assert r.returncode == 0, f"{cmd[0]}: exit {r.returncode}: {r.stderr[-1000:]}"
    return seconds, (Path(out).read_text(encoding="utf-8") if out else r.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kerf", required=True)
    ap.add_argument("--python", required=True)
    ap.add_argument("--assets", required=True)
    ap.add_argument("--mb", type=float, default=10)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kerf-chunk-bench-"))
    docs = [json.loads(line)["input"] for line in (REPO / "datasets/knowledge-graph.jsonl").read_text().splitlines()]
    texts = {}
    for name, sep in [("paragraphs", "\n\n"), ("one long line", " ")]:
        block = sep.join(docs) + sep
        text = block * int(a.mb * 1e6 / len(block.encode()) + 1)
        texts[name] = work / f"{name.replace(' ', '-')}.txt"
        texts[name].write_text(text, encoding="utf-8")
    rows = []
    for text_name, chunker, size, overlap in [("paragraphs", "recursive", 2000, 100), ("one long line", "recursive", 2000, 100), ("paragraphs", "token", 250, 15)]:
        path = texts[text_name]
        kerf_s, tg_s, counts = [], [], set()
        for _ in range(a.reps):
            s, out = timed([a.kerf, "chunk", str(path), "--chunker", chunker, "--chunk-size", str(size), "--chunk-overlap", str(overlap), "--json"], out=work / "chunks.jsonl")
            kerf_s.append(s)
            counts.add(("kerf", out.count("\n")))  # JSON escapes every line break inside a text
            s, out = timed([a.python, str(HERE / "tg_chunk.py"), str(path), chunker, str(size), str(overlap), a.assets])
            tg_s.append(s)
            counts.add(("trustgraph", int(out.strip())))
        assert len({n for _, n in counts}) == 1, f"{chunker}: different chunk counts {counts}"
        row = {"text": text_name, "chunker": chunker, "size": size, "overlap": overlap, "chunks": counts.pop()[1],
               "kerf_seconds": round(statistics.median(kerf_s), 3), "trustgraph_seconds": round(statistics.median(tg_s), 3)}  # fmt: skip
        row["ratio"] = round(row["trustgraph_seconds"] / row["kerf_seconds"], 1)
        rows.append(row)
        print(f"{text_name:<13} {chunker:<9} {size}/{overlap}: {row['chunks']} chunks · Kerf {row['kerf_seconds']:.3f} s · TrustGraph {row['trustgraph_seconds']:.3f} s · {row['ratio']}×", flush=True)
    result = {"date": datetime.date.today().isoformat(), "machine": f"{platform.machine()}, {os.cpu_count()} cores",
              "bytes": {n: p.stat().st_size for n, p in texts.items()}, "reps": a.reps, "runs": rows}  # fmt: skip
    (HERE / "results.json").write_text(json.dumps(result, indent=1) + "\n")
    print("wrote bench/chunk/results.json")


if __name__ == "__main__":
    main()
