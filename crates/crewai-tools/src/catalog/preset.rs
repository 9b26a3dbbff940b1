//! Tools with some arguments given when they are built (`FileReadTool(file_path=...)`).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value};

use crate::tool::{EnvVar, Tool, ToolContext, ToolError, ToolOutput};

/// Whether the model may still give a preset argument itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PresetKind {
    /// The argument is a default: the schema keeps it (optional), a value the model gives wins.
    Default,
    /// The argument is fixed: it leaves the schema, and the preset value is always used.
    Fixed,
}

/// Another tool with some of its arguments given in advance, and a description saying so.
///
/// ```
/// use std::sync::Arc;
/// use crewai_tools::builtin::DirectoryReadTool;
/// use crewai_tools::catalog::{PresetKind, PresetTool};
/// use crewai_tools::Tool;
/// let inner = Arc::new(DirectoryReadTool::new("."));
/// let preset = [("directory".to_string(), serde_json::json!("docs"))].into_iter().collect();
/// let tool = PresetTool::new(inner, preset, PresetKind::Fixed, "Lists the files below docs.");
/// assert_eq!(tool.parameters()["properties"], serde_json::json!({}));
/// ```
pub struct PresetTool {
    inner: Arc<dyn Tool>,
    preset: Map<String, Value>,
    kind: PresetKind,
    description: String,
}

impl std::fmt::Debug for PresetTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PresetTool")
            .field("tool", &self.inner.name())
            .field("preset", &self.preset)
            .field("kind", &self.kind)
            .finish()
    }
}

impl PresetTool {
    pub fn new(
        inner: Arc<dyn Tool>,
        preset: Map<String, Value>,
        kind: PresetKind,
        description: impl Into<String>,
    ) -> Self {
        PresetTool {
            inner,
            preset,
            kind,
            description: description.into(),
        }
    }

    /// The arguments given in advance.
    pub fn preset(&self) -> &Map<String, Value> {
        &self.preset
    }
}

/// `{"type": "string"}` → `{"type": ["string", "null"]}`, so a strict schema can leave it out.
fn nullable(property: &mut Value) {
    let Some(object) = property.as_object_mut() else {
        return;
    };
    match object.get("type").cloned() {
        Some(Value::String(kind)) => {
            object.insert("type".into(), serde_json::json!([kind, "null"]));
        }
        Some(Value::Array(mut kinds)) if !kinds.contains(&Value::from("null")) => {
            kinds.push(Value::from("null"));
            object.insert("type".into(), Value::Array(kinds));
        }
        _ => {}
    }
}

#[async_trait]
impl Tool for PresetTool {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        let mut schema = self.inner.parameters();
        let Some(root) = schema.as_object_mut() else {
            return schema;
        };
        if let Some(Value::Array(required)) = root.get_mut("required") {
            required.retain(|name| !name.as_str().is_some_and(|n| self.preset.contains_key(n)));
        }
        if let Some(Value::Object(properties)) = root.get_mut("properties") {
            for key in self.preset.keys() {
                match self.kind {
                    PresetKind::Fixed => {
                        properties.remove(key);
                    }
                    PresetKind::Default => {
                        if let Some(property) = properties.get_mut(key) {
                            nullable(property);
                        }
                    }
                }
            }
        }
        schema
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let mut args = match args {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => {
                return Err(ToolError::InvalidArguments(format!(
                    "expected an object of arguments, got {other}"
                )));
            }
        };
        for (key, value) in &self.preset {
            let given = args.get(key).is_some_and(|v| !v.is_null());
            if self.kind == PresetKind::Fixed || !given {
                args.insert(key.clone(), value.clone());
            }
        }
        self.inner.run(Value::Object(args), ctx).await
    }

    fn env_vars(&self) -> Vec<EnvVar> {
        self.inner.env_vars()
    }

    fn result_as_answer(&self) -> bool {
        self.inner.result_as_answer()
    }

    fn max_usage_count(&self) -> Option<u32> {
        self.inner.max_usage_count()
    }

    fn cache_result(&self, args: &Value, output: &ToolOutput) -> bool {
        self.inner.cache_result(args, output)
    }
}
