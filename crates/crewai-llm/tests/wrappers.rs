//! The layers of a model's stack (fallback chains, shared rate limits, retries) and the scripted
//! model, through real HTTP where a provider is involved.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{answering, build, call_error, hi, openai_at};
use crewai_llm::{
    FallbackLayer, LayeredLlm, Llm, LlmConfig, LlmError, LlmRequest, Message, RateLimitLayer,
    RateLimiter, RetryLayer, ScriptedLlm,
};
use serde_json::json;
use wiremock::matchers::{body_partial_json, method};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn answer(text: &str) -> ResponseTemplate {
    let body = json!({"id": "f", "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}]});
    ResponseTemplate::new(200).set_body_raw(body.to_string(), "application/json")
}

#[tokio::test]
async fn falls_back_to_the_next_model_after_retries() {
    let primary = answering(ResponseTemplate::new(503).set_body_raw(
        r#"{"error":{"message":"overloaded","type":"server_error"}}"#,
        "application/json",
    ))
    .await;
    let backup = MockServer::start().await;
    Mock::given(method("POST"))
        .and(body_partial_json(json!({"model": "gpt-4o-mini"})))
        .respond_with(answer("from the backup"))
        .expect(1)
        .mount(&backup)
        .await;

    let config =
        openai_at(&primary.uri(), "gpt-4o").with_fallback(openai_at(&backup.uri(), "gpt-4o-mini"));
    let response = build(&config, 1)
        .call(hi())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(response.content.as_deref(), Some("from the backup"));
    assert_eq!(
        primary.received_requests().await.unwrap_or_default().len(),
        2,
        "the primary is retried once before falling back"
    );
}

#[tokio::test]
async fn all_fallbacks_failing_reports_every_attempt() {
    let down =
        answering(ResponseTemplate::new(502).set_body_raw("bad gateway", "text/plain")).await;
    let config =
        openai_at(&down.uri(), "gpt-4o").with_fallback(openai_at(&down.uri(), "gpt-4o-mini"));
    match build(&config, 0).call(hi()).await {
        Err(LlmError::AllFallbacksFailed { last, attempts }) => {
            assert_eq!(attempts.len(), 2);
            assert!(
                attempts[0].starts_with("openai/gpt-4o:")
                    && attempts[1].starts_with("openai/gpt-4o-mini:"),
                "{attempts:?}"
            );
            assert!(matches!(*last, LlmError::Server { status: 502, .. }));
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn non_retryable_errors_do_not_fall_back() {
    let primary = answering(
        ResponseTemplate::new(401)
            .set_body_raw(r#"{"error":{"message":"bad key"}}"#, "application/json"),
    )
    .await;
    let backup = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(answer("unused"))
        .expect(0)
        .mount(&backup)
        .await;
    let config =
        openai_at(&primary.uri(), "gpt-4o").with_fallback(openai_at(&backup.uri(), "gpt-4o-mini"));
    let error = call_error(build(&config, 0).as_ref(), hi()).await;
    assert_matches!(error, LlmError::Authentication { .. });
}

#[tokio::test]
async fn fallbacks_parse_from_yaml() {
    let config: LlmConfig = yaml_serde::from_str("model: gpt-4o\nfallback_llms:\n  - anthropic/claude-3-5-haiku-latest\n  - model: gpt-4o-mini\n    temperature: 0\n")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.fallback_llms.len(), 2);
    assert_eq!(config.fallback_llms[1].temperature, Some(0.0));
}

#[tokio::test(start_paused = true)]
async fn agents_share_one_rate_limit() {
    let limiter = RateLimiter::per_minute(2);
    let limited = |model: ScriptedLlm| -> Arc<dyn Llm> {
        Arc::new(
            LayeredLlm::builder(Arc::new(model))
                .layer(RateLimitLayer::new(limiter.clone()))
                .build(),
        )
    };
    let first = limited(ScriptedLlm::new("a").then_text("1").then_text("3"));
    let second = limited(ScriptedLlm::new("b").then_text("2"));
    let request = || LlmRequest::new(vec![Message::user("go")]);
    let start = tokio::time::Instant::now();
    first
        .call(request())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    second
        .call(request())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        start.elapsed(),
        Duration::ZERO,
        "the first two calls fit the budget"
    );

    // The third call, by either agent, waits for the shared bucket to refill (the clock is paused,
    // so it advances exactly as far as the limiter sleeps).
    let third = tokio::spawn({
        let first = first.clone();
        async move { first.call(request()).await }
    });
    tokio::time::sleep(Duration::from_secs(29)).await;
    assert!(
        !third.is_finished(),
        "the third call must wait for the shared limit"
    );
    let reply = third
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(reply.content.as_deref(), Some("3"));
    assert_eq!(start.elapsed().as_secs(), 30);
}

#[tokio::test]
async fn max_rpm_in_config_holds_back_real_calls() {
    let server = answering(answer("ok")).await;
    let mut config = openai_at(&server.uri(), "gpt-4o-mini");
    config.max_rpm = Some(1);
    let llm = build(&config, 0);
    llm.call(hi()).await.unwrap_or_else(|e| panic!("{e}"));
    // The next slot is a minute away: the second call is still waiting, and nothing was sent.
    let waited = tokio::time::timeout(
        Duration::from_millis(200),
        llm.call(LlmRequest::new(vec![Message::user("again")])),
    )
    .await;
    assert!(
        waited.is_err(),
        "the second call should still be waiting for the limiter"
    );
    assert_eq!(
        server.received_requests().await.unwrap_or_default().len(),
        1
    );
}

#[tokio::test]
async fn scripted_llm_serves_in_order_and_records_requests() {
    let llm = ScriptedLlm::new("scripted")
        .then_tool_call("search", json!({"query": "rust"}))
        .then_error(LlmError::RateLimited {
            provider: "scripted".into(),
            retry_after: None,
            message: "slow".into(),
        })
        .then_text("Final Answer: done");
    let shared = llm.clone();
    let first = llm
        .call(LlmRequest::new(vec![Message::user("one")]))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(first.tool_calls[0].arguments, json!({"query": "rust"}));
    assert!(
        llm.call(LlmRequest::new(vec![Message::user("two")]))
            .await
            .is_err()
    );
    let third = llm
        .call(LlmRequest::new(vec![Message::user("three")]))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(third.content.as_deref(), Some("Final Answer: done"));
    let seen: Vec<String> = shared
        .requests()
        .iter()
        .map(|r| r.messages[0].text())
        .collect();
    assert_eq!(seen, ["one", "two", "three"]);
    assert_eq!(shared.remaining(), 0);
    let exhausted = crewai_llm::error_chain(&call_error(&llm, LlmRequest::default()).await);
    assert!(
        exhausted.contains("no response left for call 4"),
        "{exhausted}"
    );
}

#[tokio::test]
async fn scripted_llm_works_under_the_fallback_and_retry_layers() {
    let flaky = ScriptedLlm::new("flaky")
        .then_error(LlmError::connection("scripted", "reset"))
        .then_text("second try");
    let unused = ScriptedLlm::new("backup").then_text("never asked");
    let chain = LayeredLlm::builder(Arc::new(flaky.clone()))
        .layer(FallbackLayer::new(vec![Arc::new(unused.clone())]))
        .layer(RetryLayer::new(common::fast_retries(2)))
        .build();
    assert_eq!(chain.layer_names(), ["fallback", "retry"]);
    let reply = chain.call(hi()).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(reply.content.as_deref(), Some("second try"));
    assert_eq!(flaky.requests().len(), 2);
    assert!(
        unused.requests().is_empty(),
        "the retry below the fallback recovered"
    );
}
