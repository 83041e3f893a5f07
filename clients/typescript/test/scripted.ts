/** Scripted models for the adapters' tests: each call answers the next step of a script. */

import { readFileSync } from "node:fs";

import { Usage, type Model as AgentsModel, type ModelRequest, type ModelResponse } from "@openai/agents";
import { MockLanguageModelV3 } from "ai/test";

import type { JSONObject } from "../src/index.js";

/** One model answer: the tool calls it asks for, or its final text. */
export type Turn = { calls: Array<[string, JSONObject]> } | { text: string };

export const PROMPT_TOKENS = 120;
export const COMPLETION_TOKENS = 30;

function usage() {
  return {
    inputTokens: { total: PROMPT_TOKENS, noCache: PROMPT_TOKENS, cacheRead: 0, cacheWrite: 0 },
    outputTokens: { total: COMPLETION_TOKENS, text: COMPLETION_TOKENS, reasoning: 0 },
  };
}

/** An AI SDK model (`ai/test`'s MockLanguageModelV3) playing `turns` in order; `calls` counts
 * the times it was really called. */
export function aiSdkModel(turns: Turn[]): MockLanguageModelV3 & { played: number } {
  let index = 0;
  const model = new MockLanguageModelV3({
    modelId: "scripted",
    doGenerate: async () => {
      const turn = turns[Math.min(index, turns.length - 1)]!;
      index += 1;
      model.played = index;
      if ("text" in turn) {
        return { content: [{ type: "text", text: turn.text }], finishReason: { unified: "stop", raw: "stop" }, usage: usage(), warnings: [] };
      }
      return {
        content: turn.calls.map(([name, args], i) => ({ type: "tool-call" as const, toolCallId: `call_${index}_${i}`, toolName: name, input: JSON.stringify(args) })),
        finishReason: { unified: "tool-calls", raw: "tool_calls" },
        usage: usage(),
        warnings: [],
      };
    },
    doStream: async () => {
      const turn = turns[Math.min(index, turns.length - 1)]!;
      index += 1;
      model.played = index;
      const parts: unknown[] = [{ type: "stream-start", warnings: [] }];
      if ("text" in turn) {
        parts.push({ type: "text-start", id: "t" }, { type: "text-delta", id: "t", delta: turn.text }, { type: "text-end", id: "t" });
      } else {
        turn.calls.forEach(([name, args], i) => parts.push({ type: "tool-call", toolCallId: `call_${index}_${i}`, toolName: name, input: JSON.stringify(args) }));
      }
      const finish = "text" in turn ? { unified: "stop", raw: "stop" } : { unified: "tool-calls", raw: "tool_calls" };
      parts.push({ type: "finish", finishReason: finish, usage: usage() });
      return { stream: new ReadableStream({ start: (c) => { parts.forEach((p) => c.enqueue(p)); c.close(); } }) as never };
    },
  }) as MockLanguageModelV3 & { played: number };
  model.played = 0;
  return model;
}

/** An OpenAI Agents SDK model playing `turns` in order, with the SDK's own usage counts. */
export class AgentsScriptedModel implements AgentsModel {
  played = 0;
  constructor(private readonly turns: Turn[]) {}

  #output(): ModelResponse["output"] {
    const turn = this.turns[Math.min(this.played, this.turns.length - 1)]!;
    this.played += 1;
    if ("text" in turn) {
      return [{ type: "message", role: "assistant", status: "completed", id: `msg_${this.played}`, content: [{ type: "output_text", text: turn.text }] }];
    }
    return turn.calls.map(([name, args], i) => ({
      type: "function_call" as const,
      callId: `call_${this.played}_${i}_${Math.random().toString(16).slice(2, 8)}`,
      name,
      arguments: JSON.stringify(args),
      status: "completed" as const,
    }));
  }

  async getResponse(_request: ModelRequest): Promise<ModelResponse> {
    const output = this.#output();
    return { output, usage: new Usage({ requests: 1, inputTokens: PROMPT_TOKENS, outputTokens: COMPLETION_TOKENS, totalTokens: PROMPT_TOKENS + COMPLETION_TOKENS }) };
  }

  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  async *getStreamedResponse(_request: ModelRequest): AsyncIterable<any> {
    const output = this.#output();
    yield {
      type: "response_done" as const,
      response: { id: `resp_${this.played}`, usage: { inputTokens: PROMPT_TOKENS, outputTokens: COMPLETION_TOKENS, totalTokens: PROMPT_TOKENS + COMPLETION_TOKENS }, output },
    };
  }
}

/** A scenario of clients/scenarios.json, the table the Python adapters' tests play too. */
export interface SharedScenario {
  turns: Turn[];
  decisions: string[];
  ran: string[];
  stop?: [string, string];
  final?: string;
  task?: [string, string];
  operation?: string;
  lose_payment?: boolean;
}

type TableTurn = string | Array<[string, JSONObject]>;
const table = JSON.parse(readFileSync("../scenarios.json", "utf8") /* npm runs the tests in clients/typescript */) as {
  scenarios: Record<string, Omit<SharedScenario, "turns"> & { turns: TableTurn[] }>;
};

/** Every shared scenario, "{invoice}" in its arguments replaced by `invoice`. */
export function sharedScenarios(invoice: string): Array<[string, SharedScenario]> {
  const fill = (args: JSONObject): JSONObject =>
    Object.fromEntries(Object.entries(args).map(([k, v]) => [k, typeof v === "string" ? v.replace("{invoice}", invoice) : v]));
  return Object.entries(table.scenarios).map(([name, s]) => [
    name,
    { ...s, turns: s.turns.map((t): Turn => (typeof t === "string" ? { text: t } : { calls: t.map(([tool, args]) => [tool, fill(args)] as [string, JSONObject]) })) },
  ]);
}

/** What the two tools every adapter test gives its agent do, counting their real executions
 * (each framework wraps them in its own `tool()`). */
export function toolBodies(options: { losePayment?: boolean } = {}) {
  const ran: string[] = [];
  return {
    ran,
    search: async ({ query }: { query: string }) => {
      ran.push("search");
      return query === "refund policy" ? "Refunds take 5 days." : "nothing found";
    },
    pay: async ({ invoice }: { invoice: string; amount: string }) => {
      ran.push("pay");
      if (options.losePayment) throw new Error("the payment provider did not answer");
      return `paid ${invoice}`;
    },
  };
}
