/**
 * The client and its task sessions over the sans-I/O core (`core.ts`, `flows.ts`).
 *
 *     const lw = new Client("http://127.0.0.1:8000/api/v1/", token);
 *     const task = await lw.createTask("Export every invoice");
 *     const session = lw.session(task.id);
 *     const reply = await session.modelCall({ model: "gpt-4o" }, async (call) => {
 *       const reply = await llm(...);          // the paid call, only after ALLOW
 *       call.usage(reply.promptTokens, reply.completionTokens);
 *       return reply;
 *     });
 *     const message = await session.tool("fetch_page", { page: 1 }, fetchPage);
 *
 * Every guard STOP throws `TaskStopped` (sticky), except a tool result that completes the
 * task, which is success; refused requests throw `LoopwardenError`; a request or answer lost
 * on the network throws `TransportError` once the resends ran out.
 */

import {
  DEFAULT_TIMEOUT_SECONDS,
  REQUESTS,
  USER_AGENT,
  encodeBody,
  type Answer,
  type DecisionHook,
  type GateOptions,
  type Request,
  type ToolRequestOptions,
} from "./core.js";
import { TransportError } from "./errors.js";
import { drive, sendFlow, toolFlow, type Flow, type ToolFlowOptions } from "./flows.js";
import { dropNone, type Evidence, type JSONObject, type Plan, type Schemas, type ToolOutcome } from "./types.js";

export type Task = Schemas["Task"];
export type Sleeper = (seconds: number) => Promise<void>;
export const defaultSleep: Sleeper = (seconds) => new Promise((resolve) => setTimeout(resolve, seconds * 1000));

/** `sleep`, cut short by `signal`: once the caller aborted, a wait throws the signal's reason
 * at once instead of being slept out (a WAIT can last minutes). */
export function abortable(sleep: Sleeper, signal: AbortSignal | null | undefined): Sleeper {
  if (!signal) return sleep;
  return (seconds) =>
    new Promise<void>((resolve, reject) => {
      if (signal.aborted) return reject(signal.reason);
      let timer: ReturnType<typeof setTimeout> | undefined;
      const onAbort = () => {
        clearTimeout(timer);
        reject(signal.reason);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      const done = (settle: () => void) => {
        signal.removeEventListener("abort", onAbort);
        settle();
      };
      if (sleep === defaultSleep) timer = setTimeout(() => done(resolve), seconds * 1000); // nothing left running
      else sleep(seconds).then(() => done(resolve), (error: unknown) => done(() => reject(error)));
    });
}

export interface ClientOptions {
  /** Seconds to wait on the server for each answer (30); any fraction, or Infinity for no
   * limit (a wait past a timer's 24.8 days is that long). */
  timeout?: number;
  /** Called with every guard decision: (endpoint, request body, answer). */
  onDecision?: DecisionHook | null;
  /** Sends of one request refused with 429 THROTTLED, 503 DATABASE_UNAVAILABLE or 409
   * OPERATION_CONTENDED, each after its Retry-After, or whose connection could not be made
   * (or, for a decision, whose answer was lost) (5). */
  maxThrottleTries?: number;
  /** How the client sleeps out a Retry-After (a test can record it instead). */
  sleep?: Sleeper;
  /** The fetch to send with (the global one by default). */
  fetch?: typeof fetch;
}

// The longest a timer waits (2^31 - 1 ms): a longer one would fire at once.
const MAX_TIMER_MS = 2 ** 31 - 1;

// Error codes of a connection that could not be made: the request never left.
const UNSENT_CODES = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "UND_ERR_CONNECT_TIMEOUT",
]);

function causeCode(exc: unknown): string | undefined {
  let current: unknown = exc;
  for (let depth = 0; current && depth < 5; depth += 1) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === "string") return code;
    const errors = (current as { errors?: unknown[] }).errors; // AggregateError: IPv4 and IPv6 tries
    if (Array.isArray(errors) && errors.length) current = errors[0];
    else current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

/** The Loopwarden API for one token. */
export class Client {
  readonly baseUrl: string;
  readonly timeout: number;
  readonly maxThrottleTries: number;
  onDecision: DecisionHook | null;
  readonly sleep: Sleeper;
  readonly #token: string;
  readonly #fetch: typeof fetch;

  constructor(baseUrl: string, token: string, options: ClientOptions = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, "") + "/";
    this.#token = token;
    this.timeout = options.timeout ?? DEFAULT_TIMEOUT_SECONDS;
    if (typeof this.timeout !== "number" || !(this.timeout > 0)) {
      throw new RangeError(`timeout must be a number of seconds above 0 (Infinity for none), not ${String(this.timeout)}`);
    }
    this.maxThrottleTries = options.maxThrottleTries ?? 5;
    this.onDecision = options.onDecision ?? null;
    this.sleep = options.sleep ?? defaultSleep;
    this.#fetch = options.fetch ?? globalThis.fetch;
  }

  /** Send one request (with its resends) and read its answer. */
  send<T = JSONObject>(request: Request): Promise<T> {
    return drive(sendFlow(request, this.maxThrottleTries, this.onDecision), (r) => this.transmit(r), this.sleep) as Promise<T>;
  }

  /** Run a flow with this client: each of its requests goes through `send`. */
  drive<T>(flow: Flow<T>, sleep: Sleeper = this.sleep): Promise<T> {
    return drive(flow, (request) => this.send(request), sleep);
  }

  /** The HTTP answer, read whole; a TransportError when the request or its answer was lost. */
  async transmit(request: Request): Promise<Answer> {
    const url = new URL(request.path, this.baseUrl);
    for (const [key, value] of Object.entries(request.params ?? {})) url.searchParams.set(key, value);
    const headers: Record<string, string> = {
      Authorization: `Bearer ${this.#token}`,
      Accept: "application/json",
      "User-Agent": USER_AGENT,
    };
    if (request.body !== undefined) headers["Content-Type"] = "application/json";
    const body = request.body === undefined ? undefined : encodeBody(request); // a TypeError, never lost
    try {
      const response = await this.#fetch(url, {
        method: request.method,
        headers,
        body,
        signal: this.timeout === Infinity ? undefined : AbortSignal.timeout(Math.min(Math.ceil(this.timeout * 1000), MAX_TIMER_MS)),
      });
      const text = await response.text();
      return { status: response.status, statusText: response.statusText, headers: response.headers, text };
    } catch (exc) {
      const code = causeCode(exc);
      const unsent = code !== undefined && UNSENT_CODES.has(code);
      throw new TransportError(`${request.method} ${url.pathname}: ${code ?? (exc as Error)?.name ?? "lost"}`, unsent, { cause: exc });
    }
  }

  // -- agent endpoints

  createTask(goal: string, options: { profile?: string; limits?: JSONObject; externalRef?: string; triggerKey?: string } = {}): Promise<Task> {
    return this.send(REQUESTS.createTask(goal, options));
  }

  getTask(taskId: string): Promise<Task> {
    return this.send(REQUESTS.getTask(taskId));
  }

  /** The task's model calls, tool calls and events, every page of them. */
  async trace(taskId: string, pageSize?: number): Promise<{ calls: JSONObject[]; events: JSONObject[] } & JSONObject> {
    return (await this.#pages(REQUESTS.trace(taskId, pageSize), ["calls", "events"])) as { calls: JSONObject[]; events: JSONObject[] };
  }

  /** A paginated list, every page of it: each `next` link is followed and the lists under
   * `keys` are answered together (the API's lists are never cut). */
  async #pages(first: Request, keys: string[]): Promise<JSONObject> {
    let request = first;
    const whole: JSONObject = {};
    for (;;) {
      const page = await this.send(request);
      for (const [key, value] of Object.entries(page)) {
        if (keys.includes(key) && Array.isArray(value)) whole[key] = [...(whole[key] ?? []), ...value];
        else whole[key] = value;
      }
      if (!page.next) break;
      request = { ...request, path: String(page.next), params: undefined }; // the link carries the query
    }
    return whole;
  }

  gateModelCall(taskId: string, options: GateOptions = {}): Promise<Schemas["ModelCallDecision"]> {
    return this.send(REQUESTS.gateModelCall(taskId, options));
  }

  reportUsage(taskId: string, modelCall: number, usage: Parameters<typeof REQUESTS.reportUsage>[2]): Promise<JSONObject> {
    return this.send(REQUESTS.reportUsage(taskId, modelCall, usage));
  }

  requestTool(taskId: string, tool: string, args: JSONObject, options: ToolRequestOptions = {}): Promise<JSONObject> {
    return this.send(REQUESTS.requestTool(taskId, tool, args, options));
  }

  reportResult(taskId: string, toolCall: number, kind: string, fields: JSONObject = {}): Promise<JSONObject> {
    return this.send(REQUESTS.reportResult(taskId, toolCall, kind, fields));
  }

  finish(taskId: string, options: { evidence?: Evidence | null; answer?: string | null } = {}): Promise<Task> {
    return this.send(REQUESTS.finish(taskId, options));
  }

  stop(taskId: string, options: { reason?: string | null; requestId?: string | null } = {}): Promise<Task> {
    return this.send(REQUESTS.stop(taskId, options));
  }

  /** Operator: open the next phase, raising limits by `grant`. */
  resume(taskId: string, reason: string, grant?: JSONObject): Promise<Task> {
    return this.send(REQUESTS.resume(taskId, reason, grant));
  }

  /** Operator: the ledger's operations, every page of them, oldest first (`state` filters on
   * the server; `key` keeps that operation key's rows, filtered here: the API has no such
   * filter; `pageSize`: each request's `limit`). */
  async listOperations(params: { key?: string; state?: string; pageSize?: number } = {}): Promise<JSONObject[]> {
    const query = dropNone({ state: params.state, limit: params.pageSize === undefined ? undefined : String(params.pageSize) });
    const whole = await this.#pages({ name: "list_operations", method: "GET", path: "operations", params: query as Record<string, string> }, ["operations"]);
    const operations = (whole.operations ?? []) as JSONObject[];
    return params.key === undefined ? operations : operations.filter((op) => op.key === params.key);
  }

  session(taskId: string, options: SessionOptions = {}): TaskSession {
    return new TaskSession(this, taskId, options);
  }
}

export interface SessionOptions {
  /** How the session sleeps out a WAIT. */
  sleep?: Sleeper;
  /** How many WAITs one tool call sleeps out (30). */
  maxWaitTries?: number;
}

/** An allowed model call: call `usage(...)` once the model answered. */
export class ModelCall {
  readonly taskId: string;
  readonly modelCall: number;
  readonly round: number | null;
  answer: JSONObject | null = null; // the usage report's answer, once reported
  reportedUsage: { promptTokens: number; completionTokens: number; toolCalls?: Array<{ name: string; args?: JSONObject }> | null; outputText?: string | null } | null = null;

  constructor(taskId: string, modelCall: number, round: number | null) {
    this.taskId = taskId;
    this.modelCall = modelCall;
    this.round = round;
  }

  usage(promptTokens: number, completionTokens: number, toolCalls?: Array<{ name: string; args?: JSONObject }> | null, outputText?: string | null): void {
    this.reportedUsage = { promptTokens, completionTokens, toolCalls, outputText };
  }
}

export type ToolOptions = Omit<ToolFlowOptions, "maxWaitTries"> & {
  /** The caller's abort: a WAIT being slept out throws its reason at once. */
  signal?: AbortSignal | null;
};

/** Helpers bound to one task: wrap each model call and each tool execution. `report` is set
 * once a tool result completed the task (COMPLETED on the verifier's evidence). */
export class TaskSession {
  readonly client: Client;
  readonly taskId: string;
  readonly sleep: Sleeper;
  readonly maxWaitTries: number;
  lastModelCall: number | null = null;
  report: JSONObject | null = null;

  constructor(client: Client, taskId: string, options: SessionOptions = {}) {
    this.client = client;
    this.taskId = String(taskId);
    this.sleep = options.sleep ?? client.sleep;
    this.maxWaitTries = options.maxWaitTries ?? 30;
  }

  /** Run a flow with this session's client and sleep. */
  drive<T>(flow: Flow<T>): Promise<T> {
    return this.client.drive(flow, this.sleep);
  }

  /** Gate (TaskStopped on STOP), run `body(call)`, report the usage it set. The usage is
   * reported when the body throws too, if it was set: the money was spent. */
  async modelCall<T>(options: GateOptions, body: (call: ModelCall) => Promise<T> | T): Promise<T> {
    const allowed = await this.client.send(REQUESTS.gateModelCall(this.taskId, options));
    const call = new ModelCall(this.taskId, Number(allowed.model_call), allowed.round ?? null);
    this.lastModelCall = call.modelCall;
    let value: T;
    try {
      value = await body(call);
    } catch (exc) {
      if (call.reportedUsage) {
        try {
          call.answer = await this.client.send(REQUESTS.reportUsage(this.taskId, call.modelCall, call.reportedUsage));
        } catch {
          // the body's own error matters more; a stop (sticky) is repeated by the next call
        }
      }
      throw exc;
    }
    if (call.reportedUsage) {
      call.answer = await this.client.send(REQUESTS.reportUsage(this.taskId, call.modelCall, call.reportedUsage));
    } else {
      process.emitWarning(`model call ${call.modelCall} left without usage(); its reservation will be charged`);
    }
    return value;
  }

  /** The guarded tool call as a flow, for adapters that drive it themselves. */
  *toolFlow(tool: string, args: JSONObject, execute: (args: JSONObject) => unknown, options: ToolOptions = {}): Flow<ToolOutcome> {
    const outcome = yield* toolFlow(this.taskId, tool, args, execute, {
      ...options,
      modelCall: options.modelCall ?? this.lastModelCall,
      maxWaitTries: this.maxWaitTries,
    });
    if (outcome.report !== null) this.report = outcome.report;
    return outcome;
  }

  /** Run one tool call under the guard and return the tool message for the model. EXECUTE
   * runs `execute(args)` (a ToolReport or plain data, SUCCESS); an error from it is NO_RESULT.
   * REUSE gives the stored result, BLOCK the guard's observation; WAIT is slept out. Throws
   * TaskStopped on STOP, except a result that completes the task (sets `this.report`). */
  async tool(tool: string, args: JSONObject, execute: (args: JSONObject) => unknown, options: ToolOptions = {}): Promise<JSONObject> {
    return (await this.driveTool(tool, args, execute, options)).message;
  }

  /** `tool`, answering the whole outcome (for adapters). */
  driveTool(tool: string, args: JSONObject, execute: (args: JSONObject) => unknown, options: ToolOptions = {}): Promise<ToolOutcome> {
    const { signal, ...flowOptions } = options;
    return this.client.drive(this.toolFlow(tool, args, execute, flowOptions), abortable(this.sleep, signal));
  }

  finish(evidence?: Evidence | null, answer?: string | null): Promise<Task> {
    return this.client.finish(this.taskId, { evidence, answer });
  }

  stop(reason?: string | null): Promise<Task> {
    return this.client.stop(this.taskId, { reason });
  }

  get(): Promise<Task> {
    return this.client.getTask(this.taskId);
  }
}

export interface RunOptions extends GateOptions {
  maxRounds?: number;
  maxWaitTries?: number;
  sleep?: Sleeper;
}

/** Drive a whole agent loop under the guard and return the final task however it ends. Each
 * round: gate; `plan(history)`; report its usage and tool calls; no tool call (or `done`) is
 * the final answer: finish with its evidence; else run each tool call. */
export async function run(
  client: Client,
  taskId: string,
  plan: (history: JSONObject[]) => Plan | Promise<Plan>,
  execute: (name: string, args: JSONObject) => unknown,
  inspect?: ((name: string, args: JSONObject, data: unknown) => unknown) | null,
  options: RunOptions = {},
): Promise<Task> {
  const maxRounds = options.maxRounds ?? 100;
  const history: JSONObject[] = [];
  const session = client.session(taskId, { sleep: options.sleep, maxWaitTries: options.maxWaitTries });
  try {
    for (let round = 0; round < maxRounds; round += 1) {
      const allowed = await client.send(REQUESTS.gateModelCall(taskId, options));
      const modelCall = Number(allowed.model_call);
      const step = await plan(history);
      const toolCalls = step.toolCalls ?? [];
      await client.send(
        REQUESTS.reportUsage(taskId, modelCall, {
          promptTokens: step.promptTokens ?? 0,
          completionTokens: step.completionTokens ?? 0,
          toolCalls,
          outputText: step.outputText ?? step.answer,
        }),
      );
      history.push({ role: "assistant", round: allowed.round, tool_calls: toolCalls, answer: step.answer ?? null });
      if (step.done || toolCalls.length === 0) return await client.finish(taskId, { evidence: step.evidence, answer: step.answer });
      for (const call of toolCalls) {
        const args = { ...(call.args ?? {}) };
        const outcome = await session.drive(
          session.toolFlow(call.name, args, (a) => execute(call.name, a), {
            effect: call.effect ?? "read",
            operationKey: call.operation_key,
            jobId: call.job_id,
            callId: call.id,
            modelCall,
            inspect: inspect ? (data) => inspect(call.name, args, data) : null,
          }),
        );
        history.push({ role: "tool", name: call.name, args, content: outcome.message });
        if (outcome.report !== null) return await client.getTask(taskId);
      }
    }
    return await client.stop(taskId, { reason: `client loop gave up after ${maxRounds} rounds` });
  } catch (exc) {
    if (!(exc instanceof Error && exc.name === "TaskStopped")) throw exc;
  }
  return client.getTask(taskId);
}
