//! A proxy from the environment still carries the requests: `HTTP_PROXY` set, a plain-HTTP
//! request goes to the proxy in absolute form, while `NO_PROXY` hosts are reached directly.
//!
//! One test in its own binary: it sets proxy variables for the process.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use crewai_llm::http::{ErrorContext, HttpRequest, NetworkTransport, Transport};

/// An HTTP/1.1 server that answers every request with `who` and keeps each request line.
fn recording_server(who: &'static str) -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let port = listener
        .local_addr()
        .unwrap_or_else(|e| panic!("{e}"))
        .port();
    let lines = Arc::new(Mutex::new(Vec::new()));
    let seen = lines.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let seen = seen.clone();
            std::thread::spawn(move || {
                let Ok(mut writer) = stream.try_clone() else {
                    return;
                };
                let mut reader = BufReader::new(stream);
                loop {
                    let mut request_line = String::new();
                    if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
                        return;
                    }
                    let mut length = 0;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                            break;
                        }
                        if let Some((name, value)) = line.split_once(':')
                            && name.eq_ignore_ascii_case("content-length")
                        {
                            length = value.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    seen.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(request_line.trim_end().to_string());
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{who}",
                        who.len()
                    );
                    if writer.write_all(reply.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (port, lines)
}

async fn body_of(transport: &NetworkTransport, url: String) -> String {
    let request = HttpRequest {
        method: "POST".into(),
        url,
        headers: vec![("content-type".into(), "application/json".into())],
        body: Bytes::from_static(b"{}"),
        streaming: false,
    };
    let context = ErrorContext::new("test", "test-model", "TEST_API_KEY");
    let response = transport
        .send(request, &context)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let bytes = response
        .body
        .into_bytes()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    String::from_utf8_lossy(&bytes).into_owned()
}

#[tokio::test]
async fn proxy_settings_of_the_environment_are_honoured() {
    let (proxy_port, proxied) = recording_server("proxy");
    let (direct_port, direct) = recording_server("direct");
    // SAFETY: the only test in this binary, and no other thread reads the environment now.
    unsafe {
        std::env::set_var("HTTP_PROXY", format!("http://127.0.0.1:{proxy_port}"));
        std::env::set_var("NO_PROXY", "localhost");
    }
    // The environment is read when a pool is built: a connect timeout of its own.
    let transport = NetworkTransport::new(Duration::from_millis(4_001), Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("{e}"));

    let answer = body_of(&transport, "http://llm.example.invalid/v1/chat".into()).await;
    assert_eq!(answer, "proxy");
    assert_eq!(
        proxied.lock().unwrap_or_else(|p| p.into_inner()).as_slice(),
        ["POST http://llm.example.invalid/v1/chat HTTP/1.1"],
        "a plain-HTTP request through a proxy names its full URL"
    );

    let answer = body_of(
        &transport,
        format!("http://localhost:{direct_port}/v1/chat"),
    )
    .await;
    assert_eq!(answer, "direct");
    assert_eq!(
        direct.lock().unwrap_or_else(|p| p.into_inner()).as_slice(),
        ["POST /v1/chat HTTP/1.1"]
    );
}
