//! The tokenizer, rebuilt from a GGUF file's own metadata (no `tokenizer.json`, no model hub).
//!
//! GGUF stores a byte-level BPE as `tokenizer.ggml.tokens` (the vocabulary, id = position),
//! `tokenizer.ggml.merges` (`"a b"` pairs, by rank) and `tokenizer.ggml.token_type` (1 normal,
//! 3 control, ...). The pre-tokenizer is named by `tokenizer.ggml.pre`; for SmolLM2 (`smollm`)
//! it splits every digit on its own before the GPT-2 byte-level split, which is what made the
//! rebuilt tokenizer agree with the reference one.
//!
//! Control tokens (`<|im_start|>`, `<|im_end|>`, ...) are never produced from text: the chat
//! template inserts their ids directly, so a prompt that merely *contains* `<|im_end|>` cannot
//! end a turn early.

use std::collections::HashMap;
use std::path::Path;

use candle_core::quantized::gguf_file::{Content, Value};
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::{BPE, Vocab};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::{PreTokenizerWrapper, Tokenizer};

use crate::error::LocalError;

/// GGUF's token type for control tokens.
const CONTROL_TOKEN: i32 = 3;

/// A byte-level BPE tokenizer plus what the generator needs to know about special tokens.
#[derive(Clone)]
pub struct GgufTokenizer {
    inner: Tokenizer,
    tokens: Vec<String>,
    control: Vec<bool>,
    by_text: HashMap<String, u32>,
}

impl std::fmt::Debug for GgufTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufTokenizer")
            .field("vocab_size", &self.tokens.len())
            .finish_non_exhaustive()
    }
}

impl GgufTokenizer {
    /// Reads only the metadata of a GGUF file and builds its tokenizer (no weights are loaded).
    pub fn from_file(path: &Path) -> Result<Self, LocalError> {
        let mut file = std::fs::File::open(path).map_err(crate::error::io_error(path))?;
        let content = Content::read(&mut file).map_err(crate::error::candle_error(path))?;
        Self::from_gguf(&content, path)
    }

    /// Builds the tokenizer from a GGUF file's metadata; `path` is only used in errors.
    pub fn from_gguf(content: &Content, path: &Path) -> Result<Self, LocalError> {
        let fail = |reason: String| LocalError::Tokenizer {
            path: path.to_path_buf(),
            reason,
            source: None,
        };
        let metadata = &content.metadata;
        let model = metadata
            .get("tokenizer.ggml.model")
            .and_then(|v| v.to_string().ok())
            .map(String::as_str);
        if model != Some("gpt2") {
            return Err(fail(format!(
                "tokenizer.ggml.model is {model:?}; only byte-level BPE (`gpt2`) tokenizers are supported"
            )));
        }
        let tokens = string_array(metadata, "tokenizer.ggml.tokens", path)?;
        let merges = string_array(metadata, "tokenizer.ggml.merges", path)?;
        let control = match metadata.get("tokenizer.ggml.token_type").map(Value::to_vec) {
            Some(Ok(types)) => types
                .iter()
                .map(|t| t.to_i32().map(|t| t == CONTROL_TOKEN).unwrap_or(false))
                .collect(),
            _ => vec![false; tokens.len()],
        };
        let vocab: HashMap<String, u32> = tokens
            .iter()
            .enumerate()
            .map(|(id, token)| (token.clone(), id as u32))
            .collect();
        let merges = merges
            .iter()
            .map(|pair| {
                pair.split_once(' ')
                    .map(|(a, b)| (a.to_string(), b.to_string()))
                    .ok_or_else(|| {
                        fail(format!(
                            "merge '{pair}' is not two tokens separated by a space"
                        ))
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let bpe = BPE::builder()
            .vocab_and_merges(
                vocab
                    .iter()
                    .map(|(k, v)| (k.clone(), *v))
                    .collect::<Vocab>(),
                merges,
            )
            .build()
            .map_err(|source| LocalError::Tokenizer {
                path: path.to_path_buf(),
                reason: "the BPE model cannot be built from the vocabulary and merges".into(),
                source: Some(source),
            })?;

        let pre = metadata
            .get("tokenizer.ggml.pre")
            .and_then(|v| v.to_string().ok())
            .map(String::as_str)
            .unwrap_or("default");
        let byte_level = ByteLevel::new(false, true, true);
        let pre_tokenizer: PreTokenizerWrapper = match pre {
            "smollm" | "default" | "gpt2" => {
                Sequence::new(vec![Digits::new(true).into(), byte_level.into()]).into()
            }
            other => {
                return Err(fail(format!(
                    "pre-tokenizer '{other}' is not supported yet (supported: smollm, gpt2, default)"
                )));
            }
        };
        let mut inner = Tokenizer::new(bpe);
        inner.with_pre_tokenizer(Some(pre_tokenizer));
        inner.with_decoder(Some(ByteLevelDecoder::default()));
        Ok(GgufTokenizer {
            inner,
            tokens,
            control,
            by_text: vocab,
        })
    }

    /// The ids of `text`, read as plain text (special-token spellings stay text).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, LocalError> {
        if text.is_empty() {
            return Ok(Vec::new());
        }
        let encoding = self
            .inner
            .encode(text, false)
            .map_err(|e| LocalError::inference_from("tokenizing failed", e))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// The text of `ids`; control tokens are left out.
    pub fn decode(&self, ids: &[u32]) -> Result<String, LocalError> {
        let plain: Vec<u32> = ids
            .iter()
            .copied()
            .filter(|id| !self.is_control(*id))
            .collect();
        self.inner
            .decode(&plain, false)
            .map_err(|e| LocalError::inference_from("decoding failed", e))
    }

    /// The id of a token spelled exactly `text` (`<|im_end|>`).
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.by_text.get(text).copied()
    }

    /// True for control tokens (turn markers, end of text): generation stops on them.
    pub fn is_control(&self, id: u32) -> bool {
        self.control.get(id as usize).copied().unwrap_or(false)
    }

    /// The ids of every control token.
    pub fn control_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.control
            .iter()
            .enumerate()
            .filter(|(_, control)| **control)
            .map(|(id, _)| id as u32)
    }

    /// The number of tokens in the vocabulary.
    pub fn vocab_size(&self) -> usize {
        self.tokens.len()
    }
}

fn string_array(
    metadata: &HashMap<String, Value>,
    key: &str,
    path: &Path,
) -> Result<Vec<String>, LocalError> {
    let fail = |source: Option<candle_core::Error>| LocalError::Tokenizer {
        path: path.to_path_buf(),
        reason: match source {
            None => format!("{key} is missing"),
            Some(_) => format!("{key} is not a list of strings"),
        },
        source: source.map(Into::into),
    };
    let values = metadata
        .get(key)
        .ok_or_else(|| fail(None))?
        .to_vec()
        .map_err(|e| fail(Some(e)))?;
    values
        .iter()
        .map(|v| v.to_string().cloned().map_err(|e| fail(Some(e))))
        .collect()
}
