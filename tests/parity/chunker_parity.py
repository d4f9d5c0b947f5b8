"""Parity with TrustGraph's own chunkers (trustgraph-flow 2.11.1): `kerf chunk --json` must give
exactly the chunks that `trustgraph/chunking/recursive/chunker.py` and
`trustgraph/chunking/token/chunker.py` give, on documents chosen to find the edges: whitespace-only
pieces as Python's `str.strip()` judges them (U+001C–U+001F are whitespace there, not in Unicode's
White_Space), CRLF, runs of blank lines, words longer than a chunk, combining characters, emoji
(a token window that splits one decodes to U+FFFD), a drawn document past two megabytes (which Kerf
tokenises another way, in parts when it has the cores), and a long shipped text at the presets. Each
chunk's `start`/`end` (every recursive chunk's, and a token window's unless it splits a character)
must also pick exactly its text out of the document.

TrustGraph's chunkers are loaded by `tg_chunkers.py` (its service stack stubbed; tiktoken given
the cl100k_base file tiktoken-rs compiles into Kerf, so both sides use one vocabulary).

Run by scripts/test with the venv made by scripts/peer-venv and TIKTOKEN_RS_ASSETS set to
tiktoken-rs's `assets` folder; prints 'N passed, N failed (chunker parity)'.
KERF_TEST_SEED replays the generated documents (printed).
"""

import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from checks import Checks  # noqa: E402
import tg_chunkers  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
KERF = os.environ.get("KERF_BIN", "kerf")
tg_recursive, tg_token = tg_chunkers.recursive(), tg_chunkers.token(os.environ["TIKTOKEN_RS_ASSETS"])
checks = Checks()
check = checks.check


def kerf_chunks(path, chunker, size, overlap):
    p = subprocess.run([KERF, "chunk", str(path), "--chunker", chunker, "--chunk-size", str(size), "--chunk-overlap", str(overlap), "--json"],
                       capture_output=True, text=True)  # fmt: skip
    if p.returncode != 0:
        return None, p.stderr
    # Lines end at "\n" only (str.splitlines would also break at U+2028, U+0085, … inside a text).
    return [json.loads(line) for line in p.stdout.split("\n") if line], ""


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"chunk {i + 1}: TrustGraph {x!r:.200} vs Kerf {y!r:.200}"
    return f"TrustGraph {len(a)} chunks, Kerf {len(b)}"


def compare(name, doc, chunker, size, overlap, work):
    path = work / "doc.txt"
    path.write_bytes(doc.encode("utf-8"))
    if chunker == "recursive":
        want = tg_recursive(doc, size, overlap)
    else:
        want = tg_token(doc, size, overlap)
    got, err = kerf_chunks(path, chunker, size, overlap)
    label = f"{name}: {chunker} {size}/{overlap}"
    if got is None:
        check(label, False, err)
        return
    texts = [c["text"] for c in got]
    ok = texts == want and [c["index"] for c in got] == list(range(1, len(got) + 1))
    if ok:
        # Every recursive chunk has its place; a token window has one unless it splits a character.
        bad = [c["index"] for c in got if ("start" in c or chunker == "recursive") and doc[c["start"]:c["end"]] != c["text"]]
        if chunker == "token":
            bad += [c["index"] for c in got if "start" not in c and "\ufffd" not in c["text"]]
        ok, detail = not bad, f"chunks whose start/end do not pick their text: {bad[:5]}"
    else:
        detail = first_difference(want, texts)
    check(label, ok, detail)


PROCESSOR_DEFAULTS = {"recursive": (2000, 100), "token": (250, 15)}


def exported_settings(doc, work):
    """`kerf export --to trustgraph-chunking` gives flow parameters that TrustGraph's own code
    (ParameterSpec, Flow, ChunkingService.chunk_document) turns into the same size and overlap;
    `kerf chunk --settings` of that file cuts as TrustGraph's chunker does at them; a file missing
    a parameter falls back to the processor's default on both sides."""
    path = work / "doc.txt"
    path.write_bytes(doc.encode("utf-8"))
    for chunker, size, overlap in [("recursive", 1000, 50), ("token", 300, 20), ("recursive", 4000, 0)]:
        out = work / f"{chunker}-{size}.json"
        p = subprocess.run([KERF, "export", "--to", "trustgraph-chunking", "--chunker", chunker, "--chunk-size", str(size),
                            "--chunk-overlap", str(overlap), "--out", str(out)], capture_output=True, text=True)  # fmt: skip
        label = f"exported settings: {chunker} {size}/{overlap}"
        if p.returncode != 0:
            check(label, False, p.stderr)
            continue
        exported = json.loads(out.read_text())
        tg = tg_chunkers.flow_chunk_settings(exported["parameters"], PROCESSOR_DEFAULTS[chunker])
        check(f"{label}: TrustGraph reads ({size}, {overlap})", tg == (size, overlap), f"TrustGraph read {tg}")
        want = (tg_recursive if chunker == "recursive" else tg_token)(doc, *tg)
        q = subprocess.run([KERF, "chunk", str(path), "--settings", str(out), "--json"], capture_output=True, text=True)
        got = [json.loads(line)["text"] for line in q.stdout.split("\n") if line]
        check(f"{label}: kerf chunk --settings cuts as TrustGraph", got == want, first_difference(want, got) if q.returncode == 0 else q.stderr)
    # Only a size: the overlap is the processor's default there and here.
    partial = work / "partial.json"
    partial.write_text(json.dumps({"processor": "chunker-recursive", "parameters": {"chunk-size": "1500"}}))
    tg = tg_chunkers.flow_chunk_settings({"chunk-size": "1500"}, PROCESSOR_DEFAULTS["recursive"])
    p = subprocess.run([KERF, "import", str(partial), "--json"], capture_output=True, text=True)
    got = json.loads(p.stdout)["chunking"] if p.returncode == 0 else p.stderr
    check("a flow without chunk-overlap: the processor's default on both sides", tg == (1500, 100) and got == {"chunker": "recursive", "size": 1500, "overlap": 100}, f"TrustGraph {tg}, Kerf {got}")


def generated(rng, n):
    """A document drawn from pieces that find the edges."""
    pieces = ["word", "Wörter", "e\u0301", "🎉", "👩‍👩‍👧", "\n", "\n\n", "\n\n\n\n", "\r\n", "\r\n\r\n", " ", "  ", "\t",
              "\u001f", "\u001c", "\u00a0", "\u2028", "\u3000", "\u0085", "supercalifragilisticexpialidocious" * 3,
              "。", "日本語の文", ".", ",", "Ünïcödé", "x" * 40]  # fmt: skip
    return "".join(rng.choice(pieces) + (" " if rng.random() < 0.5 else "") for _ in range(n))


def main():
    seed = int(os.environ.get("KERF_TEST_SEED", random.SystemRandom().randrange(2**63)))
    print(f"# random documents: KERF_TEST_SEED={seed} (set it to replay)")
    rng = random.Random(seed)
    work = Path(tempfile.mkdtemp(prefix="kerf-chunk-parity-"))
    fixed = {
        "blank runs": "One.\n\n\n\n\nTwo.\n\n \n\nThree.\n   \n\n\t\n",
        "crlf": "Line one.\r\nLine two.\r\n\r\nA new paragraph,\r\nwith more.\r\n" * 6,
        "whitespace as Python sees it": "a\n\n\u001f\u001e\n\nb\n\n\u00a0\u2028\n\nc \u001c d",
        "a word longer than a chunk": "short " + "x" * 57 + " short again " + "y" * 31,
        "combining and emoji": ("Cafe\u0301 🎉 naïve 👩‍👩‍👧 " * 12) + "\n\n" + ("日本語の文章。" * 9),
        "empty": "",
        "only whitespace": "  \n\n \t \n",
    }
    for name, doc in fixed.items():
        for size, overlap in [(10, 0), (16, 5), (25, 10), (7, 6)]:
            compare(name, doc, "recursive", size, overlap, work)
        for size, overlap in [(3, 0), (5, 2), (8, 7)]:
            compare(name, doc, "token", size, overlap, work)
    for i in range(12):
        doc = generated(rng, rng.randrange(20, 400))
        size = rng.randrange(2, 80)
        overlap = rng.randrange(0, size)
        compare(f"random document {i + 1}", doc, "recursive", size, overlap, work)
        tsize = rng.randrange(1, 30)
        compare(f"random document {i + 1}", doc, "token", tsize, rng.randrange(0, tsize), work)
    # Past a megabyte Kerf tokenises another way (tiktoken's pattern read by hand), and cuts the
    # document into parts of a megabyte or more, one per core: a drawn document past two, at the
    # preset and a small size.
    big = generated(rng, 1)
    while len(big.encode("utf-8")) <= 2_200_000:
        big += generated(rng, 1000)
    compare("a drawn document past two megabytes", big, "token", 250, 15, work)
    compare("a drawn document past two megabytes", big, "token", 7, 3, work)
    # A long shipped text at the presets: the processors' defaults and a deployed flow's.
    long = "\n\n".join(json.loads(line)["input"] for line in (REPO / "datasets/knowledge-graph.jsonl").read_text().splitlines()) * 8
    compare("the shipped documents, concatenated", long, "recursive", 2000, 100, work)
    compare("the shipped documents, concatenated", long, "recursive", 2000, 50, work)
    compare("the shipped documents, concatenated", long, "token", 250, 15, work)
    compare("the shipped documents, concatenated", long, "token", 2000, 50, work)
    exported_settings(long, work)
    print(f"{checks.passed} passed, {checks.failed} failed (chunker parity)")
    return 0 if checks.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
