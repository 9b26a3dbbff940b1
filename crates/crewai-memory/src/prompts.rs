//! The instructions memory gives its model, and the JSON replies it reads back.

use serde::Deserialize;

use crate::error::MemoryError;

/// Splitting a text into statements worth remembering.
pub(crate) const EXTRACT_SYSTEM: &str = "You pick out what is worth remembering from a text. \
Write each fact, decision, preference or lesson as one short statement that makes sense on its \
own, without the surrounding text (name things instead of writing \"it\" or \"this\"). Leave out \
greetings, filler and anything only true for a moment. Reply with JSON only: \
{\"memories\": [\"statement\", ...]}; an empty list when nothing is worth keeping.";

/// Turning a recall question into searches.
pub(crate) const ANALYZE_SYSTEM: &str = "You plan searches of a memory store. Given a question \
and the scopes the store holds, reply with JSON only, with these fields: \"keywords\" (the few \
words that matter most), \"suggested_scopes\" (scopes from the list that likely hold the answer; \
empty for all), \"complexity\" (\"simple\" or \"complex\"), \"recall_queries\" (up to three short \
search phrases, each about one part of the question), \"time_filter\" (an ISO-8601 date when only \
memories from that date on matter, else null).";

/// Reconciling a new statement with stored ones that say nearly the same.
pub(crate) const CONSOLIDATE_SYSTEM: &str = "You keep a memory store free of repeats and \
contradictions. You get a new statement and stored records that are close to it, each with its \
id. For each record decide: \"keep\" it as it is, \"update\" it (give the merged text in \
\"content\"), or \"delete\" it (it is wrong now or fully covered by the new statement). Then say \
whether the new statement should still be stored on its own. Reply with JSON only: \
{\"actions\": [{\"id\": \"...\", \"action\": \"keep|update|delete\", \"content\": \"...\"}], \
\"insert_new\": true|false}.";

#[derive(Debug, Deserialize)]
pub(crate) struct Extracted {
    #[serde(default)]
    pub memories: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct QueryAnalysis {
    pub keywords: Vec<String>,
    pub suggested_scopes: Vec<String>,
    pub complexity: Option<String>,
    pub recall_queries: Vec<String>,
    pub time_filter: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ConsolidationPlan {
    #[serde(default)]
    pub actions: Vec<ConsolidationAction>,
    #[serde(default = "yes")]
    pub insert_new: bool,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Deserialize)]
pub(crate) struct ConsolidationAction {
    pub id: String,
    pub action: ActionKind,
    #[serde(default)]
    pub content: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ActionKind {
    Keep,
    Update,
    Delete,
}

/// The JSON object in a model's reply: the whole reply, or the part from its first `{` to its
/// last `}` (models wrap JSON in code fences and sentences).
pub(crate) fn parse_reply<T: serde::de::DeserializeOwned>(
    operation: &'static str,
    reply: &str,
) -> Result<T, MemoryError> {
    let trimmed = reply.trim();
    let candidate = match (trimmed.find('{'), trimmed.rfind('}')) {
        (Some(start), Some(end)) if start < end => &trimmed[start..=end],
        _ => trimmed,
    };
    serde_json::from_str(candidate).map_err(|source| MemoryError::BadReply {
        operation,
        reply: reply.chars().take(500).collect(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_json_out_of_fences_and_prose() {
        let reply = "Sure:\n```json\n{\"memories\": [\"Paris is in France\"]}\n```";
        let parsed: Extracted = parse_reply("extraction", reply).unwrap();
        assert_eq!(parsed.memories, ["Paris is in France"]);
        let err = parse_reply::<Extracted>("extraction", "no json here").unwrap_err();
        assert!(err.to_string().contains("extraction"), "{err}");
    }

    #[test]
    fn a_plan_without_insert_new_inserts() {
        let plan: ConsolidationPlan = parse_reply(
            "consolidation",
            r#"{"actions":[{"id":"a","action":"delete"}]}"#,
        )
        .unwrap();
        assert!(plan.insert_new);
        assert_eq!(plan.actions[0].action, ActionKind::Delete);
    }
}
