//! The three executor loops over the real OpenAI client and a scripted server.

mod agent_common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use agent_common::*;
use crewai_core::agent::AgentTaskRequest;
use crewai_core::events::EventBus;
use crewai_core::preview::{forced_final_answer, task_prompt};
use crewai_llm::ResponseFormat;
use crewai_testkit::scripted::{Reply, ScriptedToolCall};
use crewai_tools::{DynamicTool, ToolError, ToolOutput, ToolSet};
use serde_json::{Value, json};

#[tokio::test]
async fn native_loop_runs_the_tool_and_returns_the_next_text() {
    let server = server().await;
    server.push(Reply::tool_call("multiplier", json!({"a": 6, "b": 7})));
    server.push(Reply::text("The product is 42."));
    let runs = Arc::new(AtomicU32::new(0));
    let agent = agent_with(openai(&server)).build().unwrap();

    let request = AgentTaskRequest::new(task_prompt("Multiply 6 by 7", "The product"))
        .with_tools(ToolSet::from(vec![multiplier(runs.clone())]));
    let result = agent.run_task(request).await.unwrap();

    assert_eq!(result.raw, "The product is 42.");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].tool_names(), vec!["multiplier"]);
    assert_eq!(requests[0].body["tool_choice"], "auto");
    assert_eq!(
        message_text(&requests[0], 0),
        "You are test role. test backstory\nYour personal goal is: test goal"
    );
    assert!(message_text(&requests[0], 1).starts_with("\nCurrent Task: Multiply 6 by 7"));
    let second = requests[1].messages();
    assert_eq!(second[2]["role"], "assistant");
    assert_eq!(second[2]["tool_calls"][0]["function"]["name"], "multiplier");
    assert_eq!(second[3]["role"], "tool");
    assert_eq!(second[3]["tool_call_id"], second[2]["tool_calls"][0]["id"]);
    assert_eq!(second[3]["content"], "42");
    assert_eq!(result.usage.successful_requests, 2);
    assert_eq!(result.usage.total_tokens, 30);
}

#[tokio::test]
async fn native_text_with_action_words_is_still_the_final_answer() {
    let server = server().await;
    server.push(Reply::text(
        "Action: multiplier\nAction Input: {\"a\": 1, \"b\": 2}",
    ));
    let agent = agent_with(openai(&server)).build().unwrap();
    let request = AgentTaskRequest::new("Multiply")
        .with_tools(ToolSet::from(vec![multiplier(Arc::new(AtomicU32::new(0)))]));
    let result = agent.run_task(request).await.unwrap();
    assert_eq!(
        result.raw,
        "Action: multiplier\nAction Input: {\"a\": 1, \"b\": 2}"
    );
    assert_eq!(server.request_count(), 1);
}

/// Two tools that each wait until the other has started: they only finish if they run concurrently.
#[tokio::test]
async fn tool_calls_of_one_response_run_concurrently_and_report_in_order() {
    let server = server().await;
    server.push(Reply::tool_calls([
        ScriptedToolCall::new("left", json!({})),
        ScriptedToolCall::new("right", json!({})),
    ]));
    server.push(Reply::text("both done"));
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let meeting_tool = |name: &'static str| {
        let barrier = barrier.clone();
        DynamicTool::new(
            name,
            "Waits for its partner.",
            json!({"type": "object", "properties": {}}),
            move |_args: Value, _ctx| {
                let barrier = barrier.clone();
                async move {
                    match tokio::time::timeout(Duration::from_secs(5), barrier.wait()).await {
                        Ok(_) => Ok::<ToolOutput, ToolError>(ToolOutput::Text(format!(
                            "{name} met its partner"
                        ))),
                        Err(_) => Err(ToolError::failed(
                            "ran alone: the calls were not concurrent",
                        )),
                    }
                }
            },
        )
        .into_handle()
    };
    let agent = agent_with(openai(&server)).build().unwrap();
    let request = AgentTaskRequest::new("Run both").with_tools(ToolSet::from(vec![
        meeting_tool("left"),
        meeting_tool("right"),
    ]));
    let result = agent.run_task(request).await.unwrap();
    assert_eq!(result.raw, "both done");
    let second = server.requests()[1].messages().to_vec();
    assert_eq!(second[3]["content"], "left met its partner");
    assert_eq!(second[4]["content"], "right met its partner");
}

#[tokio::test]
async fn usage_limited_tools_run_one_by_one_and_refuse_past_the_limit() {
    let server = server().await;
    server.push(Reply::tool_calls((1..=4).map(|n| {
        ScriptedToolCall::new("multiplier", json!({"a": n, "b": 1}))
    })));
    server.push(Reply::text("done"));
    let runs = Arc::new(AtomicU32::new(0));
    let tool = multiplier(runs.clone()).with_max_usage_count(2);
    let agent = agent_with(openai(&server)).build().unwrap();
    run_with(&agent, "Count", vec![tool.clone()]).await.unwrap();

    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_eq!(tool.current_usage_count(), 2);
    let second = server.requests()[1].messages().to_vec();
    assert_eq!(second[3]["content"], "1");
    assert_eq!(second[4]["content"], "2");
    for refused in &second[5..7] {
        assert!(
            refused["content"]
                .as_str()
                .unwrap()
                .contains("no longer available"),
            "{refused}"
        );
    }
}

#[tokio::test]
async fn result_as_answer_ends_the_run_with_the_tool_output() {
    let server = server().await;
    server.push(Reply::tool_call("multiplier", json!({"a": 2, "b": 21})));
    let tool = multiplier(Arc::new(AtomicU32::new(0))).with_result_as_answer(true);
    let agent = agent_with(openai(&server)).build().unwrap();
    let result = run_with(&agent, "Multiply", vec![tool]).await.unwrap();
    assert_eq!(result.raw, "42");
    assert!(result.result_as_answer);
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn max_iter_forces_a_final_answer_without_tools() {
    let server = server().await;
    server.push(Reply::tool_call("multiplier", json!({"a": 1, "b": 1})));
    server.push(Reply::tool_call("multiplier", json!({"a": 2, "b": 2})));
    server.push(Reply::text("Final Answer: 4"));
    let agent = agent_with(openai(&server)).max_iter(2).build().unwrap();
    let result = run_with(
        &agent,
        "Keep multiplying",
        vec![multiplier(Arc::new(AtomicU32::new(0)))],
    )
    .await
    .unwrap();

    assert_eq!(result.raw, "4");
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert!(requests[1].body.get("tools").is_some());
    assert!(
        requests[2].body.get("tools").is_none(),
        "the forced final call offers no tools"
    );
    let last = requests[2].messages().last().unwrap().clone();
    assert_eq!(last["role"], "assistant");
    assert_eq!(last["content"], forced_final_answer());
}

#[tokio::test]
async fn react_loop_parses_actions_and_feeds_observations_back() {
    let server = server().await;
    server.push(Reply::text(
        "Thought: I need the product\nAction: multiplier\nAction Input: {'a': 3, 'b': 5,}",
    ));
    server.push(Reply::text(
        "Thought: I now know the final answer\nFinal Answer: 15",
    ));
    let runs = Arc::new(AtomicU32::new(0));
    let agent = agent_with(Arc::new(TextOnly(openai(&server))))
        .build()
        .unwrap();
    let result = run_with(&agent, "Multiply 3 by 5", vec![multiplier(runs.clone())])
        .await
        .unwrap();

    assert_eq!(result.raw, "15");
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "the single-quoted, trailing-comma input was repaired"
    );
    let requests = server.requests();
    assert!(requests[0].body.get("tools").is_none());
    let system = message_text(&requests[0], 0);
    assert!(
        system.contains("Tool Name: multiplier") && system.contains("Action Input:"),
        "{system}"
    );
    assert!(message_text(&requests[0], 1).ends_with("Thought:"));
    let observed = message_text(&requests[1], 2);
    assert!(observed.ends_with("\nObservation: 15"), "{observed}");
    assert_eq!(requests[1].messages()[3]["role"], "user");
}

#[tokio::test]
async fn react_loop_tells_the_model_about_an_unknown_tool() {
    let server = server().await;
    server.push(Reply::text("Action: divider\nAction Input: {}"));
    server.push(Reply::text("Final Answer: gave up"));
    let agent = agent_with(Arc::new(TextOnly(openai(&server))))
        .build()
        .unwrap();
    let result = run_with(
        &agent,
        "Divide",
        vec![multiplier(Arc::new(AtomicU32::new(0)))],
    )
    .await
    .unwrap();
    assert_eq!(result.raw, "gave up");
    let observed = message_text(&server.requests()[1], 2);
    assert!(
        observed.contains("divider") && observed.contains("multiplier"),
        "{observed}"
    );
    assert_eq!(result.tool_errors, 1);
}

#[tokio::test]
async fn direct_answer_uses_the_no_tools_prompt_and_the_react_parser() {
    let server = server().await;
    server.push(Reply::text("Thought: easy\nFinal Answer: 2"));
    let agent = agent_with(openai(&server)).build().unwrap();
    let result = agent
        .run_task(
            AgentTaskRequest::new(task_prompt("How much is 1 + 1?", "the result"))
                .with_context("Arithmetic is exact."),
        )
        .await
        .unwrap();
    assert_eq!(result.raw, "2");
    let request = &server.requests()[0];
    assert!(request.body.get("tools").is_none());
    let user = message_text(request, 1);
    assert!(user.starts_with("\nCurrent Task: How much is 1 + 1?"));
    assert!(user.contains("Arithmetic is exact."));
    assert_eq!(
        result.messages.last().unwrap().text(),
        "Thought: easy\nFinal Answer: 2"
    );
}

#[tokio::test]
async fn structured_output_is_asked_on_the_first_call_and_a_non_json_reply_is_retried() {
    let server = server().await;
    server.push(Reply::text(
        "Thought: I now can give a great answer\nFinal Answer: {\n  \"score\": 4\n}",
    ));
    server.push(Reply::text("{\"score\":4}"));
    let agent = agent_with(openai(&server)).build().unwrap();
    let bus = EventBus::new();
    let recorder = crewai_core::events::EventRecorder::attach(&bus);
    let format = ResponseFormat {
        name: "ScoreOutput".into(),
        schema: json!({"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"], "additionalProperties": false}),
        strict: true,
    };
    let request = AgentTaskRequest::new("Score the title")
        .with_response_format(format)
        .with_event_bus(bus);
    let result = agent.run_task(request).await.unwrap();

    assert_eq!(result.raw, "{\"score\":4}");
    assert_eq!(result.typed, Some(json!({"score": 4})));
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].body["response_format"]["type"], "json_schema");
    assert_eq!(
        requests[0].body["response_format"]["json_schema"]["name"],
        "ScoreOutput"
    );
    let names = recorder.type_names();
    assert!(
        names.contains(&"llm_call_failed") && names.contains(&"agent_execution_error"),
        "{names:?}"
    );
    assert_eq!(result.usage.successful_requests, 2);
}

#[tokio::test]
async fn kickoff_with_text_returns_output_and_usage() {
    let server = server().await;
    server.push(Reply::text("10").with_usage(40, 1));
    let agent = agent_with(openai(&server)).build().unwrap();
    let output = agent
        .kickoff("What is 5+5? Reply with just the number.")
        .await
        .unwrap();
    assert_eq!(output.raw, "10");
    assert_eq!(output.agent_role, "test role");
    assert_eq!(output.usage.total_tokens, 41);
    assert_eq!(
        message_text(&server.requests()[0], 1),
        "\nCurrent Task: What is 5+5? Reply with just the number.\n\nGive your complete response:"
    );
}

#[tokio::test]
async fn kickoff_with_a_format_and_tools_parses_the_final_answer() {
    let server = server().await;
    server.push(Reply::tool_call("multiplier", json!({"a": 9, "b": 10})));
    server.push(Reply::text("{\"summary\": \"ninety\", \"confidence\": 90}"));
    let agent = agent_with(openai(&server))
        .tools(vec![multiplier(Arc::new(AtomicU32::new(0)))])
        .build()
        .unwrap();
    let format = ResponseFormat {
        name: "SimpleOutput".into(),
        schema: json!({"type": "object", "properties": {"summary": {"type": "string"}, "confidence": {"type": "integer"}}, "required": ["summary", "confidence"]}),
        strict: true,
    };
    let output = agent
        .kickoff_with_format("What is 9 times 10?", format)
        .await
        .unwrap();
    assert_eq!(
        output.typed,
        Some(json!({"summary": "ninety", "confidence": 90}))
    );
    assert!(message_text(&server.requests()[0], 1).contains("summary, confidence"));
    assert!(
        server.requests()[0].body.get("response_format").is_none(),
        "a model with tools is not held to a format"
    );
}

#[tokio::test]
async fn a_provider_without_tools_moves_the_run_to_react_text() {
    let server = server().await;
    server.push(Reply::error(
        400,
        "registry.ollama.ai/library/gemma does not support tools",
    ));
    server.push(Reply::text(
        "Action: multiplier\nAction Input: {\"a\": 2, \"b\": 2}",
    ));
    server.push(Reply::text("Final Answer: 4"));
    let runs = Arc::new(AtomicU32::new(0));
    let agent = agent_with(openai(&server)).build().unwrap();
    let result = run_with(&agent, "Multiply 2 by 2", vec![multiplier(runs.clone())])
        .await
        .unwrap();
    assert_eq!(result.raw, "4");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let requests = server.requests();
    assert!(requests[1].body.get("tools").is_none());
    let switch = requests[1].messages().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(switch.contains("Tool Name: multiplier"), "{switch}");
}
