//! A crew with memory against the scripted OpenAI-compatible server: the first kickoff saves
//! what its task's result is worth remembering (extracted by the agent's model), the second
//! kickoff's task prompt carries it, the agent has the memory tools, the memory events reach the
//! crew's bus, and the extraction call counts in the run's usage.

mod agent_common;

use std::sync::Arc;

use agent_common::*;
use crewai_core::crew::Crew;
use crewai_core::crew::CrewError;
use crewai_core::events::{EventBus, EventKind, EventRecorder};
use crewai_core::task::Task;
use crewai_core::usage::BudgetLimit;
use crewai_llm::embeddings::{Embedder, HashEmbedder, OpenAiEmbedder};
use crewai_memory::{Memory, RecordQuery, ScopePath, SqliteMemoryStore};
use crewai_testkit::scripted::Reply;
use crewai_testkit::scripted::ScriptedServer;

/// The model's filing of one saved statement.
const ANALYSIS: &str =
    r#"{"memories": [{"scope": "/", "categories": ["launch"], "importance": 0.8}]}"#;

fn crew_with(memory: &Memory, llm: Arc<dyn crewai_llm::Llm>, bus: &EventBus) -> Crew {
    let agent = agent_with(llm).role("Planner").build().unwrap();
    let task = Task::builder()
        .name("plan")
        .description("Plan the product launch")
        .expected_output("A launch plan")
        .agent(agent.clone())
        .build()
        .unwrap();
    Crew::builder()
        .name("launch")
        .agents(vec![agent])
        .tasks(vec![task])
        .memory(memory.clone())
        .event_bus(bus.clone())
        .build()
        .unwrap()
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

#[tokio::test]
async fn the_second_kickoff_recalls_what_the_first_saved() {
    let server = server().await;
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteMemoryStore::open(&dir.path().join("memory.db")).unwrap();
    let memory = Memory::builder(Arc::new(store), Arc::new(HashEmbedder::new(256)))
        .root_scope(ScopePath::parse("/crew/launch").unwrap())
        .build();
    let bus = EventBus::new();
    let recorder = EventRecorder::attach(&bus);

    // First kickoff: the answer, then the extraction the agent's model is asked for, then its
    // filing of the statement (categories and importance: the scope is the agent's).
    server.push(Reply::text("Launch on May 4 in Lisbon.").with_usage(10, 5));
    server.push(
        Reply::text("{\"memories\": [\"The product launches on May 4 in Lisbon\"]}")
            .with_usage(7, 3),
    );
    server.push(Reply::text(ANALYSIS).with_usage(4, 2));
    let crew = crew_with(&memory, openai(&server), &bus);
    let first = crew.kickoff(Default::default()).await.unwrap();
    assert_eq!(first.raw, "Launch on May 4 in Lisbon.");
    // The extraction call is part of the run's usage, and so are the embeddings (the hash
    // embedder reports no tokens: they are estimated).
    let usage = crew.usage();
    assert_eq!(usage.by_model["gpt-4o-mini"].total_tokens, 31);
    let embedded = usage.by_model["feature-hash"].total_tokens;
    assert!(embedded > 0, "{usage:?}");
    assert_eq!(first.token_usage.total_tokens, 31 + embedded);
    // Written before the kickoff returned, under the agent's scope within the crew's.
    let saved = memory.list_records(&RecordQuery::default()).await.unwrap();
    assert_eq!(saved.len(), 1, "{saved:?}");
    assert_eq!(saved[0].content, "The product launches on May 4 in Lisbon");
    assert_eq!(saved[0].scope.to_string(), "/agent/planner");
    assert_eq!(saved[0].source.as_deref(), Some("Planner"));
    assert_eq!(saved[0].categories, ["launch"]);
    assert_eq!(saved[0].importance, 0.8);

    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(
        requests[2].body["response_format"]["json_schema"]["name"],
        "memory_save_analysis"
    );
    let first_prompt = user_text(&requests[0]);
    assert!(!first_prompt.contains("memory holds"), "{first_prompt}");
    let tools = requests[0].tool_names();
    assert!(tools.contains(&"search_memory".to_string()), "{tools:?}");
    assert!(tools.contains(&"save_to_memory".to_string()), "{tools:?}");
    assert!(user_text(&requests[1]).contains("Launch on May 4 in Lisbon."));

    // Second kickoff: the recalled memory is in the task prompt; nothing new is worth saving.
    server.push_text("Same plan.");
    server.push_text("{\"memories\": []}");
    crew_with(&memory, openai(&server), &bus)
        .kickoff(Default::default())
        .await
        .unwrap();
    assert_eq!(server.remaining(), 0);
    let requests = server.requests();
    let second_prompt = user_text(&requests[3]);
    assert!(
        second_prompt.contains("Current Task: Plan the product launch"),
        "{second_prompt}"
    );
    assert!(
        second_prompt.contains("- (score=")
            && second_prompt.contains("The product launches on May 4 in Lisbon"),
        "{second_prompt}"
    );
    assert_eq!(
        memory
            .list_records(&RecordQuery::default())
            .await
            .unwrap()
            .len(),
        1
    );

    let saves = recorder.of_type("memory_save_completed");
    assert_eq!(saves.len(), 1);
    match &saves[0].kind {
        EventKind::MemorySaveCompleted {
            agent_role,
            task_name,
            scope,
            saved,
            ..
        } => {
            assert_eq!(agent_role.as_deref(), Some("Planner"));
            assert_eq!(task_name.as_deref(), Some("plan"));
            assert_eq!(scope, "/crew/launch/agent/planner");
            assert_eq!(*saved, 1);
        }
        other => panic!("unexpected {other:?}"),
    }
    let queries = recorder.of_type("memory_query_completed");
    assert_eq!(queries.len(), 2);
    match &queries[1].kind {
        EventKind::MemoryQueryCompleted { results, .. } => assert_eq!(*results, 1),
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn a_failed_extraction_saves_the_whole_result() {
    let server = server().await;
    let memory = Memory::builder(
        Arc::new(SqliteMemoryStore::in_memory().unwrap()),
        Arc::new(HashEmbedder::new(64)),
    )
    .build();
    let bus = EventBus::new();
    server.push_text("Launch on May 4.");
    server.push(Reply::error(500, "the extraction broke"));
    server.push_text(ANALYSIS);
    crew_with(&memory, openai(&server), &bus)
        .kickoff(Default::default())
        .await
        .unwrap();
    let saved = memory.list_records(&RecordQuery::default()).await.unwrap();
    assert_eq!(saved.len(), 1, "{saved:?}");
    assert_eq!(saved[0].content, "Launch on May 4.");
}

#[tokio::test]
async fn a_standalone_kickoff_of_an_agent_with_memory_is_refused() {
    let server = server().await;
    let memory = Memory::builder(
        Arc::new(SqliteMemoryStore::in_memory().unwrap()),
        Arc::new(HashEmbedder::new(64)),
    )
    .build();
    let agent = agent_with(openai(&server)).memory(memory).build().unwrap();
    let error = agent.kickoff("Plan it").await.unwrap_err().to_string();
    assert!(error.contains("works in crews"), "{error}");
    assert_eq!(server.request_count(), 0);
}

/// An OpenAI-compatible `/embeddings` reply: one 2-dimensional vector, costing `tokens` as the
/// provider reports it.
fn embedding_reply(vector: [f32; 2], tokens: u64) -> Reply {
    let body = serde_json::json!({
        "object": "list",
        "data": [{"object": "embedding", "index": 0, "embedding": vector}],
        "model": "bge-small",
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    });
    Reply::raw(200, "application/json", body.to_string())
}

/// A memory embedding over the wire with the OpenAI client, against `embeddings`.
fn memory_embedding_at(embeddings: &ScriptedServer) -> Memory {
    let embedder = OpenAiEmbedder::compatible("openai", "bge-small", &embeddings.base_url(), None)
        .unwrap()
        .with_dimensions(2);
    let embedder: Arc<dyn Embedder> = Arc::new(embedder);
    Memory::builder(Arc::new(SqliteMemoryStore::in_memory().unwrap()), embedder)
        .root_scope(ScopePath::parse("/crew/launch").unwrap())
        .build()
}

#[tokio::test]
async fn memory_embeddings_count_in_the_crews_usage_as_the_provider_reports_them() {
    let chat = server().await;
    let embeddings = ScriptedServer::start().await;
    let memory = memory_embedding_at(&embeddings);
    // The recall before the task, then the save of the extracted statement.
    embeddings.push(embedding_reply([1.0, 0.0], 40));
    embeddings.push(embedding_reply([0.0, 1.0], 12));
    chat.push(Reply::text("Launch on May 4 in Lisbon.").with_usage(10, 5));
    chat.push(
        Reply::text("{\"memories\": [\"The product launches on May 4 in Lisbon\"]}")
            .with_usage(7, 3),
    );
    chat.push(Reply::text(ANALYSIS).with_usage(4, 2));
    let crew = crew_with(&memory, openai(&chat), &EventBus::new());
    let output = crew.kickoff(Default::default()).await.unwrap();

    assert_eq!(embeddings.remaining(), 0);
    assert_eq!(
        embeddings.requests()[1].body["input"],
        serde_json::json!(["The product launches on May 4 in Lisbon"])
    );
    assert_eq!(output.token_usage.total_tokens, 15 + 10 + 6 + 40 + 12);
    let usage = crew.usage();
    let by_embedder = &usage.by_model["bge-small"];
    assert_eq!(
        (by_embedder.prompt_tokens, by_embedder.completion_tokens),
        (52, 0)
    );
    assert_eq!(by_embedder.successful_requests, 2);
    assert_eq!(usage.by_agent["Planner"].total_tokens, 83);
    assert_eq!(usage.by_task["plan"].total_tokens, 83);
}

#[tokio::test]
async fn a_budget_stops_the_crew_at_the_tokens_its_memory_embedded() {
    let chat = server().await;
    let embeddings = ScriptedServer::start().await;
    let memory = memory_embedding_at(&embeddings);
    // The recall's embedding alone takes the run over its 500 tokens.
    embeddings.push(embedding_reply([1.0, 0.0], 1000));
    let agent = agent_with(openai(&chat)).role("Planner").build().unwrap();
    let task = Task::builder()
        .name("plan")
        .description("Plan the product launch")
        .expected_output("A launch plan")
        .agent(agent.clone())
        .build()
        .unwrap();
    let crew = Crew::builder()
        .name("launch")
        .agents(vec![agent])
        .tasks(vec![task])
        .memory(memory)
        .max_tokens(500)
        .build()
        .unwrap();
    let error = crew.kickoff(Default::default()).await.unwrap_err();
    let CrewError::BudgetExceeded {
        exceeded, usage, ..
    } = &error
    else {
        panic!("expected a budget stop, got {error:?}");
    };
    assert_eq!(exceeded.limit, BudgetLimit::Tokens);
    assert_eq!(exceeded.spent, 1000.0);
    assert_eq!(usage.total_tokens, 1000);
    assert_eq!(chat.request_count(), 0, "the agent's call was refused");
    assert_eq!(crew.usage().by_model["bge-small"].prompt_tokens, 1000);
}

#[tokio::test]
async fn an_embedding_over_the_budget_is_not_sent() {
    let chat = server().await;
    let embeddings = ScriptedServer::start().await;
    let memory = memory_embedding_at(&embeddings);
    let bus = EventBus::new();
    let recorder = EventRecorder::attach(&bus);
    let agent = agent_with(openai(&chat)).role("Planner").build().unwrap();
    let task = Task::builder()
        .name("plan")
        .description("Plan the product launch")
        .expected_output("A launch plan")
        .agent(agent.clone())
        .build()
        .unwrap();
    let crew = Crew::builder()
        .name("launch")
        .agents(vec![agent])
        .tasks(vec![task])
        .memory(memory)
        .event_bus(bus)
        .max_tokens(5)
        .build()
        .unwrap();
    let error = crew.kickoff(Default::default()).await.unwrap_err();
    assert!(
        matches!(error, CrewError::BudgetExceeded { .. }),
        "{error:?}"
    );
    assert_eq!(embeddings.request_count(), 0);
    assert_eq!(chat.request_count(), 0);
    let failed = recorder.of_type("memory_query_failed");
    match &failed[..] {
        [event] => match &event.kind {
            EventKind::MemoryQueryFailed { error, .. } => {
                assert!(error.contains("max_tokens = 5"), "{error}")
            }
            other => panic!("unexpected {other:?}"),
        },
        other => panic!("one failed recall expected, got {other:?}"),
    }
}

#[test]
fn a_view_cannot_switch_to_another_embedding_model() {
    let memory = Memory::builder(
        Arc::new(SqliteMemoryStore::in_memory().unwrap()),
        Arc::new(HashEmbedder::new(2)),
    )
    .build();
    let other =
        OpenAiEmbedder::compatible("openai", "bge-small", "http://127.0.0.1:9", None).unwrap();
    let refused = memory.with_embedder(Arc::new(other)).unwrap_err();
    assert!(refused.to_string().contains("cannot switch"), "{refused}");
}

#[tokio::test]
async fn an_agents_own_memory_keeps_its_results_at_its_root_without_crew_memory() {
    let server = server().await;
    let store = Arc::new(SqliteMemoryStore::in_memory().unwrap());
    let everything = Memory::builder(store, Arc::new(HashEmbedder::new(64))).build();
    let own = everything.scope("/agent/planner").unwrap();
    let agent = agent_with(openai(&server))
        .role("Planner")
        .memory(own)
        .build()
        .unwrap();
    let task = Task::builder()
        .name("plan")
        .description("Plan the product launch")
        .expected_output("A launch plan")
        .agent(agent.clone())
        .build()
        .unwrap();
    server.push_text("Launch on May 4.");
    server.push_text("{\"memories\": [\"The launch is on May 4\"]}");
    server.push_text(ANALYSIS);
    let crew = Crew::builder()
        .name("launch")
        .agents(vec![agent])
        .tasks(vec![task])
        .build()
        .unwrap();
    crew.kickoff(Default::default()).await.unwrap();
    // Drained by the kickoff although the crew has no memory of its own.
    let saved = everything
        .list_records(&RecordQuery::default())
        .await
        .unwrap();
    assert_eq!(saved.len(), 1, "{saved:?}");
    assert_eq!(saved[0].scope.to_string(), "/agent/planner");
    assert_eq!(saved[0].content, "The launch is on May 4");
}
