/**
 * The client without I/O, part two: the flows (the TypeScript twin of `loopwarden_client._flows`).
 *
 * A flow is a generator that yields steps (a request to send, a sleep, application code to
 * invoke) and is handed back what each step produced, or thrown the error it raised. `drive`
 * performs the steps; tests and adapters can drive the same flows their own way.
 */

import { DEFAULT_WAIT_MS, REQUESTS, parseAnswer, throttleDelay, type Answer, type DecisionHook, type Request } from "./core.js";
import { LoopwardenError, TaskStopped, TransportError } from "./errors.js";
import { resultHash } from "./novelty.js";
import {
  BLOCK,
  COMPLETED,
  EXECUTE,
  NO_RESULT,
  REUSE,
  SUCCESS,
  ToolReport,
  WAIT,
  type Effect,
  type JSONObject,
  type ToolOutcome,
} from "./types.js";

export interface Sleep {
  kind: "sleep";
  seconds: number;
}

export interface Invoke {
  kind: "invoke";
  fn: (...args: any[]) => unknown;
  args: unknown[];
}

export type Step = { kind: "request"; request: Request } | Sleep | Invoke;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Flow<T> = Generator<Step, T, any>;

export const sleepStep = (seconds: number): Sleep => ({ kind: "sleep", seconds });
export const invoke = (fn: (...args: any[]) => unknown, ...args: unknown[]): Invoke => ({ kind: "invoke", fn, args });
const requestStep = (request: Request): Step => ({ kind: "request", request });

/** The longest a client waits between two asks while another call holds a write. */
export const MAX_WAIT_SECONDS = 15;
/** A connection that could not be made is tried again after 0.5 s, doubling. */
export const FIRST_RECONNECT_SECONDS = 0.5;

/** Run a flow; a step's error is thrown back into the flow. `send` answers a request step. */
export async function drive<T>(
  flow: Flow<T>,
  send: (request: Request) => Promise<unknown>,
  sleep: (seconds: number) => Promise<void>,
): Promise<T> {
  let reply: unknown = undefined;
  let error: unknown = undefined;
  let failed = false;
  for (;;) {
    const next = failed ? flow.throw(error) : flow.next(reply);
    if (next.done) return next.value;
    const step = next.value;
    failed = false;
    try {
      if (step.kind === "request") reply = await send(step.request);
      else if (step.kind === "sleep") reply = await sleep(step.seconds);
      else reply = await step.fn(...step.args);
    } catch (exc) {
      failed = true;
      error = exc;
    }
  }
}

/** A flow that only sends one request through the client (`sendFlow` around it). */
export function* ask<T = JSONObject>(request: Request): Flow<T> {
  return (yield requestStep(request)) as T;
}

/** One request as the client sends it: the driver's `send` transmits it and hands back the
 * HTTP answer (or throws a TransportError). A refusal the server rolled back is sent again
 * after its Retry-After, a connection that could not be made after a short wait, up to
 * `maxTries` sends. A decision goes with a `request_id`, the same on every send of it, and is
 * sent again the same way on a lost answer too (a dropped connection, a timeout): the server
 * answers a repeat its first answer and counts nothing. Any other request's lost answer is
 * thrown: the server may have acted on it. */
export function* sendFlow(request: Request, maxTries: number, hook?: DecisionHook | null): Flow<JSONObject> {
  const sent = identified(request);
  let tries = 1;
  for (;;) {
    let answer: Answer;
    try {
      answer = yield requestStep(sent);
    } catch (exc) {
      if (!(exc instanceof TransportError) || tries >= maxTries || !(exc.unsent || request.decision)) throw exc;
      yield sleepStep(FIRST_RECONNECT_SECONDS * 2 ** (tries - 1));
      tries += 1;
      continue;
    }
    const delay = throttleDelay(answer, tries, maxTries);
    if (delay === null) return parseAnswer(request, answer, hook);
    yield sleepStep(delay);
    tries += 1;
  }
}

/** A decision with a `request_id` of its own; any other request as it is. */
export function identified(request: Request): Request {
  if (!request.decision || (request.body && "request_id" in request.body)) return request;
  return { ...request, body: { ...(request.body ?? {}), request_id: crypto.randomUUID().replace(/-/g, "") } };
}

/** Report what an execution produced. The tool ran, so its call must close (a committed write
 * must reach the ledger): a report the server cannot take whole, refused for its size (413) or
 * depth (BODY_TOO_DEEP), or with the connection dropped under it (a server that refuses a body
 * before reading it may reset the connection), is sent once more without its data, the data's
 * hash kept for the novelty rule (the caller's `dataHash`, else the one the server would take).
 * Both under one `request_id`: a first that did arrive answers both. */
function* reported(taskId: string, toolCall: number, report: ToolReport, durationMs: number): Flow<JSONObject> {
  const fields: JSONObject = { duration_ms: durationMs, ...report.resultFields(), request_id: crypto.randomUUID().replace(/-/g, "") };
  try {
    return (yield requestStep(REQUESTS.reportResult(taskId, toolCall, report.kind, fields))) as JSONObject;
  } catch (exc) {
    const tooLarge = exc instanceof TransportError || (exc instanceof LoopwardenError && (exc.status === 413 || exc.code === "BODY_TOO_DEEP"));
    if (!("data" in fields) || !tooLarge) throw exc;
  }
  const { data, ...withoutData } = fields;
  withoutData.data_hash = report.dataHash ?? resultHash(data);
  return (yield requestStep(REQUESTS.reportResult(taskId, toolCall, report.kind, withoutData))) as JSONObject;
}

export function describe(exc: unknown): string {
  if (exc instanceof Error) return exc.message ? `${exc.name}: ${exc.message}` : exc.name;
  return String(exc);
}

export interface ToolFlowOptions {
  effect?: Effect;
  operationKey?: string | null;
  jobId?: string | null;
  callId?: string | null;
  modelCall?: number | null;
  inspect?: ((data: unknown) => unknown) | null;
  maxWaitTries?: number;
}

/** Request, honour WAIT, execute on EXECUTE, report; return the tool message and decision.
 * A result that completes the task (STOP with a COMPLETED report) is success: the outcome
 * carries the report. Every other STOP throws TaskStopped. */
export function* toolFlow(
  taskId: string,
  tool: string,
  args: JSONObject,
  execute: (args: JSONObject) => unknown,
  o: ToolFlowOptions = {},
): Flow<ToolOutcome> {
  const maxWaitTries = o.maxWaitTries ?? 30;
  const request = REQUESTS.requestTool(taskId, tool, args, o);
  let answer: JSONObject = yield requestStep(request);
  let tries = 1;
  while (answer.decision === WAIT) {
    if (tries >= maxWaitTries) {
      const message = {
        success: false,
        code: "OPERATION_IN_FLIGHT",
        retryable: true,
        message: `${tool} is still running elsewhere under ${o.operationKey}.`,
      };
      return { message, decision: WAIT, executed: false, report: null };
    }
    const least = (answer.retry_after_ms || DEFAULT_WAIT_MS) / 1000;
    yield sleepStep(Math.max(least, Math.min(least * 2 ** (tries - 1), MAX_WAIT_SECONDS)));
    answer = yield requestStep(request);
    tries += 1;
  }
  const decision = answer.decision;
  if (decision === BLOCK) {
    const observation = answer.observation ?? { success: false, retryable: false };
    return { message: { ...observation }, decision: BLOCK, executed: false, report: null };
  }
  if (decision === REUSE) {
    return { message: { success: true, reused: true, data: answer.result ?? null }, decision: REUSE, executed: false, report: null };
  }
  if (decision !== EXECUTE) throw new LoopwardenError(200, "BAD_RESPONSE", `unexpected decision ${JSON.stringify(decision)}`);

  let failure: unknown = null;
  let failed = false;
  let report: ToolReport;
  const started = performance.now();
  try {
    const outcome = yield invoke(execute, args);
    report = outcome instanceof ToolReport ? outcome : new ToolReport({ data: outcome });
    if (o.inspect && report.kind === SUCCESS && report.evidence === null) {
      report = report.with({ evidence: (yield invoke(o.inspect, report.data)) as never });
    }
  } catch (exc) {
    // The tool may or may not have acted: NO_RESULT, never a guessed failure or success.
    failure = exc;
    failed = true;
    report = new ToolReport({ kind: NO_RESULT, error: describe(exc) });
  }
  const durationMs = Math.round(performance.now() - started);
  let reply: JSONObject;
  try {
    reply = yield* reported(taskId, Number(answer.tool_call), report, durationMs);
  } catch (exc) {
    if (exc instanceof TaskStopped) {
      if (exc.state === COMPLETED && !failed) {
        return { message: report.toolMessage(), decision: EXECUTE, executed: true, report: exc.report };
      }
      if (failed) throw new TaskStopped(exc.report, exc.taskId, { cause: failure });
    }
    throw exc;
  }
  if (reply.wait_ms) yield sleepStep(reply.wait_ms / 1000);
  return { message: report.toolMessage(), decision: EXECUTE, executed: true, report: null };
}
