//! # crewai-memory
//!
//! CrewAI's unified memory: one [`Memory`] that remembers statements in a `/`-separated scope
//! hierarchy with categories, metadata, importance, a source and a private flag, and recalls them
//! by a composite score (0.5 · similarity + 0.3 · 0.5^(age_days / 30) + 0.2 · importance, weights
//! configurable in [`MemoryConfig`]) over vector and full-text candidates fused by reciprocal
//! rank.
//!
//! Storage is behind the async, batched [`MemoryStore`] trait; every call names its collection
//! and carries a [`RecordFilter`] that the storage itself applies, so a scope is enforced where
//! the data lives. [`SqliteMemoryStore`] is the default: one SQLite file
//! (`<project>/.crewai/memory.db`), with cosine distance from sqlite-vec, searched through an
//! in-memory index of each collection (filter columns, int8 vectors, BM25 posting lists), all of
//! it run on tokio's blocking pool. With the feature `postgres`, `PgMemoryStore` keeps the
//! same records in PostgreSQL with pgvector (`ORDER BY embedding <=> $1` under the filter's
//! `WHERE`, a `tsvector` for words), for processes on several machines sharing one memory.
//!
//! Embeddings come from any [`crewai_llm::embeddings::Embedder`]; the collection records the
//! embedding model and size the first time and refuses a different size later, naming
//! `crewai reset-memories -m`.
//!
//! With a model ([`MemoryBuilder::llm`]), a save that leaves the scope, categories or
//! importance open has the model propose them (one call per batch, as structured output), near
//! duplicates are consolidated by it, and long deep recalls are planned by it.
//!
//! Modules: `record` (scopes, records, filters), `store` (the trait), `sqlite` (the default
//! store), `postgres` (the PostgreSQL store), `memory` (the type and its writes), `analysis` (filing statements saved without a
//! scope, categories or importance), `recall`, `browse` (listings), `slice` (a view over
//! several scopes), `scoring`, `prompts` (what the memory's model is asked), `events` and
//! `tools` (the agent tools `search_memory` and `save_to_memory`).

mod analysis;
mod browse;
mod error;
mod events;
mod memory;
#[cfg(feature = "postgres")]
mod postgres;
mod prompts;
mod recall;
mod record;
mod scoring;
mod slice;
mod sqlite;
mod sqlite_index;
mod store;
mod tools;

pub use browse::{MemoryInfo, RecordQuery, ScopeTree};
pub use error::MemoryError;
pub use events::{MemoryEvent, MemoryObserver};
pub use memory::{DEFAULT_COLLECTION, Memory, MemoryBuilder, MemoryUpdate, RememberOptions};
#[cfg(feature = "postgres")]
pub use postgres::{PgMemoryConfig, PgMemoryStore};
pub use recall::{RecallDepth, RecallQuery};
pub use record::{CollectionInfo, MemoryRecord, RecordFilter, ScopeCount, ScopePath};
pub use scoring::{MatchReason, MemoryConfig, MemoryMatch};
pub use slice::MemorySlice;
pub use sqlite::{MEMORY_DB_FILE, MEMORY_DIR, SqliteMemoryStore};
pub use store::{MemoryStore, VectorHit};
pub use tools::{SAVE_TO_MEMORY_TOOL, SEARCH_MEMORY_TOOL, memory_tools};
