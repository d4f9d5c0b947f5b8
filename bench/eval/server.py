"""A loopback OpenAI-compatible chat-completions server for the eval benchmark.

Each request waits DELAY seconds (the model's latency), then answers with the expected records
of the document its prompt holds (found by the `(Document N.)` marker the benchmark's dataset
puts in every input), perturbed by row so that scores are not trivially perfect:

- every 3rd row: the last record is left out (a miss);
- every 5th row: a definition the document does not hold is added (a spurious record);
- every 4th row: names in lower case with a leading article (normalisation must undo it);
- every 7th row: a name written as its first alias, where it has one (aliases must accept it).

`GET /stats` returns the requests answered since the last `/stats` and a digest of their
messages (role and content, in any order), so a benchmark can check that two clients sent the
same conversations.

JSONL when the prompt asks for one object per line, else a JSON array. It streams (SSE, with a
final usage chunk) when asked to, as Kerf does, and answers in one body otherwise, as promptfoo
asks. Standard library only; HTTP/1.1 with keep-alive, as both clients reuse connections.

With CAPACITY, at most that many requests are answered at once: one past it gets 429 with
`retry-after-ms: 100` (a server, or a fleet behind one URL, at its capacity); `/stats` then also
says how many were refused and the most answered at once.

    python3 server.py DATASET.jsonl PROMPT_ID DELAY_SECONDS [CAPACITY]   (prints the port, then serves)
"""

import asyncio
import hashlib
import json
import re
import sys

MARK = re.compile(r"\(Document (\d+)\.\)")


def load(path, prompt):
    rows = {}
    for line in open(path, encoding="utf-8"):
        row = json.loads(line)
        n = int(MARK.search(row["input"]).group(1))
        rows[n] = row["expected"][prompt]
    return rows


def reply_records(n, expected):
    out = []
    for rec in expected:
        rec = {k: v for k, v in rec.items() if k != "aliases"}
        aliases = next(iter(expected_aliases(expected, rec)), None)
        if n % 7 == 0 and aliases:
            field, name = aliases
            rec[field] = name
        if n % 4 == 0:
            for field in ("entity", "subject", "object"):
                if isinstance(rec.get(field), str):
                    rec[field] = "the " + rec[field].lower()
        out.append(rec)
    if n % 3 == 0 and out:
        out.pop()
    if n % 5 == 0:
        out.append({"type": "definition", "entity": f"Unmentioned thing {n}", "definition": "Something the document does not name"})
    return out


def expected_aliases(expected, rec):
    for e in expected:
        if {k: v for k, v in e.items() if k != "aliases"} == rec:
            for field, names in (e.get("aliases") or {}).items():
                if names:
                    yield field, names[0]


def answer_text(req, rows):
    messages = json.dumps(req.get("messages", []))
    m = MARK.search(messages)
    n = int(m.group(1)) if m else -1
    records = reply_records(n, rows.get(n, []))
    if "one JSON object per line" in messages:
        text = "\n".join(json.dumps(r) for r in records)
    else:
        text = json.dumps(records)
    return text, len(messages) // 4


SEEN = []
LOAD = {"now": 0, "peak": 0, "refused": 0}


def stats():
    digest = hashlib.sha256("".join(sorted(SEEN)).encode()).hexdigest()
    out = {"requests": len(SEEN), "digest": digest, "refused": LOAD["refused"], "peak": LOAD["peak"]}
    SEEN.clear()
    LOAD.update(peak=0, refused=0)
    return out


async def handle(reader, writer, rows, delay, capacity=None):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip())
            body = await reader.readexactly(length) if length else b""
            path = head.split(b" ", 2)[1]
            if not path.endswith(b"/chat/completions"):
                if path.endswith(b"/stats"):
                    out = json.dumps(stats()).encode()
                else:
                    out = json.dumps({"object": "list", "data": [{"id": "loopback", "object": "model"}]}).encode()
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(out) + out)
                await writer.drain()
                continue
            req = json.loads(body)
            if capacity is not None and LOAD["now"] >= capacity:
                LOAD["refused"] += 1
                out = b'{"error": {"message": "Server at capacity", "type": "overloaded"}}'
                writer.write(b"HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\nretry-after-ms: 100\r\ncontent-length: %d\r\n\r\n" % len(out) + out)
                await writer.drain()
                continue
            conversation = [{"role": m.get("role"), "content": m.get("content")} for m in req.get("messages", [])]
            SEEN.append(hashlib.sha256(json.dumps(conversation).encode()).hexdigest())
            LOAD["now"] += 1
            LOAD["peak"] = max(LOAD["peak"], LOAD["now"])
            try:
                await asyncio.sleep(delay)
            finally:
                LOAD["now"] -= 1
            text, prompt_tokens = answer_text(req, rows)
            usage = {"prompt_tokens": prompt_tokens, "completion_tokens": (len(text) + 3) // 4}
            usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
            base = {"id": "chatcmpl-bench", "created": 0, "model": req.get("model", "loopback")}
            if req.get("stream"):
                events = []
                for i in range(0, len(text), 64):
                    chunk = dict(base, object="chat.completion.chunk", choices=[{"index": 0, "delta": {"content": text[i:i + 64]}, "finish_reason": None}])
                    events.append(chunk)
                events.append(dict(base, object="chat.completion.chunk", choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}]))
                events.append(dict(base, object="chat.completion.chunk", choices=[], usage=usage))
                out = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
                kind = b"text/event-stream"
            else:
                out = json.dumps(dict(base, object="chat.completion", choices=[{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}], usage=usage))
                kind = b"application/json"
            out = out.encode()
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: %s\r\ncontent-length: %d\r\n\r\n" % (kind, len(out)) + out)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main():
    rows = load(sys.argv[1], sys.argv[2])
    delay = float(sys.argv[3])
    capacity = int(sys.argv[4]) if len(sys.argv) > 4 else None
    server = await asyncio.start_server(lambda r, w: handle(r, w, rows, delay, capacity), "127.0.0.1", 0, backlog=256)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
