// A loopback OpenAI-compatible chat-completions server for the E2E scenarios and the desktop
// bench: it checks the bearer key, streams a JSONL reply as server-sent events in small chunks
// (as real providers do), and records what each request carried so a test can assert it.
import http from "node:http";

/** `count` agent-kg-extract lines alternating definitions and relationships, one per line. */
export function kgLines(count) {
  const lines = [];
  for (let i = 0; i < count; i++) {
    lines.push(JSON.stringify(i % 2 === 0
      ? { type: "definition", entity: `Entity ${i}`, definition: `The ${i}th thing the document defines, in plain English.` }
      : { type: "relationship", subject: `Entity ${i - 1}`, predicate: "relates to", object: `Entity ${i + 1}`, "object-entity": true }));
  }
  return lines;
}

/**
 * Start the server on an ephemeral loopback port.
 * - key: the bearer key requests must carry (else 401, as OpenAI answers).
 * - reply: the whole reply text to stream; or options.replyFor(request body) makes each reply
 *   from its request (a text, or `{ reply, finish }` to end it with that finish reason: "length"
 *   for a reply cut by its budget).
 * - chunk: characters per SSE event; perEventMs: pause between events (0: as fast as possible).
 * The returned `options` can be changed between requests; `hold(lines)` holds the next reply
 * back after its first `lines` lines (see below).
 */
export async function startOpenAI({ key, reply, chunk = 12, perEventMs = 0 }) {
  const options = { key, reply, chunk, perEventMs };
  const requests = [];
  // Gates for the next replies, first come first served (see `hold`).
  const gates = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", async () => {
      const auth = req.headers.authorization ?? "";
      // A batch file's upload is multipart, not JSON: kept as its text.
      const multipart = (req.headers["content-type"] ?? "").startsWith("multipart/");
      requests.push({ url: req.url, method: req.method, auth, body: body && !multipart ? JSON.parse(body) : body || null });
      const { key, chunk, perEventMs, replyFor } = options;
      // The reply: the same for every request, or made from the request (`replyFor`).
      const made = replyFor && body && !multipart ? replyFor(JSON.parse(body)) : options.reply;
      const [reply, finish] = typeof made === "object" && made != null ? [made.reply, made.finish] : [made, "stop"];
      if (key && auth !== `Bearer ${key}`) {
        res.writeHead(401, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { message: "Incorrect API key provided.", type: "invalid_request_error", code: "invalid_api_key" } }));
        return;
      }
      if (batchRoute(req, body, res)) return;
      if (!req.url.endsWith("/chat/completions")) {
        res.writeHead(404); res.end(); return;
      }
      const model = JSON.parse(body).model;
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      const gate = gates.shift();
      let sent = "";
      // The client hung up before the reply was whole (a cancelled run).
      res.on("close", () => { if (!res.writableFinished) gate?.hangUp(sent); });
      const event = (delta, finish) => `data: ${JSON.stringify({ id: "chatcmpl-loopback", object: "chat.completion.chunk", created: 0, model,
        choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      res.write(event({ role: "assistant", content: "" }, null));
      for (let i = 0; i < reply.length;) {
        if (res.destroyed || gate?.gone) return; // the client hung up (a cancelled run)
        const holding = gate?.state === "holding";
        const piece = reply.slice(i, i + (holding ? 1 : chunk));
        i += piece.length;
        res.write(event({ content: piece }, null));
        sent += piece;
        if (gate?.state === "before" && sent.split("\n").length - 1 >= gate.lines) gate.hold(sent);
        if (gate?.state === "holding") await gate.tick();
        else if (perEventMs) await new Promise((r) => setTimeout(r, perEventMs));
      }
      res.write(event({}, finish));
      const completion = Math.ceil(reply.length / 4);
      res.write(`data: ${JSON.stringify({ id: "chatcmpl-loopback", object: "chat.completion.chunk", created: 0, model, choices: [],
        usage: { prompt_tokens: 200, completion_tokens: completion, total_tokens: 200 + completion } })}\n\n`);
      res.end("data: [DONE]\n\n");
    });
  });
  // OpenAI's Batch API as documented: a JSONL file uploaded (multipart, purpose=batch), a batch
  // made of it, the batch retrieved, its output file downloaded. A batch stays in_progress until
  // the test calls endBatches(): each line is then answered with the reply a chat request gets
  // now, in reverse order (results come back unordered).
  const files = new Map();
  const batches = new Map();
  const json = (res, code, v) => { res.writeHead(code, { "content-type": "application/json" }); res.end(JSON.stringify(v)); };
  function batchRoute(req, body, res) {
    const url = req.url.replace(/^\/v1/, "");
    if (req.method === "POST" && url === "/files") {
      const boundary = /boundary=([^;]+)/.exec(req.headers["content-type"] ?? "")?.[1];
      const part = body.split(`--${boundary}`).find((p) => /name="file"/.test(p)) ?? "";
      const purpose = /name="purpose"\r\n\r\n([^\r]*)/.exec(body)?.[1];
      const content = part.slice(part.indexOf("\r\n\r\n") + 4).replace(/\r\n$/, "");
      const id = `file-in-${files.size + 1}`;
      files.set(id, content);
      json(res, 200, { id, object: "file", bytes: content.length, filename: "kerf-batch.jsonl", purpose });
      return true;
    }
    if (req.method === "POST" && url === "/batches") {
      const asked = JSON.parse(body);
      const lines = (files.get(asked.input_file_id) ?? "").split("\n").filter(Boolean).map((l) => JSON.parse(l));
      const id = `batch_${batches.size + 1}`;
      batches.set(id, { id, object: "batch", endpoint: asked.endpoint, input_file_id: asked.input_file_id, completion_window: asked.completion_window,
        metadata: asked.metadata, status: "in_progress", output_file_id: null, error_file_id: null, created_at: 0, lines,
        request_counts: { total: lines.length, completed: 0, failed: 0 } });
      json(res, 200, view(batches.get(id)));
      return true;
    }
    let m = /^\/batches\/([^/]+)$/.exec(url);
    if (req.method === "GET" && m) {
      const b = batches.get(m[1]);
      if (b) json(res, 200, view(b)); else json(res, 404, { error: { message: "No such batch", type: "invalid_request_error" } });
      return true;
    }
    m = /^\/files\/([^/]+)\/content$/.exec(url);
    if (req.method === "GET" && m) {
      if (!files.has(m[1])) { json(res, 404, { error: { message: "No such file" } }); return true; }
      res.writeHead(200, { "content-type": "application/octet-stream" });
      res.end(files.get(m[1]));
      return true;
    }
    return false;
  }
  const view = ({ lines, ...b }) => b;
  /** End every batch in progress: each request answered with the reply set now. */
  function endBatches() {
    for (const b of batches.values()) {
      if (b.status !== "in_progress") continue;
      const completion = Math.ceil(options.reply.length / 4);
      const out = b.lines.map((l, i) => JSON.stringify({ id: `batch_req_${i}`, custom_id: l.custom_id, error: null,
        response: { status_code: 200, request_id: `req_${i}`, body: { id: `chatcmpl-${i}`, object: "chat.completion", created: 0, model: l.body.model,
          choices: [{ index: 0, message: { role: "assistant", content: options.reply }, finish_reason: "stop" }],
          usage: { prompt_tokens: 200, completion_tokens: completion, total_tokens: 200 + completion } } } })).reverse();
      const id = `file-out-${b.id}`;
      files.set(id, out.join("\n") + "\n");
      Object.assign(b, { status: "completed", output_file_id: id, request_counts: { total: b.lines.length, completed: b.lines.length, failed: 0 } });
    }
  }

  // reqwest keeps idle connections for 90 s; Node closes them after 5 s by default, and a request
  // written on a connection the server is closing breaks off. Kept open until close().
  server.keepAliveTimeout = 10 * 60 * 1000;
  server.headersTimeout = 10 * 60 * 1000 + 1000;
  server.requestTimeout = 0;
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const port = server.address().port;

  /**
   * Hold the next chat-completions reply once its first `lines` lines are sent: from then on it
   * trickles, one character every `trickleMs`, until the client hangs up or the test releases
   * it. The run is in progress for as long as the test needs (a line takes seconds, the reply
   * an hour), not for as long as a paced reply happens to last on this machine; and each
   * character is an event, so the client shows what arrived (it relays text as events come).
   * Returns
   * - held: resolves, with the text sent so far, once the reply trickles;
   * - hungUp: resolves, with all the text sent, once the client closed the connection before
   *   the reply ended;
   * - release(): send the rest of the reply at full speed.
   */
  function hold(lines, { trickleMs = 100 } = {}) {
    let held, hungUp, release;
    const isHeld = new Promise((r) => (held = r));
    const gone = new Promise((r) => (hungUp = r));
    const released = new Promise((r) => (release = r));
    const gate = {
      lines, state: "before", gone: false,
      hold: (sent) => { gate.state = "holding"; held(sent); },
      hangUp: (sent) => { gate.gone = true; hungUp(sent); },
      tick: () => Promise.race([new Promise((r) => setTimeout(r, trickleMs)), released, gone]),
    };
    released.then(() => { gate.state = "released"; });
    gates.push(gate);
    return { held: isHeld, hungUp: gone, release };
  }

  const close = () => new Promise((r) => {
    gates.splice(0);
    server.close(r);
    // Idle kept-alive connections and held replies would keep close() waiting.
    server.closeAllConnections();
  });
  return { url: `http://127.0.0.1:${port}/v1`, options, requests, hold, close, batches, endBatches };
}
