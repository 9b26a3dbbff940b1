//! The network transport against real sockets: keep-alive reuse with a server that writes the
//! headers and the body separately (the pattern that stalls on delayed ACKs), bodies that arrive
//! in pieces, timeouts, refused connections and TLS verification.

use crewai_testkit::timing::assert_ended_on_time;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use crewai_llm::LlmError;
use crewai_llm::http::{ErrorContext, HttpRequest, NetworkTransport, Transport};
use futures::StreamExt;

fn context() -> ErrorContext {
    ErrorContext::new("test", "test-model", "TEST_API_KEY")
}

fn post(url: String, body: &str, streaming: bool) -> HttpRequest {
    HttpRequest {
        method: "POST".into(),
        url,
        headers: vec![("content-type".into(), "application/json".into())],
        body: Bytes::from(body.to_string()),
        streaming,
    }
}

/// Reads one request (head and `Content-Length` body); `None` once the client closed.
fn read_request(reader: &mut BufReader<TcpStream>) -> Option<String> {
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    String::from_utf8(body).ok()
}

/// An HTTP/1.1 server like Python's `http.server`: keep-alive, Nagle on, the head and the body
/// of every reply in separate writes (the body in `pieces` writes). It echoes the request body
/// and counts the connections it accepted.
fn split_write_server(pieces: usize) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("bind: {e}"));
    let url = format!(
        "http://{}/v1/echo",
        listener.local_addr().unwrap_or_else(|e| panic!("{e}"))
    );
    let connections = Arc::new(AtomicUsize::new(0));
    let counter = connections.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            counter.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || {
                let mut writer = match stream.try_clone() {
                    Ok(writer) => writer,
                    Err(_) => return,
                };
                let mut reader = BufReader::new(stream);
                while let Some(body) = read_request(&mut reader) {
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                        body.len()
                    );
                    if writer.write_all(head.as_bytes()).is_err() {
                        return;
                    }
                    let step = body.len().div_ceil(pieces).max(1);
                    for piece in body.as_bytes().chunks(step) {
                        if writer.write_all(piece).is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (url, connections)
}

#[tokio::test]
async fn consecutive_calls_reuse_one_connection_to_a_split_write_server() {
    let (url, connections) = split_write_server(1);
    // A connect timeout no other test uses: a pool of its own.
    let transport = NetworkTransport::new(Duration::from_millis(2_001), Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("{e}"));
    for call in 0..5 {
        let body = format!("{{\"call\":{call}}}");
        let response = transport
            .send(post(url.clone(), &body, false), &context())
            .await
            .unwrap_or_else(|e| panic!("call {call}: {e}"));
        assert_eq!(response.status, 200);
        assert_eq!(response.header("content-type"), Some("application/json"));
        let echoed = response
            .body
            .into_bytes()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(echoed, body.as_bytes());
    }
    assert_eq!(
        connections.load(Ordering::SeqCst),
        1,
        "every call after the first should reuse the kept-alive connection"
    );
}

#[tokio::test]
async fn a_streamed_body_arrives_whole() {
    let (url, _) = split_write_server(4);
    let transport = NetworkTransport::new(Duration::from_millis(2_002), Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("{e}"));
    let body = "data: {\"a\":1}\n\ndata: {\"b\":2}\n\ndata: [DONE]\n\n";
    let response = transport
        .send(post(url, body, true), &context())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let crewai_llm::http::ResponseBody::Streaming(mut stream) = response.body else {
        panic!("a streaming request should get a streaming body");
    };
    let mut all = Vec::new();
    while let Some(chunk) = stream.next().await {
        all.extend_from_slice(&chunk.unwrap_or_else(|e| panic!("{e}")));
    }
    assert_eq!(all, body.as_bytes());
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let url = format!(
        "http://{}/v1/slow",
        listener.local_addr().unwrap_or_else(|e| panic!("{e}"))
    );
    // Accepts and reads, never writes; keeps the sockets open until the test ends.
    std::thread::spawn(move || {
        let mut open = Vec::new();
        for stream in listener.incoming().flatten() {
            open.push(stream);
        }
    });
    let transport = NetworkTransport::new(Duration::from_millis(2_003), Duration::from_millis(300))
        .unwrap_or_else(|e| panic!("{e}"));
    let started = std::time::Instant::now();
    let sent = transport.send(post(url, "{}", false), &context()).await;
    // The timeout, not a server that never writes, ended it.
    assert_ended_on_time(started.elapsed(), Duration::from_millis(300), "timeout");
    match sent {
        Err(LlmError::Timeout {
            provider, after, ..
        }) => {
            assert_eq!(provider, "test");
            assert_eq!(after, Duration::from_millis(300));
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
}

#[tokio::test]
async fn a_refused_connection_is_a_connection_error() {
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        listener
            .local_addr()
            .unwrap_or_else(|e| panic!("{e}"))
            .port()
    };
    let transport = NetworkTransport::new(Duration::from_millis(2_004), Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("{e}"));
    let url = format!("http://127.0.0.1:{port}/v1/chat/completions");
    match transport.send(post(url, "{}", false), &context()).await {
        Err(error @ LlmError::Connection { .. }) => {
            // The socket's own error is kept as the cause, after what failed at this level.
            let text = crewai_llm::error_chain(&error);
            assert!(text.starts_with("test: connection failed: "), "{text}");
            assert!(text.len() > "test: connection failed: ".len(), "{text}");
        }
        other => panic!("expected a connection error, got {other:?}"),
    }
}

#[tokio::test]
async fn urls_that_are_not_http_are_refused_up_front() {
    let transport = NetworkTransport::new(Duration::from_millis(2_005), Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("{e}"));
    for url in ["ftp://example.com/x", "not a url", "/relative/path"] {
        match transport
            .send(post(url.into(), "{}", false), &context())
            .await
        {
            Err(error @ (LlmError::Config(_) | LlmError::InvalidConfig { .. })) => {
                let text = crewai_llm::error_chain(&error);
                assert!(
                    text.starts_with("invalid LLM configuration: invalid URL"),
                    "{text}"
                );
            }
            other => panic!("{url}: expected a config error, got {other:?}"),
        }
    }
}
