// The algorithm's side: publish resources, enqueue rollouts, and watch them
// finish on the `WatchRolloutCompletions` stream (no polling), then read the
// reward back from each rollout's spans.

import type { MessageInitShape } from "@bufbuild/protobuf";
import { durationFromMs } from "@bufbuild/protobuf/wkt";

import { REWARD_VALUE_KEY } from "./agent.js";
import type { StoreClient } from "./connection.js";
import type { RolloutSpecSchema } from "./gen/lightningstore/v1/store_pb.js";
import type { Rollout } from "./gen/lightningstore/v1/types_pb.js";

/** A rollout to enqueue, as plain data (`inputJson` is JSON text). */
export type RolloutSpecInit = MessageInitShape<typeof RolloutSpecSchema>;

/** Enqueues the rollouts atomically, in order, and returns them (status `queuing`). */
export async function enqueueRollouts(client: StoreClient, specs: RolloutSpecInit[]): Promise<Rollout[]> {
  const response = await client.enqueueRollouts({ rollouts: specs });
  return response.rollouts;
}

/**
 * Yields each of the rollouts the moment it is terminal (already terminal
 * ones first) and returns once all were yielded. Throws DEADLINE_EXCEEDED
 * when `timeoutMs` passes first, and UNAVAILABLE when the server drains (ask
 * again for the rollouts not yet seen).
 */
export async function* watchCompletions(
  client: StoreClient,
  rolloutIds: string[],
  options: { timeoutMs?: number; signal?: AbortSignal } = {},
): AsyncGenerator<Rollout> {
  const stream = client.watchRolloutCompletions(
    {
      rolloutIds,
      ...(options.timeoutMs === undefined ? {} : { timeout: durationFromMs(options.timeoutMs) }),
    },
    options.signal === undefined ? {} : { signal: options.signal },
  );
  for await (const message of stream) {
    if (message.rollout !== undefined) {
      yield message.rollout;
    }
  }
}

/**
 * Returns the reward the rollout's latest attempt recorded (the last
 * `agentlightning.reward.0.value` among its spans), or undefined when none.
 */
export async function latestReward(client: StoreClient, rolloutId: string): Promise<number | undefined> {
  const spans = await client.querySpans({
    rolloutId,
    attemptId: "latest",
    name: "agentlightning.annotation",
  });
  let reward: number | undefined;
  for (const span of spans.spans) {
    for (const attribute of span.attributes) {
      const value = attribute.value?.value;
      if (attribute.key === REWARD_VALUE_KEY && value?.case === "doubleValue") {
        reward = value.value;
      } else if (attribute.key === REWARD_VALUE_KEY && value?.case === "intValue") {
        reward = Number(value.value);
      }
    }
  }
  return reward;
}
