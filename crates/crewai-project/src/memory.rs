//! `memory: true` on the crew (CrewAI's crew memory) and on agents: one store per project
//! (`<project>/.crewai/memory.db`), the crew's memories under `/crew/<name>`, an agent's own
//! under `/agent/<role>`, embedded by the agent's or the crew's `embedder:` (CrewAI's
//! `{provider, config}`) or, when neither names one, by OpenAI's embeddings when
//! `OPENAI_API_KEY` is set and else by the offline `local` model.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use crewai_llm::embeddings::{EmbedderConfig, build_embedder_from};
use crewai_memory::{DEFAULT_COLLECTION, Memory, MemoryStore, ScopePath, SqliteMemoryStore};

use crate::spec::{AgentSpec, is_requested};
use crate::{BuildOptions, Project, ProjectError};

/// Why the memory's embedder is the one it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbedderChoice {
    /// The crew's `embedder:`.
    Configured,
    /// None configured, and `OPENAI_API_KEY` is set.
    OpenAiKey,
    /// None configured and no provider key: all-MiniLM-L6-v2 in process.
    Offline,
}

impl fmt::Display for EmbedderChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EmbedderChoice::Configured => "the crew's `embedder:`",
            EmbedderChoice::OpenAiKey => "no `embedder:` and OPENAI_API_KEY is set",
            EmbedderChoice::Offline => "no `embedder:` and no OPENAI_API_KEY: the offline model",
        })
    }
}

/// Reads the crew's `embedder:` (CrewAI's `{provider, config}`).
pub(crate) fn configured_embedder(
    value: &serde_json::Value,
) -> Result<EmbedderConfig, serde_json::Error> {
    serde_json::from_value(value.clone())
}

/// What `check` says of an `embedder:` that is not CrewAI's shape.
pub(crate) fn embedder_message(error: &serde_json::Error) -> String {
    format!(
        "`embedder` must be {{provider: <name>, config: {{model: ..., ...}}}} as in CrewAI: {error}"
    )
}

impl Project {
    /// Whether the crew has `memory: true`.
    pub fn memory_enabled(&self) -> bool {
        self.crew.memory == Some(true)
    }

    /// Whether a build of this project keeps any memory: the crew's, or an agent's own
    /// (`memory: true` on the agent).
    pub fn uses_memory(&self) -> bool {
        self.memory_enabled()
            || self
                .agents
                .iter()
                .any(|entry| entry.spec.memory == Some(serde_json::Value::Bool(true)))
    }

    /// The embedder the crew's memory uses and why (`None` without `memory: true`).
    pub fn memory_embedder(
        &self,
        options: &BuildOptions,
    ) -> Result<Option<(EmbedderConfig, EmbedderChoice)>, ProjectError> {
        if !self.memory_enabled() {
            return Ok(None);
        }
        self.crew_embedder(options).map(Some)
    }

    /// The embedder of the crew's memory and knowledge, and why: the crew's `embedder:`, else
    /// OpenAI's when `OPENAI_API_KEY` is set, else the offline model.
    pub(crate) fn crew_embedder(
        &self,
        options: &BuildOptions,
    ) -> Result<(EmbedderConfig, EmbedderChoice), ProjectError> {
        if let Some(value) = &self.crew.embedder {
            let config = configured_embedder(value).map_err(|error| {
                ProjectError::build(format!("crew '{}' embedder", self.name()), error)
            })?;
            return Ok((config, EmbedderChoice::Configured));
        }
        Ok(unconfigured_embedder(options))
    }

    /// The crew's memory, on the project's store: its own with `memory: true`, the memory of
    /// the flow running it ([`BuildOptions::flow_memory`]) when it sets no `memory:`, else none.
    pub(crate) fn crew_memory(
        &self,
        options: &BuildOptions,
    ) -> Result<Option<Memory>, ProjectError> {
        if self.crew.memory.is_none() {
            return Ok(options.flow_memory.clone());
        }
        let Some((config, _)) = self.memory_embedder(options)? else {
            return Ok(None);
        };
        let root = ScopePath::parse("crew")
            .map(|crew| crew.join(&ScopePath::segment_from_name(&self.name())))
            .map_err(|error| {
                ProjectError::build(format!("crew '{}' memory", self.name()), error)
            })?;
        self.memory_at(
            &format!("crew '{}' memory", self.name()),
            &config,
            DEFAULT_COLLECTION,
            root,
            options,
        )
        .map(Some)
    }

    /// An agent's own memory (CrewAI's agent `memory`), or `None` when it uses its crew's (or
    /// none):
    /// - `memory: true` gives the agent a memory of its own, rooted at `/agent/<role>`, even in
    ///   a crew without memory;
    /// - an agent `embedder:` in a crew with memory gives it its own memory in the crew's place
    ///   for it (`/crew/<name>/agent/<role>`), embedded by that embedder.
    ///
    /// The agent's embedder is its own `embedder:`, else the crew's, else the default rule. A
    /// memory embedding with another embedder than the crew's keeps its own collection in the
    /// store (`memory-agent-<key>`), so two models' vectors never mix.
    pub(crate) fn agent_memory(
        &self,
        key: &str,
        spec: &AgentSpec,
        options: &BuildOptions,
    ) -> Result<Option<Memory>, ProjectError> {
        let context = format!("agent '{key}' memory");
        let own = spec.memory == Some(serde_json::Value::Bool(true));
        let embedder = spec.embedder.as_ref().filter(|v| is_requested(v));
        let overrides_crews = embedder.is_some() && self.memory_enabled();
        if !(own || overrides_crews) {
            return Ok(None);
        }
        let crew_config = self.crew_embedder(options)?.0;
        let config = match embedder {
            Some(value) => configured_embedder(value)
                .map_err(|error| ProjectError::build(format!("agent '{key}' embedder"), error))?,
            None => crew_config.clone(),
        };
        let collection = if config == crew_config {
            DEFAULT_COLLECTION.to_string()
        } else {
            format!("memory-agent-{key}")
        };
        let role = ScopePath::segment_from_name(spec.role.as_deref().unwrap_or(key));
        let parse = |path: &str| {
            ScopePath::parse(path).map_err(|error| ProjectError::build(context.clone(), error))
        };
        let root = if own {
            parse("agent")?.join(&role)
        } else {
            parse("crew")?
                .join(&ScopePath::segment_from_name(&self.name()))
                .join(&parse("agent")?)
                .join(&role)
        };
        self.memory_at(&context, &config, &collection, root, options)
            .map(Some)
    }

    fn memory_at(
        &self,
        context: &str,
        config: &EmbedderConfig,
        collection: &str,
        root: ScopePath,
        options: &BuildOptions,
    ) -> Result<Memory, ProjectError> {
        memory_in(&self.root, context, config, collection, root, options)
    }
}

/// The embedder when none is configured: OpenAI's when `OPENAI_API_KEY` is set, else the
/// offline model.
fn unconfigured_embedder(options: &BuildOptions) -> (EmbedderConfig, EmbedderChoice) {
    let has_key =
        (options.llm_build.env())("OPENAI_API_KEY").is_some_and(|key| !key.trim().is_empty());
    if has_key {
        (EmbedderConfig::new("openai"), EmbedderChoice::OpenAiKey)
    } else {
        (EmbedderConfig::new("local"), EmbedderChoice::Offline)
    }
}

/// A declarative flow's memory (`config.memory`), rooted at `/flow/<name>` in the store of the
/// folder `project` (or the build's [`BuildOptions::memory_store`]).
pub(crate) fn flow_memory(
    project: &Path,
    flow: &str,
    embedder: Option<&serde_json::Value>,
    options: &BuildOptions,
) -> Result<Memory, ProjectError> {
    let context = format!("flow '{flow}' memory");
    let config = match embedder {
        Some(value) => configured_embedder(value)
            .map_err(|error| ProjectError::build(format!("{context} embedder"), error))?,
        None => unconfigured_embedder(options).0,
    };
    let root = ScopePath::parse("flow")
        .map(|base| base.join(&ScopePath::segment_from_name(flow)))
        .map_err(|error| ProjectError::build(context.clone(), error))?;
    memory_in(
        project,
        &context,
        &config,
        DEFAULT_COLLECTION,
        root,
        options,
    )
}

fn memory_in(
    project: &Path,
    context: &str,
    config: &EmbedderConfig,
    collection: &str,
    root: ScopePath,
    options: &BuildOptions,
) -> Result<Memory, ProjectError> {
    let embedder = build_embedder_from(config, &options.llm_build)
        .map_err(|error| ProjectError::build(format!("{context} embedder"), error))?;
    // A store given to the build (`crewai serve`/`worker` on Postgres) is shared by every
    // process; otherwise the project's own file.
    let store: Arc<dyn MemoryStore> = match &options.memory_store {
        Some(store) => Arc::clone(store),
        None => Arc::new(
            SqliteMemoryStore::open_project(project)
                .map_err(|error| ProjectError::build(context.to_string(), error))?,
        ),
    };
    Ok(Memory::builder(store, embedder)
        .collection(collection)
        .root_scope(root)
        .build())
}
