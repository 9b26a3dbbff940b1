//! `tools=[...]`: each tool traced to the module that defines it — crewai_tools or another
//! installed package, a module of the project, or crew.py itself.

use rustpython_parser::ast;

use crate::crew::{Kind, Reader};
use crate::eval::{Scope, Symbol, literal_kwargs, self_call};
use crate::model::ToolUse;
use crate::module::{PyFile, dotted, is_decorator};

/// How deep a tool is followed through names and methods.
const MAX_DEPTH: usize = 12;

impl<'m> Reader<'m> {
    /// The tools of a `tools=` list; `None` (each problem reported) when one cannot be followed.
    pub(crate) fn tools(
        &mut self,
        scope: Scope<'m>,
        method: &str,
        kind: Kind,
        value: &'m ast::Expr,
    ) -> Option<Vec<ToolUse>> {
        let file = scope.file;
        let owner = format!("{} '{method}'", kind_name(kind));
        let hint = "list the tools in config/crew.yaml instead (crew.yaml overrides crew.py)";
        let (list_scope, items) = match list_items(self, scope, value) {
            Some(found) => found,
            None => {
                self.error(
                    file,
                    file.line(value),
                    format!(
                        "{owner} argument `tools=`: `{}` is a computed tool list, which cannot be followed statically",
                        file.source_of(value)
                    ),
                    Some(hint.into()),
                );
                return None;
            }
        };
        let mut tools = Vec::new();
        let mut complete = true;
        // `*self.get_mcp_tools(...)` are MCP servers, read with the agent's `mcps`.
        for item in items
            .iter()
            .filter(|item| crate::mcps::get_mcp_tools_call(item).is_none())
        {
            match self.tool_use(list_scope, item, 0) {
                Ok(tool) => tools.push(ToolUse {
                    line: file.line(value).max(line_in(file, list_scope.file, item)),
                    ..tool
                }),
                Err(why) => {
                    complete = false;
                    self.error(
                        file,
                        line_in(file, list_scope.file, item).max(file.line(value)),
                        format!("{owner} tool `{}`: {why}", list_scope.file.source_of(item)),
                        Some(hint.into()),
                    );
                }
            }
        }
        complete.then_some(tools)
    }

    /// One tool expression: a constructor call, a `@tool` function, a module-level instance,
    /// or a method of the class returning one of those.
    fn tool_use(
        &self,
        scope: Scope<'m>,
        expr: &'m ast::Expr,
        depth: usize,
    ) -> Result<ToolUse, String> {
        let file = scope.file;
        if depth > MAX_DEPTH {
            return Err("it is bound too deeply to follow".into());
        }
        if let Some(method) = self_call(expr) {
            let function = scope
                .class
                .and_then(|class| {
                    class.body.iter().find_map(|stmt| match stmt {
                        ast::Stmt::FunctionDef(f) if f.name.as_str() == method.as_str() => Some(f),
                        _ => None,
                    })
                })
                .ok_or_else(|| format!("the class has no method '{method}'"))?;
            let returned = function
                .body
                .iter()
                .find_map(|stmt| match stmt {
                    ast::Stmt::Return(ret) => ret.value.as_deref(),
                    _ => None,
                })
                .ok_or_else(|| {
                    format!("method '{method}' returns nothing this reader can follow")
                })?;
            let inner = Scope {
                locals: &function.body,
                ..scope
            };
            return self.tool_use(inner, returned, depth + 1);
        }
        match expr {
            ast::Expr::Call(call) => {
                let callee = dotted(&call.func)
                    .ok_or_else(|| "the tool is made by an expression, not a class".to_string())?;
                let (module, module_file, attr) = match self.modules.symbol_dotted(file, &callee) {
                    Symbol::Class(defined_in, class) => (
                        defined_in.module.clone(),
                        Some(defined_in.path.clone()),
                        class.name.to_string(),
                    ),
                    Symbol::External { module, attr } if !attr.is_empty() => (module, None, attr),
                    Symbol::Function(_, function) => {
                        return Err(format!(
                            "`{}()` calls a function; what it returns cannot be known without running it",
                            function.name
                        ));
                    }
                    _ => {
                        return Err(format!(
                            "`{callee}` is not imported or defined in {}",
                            display_name(file)
                        ));
                    }
                };
                if let Some(positional) = call.args.first() {
                    return Err(format!(
                        "positional argument `{}`; name the tool's arguments (`file_path=...`)",
                        file.source_of(positional)
                    ));
                }
                let kwargs =
                    literal_kwargs(self.modules, scope, &call.keywords).map_err(|(kw, not)| {
                        format!("argument `{kw}=` is not a literal (`{}`)", not.source)
                    })?;
                Ok(ToolUse {
                    line: file.line(expr),
                    module,
                    module_file,
                    attr,
                    kwargs,
                    is_function: false,
                })
            }
            ast::Expr::Name(_) | ast::Expr::Attribute(_) => {
                if let Some((at, bound)) = self.modules.follow(scope, expr) {
                    return self.tool_use(at, bound, depth + 1);
                }
                let name = dotted(expr).unwrap_or_default();
                match self.modules.symbol_dotted(file, &name) {
                    Symbol::Function(defined_in, function) => {
                        if !function
                            .decorator_list
                            .iter()
                            .any(|d| is_decorator(d, "tool"))
                        {
                            return Err(format!(
                                "function '{}' is not decorated with @tool",
                                function.name
                            ));
                        }
                        Ok(ToolUse {
                            line: file.line(expr),
                            module: defined_in.module.clone(),
                            module_file: Some(defined_in.path.clone()),
                            attr: function.name.to_string(),
                            kwargs: Default::default(),
                            is_function: true,
                        })
                    }
                    Symbol::Class(_, class) => Err(format!(
                        "names the class {0}, not a tool; write `{0}()`",
                        class.name
                    )),
                    Symbol::Value(at, bound) => self.tool_use(at, bound, depth + 1),
                    Symbol::External { module, attr } if !attr.is_empty() => Ok(ToolUse {
                        line: file.line(expr),
                        module,
                        module_file: None,
                        attr,
                        kwargs: Default::default(),
                        is_function: true,
                    }),
                    _ => Err(format!(
                        "`{name}` is not imported or defined in {}",
                        display_name(file)
                    )),
                }
            }
            _ => Err("it is computed, which cannot be followed statically".into()),
        }
    }
}

/// The items of a literal list or tuple, following a name bound to one.
pub(crate) fn list_items<'m>(
    reader: &Reader<'m>,
    scope: Scope<'m>,
    value: &'m ast::Expr,
) -> Option<(Scope<'m>, &'m [ast::Expr])> {
    match value {
        ast::Expr::List(list) => Some((scope, &list.elts)),
        ast::Expr::Tuple(tuple) => Some((scope, &tuple.elts)),
        ast::Expr::Name(_) | ast::Expr::Attribute(_) => {
            let (at, bound) = reader.modules.follow(scope, value)?;
            list_items(reader, at, bound)
        }
        _ => None,
    }
}

/// The line of `expr` when it is written in `file` (a tool bound elsewhere is reported where
/// the list uses it).
fn line_in(file: &PyFile, written_in: &PyFile, expr: &ast::Expr) -> usize {
    if std::ptr::eq(file, written_in) {
        file.line(expr)
    } else {
        0
    }
}

fn display_name(file: &PyFile) -> String {
    file.path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| file.module.clone())
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Agent => "agent",
        Kind::Task => "task",
        Kind::Crew => "crew",
    }
}
