//! [`HashEmbedder`]: vectors from feature hashing, with no model and no network.

use async_trait::async_trait;

use super::Embedder;
use crate::error::LlmError;

/// A local, deterministic embedder: feature hashing of words and their character trigrams into
/// a fixed-size vector, normalised to unit length.
///
/// Texts that share words and word pieces get similar vectors, with no model and no network; good
/// for tests, offline runs and small keyword-heavy knowledge bases. It does not understand
/// meaning the way a trained model does.
///
/// ```
/// use crewai_llm::embeddings::{Embedder, HashEmbedder};
/// # futures::executor::block_on(async {
/// let e = HashEmbedder::new(256);
/// let v = e.embed(&["rust crates".into(), "Rust crate".into(), "banana bread".into()]).await.unwrap();
/// let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
/// assert!(dot(&v[0], &v[1]) > dot(&v[0], &v[2]));
/// # });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashEmbedder {
    dimensions: usize,
}

/// The [`HashEmbedder`]'s size unless configured.
pub const HASH_DEFAULT_DIMENSIONS: usize = 256;

impl HashEmbedder {
    /// An embedder producing `dimensions`-long vectors (at least 1).
    pub fn new(dimensions: usize) -> Self {
        HashEmbedder {
            dimensions: dimensions.max(1),
        }
    }

    /// The vector of one text.
    pub fn embed_one(&self, text: &str) -> Vec<f32> {
        let mut out = vec![0.0f32; self.dimensions];
        let lower = text.to_lowercase();
        for word in lower
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
        {
            self.add_feature(&mut out, word.as_bytes(), 1.0);
            let padded: Vec<char> = format!("<{word}>").chars().collect();
            for gram in padded.windows(3) {
                let gram: String = gram.iter().collect();
                self.add_feature(&mut out, gram.as_bytes(), 0.5);
            }
        }
        let norm = out.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            out.iter_mut().for_each(|x| *x /= norm);
        }
        out
    }

    fn add_feature(&self, out: &mut [f32], feature: &[u8], weight: f32) {
        let hash = fnv1a(feature);
        let slot = (hash % self.dimensions as u64) as usize;
        // The sign bit keeps collisions from only ever adding up.
        let sign = if hash >> 63 == 0 { 1.0 } else { -1.0 };
        out[slot] += sign * weight;
    }
}

impl Default for HashEmbedder {
    fn default() -> Self {
        HashEmbedder::new(HASH_DEFAULT_DIMENSIONS)
    }
}

/// FNV-1a, 64 bits: stable across runs, platforms and versions (unlike std's hasher).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[async_trait]
impl Embedder for HashEmbedder {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        Ok(texts.iter().map(|t| self.embed_one(t)).collect())
    }

    fn dimensions(&self) -> Option<usize> {
        Some(self.dimensions)
    }

    fn model(&self) -> &str {
        "feature-hash"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_vectors_are_unit_length_and_stable() {
        let embedder = HashEmbedder::new(32);
        let a = embedder.embed_one("Hello, world");
        assert_eq!(a, embedder.embed_one("hello world"));
        let norm: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5);
        assert!(embedder.embed_one("").iter().all(|x| *x == 0.0));
        // Pinned so a change of the hash (which would invalidate stored vectors) is noticed.
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
