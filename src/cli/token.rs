//! `lightning-store token`: makes a token and its line for the tokens
//! file, or the line of a token read from standard input. Only the line
//! (a hash) goes in the file; the token goes to its one client.

use std::io::Read;

use crate::server::ServeError;
use lightning_store_adapters::auth::policy::Role;
use lightning_store_adapters::auth::tokens::{LineScope, file_line};
use lightning_store_core::namespace::NamespaceName;

/// Subcommands of `token`.
#[derive(Debug, clap::Subcommand)]
pub enum TokenCommand {
    /// Generates a random token; prints it, then its tokens-file line.
    New(LineArgs),
    /// Prints the tokens-file line of the token read from standard input.
    Hash(LineArgs),
}

/// What a tokens-file line grants.
#[derive(Debug, clap::Args)]
pub struct LineArgs {
    /// Roles of the token: admin, algorithm, runner, ingest, read (repeatable).
    #[arg(long = "role", required = true, value_delimiter = ',')]
    pub roles: Vec<Role>,
    /// Binds the token to these worker ids (repeatable): a worker session,
    /// dequeue or attempt update for another worker id is refused.
    #[arg(long = "worker", value_delimiter = ',')]
    pub workers: Vec<String>,
    /// The namespaces the token may use (repeat or comma-separate; default:
    /// every one). Limited to one, the token's calls that name none work
    /// in it.
    #[arg(long = "namespace", value_delimiter = ',')]
    pub namespaces: Vec<String>,
    /// A label for logs and errors (never the token).
    #[arg(long)]
    pub name: Option<String>,
}

/// Runs a `token` subcommand.
pub fn run(command: TokenCommand) -> Result<(), ServeError> {
    match command {
        TokenCommand::New(args) => {
            let token = random_token()?;
            println!("{token}");
            println!("{}", line(&token, &args)?);
        }
        TokenCommand::Hash(args) => {
            let mut token = String::new();
            std::io::stdin().read_to_string(&mut token)?;
            let token = token.trim();
            if token.is_empty() {
                return Err("no token on standard input".into());
            }
            println!("{}", line(token, &args)?);
        }
    }
    Ok(())
}

fn line(token: &str, args: &LineArgs) -> Result<String, ServeError> {
    for value in args.workers.iter().chain(&args.name) {
        if value.is_empty() || value.contains(|c: char| c.is_whitespace() || c == '#' || c == ',') {
            return Err(
                format!("{value:?}: worker ids and names hold no spaces, commas or #").into(),
            );
        }
    }
    for namespace in &args.namespaces {
        NamespaceName::parse(namespace.as_str())?;
    }
    Ok(file_line(
        token,
        &args.roles,
        &LineScope {
            workers: &args.workers,
            namespaces: &args.namespaces,
            name: args.name.as_deref(),
        },
    ))
}

/// Returns 32 random bytes from the system's secure generator, as hex.
fn random_token() -> Result<String, ServeError> {
    let mut bytes = [0u8; 32];
    rustls::crypto::ring::default_provider()
        .secure_random
        .fill(&mut bytes)
        .map_err(|_| "the system's random generator failed")?;
    Ok(hex::encode(bytes))
}
