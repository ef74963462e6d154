//! The command line's client side: the commands that look inside (and drive)
//! a running store ([`client`]) and the benchmark tool ([`bench`]), over one
//! way of reaching a server ([`connection`]). They speak only the public
//! contract (`lightning-store-proto`): this crate depends on no server layer,
//! which `cargo metadata` shows and tests/integration/architecture.rs checks.

pub mod bench;
pub mod client;
pub mod connection;

/// Exit code of a failure that is not a call's (a server that cannot start,
/// bad output, a benchmark that failed).
pub const FAILURE_EXIT: u8 = 1;
/// Exit code of a bad command line (clap's, also for a bad `--server`).
pub const USAGE_EXIT: u8 = 2;
/// A call that failed with gRPC status code `c` exits with `64 + c`, as
/// grpcurl does (for example 69 for NOT_FOUND); a server that cannot be
/// reached exits as UNAVAILABLE (78).
pub const GRPC_EXIT_BASE: u8 = 64;
