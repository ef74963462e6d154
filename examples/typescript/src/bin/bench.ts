// Usage: node dist/src/bin/bench.js [--sessions 1,16] [--duration-secs 5]
//          [--warmup-secs 1] [--spans 10] [--span-bytes 1024] [--binary PATH]
//
// Lifecycles per second of the TypeScript runner: for each session count, a
// fresh in-memory server (`serve --store memory` on an ephemeral loopback
// port), that many runners with one slot each (each its own HTTP/2
// connection, one OTLP exporter shared by the process), and a feeder that
// keeps twice as many rollouts queued or running. One lifecycle: the
// rollout is enqueued (EnqueueRollouts, batched by the feeder), pushed to a
// session, the agent records `--spans` spans of about `--span-bytes` bytes
// with the OpenTelemetry SDK, they are exported over OTLP/gRPC (one export
// per attempt), the attempt is reported succeeded, and the slot released.
// Counts lifecycles finished during the measured window, after a warm-up.

import { setMaxListeners } from "node:events";
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";

import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";

import type { Agent } from "../agent.js";
import { enqueueRollouts } from "../algorithm.js";
import { connectionFromEnv, createSpanExporter, createStoreClient } from "../connection.js";
import { startServer } from "../local-server.js";
import { Runner, type RunnerEvent } from "../runner.js";

const { values } = parseArgs({
  options: {
    sessions: { type: "string", default: "1,16" },
    "duration-secs": { type: "string", default: "5" },
    "warmup-secs": { type: "string", default: "1" },
    spans: { type: "string", default: "10" },
    "span-bytes": { type: "string", default: "1024" },
    binary: { type: "string" },
  },
});
const sessionCounts = values.sessions.split(",").map(Number);
const durationMs = Number(values["duration-secs"]) * 1000;
const warmupMs = Number(values["warmup-secs"]) * 1000;
const spansPerLifecycle = Number(values.spans);
/** Ids, times, names and the OTLP framing take about this much of a span. */
const SPAN_OVERHEAD_BYTES = 150;
const filler = "x".repeat(Math.max(0, Number(values["span-bytes"]) - SPAN_OVERHEAD_BYTES));

/** The benchmark's agent: one root span and `spans - 1` LLM-call spans, no waiting. */
const benchAgent: Agent = async (_input, { tracer }) => {
  const root = tracer.startSpan("agent.rollout", { kind: SpanKind.INTERNAL });
  const parent = trace.setSpan(ROOT_CONTEXT, root);
  root.setAttribute("gen_ai.prompt.0.content", filler);
  for (let i = 1; i < spansPerLifecycle; i++) {
    const llm = tracer.startSpan("openai.chat.completion", { kind: SpanKind.CLIENT }, parent);
    llm.setAttributes({ "gen_ai.request.model": "gpt-4o-mini", "gen_ai.prompt.0.content": filler });
    llm.setStatus({ code: SpanStatusCode.OK });
    llm.end();
  }
  root.end();
  return 1;
};

/** CPU seconds (user + system) a process used so far, from /proc. */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
  // utime and stime are fields 14 and 15 of stat, counted in clock ticks (100 per second here).
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) {
    return Number.NaN;
  }
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

interface Result {
  sessions: number;
  lifecycles: number;
  perSecond: number;
  p50: number;
  p99: number;
  errors: number;
  runnerCpu: number;
  serverCpu: number;
}

async function measure(sessions: number): Promise<Result> {
  const server = await startServer(["--store", "memory"], values.binary === undefined ? {} : { binary: values.binary });
  const connection = connectionFromEnv(server.address);
  const exporter = createSpanExporter(connection);
  const feederClient = createStoreClient(connection);
  const stop = new AbortController();
  setMaxListeners(sessions + 1, stop.signal); // one listener per runner is expected

  // An object, so that the closures' writes are not narrowed away.
  const state: { phase: "warmup" | "measure" | "done" } = { phase: "warmup" };
  let finished = 0;
  let enqueued = 0;
  let errors = 0;
  const latencies: number[] = [];
  let wakeFeeder: (() => void) | undefined;
  const onEvent = (event: RunnerEvent): void => {
    if (event.kind !== "finished") {
      return;
    }
    finished += 1;
    if (event.outcome !== "succeeded" || event.reportError !== undefined) {
      errors += 1;
    } else if (state.phase === "measure") {
      latencies.push(event.durationMs);
    }
    wakeFeeder?.();
  };

  const runs = Array.from({ length: sessions }, (_, i) =>
    new Runner(createStoreClient(connection), exporter, {
      workerId: `Worker-bench-${i}`,
      slots: 1,
      agent: benchAgent,
      onEvent,
    }).run(stop.signal),
  );

  // Keeps 2 x sessions rollouts queued or running until the window closes.
  const feeder = (async () => {
    while (state.phase !== "done") {
      const deficit = 2 * sessions - (enqueued - finished);
      if (deficit > 0) {
        enqueued += deficit;
        await enqueueRollouts(
          feederClient,
          Array.from({ length: deficit }, () => ({ inputJson: "{}" })),
        );
      } else {
        await new Promise<void>((resolve) => {
          wakeFeeder = resolve;
        });
        wakeFeeder = undefined;
      }
    }
  })();

  await new Promise((resolve) => setTimeout(resolve, warmupMs));
  state.phase = "measure";
  const startFinished = finished;
  const startErrors = errors;
  const startCpu = { runner: process.cpuUsage(), server: cpuSeconds(server.pid) };
  const started = performance.now();
  await new Promise((resolve) => setTimeout(resolve, durationMs));
  const elapsedSeconds = (performance.now() - started) / 1000;
  const lifecycles = finished - startFinished - (errors - startErrors);
  const runnerCpu = process.cpuUsage(startCpu.runner);
  const serverCpu = cpuSeconds(server.pid) - startCpu.server;
  state.phase = "done";
  wakeFeeder?.();

  await feeder;
  stop.abort();
  await Promise.all(runs);
  await exporter.shutdown();
  const exit = await server.stop();
  if (exit !== 0) {
    throw new Error(`the server exited with ${exit}`);
  }
  latencies.sort((a, b) => a - b);
  return {
    sessions,
    lifecycles,
    perSecond: lifecycles / elapsedSeconds,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    errors: errors - startErrors,
    runnerCpu: (runnerCpu.user + runnerCpu.system) / 1e6 / elapsedSeconds,
    serverCpu: serverCpu / elapsedSeconds,
  };
}

console.log(
  `lifecycle: enqueue, session push, ${spansPerLifecycle} spans of ~${values["span-bytes"]} B over OTLP/gRPC, ` +
    `complete, release; ${values["warmup-secs"]} s warm-up, ${values["duration-secs"]} s measured, memory backend`,
);
console.log("sessions  lifecycles/s  attempt p50 ms  attempt p99 ms  errors  runner CPU  server CPU");
let failed = false;
for (const sessions of sessionCounts) {
  const r = await measure(sessions);
  failed ||= r.errors > 0 || r.lifecycles === 0;
  console.log(
    [
      String(r.sessions).padStart(8),
      r.perSecond.toFixed(0).padStart(13),
      r.p50.toFixed(2).padStart(15),
      r.p99.toFixed(2).padStart(15),
      String(r.errors).padStart(7),
      `${(100 * r.runnerCpu).toFixed(0)}%`.padStart(11),
      `${(100 * r.serverCpu).toFixed(0)}%`.padStart(11),
    ].join(" "),
  );
}
process.exitCode = failed ? 1 : 0;
