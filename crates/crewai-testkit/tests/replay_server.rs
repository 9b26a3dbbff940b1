//! The replay server over real HTTP: per-path FIFO, SSE bodies, exhaustion.

use crewai_testkit::replay::{Cassette, ReplayServer};

const CASSETTE: &str = r#"
interactions:
- request: {body: '{"n":1}', headers: {}, method: POST, uri: "https://api.openai.com/v1/chat/completions"}
  response: {body: {string: '{"reply":"first"}'}, headers: {Content-Type: [application/json]}, status: {code: 200, message: OK}}
- request: {body: null, headers: {}, method: POST, uri: "https://app.crewai.com/crewai_plus/api/v1/tracing/batches"}
  response: {body: {string: '{}'}, headers: {}, status: {code: 401, message: Unauthorized}}
- request: {body: '{"input":"x"}', headers: {}, method: POST, uri: "https://api.openai.com/v1/embeddings"}
  response: {body: {string: '{"reply":"embedding"}'}, headers: {Content-Type: [application/json]}, status: {code: 200, message: OK}}
- request: {body: '{"n":2}', headers: {}, method: POST, uri: "https://api.openai.com/v1/chat/completions"}
  response:
    body: {string: "data: {\"a\":1}\n\ndata: [DONE]\n\n"}
    headers: {Content-Type: [text/event-stream; charset=utf-8]}
    status: {code: 200, message: OK}
"#;

#[tokio::test]
async fn plays_each_path_in_order_then_reports_exhaustion() {
    let server = ReplayServer::start(Cassette::from_yaml_str(CASSETTE).unwrap())
        .await
        .unwrap();
    assert_eq!(server.recorded(), 3);
    let client = reqwest::Client::new();
    let chat = server.url("/v1/chat/completions");

    // The body is never matched: a different body still gets the first recorded response.
    let first = client
        .post(&chat)
        .body(r#"{"different":true}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), 200);
    assert_eq!(first.text().await.unwrap(), r#"{"reply":"first"}"#);

    let embedding = client
        .post(server.url("/v1/embeddings?x=1"))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(embedding.text().await.unwrap(), r#"{"reply":"embedding"}"#);

    let streamed = client.post(&chat).body("{}").send().await.unwrap();
    assert_eq!(
        streamed.headers()["content-type"],
        "text/event-stream; charset=utf-8"
    );
    assert_eq!(
        streamed.text().await.unwrap(),
        "data: {\"a\":1}\n\ndata: [DONE]\n\n"
    );

    let exhausted = client.post(&chat).body("not json").send().await.unwrap();
    assert_eq!(exhausted.status().as_u16(), 599);
    assert!(
        exhausted
            .text()
            .await
            .unwrap()
            .contains("ran out of recorded responses at request 4 (/v1/chat/completions)")
    );

    // A GET on the same path is a different queue.
    let get = client.get(&chat).send().await.unwrap();
    assert_eq!(get.status().as_u16(), 599);

    assert_eq!(server.played(), 3);
    assert_eq!(
        server.failures(),
        vec![
            "ran out of recorded responses at request 4 (/v1/chat/completions)".to_string(),
            "ran out of recorded responses at request 5 (/v1/chat/completions)".to_string(),
        ]
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 5);
    assert_eq!(
        requests[0].body,
        Some(serde_json::json!({"different": true}))
    );
    assert_eq!(requests[0].answered_by, Some(0));
    assert_eq!(requests[2].answered_by, Some(2));
    assert_eq!(requests[3].body, None);
    assert_eq!(requests[3].raw_body, "not json");
    assert_eq!(requests[3].answered_by, None);
    server.shutdown().await;
}

#[tokio::test]
async fn servers_are_isolated() {
    let a = ReplayServer::start(Cassette::from_yaml_str(CASSETTE).unwrap())
        .await
        .unwrap();
    let b = ReplayServer::start(Cassette::from_yaml_str(CASSETTE).unwrap())
        .await
        .unwrap();
    assert_ne!(a.addr(), b.addr());
    let client = reqwest::Client::new();
    client
        .post(a.url("/v1/chat/completions"))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(a.played(), 1);
    assert_eq!(b.played(), 0);
    assert!(b.requests().is_empty());
}
