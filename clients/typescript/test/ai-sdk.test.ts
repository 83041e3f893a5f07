/** The Vercel AI SDK adapter against the live server, with `ai/test`'s mock model scripted. */

import assert from "node:assert/strict";
import { test } from "node:test";

import { generateText, stepCountIs, streamText, tool } from "ai";
import { z } from "zod";

import { guardAiSdk } from "../src/ai-sdk.js";
import { read, write, type EvidenceFn, type JSONObject } from "../src/index.js";
import { STRICT_TOKEN, agent, modelCalls, newTask, operationState, toolDecisions, unique } from "./helpers.js";
import { COMPLETION_TOKENS, PROMPT_TOKENS, aiSdkModel, sharedScenarios, toolBodies, type Turn } from "./scripted.js";

/** The tools an agent gets, counting their real executions. */
function tools(options: { losePayment?: boolean } = {}) {
  const body = toolBodies(options);
  const all = {
    search: tool({ description: "Search the knowledge base.", inputSchema: z.object({ query: z.string() }), execute: body.search }),
    pay: tool({ description: "Pay an invoice.", inputSchema: z.object({ invoice: z.string(), amount: z.string() }), execute: body.pay }),
  };
  return { ran: body.ran, all };
}

async function scenario(turns: Turn[], options: { losePayment?: boolean; token?: string; evidence?: EvidenceFn; stream?: boolean } = {}) {
  const lw = agent({}, options.token);
  const taskId = await newTask(lw);
  const guarded = guardAiSdk(lw.session(taskId), { tools: { pay: write({ key: "pay-{invoice}" }), search: read() }, evidence: options.evidence });
  const t = tools(options);
  const model = aiSdkModel(turns);
  const settings = { model: guarded.model(model), tools: guarded.tools(t.all), prompt: "go", stopWhen: stepCountIs(10) };
  let text: string;
  if (options.stream) {
    const result = streamText(settings);
    text = await result.text;
  } else {
    text = (await generateText(settings)).text;
  }
  return { lw, taskId, text, ran: t.ran, model, guard: guarded.guard };
}

const SEARCH: [string, JSONObject] = ["search", { query: "refund policy" }];

test("ai-sdk: a repeated read is blocked, then stopped; the run ends with the stop message", async () => {
  const s = await scenario([{ calls: [SEARCH] }, { calls: [SEARCH, SEARCH] }, { calls: [SEARCH] }, { text: "never" }]);
  assert.match(s.text, /^Loopwarden stopped this task: PARTIAL\/same_call/);
  assert.deepEqual((await toolDecisions(s.lw, s.taskId)).sort(), ["BLOCK", "EXECUTE", "EXECUTE", "STOP"]);
  assert.deepEqual(s.ran, ["search", "search"]);
  assert.equal(s.guard.report?.reason, "same_call");
  assert.equal(s.model.played, 3); // the fourth call was refused at the gate
});

test("ai-sdk: A-B-A-B is stopped as a short cycle", async () => {
  const a: [string, JSONObject] = ["search", { query: "a" }];
  const b: [string, JSONObject] = ["search", { query: "b" }];
  const s = await scenario([{ calls: [a] }, { calls: [b] }, { calls: [a] }, { calls: [b] }, { text: "never" }]);
  assert.match(s.text, /^Loopwarden stopped this task: PARTIAL\/short_cycle/);
  assert.deepEqual(await toolDecisions(s.lw, s.taskId), ["EXECUTE", "EXECUTE", "EXECUTE", "STOP"]);
  assert.equal(s.ran.length, 3);
});

test("ai-sdk: a keyed write asked twice runs once (REUSE), and the run's end finishes the task", async () => {
  const invoice = `INV-${unique()}`;
  const pay: [string, JSONObject] = ["pay", { invoice, amount: "10.00" }];
  const s = await scenario([{ calls: [pay] }, { calls: [pay] }, { text: "paid" }]);
  assert.equal(s.text, "paid");
  assert.deepEqual(await toolDecisions(s.lw, s.taskId), ["EXECUTE", "REUSE"]);
  assert.deepEqual(s.ran, ["pay"]);
  assert.equal(await operationState(`pay-${invoice}`), "COMMITTED");
  const task = await s.lw.getTask(s.taskId);
  assert.deepEqual([task.state, task.reason], ["PARTIAL", "goal_unverified"]);
});

test("ai-sdk: a write whose result is lost goes UNKNOWN and is not retried", async () => {
  const invoice = `INV-${unique()}`;
  const pay: [string, JSONObject] = ["pay", { invoice, amount: "10.00" }];
  const s = await scenario([{ calls: [pay] }, { calls: [pay] }, { text: "paid" }], { losePayment: true });
  assert.match(s.text, /^Loopwarden stopped this task: NEEDS_HUMAN\/unknown_commit/);
  assert.deepEqual(s.ran, ["pay"]);
  assert.equal(await operationState(`pay-${invoice}`), "UNKNOWN");
  assert.deepEqual(await toolDecisions(s.lw, s.taskId), ["EXECUTE"]);
  assert.equal((await s.lw.getTask(s.taskId)).state, "NEEDS_HUMAN");
});

test("ai-sdk: a run that ends well finishes its task, COMPLETED on the verifier's evidence", async () => {
  const s = await scenario([{ calls: [SEARCH] }, { text: "Refunds take 5 days." }], {
    token: STRICT_TOKEN,
    evidence: (name, _args, data) => (name === "search" && data === "Refunds take 5 days." ? { revision: 1, done: true } : null),
  });
  // The evidence completed the task with the tool's result: the next model call is not made,
  // the run ends with the completion message.
  assert.match(s.text, /^Loopwarden: the task is COMPLETED\/goal_met; nothing more to do\./);
  assert.equal(s.model.played, 1);
  const task = await s.lw.getTask(s.taskId);
  assert.deepEqual([task.state, task.reason], ["COMPLETED", "goal_met"]);
});

test("ai-sdk: a run that ends without evidence is finished too: PARTIAL/goal_unverified, never left RUNNING", async () => {
  const s = await scenario([{ calls: [SEARCH] }, { text: "Refunds take 5 days." }]);
  const task = await s.lw.getTask(s.taskId);
  assert.deepEqual([task.state, task.reason], ["PARTIAL", "goal_unverified"]);
  assert.equal(s.guard.report?.state, "PARTIAL");
});

test("ai-sdk: a final answer past 4000 characters, cut inside an emoji, still finishes the task", async () => {
  const answer = `${"a".repeat(3999)}😀 and that is all.`; // the cut falls between the emoji's two halves
  const s = await scenario([{ text: answer }]);
  assert.equal(s.text, answer);
  const task = await s.lw.getTask(s.taskId);
  assert.deepEqual([task.state, task.reason], ["PARTIAL", "goal_unverified"]);
});

test("ai-sdk: an aborted run stops sleeping out a WAIT at once, and its tool does not run", async () => {
  const lw = agent();
  const taskId = await newTask(lw);
  const invoice = `INV-${unique()}`;
  // Another call holds the write (its lease lasts a minute): this one is answered WAIT.
  const held = await lw.requestTool(taskId, "pay", { invoice }, { effect: "write", operationKey: `pay-${invoice}` });
  assert.equal(held.decision, "EXECUTE");
  const guarded = guardAiSdk(lw.session(taskId, { maxWaitTries: 3 }), { tools: { pay: write({ key: "pay-{invoice}" }) } });
  let ran = 0;
  const pay = tool({ inputSchema: z.object({ invoice: z.string() }), execute: async () => void (ran += 1) });
  const guardedPay = guarded.tools({ pay }).pay;
  const controller = new AbortController();
  setTimeout(() => controller.abort(new Error("the user gave up")), 200);
  const started = performance.now();
  const outcome = await Promise.resolve(guardedPay.execute!({ invoice }, { toolCallId: "c1", messages: [], abortSignal: controller.signal })).catch((e: unknown) => e);
  const waited = performance.now() - started;
  assert.ok(outcome instanceof Error && outcome.message === "the user gave up", `answered ${JSON.stringify(outcome)} after ${waited} ms`);
  assert.ok(waited < 900, `waited ${waited} ms after the abort`);
  assert.equal(ran, 0);
});

test("ai-sdk: usage is reported from the AI SDK's own token counts, with the tool calls asked for", async () => {
  const s = await scenario([{ calls: [SEARCH] }, { text: "done" }]);
  const calls = await modelCalls(s.lw, s.taskId);
  assert.deepEqual(calls.map((c) => [c.prompt_tokens, c.completion_tokens]), [[PROMPT_TOKENS, COMPLETION_TOKENS], [PROMPT_TOKENS, COMPLETION_TOKENS]]);
  assert.equal((await s.lw.getTask(s.taskId)).usage.tokens, 2 * (PROMPT_TOKENS + COMPLETION_TOKENS));
});

test("ai-sdk: streamed runs are guarded the same way", async () => {
  const s = await scenario([{ calls: [SEARCH] }, { calls: [SEARCH, SEARCH] }, { calls: [SEARCH] }, { text: "never" }], { stream: true });
  assert.match(s.text, /Loopwarden stopped this task: PARTIAL\/same_call/);
  assert.deepEqual(s.ran, ["search", "search"]);
  const calls = await modelCalls(s.lw, s.taskId);
  assert.deepEqual(calls.map((c) => [c.prompt_tokens, c.completion_tokens]), Array(3).fill([PROMPT_TOKENS, COMPLETION_TOKENS]));
});

test("ai-sdk: setup refuses a keyless write and a declared tool the agent does not have", async () => {
  const lw = agent();
  const session = lw.session(await newTask(lw));
  assert.throws(() => guardAiSdk(session, { tools: { pay: "write" as never } }), /declare it as write/);
  assert.throws(() => write({ key: "" }), /needs key/);
  const guarded = guardAiSdk(session, { tools: { pay_invoice: write({ key: "pay-{invoice}" }) } });
  assert.throws(() => guarded.tools(tools().all), /declared tools the agent does not have: \["pay_invoice"\]/);
});

for (const [name] of sharedScenarios("")) {
  test(`ai-sdk: the shared scenario ${name} (clients/scenarios.json) ends as the table says`, async () => {
    const invoice = `INV-${unique()}`;
    const expected = sharedScenarios(invoice).find(([n]) => n === name)![1];
    const s = await scenario(expected.turns, { losePayment: expected.lose_payment });
    if (expected.stop) {
      assert.match(s.text, new RegExp(`^Loopwarden stopped this task: ${expected.stop.join("/")}`));
      assert.deepEqual([s.guard.report?.state, s.guard.report?.reason], expected.stop);
    } else {
      assert.equal(s.text, expected.final);
      const task = await s.lw.getTask(s.taskId);
      assert.deepEqual([task.state, task.reason], expected.task);
    }
    assert.deepEqual((await toolDecisions(s.lw, s.taskId)).sort(), [...expected.decisions].sort());
    assert.deepEqual(s.ran, expected.ran);
    if (expected.operation) assert.equal(await operationState(`pay-${invoice}`), expected.operation);
  });
}
