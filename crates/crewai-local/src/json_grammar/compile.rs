//! Compiling a JSON schema into the automaton's nodes.

use std::collections::HashMap;

use serde_json::Value;

/// How deeply nested schemas are compiled before a value is left unconstrained.
pub(super) const MAX_SCHEMA_DEPTH: usize = 32;

/// One compiled schema node; nodes refer to each other by index into `JsonGrammar::nodes`.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Node {
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
pub(super) struct Property {
    /// The key as it is written, with quotes (`"city"`).
    pub(super) key: String,
    pub(super) value: usize,
    pub(super) required: bool,
}

/// Compiles a schema into [`Node`]s, resolving `$ref`s against the root schema.
pub(super) struct Compiler<'a> {
    root: &'a Value,
    nodes: Vec<Node>,
    /// The node of each `$ref` compiled so far, so a recursive schema compiles once.
    refs: HashMap<String, usize>,
}

impl<'a> Compiler<'a> {
    /// A compiler for `root` and the schemas inside it.
    pub(super) fn new(root: &'a Value) -> Self {
        Compiler {
            root,
            nodes: Vec::new(),
            refs: HashMap::new(),
        }
    }

    /// The nodes compiled so far, indexed by what [`Compiler::add`] and [`Compiler::compile`]
    /// returned.
    pub(super) fn into_nodes(self) -> Vec<Node> {
        self.nodes
    }

    pub(super) fn add(&mut self, node: Node) -> usize {
        self.nodes.push(node);
        self.nodes.len() - 1
    }

    pub(super) fn compile(&mut self, schema: &Value, depth: usize) -> usize {
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
