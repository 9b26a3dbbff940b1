//! Amazon Bedrock's Converse API (`POST /model/{modelId}/converse`), signed with AWS Signature
//! Version 4 or sent with a Bedrock API key. Built with the `bedrock` cargo feature.
//!
//! Tools become `toolSpec`s, tool calls `toolUse` blocks and results `toolResult` blocks (merged
//! into one user turn, as Converse wants roles to alternate); a response format becomes a forced
//! tool whose input is returned as the JSON content. Streaming uses the trait's default (one
//! complete call), since ConverseStream speaks AWS's binary event-stream framing.
//!
//! ```no_run
//! # async fn demo() -> Result<(), crewai_llm::LlmError> {
//! use crewai_llm::bedrock::{AwsCredentials, BedrockAuth, BedrockLlm};
//! use crewai_llm::{Llm, LlmConfig, LlmRequest, Message};
//! let credentials = AwsCredentials { access_key_id: "AKIA...".into(), secret_access_key: "...".into(), session_token: None };
//! let llm = BedrockLlm::new("anthropic.claude-3-5-haiku-20241022-v1:0", "us-east-1", BedrockAuth::SigV4(credentials), None, &LlmConfig::default())?;
//! let reply = llm.call(LlmRequest::new(vec![Message::user("Say hi")])).await?;
//! # let _ = reply; Ok(()) }
//! ```

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::adapter_support::{self, ToolNameMap, ToolNameRules};
use crate::config::LlmConfig;
use crate::context_window::context_window_size;
use crate::error::LlmError;
use crate::http::{ErrorContext, HttpClient, Transport, snippet};
use crate::traits::Llm;
use crate::types::{
    Capabilities, ContentPart, FinishReason, LlmRequest, LlmResponse, Message, Role, ToolCall,
    ToolChoice, Usage,
};

const PROVIDER: &str = "bedrock";
const SERVICE: &str = "bedrock";
/// What Converse accepts as a tool name.
const TOOL_NAMES: ToolNameRules = ToolNameRules {
    max_len: 64,
    allowed: |c| c.is_ascii_alphanumeric() || c == '_',
    allowed_first: |c| c.is_ascii_alphabetic(),
};

/// AWS access keys.
#[derive(Clone, PartialEq, Eq)]
pub struct AwsCredentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    /// Set for temporary credentials (STS, SSO).
    pub session_token: Option<String>,
}

impl std::fmt::Debug for AwsCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsCredentials")
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

/// How requests are authorised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BedrockAuth {
    /// Signature Version 4 with access keys.
    SigV4(AwsCredentials),
    /// A Bedrock API key (`AWS_BEARER_TOKEN_BEDROCK`), sent as a bearer token.
    ApiKey(String),
}

/// A model on Amazon Bedrock.
#[derive(Debug, Clone)]
pub struct BedrockLlm {
    http: HttpClient,
    model: String,
    region: String,
    base: String,
    auth: BedrockAuth,
    config: LlmConfig,
}

impl BedrockLlm {
    /// A client for `model` (a Bedrock model or inference-profile id) in `region`; `base_url`
    /// overrides `https://bedrock-runtime.{region}.amazonaws.com` (VPC endpoints, tests).
    pub fn new(
        model: &str,
        region: &str,
        auth: BedrockAuth,
        base_url: Option<&str>,
        config: &LlmConfig,
    ) -> Result<Self, LlmError> {
        if model.trim().is_empty() {
            return Err(LlmError::Config("bedrock: no model given (for example `bedrock/anthropic.claude-3-5-haiku-20241022-v1:0`)".into()));
        }
        let base = base_url
            .map(str::to_string)
            .unwrap_or_else(|| format!("https://bedrock-runtime.{region}.amazonaws.com"));
        let http = HttpClient::new(
            ErrorContext::new(
                PROVIDER,
                model,
                "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
            ),
            config,
        )?;
        Ok(BedrockLlm {
            http,
            model: model.to_string(),
            region: region.to_string(),
            base: base.trim_end_matches('/').to_string(),
            auth,
            config: config.clone(),
        })
    }

    /// Sends requests through `transport` (a cassette recorder or replayer).
    pub fn with_transport(mut self, transport: Arc<dyn Transport>) -> Self {
        self.http.set_transport(transport);
        self
    }

    /// The Converse URL (the model id percent-encoded, `:` included).
    pub fn url(&self) -> String {
        format!(
            "{}/model/{}/converse",
            self.base,
            encode_segment(&self.model)
        )
    }

    fn headers(&self, url: &str, body: &[u8]) -> Result<Vec<(String, String)>, LlmError> {
        let mut headers = adapter_support::request_headers(Vec::new(), &self.config);
        match &self.auth {
            BedrockAuth::ApiKey(key) => {
                headers.push(("authorization".into(), format!("Bearer {key}")))
            }
            BedrockAuth::SigV4(credentials) => {
                let parsed = url::Url::parse(url)
                    .map_err(|e| LlmError::Config(format!("bedrock: bad URL {url}: {e}")))?;
                let now = chrono::Utc::now();
                let signed = sign_v4(&SigningInput {
                    method: "POST",
                    url: &parsed,
                    headers: &[("content-type".to_string(), "application/json".to_string())],
                    body,
                    credentials,
                    region: &self.region,
                    service: SERVICE,
                    amz_date: &now.format("%Y%m%dT%H%M%SZ").to_string(),
                });
                headers.extend(signed);
            }
        }
        Ok(headers)
    }

    /// The Converse body for `request` and the tool-name mapping it used.
    pub fn request_body(&self, request: &LlmRequest) -> Value {
        self.prepare(request).0
    }

    fn prepare(&self, request: &LlmRequest) -> (Value, ToolNameMap, Option<String>) {
        let format_tool = request.response_format.as_ref().map(|f| f.name.clone());
        let extra: Vec<&str> = format_tool.iter().map(String::as_str).collect();
        let names = ToolNameMap::for_request(TOOL_NAMES, request, &extra);
        let mut body = Map::new();
        let system: Vec<Value> = request
            .messages
            .iter()
            .filter(|m| m.role == Role::System)
            .map(|m| json!({"text": m.text()}))
            .collect();
        body.insert(
            "messages".into(),
            Value::Array(converse_messages(&request.messages, &names)),
        );
        if !system.is_empty() {
            body.insert("system".into(), Value::Array(system));
        }
        let mut inference = Map::new();
        if let Some(n) = request
            .options
            .max_tokens
            .or(self.config.max_tokens)
            .or(self.config.max_completion_tokens)
        {
            inference.insert("maxTokens".into(), json!(n));
        }
        if let Some(t) = request.options.temperature.or(self.config.temperature) {
            inference.insert("temperature".into(), json!(t));
        }
        if let Some(p) = self.config.top_p {
            inference.insert("topP".into(), json!(p));
        }
        let mut stop: Vec<&String> = Vec::new();
        for word in self.config.stop.iter().chain(&request.options.stop) {
            if !word.is_empty() && !stop.contains(&word) {
                stop.push(word);
            }
        }
        if !stop.is_empty() {
            inference.insert("stopSequences".into(), json!(stop));
        }
        if !inference.is_empty() {
            body.insert("inferenceConfig".into(), Value::Object(inference));
        }
        let mut tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| json!({"toolSpec": {"name": names.provider_name(&t.name), "description": t.description, "inputSchema": {"json": t.parameters}}}))
            .collect();
        let structured = request.response_format.as_ref().map(|format| {
            let name = names.provider_name(&format.name);
            tools.push(json!({"toolSpec": {"name": name, "description": "Give the final answer in exactly this structure.", "inputSchema": {"json": format.schema}}}));
            name
        });
        if !tools.is_empty() {
            let choice = match (&structured, request.options.tool_choice.clone()) {
                (Some(name), _) if request.tools.is_empty() => json!({"tool": {"name": name}}),
                (_, Some(ToolChoice::Required)) => json!({"any": {}}),
                (_, Some(ToolChoice::Tool(name))) => {
                    json!({"tool": {"name": names.provider_name(&name)}})
                }
                _ => json!({"auto": {}}),
            };
            body.insert(
                "toolConfig".into(),
                json!({"tools": tools, "toolChoice": choice}),
            );
        }
        for (key, value) in &self.config.extra_body {
            body.insert(key.clone(), value.clone());
        }
        (Value::Object(body), names, structured)
    }
}

/// Percent-encodes one URL path segment the way AWS expects (RFC 3986 unreserved kept).
fn encode_segment(segment: &str) -> String {
    let mut out = String::new();
    for byte in segment.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Conversation messages as Converse turns: system messages left out (they go in `system`),
/// tool results as `toolResult` blocks, and consecutive turns of one role merged.
fn converse_messages(messages: &[Message], names: &ToolNameMap) -> Vec<Value> {
    let mut turns: Vec<(String, Vec<Value>)> = Vec::new();
    for message in messages {
        let (role, blocks) = match message.role {
            Role::System => continue,
            Role::Tool => (
                "user",
                vec![json!({"toolResult": {
                    "toolUseId": message.tool_call_id.clone().unwrap_or_default(),
                    "content": [{"text": message.text()}],
                    "status": "success",
                }})],
            ),
            Role::User => ("user", content_blocks(message)),
            Role::Assistant => {
                let mut blocks = content_blocks(message);
                blocks.extend(message.tool_calls.iter().map(|call| {
                    let input = match &call.arguments {
                        Value::Object(_) => call.arguments.clone(),
                        other => serde_json::from_str(&call.arguments_text()).unwrap_or_else(|_| json!({"input": other})),
                    };
                    json!({"toolUse": {"toolUseId": call.id, "name": names.provider_name(&call.name), "input": input}})
                }));
                ("assistant", blocks)
            }
        };
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last, existing)) if last == role => existing.extend(blocks),
            _ => turns.push((role.to_string(), blocks)),
        }
    }
    turns
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect()
}

fn content_blocks(message: &Message) -> Vec<Value> {
    message
        .content
        .iter()
        .filter_map(|part| match part {
            ContentPart::Text { text } if text.is_empty() => None,
            ContentPart::Text { text } => Some(json!({"text": text})),
            ContentPart::Image { url, .. } => Some(match crate::adapter_support::parse_data_url(url) {
                Some((media_type, data)) => {
                    let format = media_type.rsplit('/').next().unwrap_or("png").replace("jpg", "jpeg");
                    json!({"image": {"format": format, "source": {"bytes": data}}})
                }
                // Converse takes image bytes only; a remote image is named so the model knows of it.
                None => json!({"text": format!("[image: {url}]")}),
            }),
            ContentPart::File { data_base64, media_type, filename } => {
                let format = media_type.rsplit('/').next().unwrap_or("txt");
                let name: String = filename.clone().unwrap_or_else(|| "document".into()).chars().filter(|c| c.is_ascii_alphanumeric() || *c == ' ' || *c == '-').collect();
                Some(json!({"document": {"format": format, "name": if name.is_empty() { "document".to_string() } else { name }, "source": {"bytes": data_base64}}}))
            }
        })
        .collect()
}

/// Parses a Converse reply; `structured` is the response-format tool's provider name.
fn parse_converse(
    body: &Value,
    names: &ToolNameMap,
    structured: Option<&str>,
) -> Result<LlmResponse, LlmError> {
    let malformed = |message: String| LlmError::MalformedResponse {
        provider: PROVIDER.into(),
        message,
    };
    let content = body
        .pointer("/output/message/content")
        .and_then(Value::as_array)
        .ok_or_else(|| {
            malformed(format!(
                "no `output.message.content` in the reply: {}",
                snippet(&body.to_string())
            ))
        })?;
    let mut text = String::new();
    let mut saw_text = false;
    let mut tool_calls = Vec::new();
    for block in content {
        if let Some(t) = block.get("text").and_then(Value::as_str) {
            text.push_str(t);
            saw_text = true;
        } else if let Some(call) = block.get("toolUse") {
            let name = call
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| malformed("a toolUse block has no name".into()))?;
            let input = call.get("input").cloned().unwrap_or_else(|| json!({}));
            if Some(name) == structured {
                text = input.to_string();
                saw_text = true;
                continue;
            }
            let id = call
                .get("toolUseId")
                .and_then(Value::as_str)
                .unwrap_or_default();
            tool_calls.push(ToolCall {
                id: id.to_string(),
                name: names.original_name(name),
                arguments: input,
                signature: None,
            });
        }
    }
    let finish_reason = match body.get("stopReason").and_then(Value::as_str) {
        Some("tool_use") if !tool_calls.is_empty() => FinishReason::ToolCalls,
        Some("max_tokens") => FinishReason::Length,
        Some("stop_sequence") => FinishReason::StopSequence,
        Some("content_filtered" | "guardrail_intervened") => FinishReason::ContentFilter,
        Some("end_turn" | "tool_use") | None => FinishReason::Stop,
        Some(other) => FinishReason::Other(other.to_string()),
    };
    let number = |key: &str| {
        body.pointer(&format!("/usage/{key}"))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    let (prompt, completion) = (number("inputTokens"), number("outputTokens"));
    Ok(LlmResponse {
        content: saw_text.then_some(text),
        tool_calls,
        finish_reason,
        usage: Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: body
                .pointer("/usage/totalTokens")
                .and_then(Value::as_u64)
                .unwrap_or(prompt + completion),
            cached_prompt_tokens: number("cacheReadInputTokens"),
            reasoning_tokens: 0,
            cache_creation_tokens: number("cacheWriteInputTokens"),
            successful_requests: 1,
            ..Default::default()
        },
        response_id: None,
        model: None,
        thinking: Vec::new(),
    })
}

#[async_trait]
impl Llm for BedrockLlm {
    fn model(&self) -> &str {
        &self.model
    }
    fn provider(&self) -> &str {
        PROVIDER
    }
    fn capabilities(&self) -> Capabilities {
        let name = self.model.rsplit('.').next().unwrap_or(&self.model);
        Capabilities {
            function_calling: true,
            stop_words: true,
            multimodal: self.model.contains("claude-3") || self.model.contains("nova"),
            structured_output: true,
            context_window: self
                .config
                .context_window_size
                .unwrap_or_else(|| context_window_size(name)),
        }
    }

    async fn call(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        let (body, names, structured) = self.prepare(&request);
        let url = self.url();
        let bytes = serde_json::to_vec(&body)
            .map_err(|e| LlmError::Config(format!("bedrock request body: {e}")))?;
        let headers = self.headers(&url, &bytes)?;
        let response = self.http.send(&url, &headers, &body, false).await?;
        let request_id = response.header("x-amzn-requestid").map(str::to_string);
        let raw = response.body.into_bytes().await?;
        let json: Value =
            serde_json::from_slice(&raw).map_err(|e| LlmError::MalformedResponse {
                provider: PROVIDER.into(),
                message: format!(
                    "the reply is not JSON ({e}): {}",
                    snippet(&String::from_utf8_lossy(&raw))
                ),
            })?;
        let mut parsed = parse_converse(&json, &names, structured.as_deref())?;
        parsed.response_id = request_id;
        parsed.model = Some(self.model.clone());
        Ok(parsed)
    }
}

/// What [`sign_v4`] signs.
pub struct SigningInput<'a> {
    pub method: &'a str,
    pub url: &'a url::Url,
    /// Headers sent besides `host` and the `x-amz-*` ones the signer adds.
    pub headers: &'a [(String, String)],
    pub body: &'a [u8],
    pub credentials: &'a AwsCredentials,
    pub region: &'a str,
    pub service: &'a str,
    /// `YYYYMMDDTHHMMSSZ`
    pub amz_date: &'a str,
}

fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(block.map(|b| b ^ 0x36));
    inner.update(message);
    let mut outer = Sha256::new();
    outer.update(block.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

/// The SigV4 signing key for a date (`YYYYMMDD`), region and service.
pub fn signing_key(secret: &str, date: &str, region: &str, service: &str) -> [u8; 32] {
    let k_date = hmac_sha256(format!("AWS4{secret}").as_bytes(), date.as_bytes());
    let k_region = hmac_sha256(&k_date, region.as_bytes());
    let k_service = hmac_sha256(&k_region, service.as_bytes());
    hmac_sha256(&k_service, b"aws4_request")
}

/// The headers that authorise a request with AWS Signature Version 4: `x-amz-date`,
/// `x-amz-security-token` (temporary credentials) and `authorization`.
pub fn sign_v4(input: &SigningInput<'_>) -> Vec<(String, String)> {
    let host = match (input.url.host_str(), input.url.port()) {
        (Some(host), Some(port)) => format!("{host}:{port}"),
        (Some(host), None) => host.to_string(),
        (None, _) => String::new(),
    };
    let mut added = vec![("x-amz-date".to_string(), input.amz_date.to_string())];
    if let Some(token) = &input.credentials.session_token {
        added.push(("x-amz-security-token".to_string(), token.clone()));
    }
    let mut canonical: Vec<(String, String)> = input
        .headers
        .iter()
        .chain(&added)
        .map(|(k, v)| {
            (
                k.to_ascii_lowercase(),
                v.split_whitespace().collect::<Vec<_>>().join(" "),
            )
        })
        .chain(std::iter::once(("host".to_string(), host)))
        .collect();
    canonical.sort();
    let signed_headers = canonical
        .iter()
        .map(|(k, _)| k.as_str())
        .collect::<Vec<_>>()
        .join(";");
    let canonical_headers: String = canonical
        .iter()
        .map(|(k, v)| format!("{k}:{v}\n"))
        .collect();
    // Outside S3 each path segment is encoded again on top of the encoding it has in the URL.
    let canonical_uri = {
        let path = input.url.path();
        let encoded: Vec<String> = path.split('/').map(encode_segment).collect();
        if encoded.join("/").is_empty() {
            "/".to_string()
        } else {
            encoded.join("/")
        }
    };
    let mut query: Vec<(String, String)> = input
        .url
        .query_pairs()
        .map(|(k, v)| (encode_segment(&k), encode_segment(&v)))
        .collect();
    query.sort();
    let canonical_query = query
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&");
    let payload_hash = hex::encode(Sha256::digest(input.body));
    let canonical_request = format!(
        "{}\n{canonical_uri}\n{canonical_query}\n{canonical_headers}\n{signed_headers}\n{payload_hash}",
        input.method
    );
    let date = input.amz_date.get(..8).unwrap_or(input.amz_date);
    let scope = format!("{date}/{}/{}/aws4_request", input.region, input.service);
    let string_to_sign = format!(
        "AWS4-HMAC-SHA256\n{}\n{scope}\n{}",
        input.amz_date,
        hex::encode(Sha256::digest(canonical_request.as_bytes()))
    );
    let signature = hex::encode(hmac_sha256(
        &signing_key(
            &input.credentials.secret_access_key,
            date,
            input.region,
            input.service,
        ),
        string_to_sign.as_bytes(),
    ));
    added.push((
        "authorization".to_string(),
        format!("AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed_headers}, Signature={signature}", input.credentials.access_key_id),
    ));
    added
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example_credentials() -> AwsCredentials {
        AwsCredentials {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
            session_token: None,
        }
    }

    #[test]
    fn hmac_matches_rfc_4231() {
        // RFC 4231 test case 2.
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            hex::encode(mac),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn signing_key_matches_aws_documentation() {
        let key = signing_key(
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            "20120215",
            "us-east-1",
            "iam",
        );
        assert_eq!(
            hex::encode(key),
            "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d"
        );
    }

    #[test]
    fn signature_matches_the_aws_test_suite_get_vanilla() {
        let url =
            url::Url::parse("https://example.amazonaws.com/").unwrap_or_else(|e| panic!("{e}"));
        let headers = sign_v4(&SigningInput {
            method: "GET",
            url: &url,
            headers: &[],
            body: b"",
            credentials: &example_credentials(),
            region: "us-east-1",
            service: "service",
            amz_date: "20150830T123600Z",
        });
        let authorization = headers
            .iter()
            .find(|(k, _)| k == "authorization")
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        assert_eq!(
            authorization,
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
        );
    }

    #[test]
    fn model_ids_are_encoded_in_the_url() {
        let llm = BedrockLlm::new(
            "anthropic.claude-3-haiku-20240307-v1:0",
            "eu-west-1",
            BedrockAuth::ApiKey("k".into()),
            None,
            &LlmConfig::default(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            llm.url(),
            "https://bedrock-runtime.eu-west-1.amazonaws.com/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse"
        );
    }

    #[test]
    fn tool_turns_alternate_roles() {
        let call = ToolCall::from_raw_arguments("t1", "web search", r#"{"q":"x"}"#);
        let messages = vec![
            Message::system("sys"),
            Message::user("question"),
            Message::assistant_tool_calls(
                None,
                vec![
                    call.clone(),
                    ToolCall {
                        id: "t2".into(),
                        ..call
                    },
                ],
            ),
            Message::tool_result("t1", "web search", "r1"),
            Message::tool_result("t2", "web search", "r2"),
        ];
        let request = LlmRequest::new(messages);
        let names = ToolNameMap::for_request(TOOL_NAMES, &request, &[]);
        let turns = converse_messages(&request.messages, &names);
        assert_eq!(turns.len(), 3);
        assert_eq!(
            turns[1]["content"][0]["toolUse"]["name"],
            json!("web_search")
        );
        assert_eq!(turns[2]["role"], json!("user"));
        assert_eq!(turns[2]["content"].as_array().map(Vec::len), Some(2));
    }
}
