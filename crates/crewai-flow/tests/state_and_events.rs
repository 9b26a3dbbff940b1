//! Typed and unstructured state, input merging, and the events a run emits.

mod common;

use common::no_inputs;
use crewai_core::events::{EventBus, EventRecorder};
use crewai_flow::{Flow, FlowBuilder, FlowContext, FlowError, UnstructuredState, on};
use serde::{Deserialize, Serialize};
use serde_json::json;
use uuid::Uuid;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Research {
    #[serde(default)]
    id: String,
    #[serde(default)]
    topic: String,
    #[serde(default)]
    depth: u32,
    #[serde(default)]
    notes: Vec<String>,
}

fn research_flow() -> Flow<Research> {
    Flow::typed_builder::<Research>()
        .name("research")
        .initial_state(Research {
            depth: 1,
            ..Default::default()
        })
        .start("plan", |ctx: FlowContext<Research>| async move {
            let state = ctx.state();
            assert_eq!(state.id, ctx.state_id());
            ctx.update_state(|s| {
                s.notes
                    .push(format!("plan {} at depth {}", s.topic, s.depth))
            });
            Ok(ctx.state_id().to_string())
        })
        .build()
        .unwrap()
}

#[tokio::test]
async fn typed_state_merges_inputs_and_gets_an_id() {
    let output = research_flow()
        .kickoff([("topic", json!("rust")), ("depth", json!(3))])
        .await
        .unwrap();
    assert_eq!(output.state.topic, "rust");
    assert_eq!(output.state.depth, 3);
    assert_eq!(output.state.notes, vec!["plan rust at depth 3"]);
    assert!(Uuid::parse_str(&output.id).is_ok(), "{}", output.id);
    assert_eq!(output.state.id, output.id);
    assert_eq!(output.result, Some(json!(output.id)));
}

#[tokio::test]
async fn typed_state_keeps_initial_values_not_given_as_inputs() {
    let output = research_flow()
        .kickoff([("topic", json!("go"))])
        .await
        .unwrap();
    assert_eq!(output.state.depth, 1);
}

#[tokio::test]
async fn invalid_typed_input_names_the_field() {
    let error = research_flow()
        .kickoff([("topic", json!("rust")), ("depth", json!("deep"))])
        .await
        .unwrap_err();
    assert!(matches!(error, FlowError::InvalidInputs { .. }));
    let text = crewai_llm::error_chain(&error);
    assert!(text.contains("input `depth` = \"deep\""), "{text}");
    assert!(text.contains("invalid type"), "{text}");
}

#[tokio::test]
async fn each_kickoff_gets_a_fresh_state_and_id() {
    let flow = research_flow();
    let first = flow.kickoff([("topic", json!("a"))]).await.unwrap();
    let second = flow.kickoff(no_inputs()).await.unwrap();
    assert_ne!(first.id, second.id);
    assert_eq!(second.state.topic, "");
    assert_eq!(second.state.notes.len(), 1);
}

#[tokio::test]
async fn unstructured_state_takes_any_inputs_and_an_id() {
    let flow = Flow::builder()
        .start("read", |ctx: FlowContext| async move {
            let topic = ctx.read_state(|s| s["topic"].clone());
            ctx.update_state(|s| s.insert("seen".into(), json!(true)));
            Ok(topic)
        })
        .build()
        .unwrap();
    let output = flow
        .kickoff([("topic", json!("flows")), ("extra", json!({"nested": [1]}))])
        .await
        .unwrap();
    let state: &UnstructuredState = &output.state;
    assert_eq!(state["topic"], "flows");
    assert_eq!(state["extra"], json!({"nested": [1]}));
    assert_eq!(state["seen"], true);
    assert_eq!(state["id"], json!(output.id));
    assert_eq!(output.result, Some(json!("flows")));
}

#[tokio::test]
async fn events_come_in_order_with_parents() {
    let bus = EventBus::new();
    let recorder = EventRecorder::attach(&bus);
    let seen_ids = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let record_id = |seen: std::sync::Arc<std::sync::Mutex<Vec<(String, Uuid)>>>| {
        move |ctx: FlowContext| {
            let seen = seen.clone();
            async move {
                seen.lock()
                    .unwrap()
                    .push((ctx.method_name().to_string(), ctx.event_id()));
                Ok(ctx.method_name().to_string())
            }
        }
    };
    let flow = Flow::builder()
        .name("evented")
        .event_bus(bus.clone())
        .start("first", record_id(seen_ids.clone()))
        .listen("second", on("first"), record_id(seen_ids.clone()))
        .build()
        .unwrap();
    flow.kickoff([("k", json!("v"))]).await.unwrap();

    assert_eq!(
        recorder.type_names(),
        vec![
            "flow_started",
            "method_execution_started",
            "method_execution_finished",
            "method_execution_started",
            "method_execution_finished",
            "flow_finished"
        ]
    );
    let events = recorder.events();
    let flow_started = events[0].event_id;
    assert_eq!(events[0].parent_event_id, None);
    assert_eq!(events[0].to_json()["inputs"], json!({"k": "v"}));
    assert_eq!(events[1].parent_event_id, Some(flow_started));
    assert_eq!(events[2].parent_event_id, Some(events[1].event_id));
    assert_eq!(events[3].parent_event_id, Some(flow_started));
    assert_eq!(events[4].parent_event_id, Some(events[3].event_id));
    assert_eq!(events[5].parent_event_id, Some(flow_started));
    assert_eq!(events[1].to_json()["method_name"], "first");
    assert_eq!(events[4].to_json()["result"], "second");
    assert_eq!(events[5].to_json()["result"], "second");
    // The context's event id is the method's start event: the parent for crews run inside it.
    let seen = seen_ids.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![
            ("first".to_string(), events[1].event_id),
            ("second".to_string(), events[3].event_id)
        ]
    );
}

/// A flow builder whose events `recorder` records.
fn recorded() -> (EventRecorder, FlowBuilder<UnstructuredState>) {
    let bus = EventBus::new();
    (EventRecorder::attach(&bus), Flow::builder().event_bus(bus))
}

#[tokio::test]
async fn a_failure_emits_method_execution_failed_under_its_start() {
    let (recorder, builder) = recorded();
    let flow = builder
        .start("s", |_ctx: FlowContext| async move {
            Err::<u32, _>(crewai_flow::MethodError::msg("nope"))
        })
        .build()
        .unwrap();
    assert!(flow.kickoff(no_inputs()).await.is_err());
    let events = recorder.events();
    assert_eq!(
        recorder.type_names(),
        vec![
            "flow_started",
            "method_execution_started",
            "method_execution_failed"
        ]
    );
    assert_eq!(events[2].parent_event_id, Some(events[1].event_id));
    assert_eq!(events[2].to_json()["error"], "nope");
}

#[tokio::test]
async fn a_kickoff_parent_event_is_the_parent_of_flow_started() {
    let (recorder, builder) = recorded();
    let flow = builder
        .start("s", |_ctx: FlowContext| async move { Ok(1) })
        .build()
        .unwrap();
    let parent = Uuid::new_v4();
    flow.kickoff_with(crewai_flow::Kickoff::new().parent_event(parent))
        .await
        .unwrap();
    assert_eq!(recorder.events()[0].parent_event_id, Some(parent));
}
