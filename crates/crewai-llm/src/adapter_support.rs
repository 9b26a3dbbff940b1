//! Pieces the provider adapters share: tool names rewritten to what a provider accepts (and
//! mapped back), `data:` URLs, API keys and base URLs from the environment, message text and tool
//! arguments borrowed for the wire types where they can be.

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::{Map, Value};

use std::collections::VecDeque;
use std::pin::Pin;

use futures::{Stream, StreamExt};

use crate::config::LlmConfig;
use crate::error::LlmError;
use crate::http::{SseEvent, SseStream};
use crate::traits::LlmStream;
use crate::types::{ContentPart, LlmRequest, Message, Role, StreamEvent, ToolCall};

/// What a provider accepts as a tool name.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ToolNameRules {
    pub max_len: usize,
    /// Characters allowed anywhere in the name.
    pub allowed: fn(char) -> bool,
    /// Characters allowed as the first one.
    pub allowed_first: fn(char) -> bool,
}

/// Tool names as the model sees them, and back to the names the caller used.
///
/// Valid names are kept unchanged; others get their invalid characters replaced with `_`,
/// are cut to the provider's length limit and get a numeric suffix when two originals collide.
#[derive(Debug, Clone, Default)]
pub(crate) struct ToolNameMap {
    to_provider: HashMap<String, String>,
    to_original: HashMap<String, String>,
}

impl ToolNameMap {
    /// A map for the names in `request` (offered tools first, then names used in the history),
    /// plus `extra` names (a synthetic structured-output tool).
    pub fn for_request(rules: ToolNameRules, request: &LlmRequest, extra: &[&str]) -> Self {
        let offered = request.tools.iter().map(|t| t.name.as_str());
        let history = request.messages.iter().flat_map(|m| {
            let calls = m.tool_calls.iter().map(|c| c.name.as_str());
            let answered = if m.role == Role::Tool {
                m.name.as_deref()
            } else {
                None
            };
            calls.chain(answered)
        });
        Self::new(rules, extra.iter().copied().chain(offered).chain(history))
    }

    pub fn new<'a>(rules: ToolNameRules, names: impl IntoIterator<Item = &'a str>) -> Self {
        let mut map = ToolNameMap::default();
        for original in names {
            if map.to_provider.contains_key(original) {
                continue;
            }
            let base = sanitize(rules, original);
            let mut candidate = base.clone();
            let mut suffix = 2;
            while map.to_original.contains_key(&candidate) {
                let tail = format!("_{suffix}");
                let keep = rules.max_len.saturating_sub(tail.len());
                candidate = format!("{}{tail}", base.chars().take(keep).collect::<String>());
                suffix += 1;
            }
            map.to_original
                .insert(candidate.clone(), original.to_string());
            map.to_provider.insert(original.to_string(), candidate);
        }
        map
    }

    /// The name to send for `original`.
    pub fn provider_name<'a>(&'a self, original: &'a str) -> &'a str {
        self.to_provider
            .get(original)
            .map_or(original, String::as_str)
    }

    /// The caller's name for a name the provider returned.
    pub fn original_name(&self, provider: &str) -> String {
        self.to_original
            .get(provider)
            .cloned()
            .unwrap_or_else(|| provider.to_string())
    }
}

fn sanitize(rules: ToolNameRules, name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| if (rules.allowed)(c) { c } else { '_' })
        .collect();
    if !out.chars().next().is_some_and(rules.allowed_first) {
        out.insert(0, '_');
    }
    out.chars().take(rules.max_len).collect()
}

/// Splits `data:<media type>;base64,<data>` into its media type and base64 data.
pub(crate) fn parse_data_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("data:")?;
    let (meta, data) = rest.split_once(',')?;
    let media_type = meta.strip_suffix(";base64")?;
    Some((media_type, data))
}

/// Guesses an image's media type from its URL's extension (providers that take URLs want one).
pub(crate) fn media_type_from_url(url: &str) -> Option<&'static str> {
    let path = url
        .split(['?', '#'])
        .next()
        .unwrap_or(url)
        .to_ascii_lowercase();
    let ext = path.rsplit('.').next()?;
    Some(match ext {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "pdf" => "application/pdf",
        _ => return None,
    })
}

/// The first non-empty environment variable of `names`.
pub(crate) fn env_value(names: &[&str]) -> Option<String> {
    names
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.trim().is_empty()))
}

/// The config's API key, else the first set variable of `env_vars`, else an error naming them.
pub(crate) fn api_key(
    config: &LlmConfig,
    provider: &str,
    env_vars: &[&str],
) -> Result<String, LlmError> {
    config
        .api_key
        .clone()
        .filter(|k| !k.trim().is_empty())
        .or_else(|| env_value(env_vars))
        .ok_or_else(|| LlmError::MissingApiKey {
            provider: provider.to_string(),
            env_var: env_vars.join(" or "),
        })
}

/// `base` without trailing slashes.
pub(crate) fn trim_base(base: &str) -> String {
    base.trim_end_matches('/').to_string()
}

/// The model name without any of the routing prefixes (`anthropic/claude-…` → `claude-…`).
pub(crate) fn strip_prefixes<'a>(model: &'a str, prefixes: &[&str]) -> &'a str {
    prefixes
        .iter()
        .find_map(|p| model.strip_prefix(p))
        .unwrap_or(model)
}

/// System messages' texts and the other messages.
pub(crate) fn split_system(messages: &[Message]) -> (Vec<Cow<'_, str>>, Vec<&Message>) {
    let mut system = Vec::new();
    let mut rest = Vec::new();
    for message in messages {
        if message.role == Role::System {
            let text = message_text(message);
            if !text.is_empty() {
                system.push(text);
            }
        } else {
            rest.push(message);
        }
    }
    (system, rest)
}

/// System texts joined by blank lines (borrowed when there is one).
pub(crate) fn join_system(mut system: Vec<Cow<'_, str>>) -> Cow<'_, str> {
    if system.len() == 1 {
        return system.remove(0);
    }
    Cow::Owned(system.join("\n\n"))
}

/// A tool call's arguments as the JSON object providers with typed arguments require (borrowed
/// when they already are one). Text that holds an object is parsed; anything else (broken JSON
/// the model sent) is kept visible to the model under `raw_arguments` rather than dropped.
pub(crate) fn arguments_object(arguments: &Value) -> Cow<'_, Value> {
    match arguments {
        Value::Object(_) => Cow::Borrowed(arguments),
        Value::Null => Cow::Owned(Value::Object(Map::new())),
        Value::String(raw) => Cow::Owned(match serde_json::from_str::<Value>(raw) {
            Ok(parsed @ Value::Object(_)) => parsed,
            _ => raw_arguments(raw.clone()),
        }),
        other => Cow::Owned(raw_arguments(other.to_string())),
    }
}

/// `{"raw_arguments": text}`: arguments that are no object, kept for the model to see.
fn raw_arguments(text: String) -> Value {
    let mut map = Map::new();
    map.insert("raw_arguments".into(), Value::String(text));
    Value::Object(map)
}

/// A tool call's arguments as JSON text, the way OpenAI-style APIs carry them (borrowed when the
/// model's text was kept verbatim).
pub(crate) fn arguments_text(call: &ToolCall) -> Cow<'_, str> {
    match &call.arguments {
        Value::String(raw) => Cow::Borrowed(raw),
        other => Cow::Owned(other.to_string()),
    }
}

/// All text parts of a message joined ([`Message::text`]), borrowed when there is one part.
pub(crate) fn message_text(message: &Message) -> Cow<'_, str> {
    let mut texts = message.content.iter().filter_map(|part| match part {
        ContentPart::Text { text } => Some(text.as_str()),
        _ => None,
    });
    match (texts.next(), texts.next()) {
        (None, _) => Cow::Borrowed(""),
        (Some(only), None) => Cow::Borrowed(only),
        (Some(_), Some(_)) => Cow::Owned(message.text()),
    }
}

/// The stop words of the config and the call, without duplicates, in order.
pub(crate) fn stop_words<'a>(config: &'a LlmConfig, request: &'a LlmRequest) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for word in config.stop.iter().chain(&request.options.stop) {
        if !word.is_empty() && !out.contains(&word.as_str()) {
            out.push(word);
        }
    }
    out
}

/// Whether an error message says the model takes no native tools. For the servers that say it
/// only in words (Ollama, vLLM, OpenRouter, Bedrock's older models, Gemma on the Gemini API); an
/// adapter consults it for its provider's invalid-request replies, beside the typed codes.
pub(crate) fn says_tools_unsupported(message: &str) -> bool {
    const PHRASES: &[&str] = &[
        "does not support tools",
        "tools are not supported",
        "tool use is not supported",
        "support tool use",
        "does not support function calling",
        "function calling is not supported",
        "function calling is not enabled",
        "tool_choice is not supported",
        "unsupported parameter: 'tools'",
        "tool choice requires --enable-auto-tool-choice",
    ];
    crate::error::mentions_any(message, PHRASES)
}

/// The headers of a provider request: the provider's own (authentication, version), then the
/// user's `extra_headers`.
pub(crate) fn request_headers(
    own: Vec<(String, String)>,
    config: &LlmConfig,
) -> Vec<(String, String)> {
    let mut headers = own;
    headers.extend(
        config
            .extra_headers
            .iter()
            .map(|(k, v)| (k.clone(), v.clone())),
    );
    headers
}

/// How one provider turns the server-sent events of a streamed reply into [`StreamEvent`]s.
pub(crate) trait SseReplyDecoder: Send + 'static {
    /// The stream events one SSE event's (non-blank) data stands for.
    fn on_data(&mut self, data: &str) -> Result<Vec<StreamEvent>, LlmError>;
    /// The server closed the stream: the last event to hand out, if any.
    fn on_close(&mut self) -> Option<Result<StreamEvent, LlmError>>;
    /// The reply is complete: nothing more is read from the server.
    fn is_complete(&self) -> bool;
}

/// How one provider turns the pieces of a streamed reply (server-sent events, AWS event-stream
/// frames) into [`StreamEvent`]s.
pub(crate) trait ReplyDecoder<Piece>: Send + 'static {
    /// The stream events one piece stands for.
    fn on_piece(&mut self, piece: Piece) -> Result<Vec<StreamEvent>, LlmError>;
    /// The server closed the stream: the last event to hand out, if any.
    fn on_close(&mut self) -> Option<Result<StreamEvent, LlmError>>;
    /// The reply is complete: nothing more is read from the server.
    fn is_complete(&self) -> bool;
}

/// An SSE decoder as a [`ReplyDecoder`]: events with blank data are skipped.
struct SseData<D>(D);

impl<D: SseReplyDecoder> ReplyDecoder<SseEvent> for SseData<D> {
    fn on_piece(&mut self, event: SseEvent) -> Result<Vec<StreamEvent>, LlmError> {
        if event.data.trim().is_empty() {
            return Ok(Vec::new());
        }
        self.0.on_data(&event.data)
    }
    fn on_close(&mut self) -> Option<Result<StreamEvent, LlmError>> {
        self.0.on_close()
    }
    fn is_complete(&self) -> bool {
        self.0.is_complete()
    }
}

/// A streamed reply: SSE events decoded by `decoder`; the first error ends it.
pub(crate) fn decode_sse_reply(events: SseStream, decoder: impl SseReplyDecoder) -> LlmStream {
    decode_reply(events, SseData(decoder))
}

/// The pieces of a reply as they arrive.
pub(crate) type PieceStream<P> = Pin<Box<dyn Stream<Item = Result<P, LlmError>> + Send>>;

/// A streamed reply: `pieces` decoded by `decoder`; the first error ends it.
pub(crate) fn decode_reply<P: Send + 'static>(
    pieces: PieceStream<P>,
    decoder: impl ReplyDecoder<P>,
) -> LlmStream {
    struct State<P, D> {
        pieces: PieceStream<P>,
        decoder: D,
        pending: VecDeque<StreamEvent>,
        ended: bool,
    }
    let state = State {
        pieces,
        decoder,
        pending: VecDeque::new(),
        ended: false,
    };
    Box::pin(futures::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(event) = state.pending.pop_front() {
                return Some((Ok(event), state));
            }
            if state.ended || state.decoder.is_complete() {
                return None;
            }
            let decoded = match state.pieces.next().await {
                None => {
                    state.ended = true;
                    let last = state.decoder.on_close()?;
                    return Some((last, state));
                }
                Some(item) => item.and_then(|piece| state.decoder.on_piece(piece)),
            };
            match decoded {
                Ok(events) => state.pending.extend(events),
                Err(error) => {
                    state.ended = true;
                    return Some((Err(error), state));
                }
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STRICT: ToolNameRules = ToolNameRules {
        max_len: 10,
        allowed: |c| c.is_ascii_alphanumeric() || c == '_' || c == '-',
        allowed_first: |c| c.is_ascii_alphabetic() || c == '_',
    };

    #[test]
    fn valid_names_are_kept_and_invalid_ones_mapped_back() {
        let map = ToolNameMap::new(STRICT, ["search", "Read File!", "9lives"]);
        assert_eq!(map.provider_name("search"), "search");
        assert_eq!(map.provider_name("Read File!"), "Read_File_");
        assert_eq!(map.provider_name("9lives"), "_9lives");
        assert_eq!(map.original_name("Read_File_"), "Read File!");
        assert_eq!(map.original_name("unknown"), "unknown");
    }

    #[test]
    fn colliding_and_long_names_stay_unique_and_within_the_limit() {
        let map = ToolNameMap::new(STRICT, ["a b", "a_b", "a-b c d e f g h"]);
        assert_eq!(map.provider_name("a b"), "a_b");
        assert_eq!(map.provider_name("a_b"), "a_b_2");
        let long = map.provider_name("a-b c d e f g h");
        assert!(long.len() <= 10, "{long}");
        assert_eq!(map.original_name(long), "a-b c d e f g h");
    }

    #[test]
    fn data_urls_split_into_media_type_and_data() {
        assert_eq!(
            parse_data_url("data:image/png;base64,AAAA"),
            Some(("image/png", "AAAA"))
        );
        assert_eq!(parse_data_url("https://x/y.png"), None);
        assert_eq!(
            media_type_from_url("https://x/y.JPG?size=2"),
            Some("image/jpeg")
        );
    }

    #[test]
    fn arguments_become_objects() {
        assert_eq!(
            *arguments_object(&serde_json::json!("{\"a\": 1}")),
            serde_json::json!({"a": 1})
        );
        assert_eq!(
            *arguments_object(&serde_json::json!("{oops")),
            serde_json::json!({"raw_arguments": "{oops"})
        );
        assert_eq!(*arguments_object(&Value::Null), serde_json::json!({}));
        let object = serde_json::json!({"q": 1});
        assert!(matches!(arguments_object(&object), Cow::Borrowed(_)));
    }

    #[test]
    fn single_texts_are_borrowed_and_tool_refusals_recognised() {
        let one = Message::user("hello");
        assert!(matches!(message_text(&one), Cow::Borrowed("hello")));
        let two = Message::user("a").with_part(ContentPart::Text { text: "b".into() });
        assert_eq!(message_text(&two), "ab");
        assert!(says_tools_unsupported(
            "registry.ollama.ai/library/gemma does not support tools"
        ));
        assert!(says_tools_unsupported(
            "This model doesn't support tool use."
        ));
        assert!(!says_tools_unsupported("Invalid value for 'temperature'."));
    }

    #[test]
    fn a_missing_key_names_the_variables_to_set() {
        let config = LlmConfig::new("m").with_api_key(" ");
        let error = api_key(
            &config,
            "gemini",
            &["CREWAI_TEST_NEVER_SET_A", "CREWAI_TEST_NEVER_SET_B"],
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "gemini needs an API key: set CREWAI_TEST_NEVER_SET_A or CREWAI_TEST_NEVER_SET_B"
        );
        assert_eq!(
            api_key(&config.with_api_key("k"), "gemini", &[]).unwrap(),
            "k"
        );
    }
}
