//! One parsed Python file: its statements, the line of any node, what its names are bound to
//! (imports, single assignments, classes and functions), and how its imports map to files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rustpython_parser::Parse;
use rustpython_parser::ast::{self, Ranged};
use rustpython_parser::text_size::TextSize;

use crate::error::PySourceError;

/// A Python file of the project, parsed.
#[derive(Debug)]
pub(crate) struct PyFile {
    pub path: PathBuf,
    /// The dotted module name (`my_crew.crew`), from the file's place under the source root.
    pub module: String,
    pub text: String,
    pub body: Vec<ast::Stmt>,
    line_starts: Vec<usize>,
}

/// Where a name used in a file comes from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Origin {
    /// `from module import attr [as name]`, or `import module [as name]` (attr empty).
    Imported { module: String, attr: String },
    /// Defined in the file itself (a class, a function, or a single assignment).
    Local,
    /// Nothing in the file binds it (a builtin, or a typo).
    Unbound,
}

impl PyFile {
    pub fn read(path: &Path, module: String) -> Result<PyFile, PySourceError> {
        let text = std::fs::read_to_string(path).map_err(|source| PySourceError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        PyFile::parse(path, module, text)
    }

    pub fn parse(path: &Path, module: String, text: String) -> Result<PyFile, PySourceError> {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        let parsed = ast::Suite::parse(&text, &path.to_string_lossy());
        let mut file = PyFile {
            path: path.to_path_buf(),
            module,
            text: String::new(),
            body: Vec::new(),
            line_starts,
        };
        match parsed {
            Ok(body) => file.body = body,
            Err(error) => {
                return Err(PySourceError::Syntax {
                    path: path.to_path_buf(),
                    line: file.line_at(error.offset),
                    message: error.error.to_string(),
                });
            }
        }
        file.text = text;
        Ok(file)
    }

    fn line_at(&self, offset: TextSize) -> usize {
        let offset = usize::from(offset);
        self.line_starts.partition_point(|start| *start <= offset)
    }

    /// The 1-based line a node starts on.
    pub fn line(&self, node: &impl Ranged) -> usize {
        self.line_at(node.start())
    }

    /// The source text of a node, for messages.
    pub fn source_of(&self, node: &impl Ranged) -> String {
        let range = node.range();
        let text = self
            .text
            .get(usize::from(range.start())..usize::from(range.end()))
            .unwrap_or_default();
        let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if one_line.chars().count() > 80 {
            format!("{}...", one_line.chars().take(77).collect::<String>())
        } else {
            one_line
        }
    }

    /// Where `name` comes from, as the file's top level binds it.
    pub fn origin_of(&self, name: &str) -> Origin {
        let mut found = Origin::Unbound;
        for stmt in &self.body {
            match stmt {
                ast::Stmt::ImportFrom(import) => {
                    for alias in &import.names {
                        let local = alias.asname.as_ref().unwrap_or(&alias.name);
                        if local.as_str() == name {
                            found = Origin::Imported {
                                module: self.absolute_module(
                                    import.module.as_ref().map(|m| m.as_str()),
                                    import.level.map(|l| l.to_usize()).unwrap_or(0),
                                ),
                                attr: alias.name.to_string(),
                            };
                        }
                    }
                }
                ast::Stmt::Import(import) => {
                    for alias in &import.names {
                        // `import a.b` binds `a`; `import a.b as c` binds `c` to `a.b`.
                        let (local, module) = match &alias.asname {
                            Some(asname) => (asname.to_string(), alias.name.to_string()),
                            None => {
                                let first = alias.name.split('.').next().unwrap_or_default();
                                (first.to_string(), first.to_string())
                            }
                        };
                        if local == name {
                            found = Origin::Imported {
                                module,
                                attr: String::new(),
                            };
                        }
                    }
                }
                ast::Stmt::ClassDef(class) if class.name.as_str() == name => found = Origin::Local,
                ast::Stmt::FunctionDef(function) if function.name.as_str() == name => {
                    found = Origin::Local
                }
                _ if assigned_name(stmt) == Some(name) => found = Origin::Local,
                _ => {}
            }
        }
        found
    }

    /// `from .x import y` inside this file's package, as an absolute module name.
    pub fn absolute_module(&self, module: Option<&str>, level: usize) -> String {
        if level == 0 {
            return module.unwrap_or_default().to_string();
        }
        let mut parts: Vec<&str> = self.module.split('.').collect();
        // The file's own module name is dropped first: `.` is its package.
        for _ in 0..level {
            parts.pop();
        }
        if let Some(module) = module {
            parts.extend(module.split('.'));
        }
        parts.join(".")
    }

    /// The value a top-level name is bound to when it is assigned exactly once (`llm = LLM(...)`).
    pub fn binding(&self, name: &str) -> Option<&ast::Expr> {
        single_binding(&self.body, name)
    }

    pub fn class(&self, name: &str) -> Option<&ast::StmtClassDef> {
        self.body.iter().find_map(|stmt| match stmt {
            ast::Stmt::ClassDef(class) if class.name.as_str() == name => Some(class),
            _ => None,
        })
    }

    pub fn function(&self, name: &str) -> Option<&ast::StmtFunctionDef> {
        self.body.iter().find_map(|stmt| match stmt {
            ast::Stmt::FunctionDef(function) if function.name.as_str() == name => Some(function),
            _ => None,
        })
    }
}

/// The single name a statement assigns (`x = ...` or `x: T = ...`), if that is what it does.
pub(crate) fn assigned_name(stmt: &ast::Stmt) -> Option<&str> {
    match stmt {
        ast::Stmt::Assign(assign) => match assign.targets.as_slice() {
            [ast::Expr::Name(name)] => Some(name.id.as_str()),
            _ => None,
        },
        ast::Stmt::AnnAssign(assign) if assign.value.is_some() => match assign.target.as_ref() {
            ast::Expr::Name(name) => Some(name.id.as_str()),
            _ => None,
        },
        _ => None,
    }
}

/// The value `name` is given in `body` when exactly one statement there assigns it.
pub(crate) fn single_binding<'a>(body: &'a [ast::Stmt], name: &str) -> Option<&'a ast::Expr> {
    let mut values = body.iter().filter_map(|stmt| match stmt {
        ast::Stmt::Assign(assign) if assigned_name(stmt) == Some(name) => Some(&*assign.value),
        ast::Stmt::AnnAssign(assign) if assigned_name(stmt) == Some(name) => {
            assign.value.as_deref()
        }
        _ => None,
    });
    let first = values.next()?;
    values.next().is_none().then_some(first)
}

/// The project's Python files that crew.py reaches through its imports, each parsed once and
/// kept for the whole reading (so every node borrowed from them lives as long as the reader).
#[derive(Debug)]
pub(crate) struct Modules {
    /// The folder holding the top-level packages (`src/`).
    pub source_root: PathBuf,
    files: BTreeMap<String, PyFile>,
    /// Project modules that were imported but do not read or parse: the importing file, the
    /// line of the import, and why.
    pub failures: Vec<(PathBuf, usize, String)>,
}

/// How many project files one reading follows at most (a guard against import cycles through
/// generated code; real crews import a handful).
const MAX_FILES: usize = 256;

impl Modules {
    pub fn new(source_root: PathBuf) -> Modules {
        Modules {
            source_root,
            files: BTreeMap::new(),
            failures: Vec::new(),
        }
    }

    /// The dotted module name of a file under the source root (`src/pkg/crew.py` → `pkg.crew`).
    pub fn module_name(&self, path: &Path) -> String {
        let relative = path.strip_prefix(&self.source_root).unwrap_or(path);
        let mut parts: Vec<String> = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if let Some(last) = parts.last_mut() {
            *last = last.strip_suffix(".py").unwrap_or(last).to_string();
        }
        if parts.last().is_some_and(|l| l == "__init__") {
            parts.pop();
        }
        parts.join(".")
    }

    /// The file of a module of the project, if it is one (`pkg.tools.custom_tool`).
    pub fn file_of(&self, module: &str) -> Option<PathBuf> {
        if module.is_empty() {
            return None;
        }
        let base = module
            .split('.')
            .fold(self.source_root.clone(), |path, part| path.join(part));
        let as_file = base.with_extension("py");
        if as_file.is_file() {
            return Some(as_file);
        }
        let as_package = base.join("__init__.py");
        as_package.is_file().then_some(as_package)
    }

    /// Adds `file` and every project module it imports, transitively.
    pub fn add_with_imports(&mut self, file: PyFile) {
        let mut pending = vec![file];
        while let Some(file) = pending.pop() {
            for (module, line) in imported_modules(&file) {
                if self.files.contains_key(&module)
                    || pending.iter().any(|p| p.module == module)
                    || self.files.len() + pending.len() >= MAX_FILES
                {
                    continue;
                }
                let Some(path) = self.file_of(&module) else {
                    continue;
                };
                match PyFile::read(&path, module) {
                    Ok(imported) => pending.push(imported),
                    Err(error) => self
                        .failures
                        .push((file.path.clone(), line, error.to_string())),
                }
            }
            self.files.insert(file.module.clone(), file);
        }
    }

    pub fn get(&self, module: &str) -> Option<&PyFile> {
        self.files.get(module)
    }
}

/// The absolute names of the modules a file imports, with the line of each import; for
/// `from a import b`, `a.b` too (it may be a submodule).
fn imported_modules(file: &PyFile) -> Vec<(String, usize)> {
    let mut modules = Vec::new();
    for stmt in &file.body {
        match stmt {
            ast::Stmt::ImportFrom(import) => {
                let line = file.line(stmt);
                let module = file.absolute_module(
                    import.module.as_ref().map(|m| m.as_str()),
                    import.level.map(|l| l.to_usize()).unwrap_or(0),
                );
                for alias in &import.names {
                    let sub = match module.is_empty() {
                        true => alias.name.to_string(),
                        false => format!("{module}.{}", alias.name),
                    };
                    modules.push((sub, line));
                }
                modules.push((module, line));
            }
            ast::Stmt::Import(import) => {
                for alias in &import.names {
                    modules.push((alias.name.to_string(), file.line(stmt)));
                }
            }
            _ => {}
        }
    }
    modules
}

/// The dotted name an expression spells (`Process.hierarchical`, `self.agents`), if it is one.
pub(crate) fn dotted(expr: &ast::Expr) -> Option<String> {
    match expr {
        ast::Expr::Name(name) => Some(name.id.to_string()),
        ast::Expr::Attribute(attribute) => {
            dotted(&attribute.value).map(|base| format!("{base}.{}", attribute.attr))
        }
        _ => None,
    }
}

/// Whether a decorator is `@name` or `@name(...)`, whatever module it is reached through
/// (`@tool`, `@tool("Name")`, `@crewai.tools.tool`).
pub(crate) fn is_decorator(decorator: &ast::Expr, name: &str) -> bool {
    let target = match decorator {
        ast::Expr::Call(call) => &*call.func,
        other => other,
    };
    dotted(target).is_some_and(|d| d == name || d.ends_with(&format!(".{name}")))
}
