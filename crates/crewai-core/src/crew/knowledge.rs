//! The crew's side of knowledge: ingestion at kickoff (the crew's and every agent's, unchanged
//! documents skipped, its embeddings counted in the run's usage) and [`Crew::query_knowledge`].

use std::sync::Arc;

use crewai_knowledge::{Knowledge, KnowledgeError, KnowledgeOwner, KnowledgeSnippet};
use crewai_llm::LlmError;
use tokio_util::sync::CancellationToken;

use super::{Crew, CrewError};
use crate::embedder_stack::{self, RunMeter};
use crate::usage::UsageTracker;

/// CrewAI's `Crew.query_knowledge` defaults: three snippets at a similarity of 0.35 or more.
pub const QUERY_KNOWLEDGE_LIMIT: usize = 3;
pub const QUERY_KNOWLEDGE_THRESHOLD: f64 = 0.35;
/// What a run's usage counts the embeddings of the crew's own knowledge under (by agent: no
/// agent makes them), when a kickoff ingests it.
pub const CREW_KNOWLEDGE_USAGE: &str = "(crew knowledge)";

impl Crew {
    /// Every knowledge of the crew: its own, then its agents' (and its manager's).
    fn all_knowledge(&self) -> impl Iterator<Item = &Knowledge> {
        let spec = &self.spec;
        spec.knowledge.iter().chain(
            spec.agents
                .iter()
                .chain(spec.manager.iter())
                .filter_map(|agent| agent.knowledge()),
        )
    }

    fn knowledge_error(&self, source: crewai_knowledge::KnowledgeError) -> CrewError {
        CrewError::Knowledge {
            crew: self.spec.name.clone(),
            source: Box::new(source),
        }
    }

    /// Stores what changed in the crew's and its agents' knowledge sources, as every kickoff
    /// does first (a document whose content hash is unchanged is not read again).
    pub async fn ingest_knowledge(&self) -> Result<(), CrewError> {
        for knowledge in self.all_knowledge() {
            self.ingest(knowledge)
                .await
                .map_err(|e| self.knowledge_error(e))?;
        }
        Ok(())
    }

    /// [`Crew::ingest_knowledge`] as a kickoff does it: the embeddings count in the run's usage
    /// and budget (under the agent whose knowledge it is, the crew's own under
    /// [`CREW_KNOWLEDGE_USAGE`]) and stop when the run is cancelled. A budget it would go over
    /// stops the run before its first task.
    pub(super) async fn ingest_knowledge_counted(
        &self,
        usage: &UsageTracker,
        cancellation: &CancellationToken,
    ) -> Result<(), CrewError> {
        for knowledge in self.all_knowledge() {
            let meter = Arc::new(RunMeter {
                usage: usage.clone(),
                owner: match knowledge.owner() {
                    KnowledgeOwner::Agent(role) => role.clone(),
                    KnowledgeOwner::Crew | KnowledgeOwner::Tool(_) => {
                        CREW_KNOWLEDGE_USAGE.to_string()
                    }
                },
                cancellation: cancellation.clone(),
            });
            let counted = knowledge
                .with_embedder(embedder_stack::metered(knowledge.embedder().clone(), meter))
                .map_err(|e| self.knowledge_error(e))?;
            match self.ingest(&counted).await {
                Ok(()) => {}
                Err(KnowledgeError::Embedding {
                    source: LlmError::BudgetExceeded(exceeded),
                    ..
                }) => {
                    return Err(CrewError::BudgetExceeded {
                        crew: self.spec.name.clone(),
                        task: None,
                        exceeded,
                        completed: Vec::new(),
                        usage: Box::new(usage.total()),
                    });
                }
                Err(error) => return Err(self.knowledge_error(error)),
            }
        }
        Ok(())
    }

    async fn ingest(&self, knowledge: &Knowledge) -> Result<(), KnowledgeError> {
        let report = knowledge.ingest().await?;
        tracing::debug!(
            crew = %self.spec.name,
            owner = ?knowledge.owner(),
            ingested = report.ingested.len(),
            unchanged = report.unchanged.len(),
            chunks = report.chunks,
            "knowledge ingested"
        );
        Ok(())
    }

    /// The crew's knowledge closest to `queries` (CrewAI's `query_knowledge`; its defaults are
    /// [`QUERY_KNOWLEDGE_LIMIT`] and [`QUERY_KNOWLEDGE_THRESHOLD`]). It searches what is stored:
    /// sources are ingested at kickoff, or by [`Crew::ingest_knowledge`](Self::ingest_knowledge). Empty when the
    /// crew has no knowledge.
    pub async fn query_knowledge(
        &self,
        queries: &[String],
        limit: usize,
        score_threshold: f64,
    ) -> Result<Vec<KnowledgeSnippet>, CrewError> {
        match &self.spec.knowledge {
            Some(knowledge) => knowledge
                .query(queries, limit, score_threshold)
                .await
                .map_err(|e| self.knowledge_error(e)),
            None => Ok(Vec::new()),
        }
    }

    /// The crew's own knowledge, if it has some.
    pub fn knowledge(&self) -> Option<&Knowledge> {
        self.spec.knowledge.as_ref()
    }
}
