//! `crewai serve` (the kickoff API with its own workers) and `crewai worker` (workers alone),
//! on crewai-server; each kickoff runs through the journaled run path of `crewai run` under the
//! kickoff's id, so a kickoff re-claimed after its worker died resumes from the journal.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow};
use clap::Args;
use crewai_core::crew::CrewError;
use crewai_core::events::EventKind;
use crewai_core::interpolate::Inputs;
use crewai_core::store::RunJournal;
use crewai_memory::MemoryStore;
use crewai_project::Project;
use crewai_server::{
    AttemptEnd, KickoffApi, KickoffJob, KickoffQueue, KickoffRunner, QueueConfig, SqliteQueue,
    WorkerConfig,
};
use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::cli::ProjectArgs;
use crate::outcome::Failure;
use crate::run::{JournaledRun, Start, load, load_env, registry_for};

/// What `serve` and `worker` share: the project, the queue, and how its kickoffs are run.
#[derive(Debug, Clone, Args)]
pub struct QueueArgs {
    /// The project folder.
    #[arg(long, short = 'p', default_value = ".")]
    pub project: PathBuf,
    /// The queue's database: `postgres://…` (the queue, the run journal and memory, shared by
    /// processes on any machine), a SQLite file path or `sqlite://PATH` (default
    /// `<project>/.crewai/queue.db`).
    #[arg(long, env = "CREWAI_DATABASE_URL", value_name = "URL")]
    pub database: Option<String>,
    /// A claimed kickoff goes back to the queue this many seconds after its worker's last
    /// heartbeat.
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    pub lease_seconds: u64,
    /// Attempts before a kickoff failing on infrastructure (not on a task's error) is
    /// dead-lettered.
    #[arg(long, default_value_t = 3)]
    pub max_attempts: u32,
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

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub queue: QueueArgs,
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// The address to listen on (default 127.0.0.1). Any other than loopback needs a token.
    #[arg(long)]
    pub host: Option<IpAddr>,
    /// Callers must send `Authorization: Bearer <TOKEN>`.
    #[arg(
        long,
        env = "CREWAI_SERVE_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN",
        conflicts_with = "token_file"
    )]
    pub token: Option<String>,
    /// Read the token from this file (its first line).
    #[arg(long, env = "CREWAI_SERVE_TOKEN_FILE", value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Kickoffs this process runs at once (0: the API only; `crewai worker`s run them).
    #[arg(long, default_value_t = 4)]
    pub workers: usize,
    /// Requests larger than this many bytes are refused (413).
    #[arg(long, default_value_t = crewai_server::DEFAULT_MAX_REQUEST_BYTES)]
    pub max_request_bytes: usize,
}

#[derive(Debug, Args)]
pub struct WorkerArgs {
    #[command(flatten)]
    pub queue: QueueArgs,
    /// Kickoffs this worker runs at once.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
}

/// Where kickoffs are queued and their runs journaled.
struct Database {
    queue: Arc<dyn KickoffQueue>,
    /// The run journal, when it is not the project's own store (Postgres: shared by every
    /// worker on every machine).
    journal: Option<Arc<dyn RunJournal>>,
    /// The crews' memory, when it is not the project's own file (Postgres with pgvector).
    memory: Option<Arc<dyn MemoryStore>>,
}

fn queue_config(args: &QueueArgs) -> QueueConfig {
    QueueConfig {
        lease: Duration::from_secs(args.lease_seconds.max(1)),
        max_attempts: args.max_attempts.max(1),
        ..QueueConfig::default()
    }
}

/// The database `--database` names: a SQLite file (the queue only; runs are journaled in the
/// project's store and memory kept in its file), or Postgres (the queue, the run journal and,
/// for a project with memory, memory: pgvector is needed only then).
async fn open_database(args: &QueueArgs, with_memory: bool) -> Result<Database, Failure> {
    let path = match args
        .database
        .as_deref()
        .map(str::trim)
        .filter(|d| !d.is_empty())
    {
        None => args.project.join(crewai_store::STORE_DIR).join("queue.db"),
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            return open_postgres(url, args, with_memory).await;
        }
        Some(url) => match url.strip_prefix("sqlite://") {
            Some(path) => PathBuf::from(path),
            None if url.contains("://") => {
                return Err(Failure::config(anyhow!(
                    "--database {}: not a database this build knows; give postgres://…, a SQLite file path or sqlite://PATH",
                    crewai_server::redact_url(url)
                )));
            }
            None => PathBuf::from(url),
        },
    };
    let queue = SqliteQueue::open(&path, queue_config(args))
        .map_err(|error| Failure::config(anyhow!(error)))?;
    Ok(Database {
        queue: Arc::new(queue),
        journal: None,
        memory: None,
    })
}

#[cfg(feature = "postgres")]
async fn open_postgres(
    url: &str,
    args: &QueueArgs,
    with_memory: bool,
) -> Result<Database, Failure> {
    use crewai_server::{PgJournal, PgPoolConfig, PgQueue, WorkerIdentity};
    let location = crewai_server::redact_url(url);
    let pool_config = PgPoolConfig::default();
    let opened = async {
        let pool = crewai_server::connect_pool(url, &pool_config)?;
        let queue = PgQueue::open(
            pool.clone(),
            location.clone(),
            queue_config(args),
            pool_config.call_timeout,
        )
        .await?;
        let memory: Option<Arc<dyn MemoryStore>> = if with_memory {
            let store = crewai_memory::PgMemoryStore::with_pool(pool.clone(), location.clone())
                .await
                .context("the crew's memory (it needs the pgvector extension)")?;
            Some(Arc::new(store))
        } else {
            None
        };
        let journal = PgJournal::open(
            pool,
            location.clone(),
            WorkerIdentity::this_process().host,
            pool_config.call_timeout,
        )
        .await
        .map_err(|error| anyhow!(error))?;
        anyhow::Ok((queue, journal, memory))
    };
    let (queue, journal, memory) = opened
        .await
        .with_context(|| format!("--database {location}"))
        .map_err(Failure::config)?;
    Ok(Database {
        queue: Arc::new(queue),
        journal: Some(Arc::new(journal)),
        memory,
    })
}

#[cfg(not(feature = "postgres"))]
async fn open_postgres(
    url: &str,
    _args: &QueueArgs,
    _with_memory: bool,
) -> Result<Database, Failure> {
    Err(Failure::config(anyhow!(
        "--database {}: this build of crewai has no Postgres support",
        crewai_server::redact_url(url)
    ))
    .with_hint("build crewai with the `postgres` feature (on by default), or give a SQLite file"))
}

/// The project `serve` and `worker` run (its `.env` loaded first).
fn load_project(args: &QueueArgs) -> Result<Project, Failure> {
    load_env(&args.project)?;
    load(&args.project)
}

fn runner(
    args: &QueueArgs,
    project: Project,
    journal: Option<Arc<dyn RunJournal>>,
    memory: Option<Arc<dyn MemoryStore>>,
) -> Arc<ProjectRunner> {
    let mut common = ProjectArgs::served(
        args.project.clone(),
        args.llm.clone(),
        args.verbose,
        args.python.clone(),
    );
    common.memory_store = crate::cli::SharedMemoryStore(memory);
    Arc::new(ProjectRunner {
        project: Arc::new(project),
        common,
        journal,
    })
}

fn heartbeat_for(args: &QueueArgs) -> Duration {
    // Three heartbeats per lease: one lost beat does not give the kickoff away.
    (Duration::from_secs(args.lease_seconds.max(1)) / 3).max(Duration::from_millis(200))
}

async fn shutdown_signal(token: CancellationToken) {
    if tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await;
    }
    token.cancel();
}

pub async fn serve(args: ServeArgs) -> Result<(), Failure> {
    let host = args.host.unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
    let settings = crate::bearer::TokenSettings {
        token: args.token.as_deref(),
        token_file: args.token_file.as_deref(),
        how_to_set: "CREWAI_SERVE_TOKEN, --token or --token-file",
    };
    let token = crate::bearer::token_for(&settings, host)?;
    let project = load_project(&args.queue)?;
    let Database {
        queue,
        journal,
        memory,
    } = open_database(&args.queue, project.uses_memory()).await?;
    let runner = runner(&args.queue, project, journal, memory);
    let listener = tokio::net::TcpListener::bind(SocketAddr::new(host, args.port))
        .await
        .with_context(|| format!("cannot listen on {host}:{}", args.port))
        .map_err(Failure::config)?;
    let bound = listener
        .local_addr()
        .context("cannot read the address listened on")
        .map_err(Failure::run)?;
    let mut api = KickoffApi::new(Arc::clone(&queue), runner.clone())
        .max_request_bytes(args.max_request_bytes);
    if let Some(token) = token {
        api = api.bearer_token(token);
    }
    let shutdown = CancellationToken::new();
    let workers = (args.workers > 0).then(|| {
        let config = WorkerConfig {
            concurrency: args.workers,
            heartbeat_interval: heartbeat_for(&args.queue),
            ..WorkerConfig::default()
        };
        tokio::spawn(crewai_server::run_workers(
            Arc::clone(&queue),
            runner.clone(),
            config,
            shutdown.clone(),
        ))
    });
    // The address line is what scripts wait for: its format is kept stable.
    eprintln!(
        "Kickoff API listening on http://{bound}/ ({} in-process workers)",
        args.workers
    );
    let served = axum::serve(listener, api.router())
        .with_graceful_shutdown(shutdown_signal(shutdown.clone()))
        .await
        .context("the kickoff API stopped")
        .map_err(Failure::run);
    shutdown.cancel();
    if let Some(workers) = workers {
        // The workers' running kickoffs were cancelled; they are journaled and queued again.
        let _ = workers.await;
    }
    served
}

pub async fn worker(args: WorkerArgs) -> Result<(), Failure> {
    let project = load_project(&args.queue)?;
    let Database {
        queue,
        journal,
        memory,
    } = open_database(&args.queue, project.uses_memory()).await?;
    let runner = runner(&args.queue, project, journal, memory);
    let shutdown = CancellationToken::new();
    let config = WorkerConfig {
        concurrency: args.concurrency.max(1),
        heartbeat_interval: heartbeat_for(&args.queue),
        ..WorkerConfig::default()
    };
    eprintln!(
        "Worker {} running up to {} kickoffs at once",
        crewai_server::WorkerIdentity::this_process().label(),
        config.concurrency
    );
    let work = crewai_server::run_workers(queue, runner, config, shutdown.clone());
    tokio::select! {
        () = work => {}
        () = shutdown_signal(shutdown.clone()) => {}
    }
    Ok(())
}

/// Runs a kickoff as `crewai run` does, journaled under the kickoff's id.
struct ProjectRunner {
    project: Arc<Project>,
    common: ProjectArgs,
    /// The run journal when it is not the project's store (`--database postgres://…`).
    journal: Option<Arc<dyn RunJournal>>,
}

impl KickoffRunner for ProjectRunner {
    fn required_inputs(&self) -> Vec<String> {
        self.project.required_inputs()
    }

    fn default_inputs(&self) -> Map<String, Value> {
        self.project.default_inputs().into_iter().collect()
    }

    fn task_names(&self) -> Vec<String> {
        self.project
            .tasks
            .iter()
            .map(|t| t.name().to_string())
            .collect()
    }

    fn check_inputs(&self, inputs: &Map<String, Value>) -> Vec<String> {
        let inputs: Inputs = inputs.clone().into_iter().collect();
        self.project
            .check_inputs(&inputs)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    fn run(&self, job: KickoffJob) -> BoxFuture<'static, AttemptEnd> {
        let project = Arc::clone(&self.project);
        let common = self.common.clone();
        let shared_journal = self.journal.clone();
        Box::pin(async move {
            let KickoffJob {
                kickoff_id,
                inputs,
                progress,
                cancellation,
                ..
            } = job;
            let inputs: Inputs = inputs.into_iter().collect();
            let registry = registry_for(&project, &common.project);
            let mut prepared = match JournaledRun::prepare(
                &project,
                &inputs,
                registry,
                &common,
                kickoff_id.clone(),
                false,
            )
            .await
            {
                Ok(prepared) => prepared,
                Err(failure) => {
                    return AttemptEnd::Infrastructure {
                        error: failure.render(),
                    };
                }
            };
            let journal: Arc<dyn RunJournal> = match shared_journal {
                Some(journal) => {
                    prepared = prepared.with_run_journal(Arc::clone(&journal));
                    journal
                }
                None => Arc::new(prepared.store().clone()),
            };
            prepared.bus().subscribe(move |event| {
                let (kind, task, agent, extra) = match &event.kind {
                    EventKind::TaskStarted {
                        task_name,
                        agent_role,
                        ..
                    } => ("task_started", task_name, agent_role, json!(null)),
                    EventKind::TaskCompleted {
                        task_name,
                        agent_role,
                        output,
                        ..
                    } => ("task_completed", task_name, agent_role, json!(output)),
                    EventKind::TaskFailed {
                        task_name,
                        agent_role,
                        error,
                        ..
                    } => ("task_failed", task_name, agent_role, json!(error)),
                    _ => return,
                };
                let mut data = json!({"task": task, "agent": agent});
                match kind {
                    "task_completed" => data["output"] = extra,
                    "task_failed" => data["error"] = extra,
                    _ => {}
                }
                progress.emit(kind, data);
            });
            // A run the journal already holds (its worker died, or it is being resumed)
            // continues there: finished tasks are not run again.
            let start = match journal.load(&kickoff_id).await {
                Ok(Some(_)) => Start::Resume,
                Ok(None) => Start::Kickoff(project.effective_inputs(&inputs)),
                Err(error) => {
                    prepared.finish().await;
                    return AttemptEnd::Infrastructure {
                        error: crewai_llm::error_chain(&error),
                    };
                }
            };
            let result = prepared.execute(start, cancellation).await;
            prepared.finish().await;
            match result {
                Ok(output) => AttemptEnd::Completed {
                    result: json!(output.raw),
                    usage: serde_json::to_value(output.token_usage).unwrap_or(Value::Null),
                },
                Err(error @ CrewError::Cancelled { .. }) => AttemptEnd::Cancelled {
                    error: error.to_string(),
                },
                // The journal failed, or a previous attempt still owns the run: worth another try.
                Err(error @ CrewError::Store(_)) => AttemptEnd::Infrastructure {
                    error: crewai_llm::error_chain(&error),
                },
                Err(error) => AttemptEnd::Failed {
                    error: crewai_llm::error_chain(&error),
                    usage: Value::Null,
                },
            }
        })
    }
}
