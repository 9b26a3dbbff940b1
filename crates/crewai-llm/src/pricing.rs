//! What model calls cost: a table of per-model prices (USD per million tokens) shipped with the
//! crate in `data/prices.yaml`, extendable and overridable from configuration.
//!
//! A call's cost is computed from the usage the provider reported: uncached prompt tokens at
//! `input`, cache reads at `cached_input`, cache writes at `cache_write` and completion tokens at
//! `output`. A model missing from the table costs nothing, and a warning
//! says so once per model and table (a run prices its calls with one table), so a budget is never
//! silently meaningless.
//!
//! ```
//! use crewai_llm::pricing::{ModelPrice, PriceTable};
//! use crewai_llm::Usage;
//!
//! let table = PriceTable::builtin().with_price("my-local-model", ModelPrice::new(1.0, 2.0));
//! let usage = Usage { prompt_tokens: 1_000_000, completion_tokens: 500_000, ..Default::default() };
//! let mini = table.cost("openai/gpt-4o-mini-2024-07-18", &usage).unwrap();
//! assert!((mini - (0.15 + 0.30)).abs() < 1e-12);
//! assert!((table.cost("my-local-model", &usage).unwrap() - 2.0).abs() < 1e-12);
//! assert_eq!(table.cost("never-heard-of-it", &usage), None);
//! ```

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{LazyLock, Mutex, PoisonError};

use serde::{Deserialize, Serialize};

use crate::litellm_models::{self, LitellmModels};
use crate::types::Usage;

/// The built-in price list, as written in the crate.
const BUILTIN_PRICES: &str = include_str!("../data/prices.yaml");

/// The built-in prices, parsed once: constant data, never written after it is read.
static BUILTIN: LazyLock<BTreeMap<String, ModelPrice>> = LazyLock::new(|| {
    let table = PriceTable::from_yaml_str(BUILTIN_PRICES).unwrap_or_else(|error| {
        // The shipped file is checked by a unit test; this only guards a broken local edit.
        tracing::error!(
            error = %crate::error_chain(&error),
            "the built-in price table is invalid; every model costs nothing"
        );
        PriceTable::empty()
    });
    table.prices
});

const PER_MILLION: f64 = 1_000_000.0;

/// One model's prices in USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelPrice {
    /// Uncached prompt tokens.
    pub input: f64,
    /// Prompt tokens read from the provider's cache; the input price when not set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input: Option<f64>,
    /// Prompt tokens written to the provider's cache (Anthropic); the input price when not set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<f64>,
    /// Completion tokens, reasoning included.
    pub output: f64,
}

impl ModelPrice {
    /// A price without a cache discount.
    pub fn new(input: f64, output: f64) -> Self {
        ModelPrice {
            input,
            cached_input: None,
            cache_write: None,
            output,
        }
    }

    setters! {
        /// Sets the price of cached prompt tokens.
        pub fn with_cached_input(price: f64) => cached_input = Some(price);
        /// Sets the price of prompt tokens written to the cache.
        pub fn with_cache_write(price: f64) => cache_write = Some(price);
    }

    /// What `usage` costs at these prices, in USD.
    pub fn cost(&self, usage: &Usage) -> f64 {
        let cached = usage.cached_prompt_tokens.min(usage.prompt_tokens);
        let written = usage
            .cache_creation_tokens
            .min(usage.prompt_tokens - cached);
        let uncached = usage.prompt_tokens - cached - written;
        let tokens_cost = uncached as f64 * self.input
            + cached as f64 * self.cached_input.unwrap_or(self.input)
            + written as f64 * self.cache_write.unwrap_or(self.input)
            + usage.completion_tokens as f64 * self.output;
        tokens_cost / PER_MILLION
    }

    /// What `tokens` uncached prompt tokens cost, in USD (for estimating a call before it is made).
    pub fn input_cost(&self, tokens: u64) -> f64 {
        tokens as f64 * self.input / PER_MILLION
    }

    fn problem(&self) -> Option<&'static str> {
        let all = [
            Some(self.input),
            self.cached_input,
            self.cache_write,
            Some(self.output),
        ];
        all.into_iter()
            .flatten()
            .any(|p| !p.is_finite() || p < 0.0)
            .then_some("prices must be finite and not negative")
    }
}

/// A price table could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PriceTableError {
    /// The text is not a table of prices (YAML syntax, an unknown key, a missing price).
    #[error("invalid price table")]
    Syntax(#[source] yaml_serde::Error),
    /// A model's price is negative or not a number.
    #[error("invalid price table: model '{model}': {problem}")]
    Price {
        model: String,
        problem: &'static str,
    },
}

/// Prices per model; [`PriceTable::builtin`] is the table shipped with the crate.
///
/// A table also remembers the models it had no price for, so [`PriceTable::price_usage`] warns
/// about each once per table rather than on every call (a clone starts with what its original
/// had already reported).
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PriceTable {
    prices: BTreeMap<String, ModelPrice>,
    #[serde(skip)]
    reported_unpriced: Mutex<BTreeSet<String>>,
    /// Whether models missing from `prices` are looked up in the generated LiteLLM table
    /// ([`crate::litellm_models`]); only the built-in table (and what is built on it) does.
    #[serde(skip)]
    with_litellm: bool,
}

impl Clone for PriceTable {
    fn clone(&self) -> Self {
        PriceTable {
            prices: self.prices.clone(),
            reported_unpriced: Mutex::new(self.reported().clone()),
            with_litellm: self.with_litellm,
        }
    }
}

/// Tables are equal when their prices are: what they have warned about is not part of them.
impl PartialEq for PriceTable {
    fn eq(&self, other: &Self) -> bool {
        self.prices == other.prices
    }
}

impl PriceTable {
    /// The prices shipped with the crate: `data/prices.yaml` (kept by hand), then for every
    /// other model the table generated from LiteLLM's ([`crate::litellm_models`]).
    pub fn builtin() -> Self {
        PriceTable {
            prices: BUILTIN.clone(),
            reported_unpriced: Mutex::default(),
            with_litellm: true,
        }
    }

    fn reported(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        // A set of names: a panic elsewhere cannot leave it inconsistent.
        self.reported_unpriced
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// A table without any price.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Reads a table written as `model: {input: .., cached_input: .., output: ..}` lines.
    pub fn from_yaml_str(text: &str) -> Result<Self, PriceTableError> {
        let prices: BTreeMap<String, ModelPrice> =
            yaml_serde::from_str(text).map_err(PriceTableError::Syntax)?;
        Self::from_prices(prices)
    }

    /// A table from model names and prices (names are matched without case or provider prefix).
    pub fn from_prices(
        prices: impl IntoIterator<Item = (String, ModelPrice)>,
    ) -> Result<Self, PriceTableError> {
        let mut table = Self::empty();
        for (model, price) in prices {
            if let Some(problem) = price.problem() {
                return Err(PriceTableError::Price { model, problem });
            }
            table.prices.insert(normalise(&model), price);
        }
        Ok(table)
    }

    /// Sets (or replaces) one model's price.
    pub fn with_price(mut self, model: &str, price: ModelPrice) -> Self {
        self.prices.insert(normalise(model), price);
        self
    }

    /// This table with every price of `overrides` set over it.
    pub fn with_overrides(mut self, overrides: &PriceTable) -> Self {
        self.prices
            .extend(overrides.prices.iter().map(|(m, p)| (m.clone(), *p)));
        self
    }

    /// The models the table knows.
    pub fn models(&self) -> impl Iterator<Item = &str> {
        self.prices.keys().map(String::as_str)
    }

    /// The price of `model`: its own entry, else the longest entry it starts with followed by `-`
    /// (a dated or suffixed variant), ignoring case and a `provider/` prefix; then, in the
    /// built-in table, LiteLLM's price for it.
    pub fn lookup(&self, model: &str) -> Option<&ModelPrice> {
        litellm_models::longest_stem(&self.prices, &normalise(model)).or_else(|| {
            self.with_litellm
                .then(|| LitellmModels::get().price(model))
                .flatten()
        })
    }

    /// The name a call of `model` served by `provider` (an [`crate::Llm`]'s `provider()` and
    /// `model()`) is priced and counted under: `model` when the table prices it, else
    /// `provider/model` when that is priced (LiteLLM lists many models only under their
    /// provider: `watsonx/ibm/granite-4-h-small`, `groq/llama-3.3-70b-versatile`), else `model`.
    ///
    /// ```
    /// use crewai_llm::PriceTable;
    /// let prices = PriceTable::builtin();
    /// assert_eq!(prices.priced_name("openai", "gpt-4o-mini"), "gpt-4o-mini");
    /// assert_eq!(prices.priced_name("watsonx", "ibm/granite-4-h-small"), "watsonx/ibm/granite-4-h-small");
    /// assert_eq!(prices.priced_name("custom", "my-model"), "my-model");
    /// ```
    pub fn priced_name<'m>(&self, provider: &str, model: &'m str) -> Cow<'m, str> {
        if self.lookup(model).is_some() {
            return Cow::Borrowed(model);
        }
        let qualified = format!("{provider}/{model}");
        if self.lookup(&qualified).is_some() {
            Cow::Owned(qualified)
        } else {
            Cow::Borrowed(model)
        }
    }

    /// What `usage` on `model` cost, in USD; `None` when the model has no price.
    pub fn cost(&self, model: &str, usage: &Usage) -> Option<f64> {
        self.lookup(model).map(|price| price.cost(usage))
    }

    /// Sets `usage.cost_usd` to what the call cost on `model`. A model without a price costs 0,
    /// and a warning names it (once per model and table). Returns whether the model had a price.
    pub fn price_usage(&self, model: &str, usage: &mut Usage) -> bool {
        match self.cost(model, usage) {
            Some(cost) => {
                usage.cost_usd = cost;
                true
            }
            None => {
                usage.cost_usd = 0.0;
                self.warn_unpriced_once(model);
                false
            }
        }
    }

    /// Whether [`PriceTable::price_usage`] has warned that `model` has no price.
    pub fn has_reported_unpriced(&self, model: &str) -> bool {
        self.reported().contains(model)
    }

    fn warn_unpriced_once(&self, model: &str) {
        let first_time = self.reported().insert(model.to_string());
        if first_time {
            tracing::warn!(
                model,
                "no price is known for this model: its calls are counted as costing $0; add it under `pricing:` in crew.yaml"
            );
        }
    }
}

/// Lowercase, without a `provider/` prefix (`openai/gpt-4o` → `gpt-4o`, `azure/my-deploy` → `my-deploy`).
fn normalise(model: &str) -> String {
    let bare = model.rsplit_once('/').map_or(model, |(_, name)| name);
    bare.trim().to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(prompt: u64, cached: u64, written: u64, completion: u64) -> Usage {
        Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: prompt + completion,
            cached_prompt_tokens: cached,
            cache_creation_tokens: written,
            successful_requests: 1,
            ..Default::default()
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn the_shipped_table_parses_and_covers_the_three_providers() {
        let table = PriceTable::from_yaml_str(BUILTIN_PRICES).unwrap();
        for model in [
            "gpt-4o-mini",
            "gpt-4.1-mini",
            "claude-sonnet-4-5",
            "gemini-2.5-flash",
        ] {
            assert!(table.lookup(model).is_some(), "{model} has a price");
        }
        assert_eq!(PriceTable::builtin(), table);
    }

    #[test]
    fn gpt_4o_mini_arithmetic() {
        let table = PriceTable::builtin();
        // 1000 prompt tokens of which 400 cached, 200 completion tokens.
        let cost = table
            .cost("gpt-4o-mini", &usage(1000, 400, 0, 200))
            .unwrap();
        let expected = (600.0 * 0.15 + 400.0 * 0.075 + 200.0 * 0.60) / 1e6;
        assert!(close(cost, expected), "{cost} != {expected}");
    }

    #[test]
    fn anthropic_cache_writes_and_reads_have_their_own_prices() {
        let table = PriceTable::builtin();
        let cost = table
            .cost(
                "anthropic/claude-sonnet-4-5-20250929",
                &usage(10_000, 6_000, 3_000, 1_000),
            )
            .unwrap();
        let expected = (1_000.0 * 3.0 + 6_000.0 * 0.30 + 3_000.0 * 3.75 + 1_000.0 * 15.0) / 1e6;
        assert!(close(cost, expected), "{cost} != {expected}");
    }

    #[test]
    fn dated_and_prefixed_names_use_the_longest_matching_entry() {
        let table = PriceTable::builtin();
        assert_eq!(
            table.lookup("openai/gpt-4o-mini-2024-07-18"),
            table.lookup("gpt-4o-mini")
        );
        assert_ne!(table.lookup("gpt-4o-mini"), table.lookup("gpt-4o"));
        assert_eq!(table.lookup("GPT-4O-2024-08-06"), table.lookup("gpt-4o"));
        assert!(
            table.lookup("gpt-4omni").is_none(),
            "a prefix must end at a dash"
        );
    }

    #[test]
    fn unknown_models_cost_nothing_and_are_reported_once_per_table() {
        let mut call = usage(100, 0, 0, 10);
        call.cost_usd = 7.0;
        let table = PriceTable::builtin();
        assert!(!table.price_usage("my-finetune-xyz", &mut call));
        assert_eq!(call.cost_usd, 0.0);
        assert!(table.has_reported_unpriced("my-finetune-xyz"));
        assert!(!table.price_usage("my-finetune-xyz", &mut call));
        assert!(!table.has_reported_unpriced("gpt-4o-mini"));
        // The record is the table's: another table (another run) reports the model again.
        assert!(!PriceTable::builtin().has_reported_unpriced("my-finetune-xyz"));
        assert!(table.clone().has_reported_unpriced("my-finetune-xyz"));
        assert_eq!(
            table,
            PriceTable::builtin(),
            "what was reported is not compared"
        );
    }

    #[test]
    fn overrides_replace_and_extend() {
        let overrides = PriceTable::from_yaml_str(
            "gpt-4o-mini: {input: 1, output: 2}\nlocal/llama3: {input: 0.5, output: 0.5}",
        )
        .unwrap();
        let table = PriceTable::builtin().with_overrides(&overrides);
        let call = usage(1_000_000, 500_000, 0, 1_000_000);
        assert!(
            close(table.cost("gpt-4o-mini", &call).unwrap(), 3.0),
            "no cached price: input price applies"
        );
        assert!(close(table.cost("ollama/llama3", &call).unwrap(), 1.0));
    }

    #[test]
    fn negative_or_misspelt_prices_are_rejected() {
        let negative = PriceTable::from_yaml_str("m: {input: -1, output: 1}").unwrap_err();
        assert_eq!(
            crate::error_chain(&negative),
            "invalid price table: model 'm': prices must be finite and not negative"
        );
        let error = PriceTable::from_yaml_str("m: {inptu: 1, output: 1}").unwrap_err();
        let text = crate::error_chain(&error);
        assert!(
            text.starts_with("invalid price table: ") && text.contains("inptu"),
            "{text}"
        );
    }

    #[test]
    fn summed_usage_sums_cost() {
        let mut total = Usage {
            cost_usd: 0.25,
            ..Default::default()
        };
        total.add(&Usage {
            cost_usd: 0.5,
            ..Default::default()
        });
        assert!(close(total.cost_usd, 0.75));
    }
}
