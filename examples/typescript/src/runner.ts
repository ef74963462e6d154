// A runner: one worker session whose assignments run an agent. Each attempt
// gets its own OpenTelemetry tracer provider whose resource names the
// rollout and attempt (agent-lightning's `agentlightning.rollout_id` /
// `agentlightning.attempt_id`), so the store files every exported span under
// the right attempt; all providers share one OTLP/gRPC exporter (one
// connection). Spans are flushed before the attempt is reported, so an
// algorithm that sees the rollout finish also sees all its spans.

import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  type SpanExporter,
} from "@opentelemetry/sdk-trace-base";

import type { Agent } from "./agent.js";
import type { StoreClient } from "./connection.js";
import { RevocationReason } from "./gen/lightningstore/v1/store_pb.js";
import { AttemptStatus } from "./gen/lightningstore/v1/types_pb.js";
import { Revoked, type SessionAssignment, WorkerSession } from "./session.js";

/** Resource attributes by which the store routes OTLP spans to an attempt. */
export const ROLLOUT_ID_ATTRIBUTE = "agentlightning.rollout_id";
export const ATTEMPT_ID_ATTRIBUTE = "agentlightning.attempt_id";

/**
 * How an attempt ended on this runner:
 * - `succeeded` / `failed`: the agent's result, reported with UpdateAttempt;
 * - `cancelled`: the rollout was cancelled; the agent stopped and the attempt
 *   is reported `failed` (the rollout stays cancelled);
 * - `revoked`: the watchdog timed the attempt out or found it unresponsive,
 *   or the session ended; the server's verdict stands, nothing is reported.
 */
export type AttemptOutcome = "succeeded" | "failed" | "cancelled" | "revoked";

/** What the runner reports about each assignment. */
export type RunnerEvent =
  | { kind: "assigned"; rolloutId: string; attemptId: string }
  | {
      kind: "finished";
      rolloutId: string;
      attemptId: string;
      outcome: AttemptOutcome;
      reward: number | undefined;
      /** Milliseconds from the assignment's arrival to the report's acknowledgement. */
      durationMs: number;
      /** Why the agent failed or stopped, if it did. */
      error: unknown;
      /**
       * Why the spans or the report did not reach the store, if they did not:
       * the slot is released all the same, and the attempt stays open until
       * the watchdog settles it (when the rollout has `timeout_seconds` or
       * `unresponsive_seconds`).
       */
      reportError: unknown;
    };

/** Settings of a runner. */
export interface RunnerOptions {
  workerId: string;
  /** Attempts run concurrently (the session's slots). */
  slots: number;
  agent: Agent;
  /** `service.name` of the spans' resource. */
  serviceName?: string;
  /** Receives every runner event (the runner itself never logs). */
  onEvent?: (event: RunnerEvent) => void;
  /** How often the session sends a worker heartbeat (ms); default 10 s. */
  heartbeatIntervalMs?: number;
  /**
   * How long a stopping runner lets attempts in progress finish (ms) before
   * it closes the session anyway, which aborts them; the server then treats
   * them as attempts of a lost worker. Default 30 s.
   */
  drainTimeoutMs?: number;
}

const DEFAULT_DRAIN_TIMEOUT_MS = 30_000;

/** Longest time an exported batch may wait in a processor (ms): a span is also an attempt heartbeat. */
const SPAN_EXPORT_DELAY_MS = 1_000;

/** Runs an agent on the assignments of one worker session. */
export class Runner {
  private readonly inFlight = new Set<Promise<void>>();
  private draining = false;

  constructor(
    private readonly client: StoreClient,
    private readonly exporter: SpanExporter,
    private readonly options: RunnerOptions,
  ) {}

  /**
   * Opens the session and runs attempts until `stop` aborts; then stops
   * taking new work (finished attempts keep their slots, so nothing new is
   * pushed), lets the attempts in progress finish (at most the drain
   * timeout) and closes the session. Resolves once the session is closed;
   * rejects when the session failed (for example UNAVAILABLE when the server
   * drains).
   */
  async run(stop: AbortSignal): Promise<void> {
    const session = await WorkerSession.open(this.client, {
      workerId: this.options.workerId,
      slots: this.options.slots,
      heartbeatStats: () => ({ running: this.inFlight.size }),
      ...(this.options.heartbeatIntervalMs === undefined
        ? {}
        : { heartbeatIntervalMs: this.options.heartbeatIntervalMs }),
    });
    try {
      for (const ref of session.adopted) {
        await this.abandon(ref.rolloutId, ref.attemptId, session.ownerEpoch);
        session.release(ref.rolloutId, ref.attemptId);
      }
    } catch (error) {
      await session.close();
      throw error;
    }
    const drain = (): void => void this.drain(session);
    if (stop.aborted) {
      drain();
    } else {
      stop.addEventListener("abort", drain, { once: true });
    }
    let failure: unknown;
    try {
      for await (const assignment of session) {
        const attempt: Promise<void> = this.runAttempt(session, assignment).finally(() => {
          this.inFlight.delete(attempt);
        });
        this.inFlight.add(attempt);
      }
    } catch (error) {
      failure = error;
    } finally {
      stop.removeEventListener("abort", drain);
    }
    // The session ended: attempts still in progress were aborted with it.
    await this.settle();
    if (failure !== undefined) {
      throw failure;
    }
  }

  /**
   * Settles an attempt adopted from a previous session of this worker id:
   * this process did not run it and cannot resume it, so an attempt still
   * `preparing` or `running` is reported failed (the rollout's
   * retry_condition decides about a retry). Attempts that already finished
   * (a drained runner keeps its finished slots) are left as they are. The
   * report presents the new session's owner epoch, which owns them now.
   */
  private async abandon(rolloutId: string, attemptId: string, ownerEpoch: bigint): Promise<void> {
    const latest = (await this.client.getLatestAttempt({ rolloutId })).attempt;
    const unfinished =
      latest?.attemptId === attemptId &&
      (latest.status === AttemptStatus.PREPARING || latest.status === AttemptStatus.RUNNING);
    if (unfinished) {
      await this.client.updateAttempt({
        rolloutId,
        attemptId,
        updateMask: { paths: ["status"] },
        status: AttemptStatus.FAILED,
        ownerEpoch,
      });
    }
  }

  /** Stops taking new work, lets the attempts in progress finish, then closes the session. */
  private async drain(session: WorkerSession): Promise<void> {
    this.draining = true;
    await this.settle();
    await session.close();
  }

  /** Waits until no attempt is in progress, at most the drain timeout. */
  private async settle(): Promise<void> {
    const deadline = Date.now() + (this.options.drainTimeoutMs ?? DEFAULT_DRAIN_TIMEOUT_MS);
    while (this.inFlight.size > 0 && Date.now() < deadline) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, deadline - Date.now());
      });
      await Promise.race([Promise.allSettled([...this.inFlight]), timeout]);
      clearTimeout(timer);
    }
  }

  private emit(event: RunnerEvent): void {
    this.options.onEvent?.(event);
  }

  private async runAttempt(session: WorkerSession, assignment: SessionAssignment): Promise<void> {
    const started = performance.now();
    const { rollout, attempt, signal } = assignment;
    const ids = { rolloutId: rollout.rolloutId, attemptId: attempt.attemptId };
    this.emit({ kind: "assigned", ...ids });

    const provider = new BasicTracerProvider({
      resource: resourceFromAttributes({
        "service.name": this.options.serviceName ?? "lightning-store-typescript-runner",
        [ROLLOUT_ID_ATTRIBUTE]: rollout.rolloutId,
        [ATTEMPT_ID_ATTRIBUTE]: attempt.attemptId,
      }),
      // Not shut down after the attempt: that would shut the shared exporter.
      spanProcessors: [
        new BatchSpanProcessor(this.exporter, { scheduledDelayMillis: SPAN_EXPORT_DELAY_MS }),
      ],
    });

    let outcome: AttemptOutcome;
    let reward: number | undefined;
    let error: unknown;
    try {
      reward = await this.options.agent(JSON.parse(rollout.inputJson), {
        rollout,
        attempt,
        resources: assignment.resources,
        tracer: provider.getTracer("lightning-store-example"),
        signal,
      });
      outcome = "succeeded";
    } catch (agentError) {
      error = agentError;
      outcome = !signal.aborted
        ? "failed"
        : signal.reason instanceof Revoked && signal.reason.reason === RevocationReason.CANCELLED
          ? "cancelled"
          : "revoked";
    }

    let reportError: unknown;
    try {
      await provider.forceFlush();
      if (outcome !== "revoked") {
        await this.client.updateAttempt({
          rolloutId: rollout.rolloutId,
          attemptId: attempt.attemptId,
          updateMask: { paths: ["status"] },
          status: outcome === "succeeded" ? AttemptStatus.SUCCEEDED : AttemptStatus.FAILED,
          // Fenced: refused (FAILED_PRECONDITION, in reportError) once another session owns the attempt.
          ownerEpoch: assignment.ownerEpoch,
        });
      }
    } catch (failure) {
      reportError = failure;
    }

    if (!this.draining) {
      session.release(rollout.rolloutId, attempt.attemptId);
    }
    this.emit({
      kind: "finished",
      ...ids,
      outcome,
      reward,
      durationMs: performance.now() - started,
      error,
      reportError,
    });
  }
}
