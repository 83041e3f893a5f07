/** The OpenAI Agents SDK agent of the demo (see demo.ts), with a scripted model. */

import { guardAgent, taskStopped } from "@loopwarden/client/openai-agents";
import { Agent, Usage, run, setTracingDisabled, tool, type Model, type ModelRequest, type ModelResponse } from "@openai/agents";
import { z } from "zod";

import { TOOLS, main, pay, search, type Build, type Turn } from "./demo.js";

setTracingDisabled(true); // no OpenAI key: nothing to export traces to

class ScriptedModel implements Model {
  turn = 0;
  constructor(private readonly script: (turn: number) => Turn) {}

  async getResponse(_request: ModelRequest): Promise<ModelResponse> {
    const next = this.script(this.turn++);
    const usage = new Usage({ requests: 1, inputTokens: 120, outputTokens: 30, totalTokens: 150 });
    if ("text" in next) {
      return { usage, output: [{ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: next.text }] }] };
    }
    return { usage, output: [{ type: "function_call", callId: `call_${this.turn}`, name: next.tool, arguments: JSON.stringify(next.args), status: "completed" }] };
  }

  getStreamedResponse(): AsyncIterable<never> {
    throw new Error("this example does not stream");
  }
}

const build: Build = (session, script) => {
  const tools = [
    tool({ name: "search", description: "Search the knowledge base.", parameters: z.object({ query: z.string() }), execute: search }),
    tool({ name: "pay", description: "Pay an invoice.", parameters: z.object({ invoice: z.string(), amount: z.string() }), execute: pay }),
  ];
  const agent = guardAgent(new Agent({ name: "clerk", instructions: "Help.", model: new ScriptedModel(script), tools }), session, { tools: TOOLS });
  const go = async (goal: string) => {
    try {
      return await run(agent, goal, { maxTurns: 20 });
    } catch (error) {
      throw taskStopped(error) ?? error; // a tool STOP, inside the SDK's ToolCallError
    }
  };
  return { guard: agent.loopwarden, run: go };
};

await main(build);
