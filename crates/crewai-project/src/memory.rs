//! `memory: true` on the crew (CrewAI's crew memory): one store per project
//! (`<project>/.crewai/memory.db`), the crew's memories under `/crew/<name>`, embedded by the
//! crew's `embedder:` (CrewAI's `{provider, config}`) or, when it names none, by OpenAI's
//! embeddings when `OPENAI_API_KEY` is set and else by the offline `local` model.

use std::fmt;
use std::sync::Arc;

use crewai_llm::embeddings::{EmbedderConfig, build_embedder_from};
use crewai_memory::{Memory, ScopePath, SqliteMemoryStore};

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
        let has_key =
            (options.llm_build.env())("OPENAI_API_KEY").is_some_and(|key| !key.trim().is_empty());
        Ok(if has_key {
            (EmbedderConfig::new("openai"), EmbedderChoice::OpenAiKey)
        } else {
            (EmbedderConfig::new("local"), EmbedderChoice::Offline)
        })
    }

    /// The crew's memory (`None` without `memory: true`), on the project's store.
    pub(crate) fn crew_memory(
        &self,
        options: &BuildOptions,
    ) -> Result<Option<Memory>, ProjectError> {
        let Some((config, _)) = self.memory_embedder(options)? else {
            return Ok(None);
        };
        let context = format!("crew '{}' memory", self.name());
        let embedder = build_embedder_from(&config, &options.llm_build)
            .map_err(|error| ProjectError::build(format!("{context} embedder"), error))?;
        let store = SqliteMemoryStore::open_project(&self.root)
            .map_err(|error| ProjectError::build(context.clone(), error))?;
        let root = ScopePath::parse("crew")
            .map_err(|error| ProjectError::build(context, error))?
            .join(&ScopePath::segment_from_name(&self.name()));
        Ok(Some(
            Memory::builder(Arc::new(store), embedder)
                .root_scope(root)
                .build(),
        ))
    }
}
