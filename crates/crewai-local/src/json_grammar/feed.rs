//! Reading the document one character at a time.

use std::sync::Arc;

use super::compile::{MAX_SCHEMA_DEPTH, Node, Property};
use super::frame::{ArrayFrame, Escape, Frame, MapPhase, NumberPhase, ObjectPhase};
use super::{AnyNodes, JsonGrammar};

/// Digits a number may have before the automaton asks for it to end (a small model otherwise
/// can keep adding digits until the budget runs out).
const MAX_NUMBER_DIGITS: usize = 15;

impl JsonGrammar {
    /// Reads one character; false if it is not allowed here.
    pub(super) fn feed(&mut self, c: char) -> bool {
        let Some(frame) = self.stack.pop() else {
            return false;
        };
        match frame {
            Frame::Value(node) => self.start_value(node, c, 0),
            Frame::Object { node, next, phase } => self.feed_object(node, next, phase, c),
            Frame::Map { values, phase } => self.feed_map(values, phase, c),
            Frame::Array(array) => self.feed_array(array, c),
            Frame::String {
                length,
                max_length,
                escape,
            } => self.feed_string(length, max_length, escape, c),
            Frame::Number {
                integer,
                phase,
                digits,
            } => self.feed_number(integer, phase, digits, c),
            Frame::Literal {
                candidates,
                matched,
            } => {
                let alive: Vec<String> = candidates
                    .into_iter()
                    .filter(|t| t[matched..].starts_with(c))
                    .collect();
                if alive.is_empty() {
                    return false;
                }
                let matched = matched + c.len_utf8();
                // Done when one candidate is fully written and none is longer (a literal never
                // prefixes another in JSON except for numbers, which enums rarely mix).
                if !alive.iter().any(|t| t.len() == matched) {
                    self.stack.push(Frame::Literal {
                        candidates: alive,
                        matched,
                    });
                } else if alive.iter().any(|t| t.len() > matched) {
                    let longer: Vec<String> =
                        alive.into_iter().filter(|t| t.len() > matched).collect();
                    self.stack.push(Frame::Literal {
                        candidates: longer,
                        matched,
                    });
                }
                true
            }
        }
    }

    /// The first character of a value of `node`.
    fn start_value(&mut self, node: usize, c: char, depth: usize) -> bool {
        if depth > MAX_SCHEMA_DEPTH {
            return false;
        }
        let nodes = Arc::clone(&self.nodes);
        match &nodes[node] {
            Node::Any => self.start_any(c),
            Node::Object(_) => {
                if c != '{' {
                    return false;
                }
                self.stack.push(Frame::Object {
                    node,
                    next: 0,
                    phase: ObjectPhase::BetweenMembers { opened: true },
                });
                true
            }
            Node::Map { values } => {
                if c != '{' {
                    return false;
                }
                self.stack.push(Frame::Map {
                    values: *values,
                    phase: MapPhase::Opened,
                });
                true
            }
            Node::Array { .. } => {
                if c != '[' {
                    return false;
                }
                self.stack.push(Frame::Array(ArrayFrame {
                    node,
                    count: 0,
                    expecting_item: true,
                    just_opened: true,
                }));
                true
            }
            Node::String { max_length } => {
                if c != '"' {
                    return false;
                }
                self.stack.push(Frame::String {
                    length: 0,
                    max_length: *max_length,
                    escape: Escape::None,
                });
                true
            }
            Node::Number { integer } => {
                let integer = *integer;
                let phase = match c {
                    '-' => NumberPhase::Minus,
                    '0' => NumberPhase::Zero,
                    '1'..='9' => NumberPhase::Integer,
                    _ => return false,
                };
                self.stack.push(Frame::Number {
                    integer,
                    phase,
                    digits: usize::from(c != '-'),
                });
                true
            }
            Node::Literals(options) => {
                self.stack.push(Frame::Literal {
                    candidates: options.clone(),
                    matched: 0,
                });
                self.feed(c)
            }
            Node::OneOf(options) => options.iter().any(|option| {
                let mut trial = self.clone();
                if trial.start_value(*option, c, depth + 1) {
                    *self = trial;
                    true
                } else {
                    false
                }
            }),
        }
    }

    fn start_any(&mut self, c: char) -> bool {
        let AnyNodes {
            value,
            array,
            number,
        } = self.any;
        match c {
            '{' => {
                self.stack.push(Frame::Map {
                    values: value,
                    phase: MapPhase::Opened,
                });
                true
            }
            '[' => self.start_value(array, c, 0),
            '"' => {
                self.stack.push(Frame::String {
                    length: 0,
                    max_length: None,
                    escape: Escape::None,
                });
                true
            }
            '-' | '0'..='9' => self.start_value(number, c, 0),
            't' | 'f' | 'n' => {
                self.stack.push(Frame::Literal {
                    candidates: vec!["true".into(), "false".into(), "null".into()],
                    matched: 0,
                });
                self.feed(c)
            }
            _ => false,
        }
    }

    /// Inside an array: an item, a `,` or the closing `]`.
    fn feed_array(&mut self, array: ArrayFrame, c: char) -> bool {
        let Node::Array {
            items,
            min_items,
            max_items,
        } = self.nodes[array.node]
        else {
            return false;
        };
        let room = max_items.is_none_or(|max| array.count < max);
        if array.expecting_item {
            if array.just_opened && c == ']' && min_items == 0 {
                return true;
            }
            if !room {
                return false;
            }
            self.stack.push(Frame::Array(ArrayFrame {
                count: array.count + 1,
                expecting_item: false,
                just_opened: false,
                ..array
            }));
            return self.start_value(items, c, 0);
        }
        match c {
            ',' if room => {
                self.stack.push(Frame::Array(ArrayFrame {
                    expecting_item: true,
                    just_opened: false,
                    ..array
                }));
                true
            }
            ']' => array.count >= min_items,
            _ => false,
        }
    }

    fn feed_object(&mut self, node: usize, next: usize, phase: ObjectPhase, c: char) -> bool {
        let nodes = Arc::clone(&self.nodes);
        let Node::Object(properties) = &nodes[node] else {
            return false;
        };
        let push =
            |grammar: &mut Self, phase| grammar.stack.push(Frame::Object { node, next, phase });
        match phase {
            ObjectPhase::BetweenMembers { opened } => {
                let reachable = reachable_properties(properties, next);
                match c {
                    '}' => properties[next..].iter().all(|p| !p.required),
                    // A key follows `,`, or starts with this quote right after `{`.
                    ',' | '"' if (c == '"') == opened && !reachable.is_empty() => {
                        push(
                            self,
                            ObjectPhase::Key {
                                candidates: reachable,
                                matched: 0,
                            },
                        );
                        c == ',' || self.feed(c)
                    }
                    _ => false,
                }
            }
            ObjectPhase::Key {
                candidates,
                matched,
            } => {
                let alive: Vec<usize> = candidates
                    .into_iter()
                    .filter(|i| properties[*i].key[matched..].starts_with(c))
                    .collect();
                let matched = matched + c.len_utf8();
                // Keys are quoted, so no key is a prefix of another: one that is fully written
                // is the only one left.
                match alive.as_slice() {
                    [] => false,
                    [only] if properties[*only].key.len() == matched => {
                        push(self, ObjectPhase::Colon { property: *only });
                        true
                    }
                    _ => {
                        push(
                            self,
                            ObjectPhase::Key {
                                candidates: alive,
                                matched,
                            },
                        );
                        true
                    }
                }
            }
            ObjectPhase::Colon { property } => {
                if c != ':' {
                    return false;
                }
                let value = properties[property].value;
                self.stack.push(Frame::Object {
                    node,
                    next: property + 1,
                    phase: ObjectPhase::BetweenMembers { opened: false },
                });
                self.stack.push(Frame::Value(value));
                true
            }
        }
    }

    fn feed_map(&mut self, values: usize, phase: MapPhase, c: char) -> bool {
        let push = |grammar: &mut Self, phase| grammar.stack.push(Frame::Map { values, phase });
        match (phase, c) {
            (MapPhase::Opened, '}') | (MapPhase::AfterValue, '}') => true,
            (MapPhase::Opened, '"') | (MapPhase::NeedKey, '"') => {
                push(self, MapPhase::Key);
                self.stack.push(Frame::String {
                    length: 0,
                    max_length: None,
                    escape: Escape::None,
                });
                true
            }
            (MapPhase::AfterValue, ',') => {
                push(self, MapPhase::NeedKey);
                true
            }
            // The key's string frame has closed.
            (MapPhase::Key, ':') => {
                push(self, MapPhase::AfterValue);
                self.stack.push(Frame::Value(values));
                true
            }
            _ => false,
        }
    }

    fn feed_string(
        &mut self,
        length: usize,
        max_length: Option<usize>,
        escape: Escape,
        c: char,
    ) -> bool {
        let next_escape = match escape {
            Escape::None => match c {
                '"' => return true,
                '\\' => Escape::Started,
                c if (c as u32) < 0x20 => return false,
                _ => Escape::None,
            },
            Escape::Started => match c {
                '"' | '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't' => Escape::None,
                'u' => Escape::Unicode(4),
                _ => return false,
            },
            Escape::Unicode(left) => {
                if !c.is_ascii_hexdigit() {
                    return false;
                }
                if left > 1 {
                    Escape::Unicode(left - 1)
                } else {
                    Escape::None
                }
            }
        };
        // A character counts once its escape is finished.
        let length = if next_escape == Escape::None {
            length + 1
        } else {
            length
        };
        if max_length.is_some_and(|max| length > max) {
            return false;
        }
        self.stack.push(Frame::String {
            length,
            max_length,
            escape: next_escape,
        });
        true
    }

    fn feed_number(&mut self, integer: bool, phase: NumberPhase, digits: usize, c: char) -> bool {
        use NumberPhase::*;
        let digit = c.is_ascii_digit();
        let next = match (phase, c) {
            (Minus, '0') => Some(Zero),
            (Minus, _) if digit => Some(Integer),
            (Integer, _) if digit => Some(Integer),
            (Zero | Integer, '.') if !integer => Some(Dot),
            (Zero | Integer | Fraction, 'e' | 'E') if !integer => Some(Exponent),
            (Dot | Fraction, _) if digit => Some(Fraction),
            (Exponent, '+' | '-') => Some(ExponentSign),
            (Exponent | ExponentSign | ExponentDigits, _) if digit => Some(ExponentDigits),
            _ => None,
        };
        match next {
            Some(phase) => {
                let digits = digits + usize::from(digit);
                if digits > MAX_NUMBER_DIGITS {
                    return false;
                }
                self.stack.push(Frame::Number {
                    integer,
                    phase,
                    digits,
                });
                true
            }
            // The number ended; the character belongs to the container.
            None if phase.complete() => self.feed(c),
            None => false,
        }
    }
}

/// The properties that may come next from `next` on: the optional ones up to and including the
/// first required one.
fn reachable_properties(properties: &[Property], next: usize) -> Vec<usize> {
    let mut reachable = Vec::new();
    for (index, property) in properties.iter().enumerate().skip(next) {
        reachable.push(index);
        if property.required {
            break;
        }
    }
    reachable
}
