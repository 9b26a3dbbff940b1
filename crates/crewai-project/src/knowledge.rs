//! `knowledge_sources` on the crew and its agents (CrewAI's knowledge): files of the project's
//! `knowledge/` folder, web pages and inline text, stored in the project's
//! `.crewai/memory.db` beside memory and embedded by the crew's `embedder:` (else OpenAI's when
//! `OPENAI_API_KEY` is set, else the offline model: the rule memory follows). The knowledge
//! search tools a `tools:` list names (`PDFSearchTool`, ...) are made over the same store and
//! embedder, their files read inside the project folder.

use std::sync::Arc;

use crewai_knowledge::{
    KNOWLEDGE_DIR, Knowledge, KnowledgeOwner, KnowledgeSource, SearchToolClass,
};
use crewai_llm::embeddings::{Embedder, EmbedderConfig, build_embedder_from};
use crewai_memory::{MemoryStore, SqliteMemoryStore};
use serde_json::Value;

use crate::error::Diagnostic;
use crate::registry::{SearchToolBase, ToolRegistry};
use crate::spec::Origin;
use crate::{AgentEntry, BuildOptions, EmbedderChoice, Project, ProjectError};

/// What knowledge is built on: one store and one embedder for the crew and all its agents.
#[derive(Clone)]
pub(crate) struct KnowledgeBase {
    store: Arc<dyn MemoryStore>,
    embedder: Arc<dyn Embedder>,
}

/// The sources written in `value`, each problem at its item (or in `file` when the field's
/// place is not known).
pub(crate) fn read_sources(
    value: &Value,
    origin: Option<&Origin>,
    file: &str,
    owner: &str,
) -> Result<Vec<KnowledgeSource>, Vec<Diagnostic>> {
    KnowledgeSource::list_from_value(value).map_err(|problems| {
        problems
            .into_iter()
            .map(|(index, problem)| {
                let message = format!("{owner} knowledge source: {problem}");
                match (origin, index) {
                    (Some(origin), Some(i)) => origin.child(i).diagnostic(message),
                    (Some(origin), None) => origin.diagnostic(message),
                    (None, _) => Diagnostic::in_file(file, message),
                }
            })
            .collect()
    })
}

/// Whether `tools` names a knowledge search tool (which embeds with the crew's embedder).
pub(crate) fn names_search_tool(tools: &Option<Vec<crate::spec::ToolRef>>) -> bool {
    tools
        .iter()
        .flatten()
        .any(|tool| SearchToolClass::from_name(&tool.name).is_some())
}

impl KnowledgeBase {
    /// What the project's knowledge search tools are made over: this store and embedder, files
    /// read inside the project folder.
    pub(crate) fn search_tools(&self, root: &std::path::Path) -> SearchToolBase {
        SearchToolBase {
            store: self.store.clone(),
            embedder: self.embedder.clone(),
            root: root.to_path_buf(),
        }
    }
}

impl Project {
    /// Whether the crew or one of its agents has `knowledge_sources`, or a `tools:` list names
    /// a knowledge search tool (`PDFSearchTool`, ...).
    pub fn knowledge_enabled(&self) -> bool {
        let has = |value: &Option<Value>| value.as_ref().is_some_and(crate::spec::is_requested);
        has(&self.crew.knowledge_sources)
            || self.agents.iter().any(|a| has(&a.spec.knowledge_sources))
            || self.names_search_tools()
    }

    /// Whether an agent's or a task's `tools:` names a knowledge search tool.
    pub fn names_search_tools(&self) -> bool {
        self.agents.iter().any(|a| names_search_tool(&a.spec.tools))
            || self.tasks.iter().any(|t| names_search_tool(&t.spec.tools))
    }

    /// `registry` able to make the knowledge search tools, over `base`, when the project names
    /// one and the registry has no base of its own.
    pub(crate) fn registry_with_search<'r>(
        &self,
        registry: &'r ToolRegistry,
        base: Option<&KnowledgeBase>,
    ) -> std::borrow::Cow<'r, ToolRegistry> {
        match base {
            Some(base) if self.names_search_tools() && !registry.has_search_base() => {
                std::borrow::Cow::Owned(
                    registry
                        .clone()
                        .with_search_base(base.search_tools(&self.root)),
                )
            }
            _ => std::borrow::Cow::Borrowed(registry),
        }
    }

    /// The embedder knowledge uses and why (`None` without knowledge sources).
    pub fn knowledge_embedder(
        &self,
        options: &BuildOptions,
    ) -> Result<Option<(EmbedderConfig, EmbedderChoice)>, ProjectError> {
        if !self.knowledge_enabled() {
            return Ok(None);
        }
        self.crew_embedder(options).map(Some)
    }

    /// The store and embedder of the project's knowledge (`None` without knowledge sources).
    pub(crate) fn knowledge_base(
        &self,
        options: &BuildOptions,
    ) -> Result<Option<KnowledgeBase>, ProjectError> {
        let Some((config, _)) = self.knowledge_embedder(options)? else {
            return Ok(None);
        };
        let context = format!("crew '{}' knowledge", self.name());
        let embedder = build_embedder_from(&config, &options.llm_build)
            .map_err(|error| ProjectError::build(format!("{context} embedder"), error))?;
        let store = SqliteMemoryStore::open_project(&self.root)
            .map_err(|error| ProjectError::build(context, error))?;
        Ok(Some(KnowledgeBase {
            store: Arc::new(store),
            embedder,
        }))
    }

    fn knowledge_of(
        &self,
        base: &KnowledgeBase,
        owner: KnowledgeOwner,
        value: &Value,
        origin: Option<&Origin>,
        file: &str,
        owner_name: &str,
    ) -> Result<Knowledge, ProjectError> {
        let sources =
            read_sources(value, origin, file, owner_name).map_err(ProjectError::Invalid)?;
        Ok(
            Knowledge::builder(base.store.clone(), base.embedder.clone(), owner)
                .folder(self.root.join(KNOWLEDGE_DIR))
                .sources(sources)
                .build(),
        )
    }

    /// The crew's knowledge (`None` without crew `knowledge_sources`).
    pub(crate) fn crew_knowledge(
        &self,
        base: Option<&KnowledgeBase>,
    ) -> Result<Option<Knowledge>, ProjectError> {
        let (Some(base), Some(value)) = (base, &self.crew.knowledge_sources) else {
            return Ok(None);
        };
        if !crate::spec::is_requested(value) {
            return Ok(None);
        }
        self.knowledge_of(
            base,
            KnowledgeOwner::Crew,
            value,
            self.crew.origin("knowledge_sources"),
            "config/crew.yaml",
            "crew",
        )
        .map(Some)
    }

    /// An agent's knowledge (`None` without its `knowledge_sources`).
    pub(crate) fn agent_knowledge(
        &self,
        entry: &AgentEntry,
        base: Option<&KnowledgeBase>,
    ) -> Result<Option<Knowledge>, ProjectError> {
        let (Some(base), Some(value)) = (base, &entry.spec.knowledge_sources) else {
            return Ok(None);
        };
        if !crate::spec::is_requested(value) {
            return Ok(None);
        }
        let role = entry.spec.role.clone().unwrap_or_else(|| entry.key.clone());
        self.knowledge_of(
            base,
            KnowledgeOwner::Agent(role),
            value,
            entry.spec.origin("knowledge_sources"),
            "config/agents.yaml",
            &format!("agent '{}'", entry.key),
        )
        .map(Some)
    }
}
