//! MCP with the binary: `crewai mcp serve` driven by clients nobody here wrote (the official
//! Python SDK's client over stdio and streamable HTTP, the MCP Inspector CLI) and by crewai-mcp's
//! rmcp client (cancellation); and the `mcp-and-skill` example run end to end against the
//! scripted model and its real MCP server.

mod support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crewai_mcp::{McpServer, McpTransport};
use crewai_testkit::prereq::{Prerequisite, Suite, npm_bin};
use crewai_testkit::scripted::{Reply, ScriptedServer};
use crewai_tools::{Tool, ToolContext, ToolError};
use serde_json::{Value, json};
use support::{copy_dir, crewai, crewai_at, examples, project, run_ok, text};
use tokio_util::sync::CancellationToken;

const INSPECTOR: &str = "@modelcontextprotocol/inspector@2.12.0";

fn python_mcp() -> Prerequisite {
    Prerequisite::program(
        "python3 with the MCP Python SDK",
        "python3",
        &["-c", "import mcp"],
        "python3 -m pip install mcp (.ci/run does)",
    )
}

fn inspector() -> Prerequisite {
    Prerequisite::npm_package(INSPECTOR, "mcp-inspector")
}

const AGENTS: &str = "analyst:\n  role: Analyst of {topic}\n  goal: Brief {audience} on {topic}\n  backstory: Writes short briefs.\n";
const TASKS: &str = "brief:\n  description: Write a brief about {topic} for {audience}.\n  expected_output: One paragraph.\n  agent: analyst\n";

/// A crew named `brief` taking `topic` (required) and `audience` (default `students`); a
/// verbose crew, so that its console output would show up on stdout if it were not kept off it.
fn brief_project(extra_task_fields: &str) -> tempfile::TempDir {
    project(&[
        ("config/agents.yaml", AGENTS),
        ("config/tasks.yaml", &format!("{TASKS}{extra_task_fields}")),
        (
            "config/crew.yaml",
            "name: brief\nverbose: true\ninputs: {audience: students}\n",
        ),
    ])
}

fn client_script() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/mcp_client.py")
        .display()
        .to_string()
}

/// Runs the Python SDK's client (`mcp_client.py`) in a clean environment pointed at `model`
/// (which a stdio server it starts inherits) and returns what it printed.
fn python_client(arguments: Value, target: &[&str], model: &ScriptedServer) -> Value {
    let mut command = Command::new("python3");
    command
        .env_clear()
        .env("OPENAI_BASE_URL", model.base_url())
        .env("OPENAI_API_KEY", "test")
        .arg(client_script())
        .arg(arguments.to_string())
        .args(target)
        .stdin(Stdio::null());
    if let Some(path) = std::env::var_os("PATH") {
        command.env("PATH", path);
    }
    let out = run_ok(command);
    let stdout = text(&out.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|error| panic!("{error}: {stdout}\n{}", text(&out.stderr)))
}

fn the_python_sdk_client_lists_and_calls_the_crew_over_stdio() {
    let model = ScriptedServer::start_blocking();
    model.push_text("Rust is a systems language; students should try it.");
    let dir = brief_project("");
    let project = dir.path().display().to_string();
    let crewai_bin = env!("CARGO_BIN_EXE_crewai");
    let out = python_client(
        json!({"topic": "Rust"}),
        &["stdio", crewai_bin, "mcp", "serve", "--project", &project],
        &model,
    );
    let tool = &out["tools"][0];
    assert_eq!(tool["name"], "brief");
    let description = tool["description"].as_str().unwrap_or_default();
    assert!(
        description.contains("Write a brief about {topic} for {audience}."),
        "{description}"
    );
    assert_eq!(
        tool["inputSchema"],
        json!({
            "type": "object",
            "properties": {
                "topic": {"type": "string"},
                "audience": {"type": "string", "default": "students"}
            },
            "required": ["topic"]
        })
    );
    let result = &out["result"];
    assert_eq!(result.get("isError"), Some(&json!(false)), "{result}");
    assert_eq!(
        result["content"][0]["text"],
        "Rust is a systems language; students should try it."
    );
    let prompt = model.requests()[0].body.to_string();
    assert!(
        prompt.contains("Write a brief about Rust for students."),
        "{prompt}"
    );
    // The call was a journaled kickoff in the project's store.
    let runs = run_ok(crewai(&["runs", "--project", &project, "--json"]));
    let runs: Value = serde_json::from_slice(&runs.stdout).unwrap_or_default();
    assert_eq!(runs.as_array().map(Vec::len), Some(1), "{runs}");
    assert_eq!(runs[0]["status"], "completed", "{runs}");
}

/// `crewai mcp serve --transport http --port 0`, with the URL it prints; killed when dropped.
struct HttpServe {
    child: Child,
    url: String,
}

impl Drop for HttpServe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve_http(dir: &Path, model: &ScriptedServer) -> HttpServe {
    let project = dir.display().to_string();
    let mut child = crewai_at(
        &[
            "mcp",
            "serve",
            "--project",
            &project,
            "--transport",
            "http",
            "--port",
            "0",
        ],
        model,
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap_or_else(|error| panic!("crewai: {error}"));
    let stderr = child.stderr.take().unwrap_or_else(|| panic!("no stderr"));
    let (found, url) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(at) = line.find("http://") {
                let _ = found.send(line[at..].trim().to_string());
            }
        }
    });
    let url = url
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("`crewai mcp serve` printed no URL"));
    HttpServe { child, url }
}

fn the_python_sdk_client_gets_structured_output_and_errors_over_http() {
    let model = ScriptedServer::start_blocking();
    model.push_text("{\"title\": \"Go for students\"}");
    let dir = brief_project(
        "  output_json:\n    type: object\n    properties:\n      title: {type: string}\n    required: [title]\n",
    );
    let serving = serve_http(dir.path(), &model);
    let out = python_client(json!({"topic": "Go"}), &["http", &serving.url], &model);
    assert_eq!(
        out["tools"][0]["outputSchema"]["properties"]["title"]["type"],
        "string"
    );
    let result = &out["result"];
    assert_eq!(
        result["structuredContent"],
        json!({"title": "Go for students"})
    );

    // A kickoff that fails is an isError result with the error's text.
    model.push(Reply::error(400, "the model refuses this request"));
    let out = python_client(json!({"topic": "Go"}), &["http", &serving.url], &model);
    let result = &out["result"];
    assert_eq!(result["isError"], true, "{result}");
    let message = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        message.contains("the model refuses this request"),
        "{message}"
    );

    // So is a call without a required argument; no model is asked.
    let before = model.request_count();
    let out = python_client(json!({}), &["http", &serving.url], &model);
    let result = &out["result"];
    assert_eq!(result["isError"], true, "{result}");
    let message = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(message.contains("topic"), "{message}");
    assert_eq!(model.request_count(), before);
}

fn inspector_cli(args: &[&str]) -> Value {
    let out = run_ok({
        let mut command = Command::new(npm_bin("mcp-inspector"));
        command.arg("--cli").args(args).stdin(Stdio::null());
        command
    });
    let stdout = text(&out.stdout);
    let start = stdout.find('{').unwrap_or(0);
    serde_json::from_str(&stdout[start..]).unwrap_or_else(|error| panic!("{error}: {stdout}"))
}

fn the_mcp_inspector_cli_lists_and_calls_the_crew() {
    let model = ScriptedServer::start_blocking();
    model.push_text("Zig, briefly.");
    let dir = brief_project("");
    let serving = serve_http(dir.path(), &model);
    let listed = inspector_cli(&[&serving.url, "--method", "tools/list"]);
    assert_eq!(listed["tools"][0]["name"], "brief", "{listed}");
    assert_eq!(
        listed["tools"][0]["inputSchema"]["required"],
        json!(["topic"])
    );
    let called = inspector_cli(&[
        &serving.url,
        "--method",
        "tools/call",
        "--tool-name",
        "brief",
        "--tool-arg",
        "topic=Zig",
    ]);
    assert_eq!(called["content"][0]["text"], "Zig, briefly.", "{called}");
}

/// A flow project is served as one tool too: a declaration's state schema is its input schema
/// (fields with a default not required), and a call runs the flow.
fn flows_are_served_with_their_state_as_the_input_schema() {
    let listed = inspector_cli(&[
        env!("CARGO_BIN_EXE_crewai"),
        "mcp",
        "serve",
        "--project",
        &examples()
            .join("research-declarative-flow")
            .display()
            .to_string(),
        "--method",
        "tools/list",
    ]);
    let tool = &listed["tools"][0];
    assert_eq!(tool["name"], "ResearchBriefFlow", "{listed}");
    assert_eq!(
        tool["inputSchema"]["properties"]["audience"],
        json!({"type": "string", "default": "engineering leads"})
    );
    assert_eq!(tool["inputSchema"]["required"], json!([]), "{listed}");

    let model = ScriptedServer::start_blocking();
    let dir = project(&[(
        "flow.yaml",
        "name: greeter\nmethods:\n  greet:\n    start: true\n    set: { greeting: hello }\n",
    )]);
    let project_dir = dir.path().display().to_string();
    let crewai_bin = env!("CARGO_BIN_EXE_crewai");
    let out = python_client(
        json!({"name": "Ada"}),
        &[
            "stdio",
            crewai_bin,
            "mcp",
            "serve",
            "--project",
            &project_dir,
        ],
        &model,
    );
    assert_eq!(out["tools"][0]["name"], "greeter");
    assert_eq!(
        out["result"]["structuredContent"],
        json!({"greeting": "hello"})
    );
}

/// The client's `notifications/cancelled` (sent by crewai-mcp's rmcp client when its caller
/// gives up) cancels the kickoff, which the journal records as cancelled.
async fn a_cancelled_call_cancels_the_kickoff() {
    let model = ScriptedServer::start().await;
    model.push(Reply::text("too late").delayed(Duration::from_secs(60)));
    let dir = brief_project("");
    let project = dir.path().display().to_string();
    let mut server = McpServer::stdio(
        env!("CARGO_BIN_EXE_crewai"),
        ["mcp", "serve", "--project", project.as_str()],
    )
    .call_timeout(Duration::from_secs(120));
    if let McpTransport::Stdio(config) = &mut server.transport {
        config
            .env
            .push(("OPENAI_BASE_URL".into(), model.base_url().into()));
        config.env.push(("OPENAI_API_KEY".into(), "test".into()));
    }
    let (connection, tools) = server
        .open()
        .await
        .unwrap_or_else(|error| panic!("{}", crewai_llm::error_chain(&error)));
    let cancel = CancellationToken::new();
    let ctx = ToolContext::new().with_cancellation(cancel.clone());
    let call = tools[0].run(json!({"topic": "Ada"}), &ctx);
    let canceller = async {
        assert!(
            model.wait_for_requests(1, Duration::from_secs(60)).await,
            "the kickoff never asked the model"
        );
        cancel.cancel();
    };
    let started = Instant::now();
    let (result, ()) = tokio::join!(call, canceller);
    assert!(matches!(result, Err(ToolError::Cancelled)), "{result:?}");
    assert!(started.elapsed() < Duration::from_secs(50));
    // The server goes on serving while the cancelled run ends and is journaled.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let runs = run_ok(crewai(&["runs", "--project", &project, "--json"]));
        let runs: Value = serde_json::from_slice(&runs.stdout).unwrap_or_default();
        if runs[0]["status"] == "cancelled" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the run is not cancelled: {runs}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    connection.shutdown().await;
}

/// The example's agent loads its skill and calls its MCP server's tools; each result reaches
/// the model's next request.
fn the_mcp_and_skill_example_runs_end_to_end() {
    let dir = tempfile::tempdir().unwrap_or_else(|error| panic!("{error}"));
    copy_dir(&examples().join("mcp-and-skill"), dir.path());
    let plan = text(&support::succeeded(support::dry_run(dir.path(), &[])).stdout);
    assert!(
        plan.contains("MCP servers (started at kickoff, not in a dry run): python3_catalog_server_py (stdio: python3 catalog_server.py; tools search_catalog, stock_level)"),
        "{plan}"
    );
    let model = ScriptedServer::start_blocking();
    model.push(Reply::tool_call(
        "load_skill",
        json!({"skill_name": "shelf-talker"}),
    ));
    model.push(Reply::tool_call(
        "python3_catalog_server_py_search_catalog",
        json!({"query": "rivers"}),
    ));
    model.push(Reply::tool_call(
        "python3_catalog_server_py_stock_level",
        json!({"isbn": "978-0-00-000001-1"}),
    ));
    model.push_text("THE RIVER'S LONG MEMORY by Ada Kern\nYou will hear the water.");
    let out = run_ok(crewai_at(
        &["run", "--project", dir.path().to_str().unwrap_or_default()],
        &model,
    ));
    assert_eq!(
        text(&out.stdout).trim(),
        "THE RIVER'S LONG MEMORY by Ada Kern\nYou will hear the water."
    );
    let requests = model.requests();
    let mut offered = requests[0].tool_names();
    offered.sort();
    assert!(
        offered.contains(&"load_skill".to_string())
            && offered.contains(&"python3_catalog_server_py_search_catalog".to_string())
            && offered.contains(&"python3_catalog_server_py_stock_level".to_string()),
        "{offered:?}"
    );
    let tool_result = |index: usize| -> String {
        requests[index]
            .messages()
            .iter()
            .rev()
            .find(|message| message["role"] == "tool")
            .and_then(|message| message["content"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    assert!(
        tool_result(1).contains("# Shelf-talker cards"),
        "{}",
        tool_result(1)
    );
    assert!(
        tool_result(1).contains("references/house-style.md"),
        "{}",
        tool_result(1)
    );
    assert!(
        tool_result(2).contains("978-0-00-000001-1 | The River's Long Memory | Ada Kern"),
        "{}",
        tool_result(2)
    );
    assert_eq!(tool_result(3), "3 in stock");
}

fn main() -> std::process::ExitCode {
    let (mcp, inspector) = (python_mcp(), inspector());
    Suite::new()
        .test_needing(
            "the_python_sdk_client_lists_and_calls_the_crew_over_stdio",
            &[&mcp],
            the_python_sdk_client_lists_and_calls_the_crew_over_stdio,
        )
        .test_needing(
            "the_python_sdk_client_gets_structured_output_and_errors_over_http",
            &[&mcp],
            the_python_sdk_client_gets_structured_output_and_errors_over_http,
        )
        .test_needing(
            "the_mcp_inspector_cli_lists_and_calls_the_crew",
            &[&inspector],
            the_mcp_inspector_cli_lists_and_calls_the_crew,
        )
        .test_needing(
            "flows_are_served_with_their_state_as_the_input_schema",
            &[&mcp, &inspector],
            flows_are_served_with_their_state_as_the_input_schema,
        )
        .async_test(
            "a_cancelled_call_cancels_the_kickoff",
            a_cancelled_call_cancels_the_kickoff,
        )
        .test_needing(
            "the_mcp_and_skill_example_runs_end_to_end",
            &[&mcp],
            the_mcp_and_skill_example_runs_end_to_end,
        )
        .run()
}
