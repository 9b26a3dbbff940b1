//! Record a run against a local server to a cassette, then replay it offline. Replaying CrewAI's
//! own recordings is in `crewai_recordings.rs`.

mod common;

use std::sync::Arc;

use common::openai_at;
use crewai_llm::cassette::{
    Cassette, CassetteRecorder, CassetteReplayer, record_llm, replay_llm, replay_llm_from,
};
use crewai_llm::http::NetworkTransport;
use crewai_llm::router::BuildOptions;
use crewai_llm::{LlmConfig, LlmRequest, Message, build_llm_with, collect_stream};
use serde_json::json;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

#[tokio::test]
async fn record_then_replay_complete_and_streamed_calls() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("cassettes/run.yaml");
    let server = MockServer::start().await;
    let complete = json!({"id": "chatcmpl-1", "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "recorded answer"}}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}});
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200).set_body_raw(complete.to_string(), "application/json"),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    let sse = "data: {\"id\":\"chatcmpl-2\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"stre\"}}]}\n\n\
               data: {\"id\":\"chatcmpl-2\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"amed\"},\"finish_reason\":\"stop\"}]}\n\n\
               data: [DONE]\n\n";
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(sse, "text/event-stream"))
        .mount(&server)
        .await;

    let config = openai_at(&server.uri(), "gpt-4o-mini").with_api_key("sk-secret-key");
    {
        let live = record_llm(&config, &path).unwrap_or_else(|e| panic!("{e}"));
        let first = live
            .call(LlmRequest::new(vec![Message::user("one")]))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(first.content.as_deref(), Some("recorded answer"));
        let stream = live
            .stream(LlmRequest::new(vec![Message::user("two")]))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let second = collect_stream(stream, |_| {})
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(second.content.as_deref(), Some("streamed"));
    }
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        !text.contains("sk-secret-key"),
        "the API key must not be recorded"
    );
    let cassette = Cassette::load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cassette.interactions.len(), 2);
    assert_eq!(cassette.interactions[0].request.method, "POST");
    assert!(
        cassette.interactions[0]
            .request
            .uri
            .ends_with("/v1/chat/completions")
    );
    assert!(
        cassette.interactions[0]
            .request
            .body
            .as_deref()
            .unwrap_or_default()
            .contains("\"one\"")
    );
    assert_eq!(cassette.interactions[1].response.status.code, 200);
    assert!(
        cassette.interactions[1]
            .response
            .body
            .string
            .contains("[DONE]")
    );

    // Offline: the server is gone and no key is configured.
    drop(server);
    let offline_config = LlmConfig::new("gpt-4o-mini").with_base_url("http://127.0.0.1:9/v1");
    let replayer = CassetteReplayer::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
    let offline =
        replay_llm_from(&offline_config, replayer.clone()).unwrap_or_else(|e| panic!("{e}"));
    let first = offline
        .call(LlmRequest::new(vec![Message::user("one")]))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(first.content.as_deref(), Some("recorded answer"));
    assert_eq!(first.usage.total_tokens, 7);
    let stream = offline
        .stream(LlmRequest::new(vec![Message::user("two")]))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        collect_stream(stream, |_| {})
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .content
            .as_deref(),
        Some("streamed")
    );
    assert_eq!(replayer.remaining(), 0);
    let past_the_end = offline
        .call(LlmRequest::new(vec![Message::user("three")]))
        .await
        .err()
        .map(|e| crewai_llm::error_chain(&e))
        .unwrap_or_default();
    assert!(
        past_the_end.contains("has 2 interactions but request 3 was made"),
        "{past_the_end}"
    );
}

/// OpenAI's rate-limit reply (the wait is added by each test).
fn slow_down() -> ResponseTemplate {
    common::json_status(429, &json!({"error": {"message": "slow down"}}))
}

#[tokio::test]
async fn recorder_wraps_any_transport_and_records_errors() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("errors.yaml");
    let server = common::answering(slow_down().insert_header("retry-after", "3")).await;
    let network = NetworkTransport::new(
        std::time::Duration::from_secs(2),
        std::time::Duration::from_secs(5),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let recorder = CassetteRecorder::new(Arc::new(network), &path);
    let options = BuildOptions::new()
        .with_transport(recorder.clone())
        .with_retry_policy(common::fast_retries(0))
        .with_env_vars([("OPENAI_API_KEY", "k")]);
    let llm = build_llm_with(&openai_at(&server.uri(), "gpt-4o-mini"), &options)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        llm.call(LlmRequest::new(vec![Message::user("hi")]))
            .await
            .is_err()
    );
    assert_eq!(recorder.cassette().interactions.len(), 1);

    // Replayed with the recording's retry count, the error comes back with its Retry-After.
    let mut config = LlmConfig::new("gpt-4o-mini");
    config.max_retries = Some(0);
    let replayed = replay_llm(&config, &path).unwrap_or_else(|e| panic!("{e}"));
    let error = replayed
        .call(LlmRequest::new(vec![Message::user("hi")]))
        .await
        .err();
    assert_eq!(
        error.and_then(|e| e.retry_after()),
        Some(std::time::Duration::from_secs(3))
    );
}

#[tokio::test]
async fn a_recorded_retry_replays_without_waiting() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("retry.yaml");
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(slow_down().insert_header("retry-after-ms", "10"))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    let ok = json!({"id": "r", "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "after retry"}}]});
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(ok.to_string(), "application/json"))
        .mount(&server)
        .await;
    let live = record_llm(
        &openai_at(&server.uri(), "gpt-4o-mini").with_api_key("k"),
        &path,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        live.call(LlmRequest::new(vec![Message::user("hi")]))
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .content
            .as_deref(),
        Some("after retry")
    );
    assert_eq!(
        Cassette::load(&path)
            .unwrap_or_else(|e| panic!("{e}"))
            .interactions
            .len(),
        2
    );
    let offline =
        replay_llm(&LlmConfig::new("gpt-4o-mini"), &path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        offline
            .call(LlmRequest::new(vec![Message::user("hi")]))
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .content
            .as_deref(),
        Some("after retry")
    );
}

#[tokio::test]
async fn one_recorder_records_several_models_into_one_cassette() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("crew.yaml");
    let server = MockServer::start().await;
    let ok = json!({"id": "m", "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}]});
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(ok.to_string(), "application/json"))
        .mount(&server)
        .await;
    let network = NetworkTransport::new(
        std::time::Duration::from_secs(2),
        std::time::Duration::from_secs(5),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let options = BuildOptions::new()
        .with_env_vars([("OPENAI_API_KEY", "k")])
        .with_recorder(CassetteRecorder::new(Arc::new(network), &path));
    let researcher = build_llm_with(&openai_at(&server.uri(), "gpt-4o"), &options)
        .unwrap_or_else(|e| panic!("{e}"));
    let writer = build_llm_with(
        &openai_at(&server.uri(), "gpt-4o-mini").with_timeout(30.0),
        &options,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    researcher
        .call(LlmRequest::new(vec![Message::user("research")]))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    writer
        .call(LlmRequest::new(vec![Message::user("write")]))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let cassette = Cassette::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let models: Vec<String> = cassette
        .interactions
        .iter()
        .map(|i| {
            serde_json::from_str::<serde_json::Value>(i.request.body.as_deref().unwrap_or_default())
                .unwrap_or_default()["model"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(models, ["gpt-4o", "gpt-4o-mini"]);
}
