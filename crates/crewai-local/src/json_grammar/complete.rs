//! The shortest text that closes the document from the automaton's position.

use super::JsonGrammar;
use super::compile::Node;
use super::frame::{ArrayFrame, Escape, Frame, MapPhase, NumberPhase, ObjectPhase};

/// How deep the shortest completion goes into nested required values (a recursive schema could
/// otherwise make it branch without end).
const MAX_COMPLETION_DEPTH: usize = 8;

impl JsonGrammar {
    /// A short piece of text that makes progress towards closing the innermost frame.
    pub(super) fn shortest_step(&self) -> Option<String> {
        let frame = self.stack.last()?;
        Some(match frame {
            Frame::Value(node) => self.shortest_value(*node, 0),
            Frame::Object { node, next, phase } => {
                let Node::Object(properties) = &self.nodes[*node] else {
                    return None;
                };
                match phase {
                    ObjectPhase::Key {
                        candidates,
                        matched,
                    } => {
                        let first = *candidates.first()?;
                        properties[first].key[*matched..].to_string()
                    }
                    ObjectPhase::Colon { property } => {
                        format!(":{}", self.shortest_value(properties[*property].value, 0))
                    }
                    ObjectPhase::BetweenMembers { opened } => {
                        match properties[*next..].iter().position(|p| p.required) {
                            Some(offset) => {
                                let property = &properties[next + offset];
                                format!(
                                    "{}{}:{}",
                                    if *opened { "" } else { "," },
                                    property.key,
                                    self.shortest_value(property.value, 0)
                                )
                            }
                            None => "}".into(),
                        }
                    }
                }
            }
            Frame::Map { values, phase } => match phase {
                MapPhase::Opened | MapPhase::AfterValue => "}".into(),
                MapPhase::NeedKey => format!("\"k\":{}", self.shortest_value(*values, 0)),
                MapPhase::Key => format!(":{}", self.shortest_value(*values, 0)),
            },
            Frame::Array(array) => return self.array_step(*array),
            Frame::String { escape, .. } => match escape {
                Escape::None => "\"".into(),
                Escape::Started => "n".into(),
                Escape::Unicode(left) => "0".repeat(*left as usize),
            },
            Frame::Number { phase, .. } => match phase {
                NumberPhase::Minus
                | NumberPhase::Dot
                | NumberPhase::Exponent
                | NumberPhase::ExponentSign => "0".into(),
                // A complete number inside a container ends when the container goes on.
                _ => return self.close_number_step(),
            },
            Frame::Literal {
                candidates,
                matched,
            } => candidates.first()?[*matched..].to_string(),
        })
    }

    /// Inside an array: its next item, or its `]` once it has enough items.
    fn array_step(&self, array: ArrayFrame) -> Option<String> {
        let Node::Array {
            items, min_items, ..
        } = self.nodes[array.node]
        else {
            return None;
        };
        Some(
            if array.expecting_item && !(array.just_opened && min_items == 0) {
                self.shortest_value(items, 0)
            } else if array.count < min_items {
                format!(",{}", self.shortest_value(items, 0))
            } else {
                "]".into()
            },
        )
    }

    /// After a complete number: what its container needs next.
    fn close_number_step(&self) -> Option<String> {
        let mut without_number = self.clone();
        without_number.stack.pop();
        without_number.shortest_step()
    }

    /// The shortest JSON text of a value of `node`.
    fn shortest_value(&self, node: usize, depth: usize) -> String {
        if depth > MAX_COMPLETION_DEPTH {
            return "null".into();
        }
        match &self.nodes[node] {
            Node::Any => "0".into(),
            Node::Object(properties) => {
                let members: Vec<String> = properties
                    .iter()
                    .filter(|p| p.required)
                    .map(|p| format!("{}:{}", p.key, self.shortest_value(p.value, depth + 1)))
                    .collect();
                format!("{{{}}}", members.join(","))
            }
            Node::Map { .. } => "{}".into(),
            Node::Array {
                items, min_items, ..
            } => {
                let item = self.shortest_value(*items, depth + 1);
                format!("[{}]", vec![item; *min_items].join(","))
            }
            Node::String { .. } => "\"\"".into(),
            Node::Number { .. } => "0".into(),
            Node::Literals(options) => options
                .iter()
                .min_by_key(|o| o.len())
                .cloned()
                .unwrap_or_else(|| "null".into()),
            Node::OneOf(options) => options
                .iter()
                .map(|o| self.shortest_value(*o, depth + 1))
                .min_by_key(String::len)
                .unwrap_or_else(|| "null".into()),
        }
    }
}
