//! The prices and context windows of the models LiteLLM knows, generated from the
//! `model_prices_and_context_window` JSON of the `litellm` package by
//! `scripts/litellm_models.py` (its version and sha256 are in the file's `source`). They back
//! [`crate::pricing`] and [`crate::context_window`] for every model the hand-kept tables
//! (`data/prices.yaml`, the providers' descriptors) do not name, so cost, `max_cost_usd` and
//! context trimming work on groq, mistral, deepseek, bedrock, … models too.
//!
//! ```
//! use crewai_llm::litellm_models::{LitellmModels, source};
//! let models = LitellmModels::get();
//! assert!(models.price("groq/openai/gpt-oss-120b").is_some());
//! assert!(models.context_window("mistral/mistral-large-latest").is_some());
//! assert_eq!(source().package, "litellm");
//! ```

use std::collections::BTreeMap;
use std::sync::LazyLock;

use serde::Deserialize;

use crate::pricing::ModelPrice;

const GENERATED: &str = include_str!("../data/litellm_models.json");

/// Where the table came from.
#[derive(Debug, Clone, Deserialize)]
pub struct TableSource {
    pub package: String,
    pub version: String,
    pub file: String,
    pub sha256: String,
}

#[derive(Deserialize)]
struct Generated {
    source: TableSource,
    models: BTreeMap<String, GeneratedModel>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GeneratedModel {
    input: f64,
    output: f64,
    cached_input: Option<f64>,
    cache_write: Option<f64>,
    context_window: Option<u64>,
}

/// The generated table, parsed once (constant data).
pub struct LitellmModels {
    source: TableSource,
    prices: BTreeMap<String, ModelPrice>,
    windows: BTreeMap<String, u64>,
}

static TABLE: LazyLock<LitellmModels> = LazyLock::new(|| {
    match serde_json::from_str::<Generated>(GENERATED) {
        Ok(generated) => LitellmModels::from_generated(generated),
        Err(error) => {
            // The shipped file is checked by a unit test; this only guards a broken local edit.
            tracing::error!(%error, "the generated LiteLLM model table is invalid; it is not used");
            LitellmModels {
                source: TableSource {
                    package: "litellm".into(),
                    version: "unreadable".into(),
                    file: String::new(),
                    sha256: String::new(),
                },
                prices: BTreeMap::new(),
                windows: BTreeMap::new(),
            }
        }
    }
});

/// Where the shipped table came from (package, version, file and its sha256).
pub fn source() -> &'static TableSource {
    &LitellmModels::get().source
}

impl LitellmModels {
    /// The shipped table.
    pub fn get() -> &'static LitellmModels {
        &TABLE
    }

    fn from_generated(generated: Generated) -> Self {
        let mut prices = BTreeMap::new();
        let mut windows = BTreeMap::new();
        for (name, model) in generated.models {
            let mut price = ModelPrice::new(model.input, model.output);
            if let Some(cached) = model.cached_input {
                price = price.with_cached_input(cached);
            }
            if let Some(write) = model.cache_write {
                price = price.with_cache_write(write);
            }
            if let Some(window) = model.context_window {
                windows.insert(name.clone(), window);
            }
            prices.insert(name, price);
        }
        LitellmModels {
            source: generated.source,
            prices,
            windows,
        }
    }

    /// How many models have a price.
    pub fn len(&self) -> usize {
        self.prices.len()
    }

    /// Whether the table is empty (only when the shipped file could not be read).
    pub fn is_empty(&self) -> bool {
        self.prices.is_empty()
    }

    /// The price of `model`: looked up as written, then without its provider segment, each
    /// by its own name or else its longest dated or suffixed stem.
    pub fn price(&self, model: &str) -> Option<&ModelPrice> {
        find(&self.prices, model)
    }

    /// The context window of `model`, looked up as its price is.
    pub fn context_window(&self, model: &str) -> Option<u64> {
        find(&self.windows, model).copied()
    }
}

/// `model`'s entry in a table keyed by LiteLLM's names: the name as written
/// (`groq/llama-3.3-70b-versatile`), then without its first `provider/` segment for the
/// providers LiteLLM names bare (`openai/gpt-4o` is LiteLLM's `gpt-4o`); for each, the name
/// itself or else its longest dated or suffixed stem (`gpt-4o-2024-08-06` → `gpt-4o`). Case is
/// ignored.
pub(crate) fn find<'t, V>(table: &'t BTreeMap<String, V>, model: &str) -> Option<&'t V> {
    let written = model.trim().to_ascii_lowercase();
    let unprefixed = written.split_once('/').map(|(_, rest)| rest.to_string());
    std::iter::once(written.as_str())
        .chain(unprefixed.as_deref())
        .find_map(|name| longest_stem(table, name))
}

/// `name`'s own entry, else the entry of its longest prefix that ends before a `-`. One map
/// lookup per `-` in the name, not a scan of the table: this runs on every priced model call.
pub(crate) fn longest_stem<'t, V>(table: &'t BTreeMap<String, V>, name: &str) -> Option<&'t V> {
    if let Some(value) = table.get(name) {
        return Some(value);
    }
    name.char_indices()
        .rev()
        .filter(|&(_, c)| c == '-')
        .find_map(|(at, _)| table.get(&name[..at]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_table_reads_and_records_its_source() {
        let parsed: Generated = serde_json::from_str(GENERATED).expect("the shipped table parses");
        assert!(
            parsed.models.len() > 1_000,
            "{} models",
            parsed.models.len()
        );
        assert_eq!(parsed.source.package, "litellm");
        assert_eq!(parsed.source.sha256.len(), 64);
        assert_eq!(LitellmModels::get().len(), parsed.models.len());
        for (name, model) in &parsed.models {
            assert!(
                model.input.is_finite() && model.input >= 0.0,
                "{name}: input {}",
                model.input
            );
            assert!(model.output.is_finite() && model.output >= 0.0, "{name}");
        }
    }

    #[test]
    fn a_model_is_found_as_written_then_bare_then_by_its_stem() {
        let models = LitellmModels::get();
        let mini = models.price("gpt-4o-mini").expect("gpt-4o-mini");
        assert_eq!(models.price("openai/gpt-4o-mini"), Some(mini));
        assert_eq!(models.price("OpenAI/GPT-4o-mini-2099-01-01"), Some(mini));
        assert!(models.price("deepseek/deepseek-chat").is_some());
        assert!(models.price("no-such-provider/no-such-model").is_none());
        assert_eq!(models.context_window("gpt-4o-mini"), Some(128_000));
    }

    #[test]
    fn the_stem_lookup_stops_at_dashes_only() {
        let table: BTreeMap<String, u32> = [("gpt-4".to_string(), 1), ("gpt-4o".to_string(), 2)]
            .into_iter()
            .collect();
        assert_eq!(longest_stem(&table, "gpt-4o-2024"), Some(&2));
        assert_eq!(longest_stem(&table, "gpt-4-turbo"), Some(&1));
        assert_eq!(longest_stem(&table, "gpt-4x"), None);
    }
}
