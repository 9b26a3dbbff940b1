//! [`MemorySlice`]: CrewAI's view over several scopes at once (an agent reading its own
//! memories, its team's and a shared library together), read-only unless asked otherwise.

use std::collections::BTreeMap;

use crate::browse::MemoryInfo;
use crate::error::MemoryError;
use crate::memory::{Memory, RememberOptions};
use crate::recall::RecallQuery;
use crate::record::{MemoryRecord, ScopePath};
use crate::scoring::MemoryMatch;

/// A view over several scopes of one memory, made by [`Memory::slice`]. A recall searches every
/// scope of the slice and returns the best matches of them all; a write must name a scope
/// inside one of the slice's, and is refused when the slice is read-only. Nothing outside the
/// slice's scopes can be read or written through it.
///
/// ```
/// use std::sync::Arc;
/// use crewai_llm::embeddings::HashEmbedder;
/// use crewai_memory::{Memory, RecallQuery, RememberOptions, ScopePath, SqliteMemoryStore};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let store = Arc::new(SqliteMemoryStore::in_memory().unwrap());
/// let memory = Memory::builder(store, Arc::new(HashEmbedder::new(128))).build();
/// let at = |scope: &str| RememberOptions::default().scope(ScopePath::parse(scope).unwrap());
/// memory.remember("Invoices are due on the 5th", at("/team/finance")).await.unwrap();
/// memory.remember("The office closes at 6pm", at("/shared")).await.unwrap();
/// memory.remember("Salaries are confidential", at("/hr")).await.unwrap();
///
/// let view = memory.slice(&["/team/finance", "/shared"], Vec::new(), true).unwrap();
/// let found = view.recall(RecallQuery::new("when are invoices due and when does the office close").shallow()).await.unwrap();
/// assert!(found.iter().all(|m| !m.record.content.contains("Salaries")));
/// assert!(view.remember("A new fact", at("/shared")).await.is_err(), "read-only");
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct MemorySlice {
    /// The memory the slice was made from: scopes given to and returned by the slice are
    /// relative to its root.
    base: Memory,
    /// One view per scope of the slice.
    views: Vec<Memory>,
    categories: Vec<String>,
    read_only: bool,
}

impl Memory {
    /// A view over `scopes` (relative to this memory's root, each checked as
    /// [`Memory::scope`] checks it) whose recalls keep to `categories` when the query names
    /// none; `read_only` refuses every write through it (CrewAI's default is read-only).
    pub fn slice(
        &self,
        scopes: &[&str],
        categories: Vec<String>,
        read_only: bool,
    ) -> Result<MemorySlice, MemoryError> {
        if scopes.is_empty() {
            return Err(MemoryError::InvalidInput {
                field: "scopes",
                reason: "a slice needs at least one scope".to_string(),
            });
        }
        let mut views: Vec<Memory> = Vec::with_capacity(scopes.len());
        for scope in scopes {
            let view = self.scope(scope)?;
            if !views.iter().any(|v| v.root == view.root) {
                views.push(view);
            }
        }
        Ok(MemorySlice {
            base: self.clone(),
            views,
            categories,
            read_only,
        })
    }
}

impl MemorySlice {
    /// The slice's scopes, relative to the root of the memory it was made from.
    pub fn scopes(&self) -> Vec<ScopePath> {
        self.views.iter().map(|v| self.relative(&v.root)).collect()
    }

    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    fn relative(&self, absolute: &ScopePath) -> ScopePath {
        absolute.relative_to(&self.base.root).unwrap_or_default()
    }

    /// The best `query.limit` matches across the slice's scopes (each searched for twice as
    /// many, so one crowded scope does not push the others out), each record once. The query's
    /// scope, when set, is read inside each of the slice's scopes.
    pub async fn recall(&self, query: RecallQuery) -> Result<Vec<MemoryMatch>, MemoryError> {
        let limit = query.limit;
        let mut per_scope = query;
        per_scope.limit = limit.saturating_mul(2);
        if per_scope.categories.is_empty() {
            per_scope.categories = self.categories.clone();
        }
        let rounds = futures::future::try_join_all(
            self.views.iter().map(|view| view.recall(per_scope.clone())),
        )
        .await?;
        let mut best: Vec<MemoryMatch> = Vec::new();
        for (view, found) in self.views.iter().zip(rounds) {
            for mut found in found {
                // Each view shows scopes from its own root; the slice shows them from the base's.
                found.record.scope = self.relative(&view.root.join(&found.record.scope));
                match best.iter_mut().find(|m| m.record.id == found.record.id) {
                    Some(seen) if found.score > seen.score => *seen = found,
                    Some(_) => {}
                    None => best.push(found),
                }
            }
        }
        best.sort_by(|a, b| b.score.total_cmp(&a.score));
        best.truncate(limit);
        Ok(best)
    }

    /// Stores a statement in `options.scope`, which must lie inside one of the slice's scopes.
    pub async fn remember(
        &self,
        content: &str,
        options: RememberOptions,
    ) -> Result<MemoryRecord, MemoryError> {
        let (view, options) = self.writer_for(options)?;
        let mut record = view.remember(content, options).await?;
        record.scope = self.relative(&view.root.join(&record.scope));
        Ok(record)
    }

    /// Stores statements in `options.scope`, which must lie inside one of the slice's scopes.
    pub async fn remember_many(
        &self,
        contents: &[String],
        options: RememberOptions,
    ) -> Result<Vec<MemoryRecord>, MemoryError> {
        let (view, options) = self.writer_for(options)?;
        let mut records = view.remember_many(contents, options).await?;
        for record in &mut records {
            record.scope = self.relative(&view.root.join(&record.scope));
        }
        Ok(records)
    }

    /// The view that holds `options.scope`, with the scope made relative to it.
    fn writer_for(
        &self,
        options: RememberOptions,
    ) -> Result<(&Memory, RememberOptions), MemoryError> {
        if self.read_only {
            return Err(MemoryError::ReadOnly {
                operation: "remember (the slice is read-only)",
            });
        }
        let target = self.base.absolute(&options.scope);
        let holder = self
            .views
            .iter()
            .filter_map(|view| Some((view, target.relative_to(&view.root)?)))
            // The innermost scope holding it, so its records are presented from there.
            .max_by_key(|(view, _)| view.root.segments().len());
        let Some((view, inside)) = holder else {
            return Err(MemoryError::InvalidInput {
                field: "scope",
                reason: format!(
                    "{} is outside the slice's scopes ({})",
                    options.scope,
                    self.scopes()
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        };
        Ok((
            view,
            RememberOptions {
                scope: inside,
                ..options
            },
        ))
    }

    /// Every scope directly below each of the slice's scopes that holds records, relative to
    /// the base memory's root, sorted, each once.
    pub async fn list_scopes(&self) -> Result<Vec<ScopePath>, MemoryError> {
        let mut all = Vec::new();
        for view in &self.views {
            for child in view.list_scopes(&ScopePath::root()).await? {
                all.push(self.relative(&view.root.join(&child)));
            }
        }
        all.sort();
        all.dedup();
        Ok(all)
    }

    /// The categories of the slice's records with their counts, summed over its scopes.
    pub async fn list_categories(&self) -> Result<Vec<(String, usize)>, MemoryError> {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for view in &self.views {
            for (category, count) in view.list_categories(&Default::default()).await? {
                *counts.entry(category).or_default() += count;
            }
        }
        Ok(counts.into_iter().collect())
    }

    /// The summary of each of the slice's scopes, in the slice's order.
    pub async fn info(&self) -> Result<Vec<MemoryInfo>, MemoryError> {
        futures::future::try_join_all(self.views.iter().map(Memory::info)).await
    }

    /// Waits for the background writes of the memory the slice was made from.
    pub async fn drain_writes(&self) -> Result<usize, MemoryError> {
        self.base.drain_writes().await
    }
}
