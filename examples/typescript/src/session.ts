// A typed wrapper around the bidirectional `WorkerSession` stream: open it,
// receive assignments as an async iterable, learn about revocations through
// each assignment's AbortSignal, release slots (the session's credits) and
// keep the worker's heartbeat fresh. Writes for the session's attempts
// present its owner epoch (fencing: see docs/sessions.md).

import type { MessageInitShape } from "@bufbuild/protobuf";

import type { StoreClient } from "./connection.js";
import { AsyncQueue } from "./queue.js";
import {
  RevocationReason,
  type RolloutAttemptRef,
  type WorkerSessionRequestSchema,
  type WorkerSessionResponse,
} from "./gen/lightningstore/v1/store_pb.js";
import type { Attempt, ResourcesUpdate, Rollout } from "./gen/lightningstore/v1/types_pb.js";

type SessionRequest = MessageInitShape<typeof WorkerSessionRequestSchema>;

/** Why an assignment's signal was aborted: the server revoked its attempt. */
export class Revoked extends Error {
  constructor(
    readonly rolloutId: string,
    readonly attemptId: string,
    readonly reason: RevocationReason,
  ) {
    super(`attempt ${attemptId} of ${rolloutId} revoked: ${RevocationReason[reason]}`);
    this.name = "Revoked";
  }
}

/** Why an assignment's signal was aborted: the session's stream ended first. */
export class SessionEnded extends Error {
  constructor(cause: unknown) {
    super(`worker session ended: ${String(cause)}`, { cause });
    this.name = "SessionEnded";
  }
}

/** A rollout the server pushed into one of the session's slots. */
export interface SessionAssignment {
  /** The claimed rollout (status `preparing`). */
  readonly rollout: Rollout;
  /** Its new attempt, created for this worker. */
  readonly attempt: Attempt;
  /** The resources snapshot the rollout names, when it exists. */
  readonly resources: ResourcesUpdate | undefined;
  /**
   * The owner epoch of the session that owns the attempt: present it as
   * `ownerEpoch` in UpdateAttempt and AddSpans; FAILED_PRECONDITION then
   * means another owner has the attempt now.
   */
  readonly ownerEpoch: bigint;
  /**
   * Aborted with a `Revoked` reason when the rollout is cancelled or the
   * watchdog times the attempt out or finds it unresponsive, and with
   * `SessionEnded` when the stream ends first. Work should stop either way.
   */
  readonly signal: AbortSignal;
}

/** Settings of a session. */
export interface SessionOptions {
  /** The worker's id, e.g. `Worker-0`; one open session per worker id. */
  workerId: string;
  /** How many assignments the session holds at once (1 to 1024). */
  slots: number;
  /** How often to send a heartbeat while the session is open (ms). */
  heartbeatIntervalMs?: number;
  /** Statistics attached to each heartbeat, as a JSON-serialisable value. */
  heartbeatStats?: () => unknown;
}

const DEFAULT_HEARTBEAT_INTERVAL_MS = 10_000;

function refKey(rolloutId: string, attemptId: string): string {
  return `${rolloutId}/${attemptId}`;
}

/**
 * An open worker session. Slots are credits: the server pushes an assignment
 * only into a free slot, and a slot frees when the runner calls `release`
 * (after finishing the attempt, or after a revocation). Iterate the session
 * to receive assignments; the iteration ends when the session is closed and
 * throws when the stream fails (for example UNAVAILABLE when the server
 * drains: open a new session, which adopts the attempts still held).
 */
export class WorkerSession implements AsyncIterable<SessionAssignment> {
  private readonly outbox = new AsyncQueue<SessionRequest>();
  private readonly inbox = new AsyncQueue<SessionAssignment>();
  private readonly held = new Map<string, AbortController>();
  private readonly abort = new AbortController();
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private pump: Promise<void> = Promise.resolve();
  private adoptedRefs: RolloutAttemptRef[] = [];
  private epoch = 0n;

  private constructor(private readonly client: StoreClient) {}

  /** Opens a session and resolves once the server confirmed it. */
  static async open(client: StoreClient, options: SessionOptions): Promise<WorkerSession> {
    const session = new WorkerSession(client);
    await session.start(options);
    return session;
  }

  /**
   * Attempts of this worker adopted from its previous session: they hold
   * slots until released, and nobody else runs them, so run each (read it
   * with GetRollout) or report it failed, presenting `ownerEpoch`.
   */
  get adopted(): readonly RolloutAttemptRef[] {
    return this.adoptedRefs;
  }

  /** This session's owner epoch (new for every session, also of the same worker). */
  get ownerEpoch(): bigint {
    return this.epoch;
  }

  private async start(options: SessionOptions): Promise<void> {
    const responses = this.client
      .workerSession(this.outbox, { signal: this.abort.signal })
      [Symbol.asyncIterator]();
    this.outbox.push({
      message: { case: "open", value: { workerId: options.workerId, slots: BigInt(options.slots) } },
    });
    let first: IteratorResult<WorkerSessionResponse>;
    try {
      first = await responses.next();
    } catch (error) {
      this.outbox.end();
      throw error;
    }
    if (first.done === true || first.value.message.case !== "opened") {
      this.outbox.end();
      this.abort.abort();
      throw new Error("the server did not confirm the worker session");
    }
    this.adoptedRefs = first.value.message.value.adopted;
    this.epoch = first.value.message.value.ownerEpoch;
    for (const ref of this.adoptedRefs) {
      this.held.set(refKey(ref.rolloutId, ref.attemptId), new AbortController());
    }
    const stats = options.heartbeatStats;
    this.heartbeatTimer = setInterval(
      () => this.heartbeat(stats?.()),
      options.heartbeatIntervalMs ?? DEFAULT_HEARTBEAT_INTERVAL_MS,
    );
    this.heartbeatTimer.unref();
    this.pump = this.receive(responses);
  }

  private async receive(responses: AsyncIterator<WorkerSessionResponse>): Promise<void> {
    let failure: unknown;
    try {
      for (;;) {
        const next = await responses.next();
        if (next.done === true) {
          break;
        }
        const message = next.value.message;
        if (message.case === "assignment") {
          const rollout = message.value.rollout;
          const attempt = rollout?.attempt;
          if (rollout === undefined || attempt === undefined) {
            throw new Error("an assignment without a rollout and attempt");
          }
          const controller = new AbortController();
          this.held.set(refKey(rollout.rolloutId, attempt.attemptId), controller);
          this.inbox.push({
            rollout,
            attempt,
            resources: message.value.resources,
            ownerEpoch: message.value.ownerEpoch,
            signal: controller.signal,
          });
        } else if (message.case === "revoked") {
          const { rolloutId, attemptId, reason } = message.value;
          // A revocation may cross a release on the wire: nothing to stop then.
          this.held
            .get(refKey(rolloutId, attemptId))
            ?.abort(new Revoked(rolloutId, attemptId, reason));
        }
      }
    } catch (error) {
      failure = error;
    } finally {
      this.stopHeartbeats();
      this.outbox.end();
      for (const controller of this.held.values()) {
        controller.abort(new SessionEnded(failure ?? "closed"));
      }
      // A stream cancelled by close() is not a failure.
      this.inbox.end(this.abort.signal.aborted ? undefined : failure);
    }
  }

  /** Frees the slot of an attempt, so the server may push the next assignment. */
  release(rolloutId: string, attemptId: string): void {
    if (this.held.delete(refKey(rolloutId, attemptId))) {
      this.outbox.push({ message: { case: "release", value: { rolloutId, attemptId } } });
    }
  }

  /** Sends a heartbeat now, optionally with statistics. */
  heartbeat(stats?: unknown): void {
    const json = stats === undefined ? "" : JSON.stringify(stats);
    this.outbox.push({ message: { case: "heartbeat", value: { heartbeatStatsJson: json } } });
  }

  private stopHeartbeats(): void {
    if (this.heartbeatTimer !== undefined) {
      clearInterval(this.heartbeatTimer);
      this.heartbeatTimer = undefined;
    }
  }

  /**
   * Closes the session: ends the runner's side of the stream and waits until
   * the server ended its side, or cancels the stream after `timeoutMs`. The
   * server marks the worker `idle` (`busy` while it holds unfinished
   * attempts, which become `unresponsive` after its grace period unless the
   * worker opens a new session); a broken stream leaves it `lost`.
   */
  async close(timeoutMs = 5_000): Promise<void> {
    this.stopHeartbeats();
    this.outbox.end();
    const timer = setTimeout(() => this.abort.abort(), timeoutMs);
    try {
      await this.pump;
    } finally {
      clearTimeout(timer);
    }
  }

  [Symbol.asyncIterator](): AsyncIterator<SessionAssignment> {
    return this.inbox[Symbol.asyncIterator]();
  }
}
