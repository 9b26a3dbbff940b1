//! `crewai run`, `crewai replay` and `crewai chat`.

use std::io::{BufRead, Write};
use std::path::Path;
use std::sync::{Arc, LazyLock};

use anyhow::{Context, anyhow};
use crewai_core::crew::{Crew, CrewError, KickoffOptions};
use crewai_core::events::EventBus;
use crewai_core::interpolate::Inputs;
use crewai_core::output::CrewOutput;
use crewai_core::store::{RunJournal, RunStatus, TaskOutputStore};
use crewai_llm::LlmError;
use crewai_project::{BuildOptions, Project, ProjectError, ToolRegistry};
use crewai_tools::{Tool, ToolContext, ToolError, ToolHandle, ToolOutput, async_trait};
use regex::Regex;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::cli::{ProjectArgs, ReplayArgs, RunArgs};
use crate::inputs;
use crate::observe::RunObservers;
use crate::outcome::{Failure, print_out};
use crate::progress::Progress;

/// Loads `<project>/.env` without overriding variables already set.
pub(crate) fn load_env(dir: &Path) -> Result<(), Failure> {
    let path = dir.join(".env");
    if !path.is_file() {
        return Ok(());
    }
    let entries = dotenvy::from_path_iter(&path)
        .with_context(|| format!("cannot read {}", path.display()))
        .map_err(Failure::config)?;
    for entry in entries {
        let (key, value) = entry
            .with_context(|| format!("{} has a line that is not NAME=VALUE", path.display()))
            .map_err(Failure::config)?;
        if std::env::var_os(&key).is_none() {
            // SAFETY: called before the runtime starts any task that reads the environment; the
            // CLI is the only code in this process touching it at this point.
            unsafe { std::env::set_var(&key, value) };
        }
    }
    Ok(())
}

/// A scaffolded Rust project: a Cargo manifest with a binary.
pub(crate) fn is_rust_project(dir: &Path) -> bool {
    let manifest = dir.join("Cargo.toml");
    manifest.is_file()
        && (dir.join("src/main.rs").is_file()
            || std::fs::read_to_string(&manifest).is_ok_and(|t| t.contains("[[bin]]")))
}

static TOOL_FN: LazyLock<Regex> = LazyLock::new(|| {
    #[allow(clippy::expect_used)] // a constant pattern, exercised by the tests
    Regex::new(r"#\[(?:crewai::)?tool\b[^\]]*\]\s*(?:///[^\n]*\n\s*)*(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?fn\s+([A-Za-z_][A-Za-z0-9_]*)").expect("tool pattern is valid")
});

/// The `#[tool]` functions of a Rust project's `src/tools.rs`, found by reading the source (a
/// dry run does not compile the project).
fn declared_rust_tools(dir: &Path) -> Vec<String> {
    let Ok(source) = std::fs::read_to_string(dir.join("src/tools.rs")) else {
        return Vec::new();
    };
    TOOL_FN
        .captures_iter(&source)
        .map(|c| c[1].to_string())
        .collect()
}

/// A tool a compiled project provides; in a dry run only its name is known.
struct DeclaredTool {
    name: String,
}

#[async_trait]
impl Tool for DeclaredTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        "a tool of the compiled project (src/tools.rs)"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {}})
    }
    async fn run(&self, _: Value, _: &ToolContext) -> Result<ToolOutput, ToolError> {
        Err(ToolError::failed(format!(
            "tool '{}' is compiled into the project; run it with `crewai run` (cargo)",
            self.name
        )))
    }
}

pub(crate) fn registry_for(project: &Project, dir: &Path) -> ToolRegistry {
    let mut registry = ToolRegistry::with_builtins(&project.root);
    #[cfg(feature = "sandbox")]
    crate::code_tool::register(&mut registry, &project.root);
    for name in declared_rust_tools(dir) {
        registry.register_handle(ToolHandle::new(Arc::new(DeclaredTool { name })));
    }
    registry
}

fn print_warnings(project: &Project) {
    for warning in &project.warnings {
        eprintln!("warning: {warning}");
    }
}

pub(crate) fn load(dir: &Path) -> Result<Project, Failure> {
    let project = Project::load(dir)?;
    print_warnings(&project);
    Ok(project)
}

/// What `crewai test` and `crewai train` start from: the project's `.env`, the project (a
/// YAML/JSON one: a Rust project calls `Crew::{method}` itself) and the inputs, with `-n`
/// checked to be at least 1.
pub(crate) fn load_for_repeated_runs(
    command: &str,
    method: &str,
    dir: &Path,
    iterations: u32,
    given_inputs: &[String],
    inputs_file: Option<&Path>,
) -> Result<(Project, Inputs), Failure> {
    load_env(dir)?;
    if is_rust_project(dir) {
        return Err(Failure::config(anyhow!(
            "`crewai {command}` works on YAML/JSON projects; a Rust project calls `Crew::{method}` in its own code"
        )));
    }
    if iterations == 0 {
        return Err(Failure::config(anyhow!("-n must be at least 1")));
    }
    let given = inputs::gather(given_inputs, inputs_file).map_err(Failure::config)?;
    Ok((load(dir)?, given))
}

pub async fn run(args: RunArgs) -> Result<(), Failure> {
    let dir = args.common.project.clone();
    load_env(&dir)?;
    if let Some(outcome) = crate::flow_cmd::run_declared_flow(&args).await {
        return outcome;
    }
    refuse_python_flow(&dir)?;
    let given =
        inputs::gather(&args.inputs, args.inputs_file.as_deref()).map_err(Failure::config)?;
    if is_rust_project(&dir) && !args.dry_run {
        if args.resume.is_some() || args.fork.is_some() {
            return Err(Failure::config(anyhow!(
                "--resume and --fork work on YAML/JSON projects; a Rust project resumes through `Crew::resume` in its own code"
            )));
        }
        return cargo_run(&dir, &args).await;
    }
    let project = load(&dir)?;
    let registry = registry_for(&project, &dir);
    if let Some(run_id) = &args.resume {
        return resume_or_fork(&project, registry, &args.common, run_id, None).await;
    }
    if let (Some(run_id), Some(task)) = (&args.fork, &args.from_task) {
        return resume_or_fork(&project, registry, &args.common, run_id, Some(task)).await;
    }
    if args.dry_run {
        let plan = project.plan(&given, &registry)?;
        let text = if args.common.json {
            serde_json::to_string(&plan)
                .context("cannot encode the plan")
                .map_err(Failure::run)?
        } else {
            format!("{plan}\nDry run: the project is valid; no model was called.")
        };
        return print_out(&text);
    }
    kickoff_and_record(&project, &given, registry, &args.common).await
}

/// A CrewAI project whose `pyproject.toml` says it is a flow, and which holds no declarative
/// flow file (those ran above), is a flow written as a Python `Flow` class: its methods are
/// Python code, which crewai-rs does not run.
fn refuse_python_flow(dir: &Path) -> Result<(), Failure> {
    let package = crewai_pysource::find_crewai_package(dir)
        .map_err(|error| Failure::config(anyhow!(error)))?;
    match package {
        Some(package) if package.kind == Some(crewai_pysource::ProjectKind::Flow) => {
            let code = package
                .main_py()
                .map(|main| {
                    main.strip_prefix(dir)
                        .unwrap_or(&main)
                        .display()
                        .to_string()
                })
                .unwrap_or_else(|| format!("src/{}/", package.name));
            Err(Failure::config(anyhow!(
                "{} says this is a CrewAI flow (`[tool.crewai] type = \"flow\"`), written in Python ({code}); crewai-rs runs crews and declarative flows, not Python `Flow` classes",
                package.pyproject.strip_prefix(dir).unwrap_or(&package.pyproject).display()
            ))
            .with_hint(
                "write the flow as a declarative flow (flow.yaml with `schema: crewai.flow/v1`, see examples/research-declarative-flow) and run that",
            ))
        }
        _ => Ok(()),
    }
}

/// How a journaled run of the CLI begins.
pub(crate) enum Start {
    Kickoff(Inputs),
    Resume,
    Fork { from_run: String, from_task: String },
    Replay { task: String, inputs: Inputs },
}

/// Builds the crew, kicks it off with the project's effective inputs and reports the result
/// (`run` and `chat` share this).
async fn kickoff_and_record(
    project: &Project,
    given: &Inputs,
    registry: ToolRegistry,
    common: &ProjectArgs,
) -> Result<(), Failure> {
    let inputs = project.effective_inputs(given);
    let run_id = uuid::Uuid::new_v4().to_string();
    run_journaled(
        project,
        given,
        registry,
        common,
        run_id,
        Start::Kickoff(inputs),
    )
    .await
}

/// `crewai run --resume ID` and `crewai run --fork ID --from-task TASK`: the crew is built with
/// the stored run's inputs.
async fn resume_or_fork(
    project: &Project,
    registry: ToolRegistry,
    common: &ProjectArgs,
    stored_id: &str,
    from_task: Option<&String>,
) -> Result<(), Failure> {
    let store = crate::stored::open(&project.root)?;
    let stored = RunJournal::load(&store, stored_id)
        .await
        .map_err(Failure::run)?
        .ok_or_else(|| {
            Failure::config(anyhow!(
                "the project's store has no run '{stored_id}'; `crewai runs` lists the runs"
            ))
        })?;
    match from_task {
        Some(task) => {
            let run_id = uuid::Uuid::new_v4().to_string();
            let start = Start::Fork {
                from_run: stored_id.to_string(),
                from_task: task.clone(),
            };
            run_journaled(project, &stored.inputs, registry, common, run_id, start).await
        }
        None => {
            if stored.status == RunStatus::Completed {
                eprintln!("Run {stored_id} already completed; showing its stored output.");
            }
            let start = Start::Resume;
            run_journaled(
                project,
                &stored.inputs,
                registry,
                common,
                stored_id.to_string(),
                start,
            )
            .await
        }
    }
}

/// Runs the crew under `run_id`, journaled in the project's store: each finished task is kept as
/// it finishes. Ctrl-C cancels the run (recorded as cancelled, exit code 130); any stop after the
/// run started prints how to resume it.
async fn run_journaled(
    project: &Project,
    build_inputs: &Inputs,
    registry: ToolRegistry,
    common: &ProjectArgs,
    run_id: String,
    start: Start,
) -> Result<(), Failure> {
    let prepared =
        JournaledRun::prepare(project, build_inputs, registry, common, run_id, true).await?;
    let run_id = prepared.run_id.clone();
    match &start {
        Start::Resume => eprintln!("Resuming run {run_id}"),
        Start::Fork {
            from_run,
            from_task,
        } => {
            eprintln!("Run {run_id} (forked from run {from_run} at task '{from_task}')")
        }
        Start::Kickoff(_) | Start::Replay { .. } => eprintln!("Run {run_id}"),
    }
    let cancellation = CancellationToken::new();
    let mut interrupted = false;
    let result = {
        let work = prepared.execute(start, cancellation.clone());
        tokio::pin!(work);
        tokio::select! {
            result = &mut work => result,
            _ = tokio::signal::ctrl_c() => {
                interrupted = true;
                // The kickoff stops its calls and journals itself as cancelled.
                cancellation.cancel();
                work.await
            }
        }
    };
    let store = prepared.finish().await;
    report(&store, &run_id, result, interrupted, common.json).await
}

/// One journaled kickoff from start to finish, ended early by `cancellation`: what each call of
/// `crewai mcp serve` runs. The result is the crew's, for the caller to report.
pub(crate) async fn journaled_kickoff(
    project: &Project,
    build_inputs: &Inputs,
    registry: ToolRegistry,
    common: &ProjectArgs,
    run_id: &str,
    start: Start,
    cancellation: CancellationToken,
) -> Result<(crewai_store::Store, Result<CrewOutput, CrewError>), Failure> {
    let prepared = JournaledRun::prepare(
        project,
        build_inputs,
        registry,
        common,
        run_id.to_string(),
        true,
    )
    .await?;
    let result = prepared.execute(start, cancellation).await;
    Ok((prepared.finish().await, result))
}

/// A crew built for one journaled run, with what the run needs around it: the project's store,
/// the Python worker of its own tools, progress and trace listeners on its bus. `crewai run`,
/// `replay`, `chat`, each call of `crewai mcp serve` and each task of `crewai a2a serve` run
/// through it.
pub(crate) struct JournaledRun {
    crew: Crew,
    store: crewai_store::Store,
    progress: Option<Progress>,
    observers: RunObservers,
    python: crate::python_tools::ProjectPython,
    bus: EventBus,
    pub(crate) run_id: String,
}

impl JournaledRun {
    /// Starts the Python worker (when the project has Python tools) and builds the crew, its
    /// kickoffs journaled in the project's store; `show_progress` puts the terminal's progress
    /// lines on the run's bus.
    pub(crate) async fn prepare(
        project: &Project,
        build_inputs: &Inputs,
        registry: ToolRegistry,
        common: &ProjectArgs,
        run_id: String,
        show_progress: bool,
    ) -> Result<JournaledRun, Failure> {
        let prepared = Self::prepare_unjournaled(
            project,
            build_inputs,
            registry,
            common,
            run_id,
            show_progress,
        )
        .await?;
        let journal = Arc::new(prepared.store.clone());
        Ok(JournaledRun {
            crew: prepared.crew.with_run_journal(journal),
            ..prepared
        })
    }

    /// [`JournaledRun::prepare`] without the journal: `crewai test` and `crewai train` kick the
    /// crew off several times, and a resume of one of those iterations means nothing.
    pub(crate) async fn prepare_unjournaled(
        project: &Project,
        build_inputs: &Inputs,
        registry: ToolRegistry,
        common: &ProjectArgs,
        run_id: String,
        show_progress: bool,
    ) -> Result<JournaledRun, Failure> {
        let mut registry = registry;
        // The project's Python tools run in one worker for the whole run; it is stopped by
        // `finish`, and on an early return its drop kills and reaps the process.
        let python = crate::python_tools::ProjectPython::start(
            project,
            common.python.as_deref(),
            &mut registry,
        )
        .await?;
        let (crew, store, progress, observers, bus) = build(
            project,
            build_inputs,
            registry,
            common,
            &run_id,
            show_progress,
        )
        .await?;
        Ok(JournaledRun {
            crew,
            store,
            progress,
            observers,
            python,
            bus,
            run_id,
        })
    }

    /// The crew, for the commands that drive it themselves (`test`, `train`).
    pub(crate) fn crew(&self) -> &Crew {
        &self.crew
    }

    /// Journals the run in `journal` instead of the project's store (a worker on
    /// `--database postgres://…` keeps it with the queue).
    pub(crate) fn with_run_journal(mut self, journal: Arc<dyn RunJournal>) -> Self {
        self.crew = self.crew.with_run_journal(journal);
        self
    }

    /// The run's event bus.
    pub(crate) fn bus(&self) -> &EventBus {
        &self.bus
    }

    /// The project's store, which journals the run.
    pub(crate) fn store(&self) -> &crewai_store::Store {
        &self.store
    }

    /// Runs the crew as `start` says; cancelling `cancellation` stops it (journaled as
    /// cancelled).
    pub(crate) async fn execute(
        &self,
        start: Start,
        cancellation: CancellationToken,
    ) -> Result<CrewOutput, CrewError> {
        let run_id = &self.run_id;
        let options = KickoffOptions::new()
            .cancellation(cancellation)
            .run_id(run_id.clone());
        match start {
            Start::Kickoff(inputs) => self.crew.kickoff_with(inputs, options).await,
            Start::Resume => self.crew.resume_with(run_id, options).await,
            Start::Fork {
                from_run,
                from_task,
            } => self.crew.fork_with(&from_run, &from_task, options).await,
            Start::Replay { task, inputs } => {
                self.crew.replay_with(&task, Some(inputs), options).await
            }
        }
    }

    /// Stops the listeners and the Python worker; the store stays for the report.
    pub(crate) async fn finish(self) -> crewai_store::Store {
        if let Some(progress) = &self.progress {
            progress.finish();
        }
        self.observers.finish().await;
        self.python.shutdown().await;
        self.store
    }
}

/// Builds the crew with the CLI's options: event bus, the project's store, `--llm`, `--verbose`.
pub(crate) async fn build(
    project: &Project,
    given: &Inputs,
    registry: ToolRegistry,
    common: &ProjectArgs,
    run_id: &str,
    show_progress: bool,
) -> Result<
    (
        Crew,
        crewai_store::Store,
        Option<Progress>,
        RunObservers,
        EventBus,
    ),
    Failure,
> {
    let store = crate::stored::open(&project.root)?;
    let bus = EventBus::new();
    // A verbose crew prints every step itself; spinners would only garble it.
    let verbose = common.verbose || project.crew.verbose == Some(true);
    let progress = if verbose {
        crate::observe::print_call_costs(&bus);
        None
    } else if show_progress {
        let progress = Progress::new();
        progress.attach(&bus);
        Some(progress)
    } else {
        None
    };

    let mut options = BuildOptions::new(registry)
        .with_task_output_store(Arc::new(store.clone()))
        .with_event_bus(bus.clone())
        .with_allow_unpriced(common.allow_unpriced);
    if let Some(store) = &common.memory_store.0 {
        options = options.with_memory_store(Arc::clone(store));
    }
    options = crate::models::configure(project, options, common.llm.as_deref()).await?;
    let announced = [
        (
            "Memory",
            project.memory_embedder(&options).map_err(Failure::from)?,
        ),
        (
            "Knowledge",
            project
                .knowledge_embedder(&options)
                .map_err(Failure::from)?,
        ),
    ];
    for (what, chosen) in announced {
        if let Some((embedder, why)) = chosen {
            let model = embedder
                .config
                .model
                .as_deref()
                .unwrap_or("its default model");
            eprintln!(
                "{what}: on, embedding with {} ({model}) — {why}",
                embedder.provider
            );
        }
    }
    if common.verbose {
        options = options.with_verbose(true);
    }
    if let Some(trained) = crate::train_cmd::trained_agents_for_run(&project.root).await? {
        options = options.with_trained_agents(trained);
    }
    let crew = project.build(given, &options).map_err(|err| match &err {
        ProjectError::Llm { source: LlmError::MissingApiKey { env_var, .. }, .. } => {
            let env_var = env_var.clone();
            Failure::config(anyhow!(err).context(format!("no model provider is configured: set {env_var} (in the environment or the project's .env)")))
        }
        _ => Failure::from(err),
    })?;
    let observers = RunObservers::start(&project.root, &bus, run_id)?;
    Ok((crew, store, progress, observers, bus))
}

/// Prints the output (the raw text, or one JSON line with `--json`), or the error with how to
/// resume the run when it got far enough to be journaled.
async fn report(
    store: &crewai_store::Store,
    run_id: &str,
    result: Result<CrewOutput, CrewError>,
    interrupted: bool,
    json: bool,
) -> Result<(), Failure> {
    let error = match result {
        Ok(output) => {
            return print_out(&if json {
                crew_output_json(&output)
            } else {
                output.raw
            });
        }
        Err(error) => error,
    };
    let failure = match &error {
        CrewError::Cancelled { .. } if interrupted => Failure::interrupted(error),
        CrewError::Store(crewai_core::store::StoreError::RunOwned { .. }) => {
            // Another process owns the run: nothing was started here.
            return Err(Failure::run(error).with_hint(format!(
                "once that process ends or is stopped, resume with: crewai run --resume {run_id}"
            )));
        }
        _ => Failure::run(error),
    };
    let resumable = RunJournal::load(store, run_id)
        .await
        .ok()
        .flatten()
        .is_some_and(|run| run.status.is_resumable());
    Err(if resumable {
        failure.with_hint(format!("resume with: crewai run --resume {run_id}"))
    } else {
        failure
    })
}

/// The CrewOutput as one JSON line with CrewAI's keys. Each task output is CrewAI's
/// `model_dump()` without the conversation (`messages`), which would dwarf everything else.
pub fn crew_output_json(output: &CrewOutput) -> String {
    let usage = &output.token_usage;
    let task_value = |task: &crewai_core::output::TaskOutput| match serde_json::to_value(task) {
        Ok(Value::Object(mut map)) => {
            map.remove("messages");
            Value::Object(map)
        }
        _ => json!({"raw": task.raw}),
    };
    let value = json!({
        "raw": output.raw,
        "json_dict": output.json_dict,
        "pydantic": output.pydantic,
        "tasks_output": output.tasks_output.iter().map(task_value).collect::<Vec<_>>(),
        "run_id": output.run_id,
        "token_usage": {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens,
            "cached_prompt_tokens": usage.cached_prompt_tokens,
            "successful_requests": usage.successful_requests,
            "reasoning_tokens": usage.reasoning_tokens,
            "cost_usd": usage.cost_usd,
        },
    });
    value.to_string()
}

/// Runs a scaffolded Rust project through `cargo run`, passing the flags on.
async fn cargo_run(dir: &Path, args: &RunArgs) -> Result<(), Failure> {
    let mut command =
        tokio::process::Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command
        .arg("run")
        .arg("--quiet")
        .arg("--manifest-path")
        .arg(dir.join("Cargo.toml"))
        .arg("--");
    let mut pairs =
        inputs::gather(&args.inputs, args.inputs_file.as_deref()).map_err(Failure::config)?;
    for (name, value) in std::mem::take(&mut pairs) {
        command.arg("--inputs").arg(format!(
            "{name}={}",
            crewai_core::interpolate::python_str(&value)
        ));
    }
    if args.common.json {
        command.arg("--json");
    }
    if let Some(model) = &args.common.llm {
        command.env("MODEL", model);
    }
    eprintln!("Running the Rust project in {} with cargo…", dir.display());
    let status = command
        .status()
        .await
        .context("cannot start cargo; is the Rust toolchain installed?")
        .map_err(Failure::config)?;
    if status.success() {
        Ok(())
    } else {
        Err(Failure::run(anyhow!(
            "the crew program exited with {status}"
        )))
    }
}

pub async fn replay(args: ReplayArgs) -> Result<(), Failure> {
    let dir = args.common.project.clone();
    load_env(&dir)?;
    let project = load(&dir)?;
    let store = crate::stored::open(&dir)?;
    let stored = TaskOutputStore::load(&store).await.map_err(Failure::run)?;
    let found = stored
        .iter()
        .find(|r| {
            r.task_id == args.task_id || r.task_name.as_deref() == Some(args.task_id.as_str())
        })
        .map(|row| (row.task_index, row.inputs.clone()))
        // A run stopped before the task (by its budget) has no output for it yet: resume there
        // with the stored kickoff's inputs.
        .or_else(|| {
            let index = project
                .tasks
                .iter()
                .position(|t| t.name() == args.task_id)?;
            stored
                .iter()
                .any(|r| r.task_index + 1 == index)
                .then(|| (index, stored[0].inputs.clone()))
        });
    let Some((task_index, inputs)) = found else {
        let known: Vec<String> = stored
            .iter()
            .map(|r| format!("{} ({})", r.task_id, r.task_name.as_deref().unwrap_or("-")))
            .collect();
        let hint = if known.is_empty() {
            "no kickoff is stored yet; run `crewai run` first".to_string()
        } else {
            format!("stored tasks: {}", known.join(", "))
        };
        return Err(Failure::config(anyhow!(
            "no stored output for task '{}'; {hint} (see `crewai log-tasks-outputs`)",
            args.task_id
        )));
    };
    // Task ids are fresh in every process (as in CrewAI), so the stored row's position says
    // which task of this crew to restart from.
    let Some(task) = project.tasks.get(task_index) else {
        return Err(Failure::config(anyhow!(
            "the stored kickoff had a task {} that the project no longer has; run `crewai run` again",
            task_index + 1
        )));
    };
    let task_name = task.name().to_string();
    let registry = registry_for(&project, &dir);
    let run_id = uuid::Uuid::new_v4().to_string();
    let start = Start::Replay {
        task: task_name,
        inputs: inputs.clone(),
    };
    run_journaled(&project, &inputs, registry, &args.common, run_id, start).await
}

/// Asks for each input on stdin, offering the project's default.
fn ask_inputs(
    project: &Project,
    input: &mut impl BufRead,
    out: &mut impl Write,
) -> anyhow::Result<Inputs> {
    let defaults = project.default_inputs();
    let mut inputs = Inputs::new();
    for name in project.required_inputs() {
        let default = defaults
            .get(&name)
            .map(crewai_core::interpolate::python_str);
        match &default {
            Some(d) => write!(out, "{name} [{d}]: ")?,
            None => write!(out, "{name}: ")?,
        }
        out.flush()?;
        let mut line = String::new();
        if input.read_line(&mut line)? == 0 && default.is_none() {
            anyhow::bail!("the input ended before a value for '{name}' was given");
        }
        let line = line.trim();
        match (line.is_empty(), default) {
            (true, Some(d)) => inputs.insert(name, Value::String(d)),
            (true, None) => anyhow::bail!("'{name}' needs a value"),
            (false, _) => inputs.insert(name, Value::String(line.to_string())),
        };
    }
    Ok(inputs)
}

/// `crewai chat` for a crew without a chat model: asks for each input at the prompt (Enter keeps
/// the default), then runs the crew as `crewai run` does.
pub(crate) async fn ask_and_run(project: &Project, common: &ProjectArgs) -> Result<(), Failure> {
    eprintln!(
        "Crew '{}': {} agents, {} tasks. Give the inputs (Enter keeps the default):",
        project.name(),
        project.agents.len(),
        project.tasks.len()
    );
    let given = {
        let stdin = std::io::stdin();
        let mut err = std::io::stderr();
        ask_inputs(project, &mut stdin.lock(), &mut err).map_err(Failure::config)?
    };
    let registry = registry_for(project, &common.project);
    kickoff_and_record(project, &given, registry, common).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_tool_functions_in_rust_source() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        std::fs::write(
            dir.path().join("src/tools.rs"),
            "/// Doc\n#[tool]\npub fn word_count(text: String) -> usize { 0 }\n#[tool(name = \"X\")]\n/// more\nasync fn fetch() {}\nfn helper() {}\n",
        )
        .unwrap();
        assert_eq!(declared_rust_tools(dir.path()), ["word_count", "fetch"]);
    }

    #[test]
    fn asks_each_input_and_keeps_defaults() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("config")).unwrap();
        std::fs::write(
            dir.path().join("config/agents.yaml"),
            "a:\n  role: R {who}\n  goal: G\n  backstory: B\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("config/tasks.yaml"),
            "t:\n  description: D {topic}\n  expected_output: E\n  agent: a\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("config/crew.yaml"), "inputs: {topic: AI}\n").unwrap();
        let project = Project::load(dir.path()).unwrap();
        let mut out = Vec::new();
        let inputs = ask_inputs(&project, &mut "Ann\n\n".as_bytes(), &mut out).unwrap();
        assert_eq!(inputs["who"], "Ann");
        assert_eq!(inputs["topic"], "AI");
        assert_eq!(String::from_utf8(out).unwrap(), "who: topic [AI]: ");
        assert!(ask_inputs(&project, &mut "".as_bytes(), &mut Vec::new()).is_err());
    }
}
