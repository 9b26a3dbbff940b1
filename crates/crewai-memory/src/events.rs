//! What a [`Memory`](crate::Memory) reports while it works, for whoever runs it (a crew turns
//! these into its own events).

use std::time::Duration;

/// One thing memory did. Scopes are full paths from the store's root.
#[derive(Debug, Clone, PartialEq)]
pub enum MemoryEvent {
    SaveStarted {
        scope: String,
        statements: usize,
    },
    SaveCompleted {
        scope: String,
        /// Records now holding the statements (repeats in a batch count once).
        saved: usize,
        elapsed: Duration,
    },
    SaveFailed {
        scope: String,
        /// The error with its causes (`crewai_llm::error_chain`).
        error: String,
    },
    QueryStarted {
        query: String,
        scope: String,
        limit: usize,
    },
    QueryCompleted {
        query: String,
        scope: String,
        results: usize,
        elapsed: Duration,
    },
    QueryFailed {
        query: String,
        scope: String,
        error: String,
    },
}

/// Receives a memory's events, inside the call that caused them: keep it quick (a channel send,
/// a counter), never blocking I/O.
pub trait MemoryObserver: Send + Sync {
    fn on_event(&self, event: &MemoryEvent);
}

impl<F: Fn(&MemoryEvent) + Send + Sync> MemoryObserver for F {
    fn on_event(&self, event: &MemoryEvent) {
        self(event)
    }
}
