//! crewai-mcp against real servers: one written with the official Python SDK (`mcp`), and
//! programs that fail to be servers.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crewai_mcp::{McpConnection, McpError, McpStdioServer};
use crewai_testkit::prereq::{Prerequisite, Suite};
use crewai_testkit::process::{is_reaped, wait_until};
use crewai_tools::{ToolContext, ToolError, ToolHandle};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn python_mcp() -> Prerequisite {
    Prerequisite::program(
        "python3 with the MCP Python SDK",
        "python3",
        &["-c", "import mcp"],
        "python3 -m pip install mcp",
    )
}

fn sdk_server() -> McpStdioServer {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sdk_server.py");
    McpStdioServer::new("sdk", "python3")
        .arg(script)
        .start_timeout(Duration::from_secs(30))
        .call_timeout(Duration::from_secs(20))
}

async fn connect(server: McpStdioServer) -> McpConnection {
    match McpConnection::connect_stdio(server).await {
        Ok(connection) => connection,
        Err(error) => panic!("connect: {}", crewai_llm::error_chain(&error)),
    }
}

fn find(tools: &[ToolHandle], name: &str) -> ToolHandle {
    match tools.iter().find(|tool| tool.name() == name) {
        Some(tool) => tool.clone(),
        None => panic!("no tool {name}"),
    }
}

async fn run(tool: &ToolHandle, args: serde_json::Value) -> Result<String, ToolError> {
    tool.tool()
        .run(args, &ToolContext::new())
        .await
        .map(|output| output.to_text())
}

async fn wait_until_reaped(pid: u32, within: Duration) {
    wait_until(&format!("process {pid} is still there"), within, || {
        is_reaped(pid)
    })
    .await;
}

fn chain(error: &ToolError) -> String {
    crewai_llm::error_chain(error)
}

async fn lists_and_calls_the_sdk_servers_tools() {
    let connection = connect(sdk_server()).await;
    let tools = connection.tools().await.unwrap();
    let mut names: Vec<&str> = tools.iter().map(|tool| tool.name()).collect();
    names.sort_unstable();
    assert_eq!(names, ["add", "crash", "fail", "pid", "slow"]);
    let add = find(&tools, "add");
    assert_eq!(add.description(), "Adds two integers.");
    let schema = add.parameters();
    assert_eq!(schema["properties"]["a"]["type"], "integer");
    assert_eq!(schema["required"], json!(["a", "b"]));
    assert_eq!(run(&add, json!({"a": 2, "b": 40})).await.unwrap(), "42");
    connection.shutdown().await;
}

async fn an_is_error_result_is_a_failed_tool_error_with_the_servers_text() {
    let connection = connect(sdk_server()).await;
    let tools = connection.tools().await.unwrap();
    let error = run(&find(&tools, "fail"), json!({"reason": "because"}))
        .await
        .unwrap_err();
    match &error {
        ToolError::Failed(text) => assert!(text.contains("refusing on purpose: because"), "{text}"),
        other => panic!("expected a Failed tool error, got {other:?}"),
    }
    connection.shutdown().await;
}

async fn a_call_past_the_timeout_is_abandoned_and_the_server_still_answers() {
    let connection = connect(sdk_server().call_timeout(Duration::from_millis(700))).await;
    let tools = connection.tools().await.unwrap();
    let started = Instant::now();
    let error = run(&find(&tools, "slow"), json!({"seconds": 30}))
        .await
        .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    let text = chain(&error);
    assert!(
        text.contains("the tool 'slow' on MCP server 'sdk' did not finish within 700ms"),
        "{text}"
    );
    assert!(matches!(error, ToolError::Service { .. }), "{error:?}");
    assert_eq!(
        run(&find(&tools, "add"), json!({"a": 1, "b": 1}))
            .await
            .unwrap(),
        "2"
    );
    assert_eq!(connection.restarts().await, 0);
    connection.shutdown().await;
}

async fn the_callers_cancellation_ends_a_call() {
    let connection = connect(sdk_server()).await;
    let tools = connection.tools().await.unwrap();
    let slow = find(&tools, "slow");
    let token = CancellationToken::new();
    let ctx = ToolContext::new().with_cancellation(token.clone());
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        token.cancel();
    });
    let started = Instant::now();
    let error = slow
        .tool()
        .run(json!({"seconds": 30}), &ctx)
        .await
        .unwrap_err();
    assert!(matches!(error, ToolError::Cancelled), "{error:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    canceller.await.unwrap();
    connection.shutdown().await;
}

async fn a_dead_server_is_restarted_once_then_the_error_names_its_stderr() {
    let connection = connect(sdk_server()).await;
    let tools = connection.tools().await.unwrap();
    let (crash, pid) = (find(&tools, "crash"), find(&tools, "pid"));
    let first_pid = run(&pid, json!({})).await.unwrap();

    let error = run(&crash, json!({})).await.unwrap_err();
    let text = chain(&error);
    assert!(
        text.contains("MCP server 'sdk' stopped during the call to 'crash'"),
        "{text}"
    );
    assert!(text.contains("sdk server: crashing on request"), "{text}");

    let second_pid = run(&pid, json!({})).await.unwrap();
    assert_ne!(first_pid, second_pid, "the next call runs on a new server");
    assert_eq!(connection.restarts().await, 1);

    let _ = run(&crash, json!({})).await.unwrap_err();
    let error = run(&pid, json!({})).await.unwrap_err();
    let text = chain(&error);
    assert!(
        text.contains("MCP server 'sdk' stopped and has already been restarted 1 time(s)"),
        "{text}"
    );
    assert!(text.contains("sdk server: crashing on request"), "{text}");
    connection.shutdown().await;
}

async fn dropping_the_connection_and_its_tools_kills_and_reaps_the_server() {
    let connection = connect(sdk_server()).await;
    let tools = connection.tools().await.unwrap();
    let pid = connection.server_pid().await.unwrap();
    assert!(!is_reaped(pid));
    drop(tools);
    drop(connection);
    wait_until_reaped(pid, Duration::from_secs(10)).await;
}

async fn shutdown_reaps_the_server_and_refuses_later_calls() {
    let connection = connect(sdk_server()).await;
    let tools = connection.tools().await.unwrap();
    let pid = connection.server_pid().await.unwrap();
    connection.shutdown().await;
    wait_until_reaped(pid, Duration::from_secs(10)).await;
    let error = run(&find(&tools, "add"), json!({"a": 1, "b": 2}))
        .await
        .unwrap_err();
    assert!(
        chain(&error).contains("the connection to MCP server 'sdk' is shut down"),
        "{}",
        chain(&error)
    );
}

async fn shutdown_during_a_call_ends_the_call_and_the_server() {
    let connection = connect(sdk_server()).await;
    let tools = connection.tools().await.unwrap();
    let pid = connection.server_pid().await.unwrap();
    let slow = find(&tools, "slow");
    let call = tokio::spawn(async move { run(&slow, json!({"seconds": 60})).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    connection.shutdown().await;
    let error = call.await.unwrap().unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    assert!(
        chain(&error).contains("MCP server 'sdk' stopped during the call to 'slow'"),
        "{}",
        chain(&error)
    );
    wait_until_reaped(pid, Duration::from_secs(10)).await;
}

async fn a_program_that_cannot_start_is_a_spawn_error() {
    let error =
        McpConnection::connect_stdio(McpStdioServer::new("ghost", "/nonexistent/mcp-server"))
            .await
            .err()
            .unwrap();
    assert!(matches!(error, McpError::Spawn { .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        "MCP server 'ghost' could not be started with `/nonexistent/mcp-server`"
    );
}

async fn a_program_that_exits_at_once_is_a_handshake_error_with_its_stderr() {
    let server = McpStdioServer::new("quitter", "sh")
        .arg("-c")
        .arg("echo 'config file missing: settings.toml' >&2; exit 4");
    let error = McpConnection::connect_stdio(server).await.err().unwrap();
    assert!(matches!(error, McpError::Handshake { .. }), "{error:?}");
    let text = error.to_string();
    assert!(
        text.starts_with("MCP server 'quitter' (`sh -c echo 'config file missing: settings.toml' >&2; exit 4`) did not complete the MCP handshake; its stderr ended with:\nconfig file missing: settings.toml"),
        "{text}"
    );
}

async fn a_program_that_never_answers_times_out_and_is_killed() {
    let marker = tempfile::tempdir().unwrap();
    let pid_file = marker.path().join("pid");
    let server = McpStdioServer::new("mute", "sh")
        .arg("-c")
        .arg(format!("echo $$ > {}; exec sleep 300", pid_file.display()))
        .start_timeout(Duration::from_millis(800));
    let started = Instant::now();
    let error = McpConnection::connect_stdio(server).await.err().unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(matches!(error, McpError::StartTimeout { .. }), "{error:?}");
    assert!(
        error.to_string().contains("did not start within 800ms"),
        "{error}"
    );
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    wait_until_reaped(pid, Duration::from_secs(10)).await;
}

fn main() -> std::process::ExitCode {
    let mcp = python_mcp();
    Suite::new()
        .async_test_needing(
            "lists_and_calls_the_sdk_servers_tools",
            &[&mcp],
            lists_and_calls_the_sdk_servers_tools,
        )
        .async_test_needing(
            "an_is_error_result_is_a_failed_tool_error_with_the_servers_text",
            &[&mcp],
            an_is_error_result_is_a_failed_tool_error_with_the_servers_text,
        )
        .async_test_needing(
            "a_call_past_the_timeout_is_abandoned_and_the_server_still_answers",
            &[&mcp],
            a_call_past_the_timeout_is_abandoned_and_the_server_still_answers,
        )
        .async_test_needing(
            "the_callers_cancellation_ends_a_call",
            &[&mcp],
            the_callers_cancellation_ends_a_call,
        )
        .async_test_needing(
            "a_dead_server_is_restarted_once_then_the_error_names_its_stderr",
            &[&mcp],
            a_dead_server_is_restarted_once_then_the_error_names_its_stderr,
        )
        .async_test_needing(
            "dropping_the_connection_and_its_tools_kills_and_reaps_the_server",
            &[&mcp],
            dropping_the_connection_and_its_tools_kills_and_reaps_the_server,
        )
        .async_test_needing(
            "shutdown_reaps_the_server_and_refuses_later_calls",
            &[&mcp],
            shutdown_reaps_the_server_and_refuses_later_calls,
        )
        .async_test_needing(
            "shutdown_during_a_call_ends_the_call_and_the_server",
            &[&mcp],
            shutdown_during_a_call_ends_the_call_and_the_server,
        )
        .async_test(
            "a_program_that_cannot_start_is_a_spawn_error",
            a_program_that_cannot_start_is_a_spawn_error,
        )
        .async_test(
            "a_program_that_exits_at_once_is_a_handshake_error_with_its_stderr",
            a_program_that_exits_at_once_is_a_handshake_error_with_its_stderr,
        )
        .async_test(
            "a_program_that_never_answers_times_out_and_is_killed",
            a_program_that_never_answers_times_out_and_is_killed,
        )
        .run()
}
