/**
 * What every framework adapter shares (the TypeScript twin of `loopwarden_client.guard`): tool
 * declarations and the guard around one agent run.
 *
 * An adapter translates its framework's hooks into the three questions of docs/DESIGN.md
 * section 4, asked through a `Guard`:
 * - before each model call, `gate()`: ALLOW runs the model; STOP ends the run with a final
 *   message carrying the report (`guard.report`, `guard.stopMessage()`);
 * - after it, `usage(...)` with the framework's own token counts (nothing when the provider
 *   gave none: the reservation is then charged);
 * - around each tool call, `tool(...)`: EXECUTE runs the tool and reports its result (an
 *   exception is NO_RESULT); REUSE and BLOCK answer with the stored result or the nudge and
 *   never run it; WAIT is slept out; STOP throws TaskStopped.
 *
 * Tools are declared once, at setup: `read()` (the default for undeclared tools) or
 * `write({ key })`, where `key` derives the operation key from the call's arguments
 * (`"pay-{invoice}"` or a function). When the run ends with the agent's final answer, the
 * adapter finishes the task with the verifier's latest evidence (COMPLETED when it says done,
 * else PARTIAL/goal_unverified), unless `keepOpen`. Without an `evidence` callback, a write that
 * returned normally is reported committed at the task's revision, and every result carries its
 * data, which the server hashes for a `novelty` profile.
 */

import { REQUESTS } from "./core.js";
import { TaskStopped } from "./errors.js";
import type { Task, TaskSession } from "./client.js";
import { COMPLETED, INVALID, READ, RETRYABLE, ToolReport, WRITE, checkEvidence, jsonable, type Effect, type Evidence, type JSONObject, type ToolOutcome } from "./types.js";

export const MAX_ANSWER = 4000; // characters of the final answer sent with `finish`

/** `text` cut to at most `limit` UTF-16 units, never between the two halves of a character:
 * a lone half is text the server refuses (400 UNSUPPORTED_TEXT). */
export function clip(text: string, limit: number): string {
  const cut = text.slice(0, limit);
  return cut.length === limit && /[\uD800-\uDBFF]$/.test(cut) ? cut.slice(0, -1) : cut;
}

export type KeyRule = string | ((args: JSONObject) => string);
export type EvidenceFn = (tool: string, args: JSONObject, data: unknown) => Evidence | null | undefined | Promise<Evidence | null | undefined>;

/** How the guard sees one tool: its effect and, for a write, its operation key rule. */
export class ToolSpec {
  readonly effect: Effect;
  readonly key: KeyRule | null;
  readonly jobId: ((args: JSONObject) => string | null | undefined) | null;
  readonly committed: ((data: unknown) => boolean) | null;

  constructor(effect: Effect = READ, options: { key?: KeyRule | null; jobId?: ToolSpec["jobId"]; committed?: ToolSpec["committed"] } = {}) {
    if (effect !== READ && effect !== WRITE) throw new Error(`effect must be 'read' or 'write', not ${JSON.stringify(effect)}`);
    if (effect === WRITE && !options.key) throw new Error("a write tool needs key: how its operation key derives from its arguments");
    this.effect = effect;
    this.key = options.key ?? null;
    this.jobId = options.jobId ?? null;
    this.committed = options.committed ?? null;
  }

  /** The call's operation key; InvalidArguments when its arguments cannot derive one. */
  operationKey(args: JSONObject): string | null {
    const rule = this.key;
    if (rule === null) return null;
    try {
      return typeof rule === "function" ? String(rule(args)) : formatKey(rule, args);
    } catch (exc) {
      throw new InvalidArguments(`its operation key (${typeof rule === "string" ? rule : rule.name || "a function"})`, exc);
    }
  }

  pollJob(args: JSONObject): string | null {
    if (this.jobId === null) return null;
    try {
      return this.jobId(args) ?? null;
    } catch (exc) {
      throw new InvalidArguments(`the job it polls (${this.jobId.name || "a function"})`, exc);
    }
  }
}

class MissingArgument extends Error {
  constructor(readonly argument: string) {
    super(argument);
  }
}

/** `"pay-{invoice}"` over the arguments, as Python's `str.format` reads it. */
function formatKey(template: string, args: JSONObject): string {
  return template.replace(/\{([^{}]*)\}/g, (_match, name: string) => {
    if (!(name in args) || args[name] === undefined) throw new MissingArgument(name);
    const value = args[name];
    return typeof value === "string" ? value : JSON.stringify(value);
  });
}

/** A tool call's arguments cannot derive what its declaration needs: the model's mistake,
 * answered to the model as the tool's message; nothing is asked and nothing runs. */
export class InvalidArguments extends Error {
  readonly detail: string;

  constructor(needed: string, cause: unknown) {
    const detail = cause instanceof MissingArgument ? `the argument '${cause.argument}'` : String(cause);
    super(`cannot derive ${needed}: ${detail}`);
    this.name = "InvalidArguments";
    this.detail = detail;
  }

  toolMessage(tool: string): JSONObject {
    return {
      success: false,
      code: "INVALID_TOOL_ARGUMENTS",
      retryable: false,
      message: `${tool} was not run: ${this.message}. Call it again with complete arguments.`,
    };
  }
}

/** A tool without side effects; `jobId(args)` marks it as a status poll of that job. */
export function read(options: { jobId?: (args: JSONObject) => string | null | undefined } = {}): ToolSpec {
  return new ToolSpec(READ, { jobId: options.jobId });
}

/** A tool with a side effect, executed at most once per operation key. */
export function write(options: { key: KeyRule; committed?: (data: unknown) => boolean }): ToolSpec {
  return new ToolSpec(WRITE, options);
}

export type ToolDeclarations = Record<string, ToolSpec | "read">;

export function toolSpecs(tools: ToolDeclarations | null | undefined): Map<string, ToolSpec> {
  const specs = new Map<string, ToolSpec>();
  for (const [name, spec] of Object.entries(tools ?? {})) {
    if ((spec as string) === WRITE) {
      throw new Error(`tool '${name}' is a write: declare it as write({ key }) so its operation key can be derived from its arguments`);
    }
    if (spec === READ) specs.set(name, new ToolSpec(READ));
    else if (spec instanceof ToolSpec) specs.set(name, spec);
    else throw new TypeError(`tool '${name}': expected read(), write({ key }) or 'read'`);
  }
  return specs;
}

/** A read's error the framework hands back to the model: RETRYABLE, the least wait. */
export function handedBack(message: string): ToolReport {
  return new ToolReport({ kind: RETRYABLE, code: "HANDED_BACK", error: clip(message, 2000), waitMs: 1 });
}

/** A run's final output as the answer `finish` sends: text as it is, anything else as JSON. */
export function answerText(output: unknown): string {
  return typeof output === "string" ? output : JSON.stringify(jsonable(output));
}

/** A provider's token counts, or nulls when it sent none (both zero or missing). */
export function providerCounts(prompt: number | null | undefined, completion: number | null | undefined): [number | null, number | null] {
  if (!prompt && !completion) return [null, null];
  return [prompt ?? 0, completion ?? 0];
}

/** The final message a framework run ends with when the guard stopped the task. */
export function stopText(report: JSONObject): string {
  const { state, reason, code } = report;
  if (state === COMPLETED) return `Loopwarden: the task is ${state}/${reason}; nothing more to do.`;
  let text = `Loopwarden stopped this task: ${state}/${reason}`;
  if (code) text += ` (${code})`;
  if (report.resume_condition) text += `. ${report.resume_condition}`;
  return text;
}

export interface GuardOptions {
  /** Per tool name: `read()` (the default) or `write({ key })`. */
  tools?: ToolDeclarations | null;
  /** The application's verifier: its evidence goes with each result, the latest with finish. */
  evidence?: EvidenceFn | null;
  model?: string | null;
  estPromptTokens?: number | null;
  maxOutputTokens?: number | null;
  /** Leave the task RUNNING when the run ends with its final answer (default: finish it). */
  keepOpen?: boolean;
}

export interface UsageReport {
  promptTokens: number | null | undefined;
  completionTokens: number | null | undefined;
  toolCalls?: Array<{ name: string; args?: JSONObject }> | null;
  outputText?: string | null;
}

/** The guard around one agent run of one task, for framework adapters. */
export class Guard {
  readonly session: TaskSession;
  readonly tools: Map<string, ToolSpec>;
  readonly evidence: EvidenceFn | null;
  readonly model: string | null;
  readonly estPromptTokens: number | null;
  readonly maxOutputTokens: number | null;
  readonly keepOpen: boolean;
  /** The stop report, once the task ended. */
  report: JSONObject | null = null;
  /** The verifier's latest evidence. */
  verified: Evidence | null = null;
  #revision: number | null = null;
  /** A finish started by an event the caller does not await (`finishLater`), and its error. */
  #finishing: Promise<unknown> | null = null;
  #finishError: unknown = null;

  constructor(session: TaskSession, options: GuardOptions = {}) {
    if (!session || typeof session.toolFlow !== "function") throw new TypeError("session must be a TaskSession (client.session(taskId))");
    this.session = session;
    this.tools = toolSpecs(options.tools);
    this.evidence = options.evidence ?? null;
    this.model = options.model ?? null;
    this.estPromptTokens = options.estPromptTokens ?? null;
    this.maxOutputTokens = options.maxOutputTokens ?? null;
    this.keepOpen = options.keepOpen ?? false;
  }

  get taskId(): string {
    return this.session.taskId;
  }

  spec(tool: string): ToolSpec {
    return this.tools.get(tool) ?? new ToolSpec();
  }

  /** Refuse a declaration naming a tool the agent does not have (by the name the model sees):
   * a misnamed write would otherwise be guarded as a read, its key never asked for. */
  checkTools(names: Iterable<string>): void {
    const have = new Set(names);
    const unknown = [...this.tools.keys()].filter((name) => !have.has(name)).sort();
    if (unknown.length) {
      throw new Error(`declared tools the agent does not have: ${JSON.stringify(unknown)}; declare each by the name the model sees: ${JSON.stringify([...have].sort())}`);
    }
  }

  /** The model gate: the allowed model call's id, or null when the task is stopped. Asked
   * every time, even after a stop: only the server knows whether an operator resumed it. */
  async gate(model?: string | null): Promise<number | null> {
    let answer: JSONObject;
    try {
      answer = await this.session.client.send(
        REQUESTS.gateModelCall(this.taskId, { model: model ?? this.model, estPromptTokens: this.estPromptTokens, maxOutputTokens: this.maxOutputTokens }),
      );
    } catch (exc) {
      if (exc instanceof TaskStopped) {
        this.report = exc.report;
        return null;
      }
      throw exc;
    }
    this.report = null; // resumed: an earlier stop no longer holds
    this.session.lastModelCall = Number(answer.model_call);
    return this.session.lastModelCall;
  }

  /** Settle a model call; false if the report stopped the task (e.g. repeated_output). Without
   * token counts nothing is reported: the gate's reservation is charged instead. */
  async usage(modelCall: number, usage: UsageReport): Promise<boolean> {
    const [prompt, completion] = providerCounts(usage.promptTokens, usage.completionTokens);
    if (prompt === null && completion === null) return true;
    try {
      await this.session.client.send(
        REQUESTS.reportUsage(this.taskId, modelCall, {
          promptTokens: Math.trunc(prompt ?? 0),
          completionTokens: Math.trunc(completion ?? 0),
          toolCalls: usage.toolCalls,
          outputText: usage.outputText,
        }),
      );
    } catch (exc) {
      if (exc instanceof TaskStopped) {
        this.report = exc.report;
        return false;
      }
      throw exc;
    }
    return true;
  }

  /** One guarded tool call; `execute(args)` runs only on EXECUTE. STOP throws TaskStopped.
   * Arguments that cannot derive the call's operation key are the model's mistake: it gets the
   * INVALID outcome's message, the tool does not run and nothing is asked (after a stop, the
   * stop: TaskStopped, unless the task's state shows an operator resumed it). */
  async tool(name: string, args: JSONObject, execute: (args: JSONObject) => unknown, options: { callId?: string | null; signal?: AbortSignal | null } = {}): Promise<ToolOutcome> {
    const spec = this.spec(name);
    const copy = { ...args };
    let operationKey: string | null;
    let jobId: string | null;
    try {
      operationKey = spec.operationKey(copy);
      jobId = spec.pollJob(copy);
    } catch (exc) {
      if (!(exc instanceof InvalidArguments)) throw exc;
      if (this.report !== null) {
        // The task stopped, and a stop is sticky: every later call answers it, whatever its
        // arguments. Its state says whether an operator has resumed it since.
        const task = await this.session.get();
        if (task.state !== "RUNNING") {
          this.report = (task.report as JSONObject | null) ?? this.report;
          throw new TaskStopped(this.report, this.taskId);
        }
      }
      return { message: exc.toolMessage(name), decision: INVALID, executed: false, report: null };
    }
    let inspect: ((data: unknown) => unknown) | null = null;
    if (this.evidence !== null) {
      const evidence = this.evidence;
      inspect = async (data) => {
        const verified = await evidence(name, copy, data);
        if (verified != null) {
          checkEvidence(verified);
          this.verified = verified;
        }
        return verified ?? null;
      };
    } else if (spec.effect === WRITE) {
      if (this.#revision === null) this.#revision = Number((await this.session.get()).revision ?? 0);
      const revision = this.#revision;
      // Its own code confirmed it by returning normally (unless `committed(data)` says not).
      inspect = (data) => (spec.committed !== null && !spec.committed(data) ? null : { revision, done: false, committed: true });
    }
    let outcome: ToolOutcome;
    try {
      outcome = await this.session.driveTool(name, copy, execute, { effect: spec.effect, operationKey, jobId, inspect, callId: options.callId, signal: options.signal });
    } catch (exc) {
      if (exc instanceof TaskStopped) this.report = exc.report;
      throw exc;
    }
    if (outcome.report !== null) this.report = outcome.report;
    return outcome;
  }

  /** The run ended with the agent's final answer: finish the task with the verifier's latest
   * evidence and keep its report. Nothing is asked when the task already ended or `keepOpen`. */
  async finish(answer: string | null | undefined): Promise<Task | null> {
    if (this.keepOpen || this.report !== null) return null;
    const task = await this.session.client.finish(this.taskId, { evidence: this.verified, answer: answer ? clip(answer, MAX_ANSWER) : null });
    this.report = (task.report as JSONObject | null) ?? null;
    return task;
  }

  /** `finish`, started from an event listener nobody awaits (the OpenAI Agents SDK's
   * `agent_end`): its error is kept for `settled()` rather than left unhandled. */
  finishLater(answer: string | null | undefined): void {
    this.#finishing ??= this.finish(answer).catch((error: unknown) => {
      this.#finishError = error;
    });
  }

  /** Once a finish started by `finishLater` is done; throws its error. */
  async settled(): Promise<void> {
    await this.#finishing;
    if (this.#finishError !== null) throw this.#finishError;
  }

  stopMessage(): string {
    return stopText(this.report ?? {});
  }
}
