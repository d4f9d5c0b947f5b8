"""TrustGraph's own chunkers (trustgraph-flow 2.11.1), callable without its service stack.

The chunker modules import pulsar- and prometheus-backed services at the top; those few names are
stubbed, and the splitting methods are called on processors made without `__init__`. tiktoken
reads cl100k_base from TIKTOKEN_CACHE_DIR: pass the folder of the file tiktoken-rs compiles into
Kerf (`bash scripts/tiktoken-assets`), and it is put where tiktoken looks (under the SHA-1 of its
download URL), so nothing is downloaded.
"""

import hashlib
import importlib.util
import os
import shutil
import sys
import tempfile
import types
from pathlib import Path


def _stub_service_stack():
    if "trustgraph.base" in sys.modules:
        return
    prometheus = types.ModuleType("prometheus_client")
    prometheus.Histogram = object
    sys.modules["prometheus_client"] = prometheus
    spec = importlib.util.find_spec("trustgraph")
    base = types.ModuleType("trustgraph.base")
    base.__path__ = [str(Path(list(spec.submodule_search_locations)[0]) / "base")]
    base.ChunkingService = base.ConsumerSpec = base.ProducerSpec = object
    sys.modules["trustgraph.base"] = base


def recursive():
    """TrustGraph's `_recursive_split(text, size, overlap)` (tiktoken not imported)."""
    _stub_service_stack()
    from trustgraph.chunking.recursive import chunker as module

    return object.__new__(module.Processor)._recursive_split


def token(assets):
    """TrustGraph's `_split_by_tokens(text, size, overlap)`, with cl100k_base from `assets`."""
    cache = Path(tempfile.mkdtemp(prefix="kerf-tiktoken-"))
    url = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
    shutil.copy(Path(assets) / "cl100k_base.tiktoken", cache / hashlib.sha1(url.encode()).hexdigest())
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    import tiktoken

    _stub_service_stack()
    from trustgraph.chunking.token import chunker as module

    p = object.__new__(module.Processor)
    p.encoding = tiktoken.get_encoding("cl100k_base")
    return p._split_by_tokens
