/**
 * What the TypeScript examples share (the twin of examples/_demo.py): the story they play, its
 * two tools, and how a run is shown. The scripted model loops: it asks for the same search again
 * and again (the search runs twice, then Loopwarden stops the task as a loop), then, in a second
 * task, pays an invoice whose response is lost (NO_RESULT: the payment may have happened, so the
 * task waits for a human: NEEDS_HUMAN). In a third task it searches once and answers: the run
 * ends well, and the adapter finishes the task (PARTIAL/goal_unverified: no verifier confirmed
 * the goal; COMPLETED when one does). No network but Loopwarden's, no API key.
 */

import { Client, write, type Guard, type TaskSession } from "@loopwarden/client";

export const URL =
  process.env.LOOPWARDEN_URL ?? `http://127.0.0.1:${process.env.PORT ?? "8000"}/api/v1/`;
const TOKEN = process.env.LOOPWARDEN_TOKEN;
export const INVOICE = `INV-${Math.random().toString(16).slice(2, 8)}`;
export const TOOLS = { pay: write({ key: "pay-{invoice}" }) }; // how each payment's operation key is derived

/** One model turn: the tool call it asks for, or its final answer. */
export type Turn = { tool: string; args: Record<string, string> } | { text: string };

// (goal, the model's script: the first turn repeated until an answer, if any)
export const TASKS: Array<[string, Turn, string | null]> = [
  ["Find the refund policy", { tool: "search", args: { query: "refund policy" } }, null],
  [`Pay invoice ${INVOICE}`, { tool: "pay", args: { invoice: INVOICE, amount: "1250.00" } }, null],
  ["Tell a customer how long refunds take", { tool: "search", args: { query: "refund policy" } }, "Refunds take 5 days."],
];

/** The model's turns: the call once, then the answer if it has one, else the call forever. */
export function script(call: Turn, answer: string | null): (turn: number) => Turn {
  return (turn) => (turn === 0 || answer === null ? call : { text: answer });
}

export async function search({ query }: { query: string }): Promise<string> {
  console.log(`  search('${query}') ran`);
  return "Refunds take 5 days.";
}

export async function pay({ invoice, amount }: { invoice: string; amount: string }): Promise<string> {
  console.log(`  pay(${invoice}, ${amount}) ran, and its response was lost`);
  throw new Error("the payment provider did not answer");
}

/** build(session, model script) -> the guard holding the task's report, and the run. */
export type Build = (session: TaskSession, script: (turn: number) => Turn) => { guard: Guard; run: (goal: string) => Promise<unknown> };

/** Play the tasks with the framework's guarded agent, then show how each ended. */
export async function main(build: Build): Promise<void> {
  if (!TOKEN) throw new Error("set LOOPWARDEN_TOKEN to an agent token (manage.py create_agent NAME --profile novelty)");
  const lw = new Client(URL, TOKEN);
  for (const [goal, call, answer] of TASKS) {
    const task = await lw.createTask(goal);
    console.log(`task ${task.id}: ${goal}`);
    const { guard, run } = build(lw.session(task.id), script(call, answer));
    try {
      await run(goal);
    } catch (error) {
      if (!(guard.report && `${error}`.includes("stopped"))) throw error;
      console.log("  TaskStopped raised by the tool call");
    }
    // A model STOP ends the run cleanly instead, and a final answer finishes the task; either
    // way the guard holds the task's report.
    const report = guard.report ?? {};
    if (report.reason === "goal_met" || report.reason === "goal_unverified") console.log(`  answered, and finished: ${report.state}/${report.reason}`);
    else console.log(`  stopped: ${report.state}/${report.reason} (${report.code})`);
    if (report.resume_condition) console.log(`  ${report.resume_condition}`);
    console.log(`  console: ${URL.split("/api/")[0]}/tasks/${task.id}/`);
  }
}
