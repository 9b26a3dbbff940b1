//! crewai-mcp over HTTP against servers written with the official Python SDK (`mcp`): streamable
//! HTTP on rmcp's client, and the older HTTP+SSE protocol on this crate's own transport.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crewai_mcp::{McpConnection, McpOAuth, McpServer};
use crewai_testkit::prereq::{Prerequisite, Suite};
use crewai_tools::{Tool, ToolContext, ToolError};
use serde_json::json;

fn python_mcp() -> Prerequisite {
    Prerequisite::program(
        "python3 with the MCP Python SDK",
        "python3",
        &["-c", "import mcp"],
        "python3 -m pip install mcp",
    )
}

/// The SDK server on a free port, killed when dropped.
struct HttpServer {
    child: Child,
    port: u16,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_sdk_server(transport: &str) -> HttpServer {
    start_fixture("sdk_server.py", &[transport], &[])
}

/// `python3 tests/fixtures/<script> <before...> PORT <after...>` on a free port.
fn start_fixture(script: &str, before: &[&str], after: &[&str]) -> HttpServer {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .unwrap_or_else(|error| panic!("no free port: {error}"));
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(script);
    let child = Command::new("python3")
        .arg(script)
        .args(before)
        .arg(port.to_string())
        .args(after)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|error| panic!("python3: {error}"));
    HttpServer { child, port }
}

/// Connects once the server listens (it takes a moment to import the SDK).
async fn connect_when_up(server: &McpServer) -> McpConnection {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match McpConnection::connect_server(server).await {
            Ok(connection) => return connection,
            Err(error) if Instant::now() < deadline => {
                let _ = error;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(error) => panic!("connect: {}", crewai_llm::error_chain(&error)),
        }
    }
}

async fn lists_calls_and_fails_like_over_stdio(server: McpServer) {
    let connection = connect_when_up(&server).await;
    let (connection2, tools) = server
        .clone()
        .tool_filter(["add", "fail"])
        .open()
        .await
        .unwrap_or_else(|error| panic!("open: {}", crewai_llm::error_chain(&error)));
    let mut names: Vec<&str> = tools.iter().map(|tool| tool.name()).collect();
    names.sort_unstable();
    let prefix = server.server_name().to_string();
    assert_eq!(names, [format!("{prefix}_add"), format!("{prefix}_fail")]);
    let add = tools.iter().find(|tool| tool.info().name == "add").unwrap();
    assert_eq!(add.parameters()["required"], json!(["a", "b"]));
    let ctx = ToolContext::new();
    let sum = add.run(json!({"a": 2, "b": 40}), &ctx).await.unwrap();
    assert_eq!(sum.to_text(), "42");
    let fail = tools
        .iter()
        .find(|tool| tool.info().name == "fail")
        .unwrap();
    match fail.run(json!({"reason": "r"}), &ctx).await {
        Err(ToolError::Failed(text)) => assert!(text.contains("refusing on purpose: r"), "{text}"),
        other => panic!("expected a failed tool, got {other:?}"),
    }
    connection2.shutdown().await;
    connection.shutdown().await;
}

async fn streamable_http_against_the_python_sdk() {
    let running = start_sdk_server("streamable-http");
    let url = format!("http://127.0.0.1:{}/mcp", running.port);
    let server = McpServer::http(&url, false)
        .unwrap()
        .header("Authorization", "Bearer not-shown");
    assert!(!format!("{server:?}").contains("not-shown"));
    lists_calls_and_fails_like_over_stdio(server).await;
}

async fn http_sse_against_the_python_sdk() {
    let running = start_sdk_server("sse");
    let url = format!("http://127.0.0.1:{}/sse", running.port);
    let server = McpServer::http(&url, true).unwrap();
    assert_eq!(server.transport.kind(), "sse");
    lists_calls_and_fails_like_over_stdio(server).await;
}

async fn a_server_that_is_not_there_is_a_bounded_connect_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .unwrap();
    for sse in [false, true] {
        let server = McpServer::http(&format!("http://127.0.0.1:{port}/mcp"), sse)
            .unwrap()
            .connect_timeout(Duration::from_secs(3));
        let started = Instant::now();
        let error = match McpConnection::connect_server(&server).await {
            Ok(_) => panic!("connected to nothing"),
            Err(error) => crewai_llm::error_chain(&error),
        };
        assert!(started.elapsed() < Duration::from_secs(10), "{error}");
        assert!(error.contains("127_0_0_1"), "{error}");
    }
}

async fn an_sse_stream_that_never_names_its_endpoint_times_out() {
    // A server that accepts the connection and never sends a byte.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let server = McpServer::http(&format!("http://127.0.0.1:{port}/sse"), true)
        .unwrap()
        .connect_timeout(Duration::from_secs(1));
    let started = Instant::now();
    let error = match McpConnection::connect_server(&server).await {
        Ok(_) => panic!("connected to a silent server"),
        Err(error) => crewai_llm::error_chain(&error),
    };
    assert!(started.elapsed() < Duration::from_secs(5), "{error}");
    assert!(error.contains("did not start within"), "{error}");
    hold.abort();
}

/// A server written with the SDK that needs a bearer token (the SDK is the resource server; a
/// fixture authorization server beside it grants `client_credentials`): the token is got by
/// discovery and the client's credentials, and the tool sees the client it was issued to; a
/// wrong secret and no OAuth at all are refused.
async fn streamable_http_with_oauth_client_credentials() {
    let running = start_fixture("oauth_server.py", &[], &["crew-client", "s3cret"]);
    let url = format!("http://127.0.0.1:{}/mcp", running.port);
    let credentials = |secret: &str| McpOAuth {
        client_id: "crew-client".into(),
        client_secret: secret.into(),
        scopes: vec!["tools".into()],
        resource: None,
    };
    let server = McpServer::http(&url, false)
        .unwrap()
        .oauth(credentials("s3cret"));
    assert!(
        !format!("{server:?}").contains("s3cret"),
        "the secret is never shown"
    );
    let connection = connect_when_up(&server).await;
    let (tools_connection, tools) = server
        .clone()
        .open()
        .await
        .unwrap_or_else(|error| panic!("open: {}", crewai_llm::error_chain(&error)));
    let whoami = tools
        .iter()
        .find(|tool| tool.info().name == "whoami")
        .unwrap();
    let answer = whoami.run(json!({}), &ToolContext::new()).await.unwrap();
    assert_eq!(answer.to_text(), "client crew-client");
    tools_connection.shutdown().await;
    connection.shutdown().await;

    let wrong = McpServer::http(&url, false)
        .unwrap()
        .oauth(credentials("guess"));
    let error = match McpConnection::connect_server(&wrong).await {
        Ok(_) => panic!("a wrong secret got a token"),
        Err(error) => crewai_llm::error_chain(&error),
    };
    assert!(error.contains("OAuth failed"), "{error}");
    assert!(!error.contains("guess"), "{error}");
    let without = McpServer::http(&url, false).unwrap();
    assert!(
        McpConnection::connect_server(&without).await.is_err(),
        "the server refuses a client without a token"
    );

    // The older HTTP+SSE protocol sends the same bearer token.
    let sse = start_fixture("oauth_server.py", &[], &["crew-client", "s3cret", "sse"]);
    let server = McpServer::http(&format!("http://127.0.0.1:{}/sse", sse.port), true)
        .unwrap()
        .oauth(credentials("s3cret"));
    let connection = connect_when_up(&server).await;
    connection.shutdown().await;
}

fn main() -> std::process::ExitCode {
    let mcp = python_mcp();
    Suite::new()
        .async_test_needing(
            "streamable_http_against_the_python_sdk",
            &[&mcp],
            streamable_http_against_the_python_sdk,
        )
        .async_test_needing(
            "http_sse_against_the_python_sdk",
            &[&mcp],
            http_sse_against_the_python_sdk,
        )
        .async_test_needing(
            "streamable_http_with_oauth_client_credentials",
            &[&mcp],
            streamable_http_with_oauth_client_credentials,
        )
        .async_test(
            "a_server_that_is_not_there_is_a_bounded_connect_error",
            a_server_that_is_not_there_is_a_bounded_connect_error,
        )
        .async_test(
            "an_sse_stream_that_never_names_its_endpoint_times_out",
            an_sse_stream_that_never_names_its_endpoint_times_out,
        )
        .run()
}
