//! A project's Python tools in an agent's run: the executor validates the model's arguments
//! against the schema pydantic reported, the worker runs the call, and the result (or the
//! traceback) is the observation the model reads next.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crewai_core::agent::{Agent, AgentTaskRequest};
use crewai_core::preview::task_prompt;
use crewai_llm::{Role, ScriptedLlm};
use crewai_python::{PythonToolConfig, PythonToolSpec, PythonTools, find_python};
use crewai_testkit::prereq::{Prerequisite, Suite};
use crewai_tools::ToolSet;
use serde_json::{Map, json};

fn spec(key: &str) -> PythonToolSpec {
    PythonToolSpec {
        key: key.into(),
        module: "tool_project.tools.custom_tool".into(),
        module_file: None,
        attr: key.into(),
        kwargs: Map::new(),
        is_function: false,
    }
}

/// The text of the last tool message the model was sent in `request`.
fn last_observation(request: &crewai_llm::LlmRequest) -> String {
    request
        .messages
        .iter()
        .rev()
        .find(|message| message.role == Role::Tool)
        .map(|message| message.text())
        .unwrap_or_default()
}

async fn an_agent_calls_a_python_tool_and_reads_its_result_and_its_traceback() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tool_project");
    let python = find_python(None, &root, &[]).unwrap_or_else(|error| panic!("{error}"));
    let tools = PythonTools::start(PythonToolConfig {
        python,
        project_root: root,
        tools: vec![spec("WordCountTool"), spec("FailingTool")],
        start_timeout: Duration::from_secs(30),
        call_timeout: Duration::from_secs(20),
    })
    .await
    .unwrap_or_else(|error| panic!("{}", crewai_llm::error_chain(&error)));

    let llm = Arc::new(
        ScriptedLlm::new("scripted")
            .then_tool_call("word_count_tool", json!({"text": "one two three"}))
            .then_tool_call("failing_tool", json!({"reason": "no network"}))
            .then_text("There are 3 words."),
    );
    let agent = Agent::builder()
        .role("counter")
        .goal("count words")
        .backstory("careful")
        .llm(llm.clone())
        .build()
        .unwrap_or_else(|error| panic!("{error}"));
    let handles = tools
        .handles()
        .into_iter()
        .map(|(_, handle)| handle)
        .collect::<Vec<_>>();
    let request = AgentTaskRequest::new(task_prompt("Count the words", "A count"))
        .with_tools(ToolSet::from(handles));
    let result = agent
        .run_task(request)
        .await
        .unwrap_or_else(|error| panic!("{}", crewai_llm::error_chain(&error)));
    assert_eq!(result.raw, "There are 3 words.");

    let requests = llm.requests();
    assert_eq!(requests.len(), 3);
    let offered: Vec<&str> = requests[0]
        .tools
        .iter()
        .map(|tool| tool.name.as_str())
        .collect();
    assert_eq!(offered, ["word_count_tool", "failing_tool"]);
    assert_eq!(last_observation(&requests[1]), "3 words");
    let traceback = last_observation(&requests[2]);
    assert!(
        traceback.contains("RuntimeError: the failing tool failed: no network"),
        "{traceback}"
    );
    assert!(traceback.contains("custom_tool.py"), "{traceback}");
    tools.shutdown().await;
}

fn main() -> std::process::ExitCode {
    let python = Prerequisite::program(
        "python3 with pydantic",
        "python3",
        &["-c", "import pydantic"],
        "python3 -m pip install pydantic",
    );
    Suite::new()
        .async_test_needing(
            "an_agent_calls_a_python_tool_and_reads_its_result_and_its_traceback",
            &[&python],
            an_agent_calls_a_python_tool_and_reads_its_result_and_its_traceback,
        )
        .run()
}
