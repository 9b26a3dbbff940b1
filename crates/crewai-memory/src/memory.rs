//! [`Memory`]: CrewAI's unified memory over a [`MemoryStore`] and an embedder. This module holds
//! the type, its builder, the model calls and everything that writes; `recall.rs` reads and
//! `browse.rs` lists.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use chrono::Utc;
use crewai_llm::embeddings::Embedder;
use crewai_llm::{Llm, LlmRequest, Message, ResponseFormat};
use serde_json::{Map, Value};
use tokio::task::JoinHandle;

use crate::error::MemoryError;
use crate::events::{MemoryEvent, MemoryObserver};
use crate::prompts::{self, ActionKind, ConsolidationPlan, Extracted};
use crate::record::{CollectionInfo, MemoryRecord, RecordFilter, ScopePath};
use crate::scoring::{MemoryConfig, cosine};
use crate::store::{MemoryStore, VectorHit};

/// The collection a memory writes to unless told otherwise.
pub const DEFAULT_COLLECTION: &str = "memory";

type PendingWrite = JoinHandle<Result<Vec<MemoryRecord>, MemoryError>>;

pub(crate) struct Shared {
    pub(crate) store: Arc<dyn MemoryStore>,
    pub(crate) config: MemoryConfig,
    pub(crate) collection: String,
    /// The collection's model and size once opened (cleared when a reset drops it).
    opened: Mutex<Option<CollectionInfo>>,
    writes: Mutex<Vec<PendingWrite>>,
}

/// CrewAI's unified memory: statements with a scope, categories, importance and a source,
/// remembered with their embedding and recalled by meaning, words, recency and importance.
///
/// A `Memory` is a view rooted at a scope (`/` unless built with
/// [`MemoryBuilder::root_scope`] or made by [`Memory::scope`]): every scope it takes and
/// returns is relative to that root, and it can neither read nor change anything outside it.
/// Clones share the store, the model and the pending background writes.
///
/// ```
/// use std::sync::Arc;
/// use crewai_llm::embeddings::HashEmbedder;
/// use crewai_memory::{Memory, RecallQuery, RememberOptions, SqliteMemoryStore};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let store = Arc::new(SqliteMemoryStore::in_memory().unwrap());
/// let memory = Memory::builder(store, Arc::new(HashEmbedder::new(128))).build();
/// let tenant = memory.scope("/tenant/1").unwrap();
/// tenant.remember("The customer prefers email", RememberOptions::default()).await.unwrap();
/// let found = tenant.recall(RecallQuery::new("how to contact the customer").shallow()).await.unwrap();
/// assert_eq!(found[0].record.content, "The customer prefers email");
/// // Another tenant sees nothing of it.
/// let other = memory.scope("/tenant/10").unwrap();
/// assert!(other.recall(RecallQuery::new("customer email").shallow()).await.unwrap().is_empty());
/// # });
/// ```
#[derive(Clone)]
pub struct Memory {
    pub(crate) shared: Arc<Shared>,
    pub(crate) root: ScopePath,
    /// Per view, so a run can count the view's embedding calls (a layer around the same
    /// model; see [`Memory::with_embedder`]).
    pub(crate) embedder: Arc<dyn Embedder>,
    /// Per view, so a crew can lend each agent's model (under its run's layers) to the same
    /// store, background writes and events.
    pub(crate) llm: Option<Arc<dyn Llm>>,
    /// Per view too, so each run reports on its own event bus.
    pub(crate) observer: Option<Arc<dyn MemoryObserver>>,
}

impl std::fmt::Debug for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memory")
            .field("root", &self.root.to_string())
            .field("collection", &self.shared.collection)
            .field("embedder", &self.embedder.model())
            .field("llm", &self.llm.as_ref().map(|llm| llm.model().to_string()))
            .finish()
    }
}

/// Builds a [`Memory`].
pub struct MemoryBuilder {
    store: Arc<dyn MemoryStore>,
    embedder: Arc<dyn Embedder>,
    llm: Option<Arc<dyn Llm>>,
    config: MemoryConfig,
    collection: String,
    root: ScopePath,
    observer: Option<Arc<dyn MemoryObserver>>,
}

impl MemoryBuilder {
    crewai_llm::setters! {
        /// The model that extracts statements, analyses deep recalls and consolidates.
        pub fn llm(llm: Arc<dyn Llm>) => llm = Some(llm);
        pub fn config(config: MemoryConfig) => config = config;
        /// The collection to use in the store (one per embedding model).
        pub fn collection(name: impl Into<String>) => collection = name.into();
        /// The scope this memory is rooted at.
        pub fn root_scope(scope: ScopePath) => root = scope;
        /// Receives the memory's save and query events.
        pub fn observer(observer: Arc<dyn MemoryObserver>) => observer = Some(observer);
    }

    pub fn build(self) -> Memory {
        Memory {
            shared: Arc::new(Shared {
                store: self.store,
                config: self.config,
                collection: self.collection,
                opened: Mutex::new(None),
                writes: Mutex::new(Vec::new()),
            }),
            root: self.root,
            embedder: self.embedder,
            llm: self.llm,
            observer: self.observer,
        }
    }
}

/// How to [`remember`](Memory::remember) a statement. The scope is relative to the memory's
/// root; the importance defaults to [`MemoryConfig::default_importance`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RememberOptions {
    pub scope: ScopePath,
    pub categories: Vec<String>,
    pub metadata: Map<String, Value>,
    pub importance: Option<f64>,
    pub source: Option<String>,
    pub private: bool,
}

impl RememberOptions {
    crewai_llm::setters! {
        pub fn scope(scope: ScopePath) => scope = scope;
        pub fn category(category: impl Into<String>) => |b| b.categories.push(category.into());
        pub fn metadata(key: impl Into<String>, value: Value) => |b| {
            b.metadata.insert(key.into(), value);
        };
        pub fn importance(importance: f64) => importance = Some(importance);
        pub fn source(source: impl Into<String>) => source = Some(source.into());
        pub fn private(private: bool) => private = private;
    }
}

/// What [`Memory::update`] changes (fields left `None` stay as they are).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemoryUpdate {
    pub content: Option<String>,
    pub categories: Option<Vec<String>>,
    pub metadata: Option<Map<String, Value>>,
    pub importance: Option<f64>,
}

impl Memory {
    /// A memory over `store`, embedding with `embedder`.
    pub fn builder(store: Arc<dyn MemoryStore>, embedder: Arc<dyn Embedder>) -> MemoryBuilder {
        MemoryBuilder {
            store,
            embedder,
            llm: None,
            config: MemoryConfig::default(),
            collection: DEFAULT_COLLECTION.to_string(),
            root: ScopePath::root(),
            observer: None,
        }
    }

    /// The same memory rooted at `path` below this one's root (`..` is refused, so a view can
    /// only narrow).
    pub fn scope(&self, path: &str) -> Result<Memory, MemoryError> {
        Ok(Memory {
            shared: self.shared.clone(),
            root: self.root.join(&ScopePath::parse(path)?),
            embedder: self.embedder.clone(),
            llm: self.llm.clone(),
            observer: self.observer.clone(),
        })
    }

    /// The same memory (store, background writes) with `llm` as its model: what a crew does to
    /// extract and consolidate with an agent's model under the run's layers.
    pub fn with_llm(&self, llm: Arc<dyn Llm>) -> Memory {
        Memory {
            llm: Some(llm),
            ..self.clone()
        }
    }

    /// The same memory reporting its events (this view's, and its background writes') to
    /// `observer` instead: what a crew does to put them on the run's event bus.
    pub fn with_observer(&self, observer: Arc<dyn MemoryObserver>) -> Memory {
        Memory {
            observer: Some(observer),
            ..self.clone()
        }
    }

    /// The same memory embedding through `embedder`, a layer around this view's embedder (a
    /// run wraps it to count the calls in its usage and budget). It must be the same model: one
    /// of another name is refused, so a collection never mixes two models' vectors.
    pub fn with_embedder(&self, embedder: Arc<dyn Embedder>) -> Result<Memory, MemoryError> {
        if embedder.model() != self.embedder.model() {
            return Err(MemoryError::InvalidInput {
                field: "embedder",
                reason: format!(
                    "this memory embeds with {:?}; a view cannot switch it to {:?}",
                    self.embedder.model(),
                    embedder.model()
                ),
            });
        }
        Ok(Memory {
            embedder,
            ..self.clone()
        })
    }

    /// The embedder this view embeds with.
    pub fn embedder(&self) -> &Arc<dyn Embedder> {
        &self.embedder
    }

    /// This view's root, from the store's root.
    pub fn root_scope(&self) -> &ScopePath {
        &self.root
    }

    pub fn config(&self) -> &MemoryConfig {
        &self.shared.config
    }

    /// Whether this memory has a model (needed by `extract_memories`, deep recall of long
    /// queries and consolidation).
    pub fn has_llm(&self) -> bool {
        self.llm.is_some()
    }

    /// The model it analyses and extracts with, when it has one.
    pub fn llm(&self) -> Option<&Arc<dyn Llm>> {
        self.llm.as_ref()
    }

    pub(crate) fn absolute(&self, scope: &ScopePath) -> ScopePath {
        self.root.join(scope)
    }

    /// `record` as this view shows it: its scope relative to the root.
    pub(crate) fn present(&self, mut record: MemoryRecord) -> MemoryRecord {
        record.scope = record.scope.relative_to(&self.root).unwrap_or_default();
        record
    }

    pub(crate) fn emit(&self, event: MemoryEvent) {
        if let Some(observer) = &self.observer {
            observer.on_event(&event);
        }
    }

    fn writable(&self, operation: &'static str) -> Result<(), MemoryError> {
        if self.shared.config.read_only {
            Err(MemoryError::ReadOnly { operation })
        } else {
            Ok(())
        }
    }

    /// The collection, opened (its size recorded or checked) on first use.
    pub(crate) async fn collection(&self) -> Result<CollectionInfo, MemoryError> {
        if let Some(info) = self.opened_collection()? {
            return Ok(info);
        }
        let dimensions = match self.embedder.dimensions() {
            Some(n) => n,
            None => self.embed(&["dimension probe".to_string()]).await?[0].len(),
        };
        let info = self
            .shared
            .store
            .open_collection(&self.shared.collection, self.embedder.model(), dimensions)
            .await?;
        *self
            .shared
            .opened
            .lock()
            .map_err(|_| MemoryError::Poisoned)? = Some(info.clone());
        Ok(info)
    }

    fn opened_collection(&self) -> Result<Option<CollectionInfo>, MemoryError> {
        Ok(self
            .shared
            .opened
            .lock()
            .map_err(|_| MemoryError::Poisoned)?
            .clone())
    }

    /// One vector per text, checked against the collection's size.
    pub(crate) async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, MemoryError> {
        let model = self.embedder.model().to_string();
        let vectors =
            self.embedder
                .embed(texts)
                .await
                .map_err(|source| MemoryError::Embedding {
                    model: model.clone(),
                    source,
                })?;
        if vectors.len() != texts.len() {
            return Err(MemoryError::EmbeddingCount {
                model,
                expected: texts.len(),
                got: vectors.len(),
            });
        }
        if let (Some(info), Some(first)) = (self.opened_collection()?, vectors.first())
            && first.len() != info.dimensions
        {
            return Err(MemoryError::DimensionMismatch {
                collection: info.name.clone(),
                stored: info.dimensions,
                stored_model: info.model.clone(),
                found: first.len(),
                model,
            });
        }
        Ok(vectors)
    }

    /// One call to the memory's model with these instructions and this input; the reply's text.
    /// The reply is asked for as JSON of `format`'s schema (the provider's structured output;
    /// the in-process model decodes under it).
    pub(crate) async fn ask(
        &self,
        operation: &'static str,
        system: &str,
        input: String,
        format: ResponseFormat,
    ) -> Result<String, MemoryError> {
        let llm = self.llm.as_ref().ok_or(MemoryError::NoLlm { operation })?;
        let request = LlmRequest::new(vec![Message::system(system), Message::user(input)])
            .with_response_format(format);
        let response = llm
            .call(request)
            .await
            .map_err(|source| MemoryError::Llm { operation, source })?;
        Ok(response.content.unwrap_or_default())
    }

    /// Splits `text` into standalone statements worth remembering (one model call).
    pub async fn extract_memories(&self, text: &str) -> Result<Vec<String>, MemoryError> {
        if text.trim().is_empty() {
            return Ok(Vec::new());
        }
        let reply = self
            .ask(
                "memory extraction",
                prompts::EXTRACT_SYSTEM,
                text.to_string(),
                prompts::extract_format(),
            )
            .await?;
        let extracted: Extracted = prompts::parse_reply("memory extraction", &reply)?;
        Ok(extracted
            .memories
            .into_iter()
            .map(|m| m.trim().to_string())
            .filter(|m| !m.is_empty())
            .collect())
    }

    /// Stores one statement (consolidated with near-duplicates in its scope; see
    /// [`remember_many`](Memory::remember_many)). Returns the record that now holds it.
    pub async fn remember(
        &self,
        content: &str,
        options: RememberOptions,
    ) -> Result<MemoryRecord, MemoryError> {
        let mut saved = self.remember_many(&[content.to_string()], options).await?;
        saved.pop().ok_or_else(|| MemoryError::InvalidInput {
            field: "content",
            reason: "nothing to remember".to_string(),
        })
    }

    /// Stores statements with the same options, embedding them in one batch. Statements of the
    /// batch at least `batch_dedup_threshold` similar to an earlier one are stored once. Each is
    /// then compared with the stored records of its scope: at `batch_dedup_threshold` it is the
    /// same statement (the stored record is kept, its importance raised to the new one's if
    /// higher); at `consolidation_threshold` (up to `consolidation_limit` records) the model, when
    /// there is one, decides which to keep, update or delete and whether to store the new one.
    /// Returns the records holding the statements (new, merged or the existing duplicates).
    pub async fn remember_many(
        &self,
        contents: &[String],
        options: RememberOptions,
    ) -> Result<Vec<MemoryRecord>, MemoryError> {
        self.writable("remember")?;
        let contents: Vec<String> = contents
            .iter()
            .map(|c| c.trim().to_string())
            .filter(|c| !c.is_empty())
            .collect();
        if contents.is_empty() {
            return Err(MemoryError::InvalidInput {
                field: "content",
                reason: "every statement is empty".to_string(),
            });
        }
        if let Some(importance) = options.importance
            && !(0.0..=1.0).contains(&importance)
        {
            return Err(MemoryError::InvalidInput {
                field: "importance",
                reason: format!("{importance} is outside 0.0 to 1.0"),
            });
        }
        let scope = self.absolute(&options.scope);
        self.emit(MemoryEvent::SaveStarted {
            scope: scope.to_string(),
            statements: contents.len(),
        });
        let started = Instant::now();
        let result = self.save_batch(contents, &options, scope.clone()).await;
        match &result {
            Ok(saved) => self.emit(MemoryEvent::SaveCompleted {
                scope: scope.to_string(),
                saved: saved.len(),
                elapsed: started.elapsed(),
            }),
            Err(error) => self.emit(MemoryEvent::SaveFailed {
                scope: scope.to_string(),
                error: crewai_llm::error_chain(error),
            }),
        }
        result.map(|saved| saved.into_iter().map(|r| self.present(r)).collect())
    }

    async fn save_batch(
        &self,
        contents: Vec<String>,
        options: &RememberOptions,
        scope: ScopePath,
    ) -> Result<Vec<MemoryRecord>, MemoryError> {
        self.collection().await?;
        let vectors = self.embed(&contents).await?;
        let mut batch: Vec<(String, Vec<f32>)> = Vec::new();
        for (content, vector) in contents.into_iter().zip(vectors) {
            let repeat = batch.iter().any(|(_, earlier)| {
                cosine(earlier, &vector) >= self.shared.config.batch_dedup_threshold
            });
            if !repeat {
                batch.push((content, vector));
            }
        }
        let kept: Vec<String> = batch.iter().map(|(content, _)| content.clone()).collect();
        let filings = self.file(&kept, options, &scope).await;
        let now = Utc::now();
        let mut saved = Vec::new();
        for ((content, embedding), filing) in batch.into_iter().zip(filings) {
            let record = MemoryRecord {
                id: uuid::Uuid::new_v4().to_string(),
                content,
                scope: filing.scope,
                categories: filing.categories,
                metadata: options.metadata.clone(),
                importance: filing.importance,
                created_at: now,
                last_accessed: now,
                source: options.source.clone(),
                private: options.private,
                embedding,
            };
            saved.push(self.consolidate_and_store(record).await?);
        }
        Ok(saved)
    }

    /// Stores `record`, or folds it into the near-identical stored records of its scope.
    async fn consolidate_and_store(
        &self,
        record: MemoryRecord,
    ) -> Result<MemoryRecord, MemoryError> {
        let config = &self.shared.config;
        let store = &self.shared.store;
        let collection = &self.shared.collection;
        // Only records the new one's source may see, of the same privacy, are its neighbours:
        // consolidation never merges a private statement into a shared one or the reverse.
        let neighbours_filter = RecordFilter {
            scope: record.scope.clone(),
            source: record.source.clone(),
            ..RecordFilter::default()
        };
        let neighbours: Vec<VectorHit> = store
            .vector_search(
                collection,
                &record.embedding,
                &neighbours_filter,
                config.consolidation_limit,
            )
            .await?
            .into_iter()
            .filter(|hit| {
                hit.similarity >= config.consolidation_threshold
                    && hit.record.private == record.private
                    && hit.record.scope == record.scope
            })
            .collect();
        if let Some(same) = neighbours
            .iter()
            .find(|hit| hit.similarity >= config.batch_dedup_threshold)
        {
            let mut existing = same.record.clone();
            existing.last_accessed = record.created_at;
            existing.importance = existing.importance.max(record.importance);
            for category in &record.categories {
                if !existing.categories.contains(category) {
                    existing.categories.push(category.clone());
                }
            }
            store
                .replace(
                    collection,
                    std::slice::from_ref(&existing),
                    &RecordFilter::everything_in(existing.scope.clone()),
                )
                .await?;
            return Ok(existing);
        }
        if neighbours.is_empty() || self.llm.is_none() {
            store
                .insert(collection, std::slice::from_ref(&record))
                .await?;
            return Ok(record);
        }
        self.apply_consolidation(record, neighbours).await
    }

    async fn apply_consolidation(
        &self,
        record: MemoryRecord,
        neighbours: Vec<VectorHit>,
    ) -> Result<MemoryRecord, MemoryError> {
        let store = &self.shared.store;
        let collection = &self.shared.collection;
        let listed: Vec<Value> = neighbours
            .iter()
            .map(|hit| serde_json::json!({"id": hit.record.id, "content": hit.record.content}))
            .collect();
        let input = serde_json::json!({"new_statement": record.content, "stored": listed});
        let reply = self
            .ask(
                "memory consolidation",
                prompts::CONSOLIDATE_SYSTEM,
                input.to_string(),
                prompts::consolidation_format(),
            )
            .await?;
        let plan: ConsolidationPlan = prompts::parse_reply("memory consolidation", &reply)?;
        let within = RecordFilter::everything_in(record.scope.clone());
        let mut deletions = Vec::new();
        let mut updated = Vec::new();
        for action in plan.actions {
            // The model may only act on the records it was shown.
            let Some(hit) = neighbours.iter().find(|hit| hit.record.id == action.id) else {
                continue;
            };
            match (action.action, action.content) {
                (ActionKind::Delete, _) => deletions.push(hit.record.id.clone()),
                (ActionKind::Update, Some(content)) if !content.trim().is_empty() => {
                    let mut changed = hit.record.clone();
                    changed.content = content.trim().to_string();
                    changed.last_accessed = record.created_at;
                    changed.importance = changed.importance.max(record.importance);
                    updated.push(changed);
                }
                (ActionKind::Update | ActionKind::Keep, _) => {}
            }
        }
        if !updated.is_empty() {
            let texts: Vec<String> = updated.iter().map(|r| r.content.clone()).collect();
            for (changed, vector) in updated.iter_mut().zip(self.embed(&texts).await?) {
                changed.embedding = vector;
            }
            store.replace(collection, &updated, &within).await?;
        }
        if !deletions.is_empty() {
            store.delete(collection, Some(&deletions), &within).await?;
        }
        if plan.insert_new || updated.is_empty() {
            store
                .insert(collection, std::slice::from_ref(&record))
                .await?;
            return Ok(record);
        }
        Ok(updated.swap_remove(0))
    }

    /// Like [`remember_many`](Memory::remember_many), on a background task: returns at once;
    /// [`drain_writes`](Memory::drain_writes) waits for it and reports its failure. Needs a
    /// tokio runtime.
    pub fn remember_background(
        &self,
        contents: Vec<String>,
        options: RememberOptions,
    ) -> Result<(), MemoryError> {
        self.writable("remember")?;
        let runtime =
            tokio::runtime::Handle::try_current().map_err(|e| MemoryError::InvalidInput {
                field: "runtime",
                reason: format!("background writes need a tokio runtime: {e}"),
            })?;
        let memory = self.clone();
        let handle = runtime.spawn(async move { memory.remember_many(&contents, options).await });
        self.shared
            .writes
            .lock()
            .map_err(|_| MemoryError::Poisoned)?
            .push(handle);
        Ok(())
    }

    /// Waits for every background write started so far (by any clone); returns how many
    /// finished, or the first failure (after waiting for all of them).
    pub async fn drain_writes(&self) -> Result<usize, MemoryError> {
        let pending: Vec<PendingWrite> = std::mem::take(
            &mut *self
                .shared
                .writes
                .lock()
                .map_err(|_| MemoryError::Poisoned)?,
        );
        let count = pending.len();
        let mut first_error = None;
        for outcome in futures::future::join_all(pending).await {
            let failure = match outcome {
                Ok(Ok(_)) => continue,
                Ok(Err(error)) => error,
                Err(join) => MemoryError::Background(join),
            };
            first_error.get_or_insert(MemoryError::BackgroundWrite(Box::new(failure)));
        }
        first_error.map_or(Ok(count), Err)
    }

    /// Deletes these records (those within this view); returns how many.
    pub async fn forget(&self, ids: &[String]) -> Result<usize, MemoryError> {
        self.writable("forget")?;
        self.shared
            .store
            .delete(
                &self.shared.collection,
                Some(ids),
                &RecordFilter::everything_in(self.root.clone()),
            )
            .await
    }

    /// Changes one record of this view (re-embedding it when its content changes).
    pub async fn update(
        &self,
        id: &str,
        update: MemoryUpdate,
    ) -> Result<MemoryRecord, MemoryError> {
        self.writable("update")?;
        let within = RecordFilter::everything_in(self.root.clone());
        let mut record = self
            .shared
            .store
            .get(&self.shared.collection, &[id.to_string()], &within)
            .await?
            .pop()
            .ok_or_else(|| MemoryError::NotFound { id: id.to_string() })?;
        if let Some(content) = update.content {
            let content = content.trim().to_string();
            if content.is_empty() {
                return Err(MemoryError::InvalidInput {
                    field: "content",
                    reason: "an update cannot empty a record".to_string(),
                });
            }
            self.collection().await?;
            record.embedding = self.embed(std::slice::from_ref(&content)).await?.remove(0);
            record.content = content;
        }
        if let Some(importance) = update.importance {
            if !(0.0..=1.0).contains(&importance) {
                return Err(MemoryError::InvalidInput {
                    field: "importance",
                    reason: format!("{importance} is outside 0.0 to 1.0"),
                });
            }
            record.importance = importance;
        }
        if let Some(categories) = update.categories {
            record.categories = categories;
        }
        if let Some(metadata) = update.metadata {
            record.metadata = metadata;
        }
        record.last_accessed = Utc::now();
        self.shared
            .store
            .replace(
                &self.shared.collection,
                std::slice::from_ref(&record),
                &within,
            )
            .await?;
        Ok(self.present(record))
    }

    /// Deletes every record in `scope` (relative to this view; `None` for all of it) and returns
    /// how many. Resetting a memory rooted at `/` drops its whole collection, recorded embedding
    /// size included, so another embedder can be used afterwards.
    pub async fn reset(&self, scope: Option<&ScopePath>) -> Result<usize, MemoryError> {
        self.writable("reset")?;
        if self.root.is_root() && scope.is_none_or(ScopePath::is_root) {
            let deleted = self
                .shared
                .store
                .drop_collection(&self.shared.collection)
                .await?;
            *self
                .shared
                .opened
                .lock()
                .map_err(|_| MemoryError::Poisoned)? = None;
            return Ok(deleted);
        }
        let target = self.absolute(scope.unwrap_or(&ScopePath::root()));
        self.shared
            .store
            .delete(
                &self.shared.collection,
                None,
                &RecordFilter::everything_in(target),
            )
            .await
    }
}
