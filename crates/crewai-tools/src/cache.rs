//! [`ToolCache`]: tool results shared by a crew's agents, opt-in as in current CrewAI.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Map, Value};

use crate::handle::ToolHandle;
use crate::tool::ToolOutput;

/// Tool results keyed by tool name and canonical arguments (object keys sorted, so
/// `{"a":1,"b":2}` and `{"b":2,"a":1}` hit the same entry). Clones share the entries.
///
/// ```
/// use crewai_tools::{ToolCache, ToolOutput};
/// use serde_json::json;
/// let cache = ToolCache::new();
/// cache.put("multiplier", &json!({"a": 2, "b": 3}), ToolOutput::Text("6".into()));
/// assert_eq!(cache.get("multiplier", &json!({"b": 3, "a": 2})), Some(ToolOutput::Text("6".into())));
/// assert_eq!(cache.get("multiplier", &json!({"a": 3, "b": 3})), None);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ToolCache {
    entries: Arc<Mutex<HashMap<(String, String), ToolOutput>>>,
}

impl ToolCache {
    pub fn new() -> Self {
        ToolCache::default()
    }

    /// The cached result of this call, if any.
    pub fn get(&self, tool_name: &str, args: &Value) -> Option<ToolOutput> {
        let key = (tool_name.to_string(), canonical_json(args));
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
            .cloned()
    }

    /// Stores a result unconditionally.
    pub fn put(&self, tool_name: &str, args: &Value, output: ToolOutput) {
        let key = (tool_name.to_string(), canonical_json(args));
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, output);
    }

    /// Stores a result if the tool's cache decision allows it; returns whether it was stored.
    pub fn put_for(&self, tool: &ToolHandle, args: &Value, output: &ToolOutput) -> bool {
        let allowed = tool.should_cache(args, output);
        if allowed {
            self.put(tool.name(), args, output.clone());
        }
        allowed
    }

    /// The cached result of this call to `tool`, if any.
    pub fn get_for(&self, tool: &ToolHandle, args: &Value) -> Option<ToolOutput> {
        self.get(tool.name(), args)
    }

    pub fn len(&self) -> usize {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn clear(&self) {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

/// JSON with object keys sorted at every level, so equal arguments give equal text.
pub fn canonical_json(value: &Value) -> String {
    sorted(value).to_string()
}

fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(object) => {
            let mut entries: Vec<(&String, &Value)> = object.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let map: Map<String, Value> = entries
                .into_iter()
                .map(|(key, value)| (key.clone(), sorted(value)))
                .collect();
            Value::Object(map)
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DynamicTool;
    use serde_json::json;

    #[test]
    fn keys_are_tool_and_canonical_arguments() {
        let cache = ToolCache::new();
        cache.put(
            "a",
            &json!({"x": {"b": 1, "a": [2, {"d": 1, "c": 0}]}}),
            ToolOutput::Text("hit".into()),
        );
        assert_eq!(
            cache.get("a", &json!({"x": {"a": [2, {"c": 0, "d": 1}], "b": 1}})),
            Some(ToolOutput::Text("hit".into()))
        );
        assert_eq!(
            cache.get("b", &json!({"x": {"b": 1, "a": [2, {"d": 1, "c": 0}]}})),
            None
        );
        assert_eq!(canonical_json(&json!({"b": 1, "a": 2})), r#"{"a":2,"b":1}"#);
    }

    #[test]
    fn clones_share_entries() {
        let cache = ToolCache::new();
        let clone = cache.clone();
        clone.put("t", &json!({}), ToolOutput::Json(json!([1])));
        assert_eq!(cache.len(), 1);
        cache.clear();
        assert!(clone.is_empty());
    }

    #[test]
    fn put_for_honours_the_cache_function() {
        let handle = DynamicTool::new(
            "multiplier",
            "m",
            json!({"type": "object"}),
            |_a, _c| async { Ok(ToolOutput::Text(String::new())) },
        )
        .into_handle()
        .with_cache_function(|args, _| args["first_number"].as_i64().is_some_and(|n| n % 2 == 0));
        let cache = ToolCache::new();
        assert!(cache.put_for(
            &handle,
            &json!({"first_number": 2}),
            &ToolOutput::Text("4".into())
        ));
        assert!(!cache.put_for(
            &handle,
            &json!({"first_number": 3}),
            &ToolOutput::Text("6".into())
        ));
        assert_eq!(
            cache.get_for(&handle, &json!({"first_number": 2})),
            Some(ToolOutput::Text("4".into()))
        );
        assert_eq!(cache.get_for(&handle, &json!({"first_number": 3})), None);
    }
}
