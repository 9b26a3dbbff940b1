//! Listing a memory: records, scopes, categories, the scope tree and a summary.

use serde::Serialize;

use crate::error::MemoryError;
use crate::memory::Memory;
use crate::record::{CollectionInfo, MemoryRecord, RecordFilter, ScopePath};

/// Which records [`Memory::list_records`] and [`Memory::list_categories`] look at.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordQuery {
    /// Relative to the memory's root.
    pub scope: ScopePath,
    pub categories: Vec<String>,
    pub source: Option<String>,
    pub include_private: bool,
    pub limit: usize,
    pub offset: usize,
}

impl Default for RecordQuery {
    fn default() -> Self {
        RecordQuery {
            scope: ScopePath::root(),
            categories: Vec::new(),
            source: None,
            include_private: false,
            limit: 100,
            offset: 0,
        }
    }
}

impl RecordQuery {
    crewai_llm::setters! {
        pub fn scope(scope: ScopePath) => scope = scope;
        pub fn category(category: impl Into<String>) => |b| b.categories.push(category.into());
        pub fn source(source: impl Into<String>) => source = Some(source.into());
        pub fn include_private(include: bool) => include_private = include;
        pub fn limit(limit: usize) => limit = limit;
        pub fn offset(offset: usize) => offset = offset;
    }
}

/// A scope with the records in it and below it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScopeTree {
    /// Relative to the memory's root.
    pub scope: ScopePath,
    /// Records in this scope itself.
    pub records: usize,
    /// Records in this scope and every scope below it.
    pub total: usize,
    pub children: Vec<ScopeTree>,
}

/// A summary of a memory view.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryInfo {
    /// This view's root, from the store's root.
    pub root_scope: ScopePath,
    /// The collection's model and size (`None` before anything was stored).
    pub collection: Option<CollectionInfo>,
    /// Records in the view, private ones included.
    pub records: usize,
    /// Scopes holding records.
    pub scopes: usize,
    pub categories: usize,
    pub newest: Option<MemoryRecord>,
}

impl Memory {
    fn filter_for(&self, query: &RecordQuery) -> RecordFilter {
        RecordFilter {
            scope: self.absolute(&query.scope),
            categories: query.categories.clone(),
            source: query.source.clone(),
            include_private: query.include_private,
            created_after: None,
        }
    }

    /// Records, newest first.
    pub async fn list_records(
        &self,
        query: &RecordQuery,
    ) -> Result<Vec<MemoryRecord>, MemoryError> {
        let records = self
            .shared
            .store
            .list(
                &self.shared.collection,
                &self.filter_for(query),
                query.limit,
                query.offset,
            )
            .await?;
        Ok(records.into_iter().map(|r| self.present(r)).collect())
    }

    /// The categories in use, with how many records carry each, by name.
    pub async fn list_categories(
        &self,
        query: &RecordQuery,
    ) -> Result<Vec<(String, usize)>, MemoryError> {
        self.shared
            .store
            .categories(&self.shared.collection, &self.filter_for(query))
            .await
    }

    /// The scopes directly below `parent` (relative to the root) that hold records somewhere
    /// beneath them, sorted.
    pub async fn list_scopes(&self, parent: &ScopePath) -> Result<Vec<ScopePath>, MemoryError> {
        let under = self.absolute(parent);
        let held = self
            .shared
            .store
            .scopes(
                &self.shared.collection,
                &RecordFilter::everything_in(under.clone()),
            )
            .await?;
        let mut children: Vec<ScopePath> = held
            .iter()
            .filter_map(|s| s.scope.relative_to(&under))
            .filter_map(|rest| rest.segments().first().cloned())
            .map(|segment| parent.join(&ScopePath::parse(&segment).unwrap_or_default()))
            .collect();
        children.dedup();
        Ok(children)
    }

    /// Every scope of this view that holds records, as a tree from the root.
    pub async fn tree(&self) -> Result<ScopeTree, MemoryError> {
        let held = self
            .shared
            .store
            .scopes(
                &self.shared.collection,
                &RecordFilter::everything_in(self.root.clone()),
            )
            .await?;
        let mut root = ScopeTree {
            scope: ScopePath::root(),
            records: 0,
            total: 0,
            children: Vec::new(),
        };
        for count in held {
            let Some(relative) = count.scope.relative_to(&self.root) else {
                continue;
            };
            let mut node = &mut root;
            node.total += count.records;
            for depth in 1..=relative.segments().len() {
                let path = ScopePath::parse(&relative.segments()[..depth].join("/"))?;
                let at = match node.children.iter().position(|c| c.scope == path) {
                    Some(at) => at,
                    None => {
                        node.children.push(ScopeTree {
                            scope: path,
                            records: 0,
                            total: 0,
                            children: Vec::new(),
                        });
                        node.children.len() - 1
                    }
                };
                node = &mut node.children[at];
                node.total += count.records;
            }
            node.records += count.records;
        }
        Ok(root)
    }

    /// How much this view holds, and what its collection was created with.
    pub async fn info(&self) -> Result<MemoryInfo, MemoryError> {
        let store = &self.shared.store;
        let collection = &self.shared.collection;
        let everything = RecordFilter::everything_in(self.root.clone());
        let (info, records, scopes, categories, newest) = futures::try_join!(
            store.collection(collection),
            store.count(collection, &everything),
            store.scopes(collection, &everything),
            store.categories(collection, &everything),
            store.list(collection, &everything, 1, 0),
        )?;
        Ok(MemoryInfo {
            root_scope: self.root.clone(),
            collection: info,
            records,
            scopes: scopes.len(),
            categories: categories.len(),
            newest: newest.into_iter().next().map(|r| self.present(r)),
        })
    }
}
