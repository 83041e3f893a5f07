/**
 * The `novelty` data hash, as the server takes it (the TypeScript twin of
 * `loopwarden_client.novelty`): sha256 of the canonical JSON (keys sorted, compact, UTF-8) of a
 * result's data without its volatile keys. A result sent with its data is hashed by the server;
 * one sent without it (too large or too deep to store) carries this hash, so a new result still
 * counts as progress. `VOLATILE_KEYS` is the Python client's list, copied (a test holds them equal).
 */

import { createHash } from "node:crypto";

import type { JSONObject } from "./types.js";

export const VOLATILE_KEYS: readonly string[] = [
  // when the answer was made
  "fetched_at", "retrieved_at", "requested_at", "responded_at", "generated_at",
  "served_at", "queried_at", "cached_at", "received_at", "updated_at", "last_updated",
  "as_of", "timestamp", "ts", "now", "server_time", "current_time", "response_time",
  "expires_at",
  // how long it took
  "elapsed", "elapsed_ms", "took", "took_ms", "duration_ms", "latency_ms", "processing_time",
  // who answered, and the request's own identity
  "request_id", "req_id", "x_request_id", "x_amzn_request_id", "x_amz_request_id",
  "trace_id", "x_trace_id", "span_id", "correlation_id", "x_correlation_id",
  "response_id", "traceparent", "server", "served_by", "hostname",
  // cache validators and one-time values
  "etag", "nonce", "cache_status", "x_cache",
];

/** `Fetched-At`, `fetchedAt` and `fetched_at` are all `fetchedat`. */
export function keyName(name: string): string {
  return name.replace(/[\s_\-.:/]+/g, "").toLowerCase();
}

const VOLATILE_NAMES = new Set(VOLATILE_KEYS.map(keyName));

function dropVolatile(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(dropVolatile);
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value as JSONObject).filter(([key]) => !VOLATILE_NAMES.has(keyName(key))).map(([key, item]) => [key, dropVolatile(item)]));
  }
  return value;
}

/** Python's order of text: by code point (not by UTF-16 unit, as `sort()` would). */
function byCodePoint(a: string, b: string): number {
  const x = [...a].map((c) => c.codePointAt(0)!);
  const y = [...b].map((c) => c.codePointAt(0)!);
  for (let i = 0; i < Math.min(x.length, y.length); i += 1) if (x[i] !== y[i]) return x[i]! - y[i]!;
  return x.length - y.length;
}

/** A number as Python writes what it read from this number's JSON: an int as its digits, a
 * float by its shortest digits, in exponent form below 1e-4 and from 1e16 (`1e-07`, `1e+16`). */
function pythonNumber(n: number): string {
  const text = JSON.stringify(n);
  if (/^-?\d+$/.test(text)) return text; // read as an int
  const [digits, power] = n.toExponential().split("e") as [string, string];
  const exponent = Number(power);
  if (exponent >= -4 && exponent < 16) return /[.e]/.test(text) ? text : `${text}.0`;
  return `${digits}e${exponent < 0 ? "-" : "+"}${String(Math.abs(exponent)).padStart(2, "0")}`;
}

/** The one text form the hash is taken over (Python's `json.dumps(sort_keys=True,
 * separators=(",", ":"), ensure_ascii=False)` of the same JSON). */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value && typeof value === "object") {
    const object = value as JSONObject;
    return `{${Object.keys(object).sort(byCodePoint).map((key) => `${JSON.stringify(key)}:${canonicalJson(object[key])}`).join(",")}}`;
  }
  if (typeof value === "number") return pythonNumber(value);
  return JSON.stringify(value ?? null);
}

/** JSON text as its value: frameworks turn a tool's answer into text, and a stamp inside the
 * text is a stamp all the same. */
function parsed(data: unknown): unknown {
  if (typeof data === "string" && (data.startsWith("{") || data.startsWith("["))) {
    try {
      return JSON.parse(data);
    } catch {
      return data;
    }
  }
  return data;
}

/** The hash the server would take of `data` (as JSON, `jsonable`'s form), volatile keys left out. */
export function resultHash(data: unknown): string {
  return createHash("sha256").update(canonicalJson(dropVolatile(parsed(data))), "utf8").digest("hex");
}
