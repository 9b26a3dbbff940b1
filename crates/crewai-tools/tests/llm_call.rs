//! `LlmCall` (CrewAI's `LLM.call` with `available_functions`) against the scripted
//! OpenAI-compatible server: text answers, functions run, calls returned, bad calls refused.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crewai_llm::retry::RetryPolicy;
use crewai_llm::{BuildOptions, Llm, LlmConfig, Message, ToolDefinition, build_llm_with};
use crewai_testkit::scripted::{Reply, ScriptedServer};
use crewai_tools::{
    CallError, CallOutcome, DynamicTool, LlmCall, ToolError, ToolHandle, ToolOutput,
};
use serde_json::json;

fn model_at(server: &ScriptedServer) -> Arc<dyn Llm> {
    let config = LlmConfig::new("openai/gpt-4o-mini")
        .with_base_url(server.base_url())
        .with_api_key("test")
        .with_timeout(10.0);
    build_llm_with(
        &config,
        &BuildOptions::new().with_retry_policy(RetryPolicy::none()),
    )
    .unwrap_or_else(|e| panic!("build: {e}"))
}

/// `get_weather(city)`, counting its runs.
fn weather(runs: &Arc<AtomicUsize>) -> ToolHandle {
    let runs = Arc::clone(runs);
    ToolHandle::from_tool(DynamicTool::new(
        "get_weather",
        "The weather in a city.",
        json!({
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"]
        }),
        move |args, _ctx| {
            runs.fetch_add(1, Ordering::SeqCst);
            async move {
                let city = args["city"].as_str().unwrap_or_default().to_string();
                match city.as_str() {
                    "Atlantis" => Err(ToolError::failed("no station there")),
                    _ => Ok(ToolOutput::Text(format!("18 °C and sunny in {city}"))),
                }
            }
        },
    ))
}

fn booking_definition() -> ToolDefinition {
    ToolDefinition {
        name: "book_flight".into(),
        description: "Books a flight.".into(),
        parameters: json!({"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}),
        strict: false,
    }
}

#[tokio::test]
async fn a_text_answer_is_the_text_and_a_string_prompt_is_one_user_message() {
    let server = ScriptedServer::start().await;
    server.push_text("Paris.");
    let runs = Arc::new(AtomicUsize::new(0));
    let reply = LlmCall::prompt("Capital of France?")
        .available_functions([weather(&runs)])
        .send(model_at(&server).as_ref())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(reply.outcome, CallOutcome::Text("Paris.".into()));
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    let request = &server.requests()[0];
    assert_eq!(request.messages().len(), 1);
    assert_eq!(request.messages()[0]["role"], "user");
    assert_eq!(request.messages()[0]["content"], "Capital of France?");
    assert_eq!(request.tool_names(), ["get_weather"]);
}

#[tokio::test]
async fn a_call_to_an_available_function_runs_it_and_returns_its_result() {
    let server = ScriptedServer::start().await;
    // Loose JSON as models send it: the integer as a string, repaired before the function runs.
    server.push(Reply::tool_call(
        "get_weather",
        json!({"city": "Oslo", "days": "2"}),
    ));
    let runs = Arc::new(AtomicUsize::new(0));
    let reply = LlmCall::messages(vec![
        Message::system("You answer about the weather."),
        Message::user("Weather in Oslo?"),
    ])
    .tools(vec![booking_definition()])
    .available_functions([weather(&runs)])
    .send(model_at(&server).as_ref())
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let CallOutcome::Ran(ran) = &reply.outcome else {
        panic!("{:?}", reply.outcome)
    };
    assert_eq!(ran.len(), 1);
    assert_eq!(ran[0].function, "get_weather");
    assert_eq!(ran[0].arguments, json!({"city": "Oslo", "days": 2}));
    assert_eq!(reply.outcome.text(), "18 °C and sunny in Oslo");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let request = &server.requests()[0];
    assert_eq!(request.messages()[0]["role"], "system");
    let mut offered = request.tool_names();
    offered.sort();
    assert_eq!(offered, ["book_flight", "get_weather"]);
}

#[tokio::test]
async fn a_call_with_no_matching_function_is_returned_and_nothing_runs() {
    let server = ScriptedServer::start().await;
    server.push(Reply::tool_call("book_flight", json!({"to": "Lisbon"})));
    server.push(Reply::tool_call("book_flight", json!({"to": "Porto"})));
    let runs = Arc::new(AtomicUsize::new(0));
    let llm = model_at(&server);
    let reply = LlmCall::prompt("Fly me to Lisbon")
        .tools(vec![booking_definition()])
        .available_functions([weather(&runs)])
        .send(llm.as_ref())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let CallOutcome::ToolCalls(calls) = &reply.outcome else {
        panic!("{:?}", reply.outcome)
    };
    assert_eq!(calls[0].name, "book_flight");
    assert_eq!(calls[0].arguments, json!({"to": "Lisbon"}));
    assert_eq!(runs.load(Ordering::SeqCst), 0);

    // Without available functions at all, calls always come back (CrewAI's `tools=` alone).
    let reply = LlmCall::prompt("Fly me to Porto")
        .tools(vec![booking_definition()])
        .send(llm.as_ref())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        matches!(&reply.outcome, CallOutcome::ToolCalls(calls) if calls[0].arguments["to"] == "Porto"),
        "{:?}",
        reply.outcome
    );
}

#[tokio::test]
async fn bad_arguments_unknown_names_and_failures_are_typed_errors() {
    let server = ScriptedServer::start().await;
    server.push(Reply::tool_call("get_weather", json!({"days": "soon"})));
    server.push(Reply::tool_call("launch_rocket", json!({})));
    server.push(Reply::tool_call("get_weather", json!({"city": "Atlantis"})));
    let runs = Arc::new(AtomicUsize::new(0));
    let llm = model_at(&server);
    let call = || LlmCall::prompt("Weather?").available_functions([weather(&runs)]);

    let error = call().send(llm.as_ref()).await.unwrap_err();
    let CallError::BadArguments { function, source } = &error else {
        panic!("{error:?}")
    };
    assert_eq!(function, "get_weather");
    let why = source.to_string();
    assert!(why.contains("`city` is required"), "{why}");
    assert!(why.contains("`days` must be an integer"), "{why}");
    assert_eq!(runs.load(Ordering::SeqCst), 0, "nothing ran");

    let error = call().send(llm.as_ref()).await.unwrap_err();
    assert!(
        matches!(&error, CallError::UnknownFunction { name, offered } if name == "launch_rocket" && offered == "get_weather"),
        "{error:?}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0, "nothing ran");

    let error = call().send(llm.as_ref()).await.unwrap_err();
    assert!(
        matches!(&error, CallError::FunctionFailed { function, .. } if function == "get_weather"),
        "{error:?}"
    );
    assert_eq!(
        crewai_llm::error_chain(&error),
        "the function 'get_weather' failed: no station there"
    );
}

#[tokio::test]
async fn a_failed_model_call_is_the_model_s_error() {
    let server = ScriptedServer::start().await;
    server.push(Reply::error(401, "bad key"));
    let error = LlmCall::prompt("hi")
        .send(model_at(&server).as_ref())
        .await
        .unwrap_err();
    assert!(matches!(error, CallError::Llm(_)), "{error:?}");
}
