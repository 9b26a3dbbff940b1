//! The instructions memory gives its model, and the JSON replies it reads back.

use crewai_llm::ResponseFormat;
use serde::Deserialize;
use serde_json::{Value, json};

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

/// Placing statements that are saved without a scope, categories or importance.
pub(crate) const ANALYZE_SAVE_SYSTEM: &str = "You file statements in a memory store. For each \
statement, in the order given, propose: \"scope\", the path it belongs under (reuse one of the \
existing scopes when it fits, else a short new path such as /project/launch; \"/\" when none \
fits), \"categories\" (one to three short lower-case topic words; reuse existing ones when \
they fit) and \"importance\" (0.0 trivial to 1.0 critical: decisions, deadlines and \
preferences rank high, passing remarks low). Reply with JSON only: {\"memories\": [{\"scope\": \
\"/...\", \"categories\": [\"...\"], \"importance\": 0.5}, ...]}, one entry per statement.";

/// A strict JSON schema of one object with these required properties.
fn object(properties: Value) -> Value {
    let required: Vec<Value> = properties
        .as_object()
        .map(|p| p.keys().map(|k| Value::String(k.clone())).collect())
        .unwrap_or_default();
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

fn format(name: &str, schema: Value) -> ResponseFormat {
    ResponseFormat {
        name: name.to_string(),
        schema,
        strict: true,
    }
}

/// The reply [`EXTRACT_SYSTEM`] asks for, as the provider's structured-output schema.
pub(crate) fn extract_format() -> ResponseFormat {
    format(
        "memory_extraction",
        object(json!({"memories": {"type": "array", "items": {"type": "string"}}})),
    )
}

/// The reply [`ANALYZE_SYSTEM`] asks for.
pub(crate) fn query_analysis_format() -> ResponseFormat {
    let strings = json!({"type": "array", "items": {"type": "string"}});
    format(
        "memory_query_analysis",
        object(json!({
            "keywords": strings,
            "suggested_scopes": strings,
            "complexity": {"type": "string", "enum": ["simple", "complex"]},
            "recall_queries": strings,
            "time_filter": {"type": ["string", "null"]},
        })),
    )
}

/// The reply [`CONSOLIDATE_SYSTEM`] asks for.
pub(crate) fn consolidation_format() -> ResponseFormat {
    let action = object(json!({
        "id": {"type": "string"},
        "action": {"type": "string", "enum": ["keep", "update", "delete"]},
        "content": {"type": ["string", "null"]},
    }));
    format(
        "memory_consolidation",
        object(json!({
            "actions": {"type": "array", "items": action},
            "insert_new": {"type": "boolean"},
        })),
    )
}

/// The reply [`ANALYZE_SAVE_SYSTEM`] asks for.
pub(crate) fn save_analysis_format() -> ResponseFormat {
    let placement = object(json!({
        "scope": {"type": "string"},
        "categories": {"type": "array", "items": {"type": "string"}},
        "importance": {"type": "number"},
    }));
    format(
        "memory_save_analysis",
        object(json!({"memories": {"type": "array", "items": placement}})),
    )
}

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

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct SaveAnalysis {
    pub memories: Vec<Placement>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Placement {
    pub scope: Option<String>,
    pub categories: Vec<String>,
    pub importance: Option<f64>,
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
