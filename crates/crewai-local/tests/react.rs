//! The embedded model writing ReAct steps under the ReAct grammar: whatever it decides, the reply
//! is one our ReAct parser reads as a known tool with schema-valid arguments, or a final answer.
//! These need the SmolLM2 file (`crewai models pull`): without it they are reported as skipped,
//! and fail under `CI=true` (see `crewai_testkit::prereq`). `harness = false`: every test is
//! registered in `main`.

use std::process::ExitCode;

use crewai_core::preview::{self, TaskLoop};
use crewai_core::react::{self, OBSERVATION_STOP, ReactStep};
use crewai_llm::{Llm, LlmConfig, LlmRequest, Message, ReplyShape, ToolDefinition};
use crewai_local::{LocalLlm, cache};
use crewai_testkit::prereq::{Prerequisite, Suite};
use serde_json::json;

fn model() -> Prerequisite {
    Prerequisite::embedded_model(cache::SMOLLM2_135M.path_in(&cache::models_dir()))
}

fn main() -> ExitCode {
    let model = model();
    Suite::new()
        .async_test_needing(
            "a_react_request_gets_a_parseable_action_with_schema_valid_arguments",
            &[&model],
            a_react_request_gets_a_parseable_action_with_schema_valid_arguments,
        )
        .async_test_needing(
            "after_the_observation_the_model_gives_its_final_answer",
            &[&model],
            after_the_observation_the_model_gives_its_final_answer,
        )
        .run()
}

fn weather_tool() -> ToolDefinition {
    ToolDefinition {
        name: "get_weather".into(),
        description: "Gives today's weather in a city.".into(),
        parameters: json!({
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city name"}},
            "required": ["city"]
        }),
        strict: false,
    }
}

/// A ReAct request as the executor builds it: the tools in the system prompt, the task last,
/// ending on `Thought:`.
fn react_request(tool: &ToolDefinition, task: &str) -> LlmRequest {
    let system = format!(
        "{}{}",
        preview::system_prompt(
            "Weather reporter",
            "Tell people the weather",
            "You report the weather using your tools.",
        ),
        preview::react_instructions(std::slice::from_ref(tool))
    );
    let task = preview::task_message(
        &preview::task_prompt(task, "A sentence about today's weather."),
        TaskLoop::React,
    );
    LlmRequest::new(vec![Message::system(system), Message::user(task)])
        .with_stop(vec![OBSERVATION_STOP.to_string()])
        .with_reply_shape(ReplyShape::React {
            tools: vec![tool.clone()],
        })
}

async fn a_react_request_gets_a_parseable_action_with_schema_valid_arguments() {
    let llm = LocalLlm::from_config(&LlmConfig::new("local/smollm2-135m").with_max_tokens(160))
        .unwrap_or_else(|e| panic!("{e}"));
    let tool = weather_tool();
    let request = react_request(
        &tool,
        "Use the get_weather tool to find the weather in Paris.",
    );
    let first = llm
        .call(request.clone())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let second = llm.call(request).await.unwrap_or_else(|e| panic!("{e}"));
    let text = first.content.clone().unwrap_or_default();
    eprintln!("the model's ReAct step:\n{text}");
    assert_eq!(
        first.content, second.content,
        "greedy decoding is deterministic"
    );
    match react::parse(&text) {
        ReactStep::Action {
            tool: name,
            tool_input,
            ..
        } => {
            assert_eq!(name, tool.name, "{text}");
            let arguments: serde_json::Value = serde_json::from_str(&tool_input)
                .unwrap_or_else(|e| panic!("the input is not JSON ({e}): {text}"));
            let validator =
                jsonschema::validator_for(&tool.parameters).unwrap_or_else(|e| panic!("{e}"));
            assert!(validator.is_valid(&arguments), "{arguments} in {text}");
        }
        ReactStep::Finish { .. } => panic!("expected an action: {text}"),
    }
}

async fn after_the_observation_the_model_gives_its_final_answer() {
    let llm = LocalLlm::from_config(&LlmConfig::new("local/smollm2-135m").with_max_tokens(120))
        .unwrap_or_else(|e| panic!("{e}"));
    let tool = weather_tool();
    let mut request = react_request(
        &tool,
        "Use the get_weather tool to find the weather in Paris.",
    );
    request.messages.push(Message::assistant(
        "Thought: I should look it up.\nAction: get_weather\nAction Input: {\"city\":\"Paris\"}\nObservation: Sunny and 21 degrees in Paris.",
    ));
    request.messages.push(Message::user(
        preview::after_tool_results(TaskLoop::React).unwrap_or_default(),
    ));
    let reply = llm.call(request).await.unwrap_or_else(|e| panic!("{e}"));
    let text = reply.content.unwrap_or_default();
    eprintln!("the model's step after the observation:\n{text}");
    match react::parse(&text) {
        ReactStep::Finish { output, .. } => assert!(!output.trim().is_empty(), "{text}"),
        ReactStep::Action { .. } => panic!("expected a final answer: {text}"),
    }
}
