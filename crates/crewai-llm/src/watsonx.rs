//! IBM watsonx.ai's chat API: `POST {url}/ml/v1/text/chat?version={version}`, streaming over
//! server-sent events at `/ml/v1/text/chat_stream`; a model deployed to a space
//! (`watsonx/deployment/<id>`) at `/ml/v1/deployments/{id}/text/chat` (and `chat_stream`).
//!
//! - The body is OpenAI's messages and tools in watsonx's envelope ([`crate::wire::watsonx`]):
//!   `model_id` with a `project_id` or `space_id`, the tool choice split in
//!   `tool_choice_option` (a mode) and `tool_choice` (one function), stop words in `stop`. Tool
//!   schemas go without `strict` and without `additionalProperties: false`, which the service
//!   refuses (as LiteLLM sends them).
//! - Replies and stream chunks have OpenAI's shape and are read by the OpenAI client's parser;
//!   errors come as `{"errors": [{"code", "message"}]}` and are read by their codes.
//! - Authentication: an IBM Cloud API key exchanged at IAM
//!   (`urn:ibm:params:oauth:grant-type:apikey`) for a bearer token, cached until shortly before
//!   it expires; or a token given as it is; or a Cloud Pak for Data `ZenApiKey`. Configuration
//!   and variables are in [`crate::providers::watsonx`].

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use crate::access_token::{Credential, IssuedToken, TokenEndpoint, TokenExchange};
use crate::adapter_support::{self, ToolNameMap};
use crate::config::LlmConfig;
use crate::error::LlmError;
use crate::http::{ErrorContext, ErrorReply, HttpClient, Transport, classify_message};
use crate::litellm_models::LitellmModels;
use crate::openai::{
    Sampling, TOOL_NAMES, chat_message, completion_stream, parse_completion_bytes,
    restore_stream_names, restore_tool_names,
};
use crate::traits::{Llm, LlmStream};
use crate::types::{Capabilities, LlmRequest, LlmResponse, ToolChoice};
use crate::wire::openai::{
    ChatResponseFormat, ChatTool, FunctionDefinition, FunctionKind, FunctionName, NamedFunction,
    ToolMode,
};
use crate::wire::watsonx::{ChatRequest, ErrorBody};

/// The provider's name, also its model-string prefix.
pub const PROVIDER: &str = "watsonx";
/// The API version sent when the config names none (LiteLLM's default).
pub const DEFAULT_API_VERSION: &str = "2024-03-13";
/// IBM Cloud's IAM token endpoint.
pub const IAM_TOKEN_URL: &str = "https://iam.cloud.ibm.com/identity/token";
/// The chat API takes at most this many stop sequences; the client-side cut handles the rest.
const MAX_STOP_SEQUENCES: usize = 4;
/// The model-name prefix of a model deployed to a space.
const DEPLOYMENT_PREFIX: &str = "deployment/";

/// Where the calls of a foundation model run (a deployment's URL already says).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Scope {
    Project(String),
    Space(String),
}

/// What a client is built from; [`crate::providers::watsonx`] resolves it from the config and
/// the environment.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// The service's URL (`https://us-south.ml.cloud.ibm.com`).
    pub(crate) base_url: String,
    pub(crate) api_version: String,
    /// `None` only for a deployment.
    pub(crate) scope: Option<Scope>,
    pub(crate) credential: Credential,
    /// Where the credential comes from, named on authentication errors.
    pub(crate) key_hint: String,
}

/// A model on watsonx.ai's chat API.
#[derive(Debug, Clone)]
pub struct WatsonxLlm {
    model: String,
    /// `model_id`; `None` for a deployment.
    model_id: Option<String>,
    scope: Option<Scope>,
    chat_url: String,
    stream_url: String,
    credential: Credential,
    config: LlmConfig,
    http: HttpClient,
}

impl WatsonxLlm {
    pub(crate) fn new(
        model: &str,
        settings: Settings,
        config: &LlmConfig,
    ) -> Result<Self, LlmError> {
        let base = adapter_support::trim_base(&settings.base_url);
        let (path, model_id) = match model.strip_prefix(DEPLOYMENT_PREFIX) {
            Some(id) if !id.trim().is_empty() => {
                (format!("/ml/v1/deployments/{}/text", id.trim()), None)
            }
            Some(_) => {
                return Err(LlmError::Config(
                    "watsonx: `deployment/` names no deployment (watsonx/deployment/<id>)".into(),
                ));
            }
            None => ("/ml/v1/text".to_string(), Some(model.to_string())),
        };
        let version = &settings.api_version;
        let http = HttpClient::new(
            ErrorContext::new(PROVIDER, model, settings.key_hint),
            config,
        )?
        .with_error_reader(read_error);
        Ok(WatsonxLlm {
            chat_url: format!("{base}{path}/chat?version={version}"),
            stream_url: format!("{base}{path}/chat_stream?version={version}"),
            model: model.to_string(),
            model_id,
            scope: settings.scope,
            credential: settings.credential,
            config: config.clone(),
            http,
        })
    }

    /// Sends requests through `transport` (a cassette recorder or replayer).
    pub fn with_transport(mut self, transport: Arc<dyn Transport>) -> Self {
        self.http.set_transport(transport);
        self
    }

    /// The endpoint a complete call posts to.
    pub fn url(&self) -> &str {
        &self.chat_url
    }

    fn headers(&self, credential: (String, String)) -> Vec<(String, String)> {
        adapter_support::request_headers(vec![credential], &self.config)
    }

    /// The JSON body for `request`, as it is sent.
    pub fn request_body(&self, request: &LlmRequest) -> Value {
        let names = ToolNameMap::for_request(TOOL_NAMES, request, &[]);
        let schemas = tool_schemas(request);
        crate::wire::to_json(&self.body(request, &names, &schemas))
    }

    fn body<'a>(
        &'a self,
        request: &'a LlmRequest,
        names: &'a ToolNameMap,
        schemas: &'a [Value],
    ) -> crate::wire::WithExtra<'a, ChatRequest<'a>> {
        let sampling = Sampling::resolve(&self.model, &self.config, request);
        let (project_id, space_id) = match &self.scope {
            Some(Scope::Project(id)) => (Some(id.as_str()), None),
            Some(Scope::Space(id)) => (None, Some(id.as_str())),
            None => (None, None),
        };
        let tools = request
            .tools
            .iter()
            .zip(schemas)
            .map(|(tool, parameters)| ChatTool::Function {
                function: FunctionDefinition {
                    name: names.provider_name(&tool.name),
                    description: &tool.description,
                    strict: false,
                    parameters,
                },
            })
            .collect();
        let (tool_choice_option, tool_choice) = match request.options.tool_choice.as_ref() {
            _ if request.tools.is_empty() => (None, None),
            None | Some(ToolChoice::Auto) => (Some(ToolMode::Auto), None),
            Some(ToolChoice::None) => (Some(ToolMode::None), None),
            Some(ToolChoice::Required) => (Some(ToolMode::Required), None),
            Some(ToolChoice::Tool(name)) => (
                None,
                Some(NamedFunction {
                    kind: FunctionKind::Function,
                    function: FunctionName {
                        name: names.provider_name(name),
                    },
                }),
            ),
        };
        let mut stop = adapter_support::stop_words(&self.config, request);
        stop.truncate(MAX_STOP_SEQUENCES);
        crate::wire::WithExtra {
            body: ChatRequest {
                model_id: self.model_id.as_deref(),
                project_id,
                space_id,
                messages: request
                    .messages
                    .iter()
                    .map(|m| chat_message(m, names))
                    .collect(),
                tools,
                tool_choice_option,
                tool_choice,
                frequency_penalty: self.config.frequency_penalty,
                presence_penalty: self.config.presence_penalty,
                max_tokens: sampling.max_tokens,
                temperature: sampling.temperature,
                top_p: self.config.top_p,
                seed: self.config.seed,
                stop,
                response_format: ChatResponseFormat::resolve(
                    request.response_format.as_ref(),
                    self.config.response_format.as_ref(),
                ),
            },
            extra: &self.config.extra_body,
            order: crate::wire::KeyOrder::AsWritten,
        }
    }
}

/// The request's tool schemas without `additionalProperties: false` anywhere in them.
fn tool_schemas(request: &LlmRequest) -> Vec<Value> {
    fn open(schema: &mut Value) {
        match schema {
            Value::Object(map) => {
                if map.get("additionalProperties") == Some(&Value::Bool(false)) {
                    map.remove("additionalProperties");
                }
                map.values_mut().for_each(open);
            }
            Value::Array(items) => items.iter_mut().for_each(open),
            _ => {}
        }
    }
    request
        .tools
        .iter()
        .map(|tool| {
            let mut schema = tool.parameters.clone();
            open(&mut schema);
            schema
        })
        .collect()
}

#[async_trait]
impl Llm for WatsonxLlm {
    fn model(&self) -> &str {
        &self.model
    }

    fn provider(&self) -> &str {
        PROVIDER
    }

    async fn call(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        if self.config.stream {
            let stream = self.stream(request).await?;
            return crate::traits::collect_stream(stream, |_| {}).await;
        }
        let names = ToolNameMap::for_request(TOOL_NAMES, &request, &[]);
        let schemas = tool_schemas(&request);
        let body = &self.body(&request, &names, &schemas);
        let reply = self
            .credential
            .post_bytes(&self.http, &self.chat_url, |c| self.headers(c), body)
            .await?;
        let mut response = parse_completion_bytes(PROVIDER, &reply)?;
        restore_tool_names(&mut response, &names);
        Ok(response)
    }

    async fn stream(&self, request: LlmRequest) -> Result<LlmStream, LlmError> {
        let names = ToolNameMap::for_request(TOOL_NAMES, &request, &[]);
        let schemas = tool_schemas(&request);
        let body = &self.body(&request, &names, &schemas);
        let events = self
            .credential
            .post_sse(&self.http, &self.stream_url, |c| self.headers(c), body)
            .await?;
        Ok(restore_stream_names(
            completion_stream(self.http.context().clone(), events),
            names,
        ))
    }

    fn capabilities(&self) -> Capabilities {
        // LiteLLM lists watsonx's models under their prefixed names (`watsonx/ibm/granite-…`).
        let window = self.config.context_window_size.or_else(|| {
            LitellmModels::get()
                .context_window(&format!("{PROVIDER}/{}", self.model))
                .or_else(|| crate::context_window::known_context_window(&self.model))
        });
        // The chat API takes OpenAI's image parts for its vision models.
        let name = self.model.to_ascii_lowercase();
        let multimodal = ["vision", "pixtral", "llama-4"]
            .iter()
            .any(|family| name.contains(family));
        Capabilities {
            function_calling: true,
            stop_words: true,
            multimodal,
            structured_output: true,
            context_window: window.unwrap_or(crate::context_window::DEFAULT_CONTEXT_WINDOW),
        }
    }
}

/// Reads watsonx's `{"errors": [{"code", "message"}]}` into the typed error its status and code
/// make (an expired or wrong token is an authentication error, `model_not_supported` a missing
/// model, a prompt over the model's window a context overflow).
fn read_error(context: &ErrorContext, reply: &ErrorReply<'_>) -> Option<LlmError> {
    let body: ErrorBody = serde_json::from_str(reply.body).ok()?;
    let first = body.errors.into_iter().next()?;
    let code = first.code.unwrap_or_default();
    let message = first
        .message
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| code.clone());
    let status = match (reply.status, code.as_str()) {
        // A model the service does not have comes back as a 400 or a 404 by its code.
        (400, "model_not_supported" | "model_no_support_for_function") => 404,
        (status, _) => status,
    };
    Some(classify_message(
        context,
        status,
        reply.retry_after,
        message,
        &code,
    ))
}

/// IBM Cloud IAM's exchange of an API key for a bearer token.
pub(crate) struct IamApiKey {
    pub(crate) endpoint: TokenEndpoint,
    pub(crate) api_key: String,
}

impl std::fmt::Debug for IamApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IamApiKey")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl TokenExchange for IamApiKey {
    async fn exchange(&self) -> Result<IssuedToken, LlmError> {
        let form = [
            ("grant_type", "urn:ibm:params:oauth:grant-type:apikey"),
            ("apikey", self.api_key.as_str()),
        ];
        self.endpoint.request(&form, &[&self.api_key]).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Message, ToolDefinition};
    use serde_json::json;

    fn client(model: &str, scope: Option<Scope>) -> WatsonxLlm {
        let settings = Settings {
            base_url: "https://us-south.ml.cloud.ibm.com/".into(),
            api_version: DEFAULT_API_VERSION.into(),
            scope,
            credential: Credential::bearer("t"),
            key_hint: "WATSONX_APIKEY".into(),
        };
        WatsonxLlm::new(model, settings, &LlmConfig::default()).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn deployments_have_their_own_urls_and_no_model_id() {
        let foundation = client("ibm/granite-4-h-small", Some(Scope::Space("s".into())));
        assert_eq!(
            foundation.url(),
            "https://us-south.ml.cloud.ibm.com/ml/v1/text/chat?version=2024-03-13"
        );
        let body = foundation.request_body(&LlmRequest::new(vec![Message::user("hi")]));
        assert_eq!(body["model_id"], "ibm/granite-4-h-small");
        assert_eq!(body["space_id"], "s");
        let deployed = client("deployment/d-1", None);
        assert_eq!(
            deployed.stream_url,
            "https://us-south.ml.cloud.ibm.com/ml/v1/deployments/d-1/text/chat_stream?version=2024-03-13"
        );
        let body = deployed.request_body(&LlmRequest::new(vec![Message::user("hi")]));
        assert!(body.get("model_id").is_none() && body.get("project_id").is_none());
    }

    #[test]
    fn tool_schemas_lose_strict_and_closed_objects_and_choices_split() {
        let tool = ToolDefinition {
            name: "look up".into(),
            description: "d".into(),
            parameters: json!({"type": "object", "additionalProperties": false,
                "properties": {"q": {"type": "object", "additionalProperties": false}, "n": {"type": "integer"}}}),
            strict: true,
        };
        let mut request = LlmRequest::new(vec![Message::user("hi")]).with_tools(vec![tool]);
        let client = client("ibm/granite-4-h-small", Some(Scope::Project("p".into())));
        let body = client.request_body(&request);
        let function = &body["tools"][0]["function"];
        assert_eq!(function["name"], "look_up");
        assert!(function.get("strict").is_none());
        assert!(
            !function["parameters"]
                .to_string()
                .contains("additionalProperties")
        );
        assert_eq!(body["tool_choice_option"], "auto");
        request.options.tool_choice = Some(ToolChoice::Tool("look up".into()));
        let body = client.request_body(&request);
        assert_eq!(body["tool_choice"]["function"]["name"], "look_up");
        assert!(body.get("tool_choice_option").is_none());
    }
}
