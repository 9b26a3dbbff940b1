//! Helpers shared by the integration tests.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};

/// An ordered log of what methods did, shared with their closures.
#[derive(Clone, Default)]
pub struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    pub fn push(&self, entry: impl Into<String>) {
        self.0.lock().unwrap().push(entry.into());
    }

    pub fn entries(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    pub fn count(&self, entry: &str) -> usize {
        self.entries().iter().filter(|e| *e == entry).count()
    }
}

pub fn no_inputs() -> [(&'static str, serde_json::Value); 0] {
    []
}
