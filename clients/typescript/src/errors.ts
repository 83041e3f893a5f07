/**
 * The client's errors: the API refused a request, the guard stopped the task, the application
 * wrote evidence the guard would refuse, or the network lost a request or its answer.
 */

import type { JSONObject } from "./types.js";

/** The API refused the request (HTTP 4xx/5xx). `code` is the error envelope's code, or
 * `HTTP_<status>` when the answer carried no envelope; `fields` maps field names to problems. */
export class LoopwardenError extends Error {
  readonly status: number;
  readonly code: string;
  readonly fields: Record<string, unknown>;
  readonly detail: string;

  constructor(status: number, code: string, message: string, fields?: Record<string, unknown> | null) {
    super(`${status} ${code}: ${message}`);
    this.name = "LoopwardenError";
    this.status = status;
    this.code = code;
    this.detail = message;
    this.fields = { ...(fields ?? {}) };
  }
}

/** The guard answered STOP: the task is terminal; `report` is its stored stop report.
 * A stop is sticky: every later call answers the same report; only an operator's resume
 * opens a new phase. Let it reach the top of the agent and show the report to a human. */
export class TaskStopped extends Error {
  readonly report: JSONObject;
  readonly taskId: string | null;
  readonly state: string | null;
  readonly reason: string | null;
  readonly code: string | null;

  constructor(report: JSONObject | null | undefined, taskId: string | null = null, options?: { cause?: unknown }) {
    const r: JSONObject = { ...(report ?? {}) };
    const state = typeof r.state === "string" ? r.state : null;
    const reason = typeof r.reason === "string" ? r.reason : null;
    const code = typeof r.code === "string" ? r.code : null;
    super(`task ${taskId} stopped: ${state}/${reason}${code ? ` (${code})` : ""}`, options);
    this.name = "TaskStopped";
    this.report = r;
    this.taskId = taskId;
    this.state = state;
    this.reason = reason;
    this.code = code;
  }
}

/** Evidence that is not `{revision: int, done: bool, committed?: bool, milestone?: string}`,
 * refused where it is written, before anything is sent; the message names the field. */
export class InvalidEvidence extends Error {
  constructor(message: string) {
    super(message);
    this.name = "InvalidEvidence";
  }
}

/** The request or its answer was lost on the network. `unsent`: the connection could not be
 * made, so the request never reached the server (sending it again is safe, whatever it is). */
export class TransportError extends Error {
  readonly unsent: boolean;

  constructor(message: string, unsent: boolean, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "TransportError";
    this.unsent = unsent;
  }
}
