//! What event subscribers may cost the server: a cap on open subscriptions
//! and a byte budget per subscriber, whose queued events are dropped the
//! moment it is cut off (a client that stopped reading never frees them).
//! The budget counts each queued message's encoded size plus its place in
//! the queue, so what the queue holds of its own stays within it when the
//! messages are shared (the engine's events, see `api::streams`).

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, oneshot};
use tokio_stream::Stream;
use tonic::Status;
use tonic_types::{ErrorDetails, StatusExt as _};

/// The retry delay given to a subscriber refused for the cap.
const RETRY_DELAY: Duration = Duration::from_secs(1);

/// How many subscribers the server holds and how much each may lag.
#[derive(Debug, Clone)]
pub struct SubscriberLimits {
    /// One place per open subscription (`WatchEvents`,
    /// `WatchRolloutCompletions`), held by its pump.
    places: Arc<Semaphore>,
    max_subscribers: usize,
    /// Bytes of events queued for one subscriber that has not taken them
    /// (encoded, plus each one's place in the queue).
    pub buffer_bytes: usize,
    /// How long a subscriber's buffer may stay full before it is cut off.
    pub timeout: Duration,
}

impl SubscriberLimits {
    /// Allows `max_subscribers` open subscriptions of `buffer_bytes` each,
    /// cut off after `timeout` with a full buffer.
    pub fn new(max_subscribers: usize, buffer_bytes: usize, timeout: Duration) -> Self {
        Self {
            places: Arc::new(Semaphore::new(max_subscribers)),
            max_subscribers,
            buffer_bytes,
            timeout,
        }
    }

    /// Takes a place for a new subscription: RESOURCE_EXHAUSTED with a retry
    /// delay when every place is taken.
    pub fn admit(&self) -> Result<OwnedSemaphorePermit, Status> {
        self.places.clone().try_acquire_owned().map_err(|_| {
            Status::with_error_details(
                tonic::Code::ResourceExhausted,
                format!(
                    "the server holds its limit of {} subscriptions; retry later",
                    self.max_subscribers
                ),
                ErrorDetails::with_retry_info(Some(RETRY_DELAY)),
            )
        })
    }
}

/// The sending side of a subscription: a queue of messages bounded in
/// bytes, which the producer empties at once when it cuts the client off.
pub struct Outbox<T> {
    shared: Arc<Shared<T>>,
    /// Resolves when the response stream is dropped (the client went away).
    gone: oneshot::Sender<()>,
    capacity: usize,
}

struct Shared<T> {
    queue: parking_lot::Mutex<Queue<T>>,
    /// Wakes the producer: the stream took a message.
    taken: Notify,
}

struct Queue<T> {
    items: VecDeque<Queued<T>>,
    bytes: usize,
    /// The resume position of the last message the stream took.
    delivered: u64,
    /// The status that ends the stream once the queue is empty.
    end: Option<Status>,
    /// The producer is done (the stream ends after the queue).
    closed: bool,
    waker: Option<Waker>,
}

struct Queued<T> {
    message: T,
    /// What the message counts against the budget ([`Queued::cost`]).
    bytes: usize,
    /// Where a client that took this message resumes.
    resume_after: u64,
}

impl<T> Queued<T> {
    /// What a message of `encoded` bytes counts against the budget: its
    /// encoded size and its place in the queue.
    fn cost(encoded: usize) -> usize {
        encoded + std::mem::size_of::<Self>()
    }
}

impl<T: Send + 'static> Outbox<T> {
    /// Returns the outbox of at most `capacity` bytes and the response
    /// stream that drains it; `start` is where a client that took nothing
    /// resumes.
    pub fn new(capacity: usize, start: u64) -> (Self, OutboxStream<T>) {
        let shared = Arc::new(Shared {
            queue: parking_lot::Mutex::new(Queue {
                items: VecDeque::new(),
                bytes: 0,
                delivered: start,
                end: None,
                closed: false,
                waker: None,
            }),
            taken: Notify::new(),
        });
        let (gone, dropped) = oneshot::channel();
        let stream = OutboxStream {
            shared: shared.clone(),
            _dropped: dropped,
            done: false,
        };
        (
            Self {
                shared,
                gone,
                capacity,
            },
            stream,
        )
    }

    /// Queues a message of `bytes` bytes, after which the client resumes
    /// from `resume_after`.
    pub fn push(&self, message: T, bytes: usize, resume_after: u64) {
        let bytes = Queued::<T>::cost(bytes);
        let mut queue = self.shared.queue.lock();
        queue.items.push_back(Queued {
            message,
            bytes,
            resume_after,
        });
        queue.bytes += bytes;
        wake(&mut queue);
    }

    /// Ends the stream with `status` after the queued messages.
    pub fn finish(&self, status: Status) {
        let mut queue = self.shared.queue.lock();
        queue.end = Some(status);
        wake(&mut queue);
    }

    /// Cuts the client off: drops every queued message at once and ends the
    /// stream with the status `ending` makes of the position the client
    /// resumes from (the last message it took).
    pub fn cut_off(&self, ending: impl FnOnce(u64) -> Status) {
        let mut queue = self.shared.queue.lock();
        queue.items = VecDeque::new();
        queue.bytes = 0;
        queue.end = Some(ending(queue.delivered));
        wake(&mut queue);
    }

    /// Waits until a message of `bytes` fits in the budget (one always fits
    /// in an empty queue); returns false when that did not happen within
    /// `timeout`.
    pub async fn wait_for_room(&self, bytes: usize, timeout: Duration) -> bool {
        let bytes = Queued::<T>::cost(bytes);
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let taken = self.shared.taken.notified();
            {
                let queue = self.shared.queue.lock();
                if queue.items.is_empty() || queue.bytes + bytes <= self.capacity {
                    return true;
                }
            }
            if tokio::time::timeout_at(deadline, taken).await.is_err() {
                return false;
            }
        }
    }

    /// Resolves when the client dropped the response stream.
    pub async fn gone(&mut self) {
        self.gone.closed().await;
    }
}

impl<T> Drop for Outbox<T> {
    fn drop(&mut self) {
        let mut queue = self.shared.queue.lock();
        queue.closed = true;
        wake(&mut queue);
    }
}

fn wake<T>(queue: &mut Queue<T>) {
    if let Some(waker) = queue.waker.take() {
        waker.wake();
    }
}

/// The response stream of an [`Outbox`]: its messages in order, then the
/// status that ended it, if any.
pub struct OutboxStream<T> {
    shared: Arc<Shared<T>>,
    _dropped: oneshot::Receiver<()>,
    done: bool,
}

impl<T> Stream for OutboxStream<T> {
    type Item = Result<T, Status>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        let mut queue = this.shared.queue.lock();
        if let Some(queued) = queue.items.pop_front() {
            queue.bytes -= queued.bytes;
            queue.delivered = queued.resume_after;
            drop(queue);
            this.shared.taken.notify_one();
            return Poll::Ready(Some(Ok(queued.message)));
        }
        if let Some(status) = queue.end.take() {
            this.done = true;
            return Poll::Ready(Some(Err(status)));
        }
        if queue.closed {
            this.done = true;
            return Poll::Ready(None);
        }
        queue.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Paused time: a full queue's wait ends at its deadline at once.
    #[tokio::test(start_paused = true)]
    async fn each_message_counts_its_place_in_the_queue() {
        let capacity = 4096;
        let (outbox, _stream) = Outbox::<u64>::new(capacity, 0);
        let entry = std::mem::size_of::<Queued<u64>>();
        // Empty messages would fit without end if only encoded bytes
        // counted (bounded here at ten times the expected count).
        let mut queued = 0;
        while queued < 10 * capacity / entry
            && outbox.wait_for_room(0, Duration::from_millis(1)).await
        {
            outbox.push(0, 0, 0);
            queued += 1;
        }
        assert_eq!(queued, capacity / entry);
    }
}
