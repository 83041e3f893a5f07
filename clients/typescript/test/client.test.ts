/** The client's flows against the live server: every decision, lost answers, 429 and 503 with
 * Retry-After, a refused connection. */

import assert from "node:assert/strict";
import { test } from "node:test";

import { Client, Guard, LoopwardenError, REQUESTS, TaskStopped, TransportError, ToolReport, read, resultHash, run, write, type JSONObject } from "../src/index.js";
import { STRICT_TOKEN, agent, closedPort, firstN, newTask, operationState, operator, recordingSleep, startProxy, toolDecisions, unique, URL_ } from "./helpers.js";

/** A fresh task's session and a new payment key, for the tests of one keyed write. */
async function payment() {
  const lw = agent();
  const taskId = await newTask(lw);
  return { lw, taskId, session: lw.session(taskId), key: `pay-${unique()}` };
}

test("ALLOW, then CONTINUE for the usage, each decision seen by onDecision", async () => {
  const seen: string[] = [];
  const lw = agent({ onDecision: (endpoint, _request, answer) => seen.push(`${endpoint}:${answer.decision}`) });
  const taskId = await newTask(lw);
  const session = lw.session(taskId);
  const reply = await session.modelCall({ model: "gpt-4o", estPromptTokens: 100 }, (call) => {
    call.usage(100, 20, [{ name: "search", args: { query: "x" } }], "searching");
    return "model reply";
  });
  assert.equal(reply, "model reply");
  assert.deepEqual(seen, ["gate_model_call:ALLOW", "report_usage:CONTINUE"]);
  const task = await lw.getTask(taskId);
  assert.equal(task.usage.model_calls, 1);
  assert.equal(task.usage.tokens, 120);
});

test("STOP throws TaskStopped carrying the report, and stays stopped", async () => {
  const lw = agent();
  const taskId = await newTask(lw, { max_model_calls: 1 });
  await lw.gateModelCall(taskId);
  const first = await lw.gateModelCall(taskId).catch((e: unknown) => e);
  assert.ok(first instanceof TaskStopped, String(first));
  assert.equal(first.state, "PARTIAL");
  assert.equal(first.reason, "model_budget");
  assert.equal(first.taskId, taskId);
  assert.equal(first.report.reason, "model_budget");
  const again = await lw.gateModelCall(taskId).catch((e: unknown) => e);
  assert.ok(again instanceof TaskStopped && again.reason === "model_budget");
});

test("after a stop a guarded call answers the stop whatever its arguments, until a resume", async () => {
  const lw = agent();
  const taskId = await newTask(lw, { max_tool_requests: 1 });
  const guard = new Guard(lw.session(taskId), { tools: { search: read(), pay: write({ key: "pay-{invoice}" }) } });
  const ran: string[] = [];
  await guard.tool("search", { query: "a" }, () => ran.push("search"));
  const stopped = await guard.tool("search", { query: "b" }, () => ran.push("search")).catch((e: unknown) => e);
  assert.ok(stopped instanceof TaskStopped && stopped.reason === "request_budget", String(stopped));
  // No invoice: the key cannot be derived, the model's mistake; but the task has stopped.
  const after = await guard.tool("pay", { amount: "1" }, () => ran.push("pay")).catch((e: unknown) => e);
  assert.ok(after instanceof TaskStopped && after.reason === "request_budget", JSON.stringify(after));
  await operator().resume(taskId, "looked at it", { tool_requests: 1 });
  const resumed = await guard.tool("pay", { amount: "1" }, () => ran.push("pay"));
  assert.equal(resumed.decision, "INVALID");
  assert.deepEqual(ran, ["search"]);
});

test("EXECUTE runs a read; a repeat is BLOCKed with the guard's observation, then STOPs", async () => {
  const lw = agent();
  const taskId = await newTask(lw);
  const session = lw.session(taskId);
  let ran = 0;
  const search = () => {
    ran += 1;
    return { hits: ["refunds take 5 days"] };
  };
  assert.deepEqual(await session.tool("search", { query: "refund" }, search), { success: true, data: { hits: ["refunds take 5 days"] } });
  await session.tool("search", { query: "refund" }, search);
  const blocked = await session.tool("search", { query: "refund" }, search);
  assert.equal(blocked.code, "DUPLICATE_TOOL_CALL_BLOCKED");
  assert.equal(blocked.success, false);
  const stop = await session.tool("search", { query: "refund" }, search).catch((e: unknown) => e);
  assert.ok(stop instanceof TaskStopped && stop.reason === "same_call", String(stop));
  assert.equal(ran, 2);
  assert.deepEqual(await toolDecisions(lw, taskId), ["EXECUTE", "EXECUTE", "BLOCK", "STOP"]);
});

test("a keyed write asked twice runs once: EXECUTE, then REUSE with the stored result", async () => {
  const { session, key } = await payment();
  let ran = 0;
  const pay = () => {
    ran += 1;
    return "paid";
  };
  const committed = () => ({ revision: 0, done: false, committed: true });
  const options = { effect: "write" as const, operationKey: key, inspect: committed };
  assert.deepEqual(await session.tool("pay", { invoice: key }, pay, options), { success: true, data: "paid" });
  assert.deepEqual(await session.tool("pay", { invoice: key }, pay, options), { success: true, reused: true, data: "paid" });
  assert.equal(ran, 1);
  assert.equal(await operationState(key), "COMMITTED");
});

/** JSON nested `depth` levels: past the server's LOOPWARDEN_MAX_JSON_DEPTH at 100. */
function nested(depth: number): unknown {
  let value: unknown = "bottom";
  for (let i = 0; i < depth; i += 1) value = { inner: value };
  return value;
}

for (const [name, answer] of [["too deep", nested(100)], ["too large", "x".repeat(3_000_000)]] as const) {
  test(`a write whose answer is ${name} to store still commits: reported again without its data`, async () => {
    const { session, key } = await payment();
    let ran = 0;
    const exportAll = () => {
      ran += 1;
      return answer;
    };
    const committed = () => ({ revision: 0, done: false, committed: true });
    const options = { effect: "write" as const, operationKey: key, inspect: committed };
    const first = await session.tool("export", { ref: key }, exportAll, options);
    assert.equal(first.success, true);
    assert.equal(await operationState(key), "COMMITTED");
    const again = await session.tool("export", { ref: key }, exportAll, options);
    assert.deepEqual(again, { success: true, reused: true, data: null }); // nothing kept to give back
    assert.equal(ran, 1);
  });
}

test("results too large to store are still new progress under novelty: sent again with the hash the server would take", async () => {
  const lw = agent(); // the `novelty` profile: a result the task has not seen is progress
  const taskId = await newTask(lw);
  const session = lw.session(taskId);
  for (let page = 1; page <= 5; page += 1) {
    const message = await session.tool("fetch_page", { page }, () => ({ page, text: String(page).repeat(3_000_000) }));
    assert.equal(message.success, true);
  }
  assert.deepEqual(await toolDecisions(lw, taskId), ["EXECUTE", "EXECUTE", "EXECUTE", "EXECUTE", "EXECUTE"]);
  assert.equal((await lw.getTask(taskId)).state, "RUNNING");
  // The very hash the server (and the Python client) takes: JSON read back as Python reads it.
  const sample = { b: [1, 0.5, 1e-7, 1e21, 1e16, 0.0001, 2.5e-5, "é\n\u2028"], a: { fetchedAt: "x", z: null, é: 1, "😀": 2, "\uffff": 3 }, "Request-Id": 3 };
  assert.equal(resultHash(sample), "b963e050e0749f1faf36afe291e265df0684460597cac372154d72dcb9dc2133");
  assert.equal(resultHash('{"page": 2, "served_by": "web-1"}'), resultHash({ page: 2 }));
});

test("a write whose result holds a cycle is stored with all it holds, the cycle marked: REUSE gives it back", async () => {
  const { session, key } = await payment();
  const response: JSONObject = { status: 201, headers: { "x-id": "r-9" } };
  response.request = { url: "https://pay.example/charges", response }; // as HTTP clients' objects do
  const shared = { currency: "EUR" };
  const pay = () => ({ charge: "ch_123", amount: 10n, at: new Date(0), tags: new Set(["a"]), response, fee: shared, total: shared });
  const committed = () => ({ revision: 0, done: false, committed: true });
  const options = { effect: "write" as const, operationKey: key, inspect: committed };
  await session.tool("pay", { invoice: key }, pay, options);
  const again = await session.tool("pay", { invoice: key }, pay, options);
  assert.deepEqual(again.data, {
    charge: "ch_123",
    amount: "10",
    at: "1970-01-01T00:00:00.000Z",
    tags: ["a"],
    response: { status: 201, headers: { "x-id": "r-9" }, request: { url: "https://pay.example/charges", response: "[Circular]" } },
    fee: { currency: "EUR" },
    total: { currency: "EUR" }, // met twice, but no cycle
  });
});

test("WAIT is slept out for its retry_after_ms while another call holds the write, then REUSE", async () => {
  const lw = agent();
  const taskId = await newTask(lw);
  const key = `pay-${unique()}`;
  const args = { invoice: key };
  const held = await lw.requestTool(taskId, "pay", args, { effect: "write", operationKey: key });
  assert.equal(held.decision, "EXECUTE");
  const waits: number[] = [];
  const session = lw.session(taskId, {
    sleep: async (seconds) => {
      waits.push(seconds);
      if (waits.length === 1) {
        // the holder commits while this call waits
        await lw.reportResult(taskId, held.tool_call, "SUCCESS", { data: "paid", evidence: { revision: 0, done: false, committed: true } });
      }
    },
  });
  let ran = 0;
  const message = await session.tool("pay", args, () => (ran += 1), { effect: "write", operationKey: key });
  assert.deepEqual(message, { success: true, reused: true, data: "paid" });
  assert.equal(ran, 0);
  assert.equal(waits.length, 1);
  assert.ok(waits[0]! > 0, `waited ${waits[0]}`);
  assert.deepEqual(await toolDecisions(lw, taskId), ["EXECUTE", "WAIT", "REUSE"]);
});

test("a write whose result is lost is reported NO_RESULT: UNKNOWN, NEEDS_HUMAN, never run again", async () => {
  const { session, key } = await payment();
  let ran = 0;
  const pay = () => {
    ran += 1;
    throw new Error("the payment provider did not answer");
  };
  const stop = await session.tool("pay", { invoice: key }, pay, { effect: "write", operationKey: key }).catch((e: unknown) => e);
  assert.ok(stop instanceof TaskStopped, String(stop));
  assert.deepEqual([stop.state, stop.reason], ["NEEDS_HUMAN", "unknown_commit"]);
  assert.match(String((stop.cause as Error).message), /did not answer/);
  const again = await session.tool("pay", { invoice: key }, pay, { effect: "write", operationKey: key }).catch((e: unknown) => e);
  assert.ok(again instanceof TaskStopped);
  assert.equal(ran, 1);
  assert.equal(await operationState(key), "UNKNOWN");
});

test("evidence that says done completes the task from the tool result: success, not an error", async () => {
  const lw = agent({}, STRICT_TOKEN);
  const taskId = await newTask(lw);
  const session = lw.session(taskId);
  const message = await session.tool("export", { all: true }, () => new ToolReport({ data: "exported", evidence: { revision: 1, done: true } }));
  assert.deepEqual(message, { success: true, data: "exported" });
  assert.equal(session.report?.state, "COMPLETED");
  assert.equal((await session.get()).state, "COMPLETED");
});

test("run drives the loop and finishes the task when the plan answers", async () => {
  const lw = agent({}, STRICT_TOKEN);
  const taskId = await newTask(lw);
  const plans = [
    { toolCalls: [{ name: "fetch_page", args: { page: 1 } }], promptTokens: 10, completionTokens: 5 },
    { answer: "exported", done: true, evidence: { revision: 1, done: true }, promptTokens: 12, completionTokens: 3 },
  ];
  const task = await run(lw, taskId, (history) => plans[history.filter((h) => h.role === "assistant").length]!, (_name, args) => `page ${args.page}`);
  assert.deepEqual([task.state, task.reason], ["COMPLETED", "goal_met"]);
  assert.equal(task.usage.tokens, 30);
});

test("a lost answer to a decision is sent again under its request_id and counted once", async () => {
  const proxy = await startProxy(firstN(1, (m, p) => m === "POST" && p.endsWith("/model-calls"), "drop"));
  try {
    const { slept, sleep } = recordingSleep();
    const lw = agent({ sleep }, undefined, proxy.url);
    const taskId = await newTask(lw);
    const allowed = await lw.gateModelCall(taskId);
    assert.equal(allowed.decision, "ALLOW");
    const gates = proxy.seen.filter((s) => s.path.endsWith("/model-calls"));
    assert.equal(gates.length, 2);
    assert.ok(gates[0]!.body?.request_id, "a decision carries a request_id");
    assert.equal(gates[1]!.body?.request_id, gates[0]!.body?.request_id);
    assert.deepEqual(slept, [0.5]);
    assert.equal((await lw.getTask(taskId)).usage.model_calls, 1);
  } finally {
    await proxy.close();
  }
});

test("a lost answer to a request that is not a decision is thrown, not sent again", async () => {
  const proxy = await startProxy(firstN(1, (m, p) => m === "POST" && p.endsWith("/tasks"), "drop"));
  try {
    const lw = agent({ sleep: recordingSleep().sleep }, undefined, proxy.url);
    const lost = await lw.createTask("created, but the answer is lost").catch((e: unknown) => e);
    assert.ok(lost instanceof TransportError && !lost.unsent, String(lost));
    assert.equal(proxy.seen.length, 1);
  } finally {
    await proxy.close();
  }
});

test("429 THROTTLED and 503 DATABASE_UNAVAILABLE are sent again after their Retry-After", async () => {
  const when = new Date(Date.now() + 30_000).toUTCString();
  const answers = [
    { status: 429, headers: { "Retry-After": "7" }, body: { error: { code: "THROTTLED", message: "slow down" } } },
    { status: 503, headers: { "Retry-After": when }, body: { error: { code: "DATABASE_UNAVAILABLE", message: "busy" } } },
  ];
  let gates = 0;
  const proxy = await startProxy((m, p) => (m === "POST" && p.endsWith("/model-calls") ? answers[gates++] ?? "forward" : "forward"));
  try {
    const { slept, sleep } = recordingSleep();
    const lw = agent({ sleep }, undefined, proxy.url);
    const taskId = await newTask(lw);
    assert.equal((await lw.gateModelCall(taskId)).decision, "ALLOW");
    assert.equal(slept.length, 2);
    assert.equal(slept[0], 7);
    assert.ok(slept[1]! > 20 && slept[1]! <= 30, `HTTP-date Retry-After: ${slept[1]}`);
    assert.equal((await lw.getTask(taskId)).usage.model_calls, 1);
  } finally {
    await proxy.close();
  }
});

test("a refusal that is an answer (429 TRIGGER_LOOP) is thrown at once; throttling past maxThrottleTries too", async () => {
  const loop = { status: 429, headers: { "Retry-After": "1" }, body: { error: { code: "TRIGGER_LOOP", message: "loop" } } };
  const proxy = await startProxy((m, p) => (m === "POST" && p.endsWith("/tasks") ? loop : "forward"));
  try {
    const { slept, sleep } = recordingSleep();
    const lw = agent({ sleep }, undefined, proxy.url);
    const refused = await lw.createTask("triggered").catch((e: unknown) => e);
    assert.ok(refused instanceof LoopwardenError && refused.code === "TRIGGER_LOOP" && refused.status === 429);
    assert.deepEqual(slept, []);
    proxy.plan = () => ({ status: 429, body: { error: { code: "THROTTLED", message: "slow down" } } });
    const throttled = await new Client(proxy.url, "t", { sleep, maxThrottleTries: 3 }).getTask("x").catch((e: unknown) => e);
    assert.ok(throttled instanceof LoopwardenError && throttled.code === "THROTTLED");
    assert.deepEqual(slept, [1, 1]); // no Retry-After: a second, like a WAIT
  } finally {
    await proxy.close();
  }
});

test("a refused connection is tried again after 0.5 s, doubling, then thrown as unsent", async () => {
  const port = await closedPort();
  const { slept, sleep } = recordingSleep();
  const lw = new Client(`http://127.0.0.1:${port}/api/v1/`, "token", { sleep, maxThrottleTries: 4 });
  const refused = await lw.getTask("x").catch((e: unknown) => e);
  assert.ok(refused instanceof TransportError && refused.unsent, String(refused));
  assert.deepEqual(slept, [0.5, 1, 2]);
});

test("a server that comes up while the client waits is reached: nothing was sent before", async () => {
  const port = await closedPort();
  let proxy: Awaited<ReturnType<typeof startProxy>> | null = null;
  const sleep = async () => {
    proxy ??= await startProxy(undefined, port);
  };
  try {
    const lw = agent({ sleep }, undefined, `http://127.0.0.1:${port}${new URL(URL_).pathname}`);
    const task = await lw.createTask("reached on the second try");
    assert.equal(task.state, "RUNNING");
    assert.equal(proxy!.seen.length, 1);
  } finally {
    await (proxy as unknown as { close(): Promise<void> } | null)?.close();
  }
});

test("requests are built against the schema's own field names", () => {
  const body = REQUESTS.requestTool("t", "pay", { invoice: 1 }, { effect: "write", operationKey: "k", modelCall: 3 }).body as JSONObject;
  assert.deepEqual(body, { tool: "pay", args: { invoice: 1 }, effect: "write", operation_key: "k", model_call: 3 });
});

test("the ledger's operations come whole, every page: past the first hundred, and by key", async () => {
  const prefix = `ledger-${unique()}`;
  const keys = Array.from({ length: 102 }, (_, i) => `${prefix}-${i}`);
  const committed = () => ({ revision: 0, done: false, committed: true });
  const pay = () => "paid";
  const writePair = async (pair: string[]) => {
    const lw = agent();
    const session = lw.session(await newTask(lw)); // two writes a task: more without progress would stop it
    for (const key of pair) await session.tool("pay", { invoice: key }, pay, { effect: "write", operationKey: key, inspect: committed });
  };
  const pairs = Array.from({ length: keys.length / 2 }, (_, i) => keys.slice(2 * i, 2 * i + 2));
  for (let i = 0; i < pairs.length; i += 8) await Promise.all(pairs.slice(i, i + 8).map(writePair));
  const listed = new Set((await operator().listOperations()).map((op) => op.key));
  assert.deepEqual(keys.filter((key) => !listed.has(key)), []);
  const committedRows = new Set((await operator().listOperations({ state: "COMMITTED", pageSize: 25 })).map((op) => op.key));
  assert.deepEqual(keys.filter((key) => !committedRows.has(key)), []);
  const last = keys[keys.length - 1]!;
  assert.deepEqual((await operator().listOperations({ key: last })).map((op) => [op.key, op.state]), [[last, "COMMITTED"]]);
});

test("a body JSON cannot hold (a bigint, a cycle, NaN) throws a TypeError at once: nothing sent, nothing resent", async () => {
  const proxy = await startProxy();
  try {
    const { slept, sleep } = recordingSleep();
    const lw = agent({ sleep }, undefined, proxy.url);
    const taskId = await newTask(lw);
    const cycle: JSONObject = {};
    cycle.self = cycle;
    const sent = proxy.seen.length;
    for (const args of [{ amount: 10n }, { page: cycle }, { amount: NaN }, { amount: Infinity }]) {
      const refused = await lw.requestTool(taskId, "pay", args).catch((e: unknown) => e);
      assert.ok(refused instanceof TypeError && refused.message.startsWith("request_tool: the request body cannot be sent as JSON"), String(refused));
    }
    const limits = await lw.createTask("goal", { limits: { max_model_calls: NaN } }).catch((e: unknown) => e);
    assert.ok(limits instanceof TypeError && /"max_model_calls" is NaN/.test(limits.message), String(limits));
    assert.equal(proxy.seen.length, sent);
    assert.deepEqual(slept, []);
    // A tool's own report still leaves: the tool ran, so a count JSON cannot hold is left out.
    assert.deepEqual(new ToolReport({ data: NaN, waitMs: NaN, attempts: Infinity }).resultFields(), { data: "NaN" });
  } finally {
    await proxy.close();
  }
});

test("a timeout of any number of seconds is waited: a fraction of a millisecond, days, none; 0 is refused at once", async () => {
  for (const timeout of [0.1 * 3, 2.0005, 1e7, Infinity]) {
    const lw = agent({ timeout, maxThrottleTries: 1 });
    const task = await lw.createTask(`timeout ${timeout}`).catch((e: unknown) => e);
    assert.ok(!(task instanceof Error), `timeout ${timeout}: ${String(task)}`);
  }
  for (const timeout of [0, -1, NaN]) {
    assert.throws(() => agent({ timeout }), (e: unknown) => e instanceof RangeError && /timeout must be a number of seconds above 0/.test(e.message));
  }
});
