/**
 * Vercel AI SDK (`ai` 6): guard a model and its tools, one line each.
 *
 *     import { guardAiSdk } from "@loopwarden/client/ai-sdk";
 *     import { write } from "@loopwarden/client";
 *
 *     const lw = guardAiSdk(client.session(task.id), { tools: { pay: write({ key: "pay-{invoice}" }) } });
 *     const result = await generateText({ model: lw.model(model), tools: lw.tools({ search, pay }), prompt, stopWhen });
 *
 * `lw.model(model)` is `wrapLanguageModel({ model, middleware: lw.middleware })`: every model
 * call (generate or stream) passes the gate and reports its usage from the AI SDK's own counts
 * (`usage.inputTokens.total`, `usage.outputTokens.total`), with the tool calls the model asked
 * for. A STOP answers a final assistant message carrying the report instead of calling the
 * model (`lw.guard.report` holds it). `lw.tools(tools)` puts each tool's `execute` through the
 * tool gate: EXECUTE runs it; REUSE and BLOCK answer the stored result or the nudge; WAIT is
 * slept out (an aborted run, the SDK's `abortSignal`, stops waiting at once); an exception is reported NO_RESULT (a write's then becomes UNKNOWN, never retried)
 * and a STOP is thrown, which the AI SDK hands to the model as a tool error; its next call then
 * ends the run with the stop message. Provider-executed tools run outside this process and are
 * refused. When a model call answers without tool calls (the run's final answer), the task is
 * finished with the verifier's latest evidence, unless `keepOpen`.
 */

import { wrapLanguageModel, type LanguageModelMiddleware, type ToolSet } from "ai";

import { Guard, answerText, type GuardOptions } from "./guard.js";
import type { TaskSession } from "./client.js";
import { EXECUTE, ToolReport, jsonable, type JSONObject } from "./types.js";

type WrapGenerate = NonNullable<LanguageModelMiddleware["wrapGenerate"]>;
type WrapStream = NonNullable<LanguageModelMiddleware["wrapStream"]>;
type GenerateResult = Awaited<ReturnType<WrapGenerate>>;
type StreamResult = Awaited<ReturnType<WrapStream>>;
type StreamPart = StreamResult["stream"] extends ReadableStream<infer P> ? P : never;
/** A model `wrapLanguageModel` takes: a provider's model object (`openai("gpt-4o")`). */
export type WrappableModel = Parameters<typeof wrapLanguageModel>[0]["model"];

function parseInput(input: unknown): JSONObject {
  if (typeof input !== "string") return input && typeof input === "object" ? (input as JSONObject) : {};
  try {
    const value: unknown = input ? JSON.parse(input) : {};
    return value && typeof value === "object" && !Array.isArray(value) ? (value as JSONObject) : { arguments: value };
  } catch {
    return { arguments: input };
  }
}

const NO_USAGE = {
  inputTokens: { total: 0, noCache: 0, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 0, text: 0, reasoning: 0 },
};

/** The language-model middleware: the gate before every call, its usage after. */
export function loopwardenMiddleware(guard: Guard): LanguageModelMiddleware {
  const stopText = () => `${guard.stopMessage()}\n${JSON.stringify(guard.report)}`;
  const stopped = (): GenerateResult => ({
    content: [{ type: "text", text: stopText() }],
    finishReason: { unified: "stop", raw: "loopwarden_stop" },
    usage: NO_USAGE,
    warnings: [],
  });
  const settle = async (modelCall: number, usage: GenerateResult["usage"] | undefined, calls: Array<{ name: string; args: JSONObject }>, text: string) => {
    if (!(await guard.usage(modelCall, { promptTokens: usage?.inputTokens?.total, completionTokens: usage?.outputTokens?.total, toolCalls: calls, outputText: text || null }))) {
      return false;
    }
    if (calls.length === 0) await guard.finish(text); // the run's final answer
    return true;
  };

  return {
    specificationVersion: "v3",
    wrapGenerate: async ({ doGenerate, model }) => {
      const modelCall = await guard.gate(guard.model ?? model.modelId);
      if (modelCall === null) return stopped();
      const result = await doGenerate();
      const calls = result.content.flatMap((part) => (part.type === "tool-call" && !part.providerExecuted ? [{ name: part.toolName, args: parseInput(part.input) }] : []));
      const text = result.content.flatMap((part) => (part.type === "text" ? [part.text] : [])).join("\n");
      return (await settle(modelCall, result.usage, calls, text)) ? result : stopped();
    },
    wrapStream: async ({ doStream, model }) => {
      const modelCall = await guard.gate(guard.model ?? model.modelId);
      if (modelCall === null) {
        const text = stopText();
        const parts: StreamPart[] = [
          { type: "stream-start", warnings: [] },
          { type: "text-start", id: "loopwarden" },
          { type: "text-delta", id: "loopwarden", delta: text },
          { type: "text-end", id: "loopwarden" },
          { type: "finish", finishReason: { unified: "stop", raw: "loopwarden_stop" }, usage: NO_USAGE },
        ];
        return { stream: new ReadableStream<StreamPart>({ start: (c) => { parts.forEach((p) => c.enqueue(p)); c.close(); } }) };
      }
      const result = await doStream();
      const calls: Array<{ name: string; args: JSONObject }> = [];
      const texts: string[] = [];
      const watch = new TransformStream<StreamPart, StreamPart>({
        async transform(part, controller) {
          if (part.type === "tool-call" && !part.providerExecuted) calls.push({ name: part.toolName, args: parseInput(part.input) });
          else if (part.type === "text-delta") texts.push(part.delta);
          else if (part.type === "finish") await settle(modelCall, part.usage, calls, texts.join(""));
          controller.enqueue(part);
        },
      });
      return { ...result, stream: result.stream.pipeThrough(watch) };
    },
  };
}

/** The same tools, each `execute` put through the tool gate (see the module's comment). */
export function guardTools<T extends ToolSet>(guard: Guard, tools: T): T {
  guard.checkTools(Object.keys(tools));
  const guarded: Record<string, unknown> = {};
  for (const [name, tool] of Object.entries(tools)) {
    if ((tool as { type?: string }).type === "provider" || (tool as { type?: string }).type === "provider-defined") {
      throw new TypeError(`tool '${name}' is executed by the provider, outside this process, and cannot be guarded`);
    }
    const execute = (tool as { execute?: (input: unknown, options: { toolCallId: string; abortSignal?: AbortSignal }) => unknown }).execute;
    if (typeof execute !== "function") {
      guarded[name] = tool; // no execute: the application runs it itself, outside the SDK's loop
      continue;
    }
    guarded[name] = {
      ...tool,
      execute: async (input: unknown, options: { toolCallId: string; abortSignal?: AbortSignal }) => {
        let produced: unknown;
        const outcome = await guard.tool(
          name,
          parseInput(input),
          async () => {
            produced = await execute.call(tool, input, options);
            return new ToolReport({ data: jsonable(produced) });
          },
          { callId: options?.toolCallId, signal: options?.abortSignal }, // an aborted run stops waiting
        );
        return outcome.decision === EXECUTE ? produced : outcome.message;
      },
    };
  }
  return guarded as T;
}

export interface AiSdkGuard {
  guard: Guard;
  middleware: LanguageModelMiddleware;
  /** `wrapLanguageModel({ model, middleware })`. */
  model(model: WrappableModel): ReturnType<typeof wrapLanguageModel>;
  tools<T extends ToolSet>(tools: T): T;
}

/** The guard for one AI SDK run (or several, with `keepOpen`) under one task. */
export function guardAiSdk(session: TaskSession, options: GuardOptions = {}): AiSdkGuard {
  const guard = new Guard(session, options);
  const middleware = loopwardenMiddleware(guard);
  return {
    guard,
    middleware,
    model: (model) => wrapLanguageModel({ model, middleware }),
    tools: (tools) => guardTools(guard, tools),
  };
}

export { answerText };
