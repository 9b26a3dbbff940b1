//! A character-level automaton for JSON documents that match a JSON schema, used to hold the
//! local model's reply to a `response_format`.
//!
//! The generator asks the automaton, for each candidate token, whether the token's text keeps the
//! reply a prefix of an acceptable document ([`JsonGrammar::accepts`]), and asks it for the
//! shortest text that completes the document when the token budget runs out
//! ([`JsonGrammar::completion`]). Documents are written compactly (no whitespace between tokens),
//! objects list their properties in the schema's order, and every required property is present.
//!
//! Supported schema keywords: `type` (one name or a list), `properties`, `required`, `items`,
//! `minItems` / `maxItems`, `maxLength`, `enum`, `const`, `anyOf` / `oneOf`, a one-element
//! `allOf`, and `$ref` to any pointer in the schema (`#/$defs/...`, `#/definitions/...`).
//! Anything else is read as "any JSON value". Where alternatives start with the same character
//! (two object shapes in an `anyOf`), the first one listed is used.

// compile: schema -> nodes; frame: where the writer is inside one open value;
// feed: reading one character; complete: the shortest text that closes the document.
mod compile;
mod complete;
mod feed;
mod frame;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use serde_json::Value;

use compile::{Compiler, Node};
use frame::Frame;

/// The compiled grammar of one schema plus the position in the document written so far.
///
/// ```
/// use crewai_local::json_grammar::JsonGrammar;
/// let schema = serde_json::json!({
///     "type": "object",
///     "properties": {"valid": {"type": "boolean"}},
///     "required": ["valid"]
/// });
/// let mut grammar = JsonGrammar::new(&schema);
/// assert!(grammar.accepts("{\"valid\":tr"));
/// assert!(!grammar.accepts("{\"other\""));
/// grammar.advance("{\"valid\":tr");
/// assert_eq!(grammar.completion(), "ue}");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct JsonGrammar {
    /// Shared between the copies made to try a token.
    nodes: Arc<[Node]>,
    /// The nodes "any value" uses for its arrays and numbers.
    any: AnyNodes,
    stack: Vec<Frame>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct AnyNodes {
    value: usize,
    array: usize,
    number: usize,
}

impl JsonGrammar {
    /// The grammar of documents matching `schema` (a JSON schema), at the start of the document.
    pub fn new(schema: &Value) -> Self {
        let mut compiler = Compiler::new(schema);
        let root = compiler.compile(schema, 0);
        let value = compiler.add(Node::Any);
        let array = compiler.add(Node::Array {
            items: value,
            min_items: 0,
            max_items: None,
        });
        let number = compiler.add(Node::Number { integer: false });
        JsonGrammar {
            nodes: compiler.into_nodes().into(),
            any: AnyNodes {
                value,
                array,
                number,
            },
            stack: vec![Frame::Value(root)],
        }
    }

    /// The grammar of any JSON value.
    pub fn any() -> Self {
        Self::new(&Value::Bool(true))
    }

    /// True once a whole document is written (nothing more may follow).
    pub fn is_complete(&self) -> bool {
        self.stack.is_empty()
    }

    /// True if, after what was written so far, the document may stop right here: complete, or a
    /// top-level number that could also go on.
    pub fn may_end(&self) -> bool {
        match self.stack.as_slice() {
            [] => true,
            [Frame::Number { phase, .. }] => phase.complete(),
            _ => false,
        }
    }

    /// Whether `text` may be written next (the automaton is not changed).
    pub fn accepts(&self, text: &str) -> bool {
        let mut trial = self.clone();
        trial.advance(text)
    }

    /// Writes `text`; false (with the automaton left part-way) if some character is not allowed.
    pub fn advance(&mut self, text: &str) -> bool {
        text.chars().all(|c| self.feed(c))
    }

    /// The shortest text that completes the document from here.
    pub fn completion(&self) -> String {
        let mut trial = self.clone();
        let mut text = String::new();
        // Each step closes or shortens the innermost frame, so this ends; the bound guards
        // against a mistake turning into a hang.
        for _ in 0..100_000 {
            if trial.may_end() {
                break;
            }
            let Some(piece) = trial.shortest_step() else {
                break;
            };
            if !trial.advance(&piece) {
                break;
            }
            text.push_str(&piece);
        }
        text
    }
}
