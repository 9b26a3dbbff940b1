//! CrewAI's declarative flow files: `schema: crewai.flow/v1` (what `Flow.from_declaration`
//! loads), in YAML or JSON, run on [`crewai_flow::Flow`] with a JSON state.
//!
//! ## Two formats, one file name
//! A `flow.yaml` **without** `schema:` is crewai-rs's own flow format ([`FlowProject`]); one
//! **with** `schema: crewai.flow/v1` is CrewAI's, read here. [`AnyFlow::load`] tells them apart by
//! that top-level key (a folder without `flow.yaml` may hold `flow.json`); `crewai flow kickoff`,
//! `crewai flow plot` and `crewai run` take either.
//!
//! ```yaml
//! schema: crewai.flow/v1
//! name: ResearchFlow
//! state: { type: dict, default: { topic: AI agents } }   # kickoff inputs are laid over it
//! methods:
//!   pick:
//!     start: true
//!     do: { call: expression, expr: "size(state.topic) > 3 ? 'deep' : 'quick'" }
//!   route:
//!     listen: pick
//!     router: true
//!     emit: [deep, quick]
//!     do: { call: expression, expr: outputs.pick }
//!   research:
//!     listen: deep
//!     do:
//!       call: crew
//!       with:
//!         agents: { researcher: { role: Researcher, goal: "Research {topic}", backstory: Careful. } }
//!         tasks: [ { name: find, description: "Research {topic}", expected_output: Notes, agent: researcher } ]
//!         inputs: { topic: "${state.topic}" }
//! ```
//!
//! ## What runs
//! - Top level: `schema`, `name`, `description`, `state`, `config`, `persist`, `methods`.
//! - `state`: `type: dict` (or `unknown`) with `default`; `type: json_schema` with `json_schema`
//!   (and `default`): the schema's top-level property defaults apply, and the state after the
//!   kickoff inputs are laid over the defaults must satisfy the schema. The built flow checks
//!   it as it starts, before any action runs ([`FlowDeclaration::kickoff_state`] reports the same
//!   problems as diagnostics up front); the run's `id` is left out of the check unless the
//!   schema declares it. `type: pydantic` runs only from its `json_schema` fallback (with a
//!   warning that `ref` is not imported).
//! - `config`: `max_method_calls`, `suppress_flow_events` (the flow then reports to no event bus
//!   of the caller); `tracing: false`, `stream: false` and the other keys at their defaults.
//! - `config.memory: true` (or `{enabled: true, embedder: {provider, config}}`): the flow has a
//!   memory, rooted at `/flow/<name>` in the project's store (`.crewai/memory.db` beside the
//!   file), embedded by that embedder or by the crews' default rule (OpenAI's when `OPENAI_API_KEY` is set,
//!   else the offline model). Every crew the flow runs that sets no `memory:` of its own uses
//!   it, as CrewAI's agents use their crew's: what one method's crew learns, a later method's
//!   crew (and the next kickoff) recalls. A crew with `memory: true` keeps its own under
//!   `/crew/<name>`, one with `memory: false` has none; `call: agent` runs an agent on its
//!   own, which has no memory here.
//! - `persist: {enabled: true}` at the top (every method) or on a method: the state is saved
//!   after the method, as crewai-flow's `persist` does (SQLite).
//! - A method: `start: true` (or a condition: a conditional start), `listen: <condition>`,
//!   `router: true` with `emit: [labels]` (without `emit`, the labels are the names the
//!   listeners wait for that are not methods), `human_feedback` (`message`, `emit`,
//!   `default_outcome`; `llm` is not used: the answer is matched against the outcome names),
//!   `description`, `persist`, and `do:`. A condition is a method name, a label, or
//!   `{or: [..]}` / `{and: [..]}` of conditions. As in CrewAI, a method whose `human_feedback`
//!   has `emit` routes on the answer whatever `router`/`emit` say; `emit` without `router` loads
//!   with a warning.
//! - `do: {call: expression, expr}`: a CEL expression (see [`Expression`]) over `state` and
//!   `outputs`; its value is the method's output.
//! - `do: {call: crew, with: {agents, tasks, inputs, ...crew fields}}` (agents as a mapping, or a
//!   list of one-key mappings / mappings with `name`), or `do: {call: crew, from_declaration:
//!   <crew folder>}`, with an optional `inputs:` beside it laid over the crew's: agents, tasks and
//!   crew fields are those of CrewAI's YAML, checked and built by [`Project::from_values`] /
//!   [`Project::load`]; `inputs` are `${...}` templates (see [`Template`]). The output is the
//!   crew's output as JSON (`raw`, `json_dict`, `pydantic`, `tasks_output`, `token_usage`).
//! - `do: {call: agent, with: {role, goal, backstory, settings: {llm, ...}, tools, input}}`:
//!   `input` is a template that must render to text; the agent's fields (`settings` laid over
//!   the others) are those of `agents.yaml`. The output is `{raw, pydantic, agent_role,
//!   usage_metrics}`.
//!
//! The flow's result is the output of the method that completed last. A router's label is its
//! output when that is text, else the `raw` text of a crew or agent output (surrounding space
//! trimmed). Outputs are not written into the state (CrewAI's declarative actions have no state
//! writes either); later methods read them as `outputs.<method>`, and a method with
//! `human_feedback` as `outputs.<method>.output`, `.feedback` and `.outcome` once answered.
//!
//! ## What is refused (with the file, line and what to do)
//! `call: script` (trusted inline Python, not sandboxed), `call: code` and `call: tool` (Python
//! import references), `call: each`, `conversational`, `now()` in expressions, expression roots
//! other than `state`/`outputs`, an agent's `type`/`apps`/`mcps`/`response_format`, a crew's
//! `manager_agent` given as a Python reference, `human_feedback.provider`/`metadata`/`learn`,
//! `persist.persistence` (a Python backend), a router that is also a start, and the `config`
//! keys that need CrewAI's platform (`tracing: true`, `stream: true`, `input_provider`,
//! `checkpoint`, `defer_trace_finalization: true`). Unknown keys are refused
//! with the nearest known one, where CrewAI would ignore them.

mod actions;
mod expr;
mod load;
mod run;

use std::path::{Path, PathBuf};

use crewai_core::interpolate::Inputs;
use crewai_flow::{HumanFeedback, Trigger};
use serde_json::{Map, Value};

pub use expr::{EXPRESSION_ROOTS, Expression, ExpressionError, ExpressionScope, Segment, Template};

use crate::Project;
use crate::error::{Diagnostic, ProjectError};
use crate::flow_yaml::{FLOW_FILE, FlowProject};
use crate::options::BuildOptions;

/// A declaration written as JSON, looked for in a folder without `flow.yaml`.
pub const FLOW_JSON_FILE: &str = "flow.json";

/// The `schema:` value of CrewAI's declarative flows.
pub const FLOW_SCHEMA: &str = "crewai.flow/v1";

/// A loaded and checked `crewai.flow/v1` file.
#[derive(Debug, Clone)]
pub struct FlowDeclaration {
    /// The folder of the file: relative paths (`from_declaration`, `output_file`) start here.
    pub root: PathBuf,
    /// The file as messages name it.
    pub file: String,
    pub name: String,
    pub description: Option<String>,
    pub state: StateContract,
    /// `config.max_method_calls` (default 100).
    pub max_method_calls: u32,
    /// `config.suppress_flow_events: true` turns this off.
    pub emit_events: bool,
    /// `config.memory`: the flow's memory, which its crews use unless they set their own.
    pub memory: Option<FlowMemory>,
    /// Top-level `persist: {enabled: true}`.
    pub persist: bool,
    /// Methods in file order.
    pub methods: Vec<DeclaredMethod>,
    /// What loads but differs from CrewAI (shown by the CLI on stderr).
    pub warnings: Vec<String>,
}

/// `config.memory` of a declaration.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowMemory {
    /// `embedder:` (CrewAI's `{provider, config}`); `None`: the crews' default rule.
    pub embedder: Option<Value>,
}

/// The state a kickoff starts from, and the schema it must satisfy.
#[derive(Debug, Clone, Default)]
pub struct StateContract {
    pub defaults: Map<String, Value>,
    pub json_schema: Option<Value>,
}

impl StateContract {
    /// Why `state` does not fit the schema, one message per problem (none without a schema).
    /// The run's `id`, which the engine adds, is left out unless the schema declares it.
    fn problems(&self, state: &Map<String, Value>) -> Vec<String> {
        let Some(schema) = &self.json_schema else {
            return Vec::new();
        };
        let validator = match jsonschema::validator_for(schema) {
            Ok(validator) => validator,
            Err(err) => {
                return vec![format!(
                    "the state's json_schema is not a valid JSON Schema: {err}"
                )];
            }
        };
        let mut document = state.clone();
        let declares_id = schema
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|properties| properties.contains_key("id"));
        if !declares_id && !self.defaults.contains_key("id") {
            document.remove("id");
        }
        let document = Value::Object(document);
        validator
            .iter_errors(&document)
            .map(|err| {
                let at = err.instance_path().to_string();
                let at = if at.is_empty() {
                    "the state".to_string()
                } else {
                    format!("state{}", at.replace('/', "."))
                };
                format!("the kickoff state does not fit the state's json_schema: {at}: {err}; pass the missing or corrected values as kickoff inputs")
            })
            .collect()
    }

    /// [`StateContract::problems`] as one message, for the run to fail with.
    pub(super) fn check_run_state(&self, state: &Map<String, Value>) -> Result<(), String> {
        let problems = self.problems(state);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }
}

/// One method of a declaration.
#[derive(Debug, Clone)]
pub struct DeclaredMethod {
    pub name: String,
    pub description: Option<String>,
    pub role: DeclaredRole,
    pub action: Action,
    pub persist: bool,
    pub feedback: Option<HumanFeedback>,
}

/// When a method runs.
#[derive(Debug, Clone)]
pub enum DeclaredRole {
    /// `start: true`.
    Start,
    /// `start: <condition>`.
    StartOn(Trigger),
    /// `listen: <condition>`.
    Listen(Trigger),
    /// `router: true` + `listen: <condition>`; the output is one of `labels`.
    Router {
        trigger: Trigger,
        labels: Vec<String>,
    },
}

/// What a method does (`do:`).
#[derive(Debug, Clone)]
pub enum Action {
    Expression(Expression),
    Crew {
        project: Box<Project>,
        inputs: Template,
    },
    Agent {
        project: Box<Project>,
        key: String,
        input: Template,
    },
}

impl FlowDeclaration {
    /// Reads a `crewai.flow/v1` file (YAML, or JSON by its `.json` extension); every problem
    /// comes back together, each with its line.
    pub fn load(path: impl AsRef<Path>) -> Result<FlowDeclaration, ProjectError> {
        load::load(path.as_ref())
    }

    /// The state a kickoff with `inputs` starts from: the defaults with the inputs laid over
    /// them, checked against the state's JSON schema when it has one (the built flow checks it
    /// again as it starts, so a caller need not call this first; it reports every problem as a
    /// diagnostic before anything runs).
    pub fn kickoff_state(&self, inputs: &Inputs) -> Result<Inputs, ProjectError> {
        let mut state = self.state.defaults.clone();
        state.extend(inputs.iter().map(|(k, v)| (k.clone(), v.clone())));
        let problems = self.state.problems(&state);
        if !problems.is_empty() {
            return Err(ProjectError::Invalid(
                problems
                    .into_iter()
                    .map(|problem| Diagnostic::in_file(&self.file, problem))
                    .collect(),
            ));
        }
        Ok(state.into_iter().collect())
    }

    /// Builds the runnable flow; crews and agents are built at each call with these options.
    pub fn build(&self, options: &BuildOptions) -> Result<crewai_flow::Flow, ProjectError> {
        self.builder(options)?.build().map_err(|err| {
            ProjectError::build(format!("flow '{}' ({})", self.name, self.file), err)
        })
    }

    /// The engine's builder with every declared method on it, for a caller that adds what a
    /// file cannot say before building: a feedback provider (a web UI's, say) or a
    /// persistence backend. Fails when the flow's memory cannot be opened (its store or
    /// embedder).
    pub fn builder(
        &self,
        options: &BuildOptions,
    ) -> Result<crewai_flow::FlowBuilder, ProjectError> {
        run::builder(self, options)
    }
}

/// A flow of either format: our `flow.yaml` ([`FlowProject`]) or a `crewai.flow/v1` file.
#[derive(Debug, Clone)]
pub enum AnyFlow {
    Yaml(FlowProject),
    Declaration(FlowDeclaration),
}

impl AnyFlow {
    /// Loads `path`: a folder holding `flow.yaml` (or `flow.json`), or a flow file. A file whose
    /// top level has a `schema:` key is a CrewAI declaration (and must say `crewai.flow/v1`);
    /// `flow.yaml` without one is our own format.
    pub fn load(path: impl AsRef<Path>) -> Result<AnyFlow, ProjectError> {
        let file = flow_file(path.as_ref());
        if load::has_schema_key(&file)? {
            return FlowDeclaration::load(&file).map(AnyFlow::Declaration);
        }
        let is_flow_yaml = file.file_name().is_some_and(|n| n == FLOW_FILE);
        match (is_flow_yaml, file.parent()) {
            (true, Some(dir)) => FlowProject::load(dir).map(AnyFlow::Yaml),
            _ => Err(ProjectError::Invalid(vec![Diagnostic::in_file(
                file.display().to_string(),
                format!(
                    "has no `schema: {FLOW_SCHEMA}`; a flow file other than flow.yaml must be a CrewAI flow declaration"
                ),
            )])),
        }
    }

    /// Whether the folder or file `path` holds a `crewai.flow/v1` declaration (`crewai run`
    /// runs those as flows): `false` when there is no flow file or it is our own format, an
    /// error when the flow file cannot be read or parsed.
    pub fn is_declaration(path: impl AsRef<Path>) -> Result<bool, ProjectError> {
        let file = flow_file(path.as_ref());
        if !file.is_file() {
            return Ok(false);
        }
        load::has_schema_key(&file)
    }

    pub fn name(&self) -> &str {
        match self {
            AnyFlow::Yaml(flow) => &flow.name,
            AnyFlow::Declaration(flow) => &flow.name,
        }
    }

    /// The folder relative paths start from.
    pub fn root(&self) -> &Path {
        match self {
            AnyFlow::Yaml(flow) => &flow.root,
            AnyFlow::Declaration(flow) => &flow.root,
        }
    }

    pub fn warnings(&self) -> &[String] {
        match self {
            AnyFlow::Yaml(_) => &[],
            AnyFlow::Declaration(flow) => &flow.warnings,
        }
    }

    /// The inputs a kickoff gives the flow (a declaration checks them against its state).
    pub fn kickoff_inputs(&self, inputs: &Inputs) -> Result<Inputs, ProjectError> {
        match self {
            AnyFlow::Yaml(_) => Ok(inputs.clone()),
            AnyFlow::Declaration(flow) => flow.kickoff_state(inputs),
        }
    }

    pub fn build(&self, options: &BuildOptions) -> Result<crewai_flow::Flow, ProjectError> {
        match self {
            AnyFlow::Yaml(flow) => flow.build(options),
            AnyFlow::Declaration(flow) => flow.build(options),
        }
    }
}

/// The flow file of `path`: the path itself when it is a file, else the folder's `flow.yaml`, or
/// its `flow.json` when only that exists.
fn flow_file(path: &Path) -> PathBuf {
    if !path.is_dir() {
        return path.to_path_buf();
    }
    let yaml = path.join(FLOW_FILE);
    let json = path.join(FLOW_JSON_FILE);
    if !yaml.exists() && json.is_file() {
        json
    } else {
        yaml
    }
}
