use clap::Parser;

/// jemalloc serves the binary's Rust allocations (feature `jemalloc`, on by
/// default): less server CPU per call than glibc's malloc and none of its
/// per-thread heap trimming (docs/performance.md#the-memory-allocator).
/// Set here, not in the library, so that embedders keep their own allocator.
/// Windows builds keep the system allocator (jemalloc does not build there).
#[cfg(all(feature = "jemalloc", not(windows)))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = lightning_store::cli::Cli::parse();
    match lightning_store::cli::run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            std::process::ExitCode::from(lightning_store::cli::exit_code(error.as_ref()))
        }
    }
}
