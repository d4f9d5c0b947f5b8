"""TrustGraph's own chunkers (trustgraph-flow 2.11.1) on one file, as a whole process: the
benchmark's peer side (loaded by tests/parity/tg_chunkers.py). Prints the number of chunks.

    python tg_chunk.py FILE recursive|token SIZE OVERLAP ASSETS
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "parity"))
import tg_chunkers  # noqa: E402

path, chunker, size, overlap, assets = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
split = tg_chunkers.recursive() if chunker == "recursive" else tg_chunkers.token(assets)
text = Path(path).read_text(encoding="utf-8")
print(len(split(text, size, overlap)))
