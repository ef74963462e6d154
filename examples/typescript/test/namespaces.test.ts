// The runner in a namespace, against a real server (a fresh in-memory one, or
// `LIGHTNING_STORE_TEST_SERVER=host:port`, which must then let this process
// create namespaces): with `namespace` in its connection options it dequeues
// its namespace's rollouts alone and exports its spans there. Every wait is
// bounded.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";

import { Code, ConnectError } from "@connectrpc/connect";

import { additionAgent, type AdditionTask } from "../src/agent.js";
import { enqueueRollouts, latestReward, watchCompletions } from "../src/algorithm.js";
import {
  checkNamespace,
  connectionFromEnv,
  createSpanExporter,
  createStoreClient,
  type StoreClient,
} from "../src/connection.js";
import { RolloutStatus, type Rollout } from "../src/gen/lightningstore/v1/types_pb.js";
import { startServer, type LocalServer } from "../src/local-server.js";
import { Runner, type RunnerEvent } from "../src/runner.js";
import { WorkerSession } from "../src/session.js";

/** Longest wait for one expected outcome. */
const WAIT_MS = 20_000;
const TEST_TIMEOUT_MS = 60_000;

let server: LocalServer | undefined;
let address: string;
/** A client of the `default` namespace, which creates the others. */
let admin: StoreClient;
/** Names unique to this run, so that a handed-over server can be used again. */
const suffix = Date.now().toString(36);
const RUN_A = `ts-a-${suffix}`;
const RUN_B = `ts-b-${suffix}`;
const RUN_C = `ts-c-${suffix}`;

before(async () => {
  const handed = process.env["LIGHTNING_STORE_TEST_SERVER"];
  if (handed !== undefined && handed !== "") {
    address = handed;
  } else {
    server = await startServer(["--store", "memory"]);
    address = server.address;
  }
  admin = createStoreClient(connectionFromEnv(address));
  for (const name of [RUN_A, RUN_B, RUN_C]) {
    await admin.createNamespace({ name });
  }
});

after(async () => {
  if (server !== undefined) {
    assert.equal(await server.stop(), 0, "the server exits 0 on SIGTERM");
  }
});

function clientOf(namespace: string): StoreClient {
  return createStoreClient(connectionFromEnv(address, namespace));
}

async function rejectsWith(promise: Promise<unknown>, code: Code): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof ConnectError, String(error));
    assert.equal(Code[error.code], Code[code], error.message);
    return true;
  });
}

describe("namespaces", () => {
  test("a runner in one namespace dequeues its namespace's rollouts alone", { timeout: TEST_TIMEOUT_MS }, async () => {
    const a = clientOf(RUN_A);
    const b = clientOf(RUN_B);
    // run-b's work is queued first: a runner that saw it would take it first.
    const [inB] = await enqueueRollouts(b, [{ inputJson: JSON.stringify({ a: 100, b: 1 }) }]);
    assert.ok(inB !== undefined);
    const tasks: AdditionTask[] = [
      { a: 1, b: 2 },
      { a: 3, b: 4 },
    ];
    const inA = await enqueueRollouts(
      a,
      tasks.map((task) => ({ inputJson: JSON.stringify(task) })),
    );
    const ids = inA.map((r) => r.rolloutId);

    const seen: RunnerEvent[] = [];
    const connection = connectionFromEnv(address, RUN_A);
    const exporter = createSpanExporter(connection);
    const runner = new Runner(createStoreClient(connection), exporter, {
      workerId: "Worker-ts-ns",
      slots: 1,
      agent: additionAgent,
      onEvent: (event) => seen.push(event),
      drainTimeoutMs: 5_000,
    });
    const stop = new AbortController();
    const running = runner.run(stop.signal);
    const done: Rollout[] = [];
    try {
      for await (const rollout of watchCompletions(a, ids, { timeoutMs: WAIT_MS })) {
        done.push(rollout);
      }
    } finally {
      stop.abort();
      await running;
      await exporter.shutdown();
    }

    assert.deepEqual(done.map((r) => r.rolloutId).sort(), [...ids].sort());
    for (const rollout of done) {
      assert.equal(RolloutStatus[rollout.status], "SUCCEEDED", rollout.rolloutId);
      // its spans, exported over OTLP/gRPC with the namespace's metadata, are in run-a
      const spans = (await a.querySpans({ rolloutId: rollout.rolloutId })).spans;
      assert.deepEqual(
        spans.map((s) => s.name).sort(),
        ["agent.rollout", "agentlightning.annotation", "openai.chat.completion"],
      );
      assert.equal(await latestReward(a, rollout.rolloutId), 1);
    }
    assert.deepEqual(
      [...new Set(seen.map((e) => e.rolloutId))].sort(),
      [...ids].sort(),
      "the runner was assigned run-a's rollouts only",
    );
    const left = (await b.getRollout({ rolloutId: inB.rolloutId })).rollout;
    assert.equal(RolloutStatus[left?.status ?? 0], "QUEUING", "run-b's rollout is still waiting for a runner of run-b");
    assert.equal((await b.queryRollouts({})).rollouts.length, 1);
    await rejectsWith(b.getRollout({ rolloutId: ids[0] ?? "" }), Code.NotFound);
    await rejectsWith(admin.getRollout({ rolloutId: ids[0] ?? "" }), Code.NotFound);
    assert.equal((await a.getWorker({ workerId: "Worker-ts-ns" })).worker?.workerId, "Worker-ts-ns");
    await rejectsWith(b.getWorker({ workerId: "Worker-ts-ns" }), Code.NotFound);
  });

  test("the runner and algorithm scripts take --namespace", { timeout: TEST_TIMEOUT_MS }, async () => {
    const script = (name: string): string => fileURLToPath(new URL(`../src/bin/${name}.js`, import.meta.url));
    const runner = spawn(
      process.execPath,
      [script("runner"), address, "--worker-id", "Worker-ts-ns-cli", "--slots", "2", "--namespace", RUN_C],
      { stdio: ["ignore", "pipe", "inherit"], timeout: TEST_TIMEOUT_MS },
    );
    let runnerOutput = "";
    runner.stdout.on("data", (chunk: Buffer) => {
      runnerOutput += chunk.toString();
    });
    const runnerExit = once(runner, "exit");
    try {
      const algorithm = spawn(
        process.execPath,
        [script("algorithm"), address, "--count", "3", "--timeout-secs", String(WAIT_MS / 1000), "--namespace", RUN_C],
        { stdio: ["ignore", "pipe", "inherit"], timeout: 2 * WAIT_MS },
      );
      let algorithmOutput = "";
      algorithm.stdout.on("data", (chunk: Buffer) => {
        algorithmOutput += chunk.toString();
      });
      const [code] = (await once(algorithm, "exit")) as [number | null];
      assert.equal(code, 0, algorithmOutput);
      assert.match(algorithmOutput, /^3 of 3 rollouts succeeded with reward 1$/m);
    } finally {
      runner.kill("SIGTERM");
    }
    const [code] = (await runnerExit) as [number | null];
    assert.equal(code, 0, runnerOutput);
    assert.match(runnerOutput, new RegExp(`in namespace ${RUN_C}$`, "m"));
    assert.equal((runnerOutput.match(/ succeeded reward=1 /g) ?? []).length, 3, runnerOutput);
    const inC = (await clientOf(RUN_C).queryRollouts({})).rollouts;
    assert.equal(inC.length, 3);
    assert.ok(inC.every((r) => RolloutStatus[r.status] === "SUCCEEDED"));
    // the algorithm wrote nowhere else: the default namespace holds none of its rollouts
    for (const rollout of inC) {
      await rejectsWith(admin.getRollout({ rolloutId: rollout.rolloutId }), Code.NotFound);
    }
  });

  test("a namespace that does not exist is NOT_FOUND, a malformed name is refused before any call", { timeout: TEST_TIMEOUT_MS }, async () => {
    const missing = clientOf(`ts-missing-${suffix}`);
    await rejectsWith(missing.getStatistics({}), Code.NotFound);
    await rejectsWith(WorkerSession.open(missing, { workerId: "Worker-ts-missing", slots: 1 }), Code.NotFound);
    await rejectsWith(admin.createNamespace({ name: RUN_A }), Code.AlreadyExists);
    for (const bad of ["Run-A", "-a", "a-", "a_b", "a".repeat(64)]) {
      assert.throws(() => checkNamespace(bad), /not a namespace name/);
      assert.throws(() => createStoreClient({ address, tls: false, namespace: bad }), /not a namespace name/);
    }
    assert.equal(checkNamespace("a".repeat(63)), "a".repeat(63));
  });
});
