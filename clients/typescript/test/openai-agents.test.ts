/** The OpenAI Agents SDK adapter against the live server, with a scripted model. */

import assert from "node:assert/strict";
import { test } from "node:test";

import { Agent, RunContext, Runner, handoff, run, setTracingDisabled, tool } from "@openai/agents";
import { z } from "zod";

import { read, write, type EvidenceFn, type JSONObject } from "../src/index.js";
import { AgentTaskStopped, guardAgent, guardRunConfig, taskStopped } from "../src/openai-agents.js";
import { STRICT_TOKEN, agent, modelCalls, newTask, operationState, toolDecisions, unique } from "./helpers.js";
import { AgentsScriptedModel, COMPLETION_TOKENS, PROMPT_TOKENS, sharedScenarios, toolBodies, type Turn } from "./scripted.js";

setTracingDisabled(true);

function tools(options: { losePayment?: boolean } = {}) {
  const body = toolBodies(options);
  const all = [
    tool({ name: "search", description: "Search the knowledge base.", parameters: z.object({ query: z.string() }), execute: body.search }),
    tool({ name: "pay", description: "Pay an invoice.", parameters: z.object({ invoice: z.string(), amount: z.string() }), execute: body.pay }),
  ];
  return { ran: body.ran, all };
}

async function scenario(turns: Turn[], options: { losePayment?: boolean; token?: string; evidence?: EvidenceFn; stream?: boolean } = {}) {
  const lw = agent({}, options.token);
  const taskId = await newTask(lw);
  const t = tools(options);
  const model = new AgentsScriptedModel(turns);
  const clerk = new Agent({ name: "clerk", instructions: "Help.", model, tools: t.all });
  const guarded = guardAgent(clerk, lw.session(taskId), { tools: { pay: write({ key: "pay-{invoice}" }), search: read() }, evidence: options.evidence });
  let output: unknown;
  let error: unknown = null;
  try {
    if (options.stream) {
      const result = await run(guarded, "go", { stream: true, maxTurns: 20 });
      await result.completed;
      output = result.finalOutput;
    } else {
      output = (await run(guarded, "go", { maxTurns: 20 })).finalOutput;
    }
  } catch (exc) {
    error = taskStopped(exc) ?? exc;
  }
  return { lw, taskId, output, error, ran: t.ran, model, guard: guarded.loopwarden };
}

const SEARCH: [string, JSONObject] = ["search", { query: "refund policy" }];

test("openai-agents: a repeated read is blocked, then stopped: run throws with the AgentTaskStopped", async () => {
  const s = await scenario([{ calls: [SEARCH] }, { calls: [SEARCH, SEARCH] }, { calls: [SEARCH] }, { text: "never" }]);
  assert.ok(s.error instanceof AgentTaskStopped, String(s.error));
  assert.deepEqual([s.error.state, s.error.reason], ["PARTIAL", "same_call"]);
  assert.deepEqual((await toolDecisions(s.lw, s.taskId)).sort(), ["BLOCK", "EXECUTE", "EXECUTE", "STOP"]);
  assert.deepEqual(s.ran, ["search", "search"]);
});

test("openai-agents: A-B-A-B is stopped as a short cycle", async () => {
  const a: [string, JSONObject] = ["search", { query: "a" }];
  const b: [string, JSONObject] = ["search", { query: "b" }];
  const s = await scenario([{ calls: [a] }, { calls: [b] }, { calls: [a] }, { calls: [b] }, { text: "never" }]);
  assert.ok(s.error instanceof AgentTaskStopped && s.error.reason === "short_cycle", String(s.error));
  assert.deepEqual(await toolDecisions(s.lw, s.taskId), ["EXECUTE", "EXECUTE", "EXECUTE", "STOP"]);
  assert.equal(s.ran.length, 3);
});

test("openai-agents: a keyed write asked twice runs once (REUSE), and the run's end finishes the task", async () => {
  const invoice = `INV-${unique()}`;
  const pay: [string, JSONObject] = ["pay", { invoice, amount: "10.00" }];
  const s = await scenario([{ calls: [pay] }, { calls: [pay] }, { text: "paid" }]);
  assert.equal(s.error, null);
  assert.equal(s.output, "paid");
  assert.deepEqual(await toolDecisions(s.lw, s.taskId), ["EXECUTE", "REUSE"]);
  assert.deepEqual(s.ran, ["pay"]);
  assert.equal(await operationState(`pay-${invoice}`), "COMMITTED");
  const task = await s.lw.getTask(s.taskId);
  assert.deepEqual([task.state, task.reason], ["PARTIAL", "goal_unverified"]);
});

test("openai-agents: a write whose result is lost goes UNKNOWN and is not retried", async () => {
  const invoice = `INV-${unique()}`;
  const pay: [string, JSONObject] = ["pay", { invoice, amount: "10.00" }];
  const s = await scenario([{ calls: [pay] }, { calls: [pay] }, { text: "paid" }], { losePayment: true });
  assert.ok(s.error instanceof AgentTaskStopped, String(s.error));
  assert.deepEqual([s.error.state, s.error.reason], ["NEEDS_HUMAN", "unknown_commit"]);
  assert.deepEqual(s.ran, ["pay"]);
  assert.equal(await operationState(`pay-${invoice}`), "UNKNOWN");
  assert.deepEqual(await toolDecisions(s.lw, s.taskId), ["EXECUTE"]);
});

test("openai-agents: a run that ends well finishes its task with the verifier's latest evidence", async () => {
  const s = await scenario([{ calls: [["search", { query: "refunds" }]] }, { text: "Refunds take 5 days." }], {
    token: STRICT_TOKEN,
    evidence: (name) => (name === "search" ? { revision: 1, done: false } : null),
  });
  assert.equal(s.error, null);
  assert.equal(s.output, "Refunds take 5 days.");
  const task = await s.lw.getTask(s.taskId);
  // The verifier's latest evidence (revision 1, not done) goes with finish: PARTIAL/goal_unverified.
  assert.deepEqual([task.state, task.reason, task.revision], ["PARTIAL", "goal_unverified", 1]);
  assert.equal(s.guard.report?.reason, "goal_unverified");
});

test("openai-agents: usage is reported from the SDK's own token counts", async () => {
  const s = await scenario([{ calls: [SEARCH] }, { text: "done" }]);
  const calls = await modelCalls(s.lw, s.taskId);
  assert.deepEqual(calls.map((c) => [c.prompt_tokens, c.completion_tokens]), [[PROMPT_TOKENS, COMPLETION_TOKENS], [PROMPT_TOKENS, COMPLETION_TOKENS]]);
  assert.equal((await s.lw.getTask(s.taskId)).usage.tokens, 2 * (PROMPT_TOKENS + COMPLETION_TOKENS));
});

test("openai-agents: a model stop ends the run cleanly with the report", async () => {
  const lw = agent();
  const taskId = await newTask(lw, { max_model_calls: 2 });
  const model = new AgentsScriptedModel([{ calls: [["search", { query: "p1" }]] }, { calls: [["search", { query: "p2" }]] }, { text: "never" }]);
  const clerk = guardAgent(new Agent({ name: "clerk", model, tools: tools().all }), lw.session(taskId));
  const result = await run(clerk, "go", { maxTurns: 20 });
  assert.match(String(result.finalOutput), /^Loopwarden stopped this task: PARTIAL\/model_budget/);
  assert.equal(model.played, 2);
  assert.equal(clerk.loopwarden.report?.reason, "model_budget");
});

test("openai-agents: streamed runs are guarded the same way", async () => {
  const s = await scenario([{ calls: [SEARCH] }, { calls: [SEARCH, SEARCH] }, { calls: [SEARCH] }, { text: "never" }], { stream: true });
  assert.ok(s.error instanceof AgentTaskStopped && s.error.reason === "same_call", String(s.error));
  assert.deepEqual(s.ran, ["search", "search"]);
  const calls = await modelCalls(s.lw, s.taskId);
  assert.deepEqual(calls.map((c) => [c.prompt_tokens, c.completion_tokens]), Array(3).fill([PROMPT_TOKENS, COMPLETION_TOKENS]));
});

test("openai-agents: a handoff target's model and tool calls are guarded too", async () => {
  const lw = agent();
  const taskId = await newTask(lw);
  const t = tools();
  const specialist = new Agent({ name: "specialist", model: new AgentsScriptedModel([{ calls: [SEARCH] }, { text: "found" }]), tools: t.all });
  const triage = new Agent({
    name: "triage",
    model: new AgentsScriptedModel([{ calls: [["transfer_to_specialist", {}]] }]),
    handoffs: [handoff(specialist)],
  });
  const result = await run(guardAgent(triage, lw.session(taskId)), "go", { maxTurns: 20 });
  assert.equal(result.finalOutput, "found");
  assert.deepEqual(t.ran, ["search"]);
  const task = await lw.getTask(taskId);
  assert.equal(task.usage.model_calls, 3);
  assert.equal(task.state, "PARTIAL");
});

test("openai-agents: setup refuses a keyless write, an unknown tool and an agent run as a tool", async () => {
  const lw = agent();
  const session = lw.session(await newTask(lw));
  const clerk = new Agent({ name: "clerk", model: new AgentsScriptedModel([]), tools: tools().all });
  assert.throws(() => guardAgent(clerk, session, { tools: { pay: "write" as never } }), /declare it as write/);
  assert.throws(() => guardAgent(clerk, session, { tools: { pay_invoice: write({ key: "pay-{invoice}" }) } }), /does not have: \["pay_invoice"\]/);
  const inner = new Agent({ name: "inner", model: new AgentsScriptedModel([]) });
  const outer = new Agent({ name: "outer", model: new AgentsScriptedModel([]), tools: [inner.asTool({ toolName: "ask_inner", toolDescription: "Ask." })] });
  assert.throws(() => guardAgent(outer, session), /Agent.asTool/);
});

for (const [name] of sharedScenarios("")) {
  test(`openai-agents: the shared scenario ${name} (clients/scenarios.json) ends as the table says`, async () => {
    const invoice = `INV-${unique()}`;
    const expected = sharedScenarios(invoice).find(([n]) => n === name)![1];
    const s = await scenario(expected.turns, { losePayment: expected.lose_payment });
    if (expected.stop) {
      assert.ok(s.error instanceof AgentTaskStopped, String(s.error));
      assert.deepEqual([s.error.state, s.error.reason], expected.stop);
    } else {
      assert.equal(s.error, null);
      assert.equal(s.output, expected.final);
      const task = await s.lw.getTask(s.taskId);
      assert.deepEqual([task.state, task.reason], expected.task);
    }
    assert.deepEqual((await toolDecisions(s.lw, s.taskId)).sort(), [...expected.decisions].sort());
    assert.deepEqual(s.ran, expected.ran);
    if (expected.operation) assert.equal(await operationState(`pay-${invoice}`), expected.operation);
  });
}

test("openai-agents: an agent with no model of its own runs on the Runner's model (RunConfig.model), gated, through guardRunConfig", async () => {
  const lw = agent();
  const taskId = await newTask(lw);
  const t = tools();
  // No model on the agent: the Runner's config gives it (the SDK prefers an agent's own model).
  const clerk = guardAgent(new Agent({ name: "clerk", tools: t.all }), lw.session(taskId));
  const model = new AgentsScriptedModel([{ calls: [SEARCH] }, { text: "done" }]);
  const result = await new Runner(guardRunConfig({ model }, clerk)).run(clerk, "go", { maxTurns: 20 });
  assert.equal(result.finalOutput, "done");
  assert.equal(model.played, 2);
  assert.deepEqual(t.ran, ["search"]);
  assert.equal((await modelCalls(lw, taskId)).length, 2); // both of the Runner's model calls gated
  assert.deepEqual(await toolDecisions(lw, taskId), ["EXECUTE"]);
  assert.throws(() => guardRunConfig({ model }, new Agent({ name: "bare" })), /guard the agent first/);
});

test("openai-agents: a run that ends on a tool's output (stop_on_first_tool) finishes its task too", async () => {
  const lw = agent();
  const taskId = await newTask(lw);
  const t = tools();
  const model = new AgentsScriptedModel([{ calls: [SEARCH] }, { text: "never" }]);
  const clerk = guardAgent(new Agent({ name: "clerk", model, tools: t.all, toolUseBehavior: "stop_on_first_tool" }), lw.session(taskId));
  const result = await run(clerk, "go", { maxTurns: 20 });
  assert.equal(result.finalOutput, "Refunds take 5 days.");
  assert.equal(model.played, 1);
  await clerk.loopwarden.settled(); // the finish the run's end started
  const task = await lw.getTask(taskId);
  assert.deepEqual([task.state, task.reason], ["PARTIAL", "goal_unverified"]);
  assert.equal(clerk.loopwarden.report?.reason, "goal_unverified");
});

test("openai-agents: an aborted run stops sleeping out a WAIT at once, and its tool does not run", async () => {
  const lw = agent();
  const taskId = await newTask(lw);
  const invoice = `INV-${unique()}`;
  // Another call holds the write (its lease lasts a minute): this one is answered WAIT.
  const held = await lw.requestTool(taskId, "pay", { invoice }, { effect: "write", operationKey: `pay-${invoice}` });
  assert.equal(held.decision, "EXECUTE");
  let ran = 0;
  const pay = tool({ name: "pay", description: "Pay an invoice.", parameters: z.object({ invoice: z.string() }), execute: () => void (ran += 1) });
  const clerk = new Agent({ name: "clerk", instructions: "Help.", model: new AgentsScriptedModel([]), tools: [pay] });
  const guarded = guardAgent(clerk, lw.session(taskId, { maxWaitTries: 3 }), { tools: { pay: write({ key: "pay-{invoice}" }) } });
  const guardedPay = guarded.tools[0] as typeof pay;
  const controller = new AbortController();
  setTimeout(() => controller.abort(new Error("the user gave up")), 200);
  const started = performance.now();
  const outcome = await guardedPay.invoke(new RunContext(), JSON.stringify({ invoice }), { signal: controller.signal }).catch((e: unknown) => e);
  const waited = performance.now() - started;
  assert.ok(outcome instanceof Error && outcome.message === "the user gave up", `answered ${JSON.stringify(outcome)} after ${waited} ms`);
  assert.ok(waited < 900, `waited ${waited} ms after the abort`);
  assert.equal(ran, 0);
});
