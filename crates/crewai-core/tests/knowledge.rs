//! A crew with knowledge against the scripted OpenAI-compatible server: the kickoff ingests the
//! crew's and the agent's sources, the agent's model rewrites the task into a search query (a
//! call counted in the run's usage), the snippets found reach the task prompt, the knowledge
//! events reach the crew's bus, and a failed rewrite leaves the task without knowledge.

mod agent_common;

use std::sync::Arc;

use agent_common::*;
use crewai_core::crew::{
    CREW_KNOWLEDGE_USAGE, Crew, CrewBuilder, CrewError, QUERY_KNOWLEDGE_LIMIT,
    QUERY_KNOWLEDGE_THRESHOLD,
};
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
    crew_builder(store, llm, bus).build().unwrap()
}

fn crew_builder(
    store: &Arc<SqliteMemoryStore>,
    llm: Arc<dyn crewai_llm::Llm>,
    bus: &EventBus,
) -> CrewBuilder {
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
    // embeddings: HashEmbedder reports no count, so each is the four-characters-a-token
    // estimate. The kickoff ingests the agent's 56-character source (14) and the crew's
    // 59-character one (15), and the 37-character rewritten query is embedded once (10) for
    // both searches.
    assert_eq!(output.token_usage.total_tokens, 13 + 26 + 14 + 15 + 10);
    assert_eq!(output.token_usage.successful_requests, 5);
    let usage = crew.usage();
    assert_eq!(usage.by_agent["Tea Expert"].total_tokens, 13 + 26 + 14 + 10);
    assert_eq!(usage.by_agent[CREW_KNOWLEDGE_USAGE].total_tokens, 15);
    assert_eq!(usage.by_model["feature-hash"].successful_requests, 3);

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

    // Again: the unchanged sources are not embedded again, the query once.
    server.push(Reply::text("warehouse ships orders Tuesday Friday").with_usage(9, 4));
    server.push(Reply::text("Tuesdays and Fridays.").with_usage(20, 6));
    let again = crew.kickoff(Default::default()).await.unwrap();
    assert_eq!(again.token_usage.total_tokens, 13 + 26 + 10);
    assert_eq!(again.token_usage.successful_requests, 3);
}

#[tokio::test]
async fn a_budget_too_small_for_the_ingestion_stops_the_run_before_its_first_task() {
    let server = server().await;
    let store = Arc::new(SqliteMemoryStore::in_memory().unwrap());
    let bus = EventBus::new();
    // The crew's source (15 tokens, ingested first) fits; the agent's (14 more) would not.
    let crew = crew_builder(&store, openai(&server), &bus)
        .max_tokens(20)
        .build()
        .unwrap();
    let error = crew.kickoff(Default::default()).await.unwrap_err();
    match error {
        CrewError::BudgetExceeded {
            task,
            completed,
            usage,
            ..
        } => {
            assert_eq!(task, None);
            assert!(completed.is_empty());
            assert_eq!(usage.total_tokens, 15);
        }
        other => panic!("{other:?}"),
    }
    assert!(server.requests().is_empty());
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
