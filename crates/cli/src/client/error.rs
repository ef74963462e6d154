//! What a client command fails with, and the exit code each failure gives.

use lightning_store_proto::code_name;

/// Errors of client subcommands.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{0}")]
    Address(String),
    #[error(
        "cannot connect to {url}: {reason} (is `lightning-store serve` running there? \
         set --server or LIGHTNING_STORE_SERVER)"
    )]
    Connect { url: String, reason: String },
    #[error("{}: {}", code_name(.0.code()), .0.message())]
    Grpc(#[from] tonic::Status),
    #[error("cannot write the output: {0}")]
    Output(std::io::Error),
    #[error("{0}")]
    Other(String),
}

impl ClientError {
    /// The process exit code (the binary's `exit_code` maps every failure).
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Grpc(status) => crate::exit::GRPC_EXIT_BASE + status.code() as u8,
            Self::Connect { .. } => crate::exit::GRPC_EXIT_BASE + tonic::Code::Unavailable as u8,
            Self::Address(_) => crate::exit::USAGE_EXIT,
            Self::Output(_) | Self::Other(_) => crate::exit::FAILURE_EXIT,
        }
    }
}

pub type ClientResult<T = ()> = Result<T, ClientError>;
