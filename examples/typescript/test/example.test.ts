// The example against a real lightning-store server: by default a fresh
// in-memory server started from the repository's build on an ephemeral
// loopback port; `LIGHTNING_STORE_TEST_SERVER=host:port` hands over a running
// one instead (the tests only look at the rollouts they create). Every wait
// is bounded.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";

import { Code, ConnectError } from "@connectrpc/connect";

import { additionAgent, type AdditionTask } from "../src/agent.js";
import { enqueueRollouts, latestReward, watchCompletions } from "../src/algorithm.js";
import {
  connectionFromEnv,
  createSpanExporter,
  createStoreClient,
  type StoreClient,
} from "../src/connection.js";
import { RevocationReason } from "../src/gen/lightningstore/v1/store_pb.js";
import {
  AttemptStatus,
  EventKind,
  RolloutStatus,
  SpanStatusCode,
  WorkerStatus,
  type KeyValue,
  type Rollout,
} from "../src/gen/lightningstore/v1/types_pb.js";
import { startServer, type LocalServer } from "../src/local-server.js";
import { ATTEMPT_ID_ATTRIBUTE, ROLLOUT_ID_ATTRIBUTE, Runner, type RunnerEvent } from "../src/runner.js";
import { Revoked, WorkerSession, type SessionAssignment } from "../src/session.js";

/** Longest wait for one expected outcome. */
const WAIT_MS = 20_000;
/** Longest run of one test: a few waits plus a runner's drain. */
const TEST_TIMEOUT_MS = 60_000;
const MODEL = "Qwen/Qwen2.5-0.5B-Instruct";

let server: LocalServer | undefined;
let address: string;
let client: StoreClient;

before(async () => {
  const handed = process.env["LIGHTNING_STORE_TEST_SERVER"];
  if (handed !== undefined && handed !== "") {
    address = handed;
  } else {
    server = await startServer(["--store", "memory"]);
    address = server.address;
  }
  client = createStoreClient(connectionFromEnv(address));
});

after(async () => {
  if (server !== undefined) {
    assert.equal(await server.stop(), 0, "the server exits 0 on SIGTERM");
  }
});

/** Runner events, with bounded waits for the one a test expects. */
class Events {
  readonly all: RunnerEvent[] = [];
  private readonly waiters = new Set<() => void>();

  readonly record = (event: RunnerEvent): void => {
    this.all.push(event);
    for (const wake of this.waiters) {
      wake();
    }
  };

  async waitFor<E extends RunnerEvent>(match: (event: RunnerEvent) => event is E, what: string): Promise<E> {
    const deadline = Date.now() + WAIT_MS;
    for (;;) {
      const found = this.all.find(match);
      if (found !== undefined) {
        return found;
      }
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new Error(`timed out waiting for ${what}; events: ${JSON.stringify(this.all)}`);
      }
      await new Promise<void>((resolve) => {
        const wake = (): void => {
          clearTimeout(timer);
          this.waiters.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, left);
        this.waiters.add(wake);
      });
    }
  }

  finished(rolloutId: string): Extract<RunnerEvent, { kind: "finished" }>[] {
    return this.all.filter(
      (e): e is Extract<RunnerEvent, { kind: "finished" }> => e.kind === "finished" && e.rolloutId === rolloutId,
    );
  }
}

/** Starts a runner on its own worker session; `stop()` drains it and resolves when it ended. */
function startRunner(workerId: string, slots: number, events: Events): { stop: () => Promise<void> } {
  const exporter = createSpanExporter(connectionFromEnv(address));
  const runner = new Runner(client, exporter, {
    workerId,
    slots,
    agent: additionAgent,
    onEvent: events.record,
    drainTimeoutMs: 5_000,
  });
  const stop = new AbortController();
  const running = runner.run(stop.signal);
  return {
    stop: async () => {
      stop.abort();
      await running;
      await exporter.shutdown();
    },
  };
}

async function collectCompletions(rolloutIds: string[]): Promise<Rollout[]> {
  const done: Rollout[] = [];
  for await (const rollout of watchCompletions(client, rolloutIds, { timeoutMs: WAIT_MS })) {
    done.push(rollout);
  }
  return done;
}

function attributes(list: KeyValue[]): Map<string, unknown> {
  return new Map(list.map((kv) => [kv.key, kv.value?.value.value]));
}

describe("typescript runner", () => {
  test("completes rollouts from its session and records their spans on the right attempt", { timeout: TEST_TIMEOUT_MS }, async () => {
    const events = new Events();
    const workerId = "Worker-ts-complete";
    const runner = startRunner(workerId, 2, events);
    try {
      const resources = await client.addResources({
        resourcesJson: JSON.stringify({ main_llm: { resource_type: "llm", model: MODEL } }),
      });
      const tasks: AdditionTask[] = Array.from({ length: 6 }, (_, i) => ({ a: i, b: 10 + i }));
      const queued = await enqueueRollouts(
        client,
        tasks.map((task) => ({ inputJson: JSON.stringify(task) })),
      );
      const ids = queued.map((r) => r.rolloutId);

      const done = await collectCompletions(ids);
      assert.deepEqual(done.map((r) => r.rolloutId).sort(), [...ids].sort(), "each rollout is watched to completion once");
      for (const rollout of done) {
        assert.equal(RolloutStatus[rollout.status], "SUCCEEDED", rollout.rolloutId);
        assert.equal(rollout.attempt?.workerId, workerId);
        assert.equal(AttemptStatus[rollout.attempt?.status ?? 0], "SUCCEEDED");
        assert.equal(rollout.resourcesId, resources.resources?.resourcesId, "the latest resources were attached");
      }

      for (const [i, id] of ids.entries()) {
        const rollout = done.find((r) => r.rolloutId === id);
        const attemptId = rollout?.attempt?.attemptId;
        assert.ok(attemptId !== undefined);
        const spans = (await client.querySpans({ rolloutId: id })).spans;
        assert.deepEqual(
          spans.map((s) => s.name).sort(),
          ["agent.rollout", "agentlightning.annotation", "openai.chat.completion"],
        );
        assert.deepEqual(spans.map((s) => Number(s.sequenceId)), [1, 2, 3], "sequence ids allocated in export order");
        const root = spans.find((s) => s.name === "agent.rollout");
        const llm = spans.find((s) => s.name === "openai.chat.completion");
        assert.ok(root !== undefined && llm !== undefined);
        for (const span of spans) {
          assert.equal(span.attemptId, attemptId, "every span is filed under the attempt that recorded it");
          assert.equal(span.traceId, root.traceId);
          const resource = attributes(span.resource?.attributes ?? []);
          assert.equal(resource.get(ROLLOUT_ID_ATTRIBUTE), id);
          assert.equal(resource.get(ATTEMPT_ID_ATTRIBUTE), attemptId);
        }
        assert.equal(root.parentId, undefined);
        assert.equal(llm.parentId, root.spanId);
        assert.equal(SpanStatusCode[llm.status?.code ?? 0], "OK");
        const llmAttributes = attributes(llm.attributes);
        assert.equal(llmAttributes.get("gen_ai.request.model"), MODEL, "the agent got the session's resources");
        const task = tasks[i]!;
        assert.equal(llmAttributes.get("gen_ai.completion.0.content"), String(task.a + task.b));
        const tokenIds = llm.attributes.find((kv) => kv.key === "prompt_token_ids")?.value?.value;
        assert.equal(tokenIds?.case, "arrayValue");
        assert.deepEqual(
          tokenIds.value.values.map((v) => v.value.value),
          [3838n, 374n, BigInt(task.a), 488n, BigInt(task.b), 30n],
          "integer arrays arrive as int64 values",
        );
        assert.equal(await latestReward(client, id), 1);
      }

      let running = 0;
      for (const event of events.all) {
        running += event.kind === "assigned" ? 1 : -1;
        assert.ok(running <= 2, "never more attempts at once than the session's two slots");
      }
      for (const id of ids) {
        const finished = events.finished(id);
        assert.equal(finished.length, 1, `one attempt ran for ${id}`);
        assert.equal(finished[0]?.outcome, "succeeded");
        assert.equal(finished[0]?.reportError, undefined);
      }
      const worker = (await client.getWorker({ workerId })).worker;
      assert.equal(WorkerStatus[worker?.status ?? 0], "IDLE", "the worker is idle once its attempts finished");
    } finally {
      await runner.stop();
    }
  });

  test("honours a cancel push: the agent stops, the attempt is reported failed, the slot is freed", { timeout: TEST_TIMEOUT_MS }, async () => {
    const events = new Events();
    const workerId = "Worker-ts-cancel";
    const runner = startRunner(workerId, 1, events);
    try {
      const [slow] = await enqueueRollouts(client, [
        { inputJson: JSON.stringify({ a: 1, b: 2, think_ms: 2 * WAIT_MS } satisfies AdditionTask) },
      ]);
      assert.ok(slow !== undefined);
      await events.waitFor(
        (e): e is RunnerEvent => e.kind === "assigned" && e.rolloutId === slow.rolloutId,
        "the slow rollout's assignment",
      );
      await client.updateRollout({
        rolloutId: slow.rolloutId,
        updateMask: { paths: ["status"] },
        status: RolloutStatus.CANCELLED,
      });
      const finished = await events.waitFor(
        (e): e is Extract<RunnerEvent, { kind: "finished" }> =>
          e.kind === "finished" && e.rolloutId === slow.rolloutId,
        "the cancelled attempt to finish",
      );
      assert.equal(finished.outcome, "cancelled");
      assert.ok(finished.error instanceof Revoked, `stopped by the revocation, got ${String(finished.error)}`);
      assert.equal(finished.error.reason, RevocationReason.CANCELLED);
      assert.ok(finished.durationMs < WAIT_MS, "the agent stopped long before its 'model' would have answered");

      const rollout = (await client.getRollout({ rolloutId: slow.rolloutId })).rollout;
      assert.equal(RolloutStatus[rollout?.status ?? 0], "CANCELLED", "cancellation is final");
      assert.equal(AttemptStatus[rollout?.attempt?.status ?? 0], "FAILED", "the runner reported its attempt");
      const spans = (await client.querySpans({ rolloutId: slow.rolloutId })).spans;
      const llm = spans.find((s) => s.name === "openai.chat.completion");
      assert.ok(llm !== undefined, "spans recorded before the cancel were exported");
      assert.equal(SpanStatusCode[llm.status?.code ?? 0], "ERROR");
      assert.deepEqual(llm.events.map((e) => e.name), ["exception"]);
      assert.equal(llm.attemptId, rollout?.attempt?.attemptId);

      // The one slot was released: the next rollout runs on the same session.
      const [next] = await enqueueRollouts(client, [{ inputJson: JSON.stringify({ a: 4, b: 5 }) }]);
      assert.ok(next !== undefined);
      const [completed] = await collectCompletions([next.rolloutId]);
      assert.equal(RolloutStatus[completed?.status ?? 0], "SUCCEEDED");
      assert.equal(completed?.attempt?.workerId, workerId);
    } finally {
      await runner.stop();
    }
  });

  test("a failed attempt is retried per the rollout's retry_condition", { timeout: TEST_TIMEOUT_MS }, async () => {
    const events = new Events();
    const runner = startRunner("Worker-ts-retry", 1, events);
    try {
      const [rollout] = await enqueueRollouts(client, [
        {
          inputJson: JSON.stringify({ a: 2, b: 3, fail_attempts: 1 } satisfies AdditionTask),
          config: { maxAttempts: 2n, retryCondition: [AttemptStatus.FAILED] },
        },
      ]);
      assert.ok(rollout !== undefined);
      const [completed] = await collectCompletions([rollout.rolloutId]);
      assert.equal(RolloutStatus[completed?.status ?? 0], "SUCCEEDED");
      const attempts = (await client.queryAttempts({ rolloutId: rollout.rolloutId })).attempts;
      assert.deepEqual(
        attempts.map((a) => AttemptStatus[a.status]),
        ["FAILED", "SUCCEEDED"],
      );
      assert.deepEqual(
        events.finished(rollout.rolloutId).map((e) => e.outcome),
        ["failed", "succeeded"],
      );
      const failedSpans = await client.querySpans({ rolloutId: rollout.rolloutId, attemptId: attempts[0]?.attemptId ?? "" });
      assert.deepEqual(
        failedSpans.spans.map((s) => s.name).sort(),
        ["agent.rollout", "openai.chat.completion"],
        "the failed attempt's spans are kept on it, without a reward",
      );
    } finally {
      await runner.stop();
    }
  });

  test("the runner and algorithm scripts complete rollouts end to end", { timeout: TEST_TIMEOUT_MS }, async () => {
    const script = (name: string): string => fileURLToPath(new URL(`../src/bin/${name}.js`, import.meta.url));
    // `timeout` kills a script that outlives the test.
    const runner = spawn(process.execPath, [script("runner"), address, "--worker-id", "Worker-ts-cli", "--slots", "2"], {
      stdio: ["ignore", "pipe", "inherit"],
      timeout: TEST_TIMEOUT_MS,
    });
    let runnerOutput = "";
    runner.stdout.on("data", (chunk: Buffer) => {
      runnerOutput += chunk.toString();
    });
    const runnerExit = once(runner, "exit");
    try {
      const algorithm = spawn(
        process.execPath,
        [script("algorithm"), address, "--count", "4", "--timeout-secs", String(WAIT_MS / 1000)],
        { stdio: ["ignore", "pipe", "inherit"], timeout: 2 * WAIT_MS },
      );
      let algorithmOutput = "";
      algorithm.stdout.on("data", (chunk: Buffer) => {
        algorithmOutput += chunk.toString();
      });
      const [code] = (await once(algorithm, "exit")) as [number | null];
      assert.equal(code, 0, algorithmOutput);
      assert.match(algorithmOutput, /^4 of 4 rollouts succeeded with reward 1$/m);
      assert.equal((algorithmOutput.match(/ SUCCEEDED reward=1$/gm) ?? []).length, 4);
    } finally {
      runner.kill("SIGTERM");
    }
    const [code] = (await runnerExit) as [number | null];
    assert.equal(code, 0, runnerOutput);
    assert.match(runnerOutput, /^runner stopped$/m);
    assert.equal((runnerOutput.match(/ succeeded reward=1 /g) ?? []).length, 4, runnerOutput);
  });

  test("a restarted runner settles the attempts it adopted and takes new work", { timeout: TEST_TIMEOUT_MS }, async () => {
    const workerId = "Worker-ts-adopt";
    // A previous "process": claims two rollouts, finishes one, and goes away
    // without releasing either.
    const previous = await WorkerSession.open(client, { workerId, slots: 2 });
    const queued = await enqueueRollouts(client, [{ inputJson: "{}" }, { inputJson: "{}" }]);
    const assigned = [];
    for await (const assignment of previous) {
      assigned.push(assignment);
      if (assigned.length === 2) {
        break;
      }
    }
    assert.deepEqual(
      assigned.map((a) => a.rollout.rolloutId).sort(),
      queued.map((r) => r.rolloutId).sort(),
    );
    const [finished, unfinished] = assigned as [SessionAssignment, SessionAssignment];
    await client.updateAttempt({
      rolloutId: finished.rollout.rolloutId,
      attemptId: finished.attempt.attemptId,
      updateMask: { paths: ["status"] },
      status: AttemptStatus.SUCCEEDED,
      ownerEpoch: finished.ownerEpoch,
    });
    await previous.close();

    // The restart, within the server's grace period: it adopts the
    // unfinished attempt (a finished one is not adopted) under a new epoch.
    const events = new Events();
    const runner = startRunner(workerId, 2, events);
    try {
      const [next] = await enqueueRollouts(client, [{ inputJson: JSON.stringify({ a: 7, b: 8 }) }]);
      assert.ok(next !== undefined);
      const [completed] = await collectCompletions([next.rolloutId]);
      assert.equal(RolloutStatus[completed?.status ?? 0], "SUCCEEDED", "the adopted slots were freed for new work");
      assert.equal(completed?.attempt?.workerId, workerId);
      const [left] = await collectCompletions([unfinished.rollout.rolloutId]);
      assert.equal(RolloutStatus[left?.status ?? 0], "FAILED", "the unfinished adopted attempt was reported failed");
      assert.equal(left?.attempt?.attemptId, unfinished.attempt.attemptId);
      // The previous process's epoch is fenced off: its late write changes nothing.
      await assert.rejects(
        client.updateAttempt({
          rolloutId: unfinished.rollout.rolloutId,
          attemptId: unfinished.attempt.attemptId,
          updateMask: { paths: ["status"] },
          status: AttemptStatus.SUCCEEDED,
          ownerEpoch: unfinished.ownerEpoch,
        }),
        (error: unknown) => error instanceof ConnectError && error.code === Code.FailedPrecondition,
      );
      const kept = (await client.getRollout({ rolloutId: finished.rollout.rolloutId })).rollout;
      assert.equal(RolloutStatus[kept?.status ?? 0], "SUCCEEDED", "a finished adopted attempt is left alone");
      assert.deepEqual(events.all.filter((e) => e.rolloutId !== next.rolloutId), [], "adopted attempts are not run again");
    } finally {
      await runner.stop();
    }
  });
});

describe("worker session", () => {
  test("sends heartbeats with the runner's statistics", { timeout: TEST_TIMEOUT_MS }, async () => {
    const workerId = "Worker-ts-heartbeat";
    const watch = new AbortController();
    const changes = client.watchEvents({ kinds: [EventKind.WORKER_CHANGED] }, { signal: watch.signal });
    const session = await WorkerSession.open(client, {
      workerId,
      slots: 1,
      heartbeatIntervalMs: 50,
      heartbeatStats: () => ({ running: 0, language: "typescript" }),
    });
    const deadline = setTimeout(() => watch.abort(), WAIT_MS);
    let stats: unknown;
    try {
      for await (const message of changes) {
        if (message.message.case !== "event" || message.message.value.workerId !== workerId) {
          continue;
        }
        const worker = (await client.getWorker({ workerId })).worker;
        stats = JSON.parse(worker?.heartbeatStatsJson ?? "null");
        if (stats !== null) {
          break;
        }
      }
    } finally {
      clearTimeout(deadline);
      watch.abort();
      await session.close();
    }
    assert.deepEqual(stats, { running: 0, language: "typescript" });
  });

  test("a rejected open rejects with the server's status", { timeout: TEST_TIMEOUT_MS }, async () => {
    await assert.rejects(WorkerSession.open(client, { workerId: "Worker-ts-bad", slots: 0 }), (error: unknown) => {
      assert.ok(error instanceof ConnectError);
      assert.equal(error.code, Code.InvalidArgument);
      assert.match(error.rawMessage, /slots must be between 1 and 1024/);
      return true;
    });
  });
});
