/** `@loopwarden/client`: Loopwarden's client for agents written in TypeScript. Adapters:
 * `@loopwarden/client/ai-sdk` (the Vercel AI SDK) and `@loopwarden/client/openai-agents`. */

export { Client, ModelCall, TaskSession, abortable, defaultSleep, run } from "./client.js";
export type { ClientOptions, RunOptions, SessionOptions, Sleeper, Task, ToolOptions } from "./client.js";
export { DEFAULT_TIMEOUT_SECONDS, MAX_THROTTLE_SECONDS, REQUESTS, VERSION, retryAfterSeconds } from "./core.js";
export type { Answer, Body, DecisionHook, GateOptions, Request } from "./core.js";
export { InvalidEvidence, LoopwardenError, TaskStopped, TransportError } from "./errors.js";
export { drive, sendFlow, toolFlow } from "./flows.js";
export type { Flow, Step } from "./flows.js";
export { VOLATILE_KEYS, resultHash } from "./novelty.js";
export { Guard, InvalidArguments, ToolSpec, answerText, handedBack, read, stopText, write } from "./guard.js";
export type { EvidenceFn, GuardOptions, KeyRule, ToolDeclarations } from "./guard.js";
export * from "./types.js";
