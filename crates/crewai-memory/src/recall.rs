//! [`Memory::recall`]: shallow (vector and full-text search fused, then scored) and deep (the
//! model's analysis of the query, then searches in parallel).

use std::collections::HashMap;
use std::time::Instant;

use chrono::{DateTime, NaiveDate, Utc};

use crate::error::MemoryError;
use crate::events::MemoryEvent;
use crate::memory::Memory;
use crate::prompts::{self, QueryAnalysis};
use crate::record::{MemoryRecord, RecordFilter, ScopePath};
use crate::scoring::{MemoryMatch, cosine, reciprocal_rank_fusion, score};

/// How hard a recall works.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecallDepth {
    /// One vector search and one full-text search, fused and scored. No model call.
    Shallow,
    /// For queries of at least `query_analysis_threshold` characters, the model turns the query
    /// into keywords, scopes, sub-queries and a date; those searches run in parallel and one
    /// more exploration runs when the best score is below `confidence_threshold_low`. Shorter
    /// queries are recalled as shallow ones.
    #[default]
    Deep,
}

/// A [`Memory::recall`] request: CrewAI's `recall(query, scope, categories, limit, depth,
/// source, include_private)`.
#[derive(Debug, Clone, PartialEq)]
pub struct RecallQuery {
    pub query: String,
    /// Relative to the memory's root; the whole view when `None`.
    pub scope: Option<ScopePath>,
    /// When not empty, records with at least one of these categories.
    pub categories: Vec<String>,
    pub limit: usize,
    pub depth: RecallDepth,
    /// When set, records saved by this source only (its private ones included).
    pub source: Option<String>,
    /// Whether private records of every source are included.
    pub include_private: bool,
}

impl RecallQuery {
    /// The ten best matches for `query`, deep.
    pub fn new(query: impl Into<String>) -> Self {
        RecallQuery {
            query: query.into(),
            scope: None,
            categories: Vec::new(),
            limit: 10,
            depth: RecallDepth::Deep,
            source: None,
            include_private: false,
        }
    }

    /// [`RecallDepth::Shallow`]: no model call.
    pub fn shallow(mut self) -> Self {
        self.depth = RecallDepth::Shallow;
        self
    }

    crewai_llm::setters! {
        pub fn scope(scope: ScopePath) => scope = Some(scope);
        pub fn category(category: impl Into<String>) => |b| b.categories.push(category.into());
        pub fn limit(limit: usize) => limit = limit;
        pub fn depth(depth: RecallDepth) => depth = depth;
        pub fn source(source: impl Into<String>) => source = Some(source.into());
        pub fn include_private(include: bool) => include_private = include;
    }
}

impl Memory {
    /// The records of this view that best match the query, best first, each with its composite
    /// score and why it matched. Recalled records have their `last_accessed` set.
    pub async fn recall(&self, query: RecallQuery) -> Result<Vec<MemoryMatch>, MemoryError> {
        let scope = self.absolute(query.scope.as_ref().unwrap_or(&ScopePath::root()));
        self.emit(MemoryEvent::QueryStarted {
            query: query.query.clone(),
            scope: scope.to_string(),
            limit: query.limit,
        });
        let started = Instant::now();
        let result = self.recall_in(&query, scope.clone()).await;
        match &result {
            Ok(found) => self.emit(MemoryEvent::QueryCompleted {
                query: query.query.clone(),
                scope: scope.to_string(),
                results: found.len(),
                elapsed: started.elapsed(),
            }),
            Err(error) => self.emit(MemoryEvent::QueryFailed {
                query: query.query.clone(),
                scope: scope.to_string(),
                error: crewai_llm::error_chain(error),
            }),
        }
        result
    }

    async fn recall_in(
        &self,
        query: &RecallQuery,
        scope: ScopePath,
    ) -> Result<Vec<MemoryMatch>, MemoryError> {
        if query.limit == 0 || query.query.trim().is_empty() {
            return Ok(Vec::new());
        }
        let filter = RecordFilter {
            scope,
            categories: query.categories.clone(),
            source: query.source.clone(),
            include_private: query.include_private,
            created_after: None,
        };
        let deep = query.depth == RecallDepth::Deep
            && query.query.chars().count() >= self.shared.config.query_analysis_threshold;
        let mut found = if deep {
            self.deep(&query.query, &filter, query.limit).await?
        } else {
            self.shallow(&query.query, &filter, query.limit).await?
        };
        found.truncate(query.limit);
        if !found.is_empty() && !self.shared.config.read_only {
            let ids: Vec<String> = found.iter().map(|m| m.record.id.clone()).collect();
            self.shared
                .store
                .touch(&self.shared.collection, &ids, Utc::now())
                .await?;
        }
        Ok(found
            .into_iter()
            .map(|mut m| {
                m.record = self.present(m.record);
                m
            })
            .collect())
    }

    /// Vector and full-text candidates (`limit × recall_oversample_factor` each), fused by
    /// reciprocal rank, scored, best first.
    async fn shallow(
        &self,
        text: &str,
        filter: &RecordFilter,
        limit: usize,
    ) -> Result<Vec<MemoryMatch>, MemoryError> {
        self.collection().await?;
        let query_vector = self.embed(&[text.to_string()]).await?.remove(0);
        let store = &self.shared.store;
        let collection = &self.shared.collection;
        let candidates = limit.saturating_mul(self.shared.config.recall_oversample_factor.max(1));
        let (by_vector, by_text) = futures::try_join!(
            store.vector_search(collection, &query_vector, filter, candidates),
            store.text_search(collection, text, filter, candidates),
        )?;
        let vector_ids: Vec<String> = by_vector.iter().map(|h| h.record.id.clone()).collect();
        let text_ids: Vec<String> = by_text.iter().map(|r| r.id.clone()).collect();
        let fused =
            reciprocal_rank_fusion(&[vector_ids, text_ids.clone()], self.shared.config.rrf_k);
        let mut records: HashMap<String, (MemoryRecord, Option<f64>)> = by_text
            .into_iter()
            .map(|r| (r.id.clone(), (r, None)))
            .collect();
        for hit in by_vector {
            records.insert(hit.record.id.clone(), (hit.record, Some(hit.similarity)));
        }
        let now = Utc::now();
        let mut scored: Vec<MemoryMatch> = fused
            .into_iter()
            .take(candidates)
            .filter_map(|(id, _)| {
                let (record, similarity) = records.remove(&id)?;
                // A text-only hit was not among the closest vectors: measure it directly.
                let semantic =
                    similarity.unwrap_or_else(|| cosine(&query_vector, &record.embedding));
                let keyword = text_ids.contains(&id);
                Some(score(&self.shared.config, record, semantic, keyword, now))
            })
            .collect();
        scored.sort_by(|a, b| b.score.total_cmp(&a.score));
        scored.truncate(limit);
        Ok(scored)
    }

    async fn deep(
        &self,
        text: &str,
        filter: &RecordFilter,
        limit: usize,
    ) -> Result<Vec<MemoryMatch>, MemoryError> {
        let known_scopes: Vec<String> = self
            .shared
            .store
            .scopes(&self.shared.collection, filter)
            .await?
            .into_iter()
            .filter_map(|s| s.scope.relative_to(&filter.scope))
            .map(|s| s.to_string())
            .collect();
        let input = serde_json::json!({"question": text, "scopes": known_scopes});
        let reply = self
            .ask(
                "memory query analysis",
                prompts::ANALYZE_SYSTEM,
                input.to_string(),
                prompts::query_analysis_format(),
            )
            .await?;
        let analysis: QueryAnalysis = prompts::parse_reply("memory query analysis", &reply)?;
        let searches = plan_searches(text, &analysis, filter);
        let rounds = futures::future::try_join_all(
            searches
                .iter()
                .map(|(query, narrowed)| self.shallow(query, narrowed, limit)),
        )
        .await?;
        let mut merged = merge(rounds);
        let confident = merged
            .first()
            .is_some_and(|best| best.score >= self.shared.config.confidence_threshold_low);
        if !confident && self.shared.config.exploration_budget > 0 && !analysis.keywords.is_empty()
        {
            // One wider look: the keywords alone, over the whole requested scope and time.
            let keywords = analysis.keywords.join(" ");
            let explored = self.shallow(&keywords, filter, limit).await?;
            merged = merge(vec![merged, explored]);
        }
        Ok(merged)
    }
}

/// The searches a deep recall runs: the question (and, for a complex one, the model's
/// sub-queries), in each suggested scope, from the suggested date. A suggested scope is read
/// below the requested one, so the model can narrow a recall but never widen it; scopes that do
/// not parse are not searched.
fn plan_searches(
    text: &str,
    analysis: &QueryAnalysis,
    filter: &RecordFilter,
) -> Vec<(String, RecordFilter)> {
    let mut queries = vec![text.to_string()];
    let complex = analysis
        .complexity
        .as_deref()
        .is_some_and(|c| c.eq_ignore_ascii_case("complex"));
    if complex || analysis.recall_queries.len() > 1 {
        queries.extend(
            analysis
                .recall_queries
                .iter()
                .filter(|q| !q.trim().is_empty())
                .take(3)
                .cloned(),
        );
    }
    let mut scopes: Vec<ScopePath> = analysis
        .suggested_scopes
        .iter()
        .filter_map(|s| ScopePath::parse(s).ok())
        .map(|s| filter.scope.join(&s))
        .collect();
    scopes.dedup();
    if scopes.is_empty() {
        scopes.push(filter.scope.clone());
    }
    let since = analysis.time_filter.as_deref().and_then(parse_date);
    let mut searches = Vec::new();
    for query in &queries {
        for scope in &scopes {
            let narrowed = RecordFilter {
                scope: scope.clone(),
                created_after: since.or(filter.created_after),
                ..filter.clone()
            };
            searches.push((query.clone(), narrowed));
        }
    }
    searches
}

/// An RFC 3339 time or a plain `YYYY-MM-DD` date (its midnight, UTC).
fn parse_date(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text.trim())
        .map(|t| t.with_timezone(&Utc))
        .ok()
        .or_else(|| {
            NaiveDate::parse_from_str(text.trim(), "%Y-%m-%d")
                .ok()
                .and_then(|d| d.and_hms_opt(0, 0, 0))
                .map(|t| t.and_utc())
        })
}

/// The matches of several searches, each record once (its best score), best first.
fn merge(rounds: Vec<Vec<MemoryMatch>>) -> Vec<MemoryMatch> {
    let mut best: Vec<MemoryMatch> = Vec::new();
    for found in rounds.into_iter().flatten() {
        match best.iter_mut().find(|m| m.record.id == found.record.id) {
            Some(seen) => {
                if found.score > seen.score {
                    *seen = found;
                }
            }
            None => best.push(found),
        }
    }
    best.sort_by(|a, b| b.score.total_cmp(&a.score));
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_can_narrow_a_recall_but_not_widen_it() {
        let filter = RecordFilter::scope(ScopePath::parse("/tenant/1").unwrap());
        let analysis = QueryAnalysis {
            suggested_scopes: vec!["/../2".into(), "/notes".into()],
            time_filter: Some("2026-01-02".into()),
            ..QueryAnalysis::default()
        };
        let searches = plan_searches("what did we decide", &analysis, &filter);
        assert_eq!(searches.len(), 1);
        assert_eq!(searches[0].1.scope.to_string(), "/tenant/1/notes");
        assert_eq!(
            searches[0].1.created_after.map(|t| t.to_rfc3339()),
            Some("2026-01-02T00:00:00+00:00".to_string())
        );
    }

    #[test]
    fn complex_questions_add_the_sub_queries() {
        let filter = RecordFilter::scope(ScopePath::root());
        let analysis = QueryAnalysis {
            complexity: Some("complex".into()),
            recall_queries: vec!["budget".into(), "".into(), "deadline".into()],
            ..QueryAnalysis::default()
        };
        let queries: Vec<String> = plan_searches("q", &analysis, &filter)
            .into_iter()
            .map(|(q, _)| q)
            .collect();
        assert_eq!(queries, ["q", "budget", "deadline"]);
    }
}
