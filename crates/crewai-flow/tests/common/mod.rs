//! Helpers shared by the integration tests.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use crewai_core::agent::Agent;
use crewai_core::crew::{Crew, CrewBuilder};
use crewai_core::task::Task;
use crewai_llm::{LlmConfig, build_llm};
use crewai_testkit::scripted::ScriptedServer;

/// An ordered log of what methods did, shared with their closures.
#[derive(Clone, Default)]
pub struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    pub fn push(&self, entry: impl Into<String>) {
        self.0.lock().unwrap().push(entry.into());
    }

    pub fn entries(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    pub fn count(&self, entry: &str) -> usize {
        self.entries().iter().filter(|e| *e == entry).count()
    }
}

pub fn no_inputs() -> [(&'static str, serde_json::Value); 0] {
    []
}

/// An agent whose model answers from the scripted server.
pub fn scripted_agent(server: &ScriptedServer, role: &str, goal: &str, backstory: &str) -> Agent {
    let llm = build_llm(
        &LlmConfig::new("openai/gpt-4o-mini")
            .with_base_url(server.base_url())
            .with_api_key("sk-test"),
    )
    .unwrap();
    Agent::builder()
        .role(role)
        .goal(goal)
        .backstory(backstory)
        .llm(llm)
        .build()
        .unwrap()
}

/// A crew `name` in which `agent` does the one task `task` (`description`, `expected_output`).
pub fn one_task_crew(
    name: &str,
    agent: Agent,
    (task, description, expected_output): (&str, &str, &str),
) -> CrewBuilder {
    let task = Task::builder()
        .name(task)
        .description(description)
        .expected_output(expected_output)
        .agent(agent.clone())
        .build()
        .unwrap();
    Crew::builder()
        .name(name)
        .agents(vec![agent])
        .tasks(vec![task])
}
