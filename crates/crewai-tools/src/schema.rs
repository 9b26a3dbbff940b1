//! Argument schemas: generating them from Rust types and shaping them the way CrewAI sends them.

use schemars::JsonSchema;
use serde_json::{Map, Value};

use crate::name::field_title;

/// Keywords whose value is a map from names to schemas (the names keep their order).
const SCHEMA_MAPS: &[&str] = &["properties", "$defs", "definitions", "patternProperties"];
/// Keywords whose value is one schema.
const SCHEMA_VALUES: &[&str] = &[
    "items",
    "additionalItems",
    "not",
    "contains",
    "if",
    "then",
    "else",
];
/// Keywords whose value is a list of schemas.
const SCHEMA_LISTS: &[&str] = &["anyOf", "oneOf", "allOf", "prefixItems"];

/// The argument schema of a Rust type, in the shape pydantic gives CrewAI tools.
///
/// schemars' extras are removed (`$schema`, the type's own `title` and doc `description`, integer
/// `format`s such as `uint32` that providers reject), and every property gets pydantic's title
/// (`first_number` → `"First Number"`).
///
/// ```
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Args {
///     /// The number to double.
///     first_number: i64,
/// }
/// let schema = crewai_tools::schema_for::<Args>();
/// assert_eq!(
///     schema,
///     serde_json::json!({
///         "properties": {"first_number": {
///             "description": "The number to double.", "title": "First Number", "type": "integer"
///         }},
///         "required": ["first_number"],
///         "type": "object"
///     })
/// );
/// ```
pub fn schema_for<T: JsonSchema>() -> Value {
    let generated = schemars::generate::SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<T>();
    let mut schema = generated.to_value();
    tidy_root(&mut schema, false);
    pydantic_shape(&mut schema);
    schema
}

/// Removes the top-level `$schema`, `title` and `description`, and lists `properties` (empty
/// when there are none) in an object schema, as pydantic always does. For a tool's `parameters`
/// (`as_parameters`), a schema without a `type` is an object schema, and `properties` is
/// always listed.
fn tidy_root(schema: &mut Value, as_parameters: bool) {
    let Value::Object(root) = schema else {
        return;
    };
    for key in ["$schema", "title", "description"] {
        root.remove(key);
    }
    if as_parameters && !root.contains_key("type") {
        root.insert("type".into(), Value::String("object".into()));
    }
    if as_parameters || root.get("type").and_then(Value::as_str) == Some("object") {
        root.entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
    }
}

/// Adds pydantic's property titles, drops numeric `format`s and sorts keywords, recursively.
fn pydantic_shape(schema: &mut Value) {
    let Value::Object(object) = schema else {
        return;
    };
    let is_numeric = |kind: &Value| matches!(kind.as_str(), Some("integer" | "number"));
    let numeric = match object.get("type") {
        Some(Value::Array(kinds)) => kinds.iter().any(is_numeric),
        Some(kind) => is_numeric(kind),
        None => false,
    };
    if numeric {
        object.remove("format");
    }
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        for (field, property) in properties.iter_mut() {
            if let Value::Object(property_object) = property
                && !property_object.contains_key("title")
                && !property_object.contains_key("$ref")
            {
                property_object.insert("title".into(), Value::String(field_title(field)));
            }
        }
    }
    for_each_subschema(object, pydantic_shape);
    sort_keywords(object);
}

/// The `parameters` CrewAI sends for a tool: the authored schema with its top-level `title` and
/// `description` removed, every object closed (`additionalProperties: false`) and all of its
/// properties required, as OpenAI's strict mode demands.
///
/// Keywords are ordered as pydantic orders them (alphabetically; property order kept), with
/// `additionalProperties` and a missing `required` appended, so requests match CrewAI's bytes:
///
/// ```
/// use serde_json::json;
/// let strict = crewai_tools::strict_parameters(&json!({
///     "title": "DummyToolSchema",
///     "type": "object",
///     "properties": {"query": {"type": "string", "title": "Query"}}
/// }));
/// assert_eq!(
///     serde_json::to_string(&strict).unwrap(),
///     r#"{"properties":{"query":{"title":"Query","type":"string"}},"type":"object","additionalProperties":false,"required":["query"]}"#
/// );
/// ```
pub fn strict_parameters(schema: &Value) -> Value {
    let mut schema = match schema {
        Value::Object(_) => schema.clone(),
        // A tool without a usable schema takes no arguments.
        _ => serde_json::json!({"properties": {}, "type": "object"}),
    };
    tidy_root(&mut schema, true);
    close_objects(&mut schema);
    schema
}

fn close_objects(schema: &mut Value) {
    let Value::Object(object) = schema else {
        return;
    };
    for_each_subschema(object, close_objects);
    sort_keywords(object);
    if is_object_schema(object) {
        let names: Vec<Value> = object
            .get("properties")
            .and_then(Value::as_object)
            .map(|properties| properties.keys().cloned().map(Value::String).collect())
            .unwrap_or_default();
        // Removed first so it is appended after the sorted keywords, where CrewAI puts it.
        object.remove("additionalProperties");
        object.insert("additionalProperties".into(), Value::Bool(false));
        // `insert` keeps the position of an existing `required`, and appends a new one.
        object.insert("required".into(), Value::Array(names));
    }
}

fn is_object_schema(object: &Map<String, Value>) -> bool {
    match object.get("type") {
        Some(Value::String(kind)) => kind == "object",
        Some(Value::Array(kinds)) => kinds.iter().any(|kind| kind == "object"),
        _ => object.contains_key("properties"),
    }
}

fn for_each_subschema(object: &mut Map<String, Value>, visit: fn(&mut Value)) {
    for (keyword, value) in object.iter_mut() {
        let keyword = keyword.as_str();
        if SCHEMA_MAPS.contains(&keyword) {
            if let Value::Object(children) = value {
                children.values_mut().for_each(visit);
            }
        } else if SCHEMA_VALUES.contains(&keyword) || keyword == "additionalProperties" {
            visit(value);
        } else if SCHEMA_LISTS.contains(&keyword)
            && let Value::Array(children) = value
        {
            children.iter_mut().for_each(visit);
        }
    }
}

fn sort_keywords(object: &mut Map<String, Value>) {
    let mut entries: Vec<(String, Value)> = std::mem::take(object).into_iter().collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    object.extend(entries);
}

/// Resolves a local `$ref` (`#/$defs/Name` or `#/definitions/Name`) against the root schema.
pub(crate) fn resolve_ref<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
    let mut current = schema;
    // Bounded so a self-referencing `$ref` cannot loop forever.
    for _ in 0..16 {
        let Some(reference) = current.get("$ref").and_then(Value::as_str) else {
            return current;
        };
        let Some(pointer) = reference.strip_prefix('#') else {
            return current;
        };
        match root.pointer(pointer) {
            Some(target) => current = target,
            None => return current,
        }
    }
    current
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    /// Multiplies numbers.
    struct MultiplierArgs {
        first_number: u32,
        second_number: i64,
    }

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    struct Entity {
        /// The name of the entity.
        name: String,
    }

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    struct Nested {
        entities: Vec<Entity>,
        limit: Option<u32>,
    }

    #[test]
    fn typed_schema_has_pydantic_shape() {
        let schema = schema_for::<MultiplierArgs>();
        assert_eq!(
            serde_json::to_string(&schema).unwrap(),
            r#"{"properties":{"first_number":{"minimum":0,"title":"First Number","type":"integer"},"second_number":{"title":"Second Number","type":"integer"}},"required":["first_number","second_number"],"type":"object"}"#
        );
    }

    #[test]
    fn strict_matches_crewai_request_bytes() {
        let pydantic = json!({
            "properties": {"query": {"title": "Query", "type": "string"}},
            "required": ["query"],
            "title": "DummyToolSchema",
            "type": "object"
        });
        assert_eq!(
            serde_json::to_string(&strict_parameters(&pydantic)).unwrap(),
            r#"{"properties":{"query":{"title":"Query","type":"string"}},"required":["query"],"type":"object","additionalProperties":false}"#
        );
    }

    #[test]
    fn strict_without_arguments_matches_crewai() {
        let empty = json!({"properties": {}, "title": "FailingToolSchema", "type": "object"});
        assert_eq!(
            serde_json::to_string(&strict_parameters(&empty)).unwrap(),
            r#"{"properties":{},"type":"object","additionalProperties":false,"required":[]}"#
        );
        assert_eq!(
            strict_parameters(&Value::Null),
            strict_parameters(&json!({}))
        );
    }

    #[test]
    fn strict_closes_nested_objects_and_requires_everything() {
        let strict = strict_parameters(&schema_for::<Nested>());
        assert_eq!(strict["required"], json!(["entities", "limit"]));
        assert_eq!(strict["additionalProperties"], json!(false));
        let entity = &strict["$defs"]["Entity"];
        assert_eq!(entity["additionalProperties"], json!(false));
        assert_eq!(entity["required"], json!(["name"]));
        assert_eq!(entity["properties"]["name"]["title"], json!("Name"));
        assert_eq!(
            strict["properties"]["entities"]["items"]["$ref"],
            json!("#/$defs/Entity")
        );
        assert_eq!(
            strict["properties"]["limit"]["type"],
            json!(["integer", "null"])
        );
        assert!(
            strict["properties"]["limit"].get("format").is_none(),
            "no uint32 format"
        );
        assert!(strict.get("title").is_none());
        assert!(strict.get("$schema").is_none());
    }

    #[test]
    fn resolves_local_refs() {
        let schema = schema_for::<Nested>();
        let items = &schema["properties"]["entities"]["items"];
        assert_eq!(resolve_ref(&schema, items)["type"], json!("object"));
    }
}
