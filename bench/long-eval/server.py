#!/usr/bin/env python3
"""Loopback OpenAI-compatible server for bench/long-eval (stdlib only).

    python3 server.py DELAY_S       prints its port on the first line, then serves

POST /v1/chat/completions (streamed or not), GET /v1/models, GET /stats.
Every request is answered after DELAY_S seconds with knowledge-graph records read off the chunk
it was sent, the same records whichever tool asks:
  * the expected records of every shipped knowledge-graph document whose opening is in the
    chunk, in document order (so a score means something);
  * a definition for every capitalised name of two or more words not named yet, and a
    relationship between consecutive names of one sentence (records no answer key holds, as
    a real model's extra ones).
Kerf's prompts get JSON Lines (or a JSON array when the prompt asks for one); LangExtract's (its
"Q: … A:" prompt) gets its own `{"extractions": [...]}` form, each record as an extraction of
its class with its other fields as attributes. A reply over the request's `max_tokens` (about
four characters a token) is cut and ends with `finish_reason: "length"`.
"""
import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

DELAY = float(sys.argv[1]) if len(sys.argv) > 1 else 0.0
REPO = Path(__file__).resolve().parents[2]
OPENINGS = []
for line in (REPO / "datasets/knowledge-graph.jsonl").read_text(encoding="utf-8").splitlines():
    if line.strip():
        row = json.loads(line)
        records = [{k: v for k, v in r.items() if k != "aliases"} for r in row["expected"]["agent-kg-extract"]]
        OPENINGS.append((row["input"][:60], records))

NAME = re.compile(r"\b[A-Z][a-z]+(?: [A-Z][a-z]+)+\b")
STATS = {"requests": 0, "cut": 0, "kerf": 0, "langextract": 0}
LOCK = threading.Lock()


def records(chunk):
    """The records a model would read off `chunk`, in the order they are written there."""
    found = []  # (position, record)
    for opening, expected in OPENINGS:
        at = chunk.find(opening)
        while at >= 0:
            found.extend((at + k, r) for k, r in enumerate(expected))
            at = chunk.find(opening, at + 1)
    named = {r["entity"].casefold() for _, r in found if r.get("type") == "definition"}
    for sentence in re.finditer(r"[^.!?]+[.!?]?", chunk):
        text = sentence.group(0)
        names = [(sentence.start() + m.start(), m.group(0)) for m in NAME.finditer(text)]
        for at, name in names:
            if name.casefold() not in named:
                named.add(name.casefold())
                found.append((at, {"type": "definition", "entity": name, "definition": " ".join(text.split())[:90]}))
        for (at, a), (_, b) in zip(names, names[1:]):
            if a != b:
                found.append((at + 1, {"type": "relationship", "subject": a, "predicate": "mentioned with", "object": b, "object-entity": True}))
    found.sort(key=lambda t: t[0])
    return [r for _, r in found]


def as_extraction(r):
    """One record in LangExtract's form: its class, its text, the rest as attributes."""
    if r["type"] == "definition":
        return {"definition": r["entity"], "definition_attributes": {"definition": r["definition"]}}
    return {"relationship": r["subject"], "relationship_attributes": {"predicate": r["predicate"], "object": r["object"]}}


def reply(messages):
    """The reply's text, and which tool asked."""
    user = "\n".join(m["content"] for m in messages if m.get("role") == "user" and isinstance(m.get("content"), str))
    kerf = re.search(r"Here is the text:\n(.*)\n\nRequirements:", user, re.S)
    if kerf:
        recs = records(kerf.group(1))
        if "JSON array" in user:
            return "[\n" + ",\n".join("  " + json.dumps(r, ensure_ascii=False) for r in recs) + "\n]", "kerf"
        return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs), "kerf"
    # LangExtract's prompt: its examples, then the chunk as the last question.
    q = user.rfind("Q: ")
    a = user.rfind("\nA:")
    chunk = user[q + 3:a] if 0 <= q < a else user
    return json.dumps({"extractions": [as_extraction(r) for r in records(chunk)]}, ensure_ascii=False), "langextract"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send_json(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/stats":
            with LOCK:
                return self.send_json(200, dict(STATS))
        if self.path.rstrip("/").endswith("/models"):
            return self.send_json(200, {"object": "list", "data": [{"id": "loopback", "object": "model"}]})
        self.send_json(404, {"error": {"message": "not found"}})

    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if not self.path.rstrip("/").endswith("/chat/completions"):
            return self.send_json(404, {"error": {"message": "not found " + self.path}})
        messages = req.get("messages", [])
        text, tool = reply(messages)
        budget = req.get("max_tokens") or req.get("max_completion_tokens") or 1 << 20
        finish = "stop"
        if len(text) > budget * 4:
            text, finish = text[: budget * 4], "length"
        sent = sum(len(m.get("content", "")) for m in messages if isinstance(m.get("content"), str))
        usage = {"prompt_tokens": sent // 4 + 8, "completion_tokens": max(1, (len(text) + 3) // 4)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        with LOCK:
            STATS["requests"] += 1
            STATS["cut"] += finish == "length"
            STATS[tool] += 1
        time.sleep(DELAY)
        cid, now, model = f"chatcmpl-{time.time_ns()}", int(time.time()), req.get("model", "loopback")
        if not req.get("stream"):
            return self.send_json(200, {"id": cid, "object": "chat.completion", "created": now, "model": model,
                                        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
                                        "usage": usage})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def event(obj):
            data = ("data: " + (obj if isinstance(obj, str) else json.dumps(obj)) + "\n\n").encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

        base = {"id": cid, "object": "chat.completion.chunk", "created": now, "model": model}
        for i in range(0, len(text), 256):
            event({**base, "choices": [{"index": 0, "delta": {"content": text[i:i + 256]}, "finish_reason": None}]})
        event({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        event({**base, "choices": [], "usage": usage})
        event("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()
