//! How recalled records are ranked: [`MemoryConfig`], reciprocal rank fusion of the vector and
//! text results, and the composite score with its match reasons.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::record::MemoryRecord;

/// Memory's tunables, with CrewAI's defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MemoryConfig {
    /// Weight of the similarity between the query and the record.
    pub semantic_weight: f64,
    /// Weight of `0.5^(age_days / recency_half_life_days)`.
    pub recency_weight: f64,
    /// Weight of the record's importance.
    pub importance_weight: f64,
    pub recency_half_life_days: f64,
    /// A new statement this similar to stored ones (up to `consolidation_limit` of them) is
    /// consolidated with them instead of stored beside them.
    pub consolidation_threshold: f64,
    pub consolidation_limit: usize,
    /// Statements of one batch this similar to each other are stored once.
    pub batch_dedup_threshold: f64,
    /// Importance of a record saved without one.
    pub default_importance: f64,
    /// Each search of a recall fetches `limit × recall_oversample_factor` candidates before
    /// scoring.
    pub recall_oversample_factor: usize,
    /// A deep recall whose best score is below this explores once more (`exploration_budget`).
    pub confidence_threshold_low: f64,
    /// How many extra exploration rounds a deep recall may take.
    pub exploration_budget: usize,
    /// Queries shorter than this many characters are recalled without the model's analysis,
    /// even when deep.
    pub query_analysis_threshold: usize,
    /// RRF's constant: a result at rank r contributes 1 / (k + r).
    pub rrf_k: f64,
    /// When set, nothing is written (remember, update, forget and reset are refused).
    pub read_only: bool,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            semantic_weight: 0.5,
            recency_weight: 0.3,
            importance_weight: 0.2,
            recency_half_life_days: 30.0,
            consolidation_threshold: 0.85,
            consolidation_limit: 5,
            batch_dedup_threshold: 0.98,
            default_importance: 0.5,
            recall_oversample_factor: 3,
            confidence_threshold_low: 0.5,
            exploration_budget: 1,
            query_analysis_threshold: 200,
            rrf_k: 60.0,
            read_only: false,
        }
    }
}

impl MemoryConfig {
    crewai_llm::setters! {
        pub fn semantic_weight(weight: f64) => semantic_weight = weight;
        pub fn recency_weight(weight: f64) => recency_weight = weight;
        pub fn importance_weight(weight: f64) => importance_weight = weight;
        pub fn recency_half_life_days(days: f64) => recency_half_life_days = days;
        pub fn consolidation_threshold(similarity: f64) => consolidation_threshold = similarity;
        pub fn consolidation_limit(records: usize) => consolidation_limit = records;
        pub fn batch_dedup_threshold(similarity: f64) => batch_dedup_threshold = similarity;
        pub fn default_importance(importance: f64) => default_importance = importance;
        pub fn recall_oversample_factor(factor: usize) => recall_oversample_factor = factor;
        pub fn confidence_threshold_low(score: f64) => confidence_threshold_low = score;
        pub fn exploration_budget(rounds: usize) => exploration_budget = rounds;
        pub fn query_analysis_threshold(chars: usize) => query_analysis_threshold = chars;
        pub fn read_only(read_only: bool) => read_only = read_only;
    }
}

/// Why a record was recalled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MatchReason {
    /// Always: the score includes the similarity of meaning.
    Semantic,
    /// Its text shares words with the query (full-text search found it).
    Keyword,
    /// Recent: its recency factor is above 0.5 (younger than one half-life).
    Recency,
    /// Its importance is above 0.5.
    Importance,
}

/// One recalled record with its score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryMatch {
    pub record: MemoryRecord,
    /// The composite score (see [`MemoryConfig`]'s weights).
    pub score: f64,
    /// The cosine similarity between the query and the record.
    pub semantic: f64,
    pub match_reasons: Vec<MatchReason>,
}

impl MemoryMatch {
    /// `- (score=0.87) content`, then the categories and metadata when there are any, one line
    /// each: the form put in prompts.
    pub fn format(&self) -> String {
        let mut out = format!("- (score={:.2}) {}", self.score, self.record.content);
        if !self.record.categories.is_empty() {
            out.push_str(&format!(
                "\n  categories: {}",
                self.record.categories.join(", ")
            ));
        }
        if !self.record.metadata.is_empty() {
            let metadata = serde_json::Value::Object(self.record.metadata.clone());
            out.push_str(&format!("\n  metadata: {metadata}"));
        }
        out
    }
}

/// The recency factor of something created at `created`, seen at `now`.
pub(crate) fn recency(config: &MemoryConfig, created: DateTime<Utc>, now: DateTime<Utc>) -> f64 {
    let age_days = (now - created).num_seconds().max(0) as f64 / 86_400.0;
    let half_life = config.recency_half_life_days.max(f64::MIN_POSITIVE);
    0.5f64.powf(age_days / half_life)
}

/// `record`'s composite score for a query it is `semantic`-similar to, and why it matched.
pub(crate) fn score(
    config: &MemoryConfig,
    record: MemoryRecord,
    semantic: f64,
    keyword: bool,
    now: DateTime<Utc>,
) -> MemoryMatch {
    let decay = recency(config, record.created_at, now);
    let score = config.semantic_weight * semantic
        + config.recency_weight * decay
        + config.importance_weight * record.importance;
    let mut match_reasons = vec![MatchReason::Semantic];
    if keyword {
        match_reasons.push(MatchReason::Keyword);
    }
    if decay > 0.5 {
        match_reasons.push(MatchReason::Recency);
    }
    if record.importance > 0.5 {
        match_reasons.push(MatchReason::Importance);
    }
    MemoryMatch {
        record,
        score,
        semantic,
        match_reasons,
    }
}

/// Reciprocal rank fusion of ranked id lists: each id's sum of `1 / (k + rank)` (rank from 1),
/// highest first; ties keep the order of first appearance.
pub(crate) fn reciprocal_rank_fusion(rankings: &[Vec<String>], k: f64) -> Vec<(String, f64)> {
    let mut fused: Vec<(String, f64)> = Vec::new();
    for ranking in rankings {
        for (rank, id) in ranking.iter().enumerate() {
            let contribution = 1.0 / (k + rank as f64 + 1.0);
            match fused.iter_mut().find(|(seen, _)| seen == id) {
                Some((_, total)) => *total += contribution,
                None => fused.push((id.clone(), contribution)),
            }
        }
    }
    fused.sort_by(|a, b| b.1.total_cmp(&a.1));
    fused
}

/// The cosine similarity of two vectors (0.0 when either has no length).
pub(crate) fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let (mut dot, mut na, mut nb) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 || a.len() != b.len() {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::ScopePath;

    fn record(importance: f64, created: DateTime<Utc>) -> MemoryRecord {
        MemoryRecord {
            id: "r".into(),
            content: "the sky is blue".into(),
            scope: ScopePath::root(),
            categories: vec!["facts".into()],
            metadata: serde_json::Map::new(),
            importance,
            created_at: created,
            last_accessed: created,
            source: None,
            private: false,
            embedding: Vec::new(),
        }
    }

    #[test]
    fn composite_score_weighs_similarity_recency_and_importance() {
        let now = Utc::now();
        let config = MemoryConfig::default();
        let fresh = score(&config, record(0.5, now), 0.8, false, now);
        assert!((fresh.score - (0.5 * 0.8 + 0.3 + 0.1)).abs() < 1e-9);
        assert_eq!(
            fresh.match_reasons,
            [MatchReason::Semantic, MatchReason::Recency]
        );
        let month_old = now - chrono::Duration::days(30);
        let old = score(&config, record(0.9, month_old), 0.8, true, now);
        assert!((old.score - (0.4 + 0.3 * 0.5 + 0.2 * 0.9)).abs() < 1e-6);
        assert_eq!(
            old.match_reasons,
            [
                MatchReason::Semantic,
                MatchReason::Keyword,
                MatchReason::Importance
            ]
        );
    }

    #[test]
    fn fusion_rewards_agreement() {
        let fused = reciprocal_rank_fusion(
            &[
                vec!["a".into(), "b".into(), "c".into()],
                vec!["b".into(), "c".into()],
            ],
            60.0,
        );
        let order: Vec<&str> = fused.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(order, ["b", "c", "a"]);
    }

    #[test]
    fn formats_like_crewai() {
        let now = Utc::now();
        let mut m = score(&MemoryConfig::default(), record(0.5, now), 1.0, false, now);
        m.score = 0.87;
        assert_eq!(
            m.format(),
            "- (score=0.87) the sky is blue\n  categories: facts"
        );
    }
}
