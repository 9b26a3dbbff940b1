//! The fault server against a real HTTP client.

use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::{Value, json};

use super::*;
use crate::scripted::Reply;

fn client(timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .expect("a reqwest client")
}

fn chat_body(stream: bool, tools: bool) -> Value {
    let mut body = json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "count the words"}]});
    if stream {
        body["stream"] = json!(true);
        body["stream_options"] = json!({"include_usage": true});
    }
    if tools {
        body["tools"] = json!([{"type": "function", "function": {"name": "word_count", "description": "Counts words", "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}]);
    }
    body
}

async fn scripted(fault: Fault) -> FaultServer {
    FaultServer::builder()
        .script([fault])
        .responder(|_| Reply::text("The text has four words."))
        .start()
        .await
}

/// What a request that got an answer received.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    /// The body of a 200 answer.
    fn ok(self) -> String {
        assert_eq!(self.status, 200, "{}", self.body);
        self.body
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

async fn post(server: &FaultServer, body: &Value, timeout: Duration) -> reqwest::Result<Answer> {
    let response = client(timeout)
        .post(format!("{}/chat/completions", server.base_url()))
        .json(body)
        .send()
        .await?;
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or_default().to_string()))
        .collect();
    Ok(Answer {
        status,
        headers,
        body: response.text().await?,
    })
}

/// A chat request (streamed or not, offering a tool or not) that must be answered within 5 s.
async fn ask(server: &FaultServer, stream: bool, tools: bool) -> Answer {
    post(server, &chat_body(stream, tools), Duration::from_secs(5))
        .await
        .expect("an answer")
}

/// Asserts that a plain chat request times out after `timeout`.
async fn assert_times_out(server: &FaultServer, timeout: Duration) {
    let error = post(server, &chat_body(false, false), timeout)
        .await
        .err()
        .expect("no answer in time");
    assert!(error.is_timeout(), "{error}");
}

fn data_events(body: &str) -> Vec<String> {
    body.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn healthy_requests_get_the_responders_reply_and_are_logged() {
    let server = scripted(Fault::None).await;
    let answer = ask(&server, false, false).await;
    assert_eq!(answer.status, 200);
    let body = answer.json();
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "The text has four words."
    );
    assert_eq!(body["model"], "gpt-4o-mini");
    // The same connection serves the next request (after the script: the healthy mix).
    assert_eq!(ask(&server, true, false).await.status, 200);
    let served = server.served();
    assert_eq!(served.len(), 2);
    assert_eq!(served[0].fault, Fault::None);
    assert_eq!(served[1].request.body["stream"], true);
    assert_eq!(served[1].number, 2);
}

#[tokio::test]
async fn never_answer_holds_the_request_until_the_client_gives_up() {
    let server = scripted(Fault::NeverAnswer).await;
    assert_times_out(&server, Duration::from_millis(300)).await;
    assert_eq!(server.fault_counts()[&FaultKind::NeverAnswer], 1);
}

#[tokio::test]
async fn slow_answers_arrive_after_the_pause() {
    let server = scripted(Fault::Slow(Duration::from_millis(400))).await;
    assert_times_out(&server, Duration::from_millis(100)).await;
    server.push(Fault::Slow(Duration::from_millis(50)));
    let body = ask(&server, false, false).await.ok();
    assert!(body.contains("four words"), "{body}");
}

#[tokio::test]
async fn rate_limits_say_when_to_come_back() {
    let server = scripted(Fault::RateLimited {
        retry_after_seconds: 2,
    })
    .await;
    let answer = ask(&server, false, false).await;
    assert_eq!(answer.status, 429);
    assert!(
        answer
            .headers
            .contains(&("retry-after".to_string(), "2".to_string()))
    );
    assert_eq!(answer.json()["error"]["type"], "rate_limit_error");
}

#[tokio::test]
async fn server_errors_carry_their_status() {
    for status in [500, 502, 503] {
        let server = scripted(Fault::ServerError(status)).await;
        let answer = ask(&server, false, false).await;
        assert_eq!(answer.status, status);
        assert_eq!(answer.json()["error"]["type"], "server_error");
    }
}

#[tokio::test]
async fn a_reset_mid_body_fails_while_the_body_is_read() {
    let server = scripted(Fault::ResetMidBody).await;
    let response = client(Duration::from_secs(5))
        .post(format!("{}/chat/completions", server.base_url()))
        .json(&chat_body(false, false))
        .send()
        .await
        .expect("the headers arrive intact");
    assert_eq!(response.status().as_u16(), 200);
    let error = response.text().await.unwrap_err();
    assert!(error.is_body() || error.is_decode(), "{error:?}");
}

#[tokio::test]
async fn malformed_json_is_not_json() {
    let server = scripted(Fault::MalformedJson).await;
    let body = ask(&server, false, false).await.ok();
    assert!(serde_json::from_str::<Value>(&body).is_err(), "{body}");

    server.push(Fault::MalformedJson);
    let body = ask(&server, true, false).await.body;
    let events = data_events(&body);
    assert!(
        events
            .iter()
            .any(|e| e != "[DONE]" && serde_json::from_str::<Value>(e).is_err()),
        "{body}"
    );
}

#[tokio::test]
async fn truncated_streams_end_without_finish_or_done() {
    let server = scripted(Fault::TruncatedStream).await;
    let body = ask(&server, true, false).await.ok();
    let events = data_events(&body);
    assert!(!events.is_empty(), "some events arrive");
    assert!(!events.iter().any(|e| e == "[DONE]"), "{body}");
    assert!(!body.contains("\"finish_reason\":\"stop\""), "{body}");

    server.push(Fault::TruncatedStream);
    let body = ask(&server, false, false).await.body;
    assert!(body.starts_with('{') && serde_json::from_str::<Value>(&body).is_err());
}

#[tokio::test]
async fn no_choices_is_a_completion_without_choices() {
    let server = scripted(Fault::NoChoices).await;
    assert_eq!(
        ask(&server, false, false).await.json()["choices"],
        json!([])
    );
    server.push(Fault::NoChoices);
    let body = ask(&server, true, false).await.body;
    let events = data_events(&body);
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    assert!(!body.contains("delta"), "{body}");
}

#[tokio::test]
async fn tool_faults_call_what_cannot_run() {
    let server = scripted(Fault::UnknownTool).await;
    server.push(Fault::InvalidArguments);
    let unknown = ask(&server, false, true).await.json();
    let call = &unknown["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], UNKNOWN_TOOL_NAME);
    assert_eq!(unknown["choices"][0]["finish_reason"], "tool_calls");

    let invalid = ask(&server, true, true).await.body;
    assert!(invalid.contains("\"name\":\"word_count\""), "{invalid}");
    assert!(invalid.contains("unexpected_ar"), "{invalid}");
}

#[tokio::test]
async fn the_mix_is_seeded_and_spares_requests_without_tools_from_tool_faults() {
    let mix = FaultMix::realistic().scaled(2.0);
    let draws = |seed: u64, tools: bool| {
        let mut rng = StdRng::seed_from_u64(seed);
        (0..500)
            .map(|_| mix.draw(&mut rng, tools))
            .collect::<Vec<_>>()
    };
    assert_eq!(draws(3, true), draws(3, true));
    assert_ne!(draws(3, true), draws(4, true));
    let with_tools = draws(3, true);
    for kind in FaultKind::FAULTS {
        assert!(
            with_tools.iter().any(|f| f.kind() == kind),
            "{kind} is drawn"
        );
    }
    assert!(
        !draws(3, false).iter().any(|f| f.kind().needs_tools()),
        "no tool faults without tools"
    );
    let healthy = with_tools.iter().filter(|f| **f == Fault::None).count();
    assert!(healthy > 200, "most requests are fine: {healthy}");
}

#[test]
fn the_blocking_server_serves_from_its_own_thread() {
    let server = FaultServer::builder()
        .script([Fault::ServerError(502)])
        .start_blocking();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let answer = runtime.block_on(ask(&server, false, false));
    assert_eq!(answer.status, 502);
}
