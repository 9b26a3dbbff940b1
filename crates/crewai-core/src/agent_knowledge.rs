//! What knowledge does around one task (CrewAI's `knowledge_sources`): the agent's model
//! rewrites the task prompt into a search query, embedded once, and the agent's own knowledge
//! and then its crew's are searched with it (each up to `results_limit` snippets at
//! `score_threshold` or closer), and the snippets found are added to the task prompt.
//!
//! The rewrite is the agent's model under the run's layers ([`CallPurpose::Knowledge`]), so it
//! counts in the run's usage and budget. Every step is a `knowledge_*` event under the task; a
//! failed rewrite or search is reported and the task runs without knowledge, as in CrewAI.

use std::sync::Arc;
use std::time::Instant;

use crewai_knowledge::{EmbeddedQueries, Knowledge, KnowledgeConfig, KnowledgeError};
use crewai_llm::{Llm, LlmRequest, Message, error_chain};
use uuid::Uuid;

use crate::agent::Agent;
use crate::agent_task::RunServices;
use crate::embedder_stack;
use crate::events::{EventBus, EventKind};
use crate::llm_stack::{self, CallPurpose, CallScope};
use crate::prompts::knowledge as prompts;

/// The knowledge one task searches: the agent's and its crew's.
pub(crate) struct TaskKnowledge {
    /// The agent's own first, then the crew's (CrewAI's order in the prompt).
    searched: Vec<Knowledge>,
    config: KnowledgeConfig,
    /// The agent's model under the run's layers.
    llm: Arc<dyn Llm>,
    events: EventBus,
    parent: Option<Uuid>,
    agent_role: String,
    task_name: Option<String>,
}

impl TaskKnowledge {
    /// The task's knowledge, or `None` when neither the agent nor its crew has any.
    pub(crate) fn prepare(
        agent: &Agent,
        llm: &Arc<dyn Llm>,
        services: &RunServices,
        parent: Option<Uuid>,
        task_name: Option<&str>,
    ) -> Option<TaskKnowledge> {
        let owned: Vec<&Knowledge> = agent
            .knowledge()
            .into_iter()
            .chain(services.knowledge.as_ref())
            .collect();
        if owned.is_empty() {
            return None;
        }
        let scope = Arc::new(
            CallScope::new(agent, services, CallPurpose::Knowledge)
                .with_task(task_name)
                .with_parent(parent)
                .with_cancellation(services.cancellation.clone()),
        );
        // The search's embeddings count in the run's usage and budget, as memory's do.
        let metered = |knowledge: &Knowledge| {
            knowledge.with_embedder(embedder_stack::metered(
                knowledge.embedder().clone(),
                scope.clone(),
            ))
        };
        let searched = match owned
            .into_iter()
            .map(metered)
            .collect::<Result<Vec<_>, _>>()
        {
            Ok(searched) => searched,
            Err(error) => {
                // The layer keeps the model's name, so this cannot fail; if it ever did, the
                // task would run without knowledge rather than with uncounted embeddings.
                tracing::warn!(
                    error = error_chain(&error),
                    "knowledge is off for this task"
                );
                return None;
            }
        };
        Some(TaskKnowledge {
            searched,
            config: agent.knowledge_config(),
            llm: llm_stack::stack(llm.clone(), scope),
            events: services.events.clone(),
            parent,
            agent_role: agent.role().to_string(),
            task_name: task_name.map(str::to_string),
        })
    }

    fn emit(&self, kind: impl FnOnce(Option<String>, Option<String>) -> EventKind) {
        self.events.emit(
            self.parent,
            kind(Some(self.agent_role.clone()), self.task_name.clone()),
        );
    }

    /// `prompt` with the snippets found for `task_prompt` after it (unchanged when nothing
    /// passed the threshold, or the rewrite or the search failed). The query is rewritten from
    /// the task alone: `prompt` may already carry recalled memories, which would steer the
    /// rewrite away from the task (as in CrewAI, whose query comes from the task prompt).
    pub(crate) async fn with_snippets(&self, prompt: &str, task_prompt: &str) -> String {
        let started = Instant::now();
        self.emit(
            |agent_role, task_name| EventKind::KnowledgeRetrievalStarted {
                agent_role,
                task_name,
            },
        );
        let Some(query) = self.search_query(task_prompt).await else {
            return prompt.to_string();
        };
        let snippets = match self.search(&query).await {
            Ok(snippets) => snippets,
            Err(error) => {
                let error = error_chain(&error);
                tracing::warn!(agent = %self.agent_role, %error, "knowledge search failed; the task runs without knowledge");
                self.emit(
                    |agent_role, task_name| EventKind::KnowledgeSearchQueryFailed {
                        agent_role,
                        task_name,
                        query: query.clone(),
                        error,
                    },
                );
                return prompt.to_string();
            }
        };
        let block = prompts::snippets_block(&snippets);
        let elapsed_ms = started.elapsed().as_millis().try_into().unwrap_or(u64::MAX);
        self.emit(
            |agent_role, task_name| EventKind::KnowledgeRetrievalCompleted {
                agent_role,
                task_name,
                query,
                retrieved_knowledge: block.trim_start().to_string(),
                results: snippets.len(),
                elapsed_ms,
            },
        );
        format!("{prompt}{block}")
    }

    /// The snippets of every searched knowledge for `query`, in order. The query is embedded
    /// once per embedding model: the agent's and the crew's knowledge usually share one, and
    /// embedding it again for each would be paid twice.
    async fn search(&self, query: &str) -> Result<Vec<String>, KnowledgeError> {
        let queries = [query.to_string()];
        let mut embedded: Vec<EmbeddedQueries> = Vec::new();
        let mut snippets = Vec::new();
        for knowledge in &self.searched {
            let index = match embedded.iter().position(|e| e.fit(knowledge)) {
                Some(index) => index,
                None => {
                    embedded.push(knowledge.embed_queries(&queries).await?);
                    embedded.len() - 1
                }
            };
            let found = knowledge
                .query_embedded(
                    &embedded[index],
                    self.config.results_limit,
                    self.config.score_threshold,
                )
                .await?;
            snippets.extend(found.into_iter().map(|s| s.content));
        }
        Ok(snippets)
    }

    /// The agent's model's search query for the task (`None`, reported, when the call fails or
    /// the reply is empty).
    async fn search_query(&self, task_prompt: &str) -> Option<String> {
        self.emit(|agent_role, task_name| EventKind::KnowledgeQueryStarted {
            agent_role,
            task_name,
            task_prompt: task_prompt.to_string(),
        });
        let request = LlmRequest::new(vec![
            Message::system(prompts::SEARCH_QUERY_SYSTEM),
            Message::user(prompts::search_query_input(task_prompt)),
        ]);
        let reply = self.llm.call(request).await.map(|response| {
            response
                .content
                .unwrap_or_default()
                .trim()
                .trim_matches('"')
                .to_string()
        });
        match reply {
            Ok(query) if !query.is_empty() => {
                self.emit(|agent_role, task_name| EventKind::KnowledgeQueryCompleted {
                    agent_role,
                    task_name,
                    query: query.clone(),
                });
                Some(query)
            }
            failed => {
                let error = match failed {
                    Err(error) => error_chain(&error),
                    Ok(_) => "the model's reply was empty".to_string(),
                };
                tracing::warn!(agent = %self.agent_role, %error, "knowledge search query failed; the task runs without knowledge");
                self.emit(|agent_role, task_name| EventKind::KnowledgeQueryFailed {
                    agent_role,
                    task_name,
                    error,
                });
                None
            }
        }
    }
}
