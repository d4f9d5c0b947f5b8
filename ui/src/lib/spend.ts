// Whether a run needs the user's go-ahead before it starts: a prompt that repairs (each repair a
// request re-sending the whole conversation) on a provider that bills requests. A local model,
// or a server on this machine, costs nothing per request and is never asked about.
import type { ProviderInfo } from "../ipc/bindings/ProviderInfo";
import type { RunOptions } from "../ipc/bindings/RunOptions";

/** Whether `url` names this machine (localhost or a loopback address). */
export function onThisMachine(url: string): boolean {
  let host: string;
  try { host = new URL(url).hostname; } catch { return false; }
  host = host.replace(/^\[|\]$/g, "");
  return host === "localhost" || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/** The question to ask before this run, or `null` when it may simply start. */
export function repairQuestion(
  repairAttempts: number | null | undefined,
  options: RunOptions,
  providers: ProviderInfo[],
): string | null {
  if (!repairAttempts || repairAttempts < 2 || options.provider === "local") return null;
  const p = providers.find((x) => x.name === options.provider);
  if (p && onThisMachine(p.baseUrl)) return null;
  const requests = Math.min(repairAttempts, options.maxRequests);
  if (requests < 2) return null;
  return `This prompt repairs failed replies: on ${options.provider} a run may send up to ${requests} paid requests, `
    + `each re-sending the conversation so far, and at most ${options.maxRunTokens.toLocaleString("en-US")} tokens in all `
    + `(the run's ceilings, under Parameters).`;
}
