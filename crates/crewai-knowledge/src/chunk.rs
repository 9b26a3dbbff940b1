//! Chunking as CrewAI does it: fixed windows of characters (Unicode scalar values, as Python's
//! string slices count them) that overlap by a fixed number.

use serde::{Deserialize, Serialize};

use crate::error::KnowledgeError;

/// CrewAI's default window: 4,000 characters.
pub const DEFAULT_CHUNK_SIZE: usize = 4000;
/// CrewAI's default overlap: 200 characters (so windows start every 3,800).
pub const DEFAULT_CHUNK_OVERLAP: usize = 200;

/// How a source's text is cut into chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkSettings {
    pub chunk_size: usize,
    pub chunk_overlap: usize,
}

impl Default for ChunkSettings {
    fn default() -> Self {
        ChunkSettings {
            chunk_size: DEFAULT_CHUNK_SIZE,
            chunk_overlap: DEFAULT_CHUNK_OVERLAP,
        }
    }
}

impl ChunkSettings {
    /// Settings that can cut text: a size above 0 and an overlap below the size.
    pub fn new(chunk_size: usize, chunk_overlap: usize) -> Result<Self, KnowledgeError> {
        if chunk_size == 0 {
            return Err(KnowledgeError::InvalidSource(
                "chunk_size must be at least 1".into(),
            ));
        }
        if chunk_overlap >= chunk_size {
            return Err(KnowledgeError::InvalidSource(format!(
                "chunk_overlap ({chunk_overlap}) must be smaller than chunk_size ({chunk_size})"
            )));
        }
        Ok(ChunkSettings {
            chunk_size,
            chunk_overlap,
        })
    }

    /// `text` cut into windows of `chunk_size` characters starting every
    /// `chunk_size - chunk_overlap`. Unlike CrewAI, no window is made once one has reached the
    /// end of the text (CrewAI's last windows can be tails already inside the one before).
    /// Blank text gives no chunk.
    ///
    /// ```
    /// use crewai_knowledge::ChunkSettings;
    /// let settings = ChunkSettings::new(4, 1).unwrap();
    /// assert_eq!(settings.chunk("abcdefghij"), ["abcd", "defg", "ghij"]);
    /// assert_eq!(settings.chunk("abcdefgh"), ["abcd", "defg", "gh"]);
    /// assert!(settings.chunk("  \n").is_empty());
    /// ```
    pub fn chunk(&self, text: &str) -> Vec<String> {
        if text.trim().is_empty() {
            return Vec::new();
        }
        // Byte offsets of every character, so windows are cut on character boundaries.
        let starts: Vec<usize> = text.char_indices().map(|(at, _)| at).collect();
        let count = starts.len();
        let byte_at = |char_index: usize| starts.get(char_index).copied().unwrap_or(text.len());
        let step = self.chunk_size - self.chunk_overlap;
        let mut chunks = Vec::new();
        let mut start = 0;
        loop {
            let end = (start + self.chunk_size).min(count);
            chunks.push(text[byte_at(start)..byte_at(end)].to_string());
            if end == count {
                break;
            }
            start += step;
        }
        chunks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crewai_defaults_cut_every_3800_characters() {
        let text = "x".repeat(8000);
        let chunks = ChunkSettings::default().chunk(&text);
        let lengths: Vec<usize> = chunks.iter().map(|c| c.chars().count()).collect();
        assert_eq!(lengths, [4000, 4000, 400]);
    }

    #[test]
    fn boundaries_fall_on_characters_not_bytes() {
        let text = "é".repeat(10);
        let chunks = ChunkSettings::new(4, 2).unwrap().chunk(&text);
        assert!(chunks.iter().all(|c| c.chars().count() <= 4));
        assert_eq!(chunks.len(), 4);
        assert_eq!(chunks.last().unwrap().chars().count(), 4);
    }

    #[test]
    fn text_of_exactly_one_window_is_one_chunk() {
        let settings = ChunkSettings::new(5, 2).unwrap();
        assert_eq!(settings.chunk("hello"), ["hello"]);
        assert_eq!(settings.chunk("hell"), ["hell"]);
        assert_eq!(settings.chunk("hello!"), ["hello", "lo!"]);
    }

    #[test]
    fn overlap_must_be_below_the_size() {
        assert!(ChunkSettings::new(10, 10).is_err());
        assert!(ChunkSettings::new(0, 0).is_err());
        assert!(ChunkSettings::new(10, 9).is_ok());
    }
}
