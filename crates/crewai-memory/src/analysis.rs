//! Filing statements saved without a scope, categories or importance (CrewAI's save analysis):
//! the memory's model proposes what the options leave open, in one call for the whole batch,
//! seeing the scopes and categories already in use.

use serde_json::json;

use crate::error::MemoryError;
use crate::memory::{Memory, RememberOptions};
use crate::prompts::{self, Placement, SaveAnalysis};
use crate::record::{RecordFilter, ScopePath};

/// How many of the scopes and categories in use the model is shown.
const SHOWN_IN_USE: usize = 30;
/// The most categories a proposal may give one statement.
const MAX_CATEGORIES: usize = 5;

/// Where and how one statement is stored.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Filing {
    /// From the store's root.
    pub scope: ScopePath,
    pub categories: Vec<String>,
    pub importance: f64,
}

impl Memory {
    /// One filing per statement: what `options` give, and for what they leave open (the scope
    /// when it is the view's root, no categories, no importance) the model's proposal, when
    /// the memory has a model. A proposed scope is read below `scope` (never outside it); a
    /// failed analysis is reported and the statements are filed with the defaults, so a save
    /// never fails for it.
    pub(crate) async fn file(
        &self,
        contents: &[String],
        options: &RememberOptions,
        scope: &ScopePath,
    ) -> Vec<Filing> {
        let default = Filing {
            scope: scope.clone(),
            categories: options.categories.clone(),
            importance: options
                .importance
                .unwrap_or(self.shared.config.default_importance),
        };
        let open_scope = options.scope.is_root();
        let open_categories = options.categories.is_empty();
        let open_importance = options.importance.is_none();
        if self.llm.is_none() || !(open_scope || open_categories || open_importance) {
            return vec![default; contents.len()];
        }
        let placements = match self.analyze_for_save(contents, scope).await {
            Ok(analysis) => analysis.memories,
            Err(error) => {
                tracing::warn!(
                    error = crewai_llm::error_chain(&error),
                    "memory save analysis failed; the statements keep the default scope, \
                     categories and importance"
                );
                Vec::new()
            }
        };
        let mut placements = placements.into_iter();
        contents
            .iter()
            .map(|_| {
                let Some(proposal) = placements.next() else {
                    return default.clone();
                };
                Filing {
                    scope: match proposal.scope.as_deref().map(ScopePath::parse) {
                        Some(Ok(proposed)) if open_scope => scope.join(&proposed),
                        _ => scope.clone(),
                    },
                    categories: if open_categories {
                        categories_of(&proposal)
                    } else {
                        default.categories.clone()
                    },
                    importance: match proposal.importance {
                        Some(importance) if open_importance && importance.is_finite() => {
                            importance.clamp(0.0, 1.0)
                        }
                        _ => default.importance,
                    },
                }
            })
            .collect()
    }

    async fn analyze_for_save(
        &self,
        contents: &[String],
        scope: &ScopePath,
    ) -> Result<SaveAnalysis, MemoryError> {
        let store = &self.shared.store;
        let collection = &self.shared.collection;
        let within = RecordFilter::everything_in(scope.clone());
        let (scopes, categories) = futures::try_join!(
            store.scopes(collection, &within),
            store.categories(collection, &within),
        )?;
        let scopes: Vec<String> = scopes
            .into_iter()
            .filter_map(|s| s.scope.relative_to(scope))
            .map(|s| s.to_string())
            .take(SHOWN_IN_USE)
            .collect();
        let categories: Vec<String> = categories
            .into_iter()
            .map(|(name, _)| name)
            .take(SHOWN_IN_USE)
            .collect();
        let input = json!({
            "statements": contents,
            "existing_scopes": scopes,
            "existing_categories": categories,
        });
        let reply = self
            .ask(
                "memory save analysis",
                prompts::ANALYZE_SAVE_SYSTEM,
                input.to_string(),
                prompts::save_analysis_format(),
            )
            .await?;
        prompts::parse_reply("memory save analysis", &reply)
    }
}

/// The proposal's categories: trimmed, lower-cased, each once, at most [`MAX_CATEGORIES`].
fn categories_of(proposal: &Placement) -> Vec<String> {
    let mut categories: Vec<String> = Vec::new();
    for category in &proposal.categories {
        let category = category.trim().to_lowercase();
        if !category.is_empty() && !categories.contains(&category) {
            categories.push(category);
        }
    }
    categories.truncate(MAX_CATEGORIES);
    categories
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proposed_categories_are_tidied() {
        let proposal = Placement {
            categories: vec![
                " Launch ".into(),
                "launch".into(),
                "".into(),
                "Dates".into(),
            ],
            ..Placement::default()
        };
        assert_eq!(categories_of(&proposal), ["launch", "dates"]);
    }
}
