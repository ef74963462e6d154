// Usage: node dist/src/bin/algorithm.js [ADDRESS] [--count N] [--timeout-secs S] [--namespace NAME]
//
// Publishes a resources snapshot, enqueues N addition tasks, and prints each
// rollout the moment it finishes (WatchRolloutCompletions), with the reward
// its spans carry. Exits 0 when every rollout succeeded with reward 1.

import { parseArgs } from "node:util";

import type { AdditionTask } from "../agent.js";
import { enqueueRollouts, latestReward, watchCompletions } from "../algorithm.js";
import { connectionFromEnv, createStoreClient } from "../connection.js";
import { RolloutMode, RolloutStatus } from "../gen/lightningstore/v1/types_pb.js";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    count: { type: "string", default: "8" },
    "timeout-secs": { type: "string", default: "60" },
    // The namespace to work in (default: $LIGHTNING_STORE_NAMESPACE, else `default`).
    namespace: { type: "string" },
  },
});

const connection = connectionFromEnv(positionals[0], values.namespace);
const client = createStoreClient(connection);
const count = Number(values.count);

const resources = await client.addResources({
  resourcesJson: JSON.stringify({
    main_llm: { resource_type: "llm", endpoint: "http://127.0.0.1:8000/v1", model: "Qwen/Qwen2.5-0.5B-Instruct" },
  }),
});
const tasks: AdditionTask[] = Array.from({ length: count }, (_, i) => ({ a: i, b: 2 * i }));
const rollouts = await enqueueRollouts(
  client,
  tasks.map((task) => ({ inputJson: JSON.stringify(task), mode: RolloutMode.TRAIN })),
);
console.log(`enqueued ${rollouts.length} rollouts with resources ${resources.resources?.resourcesId}`);

let succeeded = 0;
for await (const rollout of watchCompletions(
  client,
  rollouts.map((r) => r.rolloutId),
  { timeoutMs: Number(values["timeout-secs"]) * 1000 },
)) {
  const reward = await latestReward(client, rollout.rolloutId);
  console.log(`${rollout.rolloutId} ${RolloutStatus[rollout.status]} reward=${reward ?? "none"}`);
  if (rollout.status === RolloutStatus.SUCCEEDED && reward === 1) {
    succeeded += 1;
  }
}
console.log(`${succeeded} of ${count} rollouts succeeded with reward 1`);
process.exitCode = succeeded === count ? 0 : 1;
