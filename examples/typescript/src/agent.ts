// The agent this example runs: what a real runner replaces with its own
// agent (an LLM loop, tools, ...). It records the spans agent-lightning's
// algorithms read back: an `openai.chat.completion` call with token ids and
// usage, and the reward as an `agentlightning.annotation` span.

import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Tracer } from "@opentelemetry/api";

import type { Attempt, ResourcesUpdate, Rollout } from "./gen/lightningstore/v1/types_pb.js";

/** What an agent gets besides the rollout's input. */
export interface AgentContext {
  readonly rollout: Rollout;
  readonly attempt: Attempt;
  readonly resources: ResourcesUpdate | undefined;
  /** Records spans into the store, on this attempt. */
  readonly tracer: Tracer;
  /** Aborted when the attempt is revoked (cancelled, timed out) or the session ends. */
  readonly signal: AbortSignal;
}

/** Runs one attempt of a rollout and returns its reward; throws when the attempt failed. */
export type Agent = (input: unknown, context: AgentContext) => Promise<number>;

/**
 * Input of the example agent: add `a` and `b`. `think_ms` simulates the
 * model's latency (cut short by a revocation); the first `fail_attempts`
 * attempts fail, to show retries.
 */
export interface AdditionTask {
  a: number;
  b: number;
  think_ms?: number;
  fail_attempts?: number;
}

/** Reward span attributes, flattened as agent-lightning's `emit_reward` writes them. */
export const REWARD_NAME_KEY = "agentlightning.reward.0.name";
export const REWARD_VALUE_KEY = "agentlightning.reward.0.value";

function isAdditionTask(input: unknown): input is AdditionTask {
  if (typeof input !== "object" || input === null) {
    return false;
  }
  const task = input as Record<string, unknown>;
  return typeof task["a"] === "number" && typeof task["b"] === "number";
}

/** Resolves after `ms`, or rejects with the signal's reason once it aborts. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

function modelName(resources: ResourcesUpdate | undefined): string {
  if (resources === undefined) {
    return "unknown";
  }
  const parsed: unknown = JSON.parse(resources.resourcesJson);
  const llm = (parsed as { main_llm?: { model?: unknown } }).main_llm;
  return typeof llm?.model === "string" ? llm.model : "unknown";
}

/**
 * The example agent: "asks the model" for `a + b` and rewards a correct
 * answer with 1. Spans: `agent.rollout` (root), `openai.chat.completion`
 * (child), `agentlightning.annotation` (the reward).
 */
export const additionAgent: Agent = async (input, context) => {
  if (!isAdditionTask(input)) {
    throw new Error(`not an addition task: ${JSON.stringify(input)}`);
  }
  const { tracer, signal } = context;
  const root = tracer.startSpan("agent.rollout", { kind: SpanKind.INTERNAL });
  // Parents are passed explicitly: attempts run concurrently, and no global
  // context manager is installed.
  const inRoot = trace.setSpan(ROOT_CONTEXT, root);
  try {
    const llm = tracer.startSpan("openai.chat.completion", { kind: SpanKind.CLIENT }, inRoot);
    llm.setAttributes({
      "gen_ai.system": "openai",
      "gen_ai.request.model": modelName(context.resources),
      "gen_ai.prompt.0.role": "user",
      "gen_ai.prompt.0.content": `What is ${input.a} + ${input.b}?`,
      prompt_token_ids: [3838, 374, input.a, 488, input.b, 30],
    });
    try {
      await sleep(input.think_ms ?? 0, signal);
      if ((input.fail_attempts ?? 0) >= Number(context.attempt.sequenceId)) {
        throw new Error(`simulated failure of attempt ${context.attempt.sequenceId}`);
      }
      const answer = input.a + input.b;
      llm.setAttributes({
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.content": String(answer),
        response_token_ids: [answer],
        "gen_ai.usage.prompt_tokens": 6,
        "gen_ai.usage.completion_tokens": 1,
      });
      llm.setStatus({ code: SpanStatusCode.OK });
    } catch (error) {
      llm.recordException(error as Error);
      llm.setStatus({ code: SpanStatusCode.ERROR, message: String(error) });
      throw error;
    } finally {
      llm.end();
    }
    const reward = 1;
    const annotation = tracer.startSpan("agentlightning.annotation", {}, inRoot);
    annotation.setAttributes({ [REWARD_NAME_KEY]: "primary", [REWARD_VALUE_KEY]: reward });
    annotation.end();
    return reward;
  } finally {
    root.end();
  }
};
