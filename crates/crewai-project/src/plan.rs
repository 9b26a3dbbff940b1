//! The dry run: what a kickoff would do, in order, with the prompts rendered, calling no model.

use std::fmt;

use crewai_core::interpolate::{Inputs, Location, interpolate, python_str};
use crewai_core::preview::{self, TaskLoop};
use crewai_tools::ToolHandle;
use serde::Serialize;

use crate::check::OutputKind;
use crate::error::{Diagnostic, ProjectError};
use crate::options::BuildOptions;
use crate::registry::ToolRegistry;
use crate::spec::{ProcessSpec, ToolRef};
use crate::{Project, ResolvedTools};

/// Which earlier outputs a task sees.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "tasks")]
pub enum ContextPlan {
    /// No `context:` given: every earlier task's output (CrewAI's default).
    AllPrevious,
    /// The outputs of these tasks.
    Tasks(Vec<String>),
}

/// An agent as it will run.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedAgent {
    pub key: String,
    pub role: String,
    /// The model, or `None` when the default model is used.
    pub llm: Option<String>,
    pub tools: Vec<String>,
    /// Each tool with the name and constructor arguments the project wrote for it
    /// (`search_the_internet_with_serper (SerperDevTool, n_results=5)`).
    pub tool_labels: Vec<String>,
    pub allow_delegation: bool,
    /// The agent's MCP servers (`python3_server_py (stdio: python3 server.py; tools add)`),
    /// which a kickoff starts and a dry run does not.
    pub mcp_servers: Vec<String>,
    /// How it plans each task (`medium effort, at most 20 steps, 3 replans`), when it does.
    pub planning: Option<String>,
    /// The rendered system prompt.
    pub system_prompt: String,
}

/// A task as it will run.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedTask {
    pub name: String,
    /// The agent's key (in a hierarchical crew, the agent the manager should delegate to, if set).
    pub agent: Option<String>,
    /// The tools the agent has for this task (task tools replace agent tools, as in CrewAI).
    pub tools: Vec<String>,
    /// [`PlannedAgent::tool_labels`] for these tools.
    pub tool_labels: Vec<String>,
    pub context: ContextPlan,
    pub async_execution: bool,
    /// `json` / `pydantic` when the answer is structured.
    pub output: Option<&'static str>,
    pub output_file: Option<String>,
    pub guardrails: Vec<String>,
    pub human_input: bool,
    /// The user message the agent receives (before context is added).
    pub prompt: String,
}

/// What a kickoff of the project would do.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub crew: String,
    /// `sequential`, `hierarchical` or `consensual`.
    pub process: &'static str,
    /// The manager of a hierarchical crew: an agent key, or `manager_llm: <model>`.
    pub manager: Option<String>,
    /// `planning: true`: the planner's model (`None`: the default model). The planner is one
    /// model call before the first task; its plans are appended to the task descriptions.
    pub planning: Option<Option<String>>,
    /// `process: consensual`: who votes and how the answer is decided.
    pub consensus: Option<PlannedConsensus>,
    pub inputs: Inputs,
    pub agents: Vec<PlannedAgent>,
    pub tasks: Vec<PlannedTask>,
    /// Things that do not stop the run, each with file and line.
    pub warnings: Vec<String>,
}

/// How a consensual crew works each task.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedConsensus {
    /// Agent keys, in the order their answers are labelled A, B, ...
    pub voters: Vec<String>,
    pub revisions: u32,
    /// `vote` or `judge`.
    pub decision: &'static str,
    /// The judge's model (`None`: the default model, or no judge).
    pub judge_llm: Option<String>,
    /// The fewest model calls one task takes: `voters × (1 + revisions)` answers, plus a vote
    /// per voter or one judge call (tool calls and conversions add to it).
    pub calls_per_task: u32,
}

/// The tools the engine adds to a delegating agent (CrewAI's names, sanitised). crewai-core
/// builds them only inside a run, so the plan names them here.
const DELEGATION_TOOLS: [&str; 2] = ["delegate_work_to_coworker", "ask_question_to_coworker"];

fn process_name(process: ProcessSpec) -> &'static str {
    match process {
        ProcessSpec::Sequential => "sequential",
        ProcessSpec::Hierarchical => "hierarchical",
        ProcessSpec::Consensual => "consensual",
    }
}

/// Interpolates one text field (already checked for missing placeholders).
fn render(
    text: &str,
    inputs: &Inputs,
    owner: &str,
    field: &'static str,
) -> Result<String, ProjectError> {
    interpolate(
        text,
        inputs,
        &Location {
            owner: owner.to_string(),
            field,
        },
    )
    .map_err(|err| ProjectError::build(owner, err))
}

/// The tools of one `tools:` list as the plan shows them: for each, the name the model calls
/// and a label with what the project wrote when that says more (a crewai-tools class name,
/// constructor arguments). A Python tool no worker has registered yet is shown from what
/// crew.py says of it (`python` gives its name and label); the others take the resolved
/// handles in order.
fn planned_tools(
    refs: Option<&Vec<ToolRef>>,
    handles: Option<&Vec<ToolHandle>>,
    python: impl Fn(&ToolRef) -> Option<(String, String)>,
) -> (Vec<String>, Vec<String>) {
    let Some(handles) = handles else {
        return (Vec::new(), Vec::new());
    };
    let refs = refs.map(Vec::as_slice).unwrap_or_default();
    let mut handles = handles.iter();
    let mut names = Vec::new();
    let mut labels = Vec::new();
    for written in refs {
        if let Some((name, label)) = python(written) {
            names.push(name);
            labels.push(label);
            continue;
        }
        let Some(handle) = handles.next() else { break };
        let mut said: Vec<String> = Vec::new();
        if written.name != handle.name() {
            said.push(written.name.clone());
        }
        said.extend(
            written
                .args
                .iter()
                .map(|(k, v)| format!("{k}={}", python_str(v))),
        );
        names.push(handle.name().to_string());
        labels.push(match said.is_empty() {
            true => handle.name().to_string(),
            false => format!("{} ({})", handle.name(), said.join(", ")),
        });
    }
    // Handles no `tools:` entry wrote: the code tool `allow_code_execution` adds.
    for handle in handles {
        names.push(handle.name().to_string());
        labels.push(handle.name().to_string());
    }
    (names, labels)
}

impl Project {
    /// Checks inputs, tools and the code the files name, and renders what would run. `inputs`
    /// are laid over the crew file's `inputs:`. Guardrails written as mappings, conditions and
    /// callbacks are refused here, as nothing supplies them; see [`Project::plan_with`].
    pub fn plan(&self, inputs: &Inputs, tools: &ToolRegistry) -> Result<Plan, ProjectError> {
        self.plan_with(inputs, &BuildOptions::new(tools.clone()))
    }

    /// [`Project::plan`] with the tools and the code resolver of `options`, as a build with
    /// them would check.
    pub fn plan_with(&self, inputs: &Inputs, options: &BuildOptions) -> Result<Plan, ProjectError> {
        let inputs = self.effective_inputs(inputs);
        let mut diagnostics: Vec<Diagnostic> = self.check_inputs(&inputs);
        if let Err(list) = self.resolve_code(options.code_resolver.as_deref()) {
            diagnostics.extend(list);
        }
        let search_base = if self.names_search_tools() {
            self.knowledge_base(options)?
        } else {
            None
        };
        let registry = self.registry_with_search(&options.tools, search_base.as_ref());
        let resolved = match self.resolve_tools_with(&registry, true) {
            Ok(resolved) => Some(resolved),
            Err(ProjectError::Invalid(list)) => {
                diagnostics.extend(list);
                None
            }
            Err(other) => return Err(other),
        };
        if !diagnostics.is_empty() {
            return Err(ProjectError::Invalid(diagnostics));
        }
        let resolved = resolved.unwrap_or_default();
        let mut plan = self.render_plan(&inputs, &resolved, &options.tools)?;
        // A dry run calls no tool, so a missing key only warns here; `build` refuses to start.
        plan.warnings.extend(
            self.check_tool_env(&resolved)
                .iter()
                .map(ToString::to_string),
        );
        Ok(plan)
    }

    fn render_plan(
        &self,
        inputs: &Inputs,
        resolved: &ResolvedTools,
        registry: &ToolRegistry,
    ) -> Result<Plan, ProjectError> {
        let python = |written: &ToolRef| {
            self.pending_python_tool(written, registry).map(|p| {
                let mut said = vec![format!("Python: {}", p.module)];
                said.extend(
                    p.kwargs
                        .iter()
                        .map(|(k, v)| format!("{k}={}", python_str(v))),
                );
                (p.attr.clone(), format!("{} ({})", p.attr, said.join(", ")))
            })
        };
        let tools_of = |refs: Option<&Vec<ToolRef>>, handles: Option<&Vec<ToolHandle>>| {
            planned_tools(refs, handles.or(Some(&Vec::new())), python)
        };
        let mut agents = Vec::new();
        for agent in &self.agents {
            let owner = format!("agent '{}'", agent.key);
            let s = &agent.spec;
            let role = render(
                s.role.as_deref().unwrap_or_default(),
                inputs,
                &owner,
                "role",
            )?;
            let goal = render(
                s.goal.as_deref().unwrap_or_default(),
                inputs,
                &owner,
                "goal",
            )?;
            let backstory = render(
                s.backstory.as_deref().unwrap_or_default(),
                inputs,
                &owner,
                "backstory",
            )?;
            let agent_tools = tools_of(s.tools.as_ref(), resolved.agents.get(&agent.key));
            agents.push(PlannedAgent {
                key: agent.key.clone(),
                system_prompt: preview::system_prompt(&role, &goal, &backstory),
                role,
                llm: s
                    .llm
                    .as_ref()
                    .map(|l| l.model.clone())
                    .filter(|m| !m.is_empty()),
                tools: agent_tools.0,
                tool_labels: agent_tools.1,
                allow_delegation: s.allow_delegation.unwrap_or(false),
                mcp_servers: mcp_labels(s, &self.root),
                planning: crate::planning::planning_label(s),
            });
        }
        let mut tasks = Vec::new();
        for task in &self.tasks {
            let owner = format!("task '{}'", task.key);
            let s = &task.spec;
            // The engine's own task prompt (description, expected output, Markdown and schema
            // instructions), from the task as it will be built.
            let prompt = self
                .task_from(task, None, None, None)?
                .interpolated(inputs)
                .map_err(|err| ProjectError::build(owner.clone(), err))?
                .prompt();
            let schema = self.output_schema(&task.key);
            let task_tools = tools_of(s.tools.as_ref(), resolved.tasks.get(&task.key));
            let hierarchical = self.crew.process.unwrap_or_default() == ProcessSpec::Hierarchical;
            let (mut tools, mut labels) = match (&s.agent, task_tools.0.is_empty()) {
                _ if hierarchical => (Vec::new(), Vec::new()),
                (_, false) => task_tools,
                (Some(agent), true) => tools_of(
                    self.agent(agent).and_then(|a| a.spec.tools.as_ref()),
                    resolved.agents.get(agent),
                ),
                (None, true) => (Vec::new(), Vec::new()),
            };
            // In a hierarchical crew the manager runs every task through delegation; in a
            // sequential one an agent with `allow_delegation` may hand work to the others.
            let delegates = hierarchical
                || (self.members().count() > 1
                    && s.agent
                        .as_deref()
                        .and_then(|key| self.agent(key))
                        .is_some_and(|a| a.spec.allow_delegation.unwrap_or(false)));
            if delegates {
                tools.extend(DELEGATION_TOOLS.iter().map(|t| t.to_string()));
                labels.extend(DELEGATION_TOOLS.iter().map(|t| t.to_string()));
            }
            let message = if tools.is_empty() {
                preview::task_message(&prompt, TaskLoop::NoTools)
            } else {
                preview::task_message(&prompt, TaskLoop::NativeTools)
            };
            let guardrails = match (&s.guardrails, &s.guardrail) {
                (Some(list), _) => list.to_vec(),
                (None, Some(one)) => vec![one.clone()],
                (None, None) => Vec::new(),
            }
            .into_iter()
            .filter_map(|g| match g {
                crate::spec::GuardrailSpec::Rule(rule) => Some(rule),
                crate::spec::GuardrailSpec::Reference(_) => None,
            })
            .collect();
            tasks.push(PlannedTask {
                name: task.name().to_string(),
                agent: s.agent.clone(),
                tools,
                tool_labels: labels,
                context: match &s.context {
                    None => ContextPlan::AllPrevious,
                    Some(list) => ContextPlan::Tasks(list.clone()),
                },
                async_execution: s.async_execution.unwrap_or(false),
                output: schema.map(|s| match s.kind {
                    OutputKind::Json => "json",
                    OutputKind::Pydantic => "pydantic",
                }),
                output_file: s
                    .output_file
                    .as_deref()
                    .map(|f| render(f, inputs, &owner, "output_file"))
                    .transpose()?,
                guardrails,
                human_input: s.human_input.unwrap_or(false),
                prompt: message,
            });
        }
        let process = self.crew.process.unwrap_or_default();
        let manager = match process {
            ProcessSpec::Sequential | ProcessSpec::Consensual => None,
            ProcessSpec::Hierarchical => self.crew.manager_agent.clone().or_else(|| {
                self.crew
                    .manager_llm
                    .as_ref()
                    .map(|l| format!("manager_llm: {}", l.model))
            }),
        };
        let planning = (self.crew.planning == Some(true))
            .then(|| self.crew.planning_llm.as_ref().map(|l| l.model.clone()));
        let consensus = (process == ProcessSpec::Consensual)
            .then(|| self.planned_consensus())
            .flatten();
        Ok(Plan {
            crew: self.name(),
            process: process_name(process),
            manager,
            planning,
            consensus,
            inputs: inputs.clone(),
            agents,
            tasks,
            warnings: self.warnings.iter().map(ToString::to_string).collect(),
        })
    }
}

fn indent(text: &str, by: &str) -> String {
    text.lines()
        .map(|l| format!("{by}{l}").trim_end().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "Crew '{}' ({} process, {} agents, {} tasks)",
            self.crew,
            self.process,
            self.agents.len(),
            self.tasks.len()
        )?;
        if let Some(manager) = &self.manager {
            writeln!(f, "Manager: {manager}")?;
        }
        if let Some(model) = &self.planning {
            writeln!(
                f,
                "Planning: first, one call to the planner [llm: {}] for a plan per task, appended to each task's description",
                model.as_deref().unwrap_or("default")
            )?;
        }
        if let Some(consensus) = &self.consensus {
            let decision = match consensus.judge_llm.as_deref() {
                Some(model) => format!("decided by a judge [llm: {model}]"),
                None if consensus.decision == "judge" => {
                    "decided by a judge [llm: default]".to_string()
                }
                None => "decided by a vote".to_string(),
            };
            writeln!(
                f,
                "Consensus: voters {}; {} revision round(s); {decision}; at least {} model calls per task",
                consensus.voters.join(", "),
                consensus.revisions,
                consensus.calls_per_task
            )?;
        }
        if !self.inputs.is_empty() {
            let shown: Vec<String> = self
                .inputs
                .iter()
                .map(|(k, v)| format!("{k}={}", crewai_core::interpolate::python_str(v)))
                .collect();
            writeln!(f, "Inputs: {}", shown.join(", "))?;
        }
        writeln!(f, "\nAgents:")?;
        for agent in &self.agents {
            writeln!(
                f,
                "  {} — {} [llm: {}; tools: {}{}]",
                agent.key,
                agent.role.trim(),
                agent.llm.as_deref().unwrap_or("default"),
                if agent.tool_labels.is_empty() {
                    "none".to_string()
                } else {
                    agent.tool_labels.join(", ")
                },
                if agent.allow_delegation {
                    "; may delegate"
                } else {
                    ""
                }
            )?;
            if !agent.mcp_servers.is_empty() {
                writeln!(
                    f,
                    "    MCP servers (started at kickoff, not in a dry run): {}",
                    agent.mcp_servers.join(", ")
                )?;
            }
            if let Some(planning) = &agent.planning {
                writeln!(f, "    plans each task: {planning}")?;
            }
        }
        writeln!(f, "\nTasks:")?;
        for (i, task) in self.tasks.iter().enumerate() {
            writeln!(
                f,
                "  {}. {}{}",
                i + 1,
                task.name,
                if task.async_execution { " (async)" } else { "" }
            )?;
            match (&self.manager, &task.agent) {
                (Some(manager), Some(agent)) => {
                    writeln!(f, "     agent: {manager} (manager), delegating to {agent}")?
                }
                (Some(manager), None) => writeln!(
                    f,
                    "     agent: {manager} (manager), delegating to the agent it picks"
                )?,
                (None, agent) => writeln!(f, "     agent: {}", agent.as_deref().unwrap_or("none"))?,
            }
            writeln!(
                f,
                "     tools: {}",
                if task.tool_labels.is_empty() {
                    "none".to_string()
                } else {
                    task.tool_labels.join(", ")
                }
            )?;
            let context = match &task.context {
                ContextPlan::AllPrevious if i == 0 => "none".to_string(),
                ContextPlan::AllPrevious => "all earlier tasks".to_string(),
                ContextPlan::Tasks(list) if list.is_empty() => "none".to_string(),
                ContextPlan::Tasks(list) => list.join(", "),
            };
            writeln!(f, "     context: {context}")?;
            if let Some(output) = task.output {
                writeln!(f, "     output: {output}")?;
            }
            if let Some(file) = &task.output_file {
                writeln!(f, "     output_file: {file}")?;
            }
            for guardrail in &task.guardrails {
                writeln!(f, "     guardrail: {}", guardrail.trim())?;
            }
            writeln!(f, "     prompt:\n{}", indent(&task.prompt, "       | "))?;
        }
        for warning in &self.warnings {
            writeln!(f, "warning: {warning}")?;
        }
        Ok(())
    }
}

/// How the plan shows an agent's `mcps:` (already checked when the project loaded): the name
/// its tools are prefixed with, the transport and where (never a header or an `env` value),
/// and the tools it keeps.
fn mcp_labels(spec: &crate::spec::AgentSpec, root: &std::path::Path) -> Vec<String> {
    let (Some(mcps), Some(origin)) = (&spec.mcps, spec.origin("mcps")) else {
        return Vec::new();
    };
    let servers = crate::mcp::read_mcps(mcps, origin, root).unwrap_or_default();
    servers
        .iter()
        .map(|server| {
            let tools = server
                .tool_filter
                .as_ref()
                .map(|names| format!("; tools {}", names.join(", ")))
                .unwrap_or_default();
            format!(
                "{} ({}: {}{tools})",
                server.server_name(),
                server.transport.kind(),
                server.location()
            )
        })
        .collect()
}
