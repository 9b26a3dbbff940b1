//! `crewai`: runs CrewAI projects (YAML or JSON layout, or a scaffolded Rust project), scaffolds
//! new ones, and reads the kickoff outputs a project's `.crewai/` store keeps.
//!
//! Exit codes: 0 success, 1 the run failed, 2 usage or configuration error, 130 interrupted
//! (Ctrl-C; the run is journaled as cancelled and can be resumed).

mod a2a_cmd;
mod bearer;
mod chat_cmd;
mod cli;
#[cfg(feature = "sandbox")]
mod code_tool;
mod create;
mod create_classic;
mod create_tool;
mod flow_cmd;
mod inputs;
mod knowledge_cmd;
mod mcp_cmd;
mod memory_cmd;
mod models;
mod observe;
mod outcome;
mod progress;
mod python_tools;
mod run;
mod serve_cmd;
mod stored;
mod test_cmd;
mod traces;
mod train_cmd;

use std::io::IsTerminal;

use clap::{CommandFactory, Parser};

use crate::cli::{Cli, ColorChoice, Command, CreateKind, ModelsAction};
use crate::outcome::Failure;

fn main() -> std::process::ExitCode {
    let cli = Cli::parse_from(std::env::args_os().map(crewai_style_flags));
    if let Err(failure) = show_library_messages(cli.log.as_deref(), colour(cli.color)) {
        eprintln!("{}", failure.render());
        return std::process::ExitCode::from(failure.code);
    }
    let result = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(dispatch(cli)),
        Err(err) => Err(Failure::run(
            anyhow::Error::new(err).context("cannot start the async runtime"),
        )),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("{}", failure.render());
            std::process::ExitCode::from(failure.code)
        }
    }
}

/// Whether stderr gets colour: `--color`, else `NO_COLOR` (any value turns it off), else
/// whether stderr is a terminal.
fn colour(choice: ColorChoice) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                && std::io::stderr().is_terminal()
        }
    }
}

/// Sends the libraries' `tracing` messages (retries, fallbacks, unpriced models, deprecated
/// fields) to stderr: `--log FILTER`, else `RUST_LOG`, else warnings and errors.
fn show_library_messages(filter: Option<&str>, ansi: bool) -> Result<(), Failure> {
    use tracing_subscriber::EnvFilter;
    let filter = match filter {
        Some(given) => EnvFilter::try_new(given).map_err(|error| {
            Failure::config(anyhow::anyhow!(
                "--log '{given}' is not a level (error, warn, info, debug, trace) or a RUST_LOG filter: {error}"
            ))
        })?,
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .with_target(false)
        .without_time()
        .try_init()
        .map_err(|error| {
            Failure::run(anyhow::anyhow!(
                "cannot show the libraries' messages: {error}"
            ))
        })
}

/// CrewAI spells two `reset-memories` flags as multi-letter short options (`-kn`, `-akn`),
/// which clap would read as bundled single letters.
fn crewai_style_flags(arg: std::ffi::OsString) -> std::ffi::OsString {
    match arg.to_str() {
        Some("-kn") => "--knowledge".into(),
        Some("-akn") => "--agent-knowledge".into(),
        _ => arg,
    }
}

async fn dispatch(cli: Cli) -> Result<(), Failure> {
    match cli.command {
        Command::Run(args) => run::run(args).await,
        Command::Create {
            kind:
                CreateKind::Crew {
                    name,
                    output_dir,
                    classic,
                },
        } => match classic {
            true => create_classic::create_classic_crew(&name, output_dir.as_deref()),
            false => create::create_crew(&name, output_dir.as_deref()),
        },
        Command::Create {
            kind: CreateKind::Flow { name },
        } => flow_cmd::create_flow(&name),
        Command::Create {
            kind:
                CreateKind::Tool {
                    name,
                    output_dir,
                    rust,
                },
        } => create_tool::create_tool(&name, output_dir.as_deref(), rust),
        Command::Flow { action } => flow_cmd::flow(action).await,
        Command::A2a { action } => a2a_cmd::a2a(action).await,
        Command::LogTasksOutputs { project, json } => {
            stored::log_tasks_outputs(&project, json).await
        }
        Command::Replay(args) => run::replay(args).await,
        Command::Runs(args) => stored::runs(&args).await,
        Command::ResetMemories(args) => stored::reset_memories(&args).await,
        Command::Memory(args) => memory_cmd::memory(&args).await,
        Command::Version { tools } => {
            println!("crewai {}", env!("CARGO_PKG_VERSION"));
            if tools {
                println!(
                    "built-in tools: {}",
                    crewai_project::BUILTIN_TOOLS.join(", ")
                );
            }
            Ok(())
        }
        Command::Chat(args) => chat_cmd::chat(args).await,
        Command::Traces(args) => traces::traces(&args),
        Command::Models {
            action: ModelsAction::Pull { name },
        } => models::pull(name.as_deref()).await,
        Command::Models {
            action: ModelsAction::List { json },
        } => models::list(json),
        Command::Train(args) => train_cmd::train(args).await,
        Command::Test(args) => test_cmd::test(args).await,
        Command::Mcp { action } => mcp_cmd::mcp(action).await,
        Command::Serve(args) => serve_cmd::serve(args).await,
        Command::Worker(args) => serve_cmd::worker(args).await,
        Command::Completions { shell } => {
            let mut command = Cli::command();
            clap_complete::generate(shell, &mut command, "crewai", &mut std::io::stdout());
            Ok(())
        }
    }
}
