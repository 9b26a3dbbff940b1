//! The client against peers that misbehave, served on 127.0.0.1 by axum: a stream that never
//! ends, malformed JSON-RPC, answers over the size limit, a card without a 0.3 endpoint, an
//! endpoint nobody listens on. Each ends in a typed error within its bound.

use std::convert::Infallible;
use std::time::{Duration, Instant};

use axum::Router;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use crewai_a2a::{A2aClientConfig, A2aError, A2aUpdates, Conversation};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// Serves `rpc` at `/` behind a card that points there (streaming as `streaming` says).
async fn peer(rpc: Router, streaming: bool) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let card = card(&format!("{base}/"), streaming);
    let app = rpc.route(
        "/.well-known/agent-card.json",
        get(move || {
            let card = card.clone();
            async move { axum::Json(card) }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    base
}

fn card(url: &str, streaming: bool) -> Value {
    json!({
        "protocolVersion": "0.3.0", "name": "Hostile", "description": "misbehaves",
        "url": url, "version": "1", "capabilities": {"streaming": streaming},
        "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"], "skills": []
    })
}

fn config(base: &str) -> A2aClientConfig {
    A2aClientConfig::new(base)
        .unwrap()
        .timeout(Duration::from_secs(2))
}

async fn ask(config: A2aClientConfig) -> A2aError {
    let conversation = Conversation::connect(config).await.unwrap();
    conversation
        .ask("hello", &CancellationToken::new())
        .await
        .unwrap_err()
}

fn working_event(n: u64) -> String {
    json!({"jsonrpc": "2.0", "id": "x", "result": {
        "kind": "status-update", "taskId": "t", "contextId": "c", "final": false,
        "status": {"state": "working", "message": {"kind": "message", "messageId": format!("m{n}"),
            "role": "agent", "parts": [{"kind": "text", "text": "still going"}]}}
    }})
    .to_string()
}

#[tokio::test]
async fn a_stream_that_never_ends_is_cut_at_the_timeout() {
    let forever = post(|| async {
        let events = futures::stream::unfold(0u64, |n| async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            Some((
                Ok::<_, Infallible>(Event::default().data(working_event(n))),
                n + 1,
            ))
        });
        Sse::new(events)
    });
    let base = peer(Router::new().route("/", forever), true).await;
    let started = Instant::now();
    let error = ask(config(&base)).await;
    assert!(matches!(error, A2aError::Timeout { .. }), "{error:?}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_stream_over_the_size_limit_is_abandoned() {
    let flood = post(|| async {
        let events = futures::stream::unfold(0u64, |n| async move {
            Some((
                Ok::<_, Infallible>(Event::default().data(working_event(n))),
                n + 1,
            ))
        });
        Sse::new(events)
    });
    let base = peer(Router::new().route("/", flood), true).await;
    // The limit, not the clock, must stop it: a loaded machine may take longer than the short
    // timeout of the other tests to stream 64 KB.
    let error = ask(config(&base)
        .timeout(Duration::from_secs(60))
        .max_response_bytes(64 * 1024))
    .await;
    assert!(
        matches!(error, A2aError::TooLarge { limit: 65536, .. }),
        "{error:?}"
    );
}

#[tokio::test]
async fn an_answer_over_the_size_limit_is_abandoned() {
    let huge = post(|| async {
        let text = "x".repeat(200_000);
        axum::Json(json!({"jsonrpc": "2.0", "id": "x", "result": {
            "kind": "message", "messageId": "m", "role": "agent",
            "parts": [{"kind": "text", "text": text}]}}))
    });
    let base = peer(Router::new().route("/", huge), false).await;
    let polled = config(&base)
        .updates(A2aUpdates::Polling {
            interval: Duration::from_millis(50),
        })
        .max_response_bytes(10_000);
    let error = ask(polled).await;
    assert!(matches!(error, A2aError::TooLarge { .. }), "{error:?}");
}

#[tokio::test]
async fn malformed_json_rpc_is_a_typed_error() {
    let cases: [(&str, &str); 4] = [
        ("not json at all", "parse"),
        (r#"{"jsonrpc": "2.0", "id": "x"}"#, "neither"),
        (r#"{"jsonrpc": "1.0", "id": "x", "result": {}}"#, "parse"),
        (
            r#"{"jsonrpc": "2.0", "id": "x", "result": {"kind": "task", "id": 5}}"#,
            "parse",
        ),
    ];
    for (body, kind) in cases {
        let answer = post(move || async move {
            ([("content-type", "application/json")], body).into_response()
        });
        let base = peer(Router::new().route("/", answer), false).await;
        let error = ask(config(&base)).await;
        let fits = match kind {
            "parse" => matches!(error, A2aError::InvalidJson { .. }),
            _ => matches!(error, A2aError::Protocol { .. }),
        };
        assert!(fits, "{body}: {error:?}");
    }
}

#[tokio::test]
async fn a_json_rpc_error_keeps_its_code_and_message() {
    let refuse = post(|| async {
        axum::Json(json!({"jsonrpc": "2.0", "id": "x",
            "error": {"code": -32602, "message": "missing crew input 'topic'"}}))
    });
    let base = peer(Router::new().route("/", refuse), false).await;
    match ask(config(&base)).await {
        A2aError::Remote { code, message, .. } => {
            assert_eq!(code, -32602);
            assert!(message.contains("topic"));
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_http_error_is_typed_with_the_start_of_its_body() {
    let down = post(|| async {
        Response::builder()
            .status(503)
            .body(axum::body::Body::from("overloaded, come back later"))
            .unwrap()
    });
    let base = peer(Router::new().route("/", down), false).await;
    match ask(config(&base)).await {
        A2aError::HttpStatus { status, body, .. } => {
            assert_eq!(status, 503);
            assert!(body.contains("overloaded"));
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_unreachable_endpoint_is_a_connect_error() {
    // A port that was free a moment ago: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let error = Conversation::connect(config(&format!("http://127.0.0.1:{port}")))
        .await
        .unwrap_err();
    assert!(matches!(error, A2aError::Connect { .. }), "{error:?}");
}

#[tokio::test]
async fn a_card_that_never_comes_is_a_timeout() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = Router::new().route(
        "/.well-known/agent-card.json",
        get(|| async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            "never"
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    let started = Instant::now();
    let error = Conversation::connect(config(&base)).await.unwrap_err();
    assert!(matches!(error, A2aError::Timeout { .. }), "{error:?}");
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[tokio::test]
async fn a_card_with_only_a_1_0_endpoint_is_refused_by_name() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let v1_only = json!({"name": "New", "description": "d", "version": "1",
        "supportedInterfaces": [{"url": format!("{base}/"), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {}, "defaultInputModes": [], "defaultOutputModes": [], "skills": []});
    let app = Router::new().route(
        "/.well-known/agent-card.json",
        get(move || {
            let card = v1_only.clone();
            async move { axum::Json(card) }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    let error = Conversation::connect(config(&base)).await.unwrap_err();
    assert!(
        matches!(error, A2aError::NoCompatibleInterface { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("0.3"), "{error}");
}
