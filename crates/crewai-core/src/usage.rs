//! Token usage, cost and budget bookkeeping: one [`UsageTracker`] per crew kickoff (or per
//! standalone agent run, or per flow) collects every LLM call's usage, prices it with a
//! [`PriceTable`], and sums it in total, per agent role, per task and per model. A [`Budget`] on
//! the tracker stops a run before a call that would go over it. A tracker may have a parent (a
//! crew kicked off inside a flow draws from the flow's ledger): every call counts in both, and
//! both budgets are checked.
//!
//! The checking and the recording happen in the run's model stack ([`crate::llm_stack`]): its
//! budget layer refuses a call with [`crewai_llm::LlmError::BudgetExceeded`] before it is sent, and its
//! events layer records every reply's usage here, for the agent's turns and the task layer's
//! own calls (guardrail judges, the converter) alike.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crewai_llm::{LlmRequest, PriceTable, Usage};
use serde::{Deserialize, Serialize};

/// Usage in total, per agent role, per task name and per model (CrewAI's `usage_metrics`, broken
/// down); every entry carries its `cost_usd`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageSummary {
    pub total: Usage,
    pub by_agent: BTreeMap<String, Usage>,
    pub by_task: BTreeMap<String, Usage>,
    #[serde(default)]
    pub by_model: BTreeMap<String, Usage>,
}

impl UsageSummary {
    /// Adds another summary to this one, entry by entry.
    pub fn add(&mut self, other: &UsageSummary) {
        self.total.add(&other.total);
        for (mine, theirs) in [
            (&mut self.by_agent, &other.by_agent),
            (&mut self.by_task, &other.by_task),
            (&mut self.by_model, &other.by_model),
        ] {
            for (key, usage) in theirs {
                mine.entry(key.clone()).or_default().add(usage);
            }
        }
    }
}

/// Limits on what one run may spend. A limit is checked before every LLM call: the call is not
/// made when what was used so far plus the call's prompt (estimated at four characters a token)
/// would go over it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    /// Total cost in USD (priced with the run's price table).
    pub max_cost_usd: Option<f64>,
    /// Total tokens, prompt and completion.
    pub max_tokens: Option<u64>,
}

impl Budget {
    /// Whether any limit is set.
    pub fn is_limited(&self) -> bool {
        self.max_cost_usd.is_some() || self.max_tokens.is_some()
    }
}

/// Which limit of a [`Budget`] a call would have gone over, and the refusal itself: the
/// payload of [`crewai_llm::LlmError::BudgetExceeded`], defined beside the model-call errors in crewai-llm.
pub use crewai_llm::{BudgetExceeded, BudgetLimit};

/// A shared, cheap-to-clone usage ledger with a price table and an optional budget.
///
/// ```
/// use crewai_core::usage::UsageTracker;
/// use crewai_llm::Usage;
///
/// let tracker = UsageTracker::new();
/// let call = Usage { prompt_tokens: 1000, completion_tokens: 500, total_tokens: 1500, successful_requests: 1, ..Default::default() };
/// let priced = tracker.record_call("gpt-4o-mini", "Researcher", Some("research"), &call);
/// assert!((priced.cost_usd - (1000.0 * 0.15 + 500.0 * 0.60) / 1e6).abs() < 1e-12);
/// tracker.record_call("claude-haiku-4-5", "Writer", None, &call);
/// let summary = tracker.summary();
/// assert_eq!(summary.total.total_tokens, 3000);
/// assert_eq!(summary.by_agent["Researcher"].prompt_tokens, 1000);
/// assert_eq!(summary.by_task.len(), 1);
/// assert_eq!(summary.by_model.len(), 2);
/// assert!(summary.total.cost_usd > priced.cost_usd);
/// ```
#[derive(Debug, Clone)]
pub struct UsageTracker {
    book: Arc<Mutex<UsageSummary>>,
    prices: Arc<PriceTable>,
    budget: Budget,
    /// The first stop this tracker's own budget caused (shared by its clones).
    stop: Arc<Mutex<Option<BudgetExceeded>>>,
    /// The enclosing run's ledger, which every call also counts toward.
    parent: Option<Box<UsageTracker>>,
    /// What earlier attempts of the run spent: counted by the budget, not in this ledger.
    prior_spending: Usage,
}

impl Default for UsageTracker {
    fn default() -> Self {
        UsageTracker {
            book: Arc::default(),
            prices: Arc::new(PriceTable::builtin()),
            budget: Budget::default(),
            stop: Arc::default(),
            parent: None,
            prior_spending: Usage::default(),
        }
    }
}

use crewai_llm::tokens::estimate_prompt_tokens;

impl UsageTracker {
    /// An empty ledger with the built-in prices and no budget.
    pub fn new() -> Self {
        Self::default()
    }

    /// Prices calls with `prices` instead of the built-in table.
    pub fn with_prices(mut self, prices: Arc<PriceTable>) -> Self {
        self.prices = prices;
        self
    }

    /// Stops calls that would go over `budget`.
    pub fn with_budget(mut self, budget: Budget) -> Self {
        self.budget = budget;
        self
    }

    /// Counts every call in `parent` too, and holds calls to its budget as well (`None`: no
    /// parent). A crew kicked off inside a flow gets the flow's tracker this way.
    ///
    /// ```
    /// use crewai_core::usage::{Budget, UsageTracker};
    /// use crewai_llm::Usage;
    ///
    /// let flow = UsageTracker::new().with_budget(Budget { max_tokens: Some(100), ..Default::default() });
    /// let crew = UsageTracker::new().with_parent(Some(flow.clone()));
    /// crew.record_call("gpt-4o-mini", "Writer", None, &Usage { total_tokens: 90, ..Default::default() });
    /// assert_eq!(flow.total().total_tokens, 90);
    /// assert!(crew.check_budget("gpt-4o-mini", 20).is_err(), "the flow's budget applies");
    /// assert!(flow.budget_stop().is_some());
    /// ```
    pub fn with_parent(mut self, parent: Option<UsageTracker>) -> Self {
        self.parent = parent.map(Box::new);
        self
    }

    /// Counts `spent` (what earlier attempts of a resumed run used) toward this tracker's own
    /// budget, without adding it to the ledger: [`UsageTracker::total`] stays this attempt's.
    pub fn with_prior_spending(mut self, spent: Usage) -> Self {
        self.prior_spending = spent;
        self
    }

    /// The price table calls are priced with.
    pub fn prices(&self) -> &PriceTable {
        &self.prices
    }

    /// The run's budget.
    pub fn budget(&self) -> Budget {
        self.budget
    }

    fn lock(&self) -> MutexGuard<'_, UsageSummary> {
        // The ledger holds plain numbers: a panic elsewhere cannot leave it inconsistent.
        self.book
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Adds one already-priced usage for `agent_role` (and `task`, when the call served one),
    /// without a model.
    pub fn record(&self, agent_role: &str, task: Option<&str>, usage: &Usage) {
        add_to(&mut self.lock(), agent_role, task, None, usage);
        if let Some(parent) = &self.parent {
            parent.record(agent_role, task, usage);
        }
    }

    /// Prices one call of `model` and adds it for `agent_role`, `task` and the model; returns the
    /// usage with its `cost_usd`.
    pub fn record_call(
        &self,
        model: &str,
        agent_role: &str,
        task: Option<&str>,
        usage: &Usage,
    ) -> Usage {
        let mut priced = *usage;
        self.prices.price_usage(model, &mut priced);
        self.record_priced(model, agent_role, task, &priced);
        priced
    }

    fn record_priced(&self, model: &str, agent_role: &str, task: Option<&str>, priced: &Usage) {
        add_to(&mut self.lock(), agent_role, task, Some(model), priced);
        if let Some(parent) = &self.parent {
            parent.record_priced(model, agent_role, task, priced);
        }
    }

    /// Adds a whole summary (the usage a resumed run had spent before it stopped) to this
    /// ledger, so the budget counts it.
    pub fn add_summary(&self, spent: &UsageSummary) {
        self.lock().add(spent);
        if let Some(parent) = &self.parent {
            parent.add_summary(spent);
        }
    }

    /// The budget check every LLM call goes through before it is sent (the budget layer of the
    /// run's model stack makes it): whether `request` to `model` may still be made under this
    /// tracker's budget and its parents'.
    pub fn check_request(&self, model: &str, request: &LlmRequest) -> Result<(), BudgetExceeded> {
        self.check_budget(model, estimate_prompt_tokens(model, request))
    }

    /// Whether a call of `model` sending about `prompt_tokens` may still be made, under this
    /// tracker's budget and its parents'.
    pub fn check_budget(&self, model: &str, prompt_tokens: u64) -> Result<(), BudgetExceeded> {
        self.check_own_budget(model, prompt_tokens)
            .inspect_err(|exceeded| {
                self.stop
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get_or_insert_with(|| exceeded.clone());
            })?;
        match &self.parent {
            Some(parent) => parent.check_budget(model, prompt_tokens),
            None => Ok(()),
        }
    }

    /// Whether this tracker or one of its parents has a budget (calls need checking at all).
    pub fn has_budget(&self) -> bool {
        self.budget.is_limited() || self.parent.as_ref().is_some_and(|p| p.has_budget())
    }

    /// The first call this tracker's own budget stopped (a parent's stops are the parent's).
    pub fn budget_stop(&self) -> Option<BudgetExceeded> {
        self.stop.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn check_own_budget(&self, model: &str, prompt_tokens: u64) -> Result<(), BudgetExceeded> {
        if !self.budget.is_limited() {
            return Ok(());
        }
        let mut total = self.total();
        total.add(&self.prior_spending);
        let exceeded = |limit, max: f64, spent: f64, next_call: f64| BudgetExceeded {
            limit,
            max,
            spent,
            next_call,
            model: model.to_string(),
        };
        if let Some(max) = self.budget.max_tokens
            && total.total_tokens + prompt_tokens > max
        {
            return Err(exceeded(
                BudgetLimit::Tokens,
                max as f64,
                total.total_tokens as f64,
                prompt_tokens as f64,
            ));
        }
        if let Some(max) = self.budget.max_cost_usd {
            let next_call = self
                .prices
                .lookup(model)
                .map_or(0.0, |price| price.input_cost(prompt_tokens));
            if total.cost_usd + next_call > max {
                return Err(exceeded(BudgetLimit::Cost, max, total.cost_usd, next_call));
            }
        }
        Ok(())
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

fn add_to(
    book: &mut UsageSummary,
    agent_role: &str,
    task: Option<&str>,
    model: Option<&str>,
    usage: &Usage,
) {
    book.total.add(usage);
    book.by_agent
        .entry(agent_role.to_string())
        .or_default()
        .add(usage);
    if let Some(task) = task {
        book.by_task.entry(task.to_string()).or_default().add(usage);
    }
    if let Some(model) = model {
        book.by_model
            .entry(model.to_string())
            .or_default()
            .add(usage);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(prompt: u64, completion: u64) -> Usage {
        Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: prompt + completion,
            successful_requests: 1,
            ..Default::default()
        }
    }

    #[test]
    fn aggregates_sum_the_priced_calls() {
        let tracker = UsageTracker::new();
        let a = tracker.record_call("gpt-4o-mini", "A", Some("t1"), &call(100, 10));
        let b = tracker.record_call("gpt-4o", "B", Some("t2"), &call(200, 20));
        let summary = tracker.summary();
        assert!((summary.total.cost_usd - (a.cost_usd + b.cost_usd)).abs() < 1e-15);
        assert_eq!(summary.by_model["gpt-4o"].prompt_tokens, 200);
        assert_eq!(summary.by_task["t1"].cost_usd, a.cost_usd);
        assert_eq!(summary.by_agent["B"].cost_usd, b.cost_usd);
    }

    #[test]
    fn token_budget_counts_the_next_prompt() {
        let tracker = UsageTracker::new().with_budget(Budget {
            max_tokens: Some(150),
            ..Default::default()
        });
        assert!(tracker.check_budget("gpt-4o-mini", 100).is_ok());
        tracker.record_call("gpt-4o-mini", "A", None, &call(100, 10));
        assert!(tracker.check_budget("gpt-4o-mini", 40).is_ok());
        let stop = tracker.check_budget("gpt-4o-mini", 41).unwrap_err();
        assert_eq!(
            (stop.limit, stop.spent, stop.next_call),
            (BudgetLimit::Tokens, 110.0, 41.0)
        );
        assert!(stop.to_string().contains("max_tokens = 150"), "{stop}");
    }

    #[test]
    fn cost_budget_uses_the_price_table() {
        let tracker = UsageTracker::new().with_budget(Budget {
            max_cost_usd: Some(0.001),
            ..Default::default()
        });
        tracker.record_call("gpt-4o", "A", None, &call(300, 10)); // $0.00085
        assert!(tracker.check_budget("gpt-4o", 50).is_ok()); // + $0.000125
        let stop = tracker.check_budget("gpt-4o", 100).unwrap_err(); // + $0.00025
        assert_eq!(stop.limit, BudgetLimit::Cost);
        assert!(
            tracker.check_budget("unpriced-model", 10_000).is_ok(),
            "only what was spent counts for an unpriced model"
        );
    }

    #[test]
    fn a_child_counts_toward_its_parent_and_is_held_to_both_budgets() {
        let parent = UsageTracker::new().with_budget(Budget {
            max_tokens: Some(200),
            ..Default::default()
        });
        let child = UsageTracker::new()
            .with_budget(Budget {
                max_tokens: Some(1000),
                ..Default::default()
            })
            .with_parent(Some(parent.clone()));
        let priced = child.record_call("gpt-4o", "A", Some("t"), &call(100, 50));
        assert_eq!(
            parent.total(),
            priced,
            "the parent gets the child's priced usage"
        );
        assert_eq!(parent.summary().by_task["t"].total_tokens, 150);
        assert!(child.check_budget("gpt-4o", 50).is_ok());
        let stop = child.check_budget("gpt-4o", 51).unwrap_err();
        assert_eq!((stop.max, stop.spent), (200.0, 150.0));
        assert_eq!(parent.budget_stop(), Some(stop));
        assert_eq!(
            child.budget_stop(),
            None,
            "the child's own budget was not the one hit"
        );
    }

    #[test]
    fn a_request_is_checked_by_its_estimated_prompt() {
        let tracker = UsageTracker::new().with_budget(Budget {
            max_tokens: Some(2),
            ..Default::default()
        });
        let request = |text: &str| LlmRequest::new(vec![crewai_llm::Message::user(text)]);
        assert_eq!(estimate_prompt_tokens("m", &request("12345678")), 2);
        assert!(tracker.check_request("m", &request("12345678")).is_ok());
        assert!(tracker.check_request("m", &request("123456789")).is_err());
    }

    #[test]
    fn restored_spending_counts_toward_the_budget() {
        let before = UsageTracker::new();
        before.record_call("gpt-4o-mini", "A", None, &call(100, 10));
        let resumed = UsageTracker::new().with_budget(Budget {
            max_tokens: Some(115),
            ..Default::default()
        });
        resumed.add_summary(&before.summary());
        assert_eq!(resumed.total().total_tokens, 110);
        assert!(resumed.check_budget("gpt-4o-mini", 6).is_err());
    }

    #[test]
    fn prior_spending_counts_toward_the_budget_but_not_the_ledger() {
        let resumed = UsageTracker::new()
            .with_budget(Budget {
                max_tokens: Some(115),
                ..Default::default()
            })
            .with_prior_spending(call(100, 10));
        assert_eq!(resumed.total().total_tokens, 0);
        assert!(resumed.check_budget("gpt-4o-mini", 5).is_ok());
        let refused = resumed.check_budget("gpt-4o-mini", 6).unwrap_err();
        assert_eq!(refused.spent, 110.0);
    }

    #[test]
    fn summaries_add_entry_by_entry() {
        let first = UsageTracker::new();
        first.record_call("gpt-4o-mini", "A", Some("t"), &call(1, 1));
        let second = UsageTracker::new();
        second.record_call("gpt-4o-mini", "A", Some("t"), &call(2, 2));
        let mut total = first.summary();
        total.add(&second.summary());
        assert_eq!(total.by_model["gpt-4o-mini"].total_tokens, 6);
        assert_eq!(total.by_task["t"].successful_requests, 2);
    }
}
