//! Amazon Bedrock's Converse API (`POST /model/{modelId}/converse`), signed with AWS Signature
//! Version 4 or sent with a Bedrock API key. Built with the `bedrock` cargo feature.
//!
//! Tools become `toolSpec`s, tool calls `toolUse` blocks and results `toolResult` blocks (merged
//! into one user turn, as Converse wants roles to alternate); a response format becomes a forced
//! tool whose input is returned as the JSON content. Streaming uses the trait's default (one
//! complete call), since ConverseStream speaks AWS's binary event-stream framing.
//!
//! The wire types are [`crate::wire::bedrock`]. A `ValidationException` saying the model takes
//! no tools is [`LlmError::ToolsUnsupported`]; one saying the input is too long is
//! [`LlmError::ContextLengthExceeded`].
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

use std::borrow::Cow;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::adapter_support::{self, ToolNameMap, ToolNameRules};
use crate::config::LlmConfig;
use crate::context_window::context_window_size;
use crate::error::LlmError;
use crate::http::{ErrorContext, ErrorReply, HttpClient, Transport, snippet};
use crate::traits::Llm;
use crate::types::{
    Capabilities, ContentPart, LlmRequest, LlmResponse, Message, Role, ToolCall, ToolChoice, Usage,
};
use crate::wire::bedrock::{
    Block, Bytes, ConverseReply, ConverseRequest, Document, Empty, ErrorBody, Image,
    InferenceConfig, InputSchema, ResultText, SystemText, Tool, ToolChoice as WireChoice,
    ToolConfig, ToolName, ToolResult, ToolResultStatus, ToolSpec, ToolUse, Turn, error_type,
    finish_reason,
};
use crate::wire::{KeyOrder, Malformed, WithExtra};

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
        )?
        .with_error_reader(read_error);
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
                    .map_err(|e| LlmError::invalid_config(format!("bedrock: bad URL {url}"), e))?;
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

    /// The Converse body for `request`.
    pub fn request_body(&self, request: &LlmRequest) -> Value {
        let (names, structured) = tool_names(request);
        crate::wire::to_json(&self.body(request, &names, structured.as_deref()))
    }

    /// The typed body for `request`; `structured` is the response-format tool's name as sent.
    fn body<'a>(
        &'a self,
        request: &'a LlmRequest,
        names: &'a ToolNameMap,
        structured: Option<&'a str>,
    ) -> WithExtra<'a, ConverseRequest<'a>> {
        let system = request
            .messages
            .iter()
            .filter(|m| m.role == Role::System)
            .map(|m| SystemText {
                text: adapter_support::message_text(m),
            })
            .collect();
        let inference_config = InferenceConfig {
            max_tokens: request
                .options
                .max_tokens
                .or(self.config.max_tokens)
                .or(self.config.max_completion_tokens),
            temperature: request.options.temperature.or(self.config.temperature),
            top_p: self.config.top_p,
            stop_sequences: adapter_support::stop_words(&self.config, request),
        };
        let mut tools: Vec<Tool<'a>> = request
            .tools
            .iter()
            .map(|t| {
                Tool::ToolSpec(ToolSpec {
                    name: names.provider_name(&t.name),
                    description: &t.description,
                    input_schema: InputSchema {
                        json: &t.parameters,
                    },
                })
            })
            .collect();
        if let (Some(format), Some(name)) = (&request.response_format, structured) {
            tools.push(Tool::ToolSpec(ToolSpec {
                name,
                description: "Give the final answer in exactly this structure.",
                input_schema: InputSchema {
                    json: &format.schema,
                },
            }));
        }
        let tool_config = (!tools.is_empty()).then(|| {
            let tool_choice = match (structured, &request.options.tool_choice) {
                (Some(name), _) if request.tools.is_empty() => WireChoice::Tool(ToolName { name }),
                (_, Some(ToolChoice::Required)) => WireChoice::Any(Empty {}),
                (_, Some(ToolChoice::Tool(name))) => WireChoice::Tool(ToolName {
                    name: names.provider_name(name),
                }),
                _ => WireChoice::Auto(Empty {}),
            };
            ToolConfig { tools, tool_choice }
        });
        WithExtra {
            body: ConverseRequest {
                messages: converse_messages(&request.messages, names),
                system,
                inference_config,
                tool_config,
            },
            extra: &self.config.extra_body,
            order: KeyOrder::AsWritten,
        }
    }
}

/// The tool-name map of `request` and the response-format tool's name as sent.
fn tool_names(request: &LlmRequest) -> (ToolNameMap, Option<String>) {
    let format_tool = request.response_format.as_ref().map(|f| f.name.as_str());
    let extra: Vec<&str> = format_tool.into_iter().collect();
    let names = ToolNameMap::for_request(TOOL_NAMES, request, &extra);
    let structured = format_tool.map(|name| names.provider_name(name).to_string());
    (names, structured)
}

/// Reads a Bedrock error reply by its type (the `x-amzn-errortype` header): a validation error
/// that says the model takes no tools, or that the input is too long. The statuses say the
/// rest, left to [`crate::http::classify_status`].
fn read_error(context: &ErrorContext, reply: &ErrorReply<'_>) -> Option<LlmError> {
    if !(400..500).contains(&reply.status) || matches!(reply.status, 401 | 403 | 429) {
        return None;
    }
    let body: ErrorBody = serde_json::from_str(reply.body).unwrap_or_default();
    let kind = error_type(reply.headers, &body);
    if kind.as_deref().is_some_and(|k| k != "ValidationException") {
        return None;
    }
    let message = body.message?;
    let provider = context.provider.clone();
    if adapter_support::says_tools_unsupported(&message) {
        return Some(LlmError::ToolsUnsupported {
            provider,
            model: context.model.clone(),
            message,
        });
    }
    let overflow = crate::error::looks_like_context_overflow(&message);
    overflow.then_some(LlmError::ContextLengthExceeded { provider, message })
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
fn converse_messages<'a>(messages: &'a [Message], names: &'a ToolNameMap) -> Vec<Turn<'a>> {
    let mut turns: Vec<Turn<'a>> = Vec::new();
    for message in messages {
        let (role, blocks) = match message.role {
            Role::System => continue,
            Role::Tool => (
                "user",
                vec![Block::ToolResult(ToolResult {
                    tool_use_id: message.tool_call_id.as_deref().unwrap_or_default(),
                    content: vec![ResultText {
                        text: adapter_support::message_text(message),
                    }],
                    status: ToolResultStatus::Success,
                })],
            ),
            Role::User => ("user", content_blocks(message)),
            Role::Assistant => {
                let mut blocks = content_blocks(message);
                blocks.extend(message.tool_calls.iter().map(|call| {
                    Block::ToolUse(ToolUse {
                        tool_use_id: &call.id,
                        name: names.provider_name(&call.name),
                        input: tool_input(call),
                    })
                }));
                ("assistant", blocks)
            }
        };
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some(last) if last.role == role => last.content.extend(blocks),
            _ => turns.push(Turn {
                role,
                content: blocks,
            }),
        }
    }
    turns
}

/// A call's arguments as Converse's `input` (free-form JSON): the object itself, the JSON the
/// model's text holds, or the unparsable text kept under `input`.
fn tool_input(call: &ToolCall) -> Cow<'_, Value> {
    if call.arguments.is_object() {
        return Cow::Borrowed(&call.arguments);
    }
    Cow::Owned(
        serde_json::from_str(&adapter_support::arguments_text(call)).unwrap_or_else(|_| {
            let mut wrapped = Map::new();
            wrapped.insert("input".into(), call.arguments.clone());
            Value::Object(wrapped)
        }),
    )
}

fn content_blocks(message: &Message) -> Vec<Block<'_>> {
    message
        .content
        .iter()
        .filter_map(|part| match part {
            ContentPart::Text { text } if text.is_empty() => None,
            ContentPart::Text { text } => Some(Block::Text(Cow::Borrowed(text))),
            ContentPart::Image { url, .. } => Some(match adapter_support::parse_data_url(url) {
                Some((media_type, data)) => Block::Image(Image {
                    format: media_type
                        .rsplit('/')
                        .next()
                        .unwrap_or("png")
                        .replace("jpg", "jpeg"),
                    source: Bytes { bytes: data },
                }),
                // Converse takes image bytes only; a remote image is named so the model knows of it.
                None => Block::Text(Cow::Owned(format!("[image: {url}]"))),
            }),
            ContentPart::File {
                data_base64,
                media_type,
                filename,
            } => {
                let name: String = filename
                    .as_deref()
                    .unwrap_or("document")
                    .chars()
                    .filter(|c| c.is_ascii_alphanumeric() || *c == ' ' || *c == '-')
                    .collect();
                Some(Block::Document(Document {
                    format: media_type.rsplit('/').next().unwrap_or("txt"),
                    name: if name.is_empty() {
                        "document".to_string()
                    } else {
                        name
                    },
                    source: Bytes { bytes: data_base64 },
                }))
            }
        })
        .collect()
}

/// Reads a Converse reply; `structured` is the response-format tool's provider name.
fn parse_converse(
    reply: ConverseReply,
    names: &ToolNameMap,
    structured: Option<&str>,
) -> Result<LlmResponse, Malformed> {
    let stop_reason = reply.stop_reason.clone();
    let usage = reply.usage;
    let mut text = String::new();
    let mut saw_text = false;
    let mut tool_calls = Vec::new();
    for block in reply.into_blocks()? {
        if let Some(t) = block.text {
            text.push_str(&t);
            saw_text = true;
        } else if let Some(call) = block.tool_use {
            let name = call
                .name
                .ok_or_else(|| Malformed::new("a toolUse block has no name"))?;
            let input = call.input.unwrap_or_else(|| Value::Object(Map::new()));
            if Some(name.as_str()) == structured {
                text = input.to_string();
                saw_text = true;
                continue;
            }
            tool_calls.push(ToolCall {
                id: call.tool_use_id,
                name: names.original_name(&name),
                arguments: input,
                signature: None,
            });
        }
    }
    Ok(LlmResponse {
        content: saw_text.then_some(text),
        finish_reason: finish_reason(stop_reason.as_deref(), !tool_calls.is_empty()),
        tool_calls,
        usage: usage.map(Usage::from).unwrap_or(Usage {
            successful_requests: 1,
            ..Default::default()
        }),
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
        let (names, structured) = tool_names(&request);
        let url = self.url();
        // Signed as written: the bytes go out exactly as they were signed.
        let bytes = serde_json::to_vec(&self.body(&request, &names, structured.as_deref()))
            .map_err(|e| {
                LlmError::invalid_config("bedrock: the request body does not serialise", e)
            })?;
        let headers = self.headers(&url, &bytes)?;
        let response = self
            .http
            .send_bytes(&url, &headers, bytes.into(), false)
            .await?;
        let request_id = response.header("x-amzn-requestid").map(str::to_string);
        let raw = response.body.into_bytes().await?;
        let reply: ConverseReply = crate::wire::decode(PROVIDER, "the reply", &raw)?;
        let mut parsed = parse_converse(reply, &names, structured.as_deref()).map_err(|e| {
            Malformed(format!(
                "{}: {}",
                e.0,
                snippet(&String::from_utf8_lossy(&raw))
            ))
            .into_error(PROVIDER)
        })?;
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
    use serde_json::json;

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
        let turns = crate::wire::to_json(&converse_messages(&request.messages, &names));
        assert_eq!(turns.as_array().map(Vec::len), Some(3));
        assert_eq!(
            turns[1]["content"][0]["toolUse"]["name"],
            json!("web_search")
        );
        assert_eq!(turns[2]["role"], json!("user"));
        assert_eq!(turns[2]["content"].as_array().map(Vec::len), Some(2));
    }
}
