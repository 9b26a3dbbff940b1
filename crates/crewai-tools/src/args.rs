//! Turning what a model sent as tool arguments into a value the tool accepts, or into an
//! observation that tells the model exactly what to fix.

use jsonschema::error::{TypeKind, ValidationErrorKind};
use serde_json::{Map, Value};

use crate::repair::repair_json;
use crate::schema::resolve_ref;

/// One thing wrong with the arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgumentProblem {
    /// Where: `query`, `filters.limit`, `items[2]`, or `(arguments)` for the whole object.
    pub field: String,
    pub message: String,
}

/// Arguments a tool cannot run with. The text is written for the model, which gets it as the
/// tool's observation and can retry.
#[derive(Debug, thiserror::Error)]
pub enum ArgumentError {
    /// The text was not JSON, even after repair.
    #[error(
        "The tool arguments are not valid JSON ({reason}). Send a single JSON object. {expected}"
    )]
    Unparseable { reason: String, expected: String },
    /// Valid JSON, but not an object.
    #[error("The tool arguments must be a JSON object, but a JSON {found} was sent. {expected}")]
    NotAnObject {
        found: &'static str,
        expected: String,
    },
    /// The object does not match the schema.
    #[error("{}", describe_problems(.problems, .expected))]
    Invalid {
        problems: Vec<ArgumentProblem>,
        expected: String,
    },
    /// The tool's own schema cannot be used for validation: a bug in the tool, not the model.
    #[error("The tool's argument schema is invalid, so its arguments cannot be checked")]
    InvalidSchema(#[source] Box<jsonschema::ValidationError<'static>>),
}

fn describe_problems(problems: &[ArgumentProblem], expected: &str) -> String {
    let listed: Vec<String> = problems
        .iter()
        .map(|problem| format!("`{}` {}", problem.field, problem.message))
        .collect();
    format!(
        "The tool arguments are invalid: {}. {expected}",
        listed.join("; ")
    )
}

/// Parses, repairs, coerces and validates a model's tool arguments against `schema`.
///
/// - a JSON string where an object is expected is parsed, repairing the usual model mistakes
///   (code fences, trailing commas, single quotes, Python `True`/`False`/`None`, unquoted keys,
///   missing closing brackets); `null` or empty text means no arguments;
/// - a bare value for a tool with exactly one argument is taken as that argument;
/// - scalars are coerced where pydantic's lax mode would (`"5"` → `5` for an integer, `5.0` → `5`,
///   `"true"` → `true`, `"2.5"` → `2.5` for a number); strings are never made from numbers;
/// - `null` for an argument that is not required is dropped, so the tool sees it as absent;
/// - the result is validated with JSON Schema; every problem names the field and what it expects.
///
/// ```
/// use crewai_tools::prepare_arguments;
/// use serde_json::json;
/// let schema = json!({
///     "type": "object",
///     "properties": {"first_number": {"type": "integer"}, "second_number": {"type": "integer"}},
///     "required": ["first_number", "second_number"]
/// });
/// let raw = json!("```json\n{'first_number': '3', 'second_number': 4,}\n```");
/// assert_eq!(prepare_arguments(&schema, &raw).unwrap(), json!({"first_number": 3, "second_number": 4}));
///
/// let error = prepare_arguments(&schema, &json!({"first_number": "three"})).unwrap_err();
/// let text = error.to_string();
/// assert!(text.contains("`first_number` must be an integer"), "{text}");
/// assert!(text.contains("`second_number` is required"), "{text}");
/// ```
pub fn prepare_arguments(schema: &Value, raw: &Value) -> Result<Value, ArgumentError> {
    let mut args = match raw {
        Value::String(text) => parse_argument_text(schema, text)?,
        Value::Null => Value::Object(Map::new()),
        other => other.clone(),
    };
    if !args.is_object() {
        args = wrap_single_argument(schema, args)?;
    }
    coerce(schema, schema, &mut args);
    validate(schema, &args)?;
    Ok(args)
}

fn parse_argument_text(schema: &Value, text: &str) -> Result<Value, ArgumentError> {
    if text.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    match repair_json(text) {
        // Some models encode the arguments twice: `"{\"a\": 1}"`.
        Some(Value::String(inner)) if inner.trim_start().starts_with('{') => repair_json(&inner)
            .ok_or_else(|| unparseable(schema, "a JSON string holding broken JSON")),
        Some(value) => Ok(value),
        None => match single_argument(schema) {
            Some((name, property)) if accepts_type(schema, property, "string") => {
                Ok(Value::Object(Map::from_iter([(
                    name.to_string(),
                    Value::String(text.to_string()),
                )])))
            }
            _ => Err(unparseable(schema, "it could not be parsed or repaired")),
        },
    }
}

fn unparseable(schema: &Value, reason: &str) -> ArgumentError {
    ArgumentError::Unparseable {
        reason: reason.to_string(),
        expected: expected_arguments(schema),
    }
}

fn wrap_single_argument(schema: &Value, value: Value) -> Result<Value, ArgumentError> {
    match single_argument(schema) {
        Some((name, _)) => Ok(Value::Object(Map::from_iter([(name.to_string(), value)]))),
        None => Err(ArgumentError::NotAnObject {
            found: json_type_name(&value),
            expected: expected_arguments(schema),
        }),
    }
}

/// The only property of a schema that has exactly one.
fn single_argument(schema: &Value) -> Option<(&str, &Value)> {
    let properties = schema.get("properties")?.as_object()?;
    let mut iter = properties.iter();
    match (iter.next(), iter.next()) {
        (Some((name, property)), None) => Some((name.as_str(), property)),
        _ => None,
    }
}

fn accepts_type(root: &Value, schema: &Value, wanted: &str) -> bool {
    let schema = resolve_ref(root, schema);
    match schema.get("type") {
        Some(Value::String(kind)) => kind == wanted,
        Some(Value::Array(kinds)) => kinds.iter().any(|kind| kind == wanted),
        _ => ["anyOf", "oneOf"].iter().any(|keyword| {
            schema
                .get(*keyword)
                .and_then(Value::as_array)
                .is_some_and(|branches| {
                    branches
                        .iter()
                        .any(|branch| accepts_type(root, branch, wanted))
                })
        }),
    }
}

fn declared_types(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(kind)) => vec![kind.as_str()],
        Some(Value::Array(kinds)) => kinds.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// Pydantic-style lax coercion of scalars, walking objects and arrays along the schema.
fn coerce(root: &Value, schema: &Value, value: &mut Value) {
    let schema = resolve_ref(root, schema);
    if value.is_null() {
        return;
    }
    let types = declared_types(schema);
    if types.is_empty() {
        // A nullable union: coerce with its one non-null branch.
        let branches: Vec<&Value> = ["anyOf", "oneOf"]
            .iter()
            .filter_map(|keyword| schema.get(*keyword).and_then(Value::as_array))
            .flatten()
            .filter(|branch| declared_types(resolve_ref(root, branch)) != ["null"])
            .collect();
        if let [only] = branches.as_slice() {
            coerce(root, only, value);
        } else if schema.get("properties").is_some() {
            coerce_object(root, schema, value);
        }
        return;
    }
    if types.iter().any(|kind| matches_type(kind, value)) {
        match value {
            Value::Object(_) => coerce_object(root, schema, value),
            Value::Array(items) => {
                if let Some(item_schema) = schema.get("items") {
                    items
                        .iter_mut()
                        .for_each(|item| coerce(root, item_schema, item));
                }
            }
            _ => {}
        }
        return;
    }
    if let Some(coerced) = types.iter().find_map(|kind| coerce_scalar(kind, value)) {
        *value = coerced;
    }
}

fn coerce_object(root: &Value, schema: &Value, value: &mut Value) {
    let Value::Object(object) = value else { return };
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    // Strict definitions make every argument required, so models send `null` for the ones they
    // do not need; to the tool that means "not given".
    object.retain(|name, field| !field.is_null() || required.contains(&name.as_str()));
    for (name, field) in object.iter_mut() {
        if let Some(property) = properties.get(name) {
            coerce(root, property, field);
        }
    }
}

fn matches_type(kind: &str, value: &Value) -> bool {
    match kind {
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "null" => value.is_null(),
        _ => false,
    }
}

fn coerce_scalar(kind: &str, value: &Value) -> Option<Value> {
    match (kind, value) {
        ("integer", Value::String(text)) => {
            let text = text.trim();
            text.parse::<i64>()
                .map(Value::from)
                .or_else(|_| text.parse::<u64>().map(Value::from))
                .ok()
        }
        ("integer", Value::Number(number)) => {
            let float = number.as_f64()?;
            // Pydantic accepts a float only when it has no fractional part.
            (float.fract() == 0.0 && float.abs() < 9.0e15).then(|| Value::from(float as i64))
        }
        ("number", Value::String(text)) => {
            let parsed: f64 = text.trim().parse().ok()?;
            parsed.is_finite().then(|| Value::from(parsed))
        }
        ("boolean", Value::String(text)) => match text.trim().to_ascii_lowercase().as_str() {
            "true" | "t" | "yes" | "y" | "on" | "1" => Some(Value::Bool(true)),
            "false" | "f" | "no" | "n" | "off" | "0" => Some(Value::Bool(false)),
            _ => None,
        },
        ("boolean", Value::Number(number)) => match number.as_u64() {
            Some(0) => Some(Value::Bool(false)),
            Some(1) => Some(Value::Bool(true)),
            _ => None,
        },
        _ => None,
    }
}

fn validate(schema: &Value, args: &Value) -> Result<(), ArgumentError> {
    let validator = jsonschema::validator_for(schema)
        .map_err(|error| ArgumentError::InvalidSchema(Box::new(error.to_owned())))?;
    let mut problems = Vec::new();
    for error in validator.iter_errors(args) {
        let at = field_path(error.instance_path().as_str());
        match error.kind() {
            ValidationErrorKind::Type { kind } => problems.push(ArgumentProblem {
                field: at,
                message: format!(
                    "must be {}, but got {} {}",
                    expected_type_phrase(kind),
                    article_type(error.instance()),
                    short_json(error.instance())
                ),
            }),
            ValidationErrorKind::Required { property } => problems.push(ArgumentProblem {
                field: join_field(
                    &at,
                    &property
                        .as_str()
                        .map_or_else(|| property.to_string(), str::to_string),
                ),
                message: "is required but missing".to_string(),
            }),
            ValidationErrorKind::AdditionalProperties { unexpected } => {
                problems.extend(unexpected.iter().map(|name| ArgumentProblem {
                    field: join_field(&at, name),
                    message: "is not an argument of this tool".to_string(),
                }))
            }
            ValidationErrorKind::Enum { options } => problems.push(ArgumentProblem {
                field: at,
                message: format!(
                    "must be one of {options}, but got {}",
                    short_json(error.instance())
                ),
            }),
            _ => problems.push(ArgumentProblem {
                field: at,
                message: format!("is invalid: {error}"),
            }),
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ArgumentError::Invalid {
            problems,
            expected: expected_arguments(schema),
        })
    }
}

/// `/filters/items/2` → `filters.items[2]`.
fn field_path(pointer: &str) -> String {
    let mut out = String::new();
    for segment in pointer.split('/').skip(1) {
        let segment = segment.replace("~1", "/").replace("~0", "~");
        if segment.chars().all(|c| c.is_ascii_digit()) && !segment.is_empty() && !out.is_empty() {
            out.push_str(&format!("[{segment}]"));
        } else {
            out = join_field(&out, &segment);
        }
    }
    if out.is_empty() {
        ROOT_FIELD.to_string()
    } else {
        out
    }
}

const ROOT_FIELD: &str = "(arguments)";

fn join_field(parent: &str, child: &str) -> String {
    if parent.is_empty() || parent == ROOT_FIELD {
        child.to_string()
    } else {
        format!("{parent}.{child}")
    }
}

fn expected_type_phrase(kind: &TypeKind) -> String {
    let names: Vec<String> = match kind {
        TypeKind::Single(kind) => vec![kind.to_string()],
        TypeKind::Multiple(kinds) => kinds.into_iter().map(|kind| kind.to_string()).collect(),
    };
    let phrased: Vec<String> = names.iter().map(|name| with_article(name)).collect();
    phrased.join(" or ")
}

fn with_article(type_name: &str) -> String {
    match type_name {
        "null" => "null".to_string(),
        name if name.starts_with(['a', 'e', 'i', 'o', 'u']) => format!("an {name}"),
        name => format!("a {name}"),
    }
}

fn json_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(number) if number.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn article_type(value: &Value) -> String {
    with_article(json_type_name(value))
}

fn short_json(value: &Value) -> String {
    const LIMIT: usize = 60;
    let text = value.to_string();
    if text.chars().count() <= LIMIT {
        text
    } else {
        format!("{}…", text.chars().take(LIMIT).collect::<String>())
    }
}

/// "Expected arguments: query (string, required), limit (integer, optional)."
fn expected_arguments(schema: &Value) -> String {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return "This tool takes no arguments: send {}.".to_string();
    };
    if properties.is_empty() {
        return "This tool takes no arguments: send {}.".to_string();
    }
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let listed: Vec<String> = properties
        .iter()
        .map(|(name, property)| {
            let property = resolve_ref(schema, property);
            let kind = type_label(schema, property);
            let need = if required.contains(&name.as_str()) {
                "required"
            } else {
                "optional"
            };
            format!("{name} ({kind}, {need})")
        })
        .collect();
    format!("Expected arguments: {}.", listed.join(", "))
}

fn type_label(root: &Value, schema: &Value) -> String {
    let types = declared_types(schema);
    if !types.is_empty() {
        return types.join(" or ");
    }
    let branches: Vec<String> = ["anyOf", "oneOf"]
        .iter()
        .filter_map(|keyword| schema.get(*keyword).and_then(Value::as_array))
        .flatten()
        .map(|branch| type_label(root, resolve_ref(root, branch)))
        .collect();
    if branches.is_empty() {
        "any".to_string()
    } else {
        branches.join(" or ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn multiplier() -> Value {
        json!({
            "type": "object",
            "properties": {
                "first_number": {"title": "First Number", "type": "integer"},
                "second_number": {"title": "Second Number", "type": "integer"}
            },
            "required": ["first_number", "second_number"],
            "additionalProperties": false
        })
    }

    fn search() -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "limit": {"type": ["integer", "null"]},
                "exact": {"type": "boolean"},
                "weight": {"type": "number"}
            },
            "required": ["query"]
        })
    }

    #[test]
    fn objects_pass_through() {
        let args = json!({"first_number": 2, "second_number": 3});
        assert_eq!(prepare_arguments(&multiplier(), &args).unwrap(), args);
    }

    #[test]
    fn json_strings_are_parsed_and_repaired() {
        let cases = [
            r#"{"first_number": 2, "second_number": 3}"#,
            "```json\n{\"first_number\": 2, \"second_number\": 3}\n```",
            "```\n{\"first_number\": 2, \"second_number\": 3,}\n```",
            "{'first_number': 2, 'second_number': 3}",
            "{first_number: 2, second_number: 3}",
            "{\"first_number\": 2, \"second_number\": 3",
            "Sure! Here you go: {\"first_number\": 2, \"second_number\": 3} Hope that helps.",
            "\"{\\\"first_number\\\": 2, \\\"second_number\\\": 3}\"",
        ];
        for case in cases {
            assert_eq!(
                prepare_arguments(&multiplier(), &json!(case)).unwrap(),
                json!({"first_number": 2, "second_number": 3}),
                "case {case:?}"
            );
        }
    }

    #[test]
    fn python_literals_are_repaired() {
        let raw = json!("{'query': 'rust', 'exact': True, 'limit': None}");
        assert_eq!(
            prepare_arguments(&search(), &raw).unwrap(),
            json!({"query": "rust", "exact": true})
        );
    }

    #[test]
    fn scalars_are_coerced_like_pydantic() {
        let raw = json!({"query": "x", "limit": "5", "exact": "false", "weight": "2.5"});
        assert_eq!(
            prepare_arguments(&search(), &raw).unwrap(),
            json!({"query": "x", "limit": 5, "exact": false, "weight": 2.5})
        );
        assert_eq!(
            prepare_arguments(
                &multiplier(),
                &json!({"first_number": 4.0, "second_number": "7"})
            )
            .unwrap(),
            json!({"first_number": 4, "second_number": 7})
        );
    }

    #[test]
    fn numbers_are_not_turned_into_strings() {
        let error = prepare_arguments(&search(), &json!({"query": 42})).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("`query` must be a string, but got an integer 42"),
            "{error}"
        );
    }

    #[test]
    fn fractional_floats_are_not_integers() {
        let error = prepare_arguments(
            &multiplier(),
            &json!({"first_number": 2.5, "second_number": 1}),
        )
        .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("`first_number` must be an integer, but got a number 2.5"),
            "{error}"
        );
    }

    #[test]
    fn errors_name_field_and_expected_type() {
        let error = prepare_arguments(&multiplier(), &json!({"first_number": "two", "extra": 1}))
            .unwrap_err();
        let ArgumentError::Invalid { problems, .. } = &error else {
            panic!("unexpected {error:?}")
        };
        assert!(
            problems
                .iter()
                .any(|p| p.field == "first_number" && p.message.starts_with("must be an integer"))
        );
        assert!(
            problems
                .iter()
                .any(|p| p.field == "second_number" && p.message == "is required but missing")
        );
        assert!(
            problems
                .iter()
                .any(|p| p.field == "extra" && p.message == "is not an argument of this tool")
        );
        let text = error.to_string();
        assert!(text.contains("Expected arguments: first_number (integer, required), second_number (integer, required)."), "{text}");
    }

    #[test]
    fn nested_fields_are_named_with_their_path() {
        let schema = json!({
            "type": "object",
            "properties": {"filters": {"type": "object", "properties": {
                "tags": {"type": "array", "items": {"type": "string"}}
            }}}
        });
        let error =
            prepare_arguments(&schema, &json!({"filters": {"tags": ["a", 3]}})).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("`filters.tags[1]` must be a string"),
            "{error}"
        );
    }

    #[test]
    fn typed_schemas_with_definitions_are_checked_and_coerced() {
        #[allow(dead_code)]
        #[derive(serde::Deserialize, schemars::JsonSchema)]
        struct Entity {
            name: String,
            weight: u32,
        }
        #[allow(dead_code)]
        #[derive(serde::Deserialize, schemars::JsonSchema)]
        struct Args {
            entities: Vec<Entity>,
        }
        let schema = crate::schema_for::<Args>();
        let args = prepare_arguments(
            &schema,
            &json!({"entities": [{"name": "a", "weight": "3"}]}),
        )
        .unwrap();
        assert_eq!(args, json!({"entities": [{"name": "a", "weight": 3}]}));
        let error = prepare_arguments(&schema, &json!({"entities": [{"weight": -1}]})).unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains("`entities[0].name` is required but missing"),
            "{text}"
        );
        assert!(text.contains("`entities[0].weight` is invalid"), "{text}");
    }

    #[test]
    fn unparseable_text_is_reported() {
        let error = prepare_arguments(&multiplier(), &json!("first=2 second=3")).unwrap_err();
        assert!(
            matches!(error, ArgumentError::Unparseable { .. }),
            "{error:?}"
        );
        assert!(
            error
                .to_string()
                .contains("Expected arguments: first_number"),
            "{error}"
        );
    }

    #[test]
    fn single_argument_tools_accept_bare_values() {
        let schema = json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]});
        assert_eq!(
            prepare_arguments(&schema, &json!("rust async")).unwrap(),
            json!({"query": "rust async"})
        );
        let count =
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
        assert_eq!(
            prepare_arguments(&count, &json!(5)).unwrap(),
            json!({"n": 5})
        );
        assert_eq!(
            prepare_arguments(&count, &json!("5")).unwrap(),
            json!({"n": 5})
        );
    }

    #[test]
    fn non_objects_are_rejected_for_multi_argument_tools() {
        let error = prepare_arguments(&multiplier(), &json!([1, 2])).unwrap_err();
        assert!(
            matches!(error, ArgumentError::NotAnObject { found: "array", .. }),
            "{error:?}"
        );
    }

    #[test]
    fn empty_and_null_mean_no_arguments() {
        let none = json!({"type": "object", "properties": {}});
        assert_eq!(prepare_arguments(&none, &Value::Null).unwrap(), json!({}));
        assert_eq!(prepare_arguments(&none, &json!("  ")).unwrap(), json!({}));
        let error = prepare_arguments(&multiplier(), &Value::Null).unwrap_err();
        assert!(
            error.to_string().contains("`first_number` is required"),
            "{error}"
        );
    }

    #[test]
    fn enums_list_their_options() {
        let schema = json!({"type": "object", "properties": {"unit": {"enum": ["c", "f"]}}});
        let error = prepare_arguments(&schema, &json!({"unit": "k"})).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("`unit` must be one of [\"c\",\"f\"]"),
            "{error}"
        );
    }

    #[test]
    fn broken_schemas_are_the_tools_fault() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "no-such-type"}}});
        let error = prepare_arguments(&schema, &json!({"a": 1})).unwrap_err();
        assert!(
            matches!(error, ArgumentError::InvalidSchema(_)),
            "{error:?}"
        );
    }
}
