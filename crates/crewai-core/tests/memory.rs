//! A crew with memory against the scripted OpenAI-compatible server: the first kickoff saves
//! what its task's result is worth remembering (extracted by the agent's model), the second
//! kickoff's task prompt carries it, the agent has the memory tools, the memory events reach the
//! crew's bus, and the extraction call counts in the run's usage.

mod agent_common;

use std::sync::Arc;

use agent_common::*;
use crewai_core::crew::Crew;
use crewai_core::events::{EventBus, EventKind, EventRecorder};
use crewai_core::task::Task;
use crewai_llm::embeddings::HashEmbedder;
use crewai_memory::{Memory, RecordQuery, ScopePath, SqliteMemoryStore};
use crewai_testkit::scripted::Reply;

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

    // First kickoff: the answer, then the extraction the agent's model is asked for.
    server.push(Reply::text("Launch on May 4 in Lisbon.").with_usage(10, 5));
    server.push(
        Reply::text("{\"memories\": [\"The product launches on May 4 in Lisbon\"]}")
            .with_usage(7, 3),
    );
    let first = crew_with(&memory, openai(&server), &bus)
        .kickoff(Default::default())
        .await
        .unwrap();
    assert_eq!(first.raw, "Launch on May 4 in Lisbon.");
    // The extraction call is part of the run's usage.
    assert_eq!(first.token_usage.total_tokens, 25);
    // Written before the kickoff returned, under the agent's scope within the crew's.
    let saved = memory.list_records(&RecordQuery::default()).await.unwrap();
    assert_eq!(saved.len(), 1, "{saved:?}");
    assert_eq!(saved[0].content, "The product launches on May 4 in Lisbon");
    assert_eq!(saved[0].scope.to_string(), "/agent/planner");
    assert_eq!(saved[0].source.as_deref(), Some("Planner"));

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
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
    let second_prompt = user_text(&requests[2]);
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
