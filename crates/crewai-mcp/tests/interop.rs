//! crewai-mcp against MCP servers nobody here wrote, started by the tests: a server written with
//! `fastmcp` (PyPI) over stdio and streamable HTTP, the published `mcp-server-time` (PyPI) over
//! stdio, and `@modelcontextprotocol/server-everything` (npm) over stdio, HTTP+SSE and
//! streamable HTTP. `.ci/run` installs all of them.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crewai_mcp::{McpConnection, McpServer, McpTool, McpTransport};
use crewai_testkit::prereq::{Prerequisite, Suite, npm_bin};
use crewai_tools::{Tool, ToolContext, ToolError, ToolOutput};
use serde_json::{Value, json};

const EVERYTHING: &str = "@modelcontextprotocol/server-everything@2026.8.31";

fn fastmcp() -> Prerequisite {
    Prerequisite::program(
        "python3 with fastmcp",
        "python3",
        &["-c", "import fastmcp"],
        "python3 -m pip install fastmcp==4.2.3 (.ci/run does)",
    )
}

fn time_server() -> Prerequisite {
    Prerequisite::program(
        "python3 with mcp-server-time",
        "python3",
        &["-c", "import mcp_server_time"],
        "python3 -m pip install mcp-server-time==2026.10.19 (.ci/run does)",
    )
}

fn everything() -> Prerequisite {
    Prerequisite::npm_package(EVERYTHING, "mcp-server-everything")
}

fn fastmcp_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fastmcp_server.py")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .unwrap_or_else(|error| panic!("no free port: {error}"))
}

/// A server process of the test's own, killed and reaped when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(command: &mut Command) -> Running {
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|error| panic!("cannot start {command:?}: {error}"));
    Running(child)
}

/// Opens `server` once it listens (an HTTP server takes a moment to start).
async fn open_when_up(server: &McpServer) -> (McpConnection, Vec<McpTool>) {
    let deadline = Instant::now() + Duration::from_secs(45);
    loop {
        match server.open().await {
            Ok(opened) => return opened,
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(error) => panic!("open: {}", crewai_llm::error_chain(&error)),
        }
    }
}

fn tool<'a>(tools: &'a [McpTool], server_name: &str) -> &'a McpTool {
    tools
        .iter()
        .find(|tool| tool.info().name == server_name)
        .unwrap_or_else(|| panic!("the server lists no tool '{server_name}'"))
}

async fn call(tools: &[McpTool], name: &str, args: Value) -> Result<ToolOutput, ToolError> {
    tool(tools, name).run(args, &ToolContext::new()).await
}

async fn text(tools: &[McpTool], name: &str, args: Value) -> String {
    match call(tools, name, args).await {
        Ok(output) => output.to_text(),
        Err(error) => panic!("{name}: {}", crewai_llm::error_chain(&error)),
    }
}

/// What every fastmcp transport must give: its schemas unchanged, a plain result, a pydantic
/// result as its JSON, and a `ToolError` as a failed tool with fastmcp's text.
async fn fastmcp_tools_work(server: McpServer) {
    let (connection, tools) = open_when_up(&server).await;
    let prefix = server.server_name().to_string();
    let mut names: Vec<&str> = tools.iter().map(|tool| tool.name()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            format!("{prefix}_forecast"),
            format!("{prefix}_multiply"),
            format!("{prefix}_refuse")
        ]
    );
    let multiply = tool(&tools, "multiply");
    assert_eq!(multiply.description(), "Multiplies two integers.");
    assert_eq!(
        multiply.parameters(),
        json!({
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
            "additionalProperties": false
        })
    );
    assert_eq!(
        text(&tools, "multiply", json!({"a": 6, "b": 7})).await,
        "42"
    );
    let forecast: Value =
        serde_json::from_str(&text(&tools, "forecast", json!({"city": "Oslo"})).await)
            .unwrap_or_else(|error| panic!("the forecast is not JSON: {error}"));
    assert_eq!(
        forecast,
        json!({"city": "Oslo", "celsius": 21.5, "sunny": true})
    );
    match call(&tools, "refuse", json!({"reason": "no"})).await {
        Err(ToolError::Failed(text)) => assert_eq!(text, "fastmcp refuses: no"),
        other => panic!("expected a failed tool, got {other:?}"),
    }
    connection.shutdown().await;
}

async fn fastmcp_over_stdio() {
    let server = McpServer::stdio("python3", [fastmcp_script().display().to_string()]);
    assert_eq!(server.server_name(), "python3_fastmcp_server_py");
    fastmcp_tools_work(server).await;
}

async fn fastmcp_over_streamable_http() {
    let port = free_port();
    let _running = spawn(
        Command::new("python3")
            .arg(fastmcp_script())
            .arg("http")
            .arg(port.to_string()),
    );
    let server = McpServer::http(&format!("http://127.0.0.1:{port}/mcp"), false)
        .unwrap_or_else(|error| panic!("{error}"));
    fastmcp_tools_work(server).await;
}

async fn the_published_time_server_over_stdio() {
    let server = McpServer::stdio(
        "python3",
        ["-m", "mcp_server_time", "--local-timezone", "UTC"],
    )
    .tool_filter(["convert_time"]);
    let (connection, tools) = open_when_up(&server).await;
    assert_eq!(tools.len(), 1, "the filter keeps one tool");
    let schema = tools[0].parameters();
    assert_eq!(
        schema["required"],
        json!(["source_timezone", "time", "target_timezone"])
    );
    let converted = text(
        &tools,
        "convert_time",
        json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}),
    )
    .await;
    let converted: Value = serde_json::from_str(&converted)
        .unwrap_or_else(|error| panic!("not JSON ({error}): {converted}"));
    assert_eq!(converted["target"]["timezone"], "Asia/Tokyo");
    assert!(
        converted["target"]["datetime"]
            .as_str()
            .is_some_and(|at| at.contains("T21:00:00")),
        "{converted}"
    );
    match call(
        &tools,
        "convert_time",
        json!({"source_timezone": "Nowhere/Atlantis", "time": "12:00", "target_timezone": "UTC"}),
    )
    .await
    {
        Err(ToolError::Failed(text)) => assert!(text.contains("Nowhere/Atlantis"), "{text}"),
        other => panic!("expected a failed tool, got {other:?}"),
    }
    connection.shutdown().await;
}

/// server-everything's echo and sum, on any transport.
async fn echo_and_sum(tools: &[McpTool]) {
    assert_eq!(
        text(tools, "echo", json!({"message": "hello from crewai"})).await,
        "Echo: hello from crewai"
    );
    assert_eq!(
        text(tools, "get-sum", json!({"a": 2, "b": 40})).await,
        "The sum of 2 and 40 is 42."
    );
}

fn everything_stdio() -> McpServer {
    McpServer::stdio(
        npm_bin("mcp-server-everything").display().to_string(),
        ["stdio"],
    )
}

async fn server_everything_over_stdio() {
    let server = everything_stdio();
    assert_eq!(server.server_name(), "mcp-server-everything_stdio");
    let (connection, tools) = open_when_up(&server).await;
    assert!(
        tools
            .iter()
            .any(|tool| tool.name() == "mcp-server-everything_stdio_echo"),
        "{:?}",
        tools.iter().map(|tool| tool.name()).collect::<Vec<_>>()
    );
    echo_and_sum(&tools).await;
    connection.shutdown().await;
}

/// Structured content, images, embedded resources and resource links reach the model as text.
async fn server_everythings_rich_results_are_mapped_to_text() {
    let (connection, tools) = open_when_up(&everything_stdio()).await;
    let weather: Value = serde_json::from_str(
        &text(
            &tools,
            "get-structured-content",
            json!({"location": "Chicago"}),
        )
        .await,
    )
    .unwrap_or_else(|error| panic!("the structured result is not JSON: {error}"));
    assert!(weather["temperature"].is_number() && weather["conditions"].is_string());

    let image = text(&tools, "get-tiny-image", json!({})).await;
    assert_eq!(
        image,
        "Here's the image you requested:\n[image content: image/png]\nThe image above is the MCP logo."
    );

    let resource = text(
        &tools,
        "get-resource-reference",
        json!({"resourceType": "Text", "resourceId": 2}),
    )
    .await;
    assert!(
        resource.contains("Resource 2: This is a plaintext resource"),
        "{resource}"
    );
    let blob = text(
        &tools,
        "get-resource-reference",
        json!({"resourceType": "Blob", "resourceId": 1}),
    )
    .await;
    assert!(
        blob.contains("[binary resource: demo://resource/dynamic/blob/1]"),
        "{blob}"
    );

    let links = text(&tools, "get-resource-links", json!({"count": 2})).await;
    assert!(
        links.contains("[resource: demo://resource/dynamic/text/2]"),
        "{links}"
    );
    connection.shutdown().await;
}

fn everything_on(transport: &str, port: u16) -> Running {
    spawn(
        Command::new(npm_bin("mcp-server-everything"))
            .arg(transport)
            .env("PORT", port.to_string()),
    )
}

async fn server_everything_over_sse() {
    let port = free_port();
    let _running = everything_on("sse", port);
    let server = McpServer::http(&format!("http://127.0.0.1:{port}/sse"), true)
        .unwrap_or_else(|error| panic!("{error}"));
    assert!(matches!(server.transport, McpTransport::Sse(_)));
    let (connection, tools) = open_when_up(&server).await;
    echo_and_sum(&tools).await;
    connection.shutdown().await;
}

async fn server_everything_over_streamable_http() {
    let port = free_port();
    let _running = everything_on("streamableHttp", port);
    let server = McpServer::http(&format!("http://127.0.0.1:{port}/mcp"), false)
        .unwrap_or_else(|error| panic!("{error}"));
    let (connection, tools) = open_when_up(&server).await;
    echo_and_sum(&tools).await;
    connection.shutdown().await;
}

fn main() -> std::process::ExitCode {
    let (fastmcp, time_server, everything) = (fastmcp(), time_server(), everything());
    Suite::new()
        .async_test_needing("fastmcp_over_stdio", &[&fastmcp], fastmcp_over_stdio)
        .async_test_needing(
            "fastmcp_over_streamable_http",
            &[&fastmcp],
            fastmcp_over_streamable_http,
        )
        .async_test_needing(
            "the_published_time_server_over_stdio",
            &[&time_server],
            the_published_time_server_over_stdio,
        )
        .async_test_needing(
            "server_everything_over_stdio",
            &[&everything],
            server_everything_over_stdio,
        )
        .async_test_needing(
            "server_everythings_rich_results_are_mapped_to_text",
            &[&everything],
            server_everythings_rich_results_are_mapped_to_text,
        )
        .async_test_needing(
            "server_everything_over_sse",
            &[&everything],
            server_everything_over_sse,
        )
        .async_test_needing(
            "server_everything_over_streamable_http",
            &[&everything],
            server_everything_over_streamable_http,
        )
        .run()
}
