/** What the tests share: the live server's tokens, task helpers read from its trace, and a
 * proxy that can drop answers or refuse requests the way a network and a busy server do. */

import http from "node:http";
import type { AddressInfo } from "node:net";

import { Client, type JSONObject } from "../src/index.js";

function env(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run these tests through tests/typescript (pytest -m typescript)`);
  return value;
}

export const URL_ = env("LOOPWARDEN_URL");
export const TOKEN = env("LOOPWARDEN_TOKEN"); // agent under the `novelty` profile
export const STRICT_TOKEN = env("LOOPWARDEN_STRICT_TOKEN"); // agent under `default` (evidence mode)
export const OPERATOR_TOKEN = env("LOOPWARDEN_OPERATOR_TOKEN");

/** Sleeps are recorded, not slept: the tests check what the client waited, never the clock. */
export function recordingSleep(): { slept: number[]; sleep: (s: number) => Promise<void> } {
  const slept: number[] = [];
  return { slept, sleep: async (s: number) => void slept.push(s) };
}

export function agent(options: ConstructorParameters<typeof Client>[2] = {}, token = TOKEN, url = URL_): Client {
  return new Client(url, token, { timeout: 30, ...options });
}

export const operator = (): Client => new Client(URL_, OPERATOR_TOKEN, { timeout: 30 });

export const unique = (): string => Math.random().toString(16).slice(2, 10);

export async function newTask(client: Client, limits?: JSONObject): Promise<string> {
  return (await client.createTask(`typescript test ${unique()}`, limits ? { limits } : {})).id;
}

export async function toolDecisions(client: Client, taskId: string): Promise<string[]> {
  return (await client.trace(taskId)).calls.filter((c) => c.type === "tool_call").map((c) => String(c.decision));
}

/** The model calls the gate allowed (a refused gate is in the trace too, as a STOP). */
export async function modelCalls(client: Client, taskId: string): Promise<JSONObject[]> {
  return (await client.trace(taskId)).calls.filter((c) => c.type === "model_call" && c.decision === "ALLOW");
}

export async function operationState(key: string): Promise<string> {
  const states = (await operator().listOperations({ key })).filter((op) => op.key === key).map((op) => String(op.state));
  if (states.length !== 1) throw new Error(`operation ${key}: ${JSON.stringify(states)}`);
  return states[0]!;
}

/** What the proxy does with one request: forward it, forward it and drop the answer (the
 * server acted, the client hears nothing), or answer itself without forwarding. */
export type Action = "forward" | "drop" | { status: number; headers?: Record<string, string>; body: JSONObject };

export interface Proxy {
  url: string; // the API base URL through the proxy
  port: number;
  seen: Array<{ method: string; path: string; body: JSONObject | null }>;
  plan: (method: string, path: string) => Action;
  close(): Promise<void>;
}

/** A proxy in front of the live server; `plan` decides each request's fate. */
export async function startProxy(plan: Proxy["plan"] = () => "forward", port = 0): Promise<Proxy> {
  const upstream = new URL(URL_);
  const proxy: Proxy = { url: "", port: 0, seen: [], plan, close: async () => {} };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const raw = Buffer.concat(chunks);
      const path = req.url ?? "/";
      let body: JSONObject | null = null;
      try {
        body = raw.length ? (JSON.parse(raw.toString()) as JSONObject) : null;
      } catch {
        body = null;
      }
      proxy.seen.push({ method: req.method ?? "GET", path, body });
      const action = proxy.plan(req.method ?? "GET", path);
      if (typeof action === "object") {
        res.writeHead(action.status, { "content-type": "application/json", ...(action.headers ?? {}) });
        res.end(JSON.stringify(action.body));
        return;
      }
      const forward = http.request(
        { host: upstream.hostname, port: upstream.port, path, method: req.method, headers: { ...req.headers, host: upstream.host } },
        (answer) => {
          const parts: Buffer[] = [];
          answer.on("data", (c: Buffer) => parts.push(c));
          answer.on("end", () => {
            if (action === "drop") {
              req.socket.destroy(); // the answer is lost on the way back
              return;
            }
            res.writeHead(answer.statusCode ?? 502, answer.headers);
            res.end(Buffer.concat(parts));
          });
        },
      );
      forward.end(raw);
    });
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  proxy.port = (server.address() as AddressInfo).port;
  proxy.url = `http://127.0.0.1:${proxy.port}${upstream.pathname}`;
  proxy.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return proxy;
}

/** The first `n` requests matching `match` get `action`, the rest are forwarded. */
export function firstN(n: number, match: (method: string, path: string) => boolean, action: Action): Proxy["plan"] {
  let left = n;
  return (method, path) => {
    if (left > 0 && match(method, path)) {
      left -= 1;
      return action;
    }
    return "forward";
  };
}

/** A port nothing listens on. */
export async function closedPort(): Promise<number> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
