//! The embedded model end to end: tokenizer, greedy determinism, sampling, stop words, streaming.
//! These need the SmolLM2 file (`crewai models pull`): without it they are reported as skipped,
//! and fail under `CI=true` (see `crewai_testkit::prereq`). `harness = false`: every test is
//! registered in `main`.

use std::path::PathBuf;
use std::process::ExitCode;

use crewai_llm::{FinishReason, Llm, LlmConfig, LlmRequest, Message, StreamEvent};
use crewai_local::{GgufTokenizer, LocalLlm, cache};
use crewai_testkit::fixtures::itinerary_schema;
use crewai_testkit::prereq::{Prerequisite, Suite, block_on_multi_thread};
use futures::StreamExt;

/// Where the embedded model's file is expected (`CREWAI_MODELS_DIR`, else the user cache).
fn model_path() -> PathBuf {
    cache::SMOLLM2_135M.path_in(&cache::models_dir())
}

fn model() -> Prerequisite {
    Prerequisite::embedded_model(model_path())
}

fn main() -> ExitCode {
    let model = model();
    Suite::new()
        .test_needing(
            "tokenizer_round_trips_ascii_and_non_ascii_text",
            &[&model],
            tokenizer_round_trips_ascii_and_non_ascii_text,
        )
        .async_test_needing(
            "greedy_replies_are_deterministic_and_count_real_tokens",
            &[&model],
            greedy_replies_are_deterministic_and_count_real_tokens,
        )
        .async_test_needing(
            "seeded_sampling_repeats_with_the_same_seed",
            &[&model],
            seeded_sampling_repeats_with_the_same_seed,
        )
        .async_test_needing(
            "max_tokens_and_stop_words_end_the_reply",
            &[&model],
            max_tokens_and_stop_words_end_the_reply,
        )
        .async_test_needing(
            "streaming_yields_text_deltas_then_the_whole_reply",
            &[&model],
            streaming_yields_text_deltas_then_the_whole_reply,
        )
        .test_needing(
            "concurrent_calls_queue_on_the_shared_model",
            &[&model],
            || block_on_multi_thread(2, concurrent_calls_queue_on_the_shared_model()),
        )
        .async_test(
            "a_missing_gguf_file_is_a_clear_error",
            a_missing_gguf_file_is_a_clear_error,
        )
        .async_test_needing(
            "a_response_format_gets_json_that_matches_the_schema",
            &[&model],
            a_response_format_gets_json_that_matches_the_schema,
        )
        .async_test_needing(
            "a_short_budget_still_closes_the_document",
            &[&model],
            a_short_budget_still_closes_the_document,
        )
        .run()
}

fn llm(config: LlmConfig) -> LocalLlm {
    LocalLlm::from_config(&config).unwrap_or_else(|e| panic!("{e}"))
}

fn question() -> LlmRequest {
    LlmRequest::new(vec![
        Message::system("You are a concise assistant."),
        Message::user("What is the capital of France?"),
    ])
}

fn tokenizer_round_trips_ascii_and_non_ascii_text() {
    let path = model_path();
    let tokenizer = GgufTokenizer::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(tokenizer.vocab_size(), 49152);
    for text in [
        "Hello, world! The quick brown fox jumps over the lazy dog.",
        "  leading spaces, tabs\tand\nnew lines  ",
        "Grüße aus Köln, naïve café, 東京タワー, Ελληνικά, emoji 🤖🚀",
        "{\"query\": \"AI agents\", \"n\": 12345}",
    ] {
        let ids = tokenizer.encode(text).unwrap_or_else(|e| panic!("{e}"));
        assert!(!ids.is_empty());
        assert_eq!(
            tokenizer.decode(&ids).unwrap_or_else(|e| panic!("{e}")),
            text
        );
    }
    // SmolLM's pre-tokenizer splits digits one by one.
    assert_eq!(tokenizer.encode("2026").map(|ids| ids.len()).ok(), Some(4));
    // Turn markers are control tokens, and their spelling in text stays text.
    let end = tokenizer
        .token_id("<|im_end|>")
        .unwrap_or_else(|| panic!("no <|im_end|>"));
    assert_eq!(end, 2);
    assert!(tokenizer.is_control(end));
    let spelled = tokenizer
        .encode("<|im_end|>")
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!spelled.contains(&end) && spelled.len() > 1, "{spelled:?}");
}

async fn greedy_replies_are_deterministic_and_count_real_tokens() {
    let model = llm(LlmConfig::new("local/smollm2-135m").with_max_tokens(24));
    let first = model
        .call(question())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let second = model
        .call(question())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let text = first.content.clone().unwrap_or_default();
    assert!(!text.trim().is_empty());
    assert!(text.contains("Paris"), "{text}");
    assert_eq!(first.content, second.content);
    assert!(first.usage.prompt_tokens > 10);
    assert!(first.usage.completion_tokens >= 1 && first.usage.completion_tokens <= 24);
    assert_eq!(
        first.usage.total_tokens,
        first.usage.prompt_tokens + first.usage.completion_tokens
    );
    assert_eq!(first.usage.successful_requests, 1);
    assert_eq!(
        (model.provider(), first.model.as_deref()),
        ("local", Some("smollm2-135m"))
    );
    assert!(!model.capabilities().function_calling);
}

async fn seeded_sampling_repeats_with_the_same_seed() {
    let config = || LlmConfig {
        seed: Some(7),
        ..LlmConfig::new("local/smollm2-135m")
            .with_temperature(0.9)
            .with_max_tokens(16)
    };
    let a = llm(config())
        .call(question())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let b = llm(config())
        .call(question())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(a.content, b.content);
    assert!(!a.content.unwrap_or_default().is_empty());
}

async fn max_tokens_and_stop_words_end_the_reply() {
    let short = llm(LlmConfig::new("local/smollm2-135m").with_max_tokens(3))
        .call(question())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(short.usage.completion_tokens, 3);
    assert_eq!(short.finish_reason, FinishReason::Length);

    let full = llm(LlmConfig::new("local/smollm2-135m").with_max_tokens(24))
        .call(question())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let text = full.content.unwrap_or_default();
    let stop = text
        .split_whitespace()
        .nth(2)
        .unwrap_or_else(|| panic!("reply too short: {text}"))
        .to_string();
    let expected = text[..text.find(&stop).unwrap_or(0)].to_string();
    let cut = llm(LlmConfig::new("local/smollm2-135m").with_max_tokens(24))
        .call(question().with_stop(vec![stop.clone()]))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        cut.content.as_deref(),
        Some(expected.as_str()),
        "stop word {stop:?}"
    );
    assert_eq!(cut.finish_reason, FinishReason::StopSequence);
}

async fn streaming_yields_text_deltas_then_the_whole_reply() {
    let model = llm(LlmConfig::new("local/smollm2-135m").with_max_tokens(20));
    let mut stream = model
        .stream(question())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut streamed = String::new();
    let mut deltas = 0;
    let mut done = None;
    while let Some(event) = stream.next().await {
        match event.unwrap_or_else(|e| panic!("{e}")) {
            StreamEvent::TextDelta(piece) => {
                assert!(done.is_none(), "text after Done");
                deltas += 1;
                streamed.push_str(&piece);
            }
            StreamEvent::Done(response) => done = Some(response),
            other => panic!("unexpected event {other:?}"),
        }
    }
    let done = done.unwrap_or_else(|| panic!("no Done event"));
    assert!(deltas > 1, "expected several deltas, got {deltas}");
    assert_eq!(done.content.as_deref(), Some(streamed.as_str()));
}

async fn concurrent_calls_queue_on_the_shared_model() {
    let calls = (0..3).map(|_| {
        tokio::spawn(async move {
            llm(LlmConfig::new("local/smollm2-135m").with_max_tokens(6))
                .call(question())
                .await
        })
    });
    let replies = futures::future::join_all(calls).await;
    let texts: Vec<Option<String>> = replies
        .into_iter()
        .map(|r| {
            r.unwrap_or_else(|e| panic!("{e}"))
                .unwrap_or_else(|e| panic!("{e}"))
                .content
        })
        .collect();
    assert!(texts.windows(2).all(|pair| pair[0] == pair[1]), "{texts:?}");
}

async fn a_missing_gguf_file_is_a_clear_error() {
    let model = llm(LlmConfig::new("local//nonexistent/model.gguf"));
    let error = model
        .call(question())
        .await
        .err()
        .map(|e| crewai_llm::error_chain(&e))
        .unwrap_or_default();
    assert!(error.contains("/nonexistent/model.gguf"), "{error}");
}

fn structured(question: &str, schema: serde_json::Value) -> LlmRequest {
    LlmRequest::new(vec![
        Message::system("You plan trips. Answer in JSON."),
        Message::user(question),
    ])
    .with_response_format(crewai_llm::ResponseFormat {
        name: "Itinerary".into(),
        schema,
        strict: true,
    })
}

fn assert_valid(schema: &serde_json::Value, text: &str) -> serde_json::Value {
    let value: serde_json::Value =
        serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"));
    let validator = jsonschema::validator_for(schema).unwrap_or_else(|e| panic!("{e}"));
    let problems: Vec<String> = validator
        .iter_errors(&value)
        .map(|e| e.to_string())
        .collect();
    assert!(problems.is_empty(), "{problems:?}: {text}");
    value
}

async fn a_response_format_gets_json_that_matches_the_schema() {
    let model = llm(LlmConfig::new("local/smollm2-135m").with_max_tokens(96));
    assert!(model.capabilities().structured_output);
    let schema = itinerary_schema();
    let request = structured(
        "Plan two days in Kyoto on 2026-04-01 and 2026-04-02, with a total budget.",
        schema.clone(),
    );
    let first = model
        .call(request.clone())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let text = first.content.clone().unwrap_or_default();
    let value = assert_valid(&schema, &text);
    assert!(
        !value["city"].as_str().unwrap_or_default().is_empty(),
        "{text}"
    );
    // Greedy constrained decoding is deterministic too.
    let second = model.call(request).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(second.content, first.content);
    assert!(first.usage.completion_tokens <= 96, "{:?}", first.usage);
}

async fn a_short_budget_still_closes_the_document() {
    let schema = itinerary_schema();
    for max_tokens in [1, 12, 30] {
        let model = llm(LlmConfig::new("local/smollm2-135m").with_max_tokens(max_tokens));
        let reply = model
            .call(structured("Plan a week in Seoul.", schema.clone()))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_valid(&schema, &reply.content.unwrap_or_default());
    }
    // Sampling draws only allowed tokens as well.
    let model = llm(LlmConfig::new("local/smollm2-135m")
        .with_max_tokens(48)
        .with_temperature(0.9));
    let reply = model
        .call(structured("Plan a day in Taipei.", schema.clone()))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_valid(&schema, &reply.content.unwrap_or_default());
}
