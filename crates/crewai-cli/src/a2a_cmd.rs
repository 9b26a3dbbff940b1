//! `crewai a2a serve`: the project's crew as an A2A agent (protocol 0.3.0, see crewai-a2a):
//! the card at `/.well-known/agent-card.json` with a skill per task, JSON-RPC at `/`. Each A2A
//! task is one journaled kickoff through the run path of `crewai run` (its run id is the task
//! id: `crewai runs` lists it), cancelled by `tasks/cancel`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, Subcommand};
use crewai_a2a::server::{A2aServer, CrewRun, CrewRunner, InputSpec, RunFailure};
use crewai_a2a::types::{AgentCapabilities, AgentCard, AgentSkill};
use crewai_core::crew::CrewError;
use crewai_core::events::EventKind;
use crewai_core::interpolate::Inputs;
use crewai_project::Project;
use futures::future::BoxFuture;

use crate::cli::ProjectArgs;
use crate::outcome::Failure;
use crate::run::{JournaledRun, Start, load, load_env, registry_for};

#[derive(Debug, Subcommand)]
pub enum A2aAction {
    /// Serve the project's crew as an A2A agent: the agent card, message/send, message/stream
    /// (SSE), tasks/get and tasks/cancel over JSON-RPC.
    Serve(ServeArgs),
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The project folder.
    #[arg(long, short = 'p', default_value = ".")]
    pub project: PathBuf,
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// The address to listen on (default 127.0.0.1). Any other than loopback needs a token.
    #[arg(long)]
    pub host: Option<IpAddr>,
    /// Callers must send `Authorization: Bearer <TOKEN>`.
    #[arg(
        long,
        env = "CREWAI_A2A_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub token: Option<String>,
    /// The URL the agent card gives for the JSON-RPC endpoint (default `http://HOST:PORT/`),
    /// for a server behind a proxy.
    #[arg(long, value_name = "URL")]
    pub public_url: Option<String>,
    /// Requests larger than this many bytes are refused (413).
    #[arg(long, default_value_t = crewai_a2a::server::DEFAULT_MAX_REQUEST_BYTES)]
    pub max_request_bytes: usize,
    /// Use this model for every agent (and the manager), e.g. `openai/gpt-4o-mini`.
    #[arg(long)]
    pub llm: Option<String>,
    /// Print every step of the agents.
    #[arg(long, short = 'v')]
    pub verbose: bool,
    /// The Python that runs the project's own tools (`tools/*.py`).
    #[arg(long, value_name = "PATH")]
    pub python: Option<PathBuf>,
}

pub async fn a2a(action: A2aAction) -> Result<(), Failure> {
    match action {
        A2aAction::Serve(args) => serve(args).await,
    }
}

async fn serve(args: ServeArgs) -> Result<(), Failure> {
    load_env(&args.project)?;
    let project = load(&args.project)?;
    let host = args.host.unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
    let settings = crate::bearer::TokenSettings {
        token: args.token.as_deref(),
        token_file: None,
        how_to_set: "CREWAI_A2A_TOKEN or --token",
    };
    let token = crate::bearer::token_for(&settings, host)?;
    let listener = tokio::net::TcpListener::bind(SocketAddr::new(host, args.port))
        .await
        .with_context(|| format!("cannot listen on {host}:{}", args.port))
        .map_err(Failure::config)?;
    let bound = listener
        .local_addr()
        .context("cannot read the address listened on")
        .map_err(Failure::run)?;
    let public_url = args
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{bound}/"));
    let card = agent_card(&project, &public_url);
    let inputs = InputSpec {
        names: project.required_inputs(),
        defaults: project.default_inputs().into_iter().collect(),
    };
    let common = ProjectArgs::served(
        args.project.clone(),
        args.llm.clone(),
        args.verbose,
        args.python.clone(),
    );
    let runner = ProjectRunner {
        project: Arc::new(project),
        common,
    };
    let mut server =
        A2aServer::new(card, inputs, Arc::new(runner)).max_request_bytes(args.max_request_bytes);
    if let Some(token) = token {
        server = server.bearer_token(token);
    }
    // The address line is what scripts wait for: its format is kept stable.
    eprintln!(
        "A2A agent listening on http://{bound}/ (card: http://{bound}{})",
        crewai_a2a::AGENT_CARD_PATH
    );
    axum::serve(listener, server.router())
        .with_graceful_shutdown(async {
            // An error here means no signal handler could be installed: serve until killed.
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        })
        .await
        .context("the A2A server stopped")
        .map_err(Failure::run)
}

/// The card: the crew's name, a description from its agents, a skill per task.
fn agent_card(project: &Project, url: &str) -> AgentCard {
    let roles: Vec<String> = project
        .agents
        .iter()
        .map(|agent| agent.spec.role.clone().unwrap_or_else(|| agent.key.clone()))
        .collect();
    let skills = project
        .tasks
        .iter()
        .map(|task| AgentSkill {
            id: task.key.clone(),
            name: task.name().to_string(),
            description: task
                .spec
                .description
                .clone()
                .unwrap_or_else(|| task.name().to_string()),
            tags: task.spec.agent.iter().cloned().collect(),
            examples: None,
            input_modes: None,
            output_modes: None,
        })
        .collect();
    let inputs = project.required_inputs();
    let input_note = match inputs.as_slice() {
        [] => String::new(),
        [only] => format!(" The message's text is its input '{only}'."),
        many => format!(
            " Its inputs ({}) go in a data part of the message, as one object.",
            many.join(", ")
        ),
    };
    AgentCard {
        protocol_version: Some(crewai_a2a::PROTOCOL_VERSION.to_string()),
        name: project.name(),
        description: format!(
            "A CrewAI crew ({}) run by crewai-rs.{input_note}",
            roles.join(", ")
        ),
        url: Some(url.to_string()),
        preferred_transport: Some("JSONRPC".into()),
        additional_interfaces: None,
        supported_interfaces: None,
        version: env!("CARGO_PKG_VERSION").to_string(),
        provider: None,
        documentation_url: None,
        icon_url: None,
        capabilities: AgentCapabilities {
            streaming: Some(true),
            push_notifications: Some(false),
            state_transition_history: Some(false),
            extensions: None,
        },
        security_schemes: None,
        security: None,
        default_input_modes: vec!["text/plain".into(), "application/json".into()],
        default_output_modes: vec!["text/plain".into()],
        skills,
        supports_authenticated_extended_card: None,
        signatures: None,
    }
}

/// Runs a task's kickoff as `crewai run` does, journaled under the task's id.
struct ProjectRunner {
    project: Arc<Project>,
    common: ProjectArgs,
}

impl CrewRunner for ProjectRunner {
    fn run(&self, run: CrewRun) -> BoxFuture<'static, Result<String, RunFailure>> {
        let project = Arc::clone(&self.project);
        let common = self.common.clone();
        Box::pin(async move {
            let inputs: Inputs = run.inputs.into_iter().collect();
            let registry = registry_for(&project, &common.project);
            let prepared = JournaledRun::prepare(
                &project,
                &inputs,
                registry,
                &common,
                run.task_id.clone(),
                false,
            )
            .await
            .map_err(|failure| RunFailure::Failed(failure.render()))?;
            let progress = run.progress.clone();
            prepared.bus().subscribe(move |event| {
                if let EventKind::TaskStarted {
                    task_name,
                    agent_role,
                    ..
                } = &event.kind
                {
                    progress.working(format!(
                        "task '{}' started ({})",
                        task_name.as_deref().unwrap_or("unnamed"),
                        agent_role.as_deref().unwrap_or("no agent")
                    ));
                }
            });
            let result = prepared
                .execute(
                    Start::Kickoff(project.effective_inputs(&inputs)),
                    run.cancellation.clone(),
                )
                .await;
            prepared.finish().await;
            match result {
                Ok(output) => Ok(output.raw),
                Err(error @ CrewError::Cancelled { .. }) => Err(RunFailure::Cancelled(format!(
                    "{error} (run {}; resume it with `crewai run --resume {}`)",
                    run.task_id, run.task_id
                ))),
                Err(error) => Err(RunFailure::Failed(crewai_llm::error_chain(&error))),
            }
        })
    }
}
