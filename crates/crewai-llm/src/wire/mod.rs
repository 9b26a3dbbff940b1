//! The providers' wire formats as serde types: one module per API, each with its request,
//! reply, stream-event and error-body types and the conversions to and from the
//! provider-neutral types ([`crate::LlmResponse`], [`crate::Usage`], ...) that need nothing but
//! the wire value. Conversions that need a call's context (the tool-name map, the client's
//! settings) live in the adapters beside the clients.
//!
//! The rules every module follows:
//! - Requests borrow from the [`crate::LlmRequest`] and the config they are built from, and are
//!   written straight to the body bytes; a field is `skip_serializing_if` whenever the body sent
//!   before these types left it out, so every provider sees the same keys in the same order.
//! - Replies tolerate fields they do not know (no `deny_unknown_fields`), `null` where a list or
//!   an object is expected, and block or event kinds added later (`#[serde(other)]`).
//! - `serde_json::Value` is used only where the provider's field is free-form JSON: tool argument
//!   objects, JSON schemas, the config's `thinking` and `response_format` values, `extra_body`.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::ser::{Error as _, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::LlmError;

pub mod anthropic;
pub mod bedrock;
pub mod gemini;
pub mod openai;
pub mod responses;
pub mod watsonx;

/// A reply that does not have the shape its provider documents. The wire conversions return
/// it; the adapter names its provider in the [`LlmError::MalformedResponse`] it becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(pub String);

impl Malformed {
    pub fn new(message: impl Into<String>) -> Self {
        Malformed(message.into())
    }

    /// The error, for `provider`.
    pub fn into_error(self, provider: &str) -> LlmError {
        LlmError::malformed(provider, self.0)
    }
}

/// Decodes `what` (a reply, a stream chunk, an event) from its JSON text into its wire type.
/// Text that is not JSON and JSON of another shape are both [`LlmError::MalformedResponse`],
/// told apart in the message, with the start of the text.
pub fn decode<'a, T: Deserialize<'a>>(
    provider: &str,
    what: &str,
    text: &'a [u8],
) -> Result<T, LlmError> {
    serde_json::from_slice(text).map_err(|e| {
        let shape = if e.is_data() {
            "does not have the documented shape"
        } else {
            "is not JSON"
        };
        let start = crate::http::snippet(&String::from_utf8_lossy(text));
        LlmError::malformed_because(provider, format!("{what} {shape}: {start}"), e)
    })
}

/// A string of a reply, borrowed from the reply's text when it has no escapes: stream deltas
/// are read without a copy before the one the stream event owns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Text<'a>(pub Cow<'a, str>);

impl<'a> Text<'a> {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0.into_owned()
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;
        impl<'de> Visitor<'de> for TextVisitor {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v.to_string())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(TextVisitor)
    }
}

/// `null` read as the type's default (an empty list): providers send `"tool_calls": null`.
pub(crate) fn null_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// A string field that some servers fill with something else (a list of parts, a number):
/// the string, or `None` for anything that is not one.
pub(crate) fn lenient_text<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<String>, D::Error> {
    deserializer.deserialize_any(Lenient { numbers: false })
}

/// An error code, which providers send as a string (`"context_length_exceeded"`) or a number
/// (`400`): as text either way.
pub(crate) fn lenient_code<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<String>, D::Error> {
    deserializer.deserialize_any(Lenient { numbers: true })
}

/// Reads a string (and with `numbers`, a number as its text); skips anything else.
struct Lenient {
    numbers: bool,
}

impl<'de> Visitor<'de> for Lenient {
    type Value = Option<String>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Some(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(self.numbers.then(|| v.to_string()))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(self.numbers.then(|| v.to_string()))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(None)
    }
}

/// The order of a request body's top-level keys once `extra_body` is merged in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyOrder {
    /// Alphabetical (the OpenAI bodies, as CrewAI's client writes them).
    Sorted,
    /// The typed body's order; an extra key replaces a typed one in place, new ones go last.
    AsWritten,
}

/// A request body with the config's `extra_body` (CrewAI's `additional_params`) merged in at
/// the top level, an extra field replacing the typed one of the same name.
///
/// Without extras (the common case) the typed body is written directly. The extras are
/// free-form JSON by nature, so with any set the body goes through one `serde_json::Value` map.
pub(crate) struct WithExtra<'a, T> {
    pub body: T,
    pub extra: &'a Map<String, Value>,
    pub order: KeyOrder,
}

impl<T: Serialize> Serialize for WithExtra<'_, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.extra.is_empty() {
            return self.body.serialize(serializer);
        }
        let mut merged = match serde_json::to_value(&self.body).map_err(S::Error::custom)? {
            Value::Object(map) => map,
            other => return other.serialize(serializer),
        };
        for (key, value) in self.extra {
            merged.insert(key.clone(), value.clone());
        }
        if self.order == KeyOrder::Sorted {
            let sorted: std::collections::BTreeMap<String, Value> = merged.into_iter().collect();
            return sorted.serialize(serializer);
        }
        merged.serialize(serializer)
    }
}

/// A wire value as JSON (for the functions that hand bodies out as `Value`). The wire types
/// have only string keys, so this cannot fail; `Null` stands in if it ever did.
pub(crate) fn to_json(value: &impl Serialize) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// For `skip_serializing_if`: `strict` and the like are sent only when true.
pub(crate) fn is_false(value: &bool) -> bool {
    !*value
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Debug, Deserialize)]
    struct Reply<'a> {
        #[serde(borrow)]
        text: Text<'a>,
        #[serde(default, deserialize_with = "lenient_text")]
        content: Option<String>,
        #[serde(default, deserialize_with = "lenient_code")]
        code: Option<String>,
        #[serde(default, deserialize_with = "null_default")]
        list: Vec<u32>,
    }

    #[test]
    fn strings_borrow_unless_escaped() {
        let plain: Reply<'_> = serde_json::from_str(r#"{"text": "abc"}"#).unwrap();
        assert!(matches!(plain.text.0, Cow::Borrowed("abc")));
        let escaped: Reply<'_> = serde_json::from_str(r#"{"text": "a\nb"}"#).unwrap();
        assert!(matches!(escaped.text.0, Cow::Owned(ref s) if s == "a\nb"));
    }

    #[test]
    fn lenient_fields_take_what_servers_send() {
        let reply: Reply<'_> = serde_json::from_str(
            r#"{"text": "", "content": [{"type": "text", "text": "x"}], "code": 400, "list": null}"#,
        )
        .unwrap();
        assert_eq!(reply.content, None);
        assert_eq!(reply.code.as_deref(), Some("400"));
        assert!(reply.list.is_empty());
        let reply: Reply<'_> =
            serde_json::from_str(r#"{"text": "", "content": "hi", "code": "x", "list": [1]}"#)
                .unwrap();
        assert_eq!(
            (reply.content.as_deref(), reply.code.as_deref()),
            (Some("hi"), Some("x"))
        );
        assert_eq!(reply.list, [1]);
    }

    #[test]
    fn extra_fields_replace_typed_ones_in_the_chosen_order() {
        #[derive(Serialize)]
        struct Body {
            model: &'static str,
            temperature: f64,
        }
        let extra = json!({"temperature": 0, "a_first": true});
        let Value::Object(extra) = extra else {
            unreachable!("an object literal")
        };
        let body = |order| WithExtra {
            body: Body {
                model: "m",
                temperature: 0.5,
            },
            extra: &extra,
            order,
        };
        assert_eq!(
            serde_json::to_string(&body(KeyOrder::AsWritten)).unwrap(),
            r#"{"model":"m","temperature":0,"a_first":true}"#
        );
        assert_eq!(
            serde_json::to_string(&body(KeyOrder::Sorted)).unwrap(),
            r#"{"a_first":true,"model":"m","temperature":0}"#
        );
        let none = Map::new();
        let plain = WithExtra {
            body: Body {
                model: "m",
                temperature: 0.5,
            },
            extra: &none,
            order: KeyOrder::Sorted,
        };
        assert_eq!(
            serde_json::to_string(&plain).unwrap(),
            r#"{"model":"m","temperature":0.5}"#
        );
    }

    #[test]
    fn decode_tells_shape_from_syntax() {
        let shape = decode::<Reply<'_>>("p", "the reply", br#"{"text": 1}"#).unwrap_err();
        let shape = crate::error_chain(&shape);
        assert!(
            shape.starts_with(r#"p: malformed response: the reply does not have the documented shape: {"text": 1}: invalid type"#),
            "{shape}"
        );
        let syntax = decode::<Reply<'_>>("p", "the reply", b"<html>").unwrap_err();
        let syntax = crate::error_chain(&syntax);
        assert!(
            syntax.starts_with(
                "p: malformed response: the reply is not JSON: <html>: expected value"
            ),
            "{syntax}"
        );
    }
}
