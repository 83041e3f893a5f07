/** What the client hands to and gets from the application: decisions, tool reports, plans. */

import { InvalidEvidence } from "./errors.js";
import type { components } from "./schema.js";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type JSONObject = Record<string, any>;

/** The API's own shapes, generated from its OpenAPI schema (`npm run schema`). */
export type Schemas = components["schemas"];

// Guard decisions (docs/DESIGN.md section 4) and the result kinds of a tool execution.
export const ALLOW = "ALLOW";
export const CONTINUE = "CONTINUE";
export const STOP = "STOP";
export const WAIT = "WAIT";
export const BLOCK = "BLOCK";
export const REUSE = "REUSE";
export const EXECUTE = "EXECUTE";
/** Not the server's: an adapter answered the model itself (its arguments derive no operation
 * key), and nothing was asked. */
export const INVALID = "INVALID";
export const SUCCESS = "SUCCESS";
export const RETRYABLE = "RETRYABLE";
export const PENDING = "PENDING";
export const PRECONDITION = "PRECONDITION";
export const FATAL = "FATAL";
export const NO_RESULT = "NO_RESULT";
export const COMPLETED = "COMPLETED";
export const READ = "read";
export const WRITE = "write";

export type Decision = "ALLOW" | "CONTINUE" | "STOP" | "WAIT" | "BLOCK" | "REUSE" | "EXECUTE" | "INVALID";
export type ResultKind = "SUCCESS" | "RETRYABLE" | "PENDING" | "PRECONDITION" | "FATAL" | "NO_RESULT";
export type Effect = "read" | "write";

export interface Evidence {
  revision: number;
  done: boolean;
  committed?: boolean;
  milestone?: string;
}

const REVISION_MAX = 2n ** 63n - 1n;

/** What is wrong with a verifier's evidence, naming the field; null when it is well formed
 * (the rule of `loopwarden_client.evidence`, the server's too). */
export function evidenceProblem(evidence: unknown): string | null {
  if (typeof evidence !== "object" || evidence === null || Array.isArray(evidence)) {
    return `evidence must be an object, not ${evidence === null ? "null" : Array.isArray(evidence) ? "array" : typeof evidence}`;
  }
  const e = evidence as JSONObject;
  if (!("revision" in e)) return "evidence['revision'] is missing: an int, the verified revision";
  if (typeof e.revision !== "number" || !Number.isInteger(e.revision)) {
    return `evidence['revision'] must be an int, not ${JSON.stringify(e.revision)}`;
  }
  if (e.revision < 0 || BigInt(e.revision) > REVISION_MAX) {
    return e.revision < 0
      ? `evidence['revision'] must be at least 0, the task's, not ${e.revision}`
      : `evidence['revision'] must be at most ${REVISION_MAX}, not ${e.revision}`;
  }
  if (!("done" in e)) return "evidence['done'] is missing: a bool, whether the goal is met";
  if (typeof e.done !== "boolean") return `evidence['done'] must be a bool, not ${JSON.stringify(e.done)}`;
  if (e.committed != null && typeof e.committed !== "boolean") {
    return `evidence['committed'] must be a bool, not ${JSON.stringify(e.committed)}`;
  }
  if (e.milestone != null && typeof e.milestone !== "string") {
    return `evidence['milestone'] must be a str, not ${JSON.stringify(e.milestone)}`;
  }
  return null;
}

export function checkEvidence(evidence: unknown): void {
  if (evidence != null) {
    const problem = evidenceProblem(evidence);
    if (problem !== null) throw new InvalidEvidence(problem);
  }
}

/** The fields that have a value: the API reads an absent field and a null alike. */
export function dropNone(fields: JSONObject): JSONObject {
  return Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined && v !== null));
}

/** A JSON form of a tool's output, for the result report: the tool already ran, so its result
 * must reach the server whatever it holds (a bigint as text, a Date in ISO 8601, a Set as a
 * list, a Map as an object, a value JSON has no form for as its text, and a reference back to
 * an object that holds it as "[Circular]": the rest is kept, as Python's repr keeps it). */
export function jsonable(value: unknown): unknown {
  const holders: object[] = []; // the objects being walked, outermost first
  const walk = (item: unknown, key: string): unknown => {
    let v = item;
    if (v !== null && typeof v === "object" && typeof (v as { toJSON?: unknown }).toJSON === "function") {
      v = (v as { toJSON(key: string): unknown }).toJSON(key);
    }
    if (typeof v === "bigint") return v.toString();
    if (typeof v === "number") return Number.isFinite(v) ? v : String(v);
    if (typeof v === "function" || typeof v === "symbol") return String(v);
    if (v === null || typeof v !== "object") return v; // a string, a boolean, undefined
    if (holders.includes(v)) return "[Circular]";
    holders.push(v);
    try {
      if (v instanceof Set) v = [...v];
      else if (v instanceof Map) v = Object.fromEntries(v);
      if (Array.isArray(v)) return v.map((element, index) => walk(element, String(index)) ?? null);
      const object: JSONObject = {};
      for (const [name, field] of Object.entries(v as JSONObject)) {
        const walked = walk(field, name);
        if (walked !== undefined) object[name] = walked;
      }
      return object;
    } finally {
      holders.pop();
    }
  };
  try {
    return walk(value, "") ?? null;
  } catch {
    return String(value);
  }
}

/** What a tool execution produced, as reported to the result endpoint. An `execute` function
 * may return one (`toolReport({...})`) or plain data (SUCCESS). Evidence must come from the
 * application's verifier, never from the model's text. */
export class ToolReport {
  readonly kind: ResultKind | string;
  readonly data: unknown;
  readonly evidence: Evidence | null;
  readonly waitMs: number | null;
  readonly jobId: string | null;
  readonly attempts: number;
  readonly code: string | null;
  readonly error: string | null;
  readonly dataHash: string | null;

  constructor(fields: {
    kind?: ResultKind | string;
    data?: unknown;
    evidence?: Evidence | null;
    waitMs?: number | null;
    jobId?: string | null;
    attempts?: number;
    code?: string | null;
    error?: string | null;
    dataHash?: string | null;
  } = {}) {
    checkEvidence(fields.evidence);
    this.kind = fields.kind ?? SUCCESS;
    this.data = fields.data ?? null;
    this.evidence = fields.evidence ?? null;
    this.waitMs = fields.waitMs ?? null;
    this.jobId = fields.jobId ?? null;
    this.attempts = fields.attempts ?? 1;
    this.code = fields.code ?? null;
    this.error = fields.error ?? null;
    this.dataHash = fields.dataHash ?? null;
  }

  with(fields: Partial<ConstructorParameters<typeof ToolReport>[0]>): ToolReport {
    return new ToolReport({ ...this, ...fields });
  }

  /** The result endpoint's fields besides `kind`, as JSON. */
  resultFields(): JSONObject {
    return dropNone({
      data: this.data == null ? null : jsonable(this.data),
      evidence: this.evidence == null ? null : jsonable(this.evidence),
      // The tool ran: a count JSON cannot hold is left out rather than keep the report from leaving.
      wait_ms: Number.isFinite(this.waitMs) ? this.waitMs : null,
      job_id: this.jobId,
      attempts: Number.isFinite(this.attempts) ? this.attempts : null,
      code: this.code,
      error: this.error,
      data_hash: this.dataHash,
    });
  }

  /** The tool message for the model; failures are shaped like the BLOCK observation. */
  toolMessage(): JSONObject {
    if (this.kind === SUCCESS) return { success: true, data: this.data };
    const defaults: Record<string, string> = {
      [RETRYABLE]: "The tool failed temporarily.",
      [PENDING]: `Job ${this.jobId} is still running; poll it with job_id.`,
      [NO_RESULT]: "The tool gave no usable result.",
    };
    return {
      success: false,
      code: this.code ?? this.kind,
      retryable: this.kind === RETRYABLE || this.kind === PENDING,
      message: this.error ?? defaults[this.kind] ?? `The tool answered ${this.kind}.`,
      ...dropNone({ data: this.data, job_id: this.jobId, wait_ms: this.waitMs }),
    };
  }
}

/** How one guarded tool call ended: the message for the model and what decided it (EXECUTE,
 * REUSE, BLOCK, WAIT when the wait ran out, or INVALID); `report` is set when this call's
 * result finished the task (COMPLETED by evidence). */
export interface ToolOutcome {
  message: JSONObject;
  decision: Decision;
  executed: boolean;
  report: JSONObject | null;
}

/** One planning step of the model for `run`: the tool calls it asked for, or that it is done. */
export interface Plan {
  toolCalls?: PlannedCall[];
  done?: boolean;
  evidence?: Evidence | null;
  answer?: string | null;
  promptTokens?: number;
  completionTokens?: number;
  outputText?: string | null;
}

export interface PlannedCall {
  name: string;
  args?: JSONObject;
  effect?: Effect;
  operation_key?: string;
  job_id?: string;
  id?: string;
}
