//! Amazon Bedrock's Converse API: `POST /model/{modelId}/converse` for a whole reply and
//! `/converse-stream` for a streamed one, signed with AWS Signature Version 4 or sent with a
//! Bedrock API key.
//!
//! - The region and credentials are found the way the AWS SDK finds them, by AWS's own crates
//!   ([`aws`]: the environment, the shared config and credentials files with
//!   `credential_process`, SSO and `role_arn`, web identity, the container endpoint, IMDSv2);
//!   temporary credentials are fetched again before they expire. Requests are signed by
//!   `aws-sigv4`.
//! - Tools become `toolSpec`s, tool calls `toolUse` blocks and results `toolResult` blocks (merged
//!   into one user turn, as Converse wants roles to alternate); a response format becomes a forced
//!   tool whose input is returned as the JSON content.
//! - Streaming reads ConverseStream's binary event-stream frames (decoded by the AWS SDK's frame
//!   decoder) into text deltas, tool-input deltas, the stop reason and the usage of the closing
//!   `metadata` event ([`reply`]).
//!
//! The wire types are [`crate::wire::bedrock`]. A `ValidationException` saying the model takes
//! no tools is [`LlmError::ToolsUnsupported`]; one saying the input is too long is
//! [`LlmError::ContextLengthExceeded`]; no credentials anywhere is [`LlmError::Credentials`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), crewai_llm::LlmError> {
//! use crewai_llm::bedrock::{AwsCredentials, BedrockAuth, BedrockLlm, BedrockRegion};
//! use crewai_llm::{Llm, LlmConfig, LlmRequest, Message};
//! let credentials = AwsCredentials::fixed("AKIA...", "...", None);
//! let region = BedrockRegion::Named("us-east-1".into());
//! let llm = BedrockLlm::new("anthropic.claude-3-5-haiku-20241022-v1:0", region, BedrockAuth::SigV4(credentials), None, &LlmConfig::default())?;
//! let reply = llm.call(LlmRequest::new(vec![Message::user("Say hi")])).await?;
//! # let _ = reply; Ok(()) }
//! ```

use std::borrow::Cow;
use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use bytes::Bytes;
use serde_json::{Map, Value};
use tokio::sync::OnceCell;

use crate::adapter_support::{self, ToolNameMap, ToolNameRules};
use crate::config::LlmConfig;
use crate::context_window::context_window_size;
use crate::error::LlmError;
use crate::http::{ErrorContext, HttpClient, HttpResponse, Transport};
use crate::traits::{Llm, LlmStream};
use crate::types::{
    Capabilities, ContentPart, LlmRequest, LlmResponse, Message, Role, ToolCall, ToolChoice,
};
use crate::wire::bedrock::{
    Block, Bytes as WireBytes, ConverseRequest, Document, Empty, Image, InferenceConfig,
    InputSchema, ResultText, SystemText, Tool, ToolChoice as WireChoice, ToolConfig, ToolName,
    ToolResult, ToolResultStatus, ToolSpec, ToolUse, Turn,
};
use crate::wire::{KeyOrder, WithExtra};

pub mod aws;
mod reply;

pub use aws::{AwsCredentials, AwsEnvironment, BedrockRegion, sign_request};
use reply::{ResponseReader, StreamDecoder, read_error};

const PROVIDER: &str = "bedrock";
/// What Converse accepts as a tool name.
const TOOL_NAMES: ToolNameRules = ToolNameRules {
    max_len: 64,
    allowed: |c| c.is_ascii_alphanumeric() || c == '_',
    allowed_first: |c| c.is_ascii_alphabetic(),
};
/// The media type of ConverseStream's reply.
const EVENT_STREAM: &str = "application/vnd.amazon.eventstream";

/// How requests are authorised.
#[derive(Debug, Clone)]
pub enum BedrockAuth {
    /// Signature Version 4 with AWS credentials.
    SigV4(AwsCredentials),
    /// A Bedrock API key (`AWS_BEARER_TOKEN_BEDROCK`), sent as a bearer token.
    ApiKey(String),
}

/// A model on Amazon Bedrock.
#[derive(Debug, Clone)]
pub struct BedrockLlm {
    http: HttpClient,
    model: String,
    region: BedrockRegion,
    /// The region's name, resolved at the first call (it may come from the shared config file).
    resolved_region: Arc<OnceCell<String>>,
    base_url: Option<String>,
    auth: BedrockAuth,
    config: LlmConfig,
}

impl BedrockLlm {
    /// A client for `model` (a Bedrock model or inference-profile id) in `region`; `base_url`
    /// overrides `https://bedrock-runtime.{region}.amazonaws.com` (VPC endpoints, tests).
    pub fn new(
        model: &str,
        region: BedrockRegion,
        auth: BedrockAuth,
        base_url: Option<&str>,
        config: &LlmConfig,
    ) -> Result<Self, LlmError> {
        if model.trim().is_empty() {
            return Err(LlmError::Config("bedrock: no model given (for example `bedrock/anthropic.claude-3-5-haiku-20241022-v1:0`)".into()));
        }
        let key_hint = match auth {
            BedrockAuth::ApiKey(_) => "AWS_BEARER_TOKEN_BEDROCK",
            BedrockAuth::SigV4(_) => {
                "the AWS credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE)"
            }
        };
        let http = HttpClient::new(ErrorContext::new(PROVIDER, model, key_hint), config)?
            .with_error_reader(read_error);
        Ok(BedrockLlm {
            http,
            model: model.to_string(),
            region,
            resolved_region: Arc::new(OnceCell::new()),
            base_url: base_url.map(|b| b.trim_end_matches('/').to_string()),
            auth,
            config: config.clone(),
        })
    }

    /// Sends requests through `transport` (a cassette recorder or replayer).
    pub fn with_transport(mut self, transport: Arc<dyn Transport>) -> Self {
        self.http.set_transport(transport);
        self
    }

    /// The region requests go to and are signed for.
    pub async fn region(&self) -> Result<&str, LlmError> {
        let region = self
            .resolved_region
            .get_or_try_init(|| self.region.resolve())
            .await?;
        Ok(region)
    }

    /// The Converse URL in `region` (the model id percent-encoded, `:` included); `/converse-stream`
    /// when `stream`.
    pub fn url(&self, region: &str, stream: bool) -> String {
        let base = self
            .base_url
            .clone()
            .unwrap_or_else(|| format!("https://bedrock-runtime.{region}.amazonaws.com"));
        let operation = if stream {
            "converse-stream"
        } else {
            "converse"
        };
        format!("{base}/model/{}/{operation}", encode_segment(&self.model))
    }

    /// Posts `request`'s body to Converse or ConverseStream, signed as it goes out.
    async fn send(
        &self,
        request: &LlmRequest,
        stream: bool,
    ) -> Result<(HttpResponse, ResponseReader), LlmError> {
        let reader = response_reader(request);
        // Signed as written: the bytes go out exactly as they were signed.
        let body =
            serde_json::to_vec(&self.body(request, &reader.names, reader.structured.as_deref()))
                .map_err(|e| {
                    LlmError::invalid_config("bedrock: the request body does not serialise", e)
                })?;
        let region = self.region().await?;
        let url = self.url(region, stream);
        let mut headers = adapter_support::request_headers(
            vec![("content-type".to_string(), "application/json".to_string())],
            &self.config,
        );
        if stream {
            headers.push(("accept".to_string(), EVENT_STREAM.to_string()));
        }
        match &self.auth {
            BedrockAuth::ApiKey(key) => {
                headers.push(("authorization".into(), format!("Bearer {key}")))
            }
            BedrockAuth::SigV4(credentials) => {
                let credentials = credentials.get(region).await?;
                let signature = sign_request(
                    &url,
                    &headers,
                    &body,
                    &credentials,
                    region,
                    SystemTime::now(),
                )?;
                headers.extend(signature);
            }
        }
        let response = self
            .http
            .send_bytes(&url, &headers, Bytes::from(body), stream)
            .await?;
        Ok((response, reader))
    }

    /// The Converse body for `request`.
    pub fn request_body(&self, request: &LlmRequest) -> Value {
        let reader = response_reader(request);
        crate::wire::to_json(&self.body(request, &reader.names, reader.structured.as_deref()))
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

/// The reader of the answer to `request`: its tool-name map and the response-format tool's
/// name as sent.
fn response_reader(request: &LlmRequest) -> ResponseReader {
    let format_tool = request.response_format.as_ref().map(|f| f.name.as_str());
    let extra: Vec<&str> = format_tool.into_iter().collect();
    let names = ToolNameMap::for_request(TOOL_NAMES, request, &extra);
    let structured = format_tool.map(|name| names.provider_name(name).to_string());
    ResponseReader { names, structured }
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
                    source: WireBytes { bytes: data },
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
                    source: WireBytes { bytes: data_base64 },
                }))
            }
        })
        .collect()
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
        let (response, reader) = self.send(&request, false).await?;
        let request_id = request_id(&response);
        let raw = response.body.into_bytes().await?;
        let mut parsed = reader.read_reply(&raw)?;
        parsed.response_id = request_id;
        parsed.model = Some(self.model.clone());
        Ok(parsed)
    }

    async fn stream(&self, request: LlmRequest) -> Result<LlmStream, LlmError> {
        let (response, reader) = self.send(&request, true).await?;
        let request_id = request_id(&response);
        let model = self.model.clone();
        let decoder = StreamDecoder::new(reader, self.http.context().clone());
        let events =
            adapter_support::decode_reply(reply::frames(response.body.into_stream()), decoder);
        // The response's id and model are the request's, known before the first frame.
        Ok(Box::pin(futures::StreamExt::map(events, move |event| {
            event.map(|event| match event {
                crate::types::StreamEvent::Done(mut response) => {
                    response.response_id.clone_from(&request_id);
                    response.model = Some(model.clone());
                    crate::types::StreamEvent::Done(response)
                }
                other => other,
            })
        })))
    }
}

/// The request id AWS gives every reply.
fn request_id(response: &HttpResponse) -> Option<String> {
    response.header("x-amzn-requestid").map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn model_ids_are_encoded_in_the_url() {
        let llm = BedrockLlm::new(
            "anthropic.claude-3-haiku-20240307-v1:0",
            BedrockRegion::Named("eu-west-1".into()),
            BedrockAuth::ApiKey("k".into()),
            None,
            &LlmConfig::default(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            llm.url("eu-west-1", false),
            "https://bedrock-runtime.eu-west-1.amazonaws.com/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse"
        );
        assert!(
            llm.url("eu-west-1", true)
                .ends_with("-v1%3A0/converse-stream")
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
