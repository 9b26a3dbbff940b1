//! The crew's side of knowledge: ingestion at kickoff (the crew's and every agent's, unchanged
//! documents skipped) and [`Crew::query_knowledge`].

use crewai_knowledge::{Knowledge, KnowledgeSnippet};

use super::{Crew, CrewError};

/// CrewAI's `Crew.query_knowledge` defaults: three snippets at a similarity of 0.35 or more.
pub const QUERY_KNOWLEDGE_LIMIT: usize = 3;
pub const QUERY_KNOWLEDGE_THRESHOLD: f64 = 0.35;

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
            let report = knowledge
                .ingest()
                .await
                .map_err(|e| self.knowledge_error(e))?;
            tracing::debug!(
                crew = %self.spec.name,
                owner = ?knowledge.owner(),
                ingested = report.ingested.len(),
                unchanged = report.unchanged.len(),
                chunks = report.chunks,
                "knowledge ingested"
            );
        }
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
