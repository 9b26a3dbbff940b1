//! Reading a `@CrewBase` class: its config paths, the `@agent`, `@task` and `@crew` methods
//! and the keyword arguments of what they return.

use std::path::Path;

use rustpython_parser::ast;
use serde_json::Value;

use crate::error::{PyDiagnostic, PySourceError, Severity};
use crate::eval::{NotStatic, Scope, Symbol, literal_kwargs, self_call};
use crate::mcps::get_mcp_tools_call;
use crate::model::{Arg, ArgValue, CrewPy, MethodDef, Spanned};
use crate::module::{Modules, PyFile, dotted, is_decorator, single_binding};

/// What a method returns: CrewAI's class it must construct, and where the YAML for it lives.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Agent,
    Task,
    Crew,
}

impl Kind {
    fn class(self) -> &'static str {
        match self {
            Kind::Agent => "Agent",
            Kind::Task => "Task",
            Kind::Crew => "Crew",
        }
    }
    fn config_attr(self) -> &'static str {
        match self {
            Kind::Agent => "agents_config",
            Kind::Task => "tasks_config",
            Kind::Crew => "",
        }
    }
    /// Where a user writes this entry's fields instead (`agents: researcher:` in crew.yaml).
    fn override_hint(self, method: &str, field: &str) -> String {
        match self {
            Kind::Agent => format!(
                "write it in config/crew.yaml under `agents: {method}: {field}:` (crew.yaml overrides crew.py)"
            ),
            Kind::Task => format!(
                "write it in config/crew.yaml under `tasks: {method}: {field}:` (crew.yaml overrides crew.py)"
            ),
            Kind::Crew => {
                format!("write `{field}:` in config/crew.yaml (crew.yaml overrides crew.py)")
            }
        }
    }
}

/// Reads the one `@CrewBase` class of `path` (the file of module `module` under
/// `source_root`), following its imports into the project's modules.
pub(crate) fn read(path: &Path, source_root: &Path) -> Result<CrewPy, PySourceError> {
    let mut modules = Modules::new(source_root.to_path_buf());
    let module = modules.module_name(path);
    let file = PyFile::read(path, module.clone())?;
    modules.add_with_imports(file);
    let mut reader = Reader {
        modules: &modules,
        diagnostics: Vec::new(),
    };
    for (importer, line, why) in &modules.failures {
        reader.diagnostics.push(PyDiagnostic {
            severity: Severity::Error,
            path: importer.clone(),
            line: *line,
            message: format!("an imported project module cannot be read: {why}"),
            hint: None,
        });
    }
    let Some(file) = modules.get(&module) else {
        return Err(PySourceError::Syntax {
            path: path.to_path_buf(),
            line: 1,
            message: "the file was read but is missing from the module table".into(),
        });
    };
    Ok(reader.crew_py(file))
}

pub(crate) struct Reader<'m> {
    pub modules: &'m Modules,
    pub diagnostics: Vec<PyDiagnostic>,
}

impl<'m> Reader<'m> {
    pub fn error(&mut self, file: &PyFile, line: usize, message: String, hint: Option<String>) {
        self.diagnostics.push(PyDiagnostic {
            severity: Severity::Error,
            path: file.path.clone(),
            line,
            message,
            hint,
        });
    }

    pub fn warning(&mut self, file: &PyFile, line: usize, message: String, hint: Option<String>) {
        self.diagnostics.push(PyDiagnostic {
            severity: Severity::Warning,
            path: file.path.clone(),
            line,
            message,
            hint,
        });
    }

    fn crew_py(mut self, file: &'m PyFile) -> CrewPy {
        let classes: Vec<&ast::StmtClassDef> = file
            .body
            .iter()
            .filter_map(|stmt| match stmt {
                ast::Stmt::ClassDef(class)
                    if class
                        .decorator_list
                        .iter()
                        .any(|d| is_decorator(d, "CrewBase")) =>
                {
                    Some(class)
                }
                _ => None,
            })
            .collect();
        let mut crew_py = CrewPy {
            path: file.path.clone(),
            module: file.module.clone(),
            class_name: String::new(),
            line: 1,
            agents_config: Spanned {
                value: "config/agents.yaml".into(),
                line: 1,
            },
            tasks_config: Spanned {
                value: "config/tasks.yaml".into(),
                line: 1,
            },
            agents: Vec::new(),
            tasks: Vec::new(),
            crew: None,
            manager_agent: None,
            before_kickoff: Vec::new(),
            after_kickoff: Vec::new(),
            diagnostics: Vec::new(),
        };
        let class = match classes.as_slice() {
            [] => {
                self.error(
                    file,
                    1,
                    "defines no @CrewBase class".into(),
                    Some("decorate the crew's class with @CrewBase, or describe the crew in config/crew.yaml".into()),
                );
                crew_py.diagnostics = self.diagnostics;
                return crew_py;
            }
            [one] => *one,
            [first, second, ..] => {
                self.error(
                    file,
                    file.line(*second),
                    format!(
                        "defines more than one @CrewBase class ({} and {}); only one crew per project is read",
                        first.name, second.name
                    ),
                    Some("keep one @CrewBase class in crew.py".into()),
                );
                *first
            }
        };
        crew_py.class_name = class.name.to_string();
        crew_py.line = file.line(class);
        for (attr, default, slot) in [
            (
                "agents_config",
                "config/agents.yaml",
                &mut crew_py.agents_config,
            ),
            (
                "tasks_config",
                "config/tasks.yaml",
                &mut crew_py.tasks_config,
            ),
        ] {
            slot.line = crew_py.line;
            let Some(value) = single_binding(&class.body, attr) else {
                continue;
            };
            match self.modules.literal(Scope::top(file), value) {
                Ok(Value::String(path)) => {
                    *slot = Spanned {
                        value: path,
                        line: file.line(value),
                    }
                }
                _ => self.error(
                    file,
                    file.line(value),
                    format!("`{attr}` must be a path written as a string literal"),
                    Some(format!("write `{attr} = \"{default}\"`")),
                ),
            }
        }
        self.methods(file, class, &mut crew_py);
        crew_py.diagnostics = self.diagnostics;
        crew_py
    }

    fn methods(&mut self, file: &'m PyFile, class: &'m ast::StmtClassDef, crew_py: &mut CrewPy) {
        let scope_of = |function: &'m ast::StmtFunctionDef| Scope {
            file,
            class: Some(class),
            locals: &function.body,
        };
        for stmt in &class.body {
            let ast::Stmt::FunctionDef(function) = stmt else {
                continue;
            };
            let decorated = |name: &str| {
                function
                    .decorator_list
                    .iter()
                    .any(|d| is_decorator(d, name))
            };
            let line = file.line(stmt);
            let named = || Spanned {
                value: function.name.to_string(),
                line,
            };
            if decorated("agent") {
                crew_py
                    .agents
                    .push(self.method(scope_of(function), function, Kind::Agent));
            } else if decorated("task") {
                crew_py
                    .tasks
                    .push(self.method(scope_of(function), function, Kind::Task));
            } else if decorated("crew") {
                if let Some(earlier) = &crew_py.crew {
                    self.error(
                        file,
                        line,
                        format!(
                            "a second @crew method '{}' (the first is '{}')",
                            function.name, earlier.name
                        ),
                        Some("keep one @crew method".into()),
                    );
                    continue;
                }
                crew_py.crew = Some(self.method(scope_of(function), function, Kind::Crew));
            } else if decorated("before_kickoff") {
                crew_py.before_kickoff.push(named());
            } else if decorated("after_kickoff") {
                crew_py.after_kickoff.push(named());
            }
        }
        let manager = crew_py
            .crew
            .as_ref()
            .and_then(|c| c.arg("manager_agent"))
            .and_then(|a| match &a.value {
                ArgValue::Json(Value::String(name)) => Some(name.clone()),
                _ => None,
            });
        if let Some(manager) = manager
            && !crew_py.agents.iter().any(|a| a.name == manager)
        {
            match class.body.iter().find_map(|stmt| match stmt {
                ast::Stmt::FunctionDef(f) if f.name.as_str() == manager => Some(f),
                _ => None,
            }) {
                Some(function) => {
                    crew_py.manager_agent =
                        Some(self.method(scope_of(function), function, Kind::Agent))
                }
                None => {
                    let line = crew_py
                        .crew
                        .as_ref()
                        .and_then(|c| c.arg("manager_agent"))
                        .map_or(crew_py.line, |a| a.line);
                    self.error(
                        file,
                        line,
                        format!("`manager_agent=self.{manager}()` names a method the class does not define"),
                        None,
                    );
                }
            }
        }
    }

    /// One method: the call it returns, its `config=` and its other keyword arguments.
    fn method(
        &mut self,
        scope: Scope<'m>,
        function: &'m ast::StmtFunctionDef,
        kind: Kind,
    ) -> MethodDef {
        let file = scope.file;
        let mut def = MethodDef {
            name: function.name.to_string(),
            line: file.line(function),
            config_key: None,
            args: Vec::new(),
        };
        let what = format!("@{} method '{}'", kind.class().to_lowercase(), def.name);
        let mut returned = None;
        let mut mcp_tools = None;
        for stmt in &function.body {
            match stmt {
                ast::Stmt::Expr(expr) if matches!(&*expr.value, ast::Expr::Constant(_)) => {}
                ast::Stmt::Assign(_) | ast::Stmt::AnnAssign(_)
                    if crate::module::assigned_name(stmt).is_some() => {}
                ast::Stmt::Return(ret) if returned.is_none() => returned = ret.value.as_deref(),
                other => {
                    self.error(
                        file,
                        file.line(other),
                        format!(
                            "{what} runs code this reader cannot follow (`{}`)",
                            first_line(&file.source_of(other))
                        ),
                        Some(
                            kind.override_hint(&def.name, "<field>")
                                .replace("it in", "what it computes in"),
                        ),
                    );
                    return def;
                }
            }
        }
        let Some(ast::Expr::Call(call)) = returned else {
            self.error(
                file,
                def.line,
                format!("{what} does not return `{}(...)`", kind.class()),
                Some(format!(
                    "return {}(config=..., ...) from it, or describe it in config/crew.yaml",
                    kind.class()
                )),
            );
            return def;
        };
        self.check_constructor(scope, call, kind, &what);
        for positional in &call.args {
            self.error(
                file,
                file.line(positional),
                format!(
                    "{what}: {}() takes keyword arguments; `{}` is positional",
                    kind.class(),
                    file.source_of(positional)
                ),
                Some("name the argument (`role=...`)".into()),
            );
        }
        for keyword in &call.keywords {
            let line = file.line(keyword);
            let Some(name) = &keyword.arg else {
                self.error(
                    file,
                    line,
                    format!(
                        "{what}: `**{}` cannot be followed statically",
                        file.source_of(&keyword.value)
                    ),
                    Some(kind.override_hint(&def.name, "<field>")),
                );
                continue;
            };
            let name = name.to_string();
            if name == "config" && kind != Kind::Crew {
                def.config_key = self.config_key(scope, &keyword.value, kind, &what);
                continue;
            }
            if kind == Kind::Agent && name == "tools" {
                mcp_tools = self.mcp_tools_in(scope, &keyword.value).or(mcp_tools);
                if get_mcp_tools_call(&keyword.value).is_some() {
                    def.args.push(Arg {
                        name,
                        line,
                        value: ArgValue::Tools(Vec::new()),
                    });
                    continue;
                }
            }
            if let Some(value) = self.arg_value(scope, &def.name, kind, &name, &keyword.value) {
                def.args.push(Arg { name, line, value });
            }
        }
        if let Some((line, servers)) = mcp_tools {
            match def.args.iter_mut().find(|arg| arg.name == "mcps") {
                Some(Arg {
                    value: ArgValue::Mcps(listed),
                    ..
                }) => listed.extend(servers),
                // An `mcps=` that could not be read is reported already.
                Some(_) => {}
                None => def.args.push(Arg {
                    name: "mcps".into(),
                    line,
                    value: ArgValue::Mcps(servers),
                }),
            }
        }
        def
    }

    /// The servers behind `tools=self.get_mcp_tools(...)` or `tools=[..., *self.get_mcp_tools(...)]`
    /// (with the line of the first call), from the class's `mcp_server_params`.
    fn mcp_tools_in(
        &mut self,
        scope: Scope<'m>,
        tools: &'m ast::Expr,
    ) -> Option<(usize, Vec<Spanned<Value>>)> {
        let calls: Vec<&'m ast::ExprCall> = match tools {
            ast::Expr::List(list) => list.elts.iter().filter_map(get_mcp_tools_call).collect(),
            ast::Expr::Tuple(tuple) => tuple.elts.iter().filter_map(get_mcp_tools_call).collect(),
            single => get_mcp_tools_call(single).into_iter().collect(),
        };
        let line = scope.file.line(*calls.first()?);
        let mut servers = Vec::new();
        for call in calls {
            servers.extend(self.mcp_server_params(scope, call)?);
        }
        Some((line, servers))
    }

    /// The returned call must construct CrewAI's own class: a subclass defined in the project
    /// has behaviour this reader cannot know.
    fn check_constructor(
        &mut self,
        scope: Scope<'m>,
        call: &'m ast::ExprCall,
        kind: Kind,
        what: &str,
    ) {
        let file = scope.file;
        let callee = dotted(&call.func).unwrap_or_else(|| file.source_of(&*call.func));
        let fine = match self.modules.symbol_dotted(file, &callee) {
            Symbol::External { module, attr } => {
                (module == "crewai" || module.starts_with("crewai.")) && attr == kind.class()
            }
            Symbol::Unbound(name) => name == kind.class(),
            _ => false,
        };
        if !fine {
            self.error(
                file,
                file.line(call),
                format!("{what} returns `{callee}(...)`, not crewai's {}; a custom {} class cannot be followed statically", kind.class(), kind.class()),
                Some(format!("return crewai's {}(...) and describe what the subclass changes in config/crew.yaml", kind.class())),
            );
        }
    }

    /// `config=self.agents_config['x']` (or `tasks_config`) → `x`.
    fn config_key(
        &mut self,
        scope: Scope<'m>,
        value: &'m ast::Expr,
        kind: Kind,
        what: &str,
    ) -> Option<Spanned<String>> {
        let file = scope.file;
        let line = file.line(value);
        if let ast::Expr::Subscript(subscript) = value
            && dotted(&subscript.value).as_deref() == Some(&format!("self.{}", kind.config_attr()))
            && let Ok(Value::String(key)) = self.modules.literal(scope, &subscript.slice)
        {
            return Some(Spanned { value: key, line });
        }
        self.error(
            file,
            line,
            format!(
                "{what}: `config=` must be `self.{}['<name>']`, not `{}`",
                kind.config_attr(),
                file.source_of(value)
            ),
            None,
        );
        None
    }

    /// The value of one keyword argument, as CrewAI reads that argument.
    fn arg_value(
        &mut self,
        scope: Scope<'m>,
        method: &str,
        kind: Kind,
        name: &str,
        value: &'m ast::Expr,
    ) -> Option<ArgValue> {
        let file = scope.file;
        let line = file.line(value);
        let owner = format!("{} '{method}'", kind.class().to_lowercase());
        let refuse = |reader: &mut Self, why: String| {
            reader.error(
                file,
                line,
                format!("{owner} argument `{name}=`: {why}"),
                Some(kind.override_hint(method, name)),
            );
            None
        };
        match (kind, name) {
            // A tool that cannot be followed is reported by `tools` itself.
            (_, "tools") => self.tools(scope, method, kind, value).map(ArgValue::Tools),
            (Kind::Agent, "mcps") => self.mcps(scope, method, value).map(ArgValue::Mcps),
            (_, "knowledge_sources") => match self.knowledge_sources(scope, value) {
                Ok(sources) => Some(ArgValue::Json(sources)),
                Err(why) => refuse(self, why),
            },
            (_, "knowledge_config") => match self.config_object(scope, value, "KnowledgeConfig") {
                Ok(config) => Some(ArgValue::Json(config)),
                Err(why) => refuse(self, why),
            },
            (Kind::Agent, "planning_config") => {
                match self.config_object(scope, value, "PlanningConfig") {
                    Ok(config) => Some(ArgValue::Json(config)),
                    Err(why) => refuse(self, why),
                }
            }
            (_, "llm" | "function_calling_llm" | "manager_llm" | "planning_llm" | "chat_llm") => {
                match self.llm(scope, value, 0) {
                    Ok(llm) => Some(ArgValue::Json(llm)),
                    // A model chosen in code (a helper method, an environment variable) is
                    // common in real projects, and one is always there to fall back on: the
                    // YAML's `llm:` or the run's default model. Said, not dropped in silence.
                    Err(why) => {
                        self.warning(
                            file,
                            line,
                            format!(
                                "{owner} argument `{name}=`: {why}, so it is not read; the {} is used instead",
                                if name == "llm" {
                                    "`llm:` of its YAML entry, or the default model,"
                                } else {
                                    "default"
                                }
                            ),
                            Some(kind.override_hint(method, name)),
                        );
                        None
                    }
                }
            }
            (Kind::Task, "agent") | (Kind::Crew, "manager_agent") => match self_call(value) {
                Some(method) => Some(ArgValue::Json(Value::String(method))),
                None => refuse(
                    self,
                    format!(
                        "`{}` is not a call of one of the class's methods (`self.name()`)",
                        file.source_of(value)
                    ),
                ),
            },
            (Kind::Task, "context") | (Kind::Crew, "agents" | "tasks") => {
                if (kind, name) != (Kind::Task, "context")
                    && dotted(value).as_deref() == Some(&format!("self.{name}"))
                {
                    // The decorated methods, CrewAI's default: nothing to override.
                    return None;
                }
                let items = match value {
                    ast::Expr::List(list) => &list.elts,
                    ast::Expr::Tuple(tuple) => &tuple.elts,
                    _ => {
                        return refuse(
                            self,
                            format!(
                                "`{}` is not a list of `self.name()` calls",
                                file.source_of(value)
                            ),
                        );
                    }
                };
                let mut names = Vec::new();
                for item in items {
                    match self_call(item) {
                        Some(method) => names.push(Value::String(method)),
                        None => {
                            return refuse(
                                self,
                                format!(
                                    "`{}` is not a call of one of the class's methods (`self.name()`)",
                                    file.source_of(item)
                                ),
                            );
                        }
                    }
                }
                Some(ArgValue::Json(Value::Array(names)))
            }
            (Kind::Task, "output_json" | "output_pydantic" | "response_model") => {
                match self.model_schema(scope, value) {
                    Ok(schema) => Some(ArgValue::Schema(schema)),
                    Err(why) => refuse(self, why),
                }
            }
            (Kind::Crew, "process") => match dotted(value)
                .as_deref()
                .and_then(|d| d.rsplit_once('.'))
            {
                Some((_, process)) => Some(ArgValue::Json(Value::String(process.to_string()))),
                None => match self.modules.literal(scope, value) {
                    Ok(literal) => Some(ArgValue::Json(literal)),
                    Err(NotStatic { source }) => refuse(
                        self,
                        format!("`{source}` is not `Process.sequential` or `Process.hierarchical`"),
                    ),
                },
            },
            _ => Some(self.plain(scope, value)),
        }
    }

    /// A literal as JSON, else the Python it refers to.
    fn plain(&mut self, scope: Scope<'m>, value: &'m ast::Expr) -> ArgValue {
        if let Ok(literal) = self.modules.literal(scope, value) {
            return ArgValue::Json(literal);
        }
        let reference =
            dotted(value).and_then(|d| match self.modules.symbol_dotted(scope.file, &d) {
                Symbol::Function(file, f) => Some(format!("{}.{}", file.module, f.name)),
                Symbol::Class(file, c) => Some(format!("{}.{}", file.module, c.name)),
                Symbol::External { module, attr } if !attr.is_empty() => {
                    Some(format!("{module}.{attr}"))
                }
                _ => None,
            });
        ArgValue::Python(reference.unwrap_or_else(|| scope.file.source_of(value)))
    }

    /// An `llm=` value: a model string, `LLM(model=..., ...)` as the mapping of its arguments,
    /// or a name / `self.x` / `self.x()` (an `@llm` method) standing for one.
    fn llm(&self, scope: Scope<'m>, value: &'m ast::Expr, depth: usize) -> Result<Value, String> {
        let file = scope.file;
        if depth > 8 {
            return Err(format!(
                "`{}` is bound too deeply to follow",
                file.source_of(value)
            ));
        }
        if let Ok(Value::String(model)) = self.modules.literal(scope, value) {
            return Ok(Value::String(model));
        }
        if let Some(method) = self_call(value)
            && let Some(function) = scope.class.and_then(|c| {
                c.body.iter().find_map(|s| match s {
                    ast::Stmt::FunctionDef(f) if f.name.as_str() == method.as_str() => Some(f),
                    _ => None,
                })
            })
            && let Some(returned) = function.body.iter().find_map(|s| match s {
                ast::Stmt::Return(r) => r.value.as_deref(),
                _ => None,
            })
        {
            let inner = Scope {
                locals: &function.body,
                ..scope
            };
            return self.llm(inner, returned, depth + 1);
        }
        if let Some((at, bound)) = self.modules.follow(scope, value) {
            return self.llm(at, bound, depth + 1);
        }
        let ast::Expr::Call(call) = value else {
            return Err(format!(
                "`{}` is not a model string or `LLM(...)`",
                file.source_of(value)
            ));
        };
        let callee = dotted(&call.func).unwrap_or_default();
        let is_llm = match self.modules.symbol_dotted(file, &callee) {
            Symbol::External { module, attr } => module.starts_with("crewai") && attr == "LLM",
            Symbol::Unbound(name) => name == "LLM",
            _ => false,
        };
        if !is_llm {
            return Err(format!(
                "`{}` is not a model string or crewai's `LLM(...)`",
                file.source_of(value)
            ));
        }
        let mut config =
            literal_kwargs(self.modules, scope, &call.keywords).map_err(|(kw, not)| {
                format!("LLM argument `{kw}=` is not a literal (`{}`)", not.source)
            })?;
        match call.args.as_slice() {
            [] => {}
            [model] => match self.modules.literal(scope, model) {
                Ok(model @ Value::String(_)) => {
                    config.insert("model".into(), model);
                }
                _ => {
                    return Err(format!(
                        "the LLM's model `{}` is not a string literal",
                        file.source_of(model)
                    ));
                }
            },
            [_, extra, ..] => {
                return Err(format!(
                    "LLM takes one positional argument (the model), not `{}`",
                    file.source_of(extra)
                ));
            }
        }
        Ok(Value::Object(config))
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}
