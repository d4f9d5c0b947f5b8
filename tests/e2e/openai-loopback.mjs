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
 * The returned `options` can be changed between requests.
 */
export async function startOpenAI({ key, reply, chunk = 12, perEventMs = 0 }) {
  const options = { key, reply, chunk, perEventMs };
  const requests = [];
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
      const event = (delta, finish) => `data: ${JSON.stringify({ id: "chatcmpl-loopback", object: "chat.completion.chunk", created: 0, model,
        choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      res.write(event({ role: "assistant", content: "" }, null));
      for (let i = 0; i < reply.length; i += chunk) {
        if (res.destroyed) return; // the client hung up (a cancelled run)
        res.write(event({ content: reply.slice(i, i + chunk) }, null));
        if (perEventMs) await new Promise((r) => setTimeout(r, perEventMs));
      }
      res.write(event({}, "stop"));
      const completion = Math.ceil(reply.length / 4);
      res.write(`data: ${JSON.stringify({ id: "chatcmpl-loopback", object: "chat.completion.chunk", created: 0, model, choices: [],
        usage: { prompt_tokens: 200, completion_tokens: completion, total_tokens: 200 + completion } })}\n\n`);
      res.end("data: [DONE]\n\n");
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const port = server.address().port;
  return { url: `http://127.0.0.1:${port}/v1`, options, requests, close: () => new Promise((r) => server.close(r)) };
}
