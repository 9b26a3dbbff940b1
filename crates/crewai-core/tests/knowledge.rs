//! A crew with knowledge against the scripted OpenAI-compatible server: the kickoff ingests the
//! crew's and the agent's sources, the agent's model rewrites the task into a search query (a
//! call counted in the run's usage), the snippets found reach the task prompt, the knowledge
//! events reach the crew's bus, and a failed rewrite leaves the task without knowledge.

mod agent_common;

use std::sync::Arc;

use agent_common::*;
use crewai_core::crew::{Crew, QUERY_KNOWLEDGE_LIMIT, QUERY_KNOWLEDGE_THRESHOLD};
use crewai_core::events::{EventBus, EventKind, EventRecorder};
use crewai_core::task::Task;
use crewai_knowledge::{Knowledge, KnowledgeConfig, KnowledgeOwner, KnowledgeSource};
use crewai_llm::embeddings::HashEmbedder;
use crewai_memory::SqliteMemoryStore;
use crewai_testkit::scripted::Reply;

fn knowledge(store: &Arc<SqliteMemoryStore>, owner: KnowledgeOwner, text: &str) -> Knowledge {
    Knowledge::builder(store.clone(), Arc::new(HashEmbedder::new(256)), owner)
        .source(KnowledgeSource::text(text))
        .build()
}

fn user_text(request: &crewai_testkit::scripted::RecordedRequest) -> String {
    request
        .messages()
        .iter()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

fn crew(store: &Arc<SqliteMemoryStore>, llm: Arc<dyn crewai_llm::Llm>, bus: &EventBus) -> Crew {
    let agent = agent_with(llm)
        .role("Tea Expert")
        .knowledge(knowledge(
            store,
            KnowledgeOwner::Agent("Tea Expert".into()),
            "Nebula Oolong is roasted over cherry wood for six hours.",
        ))
        .knowledge_config(KnowledgeConfig {
            results_limit: 2,
            score_threshold: 0.3,
        })
        .build()
        .unwrap();
    let task = Task::builder()
        .name("answer")
        .description("Answer the customer's question about shipping days")
        .expected_output("One sentence")
        .agent(agent.clone())
        .build()
        .unwrap();
    Crew::builder()
        .name("shop")
        .agents(vec![agent])
        .tasks(vec![task])
        .knowledge(knowledge(
            store,
            KnowledgeOwner::Crew,
            "The Lisbon warehouse ships orders every Tuesday and Friday.",
        ))
        .event_bus(bus.clone())
        .build()
        .unwrap()
}

#[tokio::test]
async fn snippets_found_by_the_rewritten_query_reach_the_task_prompt() {
    let server = server().await;
    let store = Arc::new(SqliteMemoryStore::in_memory().unwrap());
    let bus = EventBus::new();
    let recorder = EventRecorder::attach(&bus);
    server.push(Reply::text("warehouse ships orders Tuesday Friday").with_usage(9, 4));
    server.push(Reply::text("Orders ship on Tuesdays and Fridays.").with_usage(20, 6));
    let crew = crew(&store, openai(&server), &bus);
    let output = crew.kickoff(Default::default()).await.unwrap();
    assert_eq!(output.raw, "Orders ship on Tuesdays and Fridays.");
    // The rewrite (9 + 4) and the answer (20 + 6) count in the run's usage, and so do the
    // search's two embedding calls of the 37-character rewritten query: HashEmbedder reports no
    // count, so each is the four-characters-a-token estimate, 10 tokens.
    assert_eq!(output.token_usage.total_tokens, 59);
    assert_eq!(output.token_usage.successful_requests, 4);

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert!(
        user_text(&requests[0]).contains("Answer the customer's question about shipping days"),
        "{}",
        user_text(&requests[0])
    );
    let prompt = user_text(&requests[1]);
    assert!(
        prompt.contains("The Lisbon warehouse ships orders every Tuesday and Friday."),
        "{prompt}"
    );
    // The agent's own knowledge is below the threshold for this query.
    assert!(!prompt.contains("cherry wood"), "{prompt}");

    let kinds: Vec<&'static str> = recorder
        .events()
        .iter()
        .map(|e| e.kind.type_name())
        .filter(|t| t.starts_with("knowledge_"))
        .collect();
    assert_eq!(
        kinds,
        [
            "knowledge_retrieval_started",
            "knowledge_query_started",
            "knowledge_query_completed",
            "knowledge_retrieval_completed"
        ]
    );
    let completed = recorder
        .events()
        .into_iter()
        .find_map(|e| match e.kind {
            EventKind::KnowledgeRetrievalCompleted {
                query,
                results,
                agent_role,
                ..
            } => Some((query, results, agent_role)),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        completed,
        (
            "warehouse ships orders Tuesday Friday".to_string(),
            1,
            Some("Tea Expert".to_string())
        )
    );

    let found = crew
        .query_knowledge(
            &["which days does the warehouse ship".into()],
            QUERY_KNOWLEDGE_LIMIT,
            QUERY_KNOWLEDGE_THRESHOLD,
        )
        .await
        .unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].source, "string:0");
}

#[tokio::test]
async fn a_failed_rewrite_is_reported_and_the_task_runs_without_knowledge() {
    let server = server().await;
    let store = Arc::new(SqliteMemoryStore::in_memory().unwrap());
    let bus = EventBus::new();
    let recorder = EventRecorder::attach(&bus);
    server.push(Reply::error(400, "bad request"));
    server.push(Reply::text("No idea."));
    let output = crew(&store, openai(&server), &bus)
        .kickoff(Default::default())
        .await
        .unwrap();
    assert_eq!(output.raw, "No idea.");
    let requests = server.requests();
    assert!(!user_text(&requests[1]).contains("Lisbon warehouse"));
    assert!(recorder.events().iter().any(|e| matches!(
        &e.kind,
        EventKind::KnowledgeQueryFailed { error, .. } if error.contains("bad request")
    )));
}

#[tokio::test]
async fn a_source_that_cannot_be_read_fails_the_kickoff_naming_it() {
    let server = server().await;
    let store = Arc::new(SqliteMemoryStore::in_memory().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let agent = agent_with(openai(&server)).build().unwrap();
    let task = Task::builder()
        .description("Anything")
        .expected_output("Anything")
        .agent(agent.clone())
        .build()
        .unwrap();
    let crew = Crew::builder()
        .agents(vec![agent])
        .tasks(vec![task])
        .knowledge(
            Knowledge::builder(store, Arc::new(HashEmbedder::new(64)), KnowledgeOwner::Crew)
                .folder(dir.path())
                .source(KnowledgeSource::files(["missing.pdf"]))
                .build(),
        )
        .build()
        .unwrap();
    let error = crew.kickoff(Default::default()).await.unwrap_err();
    let shown = crewai_llm::error_chain(&error);
    assert!(
        shown.contains("knowledge failed") && shown.contains("missing.pdf"),
        "{shown}"
    );
    assert!(server.requests().is_empty());
}
