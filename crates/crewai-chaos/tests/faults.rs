//! Each fault kind on its own, through the real OpenAI client (and, for tool faults, a crew):
//! the regression tests of the gaps the soak found.

use std::sync::Arc;
use std::time::Duration;

use crewai::prelude::*;
use crewai::tool;
use crewai_core::interpolate::Inputs;
use crewai_llm::router::BuildOptions;
use crewai_llm::{RetryPolicy, build_llm_with, collect_stream};
use crewai_testkit::fault::{Fault, FaultServer, UNKNOWN_TOOL_NAME};
use crewai_testkit::scripted::Reply;
use serde_json::json;

fn client(server: &FaultServer, max_retries: u32, timeout: f64) -> Arc<dyn Llm> {
    let config = LlmConfig::new("openai/gpt-4o-mini")
        .with_base_url(server.base_url())
        .with_api_key("sk-test")
        .with_timeout(timeout)
        .with_max_retries(max_retries);
    let options = BuildOptions::new()
        .with_env_vars(std::iter::empty::<(String, String)>())
        .with_retry_policy(
            RetryPolicy::default().with_delays(Duration::from_millis(5), Duration::from_millis(20)),
        );
    build_llm_with(&config, &options).expect("the OpenAI client builds")
}

/// The faults that garble a reply that did arrive: a body or stream cut short or broken, or a
/// completion without choices.
const GARBLED: [Fault; 4] = [
    Fault::ResetMidBody,
    Fault::MalformedJson,
    Fault::TruncatedStream,
    Fault::NoChoices,
];

/// A one-line question.
fn hi() -> LlmRequest {
    LlmRequest::new(vec![Message::user("hi")])
}

/// A garbled reply is a typed error of its own, not an empty answer.
fn assert_malformed(error: Option<LlmError>, fault: &Fault) {
    assert!(
        matches!(error, Some(LlmError::MalformedResponse { .. })),
        "{fault:?}: {error:?}"
    );
}

/// A crew of `agent` and its one task `name` (`description`, `expected_output`).
fn one_task_crew(
    agent: Agent,
    name: &str,
    description: &str,
    expected_output: &str,
) -> crewai::CrewBuilder {
    Crew::builder().agents(vec![agent.clone()]).tasks(vec![
        Task::builder()
            .name(name)
            .description(description)
            .expected_output(expected_output)
            .agent(agent)
            .build()
            .unwrap(),
    ])
}

async fn server_with(fault: Fault) -> FaultServer {
    FaultServer::builder()
        .script([fault])
        .responder(|_| Reply::text("recovered"))
        .start()
        .await
}

#[tokio::test]
async fn one_faulty_request_of_any_kind_costs_one_more_request_not_the_call() {
    let faults = [
        Fault::NeverAnswer,
        Fault::Slow(Duration::from_millis(50)),
        Fault::RateLimited {
            retry_after_seconds: 0,
        },
        Fault::ServerError(500),
        Fault::ServerError(502),
        Fault::ServerError(503),
    ];
    // Before the fix the garbled replies failed the call at once: they were not retried.
    for fault in faults.into_iter().chain(GARBLED) {
        let server = server_with(fault.clone()).await;
        let reply = client(&server, 2, 0.5)
            .call(hi())
            .await
            .unwrap_or_else(|e| panic!("{fault:?}: {e}"));
        assert_eq!(reply.content.as_deref(), Some("recovered"), "{fault:?}");
        // A slow answer is still an answer; every other fault costs one more request.
        let expected = if matches!(fault, Fault::Slow(_)) {
            1
        } else {
            2
        };
        assert_eq!(server.request_count(), expected, "{fault:?}");
    }
}

#[tokio::test]
async fn a_garbled_reply_is_still_an_error_when_no_retries_are_left() {
    let server = server_with(Fault::ResetMidBody).await;
    let error = client(&server, 0, 5.0).call(hi()).await.err();
    assert_malformed(error, &Fault::ResetMidBody);
}

#[tokio::test]
async fn streams_that_are_cut_or_carry_no_choices_are_errors_not_empty_answers() {
    for fault in GARBLED {
        let server = server_with(fault.clone()).await;
        let stream = client(&server, 0, 5.0)
            .stream(hi())
            .await
            .unwrap_or_else(|e| panic!("{fault:?}: the stream opens: {e}"));
        // Before the fix a stream without choices came back as an empty reply.
        assert_malformed(collect_stream(stream, |_| {}).await.err(), &fault);
    }
}

/// Counts the words in a text.
///
/// # Arguments
/// * `text` - The text to count.
#[tool]
fn count_words(text: String) -> usize {
    text.split_whitespace().count()
}

#[tokio::test]
async fn impossible_tool_calls_are_shown_to_the_model_and_the_task_goes_on() {
    let server = FaultServer::builder()
        .script([Fault::UnknownTool, Fault::InvalidArguments])
        .responder(|request| {
            let tool_results = request
                .messages()
                .iter()
                .filter(|m| m["role"] == "tool")
                .count();
            if tool_results < 3 {
                Reply::tool_call("count_words", json!({"text": "one two three"}))
            } else {
                Reply::text("three words")
            }
        })
        .start()
        .await;
    let agent = Agent::builder()
        .role("Counter")
        .goal("Count")
        .backstory("You count.")
        .llm(client(&server, 0, 5.0))
        .tools(vec![count_words_tool()])
        .max_execution_time(Duration::from_secs(20))
        .build()
        .unwrap();
    let crew = one_task_crew(
        agent,
        "count",
        "Count the words in 'one two three'",
        "The count",
    )
    .build()
    .unwrap();

    let output = tokio::time::timeout(Duration::from_secs(30), crew.kickoff(Inputs::new()))
        .await
        .expect("no hang")
        .expect("the crew recovers from both impossible calls");

    assert_eq!(output.raw, "three words");
    let served = server.served();
    assert_eq!(served.len(), 4);
    let last = &served[3].request;
    let results: Vec<String> = last
        .messages()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(results.len(), 3, "{results:?}");
    assert!(
        results[0].contains(UNKNOWN_TOOL_NAME) && results[0].contains("count_words"),
        "the model hears that the tool does not exist and what exists: {}",
        results[0]
    );
    assert!(
        results[1].contains("text"),
        "the model hears which argument is wrong: {}",
        results[1]
    );
    assert_eq!(results[2], "3");
}

#[tokio::test]
async fn a_streamed_reply_that_breaks_midway_is_asked_for_again_not_the_whole_task() {
    for fault in GARBLED {
        let server = server_with(fault.clone()).await;
        // No agent-level retries: only the call itself may be made again.
        let agent = Agent::builder()
            .role("Writer")
            .goal("Write")
            .backstory("You write.")
            .llm(client(&server, 0, 5.0))
            .max_retry_limit(0)
            .build()
            .unwrap();
        let crew = one_task_crew(agent, "write", "Write one line", "A line")
            .stream(true)
            .build()
            .unwrap();
        let recorder = crewai_core::events::EventRecorder::attach(crew.event_bus());

        let output = tokio::time::timeout(Duration::from_secs(30), crew.kickoff(Inputs::new()))
            .await
            .expect("no hang")
            .unwrap_or_else(|e| panic!("{fault:?}: {e}"));

        assert_eq!(output.raw, "recovered", "{fault:?}");
        assert_eq!(server.request_count(), 2, "{fault:?}");
        let calls: Vec<&str> = recorder
            .type_names()
            .into_iter()
            .filter(|t| t.starts_with("llm_call_"))
            .collect();
        assert_eq!(
            calls,
            [
                "llm_call_started",
                "llm_call_failed",
                "llm_call_started",
                "llm_call_completed"
            ],
            "{fault:?}: the broken attempt is a failed call of its own"
        );
    }
}
