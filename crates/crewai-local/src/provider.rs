//! The `local` provider: an [`Llm`] over a model that runs inside this process.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, LazyLock, Mutex};

use crewai_llm::{
    Capabilities, FinishReason, Llm, LlmConfig, LlmError, LlmRequest, LlmResponse, LlmStream,
    ReplyShape, StreamEvent, Usage, async_trait, collect_stream,
};
use tokio::sync::OnceCell;

use crate::cache::{self, ModelSource, PullProgress};
use crate::error::LocalError;
use crate::model::{Finish, GenerationParams, LoadedModel, WeightFormat};
use crate::react_grammar::ReactForm;

/// A model loaded once per process and shared by every client of it; calls take turns.
type SharedModel = Arc<tokio::sync::Mutex<LoadedModel>>;

/// The load slot of one (file, weight format): the first caller loads, the others wait for it.
type LoadSlot = Arc<OnceCell<SharedModel>>;

/// One load slot per (file, weight format).
static LOADED: LazyLock<Mutex<HashMap<(PathBuf, WeightFormat), LoadSlot>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// How the ReAct loop appends a tool's result to the assistant turn that asked for it.
const OBSERVATION_MARK: &str = "\nObservation:";

/// The context window reported before the model is loaded (candle's llama limit).
const CONTEXT_BEFORE_LOAD: u64 = candle_transformers::models::quantized_llama::MAX_SEQ_LEN as u64;

/// A chat model running in this process (CPU, candle).
///
/// Built from a `local/...` model string: `local/smollm2-135m` (fetched into the models folder on
/// first use) or `local/<path to a llama-family .gguf>`. Greedy decoding unless a temperature is
/// set, then seeded sampling (`seed`, default 42), so the same request gives the same reply.
///
/// ```no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), crewai_llm::LlmError> {
/// use crewai_llm::{Llm, LlmConfig, LlmRequest, Message};
/// let llm = crewai_local::LocalLlm::from_config(&LlmConfig::new("local/smollm2-135m").with_max_tokens(32))?;
/// let reply = llm.call(LlmRequest::new(vec![Message::user("What is the capital of France?")])).await?;
/// println!("{} ({} tokens)", reply.content.unwrap_or_default(), reply.usage.total_tokens);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct LocalLlm {
    name: String,
    source: ModelSource,
    format: WeightFormat,
    defaults: GenerationParams,
}

impl LocalLlm {
    /// A client for the model a config names (`local/<name or path>`, or `provider: local`).
    /// Nothing is read from disk until the first call.
    pub fn from_config(config: &LlmConfig) -> Result<Self, LlmError> {
        let model = config.model.trim();
        let spec =
            model
                .strip_prefix("local/")
                .unwrap_or(if model == "local" { "" } else { model });
        let source = cache::resolve(spec, &cache::models_dir())?;
        let defaults = GenerationParams {
            max_tokens: config
                .max_tokens
                .or(config.max_completion_tokens)
                .map(|n| n as usize)
                .unwrap_or(GenerationParams::default().max_tokens),
            temperature: config.temperature,
            top_p: config.top_p,
            seed: config
                .seed
                .map(|s| s as u64)
                .unwrap_or(GenerationParams::default().seed),
            stop: config.stop.clone(),
            ..GenerationParams::default()
        };
        Ok(LocalLlm {
            name: source.name(),
            source,
            format: WeightFormat::from_env(),
            defaults,
        })
    }

    /// Holds the weights as `format` (see [`WeightFormat`]).
    pub fn with_weight_format(mut self, format: WeightFormat) -> Self {
        self.format = format;
        self
    }

    /// The file the model is read from.
    pub fn path(&self) -> &std::path::Path {
        self.source.path()
    }

    /// Loads the model now (pulling a known model first if needed) instead of on the first call.
    pub async fn preload(&self) -> Result<(), LlmError> {
        self.shared_model().await.map(|_| ())
    }

    async fn shared_model(&self) -> Result<SharedModel, LlmError> {
        let key = (self.source.path().to_path_buf(), self.format);
        let slot = {
            let mut loaded = LOADED.lock().map_err(|_| {
                LlmError::Config("the local model cache was poisoned by a panic".into())
            })?;
            loaded.entry(key).or_default().clone()
        };
        let source = self.source.clone();
        let format = self.format;
        let model = slot
            .get_or_try_init(|| async move {
                let loaded = tokio::task::spawn_blocking(move || load(&source, format))
                    .await
                    .map_err(|e| LocalError::inference_from("the model loader stopped", e))??;
                Ok::<_, LocalError>(Arc::new(tokio::sync::Mutex::new(loaded)))
            })
            .await?;
        Ok(model.clone())
    }

    fn params_for(&self, request: &LlmRequest) -> GenerationParams {
        let mut params = self.defaults.clone();
        if let Some(max_tokens) = request.options.max_tokens {
            params.max_tokens = max_tokens as usize;
        }
        if let Some(temperature) = request.options.temperature {
            params.temperature = Some(temperature);
        }
        params.stop.extend(request.options.stop.iter().cloned());
        params
    }
}

/// Reads the file of `source`, pulling a known model that is not downloaded yet.
fn load(source: &ModelSource, format: WeightFormat) -> Result<LoadedModel, LocalError> {
    if let ModelSource::Known { model, path } = source
        && !path.is_file()
    {
        let dir = path
            .parent()
            .map(PathBuf::from)
            .unwrap_or_else(cache::models_dir);
        cache::pull(model, &dir, &mut |step: PullProgress| {
            tracing::info!(model = model.name, "{step}")
        })?;
    }
    let started = std::time::Instant::now();
    let loaded = LoadedModel::load(source.path(), format)?;
    tracing::debug!(path = %source.path().display(), ?format, elapsed_ms = started.elapsed().as_millis() as u64, "local model loaded");
    Ok(loaded)
}

#[async_trait]
impl Llm for LocalLlm {
    fn model(&self) -> &str {
        &self.name
    }

    fn provider(&self) -> &str {
        "local"
    }

    async fn call(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        collect_stream(self.stream(request).await?, |_| {}).await
    }

    async fn stream(&self, request: LlmRequest) -> Result<LlmStream, LlmError> {
        let model = self.shared_model().await?;
        let params = self.params_for(&request);
        let name = self.name.clone();
        let mut params = params;
        // Asked for JSON: decoding is held to the schema. A reply that continues an assistant
        // message is left free, as its start is not this call's to shape.
        let continues_reply = request
            .messages
            .last()
            .is_some_and(|m| m.role == crewai_llm::Role::Assistant);
        if !continues_reply {
            params.json_schema = request.response_format.as_ref().map(|f| f.schema.clone());
            // A ReAct step: decoding is held to a thought, then an action naming one of the
            // tools with arguments that match its schema, or a final answer. The model acts
            // once, then answers: left to choose, a 135M model answers at once (copying the
            // format example) and, once it has acted, repeats the same action until `max_iter`.
            params.react_tools = request
                .reply_shape
                .as_ref()
                .map(|ReplyShape::React { tools }| tools.clone());
            params.react_form = if has_tool_result(&request.messages) {
                ReactForm::FinalAnswer
            } else {
                ReactForm::Action
            };
        }
        // Waiting here (not on a blocking thread) is how concurrent calls queue.
        let mut guard = model.lock_owned().await;
        let (sender, receiver) =
            tokio::sync::mpsc::unbounded_channel::<Result<StreamEvent, LlmError>>();
        tokio::task::spawn_blocking(move || {
            let loaded = &mut *guard;
            let outcome = loaded
                .template()
                .render(&request.messages)
                .encode(loaded.tokenizer())
                .and_then(|prompt| {
                    loaded.generate(&prompt, &params, |piece| {
                        sender
                            .send(Ok(StreamEvent::TextDelta(piece.to_string())))
                            .is_ok()
                    })
                });
            let event = outcome.map_err(LlmError::from).map(|generation| {
                let usage = Usage {
                    prompt_tokens: generation.prompt_tokens as u64,
                    completion_tokens: generation.completion_tokens as u64,
                    total_tokens: (generation.prompt_tokens + generation.completion_tokens) as u64,
                    successful_requests: 1,
                    ..Usage::default()
                };
                let finish_reason = match generation.finish {
                    Finish::EndOfTurn => FinishReason::Stop,
                    Finish::Length => FinishReason::Length,
                    Finish::StopWord => FinishReason::StopSequence,
                    Finish::Cancelled => FinishReason::Other("cancelled".into()),
                };
                StreamEvent::Done(LlmResponse {
                    content: Some(generation.text),
                    finish_reason,
                    usage,
                    model: Some(name),
                    ..LlmResponse::default()
                })
            });
            // The receiver may be gone (the caller cancelled); nothing is left to tell.
            let _ = sender.send(event);
        });
        Ok(Box::pin(futures::stream::unfold(
            receiver,
            |mut receiver| async move { receiver.recv().await.map(|event| (event, receiver)) },
        )))
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            function_calling: false,
            stop_words: true,
            multimodal: false,
            // Replies to a `response_format` are decoded under the schema's grammar.
            structured_output: true,
            context_window: CONTEXT_BEFORE_LOAD,
        }
    }
}

/// Whether the conversation already holds a tool's result: a tool message, or an assistant turn
/// of the ReAct loop with its observation appended.
fn has_tool_result(messages: &[crewai_llm::Message]) -> bool {
    messages.iter().any(|message| match message.role {
        crewai_llm::Role::Tool => true,
        crewai_llm::Role::Assistant => message.text().contains(OBSERVATION_MARK),
        _ => false,
    })
}

/// Builds the `local` provider for a config; register it with
/// `crewai_llm::BuildOptions::with_provider("local", Arc::new(crewai_local::build))`.
pub fn build(config: &LlmConfig) -> Result<Arc<dyn Llm>, LlmError> {
    Ok(Arc::new(LocalLlm::from_config(config)?))
}
