//! A flow's memory (CrewAI's `Flow.memory`, `remember` and `recall`): what one method remembers
//! another recalls; each call is a `memory_*` event under the method's own; its embeddings and
//! its model's calls count in the flow's usage and stop at the flow's budget.

use std::sync::Arc;

use crewai_core::EventBus;
use crewai_core::events::{EventKind, EventRecorder};
use crewai_flow::{FLOW_MEMORY_USAGE, Flow, FlowContext, FlowError, on};
use crewai_llm::ScriptedLlm;
use crewai_llm::embeddings::HashEmbedder;
use crewai_memory::{Memory, RecallQuery, RememberOptions, ScopePath, SqliteMemoryStore};
use serde_json::{Value, json};

const FACT: &str = "The Lisbon office closes at 6pm on Fridays.";

fn memory() -> Memory {
    let store = SqliteMemoryStore::in_memory().unwrap_or_else(|e| panic!("{e}"));
    Memory::builder(Arc::new(store), Arc::new(HashEmbedder::new(128))).build()
}

fn no_inputs() -> Vec<(String, Value)> {
    Vec::new()
}

/// `learn` remembers the fact under `/office`, `ask` recalls it.
fn office_flow(memory: Memory, events: EventBus, max_tokens: Option<u64>) -> Flow {
    let builder = Flow::builder()
        .name("office")
        .memory(memory)
        .event_bus(events);
    let builder = match max_tokens {
        Some(tokens) => builder.max_tokens(tokens),
        None => builder,
    };
    builder
        .start("learn", |ctx: FlowContext| async move {
            let scope = ScopePath::parse("office")?;
            let record = ctx
                .remember_with(FACT, RememberOptions::default().scope(scope))
                .await?;
            Ok(json!(record.id))
        })
        .listen("ask", on("learn"), |ctx: FlowContext| async move {
            let found = ctx
                .recall_with(RecallQuery::new("When does the office close?").shallow())
                .await?;
            Ok(json!(found.first().map(|m| m.record.content.clone())))
        })
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test]
async fn what_one_method_remembers_the_next_recalls_reported_and_counted() {
    let events = EventBus::new();
    let recorder = EventRecorder::attach(&events);
    let output = office_flow(memory(), events, None)
        .kickoff(no_inputs())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(output.result, Some(json!(FACT)));

    let recorded = recorder.events();
    let started_of = |method: &str| {
        recorded
            .iter()
            .find(|e| {
                matches!(&e.kind, EventKind::MethodExecutionStarted { method_name, .. } if method_name == method)
            })
            .map(|e| e.event_id)
            .unwrap_or_else(|| panic!("no start of {method}"))
    };
    let saved = recorded
        .iter()
        .find(|e| matches!(e.kind, EventKind::MemorySaveCompleted { saved: 1, .. }))
        .unwrap_or_else(|| panic!("no memory_save_completed in {recorded:#?}"));
    assert_eq!(saved.parent_event_id, Some(started_of("learn")));
    let queried = recorded
        .iter()
        .find(|e| matches!(e.kind, EventKind::MemoryQueryCompleted { results: 1, .. }))
        .unwrap_or_else(|| panic!("no memory_query_completed in {recorded:#?}"));
    assert_eq!(queried.parent_event_id, Some(started_of("ask")));

    // The save's and the recall's embeddings, in the flow's usage.
    let counted = &output.usage.by_agent[FLOW_MEMORY_USAGE];
    assert!(counted.successful_requests >= 2, "{counted:?}");
    assert!(counted.prompt_tokens > 0, "{counted:?}");
    assert_eq!(output.usage.total.prompt_tokens, counted.prompt_tokens);
}

#[tokio::test]
async fn the_memorys_model_calls_count_in_the_flows_usage() {
    let model = ScriptedLlm::new("scripted-memory")
        .then_text(json!({"memories": [FACT, "Deliveries arrive on Tuesdays."]}).to_string());
    let memory = memory().with_llm(Arc::new(model.clone()));
    let output = Flow::builder()
        .name("notes")
        .memory(memory)
        .start("extract", |ctx: FlowContext| async move {
            let statements = ctx
                .memory()?
                .extract_memories("Office notes: closes 6pm Fridays; deliveries on Tuesdays.")
                .await?;
            Ok(json!(statements))
        })
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
        .kickoff(no_inputs())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        output.result,
        Some(json!([FACT, "Deliveries arrive on Tuesdays."]))
    );
    assert_eq!(model.requests().len(), 1);
    let counted = &output.usage.by_agent[FLOW_MEMORY_USAGE];
    assert_eq!(counted.successful_requests, 1, "{counted:?}");
    assert!(
        output.usage.by_model.contains_key("scripted-memory"),
        "{:?}",
        output.usage
    );
}

#[tokio::test]
async fn the_flows_budget_stops_memory_before_its_first_embedding() {
    let error = office_flow(memory(), EventBus::new(), Some(1))
        .kickoff(no_inputs())
        .await
        .err()
        .unwrap_or_else(|| panic!("the budget of 1 token let the save through"));
    let FlowError::BudgetExceeded { method, usage, .. } = &error else {
        panic!("not a budget stop: {error}");
    };
    assert_eq!(method, "learn");
    assert_eq!(usage.total.total_tokens, 0, "nothing was spent: {usage:?}");
}

#[tokio::test]
async fn a_flow_without_memory_says_how_to_give_it_one() {
    let error = Flow::builder()
        .name("forgetful")
        .start("ask", |ctx: FlowContext| async move {
            ctx.recall("anything").await?;
            Ok(Value::Null)
        })
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
        .kickoff(no_inputs())
        .await
        .err()
        .map(|e| crewai_llm::error_chain(&e))
        .unwrap_or_default();
    assert!(
        error.contains("flow 'forgetful' has no memory") && error.contains("FlowBuilder::memory"),
        "{error}"
    );
}
