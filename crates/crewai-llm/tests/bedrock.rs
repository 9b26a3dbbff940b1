//! Bedrock against a local server speaking its wire format (`tests/fixtures/bedrock_server.py`):
//! every request's SigV4 signature is recomputed there by botocore's signer, Converse replies
//! are JSON, ConverseStream replies are binary event-stream frames (read back by botocore's
//! parser before they go out), and the server also plays the container credentials endpoint
//! and IMDSv2. Credentials come from the environment, a profile file, a `credential_process`,
//! the container endpoint and the instance metadata service, as the AWS SDK finds them.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use crewai_llm::router::BuildOptions;
use crewai_llm::{
    FinishReason, Llm, LlmConfig, LlmError, LlmRequest, Message, ResponseFormat, StreamEvent,
    ToolDefinition, build_llm_with, collect_stream,
};
use crewai_testkit::prereq::{Prerequisite, Suite};
use crewai_testkit::process::{Announced, ListeningChild};
use serde_json::{Value, json};

const MODEL: &str = "anthropic.claude-3-haiku-20240307-v1:0";
const CONVERSE_PATH: &str = "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse";

fn botocore() -> Prerequisite {
    Prerequisite::program(
        "python3 with botocore (AWS's Python SDK core: the SigV4 signer and event-stream parser)",
        "python3",
        &["-c", "import botocore.auth, botocore.eventstream"],
        "python3 -m pip install botocore (.ci/run does)",
    )
}

/// The fixture server, with a scratch home folder for the AWS files of one test.
struct Fixture {
    server: ListeningChild,
    home: tempfile::TempDir,
    http: reqwest::Client,
}

impl Fixture {
    fn start() -> Fixture {
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bedrock_server.py");
        let mut command = Command::new("python3");
        command.arg(script);
        Fixture {
            server: ListeningChild::start(
                command,
                Announced::Stdout,
                Duration::from_secs(30),
                ListeningChild::port_line,
            ),
            home: tempfile::tempdir().unwrap_or_else(|e| panic!("{e}")),
            http: reqwest::Client::new(),
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.server.port)
    }

    /// Queues replies (and settings: `expires_in`, `container_token`).
    async fn script(&self, script: Value) {
        self.http
            .post(format!("{}/__script", self.url()))
            .json(&script)
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .unwrap_or_else(|e| panic!("scripting the fixture: {e}"));
    }

    /// What the server received and how many temporary keys it issued.
    async fn log(&self) -> Value {
        self.http
            .get(format!("{}/__log", self.url()))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .json()
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// The model requests received (STS's and SSO's left out), each checked: its signature must have
    /// verified.
    async fn model_requests(&self) -> Vec<Value> {
        let requests: Vec<Value> = self.log().await["requests"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|r| r["path"] != "sts" && r["path"] != "sso")
            .collect();
        for request in &requests {
            assert_eq!(
                request["signature_problem"],
                Value::Null,
                "botocore verified the request: {request:#}"
            );
        }
        requests
    }

    /// A file in the scratch home folder.
    fn write_home_file(&self, relative: &str, text: &str) {
        let path = self.home.path().join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("{e}"));
        }
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }

    /// The model at this server, built from `vars` plus the scratch home and no instance
    /// metadata (unless `vars` says otherwise).
    fn model(&self, vars: &[(&str, &str)]) -> Arc<dyn Llm> {
        let config = LlmConfig::new(format!("bedrock/{MODEL}"))
            .with_base_url(self.url())
            .with_max_tokens(256);
        build_llm_with(&config, &self.options(vars)).unwrap_or_else(|e| panic!("{e}"))
    }

    /// One call of the model built from `vars`, answered; the request the server verified.
    async fn answered_call(&self, vars: &[(&str, &str)]) -> Value {
        self.script(json!({"replies": [converse_reply("answered")]}))
            .await;
        let response = self
            .model(vars)
            .call(common::hi())
            .await
            .unwrap_or_else(|e| panic!("{}", crewai_llm::error_chain(&e)));
        assert_eq!(response.content.as_deref(), Some("answered"));
        let requests = self.model_requests().await;
        requests
            .last()
            .cloned()
            .unwrap_or_else(|| panic!("the server got no request"))
    }

    fn options(&self, vars: &[(&str, &str)]) -> BuildOptions {
        let home = path_text(self.home.path());
        let mut env: Vec<(String, String)> = vec![
            ("HOME".into(), home),
            ("AWS_EC2_METADATA_DISABLED".into(), "true".into()),
        ];
        for (name, value) in vars {
            env.retain(|(n, _)| n != name);
            env.push((name.to_string(), value.to_string()));
        }
        BuildOptions::new()
            .with_env_vars(env)
            .with_retry_policy(common::fast_retries(0))
    }
}

fn path_text(path: &Path) -> String {
    path.to_str()
        .unwrap_or_else(|| panic!("a UTF-8 temp path"))
        .to_string()
}

/// The keys the fixture knows as `AKIDEXAMPLE`, with their session token, in `us-west-2`.
const ENV_KEYS: &[(&str, &str)] = &[
    ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
    (
        "AWS_SECRET_ACCESS_KEY",
        "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
    ),
    ("AWS_SESSION_TOKEN", "session-token"),
    ("AWS_REGION", "us-west-2"),
];

fn converse_reply(text: &str) -> Value {
    json!({"body": {
        "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 3, "outputTokens": 2, "totalTokens": 5}
    }})
}

/// The access key a request was signed with, and its scope's region.
fn signed_by(request: &Value) -> (String, String) {
    let authorization = request["headers"]["authorization"]
        .as_str()
        .unwrap_or_default();
    let credential = authorization
        .split("Credential=")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .unwrap_or_default();
    let parts: Vec<&str> = credential.split('/').collect();
    match parts.as_slice() {
        [key, _date, region, ..] => (key.to_string(), region.to_string()),
        _ => panic!("no SigV4 credential in {authorization:?}"),
    }
}

fn search_tool() -> ToolDefinition {
    ToolDefinition {
        name: "web search".into(),
        description: "Searches".into(),
        parameters: json!({"type": "object", "properties": {"query": {"type": "string"}}}),
        strict: false,
    }
}

async fn signed_converse_call_with_tools() {
    let fixture = Fixture::start();
    fixture
        .script(json!({"replies": [{"request_id": "req-123", "body": {
            "output": {"message": {"role": "assistant", "content": [
                {"text": "Let me look."},
                {"toolUse": {"toolUseId": "tooluse_1", "name": "web_search", "input": {"query": "rust"}}}
            ]}},
            "stopReason": "tool_use",
            "usage": {"inputTokens": 30, "outputTokens": 12, "totalTokens": 42, "cacheReadInputTokens": 8}
        }}]}))
        .await;
    let llm = fixture.model(ENV_KEYS);
    let request = LlmRequest::new(vec![
        Message::system("Be brief."),
        Message::user("Find rust news"),
    ])
    .with_tools(vec![search_tool()])
    .with_stop(vec!["\nObservation:".into()]);
    let response = llm.call(request).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(response.content.as_deref(), Some("Let me look."));
    assert_eq!(
        response.tool_calls[0].name, "web search",
        "the original tool name comes back"
    );
    assert_eq!(response.tool_calls[0].arguments, json!({"query": "rust"}));
    assert_eq!(response.usage.cached_prompt_tokens, 8);
    assert_eq!(response.usage.total_tokens, 42);
    assert_eq!(response.response_id.as_deref(), Some("req-123"));

    let requests = fixture.model_requests().await;
    let sent = &requests[0];
    assert_eq!(sent["path"], CONVERSE_PATH);
    assert_eq!(signed_by(sent), ("AKIDEXAMPLE".into(), "us-west-2".into()));
    assert_eq!(sent["headers"]["x-amz-security-token"], "session-token");
    let body = &sent["body"];
    assert_eq!(body["system"], json!([{"text": "Be brief."}]));
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": [{"text": "Find rust news"}]}])
    );
    assert_eq!(
        body["inferenceConfig"],
        json!({"maxTokens": 256, "stopSequences": ["\nObservation:"]})
    );
    assert_eq!(
        body["toolConfig"]["tools"][0]["toolSpec"]["name"],
        "web_search"
    );
    assert_eq!(body["toolConfig"]["toolChoice"], json!({"auto": {}}));
}

async fn structured_output_uses_a_forced_tool_whole_and_streamed() {
    let fixture = Fixture::start();
    let stream = json!({"events": [
        {"event": "messageStart", "payload": {"role": "assistant"}},
        {"event": "contentBlockStart", "payload": {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "t", "name": "Score"}}}},
        {"event": "contentBlockDelta", "payload": {"contentBlockIndex": 0, "delta": {"toolUse": {"input": "{\"score\""}}}},
        {"event": "contentBlockDelta", "payload": {"contentBlockIndex": 0, "delta": {"toolUse": {"input": ": 4}"}}}},
        {"event": "contentBlockStop", "payload": {"contentBlockIndex": 0}},
        {"event": "messageStop", "payload": {"stopReason": "tool_use"}},
        {"event": "metadata", "payload": {"usage": {"inputTokens": 5, "outputTokens": 5, "totalTokens": 10}, "metrics": {"latencyMs": 12}}}
    ]});
    fixture
        .script(json!({"replies": [{"body": {
            "output": {"message": {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t", "name": "Score", "input": {"score": 4}}}]}},
            "stopReason": "tool_use", "usage": {"inputTokens": 5, "outputTokens": 5, "totalTokens": 10}
        }}, stream]}))
        .await;
    let llm = fixture.model(ENV_KEYS);
    let format = ResponseFormat {
        name: "Score".into(),
        schema: json!({"type": "object", "properties": {"score": {"type": "integer"}}}),
        strict: true,
    };
    let request = LlmRequest::new(vec![Message::user("Rate it")]).with_response_format(format);
    let whole = llm
        .call(request.clone())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(whole.content.as_deref(), Some(r#"{"score":4}"#));
    assert!(whole.tool_calls.is_empty());
    assert_eq!(whole.finish_reason, FinishReason::Stop);

    let mut text = String::new();
    let stream = llm.stream(request).await.unwrap_or_else(|e| panic!("{e}"));
    let streamed = collect_stream(stream, |event| {
        if let StreamEvent::TextDelta(piece) = event {
            text.push_str(piece);
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(text, r#"{"score": 4}"#, "the answer streams as text");
    assert_eq!(streamed.content.as_deref(), Some(r#"{"score":4}"#));
    assert_eq!(streamed.finish_reason, FinishReason::Stop);

    let requests = fixture.model_requests().await;
    assert_eq!(
        requests[0]["body"]["toolConfig"]["toolChoice"],
        json!({"tool": {"name": "Score"}})
    );
    assert!(
        requests[1]["path"]
            .as_str()
            .is_some_and(|p| p.ends_with("/converse-stream")),
        "{}",
        requests[1]["path"]
    );
}

async fn streams_text_tool_input_usage_and_the_stop_reason() {
    let fixture = Fixture::start();
    fixture
        .script(json!({"replies": [{"request_id": "req-stream", "events": [
            {"event": "messageStart", "payload": {"role": "assistant"}},
            {"event": "contentBlockDelta", "payload": {"contentBlockIndex": 0, "delta": {"text": "Searching "}}},
            {"event": "contentBlockDelta", "payload": {"contentBlockIndex": 0, "delta": {"text": "now."}}},
            {"event": "contentBlockStop", "payload": {"contentBlockIndex": 0}},
            {"event": "contentBlockStart", "payload": {"contentBlockIndex": 1, "start": {"toolUse": {"toolUseId": "tooluse_9", "name": "web_search"}}}},
            {"event": "contentBlockDelta", "payload": {"contentBlockIndex": 1, "delta": {"toolUse": {"input": "{\"query\": "}}}},
            {"event": "contentBlockDelta", "payload": {"contentBlockIndex": 1, "delta": {"toolUse": {"input": "\"rust\"}"}}}},
            {"event": "contentBlockStop", "payload": {"contentBlockIndex": 1}},
            {"event": "messageStop", "payload": {"stopReason": "tool_use"}},
            {"event": "metadata", "payload": {"usage": {"inputTokens": 40, "outputTokens": 9, "totalTokens": 49, "cacheReadInputTokens": 16}, "metrics": {"latencyMs": 80}}}
        ]}]}))
        .await;
    let llm = fixture.model(ENV_KEYS);
    let request =
        LlmRequest::new(vec![Message::user("Find rust news")]).with_tools(vec![search_tool()]);
    let stream = llm.stream(request).await.unwrap_or_else(|e| panic!("{e}"));
    let mut events = Vec::new();
    let response = collect_stream(stream, |event| events.push(event.clone()))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let deltas: Vec<&StreamEvent> = events
        .iter()
        .filter(|e| !matches!(e, StreamEvent::Done(_)))
        .collect();
    assert_eq!(
        deltas,
        [
            &StreamEvent::TextDelta("Searching ".into()),
            &StreamEvent::TextDelta("now.".into()),
            &StreamEvent::ToolCallDelta {
                index: 0,
                id: Some("tooluse_9".into()),
                name: Some("web search".into()),
                arguments_delta: String::new(),
            },
            &StreamEvent::ToolCallDelta {
                index: 0,
                id: None,
                name: None,
                arguments_delta: "{\"query\": ".into(),
            },
            &StreamEvent::ToolCallDelta {
                index: 0,
                id: None,
                name: None,
                arguments_delta: "\"rust\"}".into(),
            },
        ]
    );
    assert_eq!(response.content.as_deref(), Some("Searching now."));
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(response.tool_calls[0].id, "tooluse_9");
    assert_eq!(response.tool_calls[0].name, "web search");
    assert_eq!(response.tool_calls[0].arguments, json!({"query": "rust"}));
    assert_eq!(
        (
            response.usage.prompt_tokens,
            response.usage.completion_tokens,
            response.usage.cached_prompt_tokens
        ),
        (40, 9, 16)
    );
    assert_eq!(response.response_id.as_deref(), Some("req-stream"));
    assert_eq!(response.model.as_deref(), Some(MODEL));

    let requests = fixture.model_requests().await;
    assert_eq!(
        requests[0]["headers"]["accept"],
        "application/vnd.amazon.eventstream"
    );
}

async fn stream_exceptions_and_cut_streams_are_typed_errors() {
    let fixture = Fixture::start();
    let text = json!({"event": "contentBlockDelta", "payload": {"contentBlockIndex": 0, "delta": {"text": "Hel"}}});
    fixture
        .script(json!({"replies": [
            {"events": [text, {"exception": "throttlingException", "payload": {"message": "Too many tokens, please wait before trying again."}}]},
            {"events": [{"exception": "validationException", "payload": {"message": "Input is too long for requested model."}}]},
            {"events": [text, {"exception": "modelStreamErrorException", "payload": {"message": "The model stream failed."}}]},
            {"events": [text, {"event": "messageStop", "payload": {"stopReason": "end_turn"}}], "cut_inside_last_frame": true},
            {"events": [text]}
        ]}))
        .await;
    let llm = fixture.model(ENV_KEYS);
    let error = common::stream_error(llm.as_ref(), common::hi()).await;
    assert_matches!(error, LlmError::RateLimited { message, .. } if message.starts_with("Too many tokens"));
    let error = common::stream_error(llm.as_ref(), common::hi()).await;
    assert_matches!(error, LlmError::ContextLengthExceeded { .. });
    let error = common::stream_error(llm.as_ref(), common::hi()).await;
    assert_matches!(error, LlmError::Server { status: 424, message, .. } if message == "The model stream failed.");
    assert!(error.is_retryable());
    let error = common::stream_error(llm.as_ref(), common::hi()).await;
    assert_matches!(error, LlmError::MalformedResponse { message, .. } if message.contains("inside a frame"));
    let error = common::stream_error(llm.as_ref(), common::hi()).await;
    assert_matches!(error, LlmError::MalformedResponse { message, .. } if message.contains("before messageStop"));
}

async fn http_errors_are_typed() {
    let fixture = Fixture::start();
    fixture
        .script(json!({"replies": [
            {"status": 429, "error_type": "ThrottlingException", "body": {"message": "Too many requests, please wait before trying again."}},
            {"status": 400, "error_type": "ValidationException", "body": {"message": "This model doesn't support tool use."}}
        ]}))
        .await;
    let llm = fixture.model(ENV_KEYS);
    let error = common::call_error(llm.as_ref(), common::hi()).await;
    assert_matches!(error, LlmError::RateLimited { message, .. } if message.starts_with("Too many requests"));
    let tools = LlmRequest::new(vec![Message::user("hi")]).with_tools(vec![search_tool()]);
    let error = common::stream_error(llm.as_ref(), tools).await;
    assert_matches!(error, LlmError::ToolsUnsupported { .. });
}

async fn a_signature_with_the_wrong_secret_is_refused_by_the_server() {
    let fixture = Fixture::start();
    fixture
        .script(json!({"replies": [converse_reply("never sent")]}))
        .await;
    let llm = fixture.model(&[
        ("AWS_ACCESS_KEY_ID", "AKIDPROFILE"),
        ("AWS_SECRET_ACCESS_KEY", "not-the-profile-secret"),
    ]);
    let error = common::call_error(llm.as_ref(), common::hi()).await;
    assert_matches!(error, LlmError::PermissionDenied { message, .. } if message.contains("signature mismatch"));
    let log = fixture.log().await;
    assert!(
        log["requests"][0]["signature_problem"]
            .as_str()
            .is_some_and(|p| p.starts_with("signature mismatch")),
        "{log:#}"
    );
}

async fn a_bedrock_api_key_is_sent_as_a_bearer_token() {
    let fixture = Fixture::start();
    let request = fixture
        .answered_call(&[("AWS_BEARER_TOKEN_BEDROCK", "bedrock-api-key-0123456789")])
        .await;
    assert_eq!(
        request["headers"]["authorization"],
        "Bearer bedrock-api-key-0123456789"
    );
}

async fn credentials_and_region_come_from_the_selected_profile() {
    let fixture = Fixture::start();
    fixture.write_home_file(
        ".aws/credentials",
        "[default]\naws_access_key_id = AKIDWRONG\naws_secret_access_key = wrong\n\n\
         [dev]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = profile-secret\n",
    );
    fixture.write_home_file(
        ".aws/config",
        "[default]\nregion = us-east-2\n\n[profile dev]\nregion = eu-central-1\n",
    );
    let request = fixture.answered_call(&[("AWS_PROFILE", "dev")]).await;
    assert_eq!(
        signed_by(&request),
        ("AKIDPROFILE".into(), "eu-central-1".into())
    );
}

async fn a_credential_process_in_the_config_file_is_run() {
    let fixture = Fixture::start();
    let printed = json!({"Version": 1, "AccessKeyId": "AKIDPROCESS", "SecretAccessKey": "process-secret", "SessionToken": "process-token"});
    let script = fixture.home.path().join("credentials.py");
    std::fs::write(&script, format!("print('''{printed}''')\n")).unwrap_or_else(|e| panic!("{e}"));
    fixture.write_home_file(
        ".aws/config",
        &format!(
            "[profile tool]\nregion = ap-southeast-2\ncredential_process = python3 {}\n",
            path_text(&script)
        ),
    );
    let request = fixture.answered_call(&[("AWS_PROFILE", "tool")]).await;
    assert_eq!(
        signed_by(&request),
        ("AKIDPROCESS".into(), "ap-southeast-2".into())
    );
    assert_eq!(request["headers"]["x-amz-security-token"], "process-token");
}

async fn a_profile_with_role_arn_assumes_the_role_through_sts() {
    let fixture = Fixture::start();
    fixture.write_home_file(
        ".aws/credentials",
        "[base]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = profile-secret\n",
    );
    fixture.write_home_file(
        ".aws/config",
        "[profile deploy]\nrole_arn = arn:aws:iam::123456789012:role/crewai-test\n\
         source_profile = base\nregion = us-west-2\n",
    );
    let sts = fixture.url();
    let request = fixture
        .answered_call(&[
            ("AWS_PROFILE", "deploy"),
            ("AWS_ENDPOINT_URL_STS", sts.as_str()),
        ])
        .await;
    assert_eq!(signed_by(&request), ("ASIASTS1".into(), "us-west-2".into()));
    let log = fixture.log().await;
    let assumed = &log["requests"][0];
    assert_eq!(assumed["path"], "sts", "{log:#}");
    assert_eq!(assumed["signature_problem"], Value::Null, "{log:#}");
    assert_eq!(
        assumed["role_arn"],
        json!(["arn:aws:iam::123456789012:role/crewai-test"])
    );
}

async fn an_sso_session_profile_uses_the_cached_sso_token() {
    let fixture = Fixture::start();
    fixture.write_home_file(
        ".aws/config",
        "[profile sso]\nsso_session = corp\nsso_account_id = 123456789012\n\
         sso_role_name = Developer\nregion = eu-west-1\n\n\
         [sso-session corp]\nsso_start_url = https://corp.awsapps.com/start\nsso_region = us-east-1\n",
    );
    // `aws sso login` leaves the token in a file named by the SHA-1 of the session's name.
    let token = json!({
        "startUrl": "https://corp.awsapps.com/start", "region": "us-east-1",
        "accessToken": "sso-access-token", "expiresAt": "2099-01-01T00:00:00Z"
    });
    fixture.write_home_file(
        ".aws/sso/cache/ee0bfd2552fbd840c02cc48b6e823320543c450f.json",
        &token.to_string(),
    );
    let portal = fixture.url();
    let request = fixture
        .answered_call(&[
            ("AWS_PROFILE", "sso"),
            ("AWS_ENDPOINT_URL_SSO", portal.as_str()),
        ])
        .await;
    assert_eq!(signed_by(&request), ("ASIASSO1".into(), "eu-west-1".into()));
    let log = fixture.log().await;
    assert_eq!(log["requests"][0]["path"], "sso", "{log:#}");
    assert_eq!(
        log["requests"][0]["query"],
        json!({"role_name": ["Developer"], "account_id": ["123456789012"]})
    );
}

async fn container_credentials_are_kept_until_they_near_expiry() {
    let fixture = Fixture::start();
    let endpoint = format!("{}/container-credentials", fixture.url());
    let container = [
        ("AWS_CONTAINER_CREDENTIALS_FULL_URI", endpoint.as_str()),
        ("AWS_CONTAINER_AUTHORIZATION_TOKEN", "container-auth"),
        ("AWS_REGION", "us-west-2"),
    ];
    let replies: Vec<Value> = (0..4)
        .map(|i| converse_reply(&format!("reply {i}")))
        .collect();
    fixture
        .script(json!({"replies": replies, "container_token": "container-auth"}))
        .await;
    // Credentials good for an hour: fetched once for two calls; credentials that expire within
    // the refresh window: fetched again for every call.
    for (expires_in, issued_after) in [(3600, 1), (120, 3)] {
        fixture.script(json!({"expires_in": expires_in})).await;
        let llm = fixture.model(&container);
        for _ in 0..2 {
            llm.call(common::hi())
                .await
                .unwrap_or_else(|e| panic!("{e}"));
        }
        assert_eq!(
            fixture.log().await["issued"]["container"],
            issued_after,
            "keys living {expires_in} s"
        );
    }
    let keys: Vec<String> = fixture
        .model_requests()
        .await
        .iter()
        .map(|r| signed_by(r).0)
        .collect();
    assert_eq!(
        keys,
        [
            "ASIACONTAINER1",
            "ASIACONTAINER1",
            "ASIACONTAINER2",
            "ASIACONTAINER3"
        ]
    );
}

async fn instance_metadata_credentials_over_imdsv2() {
    let fixture = Fixture::start();
    let endpoint = fixture.url();
    let request = fixture
        .answered_call(&[
            ("AWS_EC2_METADATA_DISABLED", "false"),
            ("AWS_EC2_METADATA_SERVICE_ENDPOINT", endpoint.as_str()),
            ("AWS_REGION", "us-west-2"),
        ])
        .await;
    assert_eq!(
        signed_by(&request),
        ("ASIAIMDS1".into(), "us-west-2".into())
    );
}

async fn no_credentials_anywhere_is_a_typed_error_naming_what_to_set() {
    let fixture = Fixture::start();
    let llm = fixture.model(&[]);
    let error = common::call_error(llm.as_ref(), common::hi()).await;
    assert_matches!(error, LlmError::Credentials { provider, message, source: Some(_) }
        if provider == "bedrock" && message.contains("AWS_ACCESS_KEY_ID") && message.contains("AWS_PROFILE"));
    assert!(!error.is_retryable());
    assert!(
        fixture.model_requests().await.is_empty(),
        "nothing unsigned was sent"
    );
}

fn main() -> std::process::ExitCode {
    let botocore = botocore();
    let needs = [&botocore];
    Suite::new()
        .async_test_needing(
            "signed_converse_call_with_tools",
            &needs,
            signed_converse_call_with_tools,
        )
        .async_test_needing(
            "structured_output_uses_a_forced_tool_whole_and_streamed",
            &needs,
            structured_output_uses_a_forced_tool_whole_and_streamed,
        )
        .async_test_needing(
            "streams_text_tool_input_usage_and_the_stop_reason",
            &needs,
            streams_text_tool_input_usage_and_the_stop_reason,
        )
        .async_test_needing(
            "stream_exceptions_and_cut_streams_are_typed_errors",
            &needs,
            stream_exceptions_and_cut_streams_are_typed_errors,
        )
        .async_test_needing("http_errors_are_typed", &needs, http_errors_are_typed)
        .async_test_needing(
            "a_signature_with_the_wrong_secret_is_refused_by_the_server",
            &needs,
            a_signature_with_the_wrong_secret_is_refused_by_the_server,
        )
        .async_test_needing(
            "a_bedrock_api_key_is_sent_as_a_bearer_token",
            &needs,
            a_bedrock_api_key_is_sent_as_a_bearer_token,
        )
        .async_test_needing(
            "credentials_and_region_come_from_the_selected_profile",
            &needs,
            credentials_and_region_come_from_the_selected_profile,
        )
        .async_test_needing(
            "a_credential_process_in_the_config_file_is_run",
            &needs,
            a_credential_process_in_the_config_file_is_run,
        )
        .async_test_needing(
            "a_profile_with_role_arn_assumes_the_role_through_sts",
            &needs,
            a_profile_with_role_arn_assumes_the_role_through_sts,
        )
        .async_test_needing(
            "an_sso_session_profile_uses_the_cached_sso_token",
            &needs,
            an_sso_session_profile_uses_the_cached_sso_token,
        )
        .async_test_needing(
            "container_credentials_are_kept_until_they_near_expiry",
            &needs,
            container_credentials_are_kept_until_they_near_expiry,
        )
        .async_test_needing(
            "instance_metadata_credentials_over_imdsv2",
            &needs,
            instance_metadata_credentials_over_imdsv2,
        )
        .async_test_needing(
            "no_credentials_anywhere_is_a_typed_error_naming_what_to_set",
            &needs,
            no_credentials_anywhere_is_a_typed_error_naming_what_to_set,
        )
        .run()
}
