//! The embedding clients against local servers speaking each provider's API.

mod common;

use std::time::Duration;

use common::{answering_at, assert_times_out, json_status, sent_bodies};
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

fn no_env() -> impl Fn(&str) -> Option<String> + Send + Sync {
    |_| None
}

fn fast_retries() -> RetryPolicy {
    RetryPolicy::default().with_delays(Duration::from_millis(1), Duration::from_millis(5))
}

/// An OpenAI `/embeddings` reply of these `data` items.
fn openai_vectors(data: Value) -> ResponseTemplate {
    json_status(200, &json!({ "data": data }))
}

/// The embedder `config` builds, with no environment and `policy`.
fn built(config: &EmbedderConfig, policy: &RetryPolicy) -> std::sync::Arc<dyn Embedder> {
    build_embedder_with(config, &no_env(), policy).expect("builds")
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
    let embedder = built(&config, &RetryPolicy::none());
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
    let embedder = built(&config, &RetryPolicy::none());
    let vectors = embedder.embed(&texts(&["a", "b"])).await.expect("embeds");
    assert_eq!(vectors, vec![vec![0.1, 0.2], vec![0.3, 0.4]]);
    assert_eq!(
        sent_bodies(&server).await[0],
        json!({"model": "nomic-embed-text", "input": ["a", "b"]})
    );
}

/// What each API says a batch cost reaches `embed_counted`, summed over the batches; a reply
/// without a count leaves it unknown.
#[tokio::test]
async fn the_reported_input_tokens_are_counted() {
    let reply = json_status(
        200,
        &json!({"data": [{"index": 0, "embedding": [1.0]}], "usage": {"prompt_tokens": 7, "total_tokens": 7}}),
    );
    let server = answering_at("/v1/embeddings", reply).await;
    let config = EmbedderConfig::new("openai-compatible")
        .with_model("bge-small")
        .with_base_url(format!("{}/v1", server.uri()));
    let counted = built(&config, &fast_retries())
        .embed_counted(&texts(&["seven tokens"]))
        .await
        .expect("embeds");
    assert_eq!(counted.prompt_tokens, Some(7));
    assert_eq!(counted.vectors, vec![vec![1.0]]);

    let ollama = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/embed"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"embeddings": [[0.5]], "prompt_eval_count": 3})),
        )
        .mount(&ollama)
        .await;
    let counted = OllamaEmbedder::new("m", &ollama.uri())
        .expect("builds")
        .embed_counted(&texts(&["abc"]))
        .await
        .expect("embeds");
    assert_eq!(counted.prompt_tokens, Some(3));

    let silent = answering_at(
        "/v1/embeddings",
        openai_vectors(json!([{"index": 0, "embedding": [2.0]}])),
    )
    .await;
    let config = EmbedderConfig::new("openai-compatible")
        .with_model("m")
        .with_base_url(format!("{}/v1", silent.uri()));
    let counted = built(&config, &RetryPolicy::none())
        .embed_counted(&texts(&["x"]))
        .await
        .expect("embeds");
    assert_eq!(counted.prompt_tokens, None);
}

#[tokio::test]
async fn openai_compatible_servers_need_only_a_base_url() {
    let reply = openai_vectors(json!([{"index": 0, "embedding": [2.0]}]));
    let server = answering_at("/v1/embeddings", reply).await;
    let config = EmbedderConfig::new("openai-compatible")
        .with_model("bge-small")
        .with_base_url(format!("{}/v1", server.uri()));
    let embedder = built(&config, &RetryPolicy::none());
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
    let error = without_base.err().map(|e| crewai_llm::error_chain(&e));
    assert!(
        error.as_ref().is_some_and(|e| e.contains("base_url")),
        "{error:?}"
    );
}

/// An OpenAI embedder with `key` for the server at `server`, retrying fast.
fn openai_at(server: &MockServer, key: &str) -> std::sync::Arc<dyn Embedder> {
    let config = EmbedderConfig::new("openai")
        .with_api_key(key)
        .with_base_url(format!("{}/v1", server.uri()));
    built(&config, &fast_retries())
}

#[tokio::test]
async fn rate_limits_are_retried_and_other_errors_are_not() {
    let server = MockServer::start().await;
    let limited = json_status(
        429,
        &json!({"error": {"message": "Rate limit reached", "type": "requests"}}),
    );
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(limited.insert_header("retry-after-ms", "5"))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    let reply = openai_vectors(json!([{"index": 0, "embedding": [1.0]}]));
    common::mount_at(&server, "/v1/embeddings", reply).await;
    let embedder = openai_at(&server, "sk");
    assert_eq!(
        embedder.embed(&texts(&["x"])).await.expect("retried"),
        vec![vec![1.0]]
    );
    assert_eq!(sent_bodies(&server).await.len(), 2);

    let refused = json_status(
        401,
        &json!({"error": {"message": "Incorrect API key provided"}}),
    );
    let server = answering_at("/v1/embeddings", refused).await;
    let error = openai_at(&server, "bad")
        .embed(&texts(&["x"]))
        .await
        .expect_err("bad key");
    assert_matches!(error, LlmError::Authentication { hint, .. } if hint == "OPENAI_API_KEY");
    assert_eq!(sent_bodies(&server).await.len(), 1);
}

#[tokio::test]
async fn malformed_replies_and_count_mismatches_are_errors() {
    let one_vector = json_status(200, &json!({"embeddings": [[0.1]]}));
    let server = answering_at("/api/embed", one_vector).await;
    let embedder = OllamaEmbedder::new("nomic-embed-text", &server.uri()).expect("builds");
    let error = embedder
        .embed(&texts(&["a", "b"]))
        .await
        .expect_err("one vector for two texts");
    assert_matches!(error, LlmError::MalformedResponse { message, .. } if message.contains("2 texts"));

    let not_numbers = openai_vectors(json!([{"index": 0, "embedding": ["x"]}]));
    let server = answering_at("/v1/embeddings", not_numbers).await;
    let embedder = OpenAiEmbedder::compatible("local", "m", &format!("{}/v1", server.uri()), None)
        .expect("builds");
    let error = embedder
        .embed(&texts(&["a"]))
        .await
        .expect_err("not numbers");
    assert_matches!(error, LlmError::MalformedResponse { .. });
}

#[tokio::test]
async fn empty_input_makes_no_request_and_slow_servers_time_out() {
    let server = common::answering(common::never_answering(&json!({"embeddings": []}))).await;
    let embedder = OllamaEmbedder::new("nomic-embed-text", &server.uri()).expect("builds");
    assert_eq!(
        embedder.embed(&[]).await.expect("nothing to do"),
        Vec::<Vec<f32>>::new()
    );
    assert!(sent_bodies(&server).await.is_empty());

    let embedder = embedder
        .with_timeout(Duration::from_millis(300))
        .expect("builds");
    // The timeout, not the server's 30 s delay, ends it.
    assert_times_out(Duration::from_millis(300), embedder.embed(&texts(&["a"]))).await;
}

#[tokio::test]
async fn the_hash_embedder_needs_no_network() {
    let config: EmbedderConfig =
        serde_json::from_value(json!({"provider": "hash", "config": {"dimensions": 48}}))
            .expect("parses");
    let embedder = built(&config, &RetryPolicy::none());
    let vectors = embedder
        .embed(&texts(&["agents and tasks", "agents and tasks"]))
        .await
        .expect("embeds");
    assert_eq!(vectors[0].len(), 48);
    assert_eq!(vectors[0], vectors[1]);
    assert_eq!(embedder.model(), "feature-hash");
}
