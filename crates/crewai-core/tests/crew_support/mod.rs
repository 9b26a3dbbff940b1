//! Shared helpers of the crew integration tests: agents and tasks wired to a scripted
//! OpenAI-compatible server through the real OpenAI client.
#![allow(dead_code)]

use std::sync::Arc;

use crewai_core::agent::Agent;
use crewai_core::task::Task;
use crewai_llm::{Llm, LlmConfig, build_llm};
use crewai_testkit::scripted::{RecordedRequest, ScriptedServer};

/// A real OpenAI client pointed at `server`.
pub fn llm(server: &ScriptedServer) -> Arc<dyn Llm> {
    let config = LlmConfig::new("openai/gpt-4o-mini")
        .with_base_url(server.base_url())
        .with_api_key("sk-test");
    build_llm(&config).expect("the OpenAI client builds")
}

pub fn agent(role: &str, server: &ScriptedServer) -> Agent {
    agent_with(role, server, |b| b)
}

pub fn agent_with(
    role: &str,
    server: &ScriptedServer,
    more: impl FnOnce(crewai_core::agent::AgentBuilder) -> crewai_core::agent::AgentBuilder,
) -> Agent {
    more(
        Agent::builder()
            .role(role)
            .goal(format!("Be a good {role}"))
            .backstory(format!("You are an experienced {role}."))
            .llm(llm(server)),
    )
    .build()
    .expect("the agent builds")
}

pub fn task(name: &str, description: &str, agent: &Agent) -> Task {
    Task::builder()
        .name(name)
        .description(description)
        .expected_output(format!("The result of {name}"))
        .agent(agent.clone())
        .build()
        .expect("the task builds")
}

/// All message texts of a request joined (system, user, assistant, tool), to look for prompt content.
pub fn conversation(request: &RecordedRequest) -> String {
    request
        .messages()
        .iter()
        .map(|m| match &m["content"] {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join(""),
            _ => String::new(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The text of the last user message of a request.
pub fn last_user(request: &RecordedRequest) -> String {
    request
        .messages()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str().map(str::to_string))
        .unwrap_or_default()
}
