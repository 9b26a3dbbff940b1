//! `crewai flow kickoff|plot|add-crew` and `crewai create flow`: declarative flows, in our
//! `flow.yaml` format or CrewAI's `schema: crewai.flow/v1` (see
//! `crewai_project::flow_v1::AnyFlow`).

use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow};
use clap::{Args, Subcommand};
use crewai_core::interpolate::Inputs;
use crewai_project::flow_v1::AnyFlow;
use crewai_project::flow_yaml::{FLOW_FILE, FlowProject};
use crewai_project::{BuildOptions, ToolRegistry};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::cli::RunArgs;
use crate::outcome::{Failure, print_out};

#[derive(Debug, Subcommand)]
pub enum FlowAction {
    /// Run the flow of a project (`flow.yaml`, ours or CrewAI's `schema: crewai.flow/v1`).
    Kickoff(FlowKickoffArgs),
    /// Draw the flow as a self-contained HTML page (or mermaid text).
    Plot(FlowPlotArgs),
    /// Add a crew to the flow project, as CrewAI's `flow add-crew` does: `crews/<name>/` with its
    /// `config/agents.yaml` and `config/tasks.yaml`, ready for a method's `crew: crews/<name>`.
    AddCrew(FlowAddCrewArgs),
}

#[derive(Debug, Args)]
pub struct FlowAddCrewArgs {
    /// The crew's name (its folder is the name in snake case).
    pub name: String,
    /// The flow project (the folder holding flow.yaml).
    #[arg(long, short = 'p', default_value = ".")]
    pub project: PathBuf,
}

#[derive(Debug, Args)]
pub struct FlowKickoffArgs {
    /// The folder holding flow.yaml (or flow.json), or the flow file itself.
    #[arg(long, short = 'p', default_value = ".")]
    pub project: PathBuf,
    /// An input merged into the flow state, as NAME=VALUE (repeatable).
    #[arg(long = "inputs", short = 'i', value_name = "NAME=VALUE")]
    pub inputs: Vec<String>,
    /// Print `{result, state, method_outputs, usage}` as one JSON line, last on stdout.
    #[arg(long)]
    pub json: bool,
    /// The model for every agent of the flow's crews (else the same choice as `crewai run`).
    #[arg(long)]
    pub llm: Option<String>,
}

#[derive(Debug, Args)]
pub struct FlowPlotArgs {
    /// The folder holding flow.yaml (or flow.json), or the flow file itself.
    #[arg(long, short = 'p', default_value = ".")]
    pub project: PathBuf,
    /// The file to write; default `crew_flow.html` in the current folder, as CrewAI's
    /// `flow plot` writes (`crew_flow.mmd` with `--mermaid`).
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
    /// Write mermaid text instead of HTML.
    #[arg(long)]
    pub mermaid: bool,
}

pub async fn flow(action: FlowAction) -> Result<(), Failure> {
    match action {
        FlowAction::Kickoff(args) => {
            let flow = load(&args.project)?;
            let inputs = crate::inputs::gather(&args.inputs, None).map_err(Failure::config)?;
            kickoff(&flow, &inputs, args.llm.as_deref(), args.json).await
        }
        FlowAction::Plot(args) => plot(args),
        FlowAction::AddCrew(args) => add_crew(&args),
    }
}

/// `crewai run` on a folder whose flow file declares `schema: crewai.flow/v1`: `Some` when
/// `dir` holds one (the run is then the flow's kickoff), `None` for anything else.
pub async fn run_declared_flow(args: &RunArgs) -> Option<Result<(), Failure>> {
    let dir = &args.common.project;
    match AnyFlow::is_declaration(dir) {
        Ok(true) => Some(run_flow(args).await),
        Ok(false) => None,
        // A flow file that does not parse is the project only when there is no crew beside it.
        Err(err) if !dir.join("config").is_dir() && !dir.join("crew.jsonc").is_file() => {
            Some(Err(err.into()))
        }
        Err(_) => None,
    }
}

async fn run_flow(args: &RunArgs) -> Result<(), Failure> {
    if args.resume.is_some() || args.fork.is_some() {
        return Err(Failure::config(anyhow!(
            "--resume and --fork replay a crew's stored run; a flow resumes from its persisted state (`persist: {{enabled: true}}`) when kicked off with its `id` as an input"
        )));
    }
    let flow = load(&args.common.project)?;
    let inputs = crate::inputs::gather(&args.inputs, args.inputs_file.as_deref())
        .map_err(Failure::config)?;
    if args.dry_run {
        flow.kickoff_inputs(&inputs)?;
        let built = flow.build(&options(&flow))?;
        return print_out(&format!(
            "{}\nDry run: the flow is valid; no model was called.",
            built.to_mermaid()
        ));
    }
    kickoff(&flow, &inputs, args.common.llm.as_deref(), args.common.json).await
}

pub(crate) fn load(path: &Path) -> Result<AnyFlow, Failure> {
    let dir = if path.is_dir() {
        path
    } else {
        path.parent().unwrap_or(Path::new("."))
    };
    // The project's .env supplies keys the way `crewai run` reads them; a missing one is fine.
    let _ = dotenvy::from_path(dir.join(".env"));
    let flow = AnyFlow::load(path)?;
    for warning in flow.warnings() {
        eprintln!("warning: {warning}");
    }
    Ok(flow)
}

fn options(flow: &AnyFlow) -> BuildOptions {
    BuildOptions::new(ToolRegistry::with_builtins(flow.root()))
        .with_llm_build(crate::models::llm_build_options())
}

/// Kicks `flow` off with `given` laid over its state and prints the result.
async fn kickoff(
    flow: &AnyFlow,
    given: &Inputs,
    llm: Option<&str>,
    as_json: bool,
) -> Result<(), Failure> {
    let output = flow_output(flow, given, llm, CancellationToken::new()).await?;
    if as_json {
        let line = json!({ "result": output.result, "state": output.state, "method_outputs": output.method_outputs, "usage": output.usage.total });
        println!("{line}");
    } else {
        println!("{}", result_text(&output.result));
    }
    Ok(())
}

/// One kickoff of `flow` with `given` laid over its state, ended early by `cancellation`
/// (`flow kickoff`, `run` on a flow and `mcp serve` share it). A flow's crews are loaded as its
/// methods run, so which agents name no model is not known up front: the default is always
/// chosen (and said on stderr), as `crewai run` would.
pub(crate) async fn flow_output(
    flow: &AnyFlow,
    given: &Inputs,
    llm: Option<&str>,
    cancellation: CancellationToken,
) -> Result<crewai::flow::FlowOutput<Map<String, Value>>, Failure> {
    let inputs = flow.kickoff_inputs(given)?;
    let options = crate::models::with_chosen_default(options(flow), llm).await?;
    let built = flow.build(&options)?;
    built
        .kickoff_with(
            crewai::flow::Kickoff::new()
                .inputs(inputs)
                .cancellation(cancellation),
        )
        .await
        .map_err(Failure::run)
}

/// A flow's result as text: a crew's or an agent's output (a declaration's last method) as its
/// raw text, anything else as JSON.
pub(crate) fn result_text(result: &Option<Value>) -> String {
    let raw = result.as_ref().and_then(|r| r.get("raw"));
    match (result, raw) {
        (Some(Value::String(text)), _) | (Some(_), Some(Value::String(text))) => text.clone(),
        (Some(other), _) => other.to_string(),
        (None, _) => "(the flow produced no output)".to_string(),
    }
}

fn plot(args: FlowPlotArgs) -> Result<(), Failure> {
    let flow = load(&args.project)?;
    let built = flow.build(&options(&flow))?;
    let text = if args.mermaid {
        built.to_mermaid()
    } else {
        built.plot_html()
    };
    let output = args.output.unwrap_or_else(|| {
        PathBuf::from(if args.mermaid {
            "crew_flow.mmd"
        } else {
            "crew_flow.html"
        })
    });
    std::fs::write(&output, text)
        .with_context(|| format!("cannot write {}", output.display()))
        .map_err(Failure::run)?;
    println!("Wrote {}", output.display());
    Ok(())
}

/// `crewai create flow NAME`: a folder with flow.yaml whose router sends to a scaffolded crew.
pub fn create_flow(name: &str) -> Result<(), Failure> {
    let parent = std::env::current_dir()
        .context("cannot read the current folder")
        .map_err(Failure::config)?;
    let dir = scaffold_flow(name, &parent).map_err(Failure::config)?;
    crate::create::print_created(
        &dir,
        &[
            "crewai flow plot --output flow.html",
            "crewai flow kickoff --inputs topic=\"AI agents\"",
        ],
    );
    Ok(())
}

fn scaffold_flow(name: &str, parent: &Path) -> anyhow::Result<PathBuf> {
    let folder = crate::create::folder_name(name);
    let dir = parent.join(&folder);
    if dir.exists() {
        anyhow::bail!(
            "{} already exists; pick another name or remove it",
            dir.display()
        );
    }
    let crew_folder = scaffold_flow_crew("research crew", &dir.join("crews"))?;
    let flow_yaml = format!(
        "# A flow: each method has a trigger (start / listen / router) and one step.\nname: {name}\nmethods:\n  pick_topic:\n    start: true\n    set: {{ topic: AI LLMs }}\n  check_depth:\n    router: pick_topic\n    emits: [deep, quick]\n    route: {{ if_contains: {{ text: LLM, then: deep, else: quick }} }}\n  research:\n    listen: deep\n    crew: crews/{crew_folder}\n  summary:\n    listen: quick\n    set: {{ summary: \"A quick topic needs no crew.\" }}\n",
        name = name.trim()
    );
    std::fs::write(dir.join(FLOW_FILE), flow_yaml)
        .with_context(|| format!("cannot write {}", dir.join(FLOW_FILE).display()))?;
    FlowProject::load(&dir).context("the scaffolded flow does not load (a bug in crewai)")?;
    Ok(dir)
}

/// Writes a crew a flow runs from its YAML into `crews/<folder>`; returns the folder's name.
fn scaffold_flow_crew(name: &str, crews: &Path) -> anyhow::Result<String> {
    std::fs::create_dir_all(crews).with_context(|| format!("cannot create {}", crews.display()))?;
    let crew_dir = crate::create::scaffold(name, crews)?;
    // A flow runs its crews from their YAML, so the Rust half of the crew scaffold (and the Rust
    // tool its agents name) has no place here.
    std::fs::remove_file(crew_dir.join("Cargo.toml")).context("cannot tidy the crew scaffold")?;
    std::fs::remove_dir_all(crew_dir.join("src")).context("cannot tidy the crew scaffold")?;
    let agents_path = crew_dir.join("config/agents.yaml");
    let agents = std::fs::read_to_string(&agents_path).context("cannot read the crew scaffold")?;
    std::fs::write(
        &agents_path,
        agents.replace("  tools:\n    - word_count\n", ""),
    )
    .context("cannot tidy the crew scaffold")?;
    crewai_project::Project::load(&crew_dir)
        .context("the scaffolded crew does not load (a bug in crewai)")?;
    Ok(crew_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default())
}

/// `crewai flow add-crew NAME`: a new crew in the flow project's `crews/`.
fn add_crew(args: &FlowAddCrewArgs) -> Result<(), Failure> {
    let dir = &args.project;
    let declared = ["flow.yaml", "flow.yml", "flow.json"]
        .iter()
        .any(|file| dir.join(file).is_file());
    if !declared {
        let message = match crewai_pysource::find_crewai_package(dir) {
            Ok(Some(package)) if package.kind == Some(crewai_pysource::ProjectKind::Flow) => {
                format!(
                    "{} is a CrewAI flow written in Python; crewai-rs runs declarative flows (flow.yaml), not Python `Flow` classes, so a crew added here would not run: write the flow as flow.yaml (`crewai create flow NAME` shows the form)",
                    dir.display()
                )
            }
            _ => format!(
                "{} holds no flow.yaml; run `crewai flow add-crew` in a flow project (`crewai create flow NAME` makes one), or name it with --project",
                dir.display()
            ),
        };
        return Err(Failure::config(anyhow!(message)));
    }
    let folder = scaffold_flow_crew(&args.name, &dir.join("crews")).map_err(Failure::config)?;
    println!(
        "Added crews/{folder} (config/agents.yaml, config/tasks.yaml).\nRun it from a method of the flow:\n\n  my_step:\n    listen: <a method>\n    crew: crews/{folder}\n"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaffolded_flow_loads_and_refuses_to_overwrite() {
        let parent = tempfile::tempdir().unwrap();
        let dir = scaffold_flow("My Flow", parent.path()).unwrap();
        let project = FlowProject::load(&dir).unwrap();
        assert_eq!(project.methods.len(), 4);
        assert!(scaffold_flow("My Flow", parent.path()).is_err());
    }

    #[test]
    fn an_added_crew_loads_and_is_not_written_twice() {
        let parent = tempfile::tempdir().unwrap();
        let dir = scaffold_flow("My Flow", parent.path()).unwrap();
        let folder = scaffold_flow_crew("Writing Crew", &dir.join("crews")).unwrap();
        assert_eq!(folder, "writing_crew");
        let project = crewai_project::Project::load(dir.join("crews/writing_crew")).unwrap();
        assert!(!project.agents.is_empty() && !project.tasks.is_empty());
        assert!(!dir.join("crews/writing_crew/Cargo.toml").exists());
        assert!(scaffold_flow_crew("Writing Crew", &dir.join("crews")).is_err());
    }
}
