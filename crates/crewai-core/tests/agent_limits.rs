//! Deadlines, retries, context overflow and tool problems.

mod agent_common;

use crewai_testkit::timing::assert_ended_on_time;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use agent_common::*;
use crewai_core::agent::AgentTaskRequest;
use crewai_core::error::AgentError;
use crewai_core::events::{EventBus, EventRecorder};
use crewai_testkit::scripted::Reply;
use crewai_tools::{DynamicTool, ToolError, ToolFailurePolicy, ToolOutput, ToolSet};
use serde_json::{Value, json};

#[tokio::test]
async fn max_execution_time_fails_with_a_timeout_naming_agent_and_task() {
    let server = server().await;
    server.push(Reply::text("too late").delayed(Duration::from_secs(30)));
    let agent = agent_with(openai(&server))
        .max_execution_time(Duration::from_millis(300))
        .build()
        .unwrap();
    let bus = EventBus::new();
    let recorder = EventRecorder::attach(&bus);
    let request = AgentTaskRequest::new("Say something")
        .with_task_name("slow_task")
        .with_event_bus(bus);

    let started = std::time::Instant::now();
    let error = agent.run_task(request).await.unwrap_err();
    // The deadline, not the reply held for 30 s, ended it.
    assert_ended_on_time(started.elapsed(), Duration::from_millis(300), "deadline");
    assert!(matches!(error, AgentError::Timeout { .. }), "{error:?}");
    let text = error.to_string();
    assert!(
        text.contains("test role") && text.contains("slow_task") && text.contains("timed out"),
        "{text}"
    );
    assert_eq!(server.request_count(), 1, "a timeout is not retried");
    assert_eq!(recorder.of_type("agent_execution_error").len(), 1);
}

#[tokio::test]
async fn a_slow_tool_is_cancelled_by_the_deadline() {
    let server = server().await;
    server.push(Reply::tool_call("sleeper", json!({})));
    let cancelled = Arc::new(AtomicU32::new(0));
    let seen = cancelled.clone();
    let sleeper = DynamicTool::new(
        "sleeper",
        "Sleeps.",
        json!({"type": "object", "properties": {}}),
        move |_args: Value, ctx| {
            let seen = seen.clone();
            async move {
                // Runs detached so it outlives the dropped call and can observe the cancellation.
                let waiter = tokio::spawn(async move {
                    ctx.cancellation.cancelled().await;
                    seen.fetch_add(1, Ordering::SeqCst);
                });
                tokio::time::sleep(Duration::from_secs(30)).await;
                drop(waiter);
                Ok::<ToolOutput, ToolError>(ToolOutput::Text("woke".into()))
            }
        },
    )
    .into_handle();
    let agent = agent_with(openai(&server))
        .max_execution_time(Duration::from_millis(300))
        .build()
        .unwrap();
    let started = std::time::Instant::now();
    let error = run_with(&agent, "Sleep", vec![sleeper]).await.unwrap_err();
    // The deadline, not the tool's 30 s sleep, ended it.
    assert_ended_on_time(started.elapsed(), Duration::from_millis(300), "deadline");
    assert!(matches!(error, AgentError::Timeout { .. }), "{error:?}");
    for _ in 0..100 {
        if cancelled.load(Ordering::SeqCst) == 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the tool's cancellation token was not cancelled");
}

#[tokio::test]
async fn an_unusable_reply_is_retried_up_to_max_retry_limit() {
    let server = server().await;
    server.push(Reply::raw(
        200,
        "application/json",
        "{\"choices\": \"garbled",
    ));
    server.push(Reply::text(""));
    server.push(Reply::text("Final Answer: recovered"));
    let agent = agent_with(openai(&server)).build().unwrap();
    let bus = EventBus::new();
    let recorder = EventRecorder::attach(&bus);
    let result = agent
        .run_task(AgentTaskRequest::new("Try").with_event_bus(bus))
        .await
        .unwrap();
    assert_eq!(result.raw, "recovered");
    assert_eq!(recorder.of_type("agent_execution_error").len(), 2);
    assert_eq!(recorder.of_type("agent_execution_completed").len(), 1);

    let exhausted = agent_common::server().await;
    exhausted.push_all([Reply::text(""), Reply::text("  ")]);
    let agent = agent_with(openai(&exhausted))
        .max_retry_limit(1)
        .build()
        .unwrap();
    let error = agent
        .run_task(AgentTaskRequest::new("Try"))
        .await
        .unwrap_err();
    assert!(matches!(error, AgentError::EmptyAnswer { .. }), "{error:?}");
    assert_eq!(exhausted.request_count(), 2);
}

#[tokio::test]
async fn a_rejected_request_is_not_retried() {
    let server = server().await;
    server.push(Reply::error(400, "Invalid value for 'model'"));
    let agent = agent_with(openai(&server)).build().unwrap();
    let error = agent
        .run_task(AgentTaskRequest::new("Try"))
        .await
        .unwrap_err();
    let text = crewai_llm::error_chain(&error);
    assert!(text.contains("Invalid value for 'model'"), "{text}");
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn context_overflow_summarises_the_history_and_retries() {
    let server = server().await;
    server.push(Reply::context_length_exceeded());
    server.push(Reply::text(
        "<summary>The user wants the sum of 2 and 2.</summary>",
    ));
    server.push(Reply::text("Final Answer: 4"));
    let agent = agent_with(openai(&server)).build().unwrap();
    let result = agent
        .run_task(AgentTaskRequest::new("Add 2 and 2").with_context("x".repeat(500)))
        .await
        .unwrap();
    assert_eq!(result.raw, "4");

    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let summarise = message_text(&requests[1], 1);
    assert!(
        summarise.contains("Add 2 and 2"),
        "the summariser sees the history: {summarise}"
    );
    let retried = requests[2].messages();
    assert_eq!(retried.len(), 2);
    assert_eq!(retried[0]["role"], "system");
    assert!(
        retried[0]["content"]
            .as_str()
            .unwrap()
            .starts_with("You are test role.")
    );
    assert!(
        retried[1]["content"]
            .as_str()
            .unwrap()
            .contains("The user wants the sum of 2 and 2.")
    );
    assert_eq!(
        result.usage.successful_requests, 2,
        "the summary call is counted"
    );
}

#[tokio::test]
async fn long_histories_are_summarised_in_several_chunks() {
    let server = server().await;
    server.push(Reply::context_length_exceeded());
    // A 1024-token window makes chunks of 2,610 characters; the 7,400-character history needs three.
    for part in 0..3 {
        server.push(Reply::text(format!("<summary>part {part}</summary>")));
    }
    server.push(Reply::text("Final Answer: done"));
    let agent = agent_with(openai_with_window(&server, 1024))
        .build()
        .unwrap();
    let context = (0..3)
        .map(|i| format!("section {i}: {}", "words ".repeat(400)))
        .collect::<Vec<_>>()
        .join("\n");
    let result = agent
        .run_task(AgentTaskRequest::new("Summarise the sections").with_context(context))
        .await;
    let requests = server.requests();
    let summary_calls = requests
        .iter()
        .filter(|r| message_text(r, 0) == crewai_core::preview::summarizer_system_prompt())
        .count();
    assert_eq!(summary_calls, 3);
    let final_request = requests.last().unwrap();
    let continuation = message_text(final_request, 1);
    assert!(
        continuation.contains("part 0\n\npart 1\n\npart 2"),
        "{continuation}"
    );
    assert_eq!(result.unwrap().raw, "done");
}

#[tokio::test]
async fn without_respect_context_window_the_error_says_how_to_fix_it() {
    let server = server().await;
    server.push(Reply::context_length_exceeded());
    let agent = agent_with(openai(&server))
        .respect_context_window(false)
        .build()
        .unwrap();
    let error = agent
        .run_task(AgentTaskRequest::new("Too much"))
        .await
        .unwrap_err();
    assert!(
        matches!(error, AgentError::ContextWindowExceeded { .. }),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("respect_context_window: true"),
        "{error}"
    );
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn a_failing_tool_becomes_an_observation_and_an_event() {
    let server = server().await;
    server.push(Reply::tool_call("failing_tool", json!({})));
    server.push(Reply::text("It failed."));
    let agent = agent_with(openai(&server))
        .role("Calculator")
        .build()
        .unwrap();
    let bus = EventBus::new();
    let recorder = EventRecorder::attach(&bus);
    let result = agent
        .run_task(
            AgentTaskRequest::new("Use the failing tool")
                .with_tools(ToolSet::from(vec![failing("This tool always fails")]))
                .with_event_bus(bus),
        )
        .await
        .unwrap();
    assert_eq!(result.raw, "It failed.");
    assert_eq!(result.tool_errors, 1);
    let observation = server.requests()[1].messages()[3]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        observation.contains("Error executing tool")
            && observation.contains("This tool always fails"),
        "{observation}"
    );
    let errors = recorder.of_type("tool_usage_error");
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].to_json()["tool_name"], "failing_tool");
    assert_eq!(errors[0].to_json()["agent_role"], "Calculator");
}

#[tokio::test]
async fn tool_failure_policy_raise_fails_the_run() {
    let server = server().await;
    server.push(Reply::tool_call("failing_tool", json!({})));
    let agent = agent_with(openai(&server))
        .tool_failure_policy(ToolFailurePolicy::Raise)
        .build()
        .unwrap();
    let error = run_with(&agent, "Use it", vec![failing("boom")])
        .await
        .unwrap_err();
    assert!(matches!(error, AgentError::ToolFailed { .. }), "{error:?}");
    let text = crewai_llm::error_chain(&error);
    assert!(
        text.contains("failing_tool") && text.contains("boom"),
        "{text}"
    );
    assert_eq!(
        server.request_count(),
        1,
        "a raised tool failure is not retried"
    );
}

#[tokio::test]
async fn invalid_arguments_are_explained_to_the_model_and_the_tool_does_not_run() {
    let server = server().await;
    server.push(Reply::tool_call("multiplier", json!({"a": "six", "b": 7})));
    server.push(Reply::tool_call("multiplier", json!({"a": 6, "b": 7})));
    server.push(Reply::text("42"));
    let runs = Arc::new(AtomicU32::new(0));
    let agent = agent_with(openai(&server)).build().unwrap();
    let result = run_with(&agent, "Multiply", vec![multiplier(runs.clone())])
        .await
        .unwrap();
    assert_eq!(result.raw, "42");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let observation = server.requests()[1].messages()[3]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        observation.contains("`a`") && observation.contains("integer"),
        "{observation}"
    );
}

#[tokio::test]
async fn broken_argument_json_is_repaired() {
    let server = server().await;
    server.push(Reply::tool_calls([
        crewai_testkit::scripted::ScriptedToolCall::raw(
            "multiplier",
            "```json\n{\"a\": 2, \"b\": 3,}\n```",
        ),
    ]));
    server.push(Reply::text("6"));
    let runs = Arc::new(AtomicU32::new(0));
    let agent = agent_with(openai(&server)).build().unwrap();
    run_with(&agent, "Multiply", vec![multiplier(runs.clone())])
        .await
        .unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(server.requests()[1].messages()[3]["content"], "6");
}

#[tokio::test]
async fn an_unknown_native_tool_gets_the_list_of_tools() {
    let server = server().await;
    server.push(Reply::tool_call("divider", json!({})));
    server.push(Reply::text("ok"));
    let agent = agent_with(openai(&server)).build().unwrap();
    run_with(
        &agent,
        "Divide",
        vec![multiplier(Arc::new(AtomicU32::new(0)))],
    )
    .await
    .unwrap();
    let observation = server.requests()[1].messages()[3]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        observation.contains("divider") && observation.contains("multiplier"),
        "{observation}"
    );
}

#[tokio::test]
async fn the_crew_cache_serves_repeated_calls_when_the_agent_joins_it() {
    let server = server().await;
    server.push(Reply::tool_call("multiplier", json!({"a": 2, "b": 6})));
    server.push(Reply::text("12"));
    server.push(Reply::tool_call("multiplier", json!({"b": 6, "a": 2})));
    server.push(Reply::text("12 again"));
    let runs = Arc::new(AtomicU32::new(0));
    let tool = multiplier(runs.clone());
    let cache = crewai_tools::ToolCache::new();
    let bus = EventBus::new();
    let recorder = EventRecorder::attach(&bus);
    let agent = agent_with(openai(&server)).build().unwrap();
    for _ in 0..2 {
        agent
            .run_task(
                AgentTaskRequest::new("Multiply")
                    .with_tools(ToolSet::from(vec![tool.clone()]))
                    .with_tool_cache(cache.clone())
                    .with_event_bus(bus.clone()),
            )
            .await
            .unwrap();
    }
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "the second call is served from the cache"
    );
    let finished = recorder.of_type("tool_usage_finished");
    assert_eq!(finished.last().unwrap().to_json()["from_cache"], true);

    let uncached = agent_with(openai(&server)).cache(false).build().unwrap();
    server.push(Reply::tool_call("multiplier", json!({"a": 2, "b": 6})));
    server.push(Reply::text("12"));
    uncached
        .run_task(
            AgentTaskRequest::new("Multiply")
                .with_tools(ToolSet::from(vec![tool]))
                .with_tool_cache(cache)
                .with_event_bus(bus),
        )
        .await
        .unwrap();
    assert_eq!(
        runs.load(Ordering::SeqCst),
        2,
        "an agent with cache: false does not read the crew cache"
    );
}

#[tokio::test]
async fn cancelling_the_run_stops_it() {
    let server = server().await;
    server.push(Reply::text("never").delayed(Duration::from_secs(30)));
    let agent = agent_with(openai(&server)).build().unwrap();
    let token = tokio_util::sync::CancellationToken::new();
    let cancel = token.clone();
    let run = tokio::spawn(async move {
        agent
            .run_task(AgentTaskRequest::new("Wait").with_cancellation(cancel))
            .await
    });
    assert!(server.wait_for_requests(1, Duration::from_secs(5)).await);
    token.cancel();
    let error = run.await.unwrap().unwrap_err();
    assert!(matches!(error, AgentError::Cancelled { .. }), "{error:?}");
}

#[tokio::test]
async fn a_shared_rate_limiter_holds_the_second_call_and_announces_the_wait() {
    let server = server().await;
    server.push(Reply::tool_call("multiplier", json!({"a": 6, "b": 7})));
    server.push_text("42");
    let clock = crewai_llm::VirtualClock::new();
    let limiter = crewai_llm::RateLimiter::with_clock(Some(1), None, clock.clone());
    let runs = Arc::new(AtomicU32::new(0));
    let agent = agent_with(openai(&server))
        .rate_limiter(limiter.clone())
        .tools(vec![multiplier(runs)])
        .verbose(true)
        .build()
        .unwrap();
    assert_eq!(agent.max_rpm(), Some(1), "the limit is the limiter's");
    let bus = EventBus::new();
    let recorder = EventRecorder::attach(&bus);

    let result = agent
        .run_task(
            AgentTaskRequest::new("Multiply 6 by 7")
                .with_task_name("math")
                .with_event_bus(bus),
        )
        .await
        .unwrap();

    assert_eq!(result.raw, "42");
    // The first call had the bucket's only slot; the second waited a (virtual) minute for the next.
    assert_eq!(clock.sleeps(), [Duration::from_secs(60)]);
    let waits = recorder.of_type("rate_limit_wait_started");
    assert_eq!(waits.len(), 1);
    let wait = waits[0].to_json();
    assert_eq!(
        (wait["agent_role"].as_str(), wait["task_name"].as_str()),
        (Some("test role"), Some("math"))
    );
    assert_eq!(
        (wait["max_rpm"].as_u64(), wait["wait_ms"].as_u64()),
        (Some(1), Some(60_000))
    );
    // Announced before the held-back call started.
    let names = recorder.type_names();
    let wait_at = names
        .iter()
        .position(|n| *n == "rate_limit_wait_started")
        .unwrap();
    assert_eq!(
        names.iter().filter(|n| **n == "llm_call_started").count(),
        2
    );
    assert_eq!(
        names[..wait_at]
            .iter()
            .filter(|n| **n == "llm_call_started")
            .count(),
        1
    );
}

#[tokio::test]
async fn agents_sharing_a_limiter_share_its_budget() {
    let server = server().await;
    server.push_text("one").push_text("two");
    let clock = crewai_llm::VirtualClock::new();
    let limiter = crewai_llm::RateLimiter::with_clock(Some(1), None, clock.clone());
    let first = agent_with(openai(&server))
        .rate_limiter(limiter.clone())
        .build()
        .unwrap();
    let second = agent_with(openai(&server))
        .role("other role")
        .rate_limiter(limiter)
        .build()
        .unwrap();

    first
        .run_task(AgentTaskRequest::new("First"))
        .await
        .unwrap();
    assert!(clock.sleeps().is_empty());
    second
        .run_task(AgentTaskRequest::new("Second"))
        .await
        .unwrap();

    assert_eq!(
        clock.sleeps(),
        [Duration::from_secs(60)],
        "the second agent waited for the first one's slot to refill"
    );
}
