//! The embedding clients against local servers speaking each provider's API.

use std::time::Duration;

use crewai_llm::embeddings::{
    Embedder, EmbedderConfig, GeminiEmbedder, OllamaEmbedder, OpenAiEmbedder, build_embedder_with,
};
use crewai_llm::{LlmError, RetryPolicy};
use serde_json::{Value, json};
use wiremock::matchers::{header, method, path, query_param};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

fn texts(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

async fn sent_bodies(server: &MockServer) -> Vec<Value> {
    let requests = server.received_requests().await.unwrap_or_default();
    requests
        .iter()
        .map(|r| r.body_json::<Value>().expect("the client sends JSON"))
        .collect()
}

fn no_env() -> impl Fn(&str) -> Option<String> + Send + Sync {
    |_| None
}

fn fast_retries() -> RetryPolicy {
    RetryPolicy::default().with_delays(Duration::from_millis(1), Duration::from_millis(5))
}

/// The call ended because its timeout fired, on the wall clock: not before it was due, and within a
/// second after (the slack covers clock granularity: its timer starts after the test's clock).
fn assert_ended_on_time(elapsed: Duration, due: Duration) {
    assert!(
        elapsed + Duration::from_millis(20) >= due && elapsed <= due + Duration::from_secs(1),
        "ended after {elapsed:?}; a {due:?} timeout should end it within a second of being due"
    );
}

#[tokio::test]
async fn openai_sends_model_inputs_and_dimensions_and_orders_by_index() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .and(header("authorization", "Bearer sk-test"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "object": "list",
            "data": [
                {"object": "embedding", "index": 1, "embedding": [0.0, 1.0]},
                {"object": "embedding", "index": 0, "embedding": [1.0, 0.0]}
            ],
            "model": "text-embedding-3-small",
            "usage": {"prompt_tokens": 4, "total_tokens": 4}
        })))
        .mount(&server)
        .await;
    let embedder = OpenAiEmbedder::openai(
        "text-embedding-3-small",
        "sk-test".into(),
        Some(&format!("{}/v1", server.uri())),
    )
    .expect("builds")
    .with_dimensions(2);
    let vectors = embedder
        .embed(&texts(&["first", "second"]))
        .await
        .expect("embeds");
    assert_eq!(vectors, vec![vec![1.0, 0.0], vec![0.0, 1.0]]);
    assert_eq!(embedder.dimensions(), Some(2));
    assert_eq!(
        sent_bodies(&server).await[0],
        json!({"input": ["first", "second"], "encoding_format": "float", "model": "text-embedding-3-small", "dimensions": 2})
    );
}

#[tokio::test]
async fn azure_posts_to_the_deployment_with_the_api_key_header() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/openai/deployments/embed-prod/embeddings"))
        .and(query_param("api-version", "2024-10-21"))
        .and(header("api-key", "az-key"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"data": [{"index": 0, "embedding": [0.5, 0.5, 0.5]}]})),
        )
        .mount(&server)
        .await;
    let config: EmbedderConfig = serde_json::from_value(json!({
        "provider": "azure",
        "config": {"api_key": "az-key", "api_base": server.uri(), "deployment_id": "embed-prod"}
    }))
    .expect("CrewAI's azure form");
    let embedder = build_embedder_with(&config, &no_env(), &RetryPolicy::none()).expect("builds");
    assert_eq!(
        embedder.embed(&texts(&["hello"])).await.expect("embeds"),
        vec![vec![0.5, 0.5, 0.5]]
    );
    let body = &sent_bodies(&server).await[0];
    assert_eq!(body.get("model"), None, "the deployment names the model");
    assert_eq!(body["input"], json!(["hello"]));
}

#[tokio::test]
async fn gemini_batches_requests_of_at_most_one_hundred_texts() {
    let server = MockServer::start().await;
    let echo = |request: &Request| {
        let body: Value = request.body_json().unwrap_or_default();
        let count = body["requests"].as_array().map_or(0, Vec::len);
        let embeddings: Vec<Value> = (0..count)
            .map(|i| json!({"values": [i as f64, 1.0]}))
            .collect();
        ResponseTemplate::new(200).set_body_json(json!({"embeddings": embeddings}))
    };
    Mock::given(method("POST"))
        .and(path(
            "/v1beta/models/gemini-embedding-001:batchEmbedContents",
        ))
        .and(header("x-goog-api-key", "g-key"))
        .respond_with(echo)
        .mount(&server)
        .await;
    let embedder = GeminiEmbedder::new(
        "models/gemini-embedding-001",
        "g-key".into(),
        Some(&server.uri()),
    )
    .expect("builds")
    .with_dimensions(2)
    .with_task_type("RETRIEVAL_DOCUMENT");
    let inputs: Vec<String> = (0..150).map(|i| format!("text {i}")).collect();
    let vectors = embedder.embed(&inputs).await.expect("embeds");
    assert_eq!(vectors.len(), 150);
    assert_eq!(vectors[100], vec![0.0, 1.0], "the second batch starts over");

    let bodies = sent_bodies(&server).await;
    assert_eq!(bodies.len(), 2);
    assert_eq!(bodies[0]["requests"].as_array().map(Vec::len), Some(100));
    assert_eq!(
        bodies[0]["requests"][0],
        json!({"model": "models/gemini-embedding-001", "content": {"parts": [{"text": "text 0"}]}, "outputDimensionality": 2, "taskType": "RETRIEVAL_DOCUMENT"})
    );
}

#[tokio::test]
async fn ollama_uses_api_embed_and_crewai_url_key() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/embed"))
        .respond_with(ResponseTemplate::new(200).set_body_json(
            json!({"model": "nomic-embed-text", "embeddings": [[0.1, 0.2], [0.3, 0.4]]}),
        ))
        .mount(&server)
        .await;
    // CrewAI's Ollama embedder reads `url` (often the full `/api/embeddings` address).
    let config: EmbedderConfig = serde_json::from_value(json!({
        "provider": "ollama",
        "config": {"model_name": "nomic-embed-text", "url": format!("{}/api/embeddings", server.uri())}
    }))
    .expect("CrewAI's ollama form");
    let embedder = build_embedder_with(&config, &no_env(), &RetryPolicy::none()).expect("builds");
    let vectors = embedder.embed(&texts(&["a", "b"])).await.expect("embeds");
    assert_eq!(vectors, vec![vec![0.1, 0.2], vec![0.3, 0.4]]);
    assert_eq!(
        sent_bodies(&server).await[0],
        json!({"model": "nomic-embed-text", "input": ["a", "b"]})
    );
}

#[tokio::test]
async fn openai_compatible_servers_need_only_a_base_url() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"data": [{"index": 0, "embedding": [2.0]}]})),
        )
        .mount(&server)
        .await;
    let config = EmbedderConfig::new("openai-compatible")
        .with_model("bge-small")
        .with_base_url(format!("{}/v1", server.uri()));
    let embedder = build_embedder_with(&config, &no_env(), &RetryPolicy::none()).expect("builds");
    assert_eq!(
        embedder.embed(&texts(&["x"])).await.expect("embeds"),
        vec![vec![2.0]]
    );
    let requests = server.received_requests().await.unwrap_or_default();
    assert!(
        requests[0].headers.get("authorization").is_none(),
        "no key, no header"
    );

    let without_base = build_embedder_with(
        &EmbedderConfig::new("openai-compatible").with_model("m"),
        &no_env(),
        &RetryPolicy::none(),
    );
    assert!(
        without_base
            .err()
            .is_some_and(|e| e.to_string().contains("base_url"))
    );
}

#[tokio::test]
async fn rate_limits_are_retried_and_other_errors_are_not() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after-ms", "5")
                .set_body_json(
                    json!({"error": {"message": "Rate limit reached", "type": "requests"}}),
                ),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"data": [{"index": 0, "embedding": [1.0]}]})),
        )
        .mount(&server)
        .await;
    let config = EmbedderConfig::new("openai")
        .with_api_key("sk")
        .with_base_url(format!("{}/v1", server.uri()));
    let embedder = build_embedder_with(&config, &no_env(), &fast_retries()).expect("builds");
    assert_eq!(
        embedder.embed(&texts(&["x"])).await.expect("retried"),
        vec![vec![1.0]]
    );
    assert_eq!(
        server.received_requests().await.unwrap_or_default().len(),
        2
    );

    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(
            ResponseTemplate::new(401)
                .set_body_json(json!({"error": {"message": "Incorrect API key provided"}})),
        )
        .mount(&server)
        .await;
    let config = EmbedderConfig::new("openai")
        .with_api_key("bad")
        .with_base_url(format!("{}/v1", server.uri()));
    let embedder = build_embedder_with(&config, &no_env(), &fast_retries()).expect("builds");
    let error = embedder.embed(&texts(&["x"])).await.expect_err("bad key");
    assert!(
        matches!(&error, LlmError::Authentication { hint, .. } if hint == "OPENAI_API_KEY"),
        "{error:?}"
    );
    assert_eq!(
        server.received_requests().await.unwrap_or_default().len(),
        1
    );
}

#[tokio::test]
async fn malformed_replies_and_count_mismatches_are_errors() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/embed"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"embeddings": [[0.1]]})))
        .mount(&server)
        .await;
    let embedder = OllamaEmbedder::new("nomic-embed-text", &server.uri()).expect("builds");
    let error = embedder
        .embed(&texts(&["a", "b"]))
        .await
        .expect_err("one vector for two texts");
    assert!(
        matches!(&error, LlmError::MalformedResponse { message, .. } if message.contains("2 texts")),
        "{error:?}"
    );

    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"data": [{"index": 0, "embedding": ["x"]}]})),
        )
        .mount(&server)
        .await;
    let embedder = OpenAiEmbedder::compatible("local", "m", &format!("{}/v1", server.uri()), None)
        .expect("builds");
    let error = embedder
        .embed(&texts(&["a"]))
        .await
        .expect_err("not numbers");
    assert!(
        matches!(error, LlmError::MalformedResponse { .. }),
        "{error:?}"
    );
}

#[tokio::test]
async fn empty_input_makes_no_request_and_slow_servers_time_out() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_delay(Duration::from_secs(30))
                .set_body_json(json!({"embeddings": []})),
        )
        .mount(&server)
        .await;
    let embedder = OllamaEmbedder::new("nomic-embed-text", &server.uri()).expect("builds");
    assert_eq!(
        embedder.embed(&[]).await.expect("nothing to do"),
        Vec::<Vec<f32>>::new()
    );
    assert!(
        server
            .received_requests()
            .await
            .unwrap_or_default()
            .is_empty()
    );

    let embedder = embedder
        .with_timeout(Duration::from_millis(300))
        .expect("builds");
    let started = std::time::Instant::now();
    let error = embedder.embed(&texts(&["a"])).await.expect_err("times out");
    // The timeout, not the server's 30 s delay, ended it.
    assert_ended_on_time(started.elapsed(), Duration::from_millis(300));
    assert!(matches!(error, LlmError::Timeout { .. }), "{error:?}");
}

#[tokio::test]
async fn the_hash_embedder_needs_no_network() {
    let config: EmbedderConfig =
        serde_json::from_value(json!({"provider": "hash", "config": {"dimensions": 48}}))
            .expect("parses");
    let embedder = build_embedder_with(&config, &no_env(), &RetryPolicy::none()).expect("builds");
    let vectors = embedder
        .embed(&texts(&["agents and tasks", "agents and tasks"]))
        .await
        .expect("embeds");
    assert_eq!(vectors[0].len(), 48);
    assert_eq!(vectors[0], vectors[1]);
    assert_eq!(embedder.model(), "feature-hash");
}
