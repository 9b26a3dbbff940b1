//! Hooks, events and the kickoff guardrail.

mod agent_common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use agent_common::*;
use crewai_core::agent::{AgentStep, AgentTaskRequest};
use crewai_core::error::AgentError;
use crewai_core::events::{EventBus, EventKind, EventRecorder};
use crewai_core::guardrail::{Guardrail, GuardrailPass};
use crewai_core::hooks::{HookDecision, Hooks, HooksLayer};
use crewai_llm::{LayeredLlm, Llm, LlmRequest, Message};
use crewai_testkit::scripted::Reply;
use crewai_tools::ToolSet;
use serde_json::json;

#[tokio::test]
async fn a_blocking_before_tool_hook_stops_the_tool_and_after_hooks_still_run() {
    let server = server().await;
    server.push(Reply::tool_call("multiplier", json!({"a": 1, "b": 2})));
    server.push(Reply::text("blocked, as expected"));
    let runs = Arc::new(AtomicU32::new(0));
    let seen_results = Arc::new(Mutex::new(Vec::new()));
    let sink = seen_results.clone();
    let hooks = Hooks::new()
        .before_tool_call_for(["multiplier"], |_| HookDecision::block())
        .after_tool_call(move |ctx| {
            sink.lock()
                .unwrap()
                .push(ctx.tool_result.clone().unwrap_or_default());
            None
        });
    let agent = agent_with(openai(&server)).build().unwrap();
    agent
        .run_task(
            AgentTaskRequest::new("Multiply")
                .with_tools(ToolSet::from(vec![multiplier(runs.clone())]))
                .with_hooks(hooks),
        )
        .await
        .unwrap();

    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert_eq!(
        server.requests()[1].messages()[3]["content"],
        "Tool execution blocked by hook. Tool: multiplier"
    );
    assert_eq!(
        seen_results.lock().unwrap().as_slice(),
        ["Tool execution blocked by hook. Tool: multiplier"]
    );
}

#[tokio::test]
async fn tool_hooks_rewrite_arguments_and_results_and_see_the_agent() {
    let server = server().await;
    server.push(Reply::tool_call("multiplier", json!({"a": 1, "b": 2})));
    server.push(Reply::text("done"));
    let roles = Arc::new(Mutex::new(Vec::new()));
    let sink = roles.clone();
    let hooks = Hooks::new()
        .before_tool_call(move |ctx| {
            sink.lock().unwrap().push(ctx.origin.agent_role.clone());
            ctx.tool_input = json!({"a": 10, "b": 10});
            HookDecision::Continue
        })
        .after_tool_call(|ctx| ctx.tool_result.as_ref().map(|r| format!("result={r}")));
    let agent = agent_with(openai(&server))
        .role("Calculator")
        .hooks(hooks)
        .build()
        .unwrap();
    let output = agent
        .clone()
        .with_tools(vec![multiplier(Arc::new(AtomicU32::new(0)))])
        .kickoff("What is 1 times 2?")
        .await
        .unwrap();
    assert_eq!(output.raw, "done");
    assert_eq!(server.requests()[1].messages()[3]["content"], "result=100");
    assert_eq!(
        roles.lock().unwrap().as_slice(),
        [Some("Calculator".to_string())]
    );
}

#[tokio::test]
async fn llm_hooks_block_or_replace_the_reply() {
    let server = server().await;
    let blocked = agent_with(openai(&server))
        .hooks(Hooks::new().before_llm_call(|_| HookDecision::block()))
        .build()
        .unwrap();
    let error = blocked.kickoff("hi").await.unwrap_err();
    assert!(
        matches!(error, AgentError::LlmCallBlocked { .. }),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .contains("LLM call blocked by before_llm_call hook")
    );
    assert_eq!(server.request_count(), 0, "a blocked call is never sent");

    server.push(Reply::text("original"));
    let counted = Arc::new(AtomicU32::new(0));
    let count = counted.clone();
    let hooks = Hooks::new()
        .before_llm_call(move |ctx| {
            count.fetch_add(ctx.messages.len() as u32, Ordering::SeqCst);
            ctx.messages.push(Message::user("Also: be brief."));
            HookDecision::Continue
        })
        .after_llm_call(|ctx| ctx.response.as_ref().map(|r| format!("[HOOKED] {r}")));
    let agent = agent_with(openai(&server)).hooks(hooks).build().unwrap();
    let output = agent.kickoff("hi").await.unwrap();
    assert_eq!(output.raw, "[HOOKED] original");
    assert_eq!(counted.load(Ordering::SeqCst), 2);
    assert_eq!(
        server.requests()[0].messages().len(),
        3,
        "the before hook added a message"
    );
}

#[tokio::test]
async fn a_hooks_layer_wraps_a_bare_call() {
    let server = server().await;
    server.push(Reply::text("Hello! How can I assist you today?"));
    let seen = Arc::new(Mutex::new(None));
    let sink = seen.clone();
    let hooks = Hooks::new()
        .before_llm_call(move |ctx| {
            *sink.lock().unwrap() = Some((
                ctx.origin.agent_role.clone(),
                ctx.model.clone(),
                ctx.messages.len(),
            ));
            HookDecision::Continue
        })
        .after_llm_call(|ctx| ctx.response.as_ref().map(|r| format!("[HOOKED] {r}")));
    let llm = LayeredLlm::builder(openai(&server))
        .layer(HooksLayer::new(hooks))
        .build();
    let reply = llm
        .call(LlmRequest::new(vec![Message::user("Say hello")]))
        .await
        .unwrap();
    assert_eq!(
        reply.content.as_deref(),
        Some("[HOOKED] Hello! How can I assist you today?")
    );
    assert_eq!(
        *seen.lock().unwrap(),
        Some((None, Some("gpt-4o-mini".to_string()), 1))
    );

    let blocked = LayeredLlm::builder(openai(&server))
        .layer(HooksLayer::new(
            Hooks::new().before_llm_call(|_| HookDecision::block()),
        ))
        .build();
    let error = blocked
        .call(LlmRequest::new(vec![Message::user("Say hello")]))
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "LLM call blocked by before_llm_call hook"
    );
}

#[tokio::test]
async fn events_form_a_chain_from_the_caller_to_llm_and_tool_calls() {
    let server = server().await;
    server.push(Reply::tool_call("multiplier", json!({"a": 2, "b": 3})));
    server.push(Reply::text("6"));
    let bus = EventBus::new();
    let recorder = EventRecorder::attach(&bus);
    let task_event = bus.emit(
        None,
        EventKind::TaskStarted {
            task_name: Some("math".into()),
            task_id: None,
            agent_role: Some("test role".into()),
            context: None,
        },
    );
    let agent = agent_with(openai(&server)).build().unwrap();
    let prompt = crewai_core::preview::task_prompt("Multiply 2 by 3", "the product");
    let request = AgentTaskRequest::new(prompt.clone())
        .with_task_name("math")
        .with_parent_event(task_event)
        .with_tools(ToolSet::from(vec![multiplier(Arc::new(AtomicU32::new(0)))]))
        .with_event_bus(bus.clone());
    agent.run_task(request).await.unwrap();

    let events = recorder.events();
    let started = events
        .iter()
        .find(|e| e.type_name() == "agent_execution_started")
        .unwrap();
    assert_eq!(started.parent_event_id, Some(task_event));
    let json = started.to_json();
    assert_eq!(json["task_prompt"], prompt);
    assert_eq!(json["tools"], json!(["multiplier"]));
    assert_eq!(json["agent_role"], "test role");
    for name in [
        "llm_call_started",
        "llm_call_completed",
        "tool_usage_started",
        "tool_usage_finished",
    ] {
        let child = events
            .iter()
            .find(|e| e.type_name() == name)
            .unwrap_or_else(|| panic!("no {name}"));
        assert_eq!(
            child.parent_event_id,
            Some(started.event_id),
            "{name} hangs under the agent execution"
        );
    }
    let completed = events
        .iter()
        .rev()
        .find(|e| e.type_name() == "llm_call_completed")
        .unwrap();
    assert_eq!(completed.to_json()["usage"]["total_tokens"], 15);
    assert_eq!(
        events
            .iter()
            .filter(|e| e.type_name() == "agent_execution_completed")
            .count(),
        1
    );
    let sequence: Vec<u64> = events.iter().map(|e| e.emission_sequence).collect();
    assert!(sequence.windows(2).all(|w| w[0] < w[1]));
    let tool_started = events
        .iter()
        .find(|e| e.type_name() == "tool_usage_started")
        .unwrap()
        .to_json();
    assert_eq!(tool_started["tool_args"], json!({"a": 2, "b": 3}));
    assert_eq!(tool_started["task_name"], "math");
}

#[tokio::test]
async fn kickoff_emits_lite_agent_events_on_the_agents_bus() {
    let server = server().await;
    server.push(Reply::text("hello"));
    let bus = EventBus::new();
    let recorder = EventRecorder::attach(&bus);
    let agent = agent_with(openai(&server)).event_bus(bus).build().unwrap();
    agent.kickoff("hi").await.unwrap();
    assert_eq!(
        recorder.type_names(),
        vec![
            "lite_agent_execution_started",
            "llm_call_started",
            "llm_call_completed",
            "lite_agent_execution_completed"
        ]
    );
}

#[tokio::test]
async fn a_failed_guardrail_feeds_back_and_the_agent_tries_again() {
    let server = server().await;
    server.push(Reply::text("Pelé, Neymar"));
    server.push(Reply::text("Messi, Maradona"));
    let bus = EventBus::new();
    let recorder = EventRecorder::attach(&bus);
    let guardrail = Guardrail::named("no_brazilians", |out| {
        if out.raw.contains("Neymar") {
            Err("You are not allowed to include Brazilian players".into())
        } else {
            Ok(GuardrailPass::Keep)
        }
    });
    let agent = agent_with(openai(&server))
        .guardrail(guardrail)
        .event_bus(bus)
        .build()
        .unwrap();
    let output = agent.kickoff("Top players?").await.unwrap();

    assert_eq!(output.raw, "Messi, Maradona");
    let retry = server.requests()[1].messages().to_vec();
    assert_eq!(
        retry.len(),
        4,
        "the same conversation goes on: system, user, answer, feedback"
    );
    assert_eq!(retry[2]["content"], "Pelé, Neymar");
    assert!(
        retry[3]["content"]
            .as_str()
            .unwrap()
            .contains("You are not allowed to include Brazilian players")
    );
    let completed: Vec<_> = recorder
        .of_type("llm_guardrail_completed")
        .iter()
        .map(|e| {
            (
                e.to_json()["success"].clone(),
                e.to_json()["retry_count"].clone(),
            )
        })
        .collect();
    assert_eq!(
        completed,
        vec![(json!(false), json!(0)), (json!(true), json!(1))]
    );
    assert_eq!(output.usage.successful_requests, 2);
}

#[tokio::test]
async fn the_guardrail_gives_up_after_its_retries() {
    let server = server().await;
    server.push_all((0..3).map(|i| Reply::text(format!("attempt {i}"))));
    let bus = EventBus::new();
    let recorder = EventRecorder::attach(&bus);
    let agent = agent_with(openai(&server))
        .guardrail(Guardrail::func(|_| {
            Err("You are not allowed to include Brazilian players".into())
        }))
        .guardrail_max_retries(2)
        .event_bus(bus)
        .build()
        .unwrap();
    let error = agent.kickoff("Top players?").await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "Agent's guardrail failed validation after 2 retries. Last error: You are not allowed to include Brazilian players"
    );
    assert_eq!(recorder.of_type("llm_guardrail_started").len(), 3);
    assert_eq!(recorder.of_type("llm_guardrail_completed").len(), 3);
    assert_eq!(server.request_count(), 3);
}

#[tokio::test]
async fn a_typed_guardrail_result_becomes_the_typed_output() {
    let server = server().await;
    server.push(Reply::text("1. Lionel Messi ..."));
    let agent = agent_with(openai(&server))
        .guardrail(Guardrail::func(|_| {
            Ok(GuardrailPass::Typed(
                json!({"name": "Lionel Messi", "country": "Argentina"}),
            ))
        }))
        .build()
        .unwrap();
    let output = agent.kickoff("Top 10 players?").await.unwrap();
    assert_eq!(output.raw, "1. Lionel Messi ...");
    assert_eq!(
        output.typed,
        Some(json!({"name": "Lionel Messi", "country": "Argentina"}))
    );
}

#[tokio::test]
async fn an_llm_guardrail_is_judged_by_the_agents_model() {
    let server = server().await;
    server.push(Reply::text("Books by Umberto Eco"));
    server.push(Reply::text("{\"valid\": true, \"feedback\": null}"));
    let agent = agent_with(openai(&server))
        .guardrail(Guardrail::llm("Ensure the authors are from Italy"))
        .build()
        .unwrap();
    let output = agent.kickoff("Recommend books").await.unwrap();
    assert_eq!(output.raw, "Books by Umberto Eco");
    let judge = &server.requests()[1];
    assert_eq!(
        judge.body["response_format"]["json_schema"]["name"],
        "LLMGuardrailResult"
    );
    assert!(message_text(judge, 1).contains("Ensure the authors are from Italy"));
    assert_eq!(
        output.usage.successful_requests, 2,
        "the judge's call is part of the kickoff's usage"
    );
}

#[tokio::test]
async fn the_step_callback_sees_tool_steps_and_the_final_answer() {
    let server = server().await;
    server.push(Reply::tool_call("multiplier", json!({"a": 4, "b": 4})));
    server.push(Reply::text("16"));
    let steps = Arc::new(Mutex::new(Vec::new()));
    let sink = steps.clone();
    let agent = agent_with(openai(&server))
        .step_callback(move |step| sink.lock().unwrap().push(step.clone()))
        .build()
        .unwrap();
    run_with(
        &agent,
        "Square 4",
        vec![multiplier(Arc::new(AtomicU32::new(0)))],
    )
    .await
    .unwrap();
    let steps = steps.lock().unwrap();
    assert!(
        matches!(&steps[0], AgentStep::ToolCall { tool, result, .. } if tool == "multiplier" && result == "16")
    );
    assert!(matches!(&steps[1], AgentStep::FinalAnswer { output, .. } if output == "16"));
}
