/**
 * OpenAI Agents SDK for JavaScript (`@openai/agents`): guard an `Agent`, and the agents it hands
 * off to, in one call (the TypeScript twin of `loopwarden_client.openai_agents`).
 *
 *     import { guardAgent } from "@loopwarden/client/openai-agents";
 *     const guarded = guardAgent(agent, client.session(task.id), { tools: { pay: write({ key: "pay-{invoice}" }) } });
 *     const result = await run(guarded, "pay invoice 42");
 *
 * The agent is cloned with a model wrapper (every model call passes the gate and reports its
 * usage from the SDK's own counts, `usage.inputTokens`/`outputTokens`; a STOP answers a final
 * assistant message carrying the report instead of calling the model) and each function tool's
 * `invoke` wrapped (EXECUTE runs it; REUSE and BLOCK answer the stored result or the nudge; WAIT
 * is slept out, unless the run is aborted: its `signal` ends the wait at once). A tool that throws is reported NO_RESULT: the SDK's default error function turns
 * an exception into its fixed "An error occurred while running the tool" text, which the wrapper
 * reads as the exception it stands for (a tool with an error function of its own reports what
 * that returns: give guarded tools none, or `errorFunction: null`). A tool STOP throws
 * `AgentTaskStopped`, which `run` hands on wrapped in the SDK's `ToolCallError`:
 * `taskStopped(error)` finds it. Streamed runs are guarded the same way.
 *
 * Every agent reachable through `handoffs` (an `Agent` or a `handoff(agent)`) is cloned the
 * same way, once, under the same guard. What cannot be guarded is refused when the agent is
 * wrapped: hosted tools and MCP servers (they run outside this process) and `Agent.asTool()`
 * tools (their nested run is out of reach). A model given by name (or none, the default) is
 * resolved at the first call through `modelProvider`, or the SDK's OpenAI provider. An agent with
 * no model of its own that runs on a `Runner`'s model (`RunConfig.model`: the SDK prefers the
 * agent's) needs `new Runner(guardRunConfig(config, guarded))`: the clones always carry a model
 * (the gate's wrapper), so without it they would resolve the default model instead.
 *
 * When a model call answers without tool calls (the run's final answer), the task is finished
 * with the verifier's latest evidence, unless `keepOpen`; a run that ends on a tool's output
 * (`toolUseBehavior`) is finished when the agent ends, which the SDK does not wait for:
 * `await guarded.loopwarden.settled()` does.
 */

import { Agent, Handoff, Usage, type FunctionTool, type Model, type ModelProvider, type ModelRequest, type ModelResponse, type RunConfig } from "@openai/agents";

import { TaskStopped } from "./errors.js";
import { Guard, type GuardOptions } from "./guard.js";
import type { TaskSession } from "./client.js";
import { EXECUTE, ToolReport, jsonable, type JSONObject } from "./types.js";

/** The text the SDK's default tool error function answers for an exception. */
export const SDK_TOOL_ERROR = "An error occurred while running the tool. Please try again.";

/** A tool STOP, thrown out of `run` as it is. */
export class AgentTaskStopped extends TaskStopped {
  constructor(stop: TaskStopped) {
    super(stop.report, stop.taskId, { cause: stop });
    this.name = "AgentTaskStopped";
  }
}

/** The guard's stop behind an error thrown by `run` (the SDK wraps a tool's error in its
 * `ToolCallError`), or null when the error is something else. */
export function taskStopped(error: unknown): TaskStopped | null {
  let current: unknown = error;
  for (let depth = 0; current && depth < 5; depth += 1) {
    if (current instanceof TaskStopped) return current;
    const next = current as { error?: unknown; cause?: unknown };
    current = next.error instanceof Error ? next.error : next.cause;
  }
  return null;
}

class ToolRaised extends Error {
  constructor() {
    super("the tool raised; the SDK answered its default error text");
    this.name = "ToolRaised";
  }
}

export interface AgentGuardOptions extends GuardOptions {
  /** Resolves a model given by name (default: the SDK's OpenAI provider, made when needed). */
  modelProvider?: ModelProvider;
}

type AnyAgent = Agent<any, any>;
type StreamEvent = ReturnType<Model["getStreamedResponse"]> extends AsyncIterable<infer E> ? E : never;

/** A clone of `agent`, and of every agent it hands off to, whose model calls and function
 * tools ask Loopwarden first. The clone's `loopwarden` property is the `Guard`. */
export function guardAgent<A extends AnyAgent>(agent: A, session: TaskSession, options: AgentGuardOptions = {}): A & { loopwarden: Guard } {
  const { modelProvider, ...guardOptions } = options;
  const graph = new Graph(new Guard(session, guardOptions), modelProvider ?? null);
  const clone = graph.clone(agent);
  graph.guard.checkTools(graph.toolNames);
  graphs.set(clone, graph);
  return clone as A & { loopwarden: Guard };
}

/** The graph behind each `guardAgent` clone, for `guardRunConfig`. */
const graphs = new WeakMap<AnyAgent, Graph>();

/** The config to give the `Runner` that runs a guarded agent (`guardAgent`'s clone). Its `model`
 * (a `Model`, or a name resolved through its `modelProvider` at the first call) becomes the model
 * of every clone that has none of its own, as the Runner would choose it, and passes the gate
 * like theirs; the clones' model names resolve through its `modelProvider` from now on. */
export function guardRunConfig<C extends Partial<RunConfig>>(config: C, guarded: AnyAgent): C {
  const graph = graphs.get(guarded);
  if (!graph) throw new TypeError("guard the agent first: guardRunConfig(config, guardAgent(...))");
  if (config.modelProvider) graph.provider = config.modelProvider;
  if (config.model) graph.runModel = config.model;
  return config;
}

class Graph {
  readonly clones = new Map<AnyAgent, AnyAgent>();
  readonly toolNames = new Set<string>();

  /** The Runner's model (`guardRunConfig`), for the agents that have none of their own. */
  runModel: string | Model | null = null;

  constructor(
    readonly guard: Guard,
    public provider: ModelProvider | null,
  ) {}

  async resolve(name: string | undefined): Promise<Model> {
    if (this.provider === null) {
      const { OpenAIProvider } = await import("@openai/agents");
      this.provider = new OpenAIProvider();
    }
    return this.provider.getModel(name);
  }

  clone(agent: AnyAgent): AnyAgent {
    const known = this.clones.get(agent);
    if (known) return known;
    if (agent.mcpServers?.length) throw new TypeError(`agent '${agent.name}': MCP servers' tools run outside this process and cannot be guarded`);
    const tools = agent.tools.map((tool) => {
      if (tool.type !== "function") throw new TypeError(`${tool.type} tool '${(tool as { name?: string }).name}' runs outside this process and cannot be guarded; give the agent function tools only`);
      if (typeof (tool as { on?: unknown }).on === "function") {
        throw new TypeError(`tool '${tool.name}' runs an agent (Agent.asTool) in a nested run whose model calls and tools would not pass the gate; hand off to that agent instead`);
      }
      this.toolNames.add(tool.name);
      return guardTool(this.guard, tool);
    });
    const clone = agent.clone({ model: new GuardedModel(agent.model, this), tools, handoffs: [] });
    // A run can end on a tool's output (toolUseBehavior: stop_on_first_tool, stopAtToolNames,
    // a function) with no answer of the model's to finish on: the agent's end finishes the
    // task then. The SDK does not await its listeners: `loopwarden.settled()` does.
    clone.on("agent_end", (_context, output) => {
      this.guard.finishLater(typeof output === "string" ? output : JSON.stringify(output ?? null));
    });
    Object.defineProperty(clone, "loopwarden", { value: this.guard, enumerable: false });
    this.clones.set(agent, clone); // before the handoffs: they may lead back here
    clone.handoffs = agent.handoffs.map((item: AnyAgent | Handoff<any, any>) => {
      if (item instanceof Handoff) {
        const target = this.clone(item.agent);
        return item.clone({ agent: target });
      }
      return this.clone(item);
    });
    return clone;
  }
}

function guardTool(guard: Guard, tool: FunctionTool<any, any, any>): FunctionTool<any, any, any> {
  const invoke = tool.invoke;
  return {
    ...tool,
    invoke: async (runContext, input, details) => {
      let produced: unknown;
      const execute = async () => {
        produced = await invoke(runContext, input, details);
        if (produced === SDK_TOOL_ERROR) throw new ToolRaised(); // the exception the SDK swallowed
        return new ToolReport({ data: jsonable(produced) });
      };
      let args: JSONObject;
      try {
        const parsed: unknown = input ? JSON.parse(input) : {};
        args = parsed && typeof parsed === "object" && !Array.isArray(parsed) ? (parsed as JSONObject) : { arguments: parsed };
      } catch {
        args = { arguments: input }; // the tool itself will refuse it: NO_RESULT
      }
      const callId = (details as { toolCall?: { callId?: string } } | undefined)?.toolCall?.callId;
      let outcome;
      try {
        outcome = await guard.tool(tool.name, args, execute, { callId, signal: details?.signal }); // an aborted run stops waiting
      } catch (exc) {
        if (exc instanceof TaskStopped) throw new AgentTaskStopped(exc);
        throw exc;
      }
      return outcome.decision === EXECUTE ? produced : JSON.stringify(outcome.message);
    },
  };
}

function outputOf(response: { output: ModelResponse["output"] }): { calls: Array<{ name: string; args: JSONObject }>; text: string } {
  const calls: Array<{ name: string; args: JSONObject }> = [];
  const texts: string[] = [];
  for (const item of response.output) {
    if (item.type === "function_call") {
      let args: JSONObject;
      try {
        const value: unknown = item.arguments ? JSON.parse(item.arguments) : {};
        args = value && typeof value === "object" && !Array.isArray(value) ? (value as JSONObject) : { arguments: value };
      } catch {
        args = { arguments: item.arguments };
      }
      calls.push({ name: item.name, args });
    } else if (item.type === "message" && item.role === "assistant") {
      for (const part of item.content) if (part.type === "output_text") texts.push(part.text);
    }
  }
  return { calls, text: texts.join("\n") };
}

/** A model whose every call passes Loopwarden's gate and reports its usage. */
export class GuardedModel implements Model {
  #resolved: Model | null = null;

  constructor(
    readonly source: string | Model | undefined,
    private readonly graph: Graph,
  ) {}

  get guard(): Guard {
    return this.graph.guard;
  }

  /** The agent's own model, else the Runner's (`guardRunConfig`), as the SDK's `selectModel`. */
  #chosen(): string | Model | undefined {
    const own = this.source === Agent.DEFAULT_MODEL_PLACEHOLDER ? undefined : this.source;
    return own || this.graph.runModel || undefined;
  }

  async model(): Promise<Model> {
    const chosen = this.#chosen();
    if (chosen && typeof chosen !== "string") return chosen;
    this.#resolved ??= await this.graph.resolve(chosen || undefined);
    return this.#resolved;
  }

  #name(): string | null {
    const chosen = this.#chosen();
    if (typeof chosen === "string" && chosen) return chosen;
    const name = (chosen as { model?: unknown } | undefined)?.model;
    return typeof name === "string" ? name : null;
  }

  /** Usage, then the finish when the answer asks for no tool call; false if the task stopped. */
  async #settle(modelCall: number, usage: { inputTokens?: number; outputTokens?: number } | undefined, output: ModelResponse["output"]): Promise<boolean> {
    const { calls, text } = outputOf({ output });
    if (!(await this.guard.usage(modelCall, { promptTokens: usage?.inputTokens, completionTokens: usage?.outputTokens, toolCalls: calls, outputText: text || null }))) {
      return false;
    }
    if (calls.length === 0) await this.guard.finish(text); // the run's final answer
    return true;
  }

  #stopItem() {
    return {
      type: "message" as const,
      role: "assistant" as const,
      status: "completed" as const,
      id: `msg_loopwarden_${crypto.randomUUID().slice(0, 12)}`,
      content: [{ type: "output_text" as const, text: `${this.guard.stopMessage()}\n${JSON.stringify(this.guard.report)}` }],
    };
  }

  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    const modelCall = await this.guard.gate(this.#name());
    if (modelCall === null) return { output: [this.#stopItem()], usage: new Usage() };
    const response = await (await this.model()).getResponse(request);
    if (!(await this.#settle(modelCall, response.usage, response.output))) return { output: [this.#stopItem()], usage: response.usage };
    return response;
  }

  async *getStreamedResponse(request: ModelRequest): AsyncIterable<StreamEvent> {
    const modelCall = await this.guard.gate(this.#name());
    if (modelCall === null) {
      yield { type: "response_done", response: { id: "resp_loopwarden", usage: { inputTokens: 0, outputTokens: 0, totalTokens: 0 }, output: [this.#stopItem()] } } as StreamEvent;
      return;
    }
    for await (const event of (await this.model()).getStreamedResponse(request)) {
      if (event.type === "response_done") {
        if (!(await this.#settle(modelCall, event.response.usage, event.response.output as ModelResponse["output"]))) {
          yield { ...event, response: { ...event.response, output: [this.#stopItem()] } } as StreamEvent;
          continue;
        }
      }
      yield event;
    }
  }
}
