// Usage: node dist/src/bin/runner.js [ADDRESS] [--worker-id ID] [--slots N] [--namespace NAME]
//
// Runs the example agent on the rollouts the server pushes to one worker
// session until SIGINT or SIGTERM, then finishes the attempts in progress
// and exits 0. Prints one line per attempt. The address defaults to
// $LIGHTNING_STORE_SERVER, then 127.0.0.1:4747 (see connection.ts for TLS
// and the token).

import { parseArgs } from "node:util";

import { additionAgent } from "../agent.js";
import { connectionFromEnv, createSpanExporter, createStoreClient } from "../connection.js";
import { Runner, type RunnerEvent } from "../runner.js";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    "worker-id": { type: "string", default: "Worker-ts-0" },
    slots: { type: "string", default: "4" },
    // The namespace to work in (default: $LIGHTNING_STORE_NAMESPACE, else `default`).
    namespace: { type: "string" },
  },
});

const connection = connectionFromEnv(positionals[0], values.namespace);
const exporter = createSpanExporter(connection);
const runner = new Runner(createStoreClient(connection), exporter, {
  workerId: values["worker-id"],
  slots: Number(values.slots),
  agent: additionAgent,
  onEvent: (event: RunnerEvent) => {
    if (event.kind === "finished") {
      const problem = event.reportError ?? event.error;
      console.log(
        `${event.rolloutId} ${event.attemptId} ${event.outcome}` +
          (event.reward === undefined ? "" : ` reward=${event.reward}`) +
          ` ${event.durationMs.toFixed(1)}ms` +
          (problem === undefined ? "" : ` (${String(problem)})`),
      );
    }
  },
});

const stop = new AbortController();
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => stop.abort());
}
console.log(
  `runner ${values["worker-id"]} with ${values.slots} slots on ${connection.address}` +
    (connection.namespace === undefined ? "" : ` in namespace ${connection.namespace}`),
);
try {
  await runner.run(stop.signal);
  console.log("runner stopped");
} catch (error) {
  console.error(`runner failed: ${String(error)}`);
  process.exitCode = 1;
} finally {
  await exporter.shutdown();
}
