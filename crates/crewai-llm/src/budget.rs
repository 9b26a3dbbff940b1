//! What a spending limit says when it refuses a call: the payload of
//! [`LlmError::BudgetExceeded`](crate::LlmError::BudgetExceeded).
//!
//! The limits themselves and the ledger they are checked against belong to the run
//! (crewai-core's `UsageTracker` and its budget layer); the refusal is a model-call error, so
//! its type lives here, beside [`crate::LlmError`], and every caller can match on it.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Which limit of a budget a call would have gone over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetLimit {
    /// `max_cost_usd`.
    Cost,
    /// `max_tokens`.
    Tokens,
}

/// A call was not made because it would have gone over the run's budget.
///
/// ```
/// use crewai_llm::{BudgetExceeded, BudgetLimit, LlmError};
/// let refused = LlmError::BudgetExceeded(Box::new(BudgetExceeded {
///     limit: BudgetLimit::Tokens,
///     max: 1000.0,
///     spent: 990.0,
///     next_call: 40.0,
///     model: "gpt-4o-mini".into(),
/// }));
/// assert!(refused.to_string().contains("max_tokens = 1000"));
/// assert!(!refused.is_retryable(), "waiting does not make a budget larger");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
pub struct BudgetExceeded {
    pub limit: BudgetLimit,
    /// The limit as configured (USD or tokens).
    pub max: f64,
    /// What the run had used before the call (USD or tokens).
    pub spent: f64,
    /// The estimated prompt of the call that was not made (USD or tokens).
    pub next_call: f64,
    /// The model of that call.
    pub model: String,
}

impl fmt::Display for BudgetExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.limit {
            BudgetLimit::Cost => write!(
                f,
                "the cost budget max_cost_usd = ${} would be exceeded: ${:.6} spent, and the next call to {} needs about ${:.6} for its prompt alone",
                self.max, self.spent, self.model, self.next_call
            )?,
            BudgetLimit::Tokens => write!(
                f,
                "the token budget max_tokens = {} would be exceeded: {} tokens used, and the next call to {} sends about {} prompt tokens",
                self.max, self.spent, self.model, self.next_call
            )?,
        }
        f.write_str("; raise the limit, then replay from the stopped task to resume")
    }
}
