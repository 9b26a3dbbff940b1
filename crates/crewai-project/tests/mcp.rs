//! An agent's `mcps:` from a project file, end to end: the crew is built from YAML, the model
//! (a scripted server) calls the MCP server's tool (a server written with the official Python
//! SDK), the result reaches the model, and the server is gone when the kickoff returns.

use std::time::Duration;

use crewai_core::events::{EventBus, EventRecorder};
use crewai_project::{BuildOptions, Project, ToolRegistry};
use crewai_testkit::prereq::{Prerequisite, Suite};
use crewai_testkit::process::{is_reaped, wait_until};
use crewai_testkit::scripted::{Reply, ScriptedServer};
use serde_json::json;

mod common;
use common::write;

const SDK_SERVER: &str = include_str!("../../crewai-mcp/tests/fixtures/sdk_server.py");

fn python_mcp() -> Prerequisite {
    Prerequisite::program(
        "python3 with the MCP Python SDK",
        "python3",
        &["-c", "import mcp"],
        "python3 -m pip install mcp",
    )
}

fn project_files(base_url: &str, mcps: &str) -> Vec<(String, String)> {
    vec![
        (
            "config/agents.yaml".into(),
            format!(
                "clerk:\n  role: Clerk\n  goal: Add numbers\n  backstory: Uses tools.\n  llm: {{model: openai/gpt-4o-mini, api_key: k, base_url: '{base_url}'}}\n  mcps:\n{mcps}"
            ),
        ),
        (
            "config/tasks.yaml".into(),
            "sum:\n  description: Add 2 and 40\n  expected_output: The sum\n  agent: clerk\n"
                .into(),
        ),
        ("server.py".into(), SDK_SERVER.into()),
    ]
}

async fn the_yaml_mcps_entry_gives_the_agent_the_servers_tools_and_stops_it_after_kickoff() {
    let model = ScriptedServer::start().await;
    model.push(Reply::tool_call("python3_server_py_pid", json!({})));
    model.push(Reply::tool_call(
        "python3_server_py_add",
        json!({"a": 2, "b": 40}),
    ));
    model.push_text("42");
    let dir = tempfile::tempdir().unwrap();
    let mcps = "    - command: python3\n      args: [server.py]\n      env: {SDK_SECRET_TOKEN: s3cret-value}\n      tool_filter: [add, pid]\n      call_timeout: 20\n";
    let files = project_files(&model.base_url(), mcps);
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    write(dir.path(), &files);
    let project = Project::load(dir.path()).unwrap_or_else(|error| panic!("{error}"));
    let bus = EventBus::new();
    let recorder = EventRecorder::attach(&bus);
    let crew = project
        .build(
            &Default::default(),
            &BuildOptions::new(ToolRegistry::with_builtins(dir.path())).with_event_bus(bus),
        )
        .unwrap_or_else(|error| panic!("{error}"));
    let output = crew
        .kickoff(Default::default())
        .await
        .unwrap_or_else(|error| panic!("{}", crewai_llm::error_chain(&error)));
    assert_eq!(output.raw, "42");

    let requests = model.requests();
    let mut offered = requests[0].tool_names();
    offered.sort();
    assert_eq!(offered, ["python3_server_py_add", "python3_server_py_pid"]);
    let tools = &requests[0].body["tools"];
    let add = tools
        .as_array()
        .and_then(|tools| {
            tools
                .iter()
                .find(|t| t["function"]["name"] == "python3_server_py_add")
        })
        .unwrap_or_else(|| panic!("no add tool in {tools}"));
    assert_eq!(add["function"]["parameters"]["required"], json!(["a", "b"]));
    // The tool's result, as the request after the call carries it.
    let last_message = |index: usize| {
        requests[index]
            .messages()
            .iter()
            .rev()
            .find(|message| message["role"] == "tool")
            .cloned()
            .unwrap_or_default()
    };
    let pid: u32 = last_message(1)["content"]
        .as_str()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or_else(|| panic!("the pid tool's result: {}", last_message(1)));
    assert_eq!(last_message(2)["content"], "42");
    // The kickoff closed its session: the server is gone (reaped) once it returns.
    wait_until(
        "the MCP server is still there",
        Duration::from_secs(5),
        || is_reaped(pid),
    )
    .await;

    let types: Vec<String> = recorder
        .events()
        .iter()
        .map(|e| e.type_name().to_string())
        .collect();
    for expected in [
        "mcp_connection_started",
        "mcp_connection_completed",
        "mcp_tool_execution_started",
        "mcp_tool_execution_completed",
    ] {
        assert!(
            types.iter().any(|t| t == expected),
            "{expected} in {types:?}"
        );
    }
    let connections = types
        .iter()
        .filter(|t| *t == "mcp_connection_started")
        .count();
    assert_eq!(connections, 1, "one session per server per kickoff");
    let all = recorder
        .events()
        .iter()
        .map(|event| event.to_json().to_string())
        .collect::<String>();
    assert!(
        !all.contains("s3cret-value"),
        "the env value reached an event"
    );
}

async fn a_server_that_cannot_start_fails_the_task_naming_the_server() {
    let model = ScriptedServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mcps = "    - command: crewai-no-such-mcp-server\n      env: {TOKEN: hidden-secret}\n";
    let files = project_files(&model.base_url(), mcps);
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    write(dir.path(), &files);
    let project = Project::load(dir.path()).unwrap_or_else(|error| panic!("{error}"));
    let crew = project
        .build(
            &Default::default(),
            &BuildOptions::new(ToolRegistry::with_builtins(dir.path())),
        )
        .unwrap_or_else(|error| panic!("{error}"));
    let error = match crew.kickoff(Default::default()).await {
        Ok(output) => panic!("expected a failure, got {}", output.raw),
        Err(error) => crewai_llm::error_chain(&error),
    };
    assert!(
        error.contains("MCP server 'crewai-no-such-mcp-server' could not be started"),
        "{error}"
    );
    assert!(!error.contains("hidden-secret"), "{error}");
    assert_eq!(
        model.request_count(),
        0,
        "the model is not called without the tools"
    );
}

fn mcps_written_wrong_are_refused_at_their_line() {
    let cases = [
        ("    - notion#search\n", "CrewAI's registry slugs"),
        ("    - {command: python3, url: 'http://x'}\n", "not both"),
        (
            "    - {command: python3, tool_filter: add}\n",
            "`tool_filter` is a list",
        ),
        (
            "    - {command: python3, colour: red}\n",
            "unknown field `colour`",
        ),
        (
            "    - {command: python3, call_timeout: -1}\n",
            "`call_timeout` is a number of seconds",
        ),
        ("    - 42\n", "not a number"),
        (
            "    - {url: 'https://x.example/mcp', auth: {client_id: app}}\n",
            "`auth` needs the client's secret",
        ),
        (
            "    - {url: 'https://x.example/mcp', auth: {client_id: app, client_secret_env: CREWAI_TEST_NO_SUCH_SECRET}}\n",
            "names `CREWAI_TEST_NO_SUCH_SECRET`, which is not set",
        ),
        (
            "    - {url: 'https://x.example/mcp', auth: {client_id: app, client_secret: s, audience: x}}\n",
            "`auth` has no field `audience`",
        ),
        (
            "    - {command: python3, auth: {client_id: app, client_secret: s}}\n",
            "`auth` is for servers with a `url`",
        ),
    ];
    for (mcps, expected) in cases {
        let dir = tempfile::tempdir().unwrap();
        let files = project_files("http://127.0.0.1:9/v1", mcps);
        let files: Vec<(&str, &str)> = files
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        write(dir.path(), &files);
        let error = match Project::load(dir.path()) {
            Ok(_) => panic!("{mcps} was accepted"),
            Err(error) => error.to_string(),
        };
        assert!(
            error.contains("agents.yaml:7") && error.contains(expected),
            "{mcps}: {error}"
        );
    }
}

fn main() -> std::process::ExitCode {
    let mcp = python_mcp();
    Suite::new()
        .async_test_needing(
            "the_yaml_mcps_entry_gives_the_agent_the_servers_tools_and_stops_it_after_kickoff",
            &[&mcp],
            the_yaml_mcps_entry_gives_the_agent_the_servers_tools_and_stops_it_after_kickoff,
        )
        .async_test(
            "a_server_that_cannot_start_fails_the_task_naming_the_server",
            a_server_that_cannot_start_fails_the_task_naming_the_server,
        )
        .test(
            "mcps_written_wrong_are_refused_at_their_line",
            mcps_written_wrong_are_refused_at_their_line,
        )
        .run()
}
