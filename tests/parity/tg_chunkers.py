"""TrustGraph's own chunkers (trustgraph-flow 2.11.1), callable without its service stack.

The chunker modules import pulsar- and prometheus-backed services at the top; those few names are
stubbed, and the splitting methods are called on processors made without `__init__`. tiktoken
reads cl100k_base from TIKTOKEN_CACHE_DIR: pass the folder of the file tiktoken-rs compiles into
Kerf (`bash scripts/tiktoken-assets`), and it is put where tiktoken looks (under the SHA-1 of its
download URL), so nothing is downloaded.
"""

import ast
import asyncio
import hashlib
import importlib.util
import logging
import os
import shutil
import sys
import tempfile
import types
import typing
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


def _defined(path, names, scope):
    """The classes and functions `names` of TrustGraph's source file `path`, defined in `scope`
    (the names they use from other modules given there): TrustGraph's own code, without the
    imports that would bring its service stack in."""
    tree = ast.parse(Path(path).read_text())
    keep = [n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name in names]
    exec(compile(ast.Module(body=keep, type_ignores=[]), str(path), "exec"), scope)
    return scope


def flow_chunk_settings(parameters, processor_defaults):
    """The (chunk size, chunk overlap) a TrustGraph chunker uses for a document in a flow started
    with `parameters`: the flow's parameters registered as TrustGraph registers them
    (`ParameterSpec.add` on the flow definition), read by `Flow.__call__`, and turned into the
    effective values by `ChunkingService.chunk_document`, then cast as the processor's
    `on_message` casts them. `processor_defaults` is the processor's (size, overlap)."""
    base = Path(list(importlib.util.find_spec("trustgraph").submodule_search_locations)[0]) / "base"
    log = logging.getLogger("trustgraph")
    scope = {"Spec": object, "Any": typing.Any, "ConsumerSpec": object, "FlowProcessor": object, "LibrarianSpec": object, "logger": log}
    _defined(base / "parameter_spec.py", {"Parameter", "ParameterSpec"}, scope)
    _defined(base / "flow.py", {"Flow"}, scope)
    _defined(base / "chunking_service.py", {"ChunkingService"}, scope)
    flow = scope["Flow"]("f", "flow", "default", None, {})
    for name in ("chunk-size", "chunk-overlap"):
        scope["ParameterSpec"](name).add(flow, None, {"parameters": parameters})
    size, overlap = asyncio.run(scope["ChunkingService"].chunk_document(None, None, None, flow, *processor_defaults))
    return int(size), int(overlap)
