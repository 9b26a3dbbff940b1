//! Flow state: a typed serde struct or an unstructured JSON map, with an `id`.
//!
//! Any `Clone + Default + Serialize + DeserializeOwned` type is a [`FlowState`]. The run's id (a
//! UUID v4, or the id being resumed) is always available through
//! [`FlowContext::state_id`](crate::FlowContext::state_id); it is also written into the state's
//! `id` field when the state has room for one (an unstructured map always does, a struct does if
//! it has an `id: String` field).

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// An unstructured state: a JSON object.
pub type UnstructuredState = Map<String, Value>;

/// What a flow's state must be. Blanket-implemented; do not implement it by hand.
pub trait FlowState:
    Clone + Default + Serialize + DeserializeOwned + Send + Sync + 'static
{
}

impl<T> FlowState for T where
    T: Clone + Default + Serialize + DeserializeOwned + Send + Sync + 'static
{
}

/// Why a state could not be turned into JSON, built from it, or given the inputs.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error("the state serialises to {0}, not an object, so inputs cannot be merged into it")]
    NotAnObject(&'static str),
    /// The input that does not fit the state's type.
    #[error("input `{key}` = {value}")]
    Input {
        key: String,
        value: Box<Value>,
        #[source]
        source: serde_json::Error,
    },
}

pub(crate) fn to_json<S: FlowState>(state: &S) -> Result<Value, StateError> {
    Ok(serde_json::to_value(state)?)
}

pub(crate) fn from_json<S: FlowState>(value: Value) -> Result<S, StateError> {
    Ok(serde_json::from_value(value)?)
}

/// Writes `id` into the state when its type keeps an `id` field; leaves it alone otherwise.
pub(crate) fn with_id<S: FlowState>(state: S, id: &str) -> Result<S, StateError> {
    let Value::Object(mut object) = to_json(&state)? else {
        return Ok(state);
    };
    object.insert("id".into(), Value::String(id.to_string()));
    match from_json::<S>(Value::Object(object)) {
        Ok(updated) => Ok(updated),
        // A struct with `deny_unknown_fields` and no `id`: the id lives beside the state only.
        Err(_) => Ok(state),
    }
}

/// Merges `inputs` into `state` (CrewAI's `model_validate({**state, **inputs})`): the state is
/// re-deserialised from its JSON with the inputs laid over it. The error names the offending input.
pub(crate) fn merge_inputs<S: FlowState>(
    state: &S,
    inputs: &Map<String, Value>,
) -> Result<S, StateError> {
    if inputs.is_empty() {
        return Ok(state.clone());
    }
    let base = match to_json(state)? {
        Value::Object(object) => object,
        other => {
            return Err(StateError::NotAnObject(kind_of(&other)));
        }
    };
    let overlay = |keys: &mut dyn Iterator<Item = (&String, &Value)>| {
        let mut merged = base.clone();
        for (key, value) in keys {
            merged.insert(key.clone(), value.clone());
        }
        serde_json::from_value::<S>(Value::Object(merged))
    };
    match overlay(&mut inputs.iter()) {
        Ok(merged) => Ok(merged),
        Err(whole) => {
            // Retry input by input to name the field that does not fit.
            for (key, value) in inputs {
                if let Err(source) = overlay(&mut std::iter::once((key, value))) {
                    return Err(StateError::Input {
                        key: key.clone(),
                        value: Box::new(value.clone()),
                        source,
                    });
                }
            }
            Err(StateError::Json(whole))
        }
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    struct Typed {
        #[serde(default)]
        id: String,
        #[serde(default)]
        counter: u32,
        #[serde(default)]
        topic: String,
    }

    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    struct NoId {
        counter: u32,
    }

    fn inputs(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn typed_merge_overlays_inputs() {
        let merged = merge_inputs(
            &Typed {
                counter: 2,
                ..Default::default()
            },
            &inputs(json!({"topic": "rust"})),
        )
        .unwrap();
        assert_eq!(
            merged,
            Typed {
                id: String::new(),
                counter: 2,
                topic: "rust".into()
            }
        );
    }

    #[test]
    fn typed_merge_error_names_the_field() {
        let error = merge_inputs(
            &Typed::default(),
            &inputs(json!({"topic": "ok", "counter": "many"})),
        )
        .unwrap_err();
        let text = crewai_llm::error_chain(&error);
        assert!(
            text.starts_with("input `counter` = \"many\": invalid type"),
            "{text}"
        );
    }

    #[test]
    fn unstructured_merge_keeps_existing_keys() {
        let mut state = UnstructuredState::new();
        state.insert("a".into(), json!(1));
        let merged = merge_inputs(&state, &inputs(json!({"b": 2}))).unwrap();
        assert_eq!(Value::Object(merged), json!({"a": 1, "b": 2}));
    }

    #[test]
    fn id_is_written_where_there_is_room() {
        assert_eq!(with_id(Typed::default(), "x").unwrap().id, "x");
        assert_eq!(with_id(UnstructuredState::new(), "x").unwrap()["id"], "x");
        assert_eq!(
            with_id(NoId { counter: 3 }, "x").unwrap(),
            NoId { counter: 3 }
        );
    }
}
