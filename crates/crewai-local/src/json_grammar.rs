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
//! `allOf`, and `$ref` to any pointer in the schema (`#/$defs/...`, `#/definitions/...`). Anything else is read as "any JSON value". Where alternatives start
//! with the same character (two object shapes in an `anyOf`), the first one listed is used.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

/// Digits a number may have before the automaton asks for it to end (a small model otherwise
/// can keep adding digits until the budget runs out).
const MAX_NUMBER_DIGITS: usize = 15;
/// How deeply nested schemas are compiled before a value is left unconstrained.
const MAX_SCHEMA_DEPTH: usize = 32;
/// How deep the shortest completion goes into nested required values (a recursive schema could
/// otherwise make it branch without end).
const MAX_COMPLETION_DEPTH: usize = 8;

/// One compiled schema node; nodes refer to each other by index into [`JsonGrammar::nodes`].
#[derive(Debug, Clone, PartialEq)]
enum Node {
    /// Any JSON value.
    Any,
    /// An object with these properties, written in this order.
    Object(Vec<Property>),
    /// An object with free keys, every value matching `values`.
    Map {
        values: usize,
    },
    Array {
        items: usize,
        min_items: usize,
        max_items: Option<usize>,
    },
    String {
        max_length: Option<usize>,
    },
    Number {
        integer: bool,
    },
    /// One of these JSON texts exactly (`true`, `null`, an enum's values).
    Literals(Vec<String>),
    /// The first alternative whose first character matches.
    OneOf(Vec<usize>),
}

#[derive(Debug, Clone, PartialEq)]
struct Property {
    /// The key as it is written, with quotes (`"city"`).
    key: String,
    value: usize,
    required: bool,
}

/// Where the automaton is inside one open value.
#[derive(Debug, Clone, PartialEq)]
enum Frame {
    /// A value of this node is expected and has not started.
    Value(usize),
    /// Inside an object of [`Node::Object`] shape.
    Object {
        node: usize,
        /// The next property that may be written.
        next: usize,
        phase: ObjectPhase,
    },
    /// Inside an object with free keys (a [`Node::Map`], or `Any`).
    Map { values: usize, phase: MapPhase },
    Array {
        node: usize,
        count: usize,
        /// True right after `[` or `,`, when an item must (or, after `[`, may) start.
        expecting_item: bool,
        just_opened: bool,
    },
    String {
        length: usize,
        max_length: Option<usize>,
        escape: Escape,
    },
    Number {
        integer: bool,
        phase: NumberPhase,
        digits: usize,
    },
    /// Matching some literal texts; `matched` characters of each candidate are written.
    Literal {
        candidates: Vec<String>,
        matched: usize,
    },
}

#[derive(Debug, Clone, PartialEq)]
enum ObjectPhase {
    /// After `{` or `,`: a key (of one of `candidates`, by property index) is being written.
    Key {
        candidates: Vec<usize>,
        matched: usize,
    },
    /// After `{` or after a value: a `,`/`}` or, right after `{`, a key's opening quote.
    BetweenMembers { opened: bool },
    /// After a key, before its `:`.
    Colon { property: usize },
}

#[derive(Debug, Clone, PartialEq)]
enum MapPhase {
    /// After `{`: a key or `}`.
    Opened,
    /// After `,`: a key.
    NeedKey,
    /// The key is being read (a `String` frame sits on top), or is written and the `:` is next.
    Key,
    /// After a value: `,` or `}`.
    AfterValue,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Escape {
    None,
    /// After a backslash.
    Started,
    /// Inside `\uXXXX`, with this many hex digits left.
    Unicode(u8),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum NumberPhase {
    /// After `-`.
    Minus,
    /// After a leading `0`.
    Zero,
    /// In the integer part.
    Integer,
    /// After `.`.
    Dot,
    Fraction,
    /// After `e` / `E`.
    Exponent,
    ExponentSign,
    ExponentDigits,
}

impl NumberPhase {
    fn complete(self) -> bool {
        matches!(
            self,
            NumberPhase::Zero
                | NumberPhase::Integer
                | NumberPhase::Fraction
                | NumberPhase::ExponentDigits
        )
    }
}

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
        let mut compiler = Compiler {
            root: schema,
            nodes: Vec::new(),
            refs: HashMap::new(),
        };
        let root = compiler.compile(schema, 0);
        let value = compiler.add(Node::Any);
        let array = compiler.add(Node::Array {
            items: value,
            min_items: 0,
            max_items: None,
        });
        let number = compiler.add(Node::Number { integer: false });
        JsonGrammar {
            nodes: compiler.nodes.into(),
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

    /// A short piece of text that makes progress towards closing the innermost frame.
    fn shortest_step(&self) -> Option<String> {
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
            Frame::Array {
                node,
                count,
                expecting_item,
                just_opened,
            } => {
                let Node::Array {
                    items, min_items, ..
                } = &self.nodes[*node]
                else {
                    return None;
                };
                if *expecting_item && !(*just_opened && *min_items == 0) {
                    self.shortest_value(*items, 0)
                } else if count < min_items {
                    format!(",{}", self.shortest_value(*items, 0))
                } else {
                    "]".into()
                }
            }
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

    /// Reads one character; false if it is not allowed here.
    fn feed(&mut self, c: char) -> bool {
        let Some(frame) = self.stack.pop() else {
            return false;
        };
        match frame {
            Frame::Value(node) => self.start_value(node, c, 0),
            Frame::Object { node, next, phase } => self.feed_object(node, next, phase, c),
            Frame::Map { values, phase } => self.feed_map(values, phase, c),
            Frame::Array {
                node,
                count,
                expecting_item,
                just_opened,
            } => {
                let Node::Array {
                    items,
                    min_items,
                    max_items,
                } = self.nodes[node].clone()
                else {
                    return false;
                };
                let room = max_items.is_none_or(|max| count < max);
                if expecting_item {
                    if just_opened && c == ']' && min_items == 0 {
                        return true;
                    }
                    if !room {
                        return false;
                    }
                    self.stack.push(Frame::Array {
                        node,
                        count: count + 1,
                        expecting_item: false,
                        just_opened: false,
                    });
                    return self.start_value(items, c, 0);
                }
                match c {
                    ',' if room => {
                        self.stack.push(Frame::Array {
                            node,
                            count,
                            expecting_item: true,
                            just_opened: false,
                        });
                        true
                    }
                    ']' => count >= min_items,
                    _ => false,
                }
            }
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
                self.stack.push(Frame::Array {
                    node,
                    count: 0,
                    expecting_item: true,
                    just_opened: true,
                });
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

    fn feed_object(&mut self, node: usize, next: usize, phase: ObjectPhase, c: char) -> bool {
        let nodes = Arc::clone(&self.nodes);
        let Node::Object(properties) = &nodes[node] else {
            return false;
        };
        match phase {
            ObjectPhase::BetweenMembers { opened } => {
                let reachable = reachable_properties(properties, next);
                match c {
                    '}' => properties[next..].iter().all(|p| !p.required),
                    ',' if !opened && !reachable.is_empty() => {
                        self.stack.push(Frame::Object {
                            node,
                            next,
                            phase: ObjectPhase::Key {
                                candidates: reachable,
                                matched: 0,
                            },
                        });
                        true
                    }
                    '"' if opened && !reachable.is_empty() => {
                        self.stack.push(Frame::Object {
                            node,
                            next,
                            phase: ObjectPhase::Key {
                                candidates: reachable,
                                matched: 0,
                            },
                        });
                        self.feed(c)
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
                        self.stack.push(Frame::Object {
                            node,
                            next,
                            phase: ObjectPhase::Colon { property: *only },
                        });
                        true
                    }
                    _ => {
                        self.stack.push(Frame::Object {
                            node,
                            next,
                            phase: ObjectPhase::Key {
                                candidates: alive,
                                matched,
                            },
                        });
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

struct Compiler<'a> {
    root: &'a Value,
    nodes: Vec<Node>,
    /// The node of each `$ref` compiled so far, so a recursive schema compiles once.
    refs: HashMap<String, usize>,
}

impl Compiler<'_> {
    fn add(&mut self, node: Node) -> usize {
        self.nodes.push(node);
        self.nodes.len() - 1
    }

    fn compile(&mut self, schema: &Value, depth: usize) -> usize {
        if depth > MAX_SCHEMA_DEPTH {
            return self.add(Node::Any);
        }
        let Some(map) = schema.as_object() else {
            // `true` (or anything that is not a schema object) allows any value.
            return self.add(Node::Any);
        };
        if let Some(reference) = map.get("$ref").and_then(Value::as_str)
            && let Some(target) = resolve(self.root, reference)
        {
            if let Some(node) = self.refs.get(reference) {
                return *node;
            }
            // Taken before compiling the target, so a reference to itself inside it lands here.
            let node = self.add(Node::Any);
            self.refs.insert(reference.to_string(), node);
            let compiled = self.compile(target, depth + 1);
            self.nodes[node] = self.nodes[compiled].clone();
            return node;
        }
        // schemars writes a described reference as `allOf: [{"$ref": ...}]`.
        if let Some(Value::Array(parts)) = map.get("allOf")
            && let [only] = parts.as_slice()
        {
            return self.compile(only, depth + 1);
        }
        if let Some(value) = map.get("const") {
            return self.add(Node::Literals(vec![value.to_string()]));
        }
        if let Some(Value::Array(options)) = map.get("enum") {
            let texts: Vec<String> = options.iter().map(Value::to_string).collect();
            if !texts.is_empty() {
                return self.add(Node::Literals(texts));
            }
        }
        if let Some(Value::Array(options)) = map.get("anyOf").or_else(|| map.get("oneOf")) {
            let compiled: Vec<usize> = options.iter().map(|o| self.compile(o, depth + 1)).collect();
            return self.add(Node::OneOf(compiled));
        }
        match map.get("type") {
            Some(Value::String(name)) => self.compile_type(name, map, depth),
            Some(Value::Array(names)) => {
                let compiled: Vec<usize> = names
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|name| self.compile_type(name, map, depth))
                    .collect();
                self.add(Node::OneOf(compiled))
            }
            _ if map.contains_key("properties") => self.compile_type("object", map, depth),
            _ if map.contains_key("items") => self.compile_type("array", map, depth),
            _ => self.add(Node::Any),
        }
    }

    fn compile_type(
        &mut self,
        name: &str,
        map: &serde_json::Map<String, Value>,
        depth: usize,
    ) -> usize {
        let count = |key: &str| map.get(key).and_then(Value::as_u64).map(|n| n as usize);
        match name {
            "object" => {
                let required: Vec<&str> = map
                    .get("required")
                    .and_then(Value::as_array)
                    .map(|r| r.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                match map.get("properties").and_then(Value::as_object) {
                    Some(properties) if !properties.is_empty() => {
                        let properties = properties
                            .iter()
                            .map(|(name, schema)| Property {
                                key: Value::String(name.clone()).to_string(),
                                value: self.compile(schema, depth + 1),
                                required: required.contains(&name.as_str()),
                            })
                            .collect();
                        self.add(Node::Object(properties))
                    }
                    _ => {
                        let values = match map.get("additionalProperties") {
                            Some(schema @ Value::Object(_)) => self.compile(schema, depth + 1),
                            _ => self.add(Node::Any),
                        };
                        self.add(Node::Map { values })
                    }
                }
            }
            "array" => {
                let items = match map.get("items") {
                    Some(schema) => self.compile(schema, depth + 1),
                    None => self.add(Node::Any),
                };
                self.add(Node::Array {
                    items,
                    min_items: count("minItems").unwrap_or(0),
                    max_items: count("maxItems"),
                })
            }
            "string" => self.add(Node::String {
                max_length: count("maxLength"),
            }),
            "integer" => self.add(Node::Number { integer: true }),
            "number" => self.add(Node::Number { integer: false }),
            "boolean" => self.add(Node::Literals(vec!["true".into(), "false".into()])),
            "null" => self.add(Node::Literals(vec!["null".into()])),
            _ => self.add(Node::Any),
        }
    }
}

/// A local `$ref` (`#/$defs/Name`, `#/definitions/Name`, any JSON pointer into the root).
fn resolve<'v>(root: &'v Value, reference: &str) -> Option<&'v Value> {
    let pointer = reference.strip_prefix('#')?;
    if pointer.is_empty() {
        return Some(root);
    }
    root.pointer(pointer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn itinerary() -> Value {
        json!({
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "array", "items": {
                    "type": "object",
                    "properties": {"date": {"type": "string"}, "plan": {"type": "string"}, "weather": {"type": "string"}},
                    "required": ["date", "plan"]
                }},
                "budget_total": {"type": "number"},
                "packing": {"type": "array", "items": {"type": "string"}}
            },
            "required": ["city", "days", "budget_total"]
        })
    }

    fn judge() -> Value {
        json!({
            "type": "object",
            "properties": {
                "valid": {"type": "boolean"},
                "feedback": {"type": ["string", "null"]}
            },
            "required": ["valid", "feedback"],
            "additionalProperties": false
        })
    }

    fn complete(schema: &Value, text: &str) -> bool {
        let mut grammar = JsonGrammar::new(schema);
        grammar.advance(text) && grammar.may_end()
    }

    #[test]
    fn documents_matching_the_schema_are_accepted() {
        let schema = itinerary();
        for text in [
            r#"{"city":"Kyoto","days":[],"budget_total":1200.5}"#,
            r#"{"city":"Kyoto","days":[{"date":"2026-04-01","plan":"Temples"}],"budget_total":-3e2,"packing":["hat"]}"#,
            r#"{"city":"K\"y\u00e9oto","days":[{"date":"d","plan":"p","weather":"sun"},{"date":"e","plan":"q"}],"budget_total":0}"#,
        ] {
            assert!(complete(&schema, text), "{text}");
            assert!(serde_json::from_str::<Value>(text).is_ok());
        }
        assert!(complete(&judge(), r#"{"valid":true,"feedback":null}"#));
        assert!(complete(
            &judge(),
            r#"{"valid":false,"feedback":"Add a title."}"#
        ));
    }

    #[test]
    fn anything_off_the_schema_is_refused() {
        let schema = itinerary();
        let grammar = JsonGrammar::new(&schema);
        for text in [
            "[",
            " {",
            r#"{"days""#,
            r#"{"city":1"#,
            r#"{"city":"a"}"#,
            r#"{"city":"a","budget_total""#,
            r#"{"city":"a","days":[{"plan""#,
            r#"{"city":"a","days":[],"budget_total":01"#,
            r#"{"city":"a","days":[],"budget_total":1.}"#,
            "{\"city\":\"line\nbreak",
            r#"{"city":"bad \q escape"#,
        ] {
            assert!(!grammar.accepts(text), "{text}");
        }
        assert!(!complete(&judge(), r#"{"valid":"yes","feedback":null}"#));
        assert!(!complete(&judge(), r#"{"valid":true}"#));
        // A whole document accepts nothing after it.
        assert!(!JsonGrammar::new(&judge()).accepts(r#"{"valid":true,"feedback":null} "#));
    }

    #[test]
    fn the_completion_closes_every_open_value_with_the_required_keys() {
        let schema = itinerary();
        for prefix in [
            "",
            "{",
            r#"{"ci"#,
            r#"{"city":"Kyo"#,
            r#"{"city":"Kyoto","#,
            r#"{"city":"Kyoto","days":[{"date":"2026"#,
            r#"{"city":"Kyoto","days":[{"date":"d","plan":"p"},"#,
            r#"{"city":"Kyoto","days":[],"budget_total":12"#,
            r#"{"city":"Kyoto","days":[],"budget_total":1.5e"#,
            r#"{"city":"Kyoto","days":[],"budget_total":-"#,
            r#"{"city":"a \u00"#,
            r#"{"city":"a \"#,
        ] {
            let mut grammar = JsonGrammar::new(&schema);
            assert!(grammar.advance(prefix), "{prefix}");
            let rest = grammar.completion();
            let document = format!("{prefix}{rest}");
            assert!(complete(&schema, &document), "{document}");
            let value: Value =
                serde_json::from_str(&document).unwrap_or_else(|e| panic!("{e}: {document}"));
            for key in ["city", "days", "budget_total"] {
                assert!(value.get(key).is_some(), "{document}");
            }
        }
        let mut grammar = JsonGrammar::new(&judge());
        assert!(grammar.advance(r#"{"valid":f"#));
        assert_eq!(grammar.completion(), r#"alse,"feedback":""}"#);
    }

    #[test]
    fn enums_refs_and_integers_follow_the_schema() {
        let schema = json!({
            "$defs": {"Level": {"type": "string", "enum": ["low", "high"]}},
            "type": "object",
            "properties": {
                "level": {"allOf": [{"$ref": "#/$defs/Level"}], "description": "How much"},
                "count": {"type": "integer"},
                "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2}
            },
            "required": ["level", "count", "tags"]
        });
        assert!(complete(
            &schema,
            r#"{"level":"high","count":-12,"tags":["a","b"]}"#
        ));
        let grammar = JsonGrammar::new(&schema);
        assert!(!grammar.accepts(r#"{"level":"medium""#));
        assert!(!grammar.accepts(r#"{"level":"low","count":1.5"#));
        assert!(!grammar.accepts(r#"{"level":"low","count":1,"tags":[]"#));
        assert!(!grammar.accepts(r#"{"level":"low","count":1,"tags":["a","b","#));
        let mut grammar = JsonGrammar::new(&schema);
        assert!(grammar.advance("{"));
        assert_eq!(
            grammar.completion(),
            r#""level":"low","count":0,"tags":[""]}"#
        );
    }

    #[test]
    fn recursive_schemas_compile_once_and_still_complete() {
        let schema = json!({
            "$defs": {"Node": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "left": {"$ref": "#/$defs/Node"},
                    "right": {"$ref": "#/$defs/Node"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}
                },
                "required": ["name", "children"]
            }},
            "$ref": "#/$defs/Node"
        });
        let mut grammar = JsonGrammar::new(&schema);
        assert!(grammar.nodes.len() < 20, "{}", grammar.nodes.len());
        let prefix = r#"{"name":"a","left":{"name":"b","children":[{"name":"c","#;
        assert!(grammar.advance(prefix));
        let document = format!("{prefix}{}", grammar.completion());
        assert!(complete(&schema, &document), "{document}");
    }

    #[test]
    fn unknown_schemas_fall_back_to_any_json() {
        for schema in [json!({}), json!(true), json!({"type": "object"})] {
            let grammar = JsonGrammar::new(&schema);
            let document = r#"{"a":[1,-2.5e3,"x",{"b":null}],"c":true,"d":{}}"#;
            assert!(complete(&schema, document), "{schema}");
            assert!(!grammar.accepts(r#"{"a":tru "#));
            assert!(!grammar.accepts("{a"));
        }
        let mut grammar = JsonGrammar::any();
        assert!(grammar.advance(r#"{"a":[1,{"b":"#));
        let document = format!(r#"{{"a":[1,{{"b":{}"#, grammar.completion());
        assert!(
            serde_json::from_str::<Value>(&document).is_ok(),
            "{document}"
        );
    }
}
