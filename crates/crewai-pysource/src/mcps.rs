//! An agent's MCP servers in crew.py: `Agent(mcps=[...])` with URL strings and
//! `MCPServerStdio` / `MCPServerHTTP` / `MCPServerSSE`, and `@CrewBase`'s `mcp_server_params`
//! (`StdioServerParameters`, or dicts with `url` and `transport`) behind
//! `tools=self.get_mcp_tools(...)`. Each server becomes the mapping an `mcps:` entry of the YAML
//! takes, so one reader (crewai-project's) checks both.

use rustpython_parser::ast;
use serde_json::{Map, Value};

use crate::crew::Reader;
use crate::eval::{NotStatic, Scope, Symbol};
use crate::model::Spanned;
use crate::module::{dotted, single_binding};

/// `MCPServerStdio(...)` and its siblings: the fields each takes, and what it adds.
struct ServerClass {
    name: &'static str,
    fields: &'static [&'static str],
    /// Set on the mapping (`transport: sse` for `MCPServerSSE`).
    implied: Option<(&'static str, &'static str)>,
}

const SERVER_CLASSES: &[ServerClass] = &[
    ServerClass {
        name: "MCPServerStdio",
        fields: &["command", "args", "env", "tool_filter", "cache_tools_list"],
        implied: None,
    },
    ServerClass {
        name: "MCPServerHTTP",
        fields: &[
            "url",
            "headers",
            "streamable",
            "tool_filter",
            "cache_tools_list",
        ],
        implied: None,
    },
    ServerClass {
        name: "MCPServerSSE",
        fields: &["url", "headers", "tool_filter", "cache_tools_list"],
        implied: Some(("transport", "sse")),
    },
];

/// The fields of the mcp SDK's `StdioServerParameters` a server needs (`cwd` and the
/// encodings have no place here: the server runs in the project folder).
const STDIO_PARAMETERS: &[&str] = &["command", "args", "env"];

const HINT: &str = "write the agent's servers in config/crew.yaml under `agents: <name>: mcps:` (crew.yaml overrides crew.py)";

impl<'m> Reader<'m> {
    /// `mcps=[...]`: each server as an `mcps:` entry, at its line; `None` when one cannot be read
    /// (each problem reported).
    pub(crate) fn mcps(
        &mut self,
        scope: Scope<'m>,
        method: &str,
        value: &'m ast::Expr,
    ) -> Option<Vec<Spanned<Value>>> {
        let file = scope.file;
        let items = match value {
            ast::Expr::List(list) => &list.elts,
            ast::Expr::Tuple(tuple) => &tuple.elts,
            _ => {
                self.error(
                    file,
                    file.line(value),
                    format!(
                        "agent '{method}' argument `mcps=`: `{}` is not a list of servers written out",
                        file.source_of(value)
                    ),
                    Some(HINT.into()),
                );
                return None;
            }
        };
        let mut servers = Vec::new();
        let mut complete = true;
        for item in items {
            match self.mcp_server(scope, item) {
                Ok(server) => servers.push(Spanned {
                    value: server,
                    line: file.line(item),
                }),
                Err(why) => {
                    complete = false;
                    self.error(
                        file,
                        file.line(item),
                        format!(
                            "agent '{method}' MCP server `{}`: {why}",
                            first_line(&file.source_of(item))
                        ),
                        Some(HINT.into()),
                    );
                }
            }
        }
        complete.then_some(servers)
    }

    /// A URL string, or one of CrewAI's server classes, as an `mcps:` entry.
    fn mcp_server(&self, scope: Scope<'m>, item: &'m ast::Expr) -> Result<Value, String> {
        if let Ok(Value::String(url)) = self.modules.literal(scope, item) {
            return Ok(Value::String(url));
        }
        let ast::Expr::Call(call) = item else {
            return Err(
                "is neither a URL string nor MCPServerStdio/MCPServerHTTP/MCPServerSSE(...)".into(),
            );
        };
        let callee = dotted(&call.func).unwrap_or_default();
        let class_name = match self.modules.symbol_dotted(scope.file, &callee) {
            Symbol::External { module, attr } if module.starts_with("crewai") => attr,
            Symbol::Unbound(name) => name,
            _ => String::new(),
        };
        let Some(class) = SERVER_CLASSES.iter().find(|c| c.name == class_name) else {
            return Err(format!(
                "`{callee}(...)` is not one of crewai's MCPServerStdio, MCPServerHTTP, MCPServerSSE"
            ));
        };
        let mut fields = self.server_kwargs(scope, call, class.name, class.fields)?;
        if let Some((key, value)) = class.implied {
            fields.insert(key.into(), Value::String(value.into()));
        }
        Ok(Value::Object(fields))
    }

    /// A constructor's keyword arguments, each a literal and one of `allowed`; `tool_filter`
    /// may also be `create_static_tool_filter(allowed_tool_names=[...])`.
    fn server_kwargs(
        &self,
        scope: Scope<'m>,
        call: &'m ast::ExprCall,
        class: &str,
        allowed: &[&str],
    ) -> Result<Map<String, Value>, String> {
        if let Some(positional) = call.args.first() {
            return Err(format!(
                "{class}() takes keyword arguments; `{}` is positional",
                scope.file.source_of(positional)
            ));
        }
        let mut fields = Map::new();
        for keyword in &call.keywords {
            let Some(name) = keyword.arg.as_ref().map(|n| n.to_string()) else {
                return Err(format!(
                    "`**{}` cannot be followed statically",
                    scope.file.source_of(&keyword.value)
                ));
            };
            if !allowed.contains(&name.as_str()) {
                return Err(format!(
                    "{class}() argument `{name}=` has no counterpart here; it takes {}",
                    allowed.join(", ")
                ));
            }
            let value = if name == "tool_filter" {
                self.tool_filter(scope, &keyword.value)?
            } else {
                self.modules
                    .literal(scope, &keyword.value)
                    .map_err(|NotStatic { source }| {
                        format!(
                            "`{name}=` is computed (`{source}`), and only values written out can be read without running Python"
                        )
                    })?
            };
            fields.insert(name, value);
        }
        Ok(fields)
    }

    /// `tool_filter=["a", "b"]` or `create_static_tool_filter(allowed_tool_names=[...])`.
    fn tool_filter(&self, scope: Scope<'m>, value: &'m ast::Expr) -> Result<Value, String> {
        if let Ok(names @ Value::Array(_)) = self.modules.literal(scope, value) {
            return Ok(names);
        }
        if let ast::Expr::Call(call) = value
            && dotted(&call.func).is_some_and(|f| f.ends_with("create_static_tool_filter"))
            && call.args.is_empty()
        {
            let mut allowed = None;
            for keyword in &call.keywords {
                match keyword.arg.as_ref().map(|n| n.as_str()) {
                    Some("allowed_tool_names") => {
                        allowed = self.modules.literal(scope, &keyword.value).ok();
                    }
                    Some(other) => {
                        return Err(format!(
                            "create_static_tool_filter(`{other}=`) cannot be followed here: only `allowed_tool_names=[...]` is"
                        ));
                    }
                    None => return Err("`**` in create_static_tool_filter()".into()),
                }
            }
            if let Some(names @ Value::Array(_)) = allowed {
                return Ok(names);
            }
        }
        Err(format!(
            "`tool_filter={}` is a filter function, which cannot run here; give the tool names as a list (`tool_filter=[\"a\", \"b\"]`)",
            scope.file.source_of(value)
        ))
    }

    /// The servers `@CrewBase`'s `mcp_server_params` names, for an agent whose `tools=` calls
    /// `self.get_mcp_tools(*names)`: offered under the servers' own names (as CrewAI's
    /// `MCPServerAdapter` offers them), only `names` when some are given, each with the class's
    /// `mcp_connect_timeout`.
    pub(crate) fn mcp_server_params(
        &mut self,
        scope: Scope<'m>,
        call: &'m ast::ExprCall,
    ) -> Option<Vec<Spanned<Value>>> {
        let file = scope.file;
        let line = file.line(call);
        let refuse = |reader: &mut Self, why: String| {
            reader.error(file, line, why, Some(HINT.into()));
            None
        };
        let class = scope.class?;
        let Some(params) = single_binding(&class.body, "mcp_server_params") else {
            return refuse(
                self,
                "`self.get_mcp_tools()` needs the class's `mcp_server_params`, which it does not set (once, to the servers written out)".into(),
            );
        };
        let items: Vec<&'m ast::Expr> = match params {
            ast::Expr::List(list) => list.elts.iter().collect(),
            ast::Expr::Tuple(tuple) => tuple.elts.iter().collect(),
            single => vec![single],
        };
        let names = match get_mcp_tools_names(self, scope, call) {
            Ok(names) => names,
            Err(why) => return refuse(self, why),
        };
        if !names.is_empty() && items.len() > 1 {
            return refuse(
                self,
                "`get_mcp_tools(...)` picks tools by name across several servers, which this reader cannot split between them; give the agent `mcps=[...]` with a `tool_filter` per server".into(),
            );
        }
        let timeout = single_binding(&class.body, "mcp_connect_timeout")
            .map(|value| self.modules.literal(scope, value));
        let timeout = match timeout {
            None => None,
            Some(Ok(seconds @ Value::Number(_))) => Some(seconds),
            Some(_) => {
                return refuse(
                    self,
                    "`mcp_connect_timeout` must be a number of seconds written out".into(),
                );
            }
        };
        let mut servers = Vec::new();
        for item in items {
            let mut fields = match self.server_param(scope, item) {
                Ok(fields) => fields,
                Err(why) => {
                    self.error(
                        file,
                        file.line(item),
                        format!(
                            "mcp_server_params entry `{}`: {why}",
                            first_line(&file.source_of(item))
                        ),
                        Some(HINT.into()),
                    );
                    return None;
                }
            };
            fields.insert("prefix_tool_names".into(), Value::Bool(false));
            if !names.is_empty() {
                fields.insert("tool_filter".into(), Value::Array(names.clone()));
            }
            if let Some(timeout) = &timeout {
                fields.insert("connect_timeout".into(), timeout.clone());
            }
            servers.push(Spanned {
                value: Value::Object(fields),
                line: file.line(item),
            });
        }
        Some(servers)
    }

    /// One entry of `mcp_server_params`: `StdioServerParameters(...)` or a dict written out.
    fn server_param(
        &self,
        scope: Scope<'m>,
        item: &'m ast::Expr,
    ) -> Result<Map<String, Value>, String> {
        if let ast::Expr::Call(call) = item {
            let callee = dotted(&call.func).unwrap_or_default();
            if !callee.ends_with("StdioServerParameters") {
                return Err(format!(
                    "`{callee}(...)` is not StdioServerParameters or a dict with `url`"
                ));
            }
            return self.server_kwargs(scope, call, "StdioServerParameters", STDIO_PARAMETERS);
        }
        match self.modules.literal(scope, item) {
            Ok(Value::Object(fields)) => Ok(fields),
            Ok(other) => Err(format!("is {other}, not a dict with `url` and `transport`")),
            Err(NotStatic { source }) => Err(format!(
                "`{source}` is computed, and only values written out can be read without running Python"
            )),
        }
    }
}

/// The positional string arguments of `self.get_mcp_tools("a", "b")`.
fn get_mcp_tools_names<'m>(
    reader: &Reader<'m>,
    scope: Scope<'m>,
    call: &'m ast::ExprCall,
) -> Result<Vec<Value>, String> {
    if !call.keywords.is_empty() {
        return Err("`get_mcp_tools()` takes tool names, not keyword arguments".into());
    }
    call.args
        .iter()
        .map(|arg| match reader.modules.literal(scope, arg) {
            Ok(name @ Value::String(_)) => Ok(name),
            _ => Err(format!(
                "`get_mcp_tools({})` takes tool names written as strings",
                scope.file.source_of(arg)
            )),
        })
        .collect()
}

/// Whether `expr` is `self.get_mcp_tools(...)` (or `*self.get_mcp_tools(...)` in a list).
pub(crate) fn get_mcp_tools_call(expr: &ast::Expr) -> Option<&ast::ExprCall> {
    let expr = match expr {
        ast::Expr::Starred(starred) => &*starred.value,
        other => other,
    };
    let ast::Expr::Call(call) = expr else {
        return None;
    };
    (dotted(&call.func).as_deref() == Some("self.get_mcp_tools")).then_some(call)
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}
