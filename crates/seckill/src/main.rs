//! `seckill`: the flash-sale voucher shop (`serve`), its load generator
//! (`load`) and the one-command demo (`demo`).

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "seckill",
    version,
    about = "Flash-sale voucher shop on redlatch"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    // Boxed: its flags outweigh the other commands' arguments.
    /// Run the HTTP service.
    // Boxed: its many flags would make every variant as large.
    Serve(Box<seckill::serve::ServeArgs>),
    /// Send N users x K concurrent clicks at one or more instances, then verify.
    Load(seckill::load::LoadArgs),
    /// Start Redis, SQLite and two instances, run every strategy, print the table.
    Demo(seckill::demo::DemoArgs),
}

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("seckill: cannot start the async runtime: {error}");
            return std::process::ExitCode::from(70);
        }
    };
    let outcome = runtime.block_on(async move {
        match cli.command {
            Command::Serve(args) => seckill::serve::run(*args).await,
            Command::Load(args) => seckill::load::run(args).await,
            Command::Demo(args) => seckill::demo::run(args).await,
        }
    });
    match outcome {
        Ok(code) => std::process::ExitCode::from(code),
        Err(error) => {
            eprintln!("seckill: {error}");
            std::process::ExitCode::from(1)
        }
    }
}
