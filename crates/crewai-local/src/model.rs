//! Loading a GGUF llama-family model and generating text with it (blocking code; the provider
//! runs it on tokio's blocking pool).

use std::fs::File;
use std::io::Cursor;
use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file::{self, Content};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use candle_transformers::generation::{LogitsProcessor, Sampling};
use candle_transformers::models::quantized_llama::{MAX_SEQ_LEN, ModelWeights};

use crate::chat::ChatTemplate;
use crate::constrained::{Constraint, Pick, Step, TokenGrammar, TokenTexts};
use crate::error::{LocalError, candle_error, io_error};
use crate::json_grammar::JsonGrammar;
use crate::react_grammar::{ReactForm, ReactGrammar};
use crate::tokenizer::GgufTokenizer;

/// How weights are held in memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum WeightFormat {
    /// Expanded to f32 at load (about 5x the file size in memory). candle's f32 matrix kernels
    /// pick AVX2/FMA/AVX-512 at run time, while its Q4_1 kernel is scalar unless the whole build
    /// targets a newer CPU, so this is the fast choice on any x86-64.
    #[default]
    Dequantized,
    /// Kept as in the file (smallest memory, slower on builds for baseline x86-64).
    Quantized,
}

impl WeightFormat {
    /// Reads `CREWAI_LOCAL_WEIGHTS` (`f32` / `dequantized` or `quantized` / `q`), else the default.
    pub fn from_env() -> Self {
        match std::env::var("CREWAI_LOCAL_WEIGHTS")
            .map(|v| v.trim().to_ascii_lowercase())
            .as_deref()
        {
            Ok("quantized" | "q" | "gguf") => WeightFormat::Quantized,
            _ => WeightFormat::Dequantized,
        }
    }
}

/// A loaded model: weights, tokenizer and chat template.
pub struct LoadedModel {
    pub(crate) path: PathBuf,
    pub(crate) weights: ModelWeights,
    pub(crate) tokenizer: GgufTokenizer,
    pub(crate) template: ChatTemplate,
    pub(crate) context_window: usize,
    /// Every token's text, computed the first time a reply is held to a schema.
    token_texts: Option<TokenTexts>,
}

impl std::fmt::Debug for LoadedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedModel")
            .field("path", &self.path)
            .field("context_window", &self.context_window)
            .finish_non_exhaustive()
    }
}

/// Sampling and stopping settings of one generation.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerationParams {
    pub max_tokens: usize,
    /// `None` (or 0) decodes greedily.
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub seed: u64,
    /// The reply ends before the first of these.
    pub stop: Vec<String>,
    /// Penalty for tokens among the last `repeat_window` generated ones (1.0 = none).
    pub repeat_penalty: f32,
    pub repeat_window: usize,
    /// When set, the reply is a JSON document matching this JSON schema: only tokens that keep
    /// it a valid prefix are chosen, and it is closed before `max_tokens` runs out (see
    /// [`crate::json_grammar`]).
    pub json_schema: Option<serde_json::Value>,
    /// When set, the reply is one ReAct step naming one of these tools with arguments that
    /// match its schema, or a final answer (see [`crate::react_grammar`]). Takes precedence
    /// over `json_schema`.
    pub react_tools: Option<Vec<crewai_llm::ToolDefinition>>,
    /// With `react_tools`: which forms of step are accepted.
    pub react_form: ReactForm,
}

impl Default for GenerationParams {
    fn default() -> Self {
        GenerationParams {
            max_tokens: 512,
            temperature: None,
            top_p: None,
            seed: 42,
            stop: Vec::new(),
            repeat_penalty: 1.1,
            repeat_window: 256,
            json_schema: None,
            react_tools: None,
            react_form: ReactForm::Either,
        }
    }
}

/// Why a generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// The model closed its turn.
    EndOfTurn,
    /// `max_tokens` (or the context window) was reached.
    Length,
    /// A stop word was produced (and cut off).
    StopWord,
    /// The receiver of the text went away.
    Cancelled,
}

/// The result of one generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generation {
    pub text: String,
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
    pub finish: Finish,
}

/// Prompt tokens are fed in power-of-two chunks: candle keeps one attention mask per
/// (chunk, position) shape, and power-of-two chunks keep that set small and bounded.
const LARGEST_PREFILL_CHUNK: usize = 256;

impl LoadedModel {
    /// Reads a GGUF file and builds the model (blocking; about half a second for SmolLM2).
    pub fn load(path: &Path, format: WeightFormat) -> Result<Self, LocalError> {
        let mut file = File::open(path).map_err(io_error(path))?;
        let content = Content::read(&mut file).map_err(candle_error(path))?;
        let architecture = content
            .metadata
            .get("general.architecture")
            .and_then(|v| v.to_string().ok())
            .cloned();
        if architecture.as_deref() != Some("llama") {
            return Err(LocalError::UnsupportedModel {
                path: path.to_path_buf(),
                reason: format!(
                    "architecture is {architecture:?}; only llama-family models are supported"
                ),
            });
        }
        let tokenizer = GgufTokenizer::from_gguf(&content, path)?;
        let template_source = content
            .metadata
            .get("tokenizer.chat_template")
            .and_then(|v| v.to_string().ok());
        let template = ChatTemplate::from_jinja(template_source.map(String::as_str));
        let trained_context = content
            .metadata
            .get("llama.context_length")
            .and_then(|v| v.to_u32().ok())
            .map(|n| n as usize)
            .unwrap_or(MAX_SEQ_LEN);
        let context_window = trained_context.min(MAX_SEQ_LEN);
        let device = Device::Cpu;
        let weights = match format {
            WeightFormat::Quantized => {
                ModelWeights::from_gguf(content, &mut file, &device).map_err(candle_error(path))?
            }
            WeightFormat::Dequantized => {
                let (content, mut expanded) = dequantized_copy(content, &mut file, path)?;
                ModelWeights::from_gguf(content, &mut expanded, &device)
                    .map_err(candle_error(path))?
            }
        };
        Ok(LoadedModel {
            path: path.to_path_buf(),
            weights,
            tokenizer,
            template,
            context_window,
            token_texts: None,
        })
    }

    /// The tokenizer built from the file's metadata.
    pub fn tokenizer(&self) -> &GgufTokenizer {
        &self.tokenizer
    }

    /// The chat template.
    pub fn template(&self) -> &ChatTemplate {
        &self.template
    }

    /// The usable context window in tokens.
    pub fn context_window(&self) -> usize {
        self.context_window
    }

    /// Generates a reply to `prompt` (token ids). `on_text` receives each new piece of reply text
    /// (never part of a stop word) and returns `false` to cancel.
    pub fn generate(
        &mut self,
        prompt: &[u32],
        params: &GenerationParams,
        mut on_text: impl FnMut(&str) -> bool,
    ) -> Result<Generation, LocalError> {
        if prompt.is_empty() {
            return Err(LocalError::inference("the prompt is empty"));
        }
        if prompt.len() >= self.context_window {
            return Err(LocalError::ContextOverflow {
                prompt_tokens: prompt.len(),
                context_window: self.context_window,
            });
        }
        let budget = params.max_tokens.min(self.context_window - prompt.len());
        let sampling = match params.temperature.filter(|t| *t > 0.0) {
            None => Sampling::ArgMax,
            Some(temperature) => match params.top_p.filter(|p| *p > 0.0 && *p < 1.0) {
                Some(p) => Sampling::TopP { p, temperature },
                None => Sampling::All { temperature },
            },
        };
        let mut sampler = LogitsProcessor::from_sampling(params.seed, sampling);
        let grammar: Option<Box<dyn TokenGrammar>> =
            match (&params.react_tools, &params.json_schema) {
                (Some(tools), _) => Some(Box::new(
                    ReactGrammar::new(tools).with_form(params.react_form),
                )),
                (None, Some(schema)) => Some(Box::new(JsonGrammar::new(schema))),
                (None, None) => None,
            };
        let mut constraint = match grammar {
            Some(grammar) => {
                if self.token_texts.is_none() {
                    self.token_texts = Some(TokenTexts::new(&self.tokenizer)?);
                }
                Some(Constraint::new(
                    grammar,
                    Pick::new(params.temperature, params.top_p, params.seed),
                ))
            }
            None => None,
        };
        let inference =
            |e: candle_core::Error| LocalError::inference_from("a decoding step failed", e);
        self.weights.clear_kv_cache();

        let mut logits = self.prefill(prompt).map_err(inference)?;
        let mut generated: Vec<u32> = Vec::new();
        // Text added to close a JSON reply when the budget ran out, and its token count.
        let mut closing = String::new();
        let mut closing_tokens = 0;
        let mut stream = StopWordStream::new(&params.stop);
        let mut finish = Finish::Length;
        while generated.len() < budget {
            let logits_row = logits.squeeze(0).map_err(inference)?;
            let logits_row = if params.repeat_penalty != 1.0 && !generated.is_empty() {
                let window = &generated[generated.len().saturating_sub(params.repeat_window)..];
                candle_transformers::utils::apply_repeat_penalty(
                    &logits_row,
                    params.repeat_penalty,
                    window,
                )
                .map_err(inference)?
            } else {
                logits_row
            };
            let next = match (&mut constraint, &self.token_texts) {
                (Some(constraint), Some(texts)) => {
                    // Close the reply while the budget still has room for the closing text.
                    let completion = constraint.completion();
                    let completion_tokens = self.tokenizer.encode(&completion)?.len();
                    if completion_tokens > 0 && generated.len() + completion_tokens >= budget {
                        closing = completion;
                        closing_tokens = completion_tokens;
                        break;
                    }
                    let scores = logits_row.to_vec1::<f32>().map_err(inference)?;
                    match constraint.step(&scores, texts) {
                        Step::Token(id) => id,
                        Step::End => {
                            finish = Finish::EndOfTurn;
                            break;
                        }
                    }
                }
                _ => {
                    let next = sampler.sample(&logits_row).map_err(inference)?;
                    if self.tokenizer.is_control(next) && ends_on_open_label(stream.text()) {
                        // A small model may end its turn right after `Final Answer:`; the
                        // turn goes on with its best text token instead.
                        let mut scores = logits_row.to_vec1::<f32>().map_err(inference)?;
                        for id in self.tokenizer.control_ids() {
                            if let Some(score) = scores.get_mut(id as usize) {
                                *score = f32::NEG_INFINITY;
                            }
                        }
                        let masked = Tensor::new(scores, &Device::Cpu).map_err(inference)?;
                        sampler.sample(&masked).map_err(inference)?
                    } else {
                        next
                    }
                }
            };
            if self.tokenizer.is_control(next) {
                finish = Finish::EndOfTurn;
                break;
            }
            generated.push(next);
            let text = self.tokenizer.decode(&generated)?;
            match stream.advance(&text) {
                Advance::Emit(piece) => {
                    if !piece.is_empty() && !on_text(&piece) {
                        finish = Finish::Cancelled;
                        break;
                    }
                }
                Advance::Stopped(piece) => {
                    if !piece.is_empty() {
                        on_text(&piece);
                    }
                    finish = Finish::StopWord;
                    break;
                }
            }
            if generated.len() >= budget {
                break;
            }
            let input = Tensor::new(&[next], &Device::Cpu)
                .and_then(|t| t.unsqueeze(0))
                .map_err(inference)?;
            logits = self
                .weights
                .forward(&input, prompt.len() + generated.len() - 1)
                .map_err(inference)?;
        }
        if !closing.is_empty() {
            let text = format!("{}{closing}", self.tokenizer.decode(&generated)?);
            if let Advance::Emit(piece) | Advance::Stopped(piece) = stream.advance(&text)
                && !piece.is_empty()
            {
                on_text(&piece);
            }
        }
        if finish != Finish::StopWord && finish != Finish::Cancelled {
            let rest = stream.finish();
            if !rest.is_empty() {
                on_text(&rest);
            }
        }
        Ok(Generation {
            text: stream.into_text(),
            prompt_tokens: prompt.len(),
            completion_tokens: generated.len() + closing_tokens,
            finish,
        })
    }

    /// Runs the prompt through the model and returns the logits of its last position.
    fn prefill(&mut self, prompt: &[u32]) -> candle_core::Result<Tensor> {
        let mut position = 0;
        let mut logits = None;
        while position < prompt.len() {
            let remaining = prompt.len() - position;
            let chunk = LARGEST_PREFILL_CHUNK.min(1 << remaining.ilog2());
            let input =
                Tensor::new(&prompt[position..position + chunk], &Device::Cpu)?.unsqueeze(0)?;
            logits = Some(self.weights.forward(&input, position)?);
            position += chunk;
        }
        logits.ok_or_else(|| candle_core::Error::Msg("empty prompt".into()))
    }
}

/// The ReAct labels after which a reply cannot end: the value they announce is still to come.
const OPEN_LABELS: [&str; 4] = ["Final Answer:", "Action:", "Action Input:", "Thought:"];

/// True if `text` ends with a ReAct label and nothing after it.
fn ends_on_open_label(text: &str) -> bool {
    let text = text.trim_end();
    OPEN_LABELS.iter().any(|label| text.ends_with(label))
}

/// A copy of the model in memory with every quantized tensor expanded to f32, in GGUF form so
/// candle's loader builds plain (SIMD) matrix multiplications from it.
fn dequantized_copy(
    content: Content,
    file: &mut File,
    path: &Path,
) -> Result<(Content, Cursor<Vec<u8>>), LocalError> {
    let device = Device::Cpu;
    let fail = candle_error(path);
    let mut tensors: Vec<(String, QTensor)> = Vec::with_capacity(content.tensor_infos.len());
    for name in content.tensor_infos.keys() {
        let tensor = content.tensor(file, name, &device).map_err(&fail)?;
        let tensor = match tensor.dtype() {
            GgmlDType::F32 => tensor,
            _ => QTensor::quantize(&tensor.dequantize(&device).map_err(&fail)?, GgmlDType::F32)
                .map_err(&fail)?,
        };
        tensors.push((name.clone(), tensor));
    }
    let metadata: Vec<(&str, &gguf_file::Value)> = content
        .metadata
        .iter()
        .map(|(k, v)| (k.as_str(), v))
        .collect();
    let tensor_refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut buffer = Cursor::new(Vec::new());
    gguf_file::write(&mut buffer, &metadata, &tensor_refs).map_err(&fail)?;
    drop(tensors);
    buffer.set_position(0);
    let expanded = Content::read(&mut buffer).map_err(&fail)?;
    Ok((expanded, buffer))
}

/// What [`StopWordStream::advance`] found.
#[derive(Debug, PartialEq, Eq)]
enum Advance {
    /// Text that is safe to show (it cannot be the start of a stop word).
    Emit(String),
    /// A stop word appeared; the text before it that was not shown yet.
    Stopped(String),
}

/// Cuts the reply at the first stop word and holds back text that might be the start of one,
/// so streamed pieces never contain (part of) a stop word.
#[derive(Debug)]
struct StopWordStream {
    stop: Vec<String>,
    text: String,
    emitted: usize,
}

impl StopWordStream {
    fn new(stop: &[String]) -> Self {
        StopWordStream {
            stop: stop.iter().filter(|s| !s.is_empty()).cloned().collect(),
            text: String::new(),
            emitted: 0,
        }
    }

    /// Takes the whole reply decoded so far.
    fn advance(&mut self, decoded: &str) -> Advance {
        self.text = decoded.to_string();
        if let Some(cut) = self
            .stop
            .iter()
            .filter_map(|s| self.text.find(s.as_str()))
            .min()
        {
            self.text.truncate(cut);
            return Advance::Stopped(self.take_until(cut));
        }
        // A token may end inside a multi-byte character (decoded as U+FFFD): wait for the rest.
        let mut safe = self.text.trim_end_matches('\u{FFFD}').len();
        for stop in &self.stop {
            for (index, _) in stop.char_indices().skip(1) {
                if self.text[..safe].ends_with(&stop[..index]) {
                    safe = safe.min(self.text.len() - index);
                }
            }
        }
        Advance::Emit(self.take_until(safe.max(self.emitted)))
    }

    /// The text held back, at the end of the reply.
    fn finish(&mut self) -> String {
        self.take_until(self.text.len())
    }

    /// The text after what was emitted so far, up to byte `end`, now counted as emitted.
    fn take_until(&mut self, end: usize) -> String {
        let piece = self
            .text
            .get(self.emitted..end)
            .unwrap_or_default()
            .to_string();
        self.emitted = end;
        piece
    }

    /// The reply decoded so far.
    fn text(&self) -> &str {
        &self.text
    }

    fn into_text(self) -> String {
        self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(stop: &[&str], pieces: &[&str]) -> (Vec<String>, String, bool) {
        let stop: Vec<String> = stop.iter().map(|s| s.to_string()).collect();
        let mut stream = StopWordStream::new(&stop);
        let mut decoded = String::new();
        let mut shown = Vec::new();
        for piece in pieces {
            decoded.push_str(piece);
            match stream.advance(&decoded) {
                Advance::Emit(p) => shown.push(p),
                Advance::Stopped(p) => {
                    shown.push(p);
                    return (shown, stream.into_text(), true);
                }
            }
        }
        shown.push(stream.finish());
        (shown, stream.into_text(), false)
    }

    #[test]
    fn a_stop_word_cuts_the_reply_and_is_never_shown() {
        let (shown, text, stopped) = feed(
            &["\nObservation:"],
            &["Action: search", "\nObs", "ervation: x"],
        );
        assert!(stopped);
        assert_eq!(text, "Action: search");
        assert_eq!(shown.concat(), "Action: search");
        assert!(shown.iter().all(|p| !p.contains("Obs")), "{shown:?}");
    }

    #[test]
    fn held_back_text_is_released_when_it_is_not_a_stop_word() {
        let (shown, text, stopped) = feed(&["\nObservation:"], &["a", "\nOb", "jects"]);
        assert!(!stopped);
        assert_eq!(text, "a\nObjects");
        assert_eq!(shown, vec!["a", "", "\nObjects", ""]);
    }

    #[test]
    fn incomplete_characters_wait_for_the_next_token() {
        let mut stream = StopWordStream::new(&[]);
        assert_eq!(stream.advance("caf"), Advance::Emit("caf".into()));
        // The token so far ends inside "é": the decoder shows a replacement character.
        assert_eq!(stream.advance("caf\u{FFFD}"), Advance::Emit(String::new()));
        assert_eq!(stream.advance("café"), Advance::Emit("é".into()));
        assert_eq!(stream.into_text(), "café");
    }

    #[test]
    fn a_reply_may_not_end_on_a_bare_react_label() {
        assert!(ends_on_open_label("I know it.\nFinal Answer:"));
        assert!(ends_on_open_label("Thought: x\nAction: "));
        assert!(!ends_on_open_label("Final Answer: Paris"));
        assert!(!ends_on_open_label(""));
    }

    #[test]
    fn the_earliest_of_several_stop_words_wins() {
        let (_, text, stopped) = feed(&["END", "\n\n"], &["one\n\ntwo END"]);
        assert!(stopped);
        assert_eq!(text, "one");
    }
}
