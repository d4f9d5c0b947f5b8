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
 * - reply: the whole reply text to stream.
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
      requests.push({ url: req.url, auth, body: body ? JSON.parse(body) : null });
      const { key, reply, chunk, perEventMs } = options;
      if (key && auth !== `Bearer ${key}`) {
        res.writeHead(401, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { message: "Incorrect API key provided.", type: "invalid_request_error", code: "invalid_api_key" } }));
        return;
      }
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
      res.write(event({}, "stop"));
      const completion = Math.ceil(reply.length / 4);
      res.write(`data: ${JSON.stringify({ id: "chatcmpl-loopback", object: "chat.completion.chunk", created: 0, model, choices: [],
        usage: { prompt_tokens: 200, completion_tokens: completion, total_tokens: 200 + completion } })}\n\n`);
      res.end("data: [DONE]\n\n");
    });
  });
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
  return { url: `http://127.0.0.1:${port}/v1`, options, requests, hold, close };
}
