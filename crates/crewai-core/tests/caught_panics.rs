//! Panics the executor catches are counted on the run's bus and emitted as `panic_caught`
//! events, and the run goes on: an async tool, a before-LLM hook, a step callback.

mod agent_common;

use agent_common::*;
use crewai_core::agent::AgentTaskRequest;
use crewai_core::events::{EventBus, EventKind, EventRecorder, PanicSite};
use crewai_core::hooks::{HookDecision, Hooks};
use crewai_testkit::scripted::Reply;
use crewai_tools::{DynamicTool, ToolError, ToolOutput, ToolSet};
use serde_json::{Value, json};

/// An async tool (no blocking pool around it) that panics.
fn panicking_async_tool() -> crewai_tools::ToolHandle {
    DynamicTool::new(
        "exploder",
        "Panics.",
        json!({"type": "object", "properties": {}}),
        |_args: Value, _ctx| async move {
            if true {
                panic!("async tool bug");
            }
            Ok::<ToolOutput, ToolError>(ToolOutput::Text(String::new()))
        },
    )
    .into_handle()
}

/// The `(site, name, message)` of every `panic_caught` event recorded.
fn caught(recorder: &EventRecorder) -> Vec<(PanicSite, String, String)> {
    recorder
        .events()
        .into_iter()
        .filter_map(|event| match event.kind {
            EventKind::PanicCaught {
                site,
                name,
                message,
                ..
            } => Some((site, name, message)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn an_async_tool_that_panics_is_a_tool_failure_counted_on_the_bus() {
    let server = server().await;
    server.push(Reply::tool_call("exploder", json!({})));
    server.push(Reply::text("the tool crashed, so I answer without it"));
    let bus = EventBus::new();
    let recorder = EventRecorder::attach(&bus);
    let agent = agent_with(openai(&server)).role("Tester").build().unwrap();
    let result = agent
        .run_task(
            AgentTaskRequest::new("Use the tool")
                .with_tools(ToolSet::from(vec![panicking_async_tool()]))
                .with_event_bus(bus.clone()),
        )
        .await
        .unwrap();
    assert_eq!(result.raw, "the tool crashed, so I answer without it");
    // The model read the crash as the tool's result.
    let observation = message_text(&server.requests()[1], 3);
    assert!(
        observation.contains("the tool 'exploder' crashed (it panicked): async tool bug"),
        "{observation}"
    );
    assert_eq!(bus.caught_panics(), 1);
    assert_eq!(
        caught(&recorder),
        vec![(
            PanicSite::Tool,
            "exploder".to_string(),
            "async tool bug".to_string()
        )]
    );
    let panic_event = &recorder.of_type("panic_caught")[0];
    assert_eq!(panic_event.to_json()["agent_role"], "Tester");
}

#[tokio::test]
async fn a_panicking_llm_hook_and_step_callback_are_counted_and_the_run_goes_on() {
    let server = server().await;
    server.push(Reply::text("fine"));
    let bus = EventBus::new();
    let recorder = EventRecorder::attach(&bus);
    let hooks = Hooks::new()
        .after_llm_call(|_| panic!("after hook bug"))
        .before_llm_call(|_| HookDecision::Continue);
    let agent = agent_with(openai(&server))
        .hooks(hooks)
        .step_callback(|_| panic!("step bug"))
        .build()
        .unwrap();
    let result = agent
        .run_task(AgentTaskRequest::new("Answer").with_event_bus(bus.clone()))
        .await
        .unwrap();
    assert_eq!(result.raw, "fine");
    assert_eq!(bus.caught_panics_at(PanicSite::Hook), 1);
    assert_eq!(bus.caught_panics_at(PanicSite::StepCallback), 1);
    let seen = caught(&recorder);
    assert!(seen.contains(&(
        PanicSite::Hook,
        "after_llm_call".to_string(),
        "after hook bug".to_string()
    )));
    assert!(seen.contains(&(
        PanicSite::StepCallback,
        "step_callback".to_string(),
        "step bug".to_string()
    )));
}
