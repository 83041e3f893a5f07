/** The Vercel AI SDK agent of the demo (see demo.ts), its model scripted with `ai/test`. */

import { guardAiSdk } from "@loopwarden/client/ai-sdk";
import { generateText, stepCountIs, tool } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { z } from "zod";

import { TOOLS, main, pay, search, type Build, type Turn } from "./demo.js";

const usage = { inputTokens: { total: 120, noCache: 120, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 30, text: 30, reasoning: 0 } };

function scriptedModel(script: (turn: number) => Turn) {
  let turn = 0;
  return new MockLanguageModelV3({
    doGenerate: async () => {
      const next = script(turn++);
      if ("text" in next) return { content: [{ type: "text", text: next.text }], finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] };
      const call = { type: "tool-call" as const, toolCallId: `call_${turn}`, toolName: next.tool, input: JSON.stringify(next.args) };
      return { content: [call], finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage, warnings: [] };
    },
  });
}

const build: Build = (session, script) => {
  const lw = guardAiSdk(session, { tools: TOOLS });
  const tools = {
    search: tool({ description: "Search the knowledge base.", inputSchema: z.object({ query: z.string() }), execute: search }),
    pay: tool({ description: "Pay an invoice.", inputSchema: z.object({ invoice: z.string(), amount: z.string() }), execute: pay }),
  };
  const run = (goal: string) => generateText({ model: lw.model(scriptedModel(script)), tools: lw.tools(tools), prompt: goal, stopWhen: stepCountIs(20) });
  return { guard: lw.guard, run };
};

await main(build);
