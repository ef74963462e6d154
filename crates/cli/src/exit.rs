//! The process exit codes of the command line, shared by the client
//! commands and the server binary's `exit_code`.

/// Exit code of a failure that is not a call's (a server that cannot start,
/// bad output, a benchmark that failed).
pub const FAILURE_EXIT: u8 = 1;
/// Exit code of a bad command line (clap's, also for a bad `--server`).
pub const USAGE_EXIT: u8 = 2;
/// A call that failed with gRPC status code `c` exits with `64 + c`, as
/// grpcurl does (for example 69 for NOT_FOUND); a server that cannot be
/// reached exits as UNAVAILABLE (78).
pub const GRPC_EXIT_BASE: u8 = 64;
