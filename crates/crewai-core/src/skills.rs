//! Skills on agents and crews (CrewAI's Agent Skills): what an execution loads, what its system
//! prompt discloses, and the tools that disclose the rest.
//!
//! An agent's [`SkillSource`]s are resolved when an execution starts (the files are read on
//! tokio's blocking pool), so a crew's kickoff sees the skill folders as they are then, and the
//! events of the discovery go on the run's bus. Skills at the metadata level (the default for
//! folders) appear in the system prompt's catalog and are loaded on demand by the `load_skill`
//! tool; skills at the instructions or resources level are written into the system prompt.
//! When a skill has files under `scripts/`, `references/` or `assets/`, a `read_skill_resource`
//! tool reads them, never outside the skill's folder. See [`crate::prompts::skills`] for where
//! the block goes and why it keeps the prompt prefix stable.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use crewai_llm::error_chain;
use crewai_tools::{DynamicTool, ToolContext, ToolError, ToolHandle, ToolOutput, ToolSet};
use serde_json::{Value, json};
use uuid::Uuid;

pub use crewai_skills::{
    DisclosureLevel, Resolution, ResolveStep, Skill, SkillError, SkillSource, resolve,
};

use crate::agent::Agent;
use crate::error::AgentError;
use crate::events::{EventBus, EventKind};
use crate::prompts::skills as prompts;

/// The name CrewAI gives the loader tool (suffixed when the agent has a tool of that name).
pub const LOAD_SKILL_TOOL: &str = "load_skill";
/// The resource reader's name (suffixed likewise).
pub const READ_RESOURCE_TOOL: &str = "read_skill_resource";
/// At most this much of a resource file is returned to the model.
pub const MAX_RESOURCE_BYTES: usize = 64 * 1024;

/// The skills of one execution, with the names its tools got.
#[derive(Clone)]
pub(crate) struct ActiveSkills {
    skills: Arc<Vec<Skill>>,
    loader_tool: String,
    resource_tool: Option<String>,
}

impl ActiveSkills {
    /// The block of the system prompt.
    pub(crate) fn system_block(&self) -> String {
        prompts::system_block(
            &self.skills,
            &self.loader_tool,
            self.resource_tool.as_deref(),
        )
    }
}

/// Where an execution's skill events are reported.
pub(crate) struct SkillScope<'a> {
    pub(crate) events: &'a EventBus,
    pub(crate) parent: Option<Uuid>,
    pub(crate) task_name: Option<&'a str>,
    /// The crew's skills, after the agent's own.
    pub(crate) crew_skills: &'a [SkillSource],
}

/// Resolves `agent`'s skills for one execution, reports what that took, and adds the skill tools
/// to `tools`. `None` when the agent has no skills.
pub(crate) async fn prepare(
    agent: &Agent,
    scope: SkillScope<'_>,
    tools: &mut ToolSet,
) -> Result<Option<ActiveSkills>, AgentError> {
    if agent.skills().is_empty() && scope.crew_skills.is_empty() {
        return Ok(None);
    }
    let role = agent.role().to_string();
    let sources: Vec<SkillSource> = agent
        .skills()
        .iter()
        .chain(scope.crew_skills)
        .cloned()
        .collect();
    let resolved = tokio::task::spawn_blocking(move || resolve(&sources))
        .await
        .map_err(|join| AgentError::Config {
            role: Some(role.clone()),
            message: format!("loading its skills was interrupted: {join}"),
        })?;
    let resolution = match resolved {
        Ok(resolution) => resolution,
        Err(source) => {
            scope.events.emit(
                scope.parent,
                EventKind::SkillLoadFailed {
                    agent_role: Some(role.clone()),
                    skill_name: failed_skill_name(&source),
                    skill_path: None,
                    error: error_chain(&source),
                },
            );
            return Err(AgentError::Skills { role, source });
        }
    };
    report(&resolution, &role, &scope);

    let skills = Arc::new(resolution.skills);
    let loader_tool = free_name(tools, LOAD_SKILL_TOOL);
    let has_resources = skills
        .iter()
        .any(|s| s.folder().is_some() && !s.resources().is_empty());
    let resource_tool = has_resources.then(|| free_name(tools, READ_RESOURCE_TOOL));
    if skills
        .iter()
        .any(|s| s.level() == DisclosureLevel::Metadata)
    {
        tools.insert(loader(
            &loader_tool,
            skills.clone(),
            resource_tool.clone(),
            scope.events.clone(),
        ));
    }
    if let Some(name) = &resource_tool {
        tools.insert(resource_reader(name, skills.clone()));
    }
    Ok(Some(ActiveSkills {
        skills,
        loader_tool,
        resource_tool,
    }))
}

/// The events of a resolution, then `skill_activated` and `skill_used` for each skill written
/// into the system prompt.
fn report(resolution: &Resolution, role: &str, scope: &SkillScope<'_>) {
    let agent_role = || Some(role.to_string());
    let path_text = |p: &std::path::Path| p.display().to_string();
    for step in &resolution.steps {
        let kind = match step {
            ResolveStep::DiscoveryStarted { search_path } => EventKind::SkillDiscoveryStarted {
                agent_role: agent_role(),
                search_path: path_text(search_path),
            },
            ResolveStep::DiscoveryCompleted {
                search_path,
                skill_names,
            } => EventKind::SkillDiscoveryCompleted {
                agent_role: agent_role(),
                search_path: path_text(search_path),
                skills_found: skill_names.len(),
                skill_names: skill_names.clone(),
            },
            ResolveStep::Loaded {
                skill_name,
                skill_path,
                level,
            } => EventKind::SkillLoaded {
                agent_role: agent_role(),
                skill_name: skill_name.clone(),
                skill_path: skill_path.as_deref().map(path_text),
                disclosure_level: level.number(),
            },
            ResolveStep::LoadFailed {
                skill_name,
                skill_path,
                error,
            } => EventKind::SkillLoadFailed {
                agent_role: agent_role(),
                skill_name: skill_name.clone(),
                skill_path: Some(path_text(skill_path)),
                error: error_chain(error.as_ref()),
            },
        };
        scope.events.emit(scope.parent, kind);
    }
    for skill in resolution
        .skills
        .iter()
        .filter(|s| s.level() >= DisclosureLevel::Instructions)
    {
        for kind in used_kinds(skill, role, scope.task_name, true) {
            scope.events.emit(scope.parent, kind);
        }
    }
}

/// `skill_activated` (when `activated`) and `skill_used` for `skill`.
fn used_kinds(
    skill: &Skill,
    role: &str,
    task_name: Option<&str>,
    activated: bool,
) -> Vec<EventKind> {
    let skill_path = skill.folder().map(|f| f.display().to_string());
    let level = skill.level().max(DisclosureLevel::Instructions).number();
    let mut kinds = Vec::with_capacity(2);
    if activated {
        kinds.push(EventKind::SkillActivated {
            agent_role: Some(role.to_string()),
            task_name: task_name.map(str::to_string),
            skill_name: skill.name().to_string(),
            skill_path: skill_path.clone(),
            disclosure_level: level,
        });
    }
    kinds.push(EventKind::SkillUsed {
        agent_role: Some(role.to_string()),
        task_name: task_name.map(str::to_string),
        skill_name: skill.name().to_string(),
        skill_path,
        disclosure_level: level,
    });
    kinds
}

/// `base`, or `base_2`, `base_3`, ... when the agent already has a tool of that name (a tool of
/// the user's must not hide the loader the catalog points at).
fn free_name(tools: &ToolSet, base: &str) -> String {
    let taken: HashSet<&str> = tools.names().into_iter().collect();
    if !taken.contains(base) {
        return base.to_string();
    }
    (2..)
        .map(|n| format!("{base}_{n}"))
        .find(|candidate| !taken.contains(candidate.as_str()))
        .unwrap_or_else(|| base.to_string())
}

/// The `load_skill(skill_name)` tool over the execution's skills.
fn loader(
    name: &str,
    skills: Arc<Vec<Skill>>,
    resource_tool: Option<String>,
    events: EventBus,
) -> ToolHandle {
    // Activation is reported once per execution; every call is a use.
    let activated: Arc<Mutex<HashSet<String>>> = Arc::default();
    let parameters = json!({
        "type": "object",
        "properties": {
            "skill_name": {"type": "string", "description": prompts::LOAD_SKILL_ARGUMENT}
        },
        "required": ["skill_name"]
    });
    DynamicTool::new(
        name,
        prompts::LOAD_SKILL_DESCRIPTION,
        parameters,
        move |args: Value, ctx: ToolContext| {
            let (skills, resource_tool, events, activated) = (
                skills.clone(),
                resource_tool.clone(),
                events.clone(),
                activated.clone(),
            );
            async move {
                let requested = args["skill_name"].as_str().unwrap_or_default().trim();
                let Some(skill) = skills.iter().find(|s| s.name() == requested) else {
                    let names: Vec<&str> = skills.iter().map(Skill::name).collect();
                    return Ok(ToolOutput::Text(prompts::unknown_skill(requested, &names)));
                };
                let first = activated
                    .lock()
                    .map(|mut seen| seen.insert(skill.name().to_string()))
                    .unwrap_or(true);
                let parent = ctx
                    .parent_event_id
                    .as_deref()
                    .and_then(|id| Uuid::parse_str(id).ok());
                let role = ctx.agent_role.clone().unwrap_or_default();
                for kind in used_kinds(skill, &role, ctx.task_name.as_deref(), first) {
                    events.emit(parent, kind);
                }
                Ok(ToolOutput::Text(prompts::loaded_skill(
                    skill,
                    resource_tool.as_deref(),
                )))
            }
        },
    )
    .into_handle()
    .with_cache_function(|_, _| false)
}

/// The `read_skill_resource(skill_name, path)` tool: a file inside one skill's folder.
fn resource_reader(name: &str, skills: Arc<Vec<Skill>>) -> ToolHandle {
    let parameters = json!({
        "type": "object",
        "properties": {
            "skill_name": {"type": "string", "description": prompts::READ_RESOURCE_SKILL_ARGUMENT},
            "path": {"type": "string", "description": prompts::READ_RESOURCE_PATH_ARGUMENT}
        },
        "required": ["skill_name", "path"]
    });
    DynamicTool::new(
        name,
        prompts::READ_RESOURCE_DESCRIPTION,
        parameters,
        move |args: Value, _ctx: ToolContext| {
            let skills = skills.clone();
            async move {
                let requested = args["skill_name"].as_str().unwrap_or_default().trim();
                let Some(skill) = skills.iter().find(|s| s.name() == requested).cloned() else {
                    let names: Vec<&str> = skills.iter().map(Skill::name).collect();
                    return Ok(ToolOutput::Text(prompts::unknown_skill(requested, &names)));
                };
                let path = args["path"].as_str().unwrap_or_default().to_string();
                let read = tokio::task::spawn_blocking(move || {
                    skill.read_resource(&path, MAX_RESOURCE_BYTES)
                })
                .await
                .map_err(|join| {
                    ToolError::caused("reading the skill's file was interrupted", join)
                })?
                .map_err(|e| ToolError::failed(error_chain(&e)))?;
                let mut text = read.text;
                if read.truncated {
                    text.push_str(&prompts::resource_truncated(text.len(), read.total_bytes));
                }
                Ok(ToolOutput::Text(text))
            }
        },
    )
    .into_handle()
}

/// The skill an error is about, for `skill_load_failed`, when the error says.
fn failed_skill_name(error: &SkillError) -> String {
    match error {
        SkillError::NotFound { path }
        | SkillError::NotAFolder { path }
        | SkillError::Io { path, .. }
        | SkillError::NotText { path } => path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        SkillError::Yaml { origin, .. } | SkillError::Invalid { origin, .. } => origin.clone(),
        SkillError::RegistryReference { reference } => reference.clone(),
        SkillError::DuplicateName { name, .. } => name.clone(),
        SkillError::Resource { skill, .. } | SkillError::ResourceIo { skill, .. } => skill.clone(),
    }
}
