//! Where the prompt text goes: system and user messages, one-message mode, templates, the date,
//! message-list kickoffs and streaming.

mod agent_common;

use agent_common::*;
use crewai_core::agent::AgentTaskRequest;
use crewai_core::events::{EventBus, EventRecorder};
use crewai_llm::Message;
use crewai_testkit::scripted::Reply;

#[tokio::test]
async fn without_the_system_prompt_everything_is_one_user_message() {
    let server = server().await;
    server.push_text("ok");
    let agent = agent_with(openai(&server))
        .use_system_prompt(false)
        .build()
        .unwrap();
    agent
        .run_task(AgentTaskRequest::new("Do it"))
        .await
        .unwrap();
    let messages = server.requests()[0].messages().to_vec();
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0]["role"], "user");
    let text = messages[0]["content"].as_str().unwrap();
    assert!(text.starts_with("You are test role. test backstory\nYour personal goal is: test goal\nCurrent Task: Do it"), "{text}");
}

#[tokio::test]
async fn templates_shape_a_single_prompt() {
    let server = server().await;
    server.push_text("ok");
    let agent = agent_with(openai(&server))
        .system_template("<|system|>{{ .System }}<|end|>")
        .prompt_template("<|user|>{{ .Prompt }}<|end|>")
        .response_template("<|assistant|>{{ .Response }}<|end|>")
        .build()
        .unwrap();
    agent
        .run_task(AgentTaskRequest::new("Do it"))
        .await
        .unwrap();
    let messages = server.requests()[0].messages().to_vec();
    assert_eq!(messages.len(), 1);
    let text = messages[0]["content"].as_str().unwrap();
    assert!(text.starts_with("<|system|>You are test role."), "{text}");
    assert!(
        text.contains("<|end|>\n<|user|>\nCurrent Task: Do it"),
        "{text}"
    );
    assert!(text.ends_with("<|end|>\n<|assistant|>"), "{text}");
}

#[tokio::test]
async fn inject_date_appends_the_formatted_date_to_the_system_prompt() {
    let server = server().await;
    server.push_text("ok");
    let agent = agent_with(openai(&server))
        .inject_date(true)
        .date_format("%d/%m/%Y")
        .build()
        .unwrap();
    agent
        .run_task(AgentTaskRequest::new("Do it"))
        .await
        .unwrap();
    let system = message_text(&server.requests()[0], 0);
    let today = chrono::Local::now().format("%d/%m/%Y").to_string();
    assert!(
        system.ends_with(&format!("\n\nCurrent Date: {today}")),
        "{system}"
    );
}

#[test]
fn an_invalid_date_format_is_rejected_when_building() {
    let error = agent_with(std::sync::Arc::new(crewai_llm::ScriptedLlm::new("m")))
        .inject_date(true)
        .date_format("%Q")
        .build()
        .unwrap_err();
    assert!(error.to_string().contains("date_format"), "{error}");
}

#[test]
fn role_goal_and_backstory_are_required() {
    let error = crewai_core::Agent::builder()
        .role("r")
        .goal("g")
        .build()
        .unwrap_err();
    assert!(error.to_string().contains("backstory"), "{error}");
}

#[tokio::test]
async fn a_message_list_kickoff_keeps_the_callers_messages_after_the_system_prompt() {
    let server = server().await;
    server.push_text("Paris");
    let agent = agent_with(openai(&server)).build().unwrap();
    let conversation = vec![
        Message::user("I am planning a trip."),
        Message::assistant("Where to?"),
        Message::user("The capital of France."),
    ];
    let output = agent.kickoff(conversation).await.unwrap();
    assert_eq!(output.raw, "Paris");
    let messages = server.requests()[0].messages().to_vec();
    assert_eq!(messages.len(), 4);
    assert_eq!(messages[0]["role"], "system");
    assert_eq!(messages[3]["content"], "The capital of France.");
    assert_eq!(output.messages.len(), 5);
}

#[tokio::test]
async fn streaming_runs_emit_text_chunks() {
    let server = server().await;
    server.push(Reply::text("a streamed answer of several pieces"));
    let bus = EventBus::new();
    let recorder = EventRecorder::attach(&bus);
    let agent = agent_with(openai(&server)).build().unwrap();
    let result = agent
        .run_task(
            AgentTaskRequest::new("Stream it")
                .with_streaming(true)
                .with_event_bus(bus),
        )
        .await
        .unwrap();
    assert_eq!(result.raw, "a streamed answer of several pieces");
    assert_eq!(server.requests()[0].body["stream"], true);
    let chunks: String = recorder
        .of_type("llm_stream_chunk")
        .iter()
        .map(|e| {
            e.to_json()["chunk"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(chunks, "a streamed answer of several pieces");
    assert!(recorder.of_type("llm_stream_chunk").len() > 1);
}

#[tokio::test]
async fn streamed_tool_calls_are_assembled_and_run() {
    let server = server().await;
    server.push(Reply::tool_call(
        "multiplier",
        serde_json::json!({"a": 12, "b": 12}),
    ));
    server.push(Reply::text("144"));
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let agent = agent_with(openai(&server)).build().unwrap();
    let request = AgentTaskRequest::new("Square 12")
        .with_tools(crewai_tools::ToolSet::from(vec![multiplier(runs.clone())]))
        .with_streaming(true);
    let result = agent.run_task(request).await.unwrap();
    assert_eq!(result.raw, "144");
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(server.requests()[1].messages()[3]["content"], "144");
}
