//! The command line, with CrewAI's command and flag names.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "crewai",
    version,
    about = "Run CrewAI projects: YAML crews, scaffolded Rust crews, replays"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// When to colour the output: `auto` (on a terminal, unless `NO_COLOR` is set), `always`,
    /// `never`.
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
    /// Which library messages (retries, fallbacks, unpriced models, deprecated fields) reach
    /// stderr: `error`, `warn` (the default), `info`, `debug`, `trace`, or a `RUST_LOG`-style
    /// filter. `RUST_LOG` is used when this is not given.
    #[arg(long, global = true, value_name = "FILTER")]
    pub log: Option<String>,
}

/// `--color`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the crew of a project (YAML/JSON directly, a Rust project through cargo).
    Run(RunArgs),
    /// Scaffold a new crew, flow or tool.
    Create {
        #[command(subcommand)]
        kind: CreateKind,
    },
    /// Serve the project's crew as an A2A agent (agent-to-agent protocol 0.3.0).
    A2a {
        #[command(subcommand)]
        action: crate::a2a_cmd::A2aAction,
    },
    /// Run, draw or add a crew to a declarative flow (flow.yaml).
    Flow {
        #[command(subcommand)]
        action: crate::flow_cmd::FlowAction,
    },
    /// List the task outputs of the latest kickoff (the ids `replay -t` takes).
    LogTasksOutputs {
        #[arg(long, default_value = ".")]
        project: PathBuf,
        /// Print the outputs as one JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Re-run the latest kickoff from a task, reusing the stored outputs before it.
    Replay(ReplayArgs),
    /// List the journaled runs: their ids (for `run --resume` and `run --fork`), status and progress.
    Runs(RunsArgs),
    /// Forget stored data: kickoff outputs, memory, knowledge.
    ResetMemories(ResetArgs),
    /// List or search the project's memory, list its knowledge collections (`.crewai/memory.db`).
    Memory(MemoryArgs),
    /// Show the version.
    Version {
        /// Also list the built-in tools.
        #[arg(long)]
        tools: bool,
    },
    /// Talk with the crew's `chat_llm`, which runs the crew once it has the inputs.
    Chat(ChatArgs),
    /// List the recorded runs (`.crewai/traces/`), show one as a tree, or write its timeline page.
    Traces(TracesArgs),
    /// Manage the local models that run in the process: chat models (`local/...`) and the offline
    /// embedder (`embedder: {provider: local}`).
    Models {
        #[command(subcommand)]
        action: ModelsAction,
    },
    /// Train the crew: N runs asking for your feedback on every task, then each agent's lessons
    /// saved to the trained-agents file, which later runs follow.
    Train(TrainArgs),
    /// Test the crew: N runs, each task's output scored from 1 to 10 by a judge model.
    Test(TestArgs),
    /// Serve the crew's kickoff API (POST /kickoff, GET /status/{id}, events, cancel, resume)
    /// with its own workers.
    Serve(crate::serve_cmd::ServeArgs),
    /// Run queued kickoffs of `crewai serve` (claimed under a lease, resumed if a worker dies).
    Worker(crate::serve_cmd::WorkerArgs),
    /// Serve the project's crew (or flow) as an MCP tool (`crewai mcp serve`).
    Mcp {
        #[command(subcommand)]
        action: crate::mcp_cmd::McpAction,
    },
    /// Print a shell completion script (`crewai completions bash > /etc/bash_completion.d/crewai`).
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
}

#[derive(Debug, Subcommand)]
pub enum ModelsAction {
    /// Download a local model (default: smollm2-135m; `minilm` is the offline embedder
    /// all-MiniLM-L6-v2) into the models folder.
    Pull { name: Option<String> },
    /// Show the models folder and which models are downloaded.
    List {
        /// Print the models as one JSON object.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum CreateKind {
    /// A crew project: a Rust one (Cargo.toml, src/main.rs, src/tools.rs, config/*.yaml), or
    /// CrewAI's Python layout with `--classic`.
    Crew {
        name: String,
        /// The folder to create it in (default: the current folder).
        #[arg(short = 'o', long = "output-dir")]
        output_dir: Option<PathBuf>,
        /// CrewAI's own Python layout (`pyproject.toml`, `src/<name>/crew.py`, `main.py`,
        /// `config/*.yaml`, `tools/custom_tool.py`), which CrewAI and this `crewai run` both run.
        #[arg(long)]
        classic: bool,
    },
    /// A flow project: flow.yaml with a router and a crew in crews/.
    Flow { name: String },
    /// A tool: a CrewAI `BaseTool` (in a CrewAI crew project, in its `src/<pkg>/tools/`;
    /// elsewhere CrewAI's tool package), or with `--rust` a crate with a `#[tool]` function.
    Tool {
        name: String,
        /// The folder to create it in (default: the current folder).
        #[arg(short = 'o', long = "output-dir")]
        output_dir: Option<PathBuf>,
        /// A Rust crate with a `#[tool]` function, for a Rust crew (`crewai create crew`).
        #[arg(long)]
        rust: bool,
    },
}

/// What `run`, `replay` and `chat` share.
#[derive(Debug, Clone, Args)]
pub struct ProjectArgs {
    /// The project folder.
    #[arg(long, short = 'p', default_value = ".")]
    pub project: PathBuf,
    /// Use this model for every agent (and the manager), e.g. `openai/gpt-4o-mini`.
    #[arg(long)]
    pub llm: Option<String>,
    /// Print every step of the agents.
    #[arg(long, short = 'v')]
    pub verbose: bool,
    /// Print the crew's output as one JSON line, last on stdout.
    #[arg(long)]
    pub json: bool,
    /// The Python that runs the project's own tools (`tools/*.py`); default: the project's
    /// `.venv`, else `python3` on `PATH`.
    #[arg(long, value_name = "PATH")]
    pub python: Option<PathBuf>,
    /// Run a crew with `max_cost_usd` even when one of its models has no price (its calls count
    /// as $0); without it such a crew stops before its first call, naming the model.
    #[arg(long)]
    pub allow_unpriced: bool,
    /// Where memory is kept when not in the project's file: the `--database` of `serve` and
    /// `worker` on Postgres. Never a flag of its own.
    #[arg(skip)]
    pub memory_store: SharedMemoryStore,
}

/// A memory store handed to the crews a command builds (`None`: the project's own file).
#[derive(Clone, Default)]
pub struct SharedMemoryStore(pub Option<std::sync::Arc<dyn crewai_memory::MemoryStore>>);

impl std::fmt::Debug for SharedMemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "SharedMemoryStore(given)"
        } else {
            "SharedMemoryStore(the project's file)"
        })
    }
}

impl ProjectArgs {
    /// The options of a crew that a server runs per request (`a2a serve`, `mcp serve`,
    /// `serve`, `worker`): no `--json` line, and the strict budget rule (a budget over an
    /// unpriced model stops at start).
    pub fn served(
        project: PathBuf,
        llm: Option<String>,
        verbose: bool,
        python: Option<PathBuf>,
    ) -> Self {
        ProjectArgs {
            project,
            llm,
            verbose,
            json: false,
            python,
            allow_unpriced: false,
            memory_store: SharedMemoryStore::default(),
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub common: ProjectArgs,
    /// An input for `{placeholders}`, as NAME=VALUE or a JSON object as CrewAI takes it
    /// (`'{"topic": "AI"}'`); repeatable, later ones win.
    #[arg(long = "inputs", short = 'i', value_name = "NAME=VALUE|JSON")]
    pub inputs: Vec<String>,
    /// Inputs from a JSON or YAML file (a mapping); `--inputs` wins.
    #[arg(long = "inputs-file", value_name = "FILE")]
    pub inputs_file: Option<PathBuf>,
    /// Check everything and print the plan, calling no model.
    #[arg(long)]
    pub dry_run: bool,
    /// Continue a run that did not complete (killed, failed, cancelled, over budget): its
    /// finished tasks are kept, the others run with the run's inputs. The id is the one `run`
    /// printed (see `crewai runs`).
    #[arg(long, value_name = "RUN_ID", conflicts_with_all = ["fork", "dry_run", "inputs", "inputs_file"])]
    pub resume: Option<String>,
    /// Start a new run from a stored one, copying the outputs before `--from-task` and running
    /// from there; the stored run is left as it is.
    #[arg(long, value_name = "RUN_ID", requires = "from_task", conflicts_with_all = ["dry_run", "inputs", "inputs_file"])]
    pub fork: Option<String>,
    /// The task (its name) a `--fork` runs again from.
    #[arg(long, value_name = "TASK", requires = "fork")]
    pub from_task: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct TrainArgs {
    #[command(flatten)]
    pub common: ProjectArgs,
    /// How many runs to train on.
    #[arg(short = 'n', long = "n-iterations", default_value_t = 5)]
    pub n_iterations: u32,
    /// The trained-agents file to write (JSON; default: `CREWAI_TRAINED_AGENTS_FILE`, else the
    /// project's `trained_agents_data.json`).
    #[arg(short = 'f', long, value_name = "FILE")]
    pub filename: Option<PathBuf>,
    /// An input for `{placeholders}`, as NAME=VALUE or a JSON object; repeatable.
    #[arg(long = "inputs", short = 'i', value_name = "NAME=VALUE|JSON")]
    pub inputs: Vec<String>,
    /// Inputs from a JSON or YAML file (a mapping); `--inputs` wins.
    #[arg(long = "inputs-file", value_name = "FILE")]
    pub inputs_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct TestArgs {
    #[command(flatten)]
    pub common: ProjectArgs,
    /// How many runs to score.
    #[arg(short = 'n', long = "n-iterations", default_value_t = 3)]
    pub n_iterations: u32,
    /// The judge's model (default: `--llm`, else the model agents without one get).
    #[arg(short = 'm', long, value_name = "MODEL")]
    pub model: Option<String>,
    /// An input for `{placeholders}`, as NAME=VALUE or a JSON object; repeatable.
    #[arg(long = "inputs", short = 'i', value_name = "NAME=VALUE|JSON")]
    pub inputs: Vec<String>,
    /// Inputs from a JSON or YAML file (a mapping); `--inputs` wins.
    #[arg(long = "inputs-file", value_name = "FILE")]
    pub inputs_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct RunsArgs {
    /// The project folder.
    #[arg(long, short = 'p', default_value = ".")]
    pub project: PathBuf,
    /// How many runs to list, newest first.
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
    /// Print the runs as one JSON array.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct ReplayArgs {
    #[command(flatten)]
    pub common: ProjectArgs,
    /// The task to restart from: its id (see `log-tasks-outputs`) or its name.
    #[arg(long = "task-id", short = 't')]
    pub task_id: String,
}

#[derive(Debug, Clone, Args)]
pub struct ChatArgs {
    #[command(flatten)]
    pub common: ProjectArgs,
}

#[derive(Debug, Clone, Args)]
pub struct ResetArgs {
    #[arg(long, default_value = ".")]
    pub project: PathBuf,
    /// Crew memory (short-term, long-term, entity: all one memory).
    #[arg(short = 'm', long, visible_short_aliases = ['l', 's', 'e'])]
    pub memory: bool,
    /// Crew knowledge.
    #[arg(long = "knowledge", visible_alias = "kn")]
    pub knowledge: bool,
    /// Agents' knowledge.
    #[arg(long = "agent-knowledge", visible_alias = "akn")]
    pub agent_knowledge: bool,
    /// The stored outputs of the latest kickoff.
    #[arg(short = 'k', long = "kickoff-outputs")]
    pub kickoff_outputs: bool,
    /// Everything.
    #[arg(short = 'a', long)]
    pub all: bool,
}

#[derive(Debug, Clone, Args)]
pub struct MemoryArgs {
    #[command(subcommand)]
    pub action: MemoryAction,
    /// The project folder.
    #[arg(long, short = 'p', default_value = ".", global = true)]
    pub project: PathBuf,
    /// The memory database (default: `<project>/.crewai/memory.db`).
    #[arg(long, global = true)]
    pub storage_path: Option<PathBuf>,
    /// Only this scope and the scopes below it (`/crew/research`).
    #[arg(long, default_value = "/", global = true)]
    pub scope: String,
    /// The collection to list or search: memory's (`memory`), an agent's own
    /// (`memory-agent-<key>`) or knowledge's (`knowledge:crew`, ...); `crewai memory collections`
    /// names them.
    #[arg(long, default_value = crewai_memory::DEFAULT_COLLECTION, global = true)]
    pub collection: String,
    /// Include private records.
    #[arg(long, global = true)]
    pub include_private: bool,
    /// How many records to show.
    #[arg(long, default_value_t = 20, global = true)]
    pub limit: usize,
    /// Print JSON.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, Clone, Subcommand)]
pub enum MemoryAction {
    /// The records, newest first.
    List,
    /// Every collection of the database: memory's, and the crew's, agents' and tools' knowledge,
    /// with its embedder and record count.
    Collections,
    /// The records that best match a query (shallow recall: vectors and words, no model call).
    Search {
        query: String,
        /// The embedder the memory was written with (`openai`, `ollama`, `hash`, ...); by
        /// default the one the collection recorded, when it needs no settings.
        #[arg(long)]
        embedder_provider: Option<String>,
        #[arg(long)]
        embedder_model: Option<String>,
        /// The embedder's settings as JSON (CrewAI's `embedder.config`).
        #[arg(long)]
        embedder_config: Option<String>,
    },
}

#[derive(Debug, Clone, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct TracesArgs {
    #[command(subcommand)]
    pub action: Option<TracesAction>,
    /// The run to show: the id `crewai run` printed (or the start of it); without it, every run
    /// is listed.
    pub id: Option<String>,
    /// Print the list, or the run's spans, as JSON.
    #[arg(long, conflicts_with = "html")]
    pub json: bool,
    /// Write the run's timeline to this HTML file instead of printing the tree.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// The project folder.
    #[arg(long, short = 'p', default_value = ".")]
    pub project: PathBuf,
}

/// CrewAI's `crewai traces enable|disable|status` switch its cloud tracing; here traces are
/// local files, and these say so.
#[derive(Debug, Clone, Subcommand)]
pub enum TracesAction {
    /// Where traces are recorded and how many there are (CrewAI: whether cloud tracing is on).
    Status {
        #[arg(long, short = 'p', default_value = ".")]
        project: PathBuf,
    },
    /// Traces are always recorded locally; says how to send them elsewhere (OpenTelemetry).
    Enable,
    /// Says how to stop recording local traces.
    Disable,
}
