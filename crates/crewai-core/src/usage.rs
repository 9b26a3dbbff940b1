//! Token usage bookkeeping: one [`UsageTracker`] per crew (or per standalone agent run) collects every
//! LLM call's usage in total, per agent role and per task.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crewai_llm::Usage;
use serde::{Deserialize, Serialize};

/// Usage in total, per agent role and per task name (CrewAI's `usage_metrics`, broken down).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageSummary {
    pub total: Usage,
    pub by_agent: BTreeMap<String, Usage>,
    pub by_task: BTreeMap<String, Usage>,
}

/// A shared, cheap-to-clone usage ledger.
///
/// ```
/// use crewai_core::usage::UsageTracker;
/// use crewai_llm::Usage;
///
/// let tracker = UsageTracker::new();
/// let call = Usage { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15, successful_requests: 1, ..Default::default() };
/// tracker.record("Researcher", Some("research"), &call);
/// tracker.record("Writer", None, &call);
/// let summary = tracker.summary();
/// assert_eq!(summary.total.total_tokens, 30);
/// assert_eq!(summary.by_agent["Researcher"].prompt_tokens, 10);
/// assert_eq!(summary.by_task.len(), 1);
/// ```
#[derive(Debug, Clone, Default)]
pub struct UsageTracker {
    book: Arc<Mutex<UsageSummary>>,
}

impl UsageTracker {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, UsageSummary> {
        // The ledger holds plain numbers: a panic elsewhere cannot leave it inconsistent.
        self.book
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Adds one call's usage for `agent_role` (and `task`, when the call served one).
    pub fn record(&self, agent_role: &str, task: Option<&str>, usage: &Usage) {
        let mut book = self.lock();
        book.total.add(usage);
        book.by_agent
            .entry(agent_role.to_string())
            .or_default()
            .add(usage);
        if let Some(task) = task {
            book.by_task.entry(task.to_string()).or_default().add(usage);
        }
    }

    /// The total so far.
    pub fn total(&self) -> Usage {
        self.lock().total
    }

    /// A copy of the whole ledger.
    pub fn summary(&self) -> UsageSummary {
        self.lock().clone()
    }
}
