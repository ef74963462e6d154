/**
 * An unbounded first-in first-out queue read as an async iterable by one
 * consumer: the request side of a client stream, or a feed of received
 * messages. `end()` finishes the iteration once the queued items are read;
 * `end(error)` makes it throw `error` after them.
 */
export class AsyncQueue<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private waiter: (() => void) | undefined;
  private ended = false;
  private failure: { error: unknown } | undefined;

  /** Appends an item; items pushed after `end()` are dropped. */
  push(item: T): void {
    if (this.ended) {
      return;
    }
    this.items.push(item);
    this.wake();
  }

  /** Ends the queue, with an error for the consumer when given. */
  end(error?: unknown): void {
    if (this.ended) {
      return;
    }
    this.ended = true;
    if (error !== undefined) {
      this.failure = { error };
    }
    this.wake();
  }

  /** Whether `end()` was called. */
  get isEnded(): boolean {
    return this.ended;
  }

  private wake(): void {
    const waiter = this.waiter;
    this.waiter = undefined;
    waiter?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      if (this.items.length > 0) {
        yield this.items.shift() as T;
        continue;
      }
      if (this.ended) {
        if (this.failure !== undefined) {
          throw this.failure.error;
        }
        return;
      }
      await new Promise<void>((resolve) => {
        this.waiter = resolve;
      });
    }
  }
}
