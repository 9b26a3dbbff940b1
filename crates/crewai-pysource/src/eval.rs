//! What an expression means without running it: which definition a name is bound to (through
//! the file's imports, into the project's own modules), and the value of literals.

use rustpython_parser::ast;
use serde_json::{Map, Number, Value};

use crate::module::{Modules, Origin, PyFile, dotted, single_binding};

/// How deep bindings are followed (`a = b`, `b = LLM(...)`): real code needs two or three.
const MAX_DEPTH: usize = 16;

/// Where an expression is read: its file, the class it is in, and the body of the method it is
/// in (whose single assignments it may use).
#[derive(Clone, Copy)]
pub(crate) struct Scope<'m> {
    pub file: &'m PyFile,
    pub class: Option<&'m ast::StmtClassDef>,
    pub locals: &'m [ast::Stmt],
}

impl<'m> Scope<'m> {
    pub fn top(file: &'m PyFile) -> Scope<'m> {
        Scope {
            file,
            class: None,
            locals: &[],
        }
    }
}

/// What a name is bound to.
#[derive(Clone)]
pub(crate) enum Symbol<'m> {
    /// A class defined in a project file.
    Class(&'m PyFile, &'m ast::StmtClassDef),
    /// A function defined in a project file.
    Function(&'m PyFile, &'m ast::StmtFunctionDef),
    /// A single assignment in a project file: the value, read in that file's top scope.
    Value(Scope<'m>, &'m ast::Expr),
    /// A name from a module outside the project (`crewai_tools.SerperDevTool`, `crewai.Agent`).
    External { module: String, attr: String },
    /// A name nothing binds (a builtin such as `str`, or a typo).
    Unbound(String),
}

/// An expression the reader cannot turn into a value, with its source for the message.
#[derive(Debug)]
pub(crate) struct NotStatic {
    pub source: String,
}

impl Modules {
    /// What `name` means at the top of `file`.
    pub fn symbol<'m>(&'m self, file: &'m PyFile, name: &str) -> Symbol<'m> {
        self.symbol_at(file, name, 0)
    }

    fn symbol_at<'m>(&'m self, file: &'m PyFile, name: &str, depth: usize) -> Symbol<'m> {
        if depth > MAX_DEPTH {
            return Symbol::Unbound(name.to_string());
        }
        match file.origin_of(name) {
            Origin::Local => {
                if let Some(class) = file.class(name) {
                    Symbol::Class(file, class)
                } else if let Some(function) = file.function(name) {
                    Symbol::Function(file, function)
                } else if let Some(value) = file.binding(name) {
                    Symbol::Value(Scope::top(file), value)
                } else {
                    // Assigned more than once: which value holds depends on running it.
                    Symbol::Unbound(name.to_string())
                }
            }
            Origin::Imported { module, attr } if attr.is_empty() => Symbol::External {
                module,
                attr: String::new(),
            },
            Origin::Imported { module, attr } => self.attribute_of(&module, &attr, depth + 1),
            Origin::Unbound => Symbol::Unbound(name.to_string()),
        }
    }

    /// `attr` of `module`: a definition in a project module (followed through its own imports,
    /// as a package's `__init__.py` re-exports), a submodule, or a name of an outside package.
    fn attribute_of<'m>(&'m self, module: &str, attr: &str, depth: usize) -> Symbol<'m> {
        match self.get(module) {
            Some(file) => match self.symbol_at(file, attr, depth) {
                Symbol::Unbound(_) if self.get(&format!("{module}.{attr}")).is_some() => {
                    Symbol::External {
                        module: format!("{module}.{attr}"),
                        attr: String::new(),
                    }
                }
                found => found,
            },
            None => Symbol::External {
                module: module.to_string(),
                attr: attr.to_string(),
            },
        }
    }

    /// What a dotted name means in `file`: `SerperDevTool`, `crewai_tools.SerperDevTool`,
    /// `custom_tool.MyTool` after `from .tools import custom_tool`.
    pub fn symbol_dotted<'m>(&'m self, file: &'m PyFile, path: &str) -> Symbol<'m> {
        let mut parts = path.split('.');
        let first = parts.next().unwrap_or_default();
        let mut current = self.symbol(file, first);
        for part in parts {
            current = match current {
                Symbol::External { module, attr } if attr.is_empty() => {
                    if self.get(&module).is_some() {
                        self.attribute_of(&module, part, 1)
                    } else {
                        Symbol::External {
                            module,
                            attr: part.to_string(),
                        }
                    }
                }
                Symbol::External { module, attr } => Symbol::External {
                    module,
                    attr: format!("{attr}.{part}"),
                },
                _ => return Symbol::Unbound(path.to_string()),
            };
        }
        current
    }

    /// The expression a name or `self.attribute` stands for, with the scope to read it in:
    /// a single assignment in the method, the class body, the file, or a project module.
    pub fn follow<'m>(
        &'m self,
        scope: Scope<'m>,
        expr: &'m ast::Expr,
    ) -> Option<(Scope<'m>, &'m ast::Expr)> {
        match expr {
            ast::Expr::Name(name) => {
                if let Some(value) = single_binding(scope.locals, name.id.as_str()) {
                    return Some((scope, value));
                }
                match self.symbol(scope.file, name.id.as_str()) {
                    Symbol::Value(at, value) => Some((at, value)),
                    _ => None,
                }
            }
            ast::Expr::Attribute(attribute) => {
                let is_self =
                    matches!(&*attribute.value, ast::Expr::Name(n) if n.id.as_str() == "self");
                let class = scope.class?;
                if !is_self {
                    return None;
                }
                let value = single_binding(&class.body, attribute.attr.as_str())?;
                Some((
                    Scope {
                        file: scope.file,
                        class: Some(class),
                        locals: &[],
                    },
                    value,
                ))
            }
            _ => None,
        }
    }

    /// The JSON value of a literal (`"x"`, `3`, `-0.5`, `True`, `None`, lists, tuples and dicts
    /// of literals), following names bound to literals.
    pub fn literal<'m>(
        &'m self,
        scope: Scope<'m>,
        expr: &'m ast::Expr,
    ) -> Result<Value, NotStatic> {
        self.literal_at(scope, expr, 0)
    }

    fn literal_at<'m>(
        &'m self,
        scope: Scope<'m>,
        expr: &'m ast::Expr,
        depth: usize,
    ) -> Result<Value, NotStatic> {
        let not_static = || NotStatic {
            source: scope.file.source_of(expr),
        };
        if depth > MAX_DEPTH {
            return Err(not_static());
        }
        match expr {
            ast::Expr::Constant(constant) => constant_value(&constant.value).ok_or_else(not_static),
            ast::Expr::UnaryOp(unary) if matches!(unary.op, ast::UnaryOp::USub) => {
                match self.literal_at(scope, &unary.operand, depth + 1)? {
                    Value::Number(n) => n
                        .as_i64()
                        .map(|i| Value::from(-i))
                        .or_else(|| {
                            n.as_f64()
                                .and_then(|f| Number::from_f64(-f))
                                .map(Value::Number)
                        })
                        .ok_or_else(not_static),
                    _ => Err(not_static()),
                }
            }
            ast::Expr::List(list) => self.literal_list(scope, &list.elts, depth),
            ast::Expr::Tuple(tuple) => self.literal_list(scope, &tuple.elts, depth),
            ast::Expr::Dict(dict) => {
                let mut map = Map::new();
                for (key, value) in dict.keys.iter().zip(&dict.values) {
                    // `**other` inside a dict literal has no key.
                    let Some(key) = key else {
                        return Err(not_static());
                    };
                    let key = match self.literal_at(scope, key, depth + 1)? {
                        Value::String(s) => s,
                        Value::Number(n) => n.to_string(),
                        Value::Bool(b) => if b { "True" } else { "False" }.to_string(),
                        _ => return Err(not_static()),
                    };
                    map.insert(key, self.literal_at(scope, value, depth + 1)?);
                }
                Ok(Value::Object(map))
            }
            ast::Expr::Name(_) | ast::Expr::Attribute(_) => match self.follow(scope, expr) {
                Some((at, value)) => self
                    .literal_at(at, value, depth + 1)
                    .map_err(|_| not_static()),
                None => Err(not_static()),
            },
            _ => Err(not_static()),
        }
    }

    fn literal_list<'m>(
        &'m self,
        scope: Scope<'m>,
        items: &'m [ast::Expr],
        depth: usize,
    ) -> Result<Value, NotStatic> {
        items
            .iter()
            .map(|item| self.literal_at(scope, item, depth + 1))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array)
    }
}

/// A Python constant as JSON; `None` for the ones JSON has no form for (bytes, complex, `...`).
pub(crate) fn constant_value(constant: &ast::Constant) -> Option<Value> {
    match constant {
        ast::Constant::None => Some(Value::Null),
        ast::Constant::Bool(b) => Some(Value::Bool(*b)),
        ast::Constant::Str(s) => Some(Value::String(s.clone())),
        ast::Constant::Int(i) => {
            let text = i.to_string();
            text.parse::<i64>()
                .map(Value::from)
                .or_else(|_| text.parse::<u64>().map(Value::from))
                .ok()
        }
        ast::Constant::Float(f) => Number::from_f64(*f).map(Value::Number),
        ast::Constant::Tuple(items) => items
            .iter()
            .map(constant_value)
            .collect::<Option<Vec<_>>>()
            .map(Value::Array),
        ast::Constant::Bytes(_) | ast::Constant::Complex { .. } | ast::Constant::Ellipsis => None,
    }
}

/// The keyword arguments of a call whose values are all literals, else the first that is not
/// (with its keyword). `**kwargs` is reported as not literal.
pub(crate) fn literal_kwargs<'m>(
    modules: &'m Modules,
    scope: Scope<'m>,
    keywords: &'m [ast::Keyword],
) -> Result<Map<String, Value>, (String, NotStatic)> {
    let mut map = Map::new();
    for keyword in keywords {
        let Some(name) = &keyword.arg else {
            return Err((
                "**".to_string(),
                NotStatic {
                    source: format!("**{}", scope.file.source_of(&keyword.value)),
                },
            ));
        };
        let value = modules
            .literal(scope, &keyword.value)
            .map_err(|e| (name.to_string(), e))?;
        map.insert(name.to_string(), value);
    }
    Ok(map)
}

/// The method a `self.name()` call (no arguments) invokes.
pub(crate) fn self_call(expr: &ast::Expr) -> Option<String> {
    let ast::Expr::Call(call) = expr else {
        return None;
    };
    if !call.args.is_empty() || !call.keywords.is_empty() {
        return None;
    }
    let name = dotted(&call.func)?;
    let method = name.strip_prefix("self.")?;
    (!method.contains('.')).then(|| method.to_string())
}
