use clap::Parser;

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
