//! The PostgreSQL backend: several stateless servers can share one
//! database. The operations are the shared SQL ones ([`super::sql`]); this
//! module owns what is PostgreSQL's: the pool and its timeouts, TLS,
//! migrations, error codes and the notifications that carry events between
//! servers.
//!
//! # Transactions
//! Every store transaction is a PostgreSQL transaction (`READ COMMITTED`)
//! that locks rows, not the store: the aggregate reads the engine writes
//! back are `SELECT … FOR UPDATE`, claims take the queue's head with
//! `FOR UPDATE SKIP LOCKED` (concurrent dequeues on any server claim
//! different rollouts without waiting for each other), and the watchdog
//! timer passes over rollouts other transactions hold, while a call's own
//! scan waits for them (in id order) so that it answers with their
//! verdicts ([`lightning_store_core::storage::Held`]). Updates of different
//! rollouts never wait for each other. Counters are sharded per connection,
//! and event numbers come from one counter row taken last (see
//! [`super::sql`]'s `apply` module for why they stay gapless and in commit
//! order).
//!
//! # Group commit
//! A transaction commits without waiting for the disk (the connections run
//! with `synchronous_commit = off`), which releases its row locks and the
//! event counter at once, and then, in the same round trip, waits for
//! durability with a one-statement transaction that commits with
//! `synchronous_commit = on` (`wait_durable`, migration 0008; `COMMIT` in
//! `postgres/conn.rs`): the call is acknowledged only once
//! its commit is on disk, as before, but the counter is no longer held
//! across an fsync, and the waits of concurrent transactions share flushes.
//! A transaction that read another's writes before they were durable waits
//! for them too (its own wait flushes everything logged before it), so no
//! acknowledged answer depends on a write a crash can lose; read-only
//! transactions, the event followers' included, wait the same way. (A/B
//! against a plain synchronous `COMMIT`:
//! docs/performance.md#row-locks-one-write-set-group-commit.) One wait
//! runs at a time per server and serves every transaction whose `COMMIT`
//! returned before it was sent (see `postgres/durability.rs`).
//!
//! # Statements parsed and planned once per connection
//! The statements of a transaction are prepared and cached per connection
//! (their texts do not depend on the number of rows: arrays and `unnest`),
//! and what travels with the `COMMIT` as a simple query is short calls of
//! routines (migration 0007), whose statements PL/pgSQL plans once per
//! connection.
//!
//! # Several servers
//! A transaction that records events also sends `NOTIFY lightning_store`
//! (delivered at commit). Every server listens on that channel and, for
//! each notification, publishes the events it has not seen yet, read from
//! the events table in sequence order, on its own event bus: waiting
//! dequeues, completion watches, subscriptions and the session dispatcher
//! of every server see what any server committed.
//!
//! # Drain deadline
//! [`lightning_store_core::storage::Store::interrupt`] cancels this server's running statements from a
//! fresh connection and fails its open transactions (see `postgres/interrupt.rs`).

/// The namespaces: a schema each, and the catalogue that lists them.
mod catalogue;
mod conn;
mod dialect;
mod durability;
mod interrupt;
mod rollbacks;
/// The store: its pool, the connections' settings, the migrations.
mod store;

pub use self::catalogue::PostgresCatalogue;
pub use self::store::{EVENTS_CHANNEL, OpenError, PostgresOptions, PostgresStore};
