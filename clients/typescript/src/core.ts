/**
 * The client without I/O, part one: every endpoint as a request, and the reading of answers
 * (the TypeScript twin of `loopwarden_client._core`). `Client` sends these through `flows.ts`.
 */

import { LoopwardenError, TaskStopped } from "./errors.js";
import { STOP, checkEvidence, dropNone, type Effect, type Evidence, type JSONObject, type Schemas } from "./types.js";

/** A request body as the client builds it, checked against the OpenAPI schema's own shape:
 * each field the schema's, of its type, or left out (null: not sent). */
export type Body<S> = { [K in keyof S]?: S[K] | null };

function body<S>(fields: Body<S>): JSONObject {
  return dropNone(fields as JSONObject);
}

export const VERSION = "0.1.0";
export const DEFAULT_WAIT_MS = 1000; // when a WAIT forgets to say how long
/** Seconds the client waits on the server: longer than the server's own longest wait (20 s). */
export const DEFAULT_TIMEOUT_SECONDS = 30;
export const USER_AGENT = `loopwarden-client-ts/${VERSION}`;
/** Refusals made before anything was decided, so sending the request again is safe. */
export const RESENDABLE = new Set(["429 THROTTLED", "503 DATABASE_UNAVAILABLE", "409 OPERATION_CONTENDED"]);
const RESENDABLE_STATUSES = new Set([429, 503, 409]);
/** A Retry-After longer than this is not slept out: the refusal is raised. */
export const MAX_THROTTLE_SECONDS = 60;

/** One API request, not yet sent, and how to read its answer. */
export interface Request {
  name: string; // the client method that built it; handed to the decision hook
  method: "GET" | "POST" | "PATCH" | "DELETE";
  path: string; // relative to the base URL
  body?: JSONObject;
  params?: Record<string, string>;
  taskId?: string;
  stopRaises?: boolean; // a guard endpoint: STOP becomes TaskStopped
  /** A decision: each send carries a `request_id` of its own, kept when it is sent again, so a
   * resend whose first answer was lost is answered that answer and counts nothing. */
  decision?: boolean;
}

/** A request's body as JSON text. A body JSON has no form for (a bigint, a cycle, NaN or
 * Infinity, which JSON.stringify would send as null) throws a TypeError naming the request:
 * nothing was sent, so it is the caller's mistake, never a lost request to send again. */
export function encodeBody(request: Request): string {
  try {
    return JSON.stringify(request.body, (key, value: unknown) => {
      if (typeof value === "number" && !Number.isFinite(value)) throw new TypeError(`${JSON.stringify(key)} is ${value}, which JSON cannot hold`);
      return value;
    });
  } catch (exc) {
    throw new TypeError(`${request.name}: the request body cannot be sent as JSON, nothing was sent: ${(exc as Error).message}`, { cause: exc });
  }
}

/** An HTTP answer, read whole. */
export interface Answer {
  status: number;
  statusText: string;
  headers: { get(name: string): string | null };
  text: string;
}

export type DecisionHook = (endpoint: string, request: JSONObject, answer: JSONObject) => void;

export function apiPath(...parts: Array<string | number>): string {
  return parts.map((p) => encodeURIComponent(String(p))).join("/");
}

function parseJson(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
}

/** The error for a 4xx/5xx answer, reading the `{"error": {...}}` envelope if any. */
export function errorFromAnswer(answer: Answer): LoopwardenError {
  const { status } = answer;
  const parsed = parseJson(answer.text);
  const body = parsed.ok ? (parsed.value as JSONObject | null) : null;
  if (body && typeof body === "object" && body.error && typeof body.error === "object") {
    const error = body.error as JSONObject;
    const fields = error.fields && typeof error.fields === "object" ? error.fields : null;
    return new LoopwardenError(status, String(error.code || `HTTP_${status}`), String(error.message || answer.statusText), fields);
  }
  if (body && typeof body === "object" && "detail" in body) {
    return new LoopwardenError(status, `HTTP_${status}`, String(body.detail));
  }
  return new LoopwardenError(status, `HTTP_${status}`, firstLine(answer));
}

/** One line for an answer without the envelope (an HTML page by its title). */
export function firstLine(answer: Answer): string {
  let text = answer.text;
  if ((answer.headers.get("content-type") ?? "").includes("html")) {
    const title = /<title[^>]*>([^<]*)<\/title>/i.exec(text);
    if (title) text = title[1] ?? text;
  }
  const line = text.split(/\r?\n/).map((l) => l.trim()).find((l) => l) ?? "";
  return line.slice(0, 200) || answer.statusText;
}

/** Decode an answer: throw on errors, report decisions to `hook`, throw TaskStopped on STOP. */
export function parseAnswer(request: Request, answer: Answer, hook?: DecisionHook | null): JSONObject {
  if (answer.status >= 400) throw errorFromAnswer(answer);
  if (!answer.text) return {};
  const parsed = parseJson(answer.text);
  if (!parsed.ok) throw new LoopwardenError(answer.status, "BAD_RESPONSE", "not JSON");
  const body = parsed.value as JSONObject;
  if (body && typeof body === "object" && !Array.isArray(body) && "decision" in body) {
    hook?.(request.name, request.body ?? {}, body);
    if (request.stopRaises && body.decision === STOP) {
      throw new TaskStopped(body.report as JSONObject, request.taskId ?? null);
    }
  }
  return body;
}

/** Seconds to wait before sending a refused request again, or null to read the answer: a 429
 * THROTTLED, 503 DATABASE_UNAVAILABLE or 409 OPERATION_CONTENDED was refused before anything
 * was decided; any other (a 429 TRIGGER_LOOP) is an answer, never retried. */
export function throttleDelay(answer: Answer, tries: number, maxTries: number): number | null {
  if (!RESENDABLE_STATUSES.has(answer.status) || tries >= maxTries) return null;
  if (!RESENDABLE.has(`${answer.status} ${errorFromAnswer(answer).code}`)) return null;
  const delay = retryAfterSeconds(answer.headers.get("retry-after")) ?? DEFAULT_WAIT_MS / 1000;
  return delay <= MAX_THROTTLE_SECONDS ? delay : null;
}

/** A Retry-After header (delta-seconds or an HTTP date) in seconds, or null if unreadable. */
export function retryAfterSeconds(value: string | null | undefined, now: number = Date.now()): number | null {
  if (!value || !value.trim()) return null;
  const text = value.trim();
  if (/^[+-]?(\d+\.?\d*|\.\d+)$/.test(text)) return Math.max(0, Number(text));
  const when = Date.parse(text);
  if (Number.isNaN(when)) return null;
  return Math.max(0, (when - now) / 1000);
}

function ask(name: string, body: JSONObject, taskId: string, ...path: Array<string | number>): Request {
  return { name, method: "POST", path: apiPath("tasks", taskId, ...path), body, taskId, stopRaises: true, decision: true };
}

export interface GateOptions {
  model?: string | null;
  estPromptTokens?: number | null;
  maxOutputTokens?: number | null;
}

export interface UsageFields {
  promptTokens: number;
  completionTokens: number;
  toolCalls?: Array<{ name: string; args?: JSONObject }> | null;
  outputText?: string | null;
}

export interface ToolRequestOptions {
  effect?: Effect;
  operationKey?: string | null;
  jobId?: string | null;
  callId?: string | null;
  modelCall?: number | null;
}

/** Every agent endpoint of docs/DESIGN.md section 6 as a request, unsent. */
export const REQUESTS = {
  createTask(goal: string, o: { profile?: string; limits?: JSONObject; externalRef?: string; triggerKey?: string } = {}): Request {
    const b = body<Schemas["TaskCreateInRequest"]>({ goal, profile: o.profile, limits: o.limits, external_ref: o.externalRef, trigger_key: o.triggerKey });
    return { name: "create_task", method: "POST", path: "tasks", body: b };
  },
  getTask(taskId: string): Request {
    return { name: "get_task", method: "GET", path: apiPath("tasks", taskId), taskId };
  },
  trace(taskId: string, pageSize?: number): Request {
    const params = pageSize === undefined ? undefined : { limit: String(pageSize) };
    return { name: "trace", method: "GET", path: apiPath("tasks", taskId, "trace"), params, taskId };
  },
  gateModelCall(taskId: string, o: GateOptions = {}): Request {
    const b = body<Schemas["ModelCallInRequest"]>({ model: o.model, est_prompt_tokens: o.estPromptTokens, max_output_tokens: o.maxOutputTokens });
    return ask("gate_model_call", b, taskId, "model-calls");
  },
  reportUsage(taskId: string, modelCall: number, u: UsageFields): Request {
    const toolCalls = u.toolCalls?.length ? u.toolCalls.map((c) => ({ name: c.name, args: c.args ?? {} })) : null;
    const b = body<Schemas["UsageInRequest"]>({
      prompt_tokens: u.promptTokens,
      completion_tokens: u.completionTokens,
      tool_calls: toolCalls,
      output_text: u.outputText,
    });
    return ask("report_usage", b, taskId, "model-calls", modelCall, "usage");
  },
  requestTool(taskId: string, tool: string, args: JSONObject, o: ToolRequestOptions = {}): Request {
    const b = body<Schemas["ToolRequestInRequest"]>({
      tool,
      args: { ...args },
      effect: o.effect ?? "read",
      operation_key: o.operationKey,
      job_id: o.jobId,
      call_id: o.callId,
      model_call: o.modelCall,
    });
    return ask("request_tool", b, taskId, "tool-calls");
  },
  reportResult(taskId: string, toolCall: number, kind: string, fields: Body<Schemas["ToolResultInRequest"]> = {}): Request {
    return ask("report_result", body<Schemas["ToolResultInRequest"]>({ ...fields, kind }), taskId, "tool-calls", toolCall, "result");
  },
  finish(taskId: string, o: { evidence?: Evidence | null; answer?: string | null } = {}): Request {
    checkEvidence(o.evidence);
    const b = body<Schemas["FinishInRequest"]>({ evidence: o.evidence as JSONObject | null | undefined, answer: o.answer });
    return { name: "finish", method: "POST", path: apiPath("tasks", taskId, "finish"), body: b, taskId, decision: true };
  },
  stop(taskId: string, o: { reason?: string | null; requestId?: string | null } = {}): Request {
    const b = body<Schemas["StopInRequest"]>({ reason: o.reason, request_id: o.requestId });
    return { name: "stop", method: "POST", path: apiPath("tasks", taskId, "stop"), body: b };
  },
  resume(taskId: string, reason: string, grant?: JSONObject): Request {
    return { name: "resume", method: "POST", path: apiPath("tasks", taskId, "resume"), body: body<Schemas["ResumeInRequest"]>({ reason, grant: grant as never }) };
  },
};
