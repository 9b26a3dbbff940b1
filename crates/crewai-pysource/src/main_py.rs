//! `main.py`: the literal `inputs = {...}` of `run()`, `train()`, `test()` and the other
//! top-level functions, as the default inputs of a run.

use std::path::Path;

use rustpython_parser::ast;
use serde_json::{Map, Value};

use crate::error::PySourceError;
use crate::eval::Scope;
use crate::model::{MainInputs, MainPy};
use crate::module::{Modules, PyFile};

/// Reads the `inputs` dict literal of each top-level function of `path`.
pub(crate) fn read(path: &Path) -> Result<MainPy, PySourceError> {
    let file = PyFile::read(path, "main".into())?;
    let modules = Modules::new(path.parent().unwrap_or(path).to_path_buf());
    let mut inputs = Vec::new();
    for stmt in &file.body {
        let ast::Stmt::FunctionDef(function) = stmt else {
            continue;
        };
        let scope = Scope {
            file: &file,
            class: None,
            locals: &function.body,
        };
        if let Some(found) = inputs_in(&modules, scope, &function.body, function.name.as_str()) {
            inputs.push(found);
        }
    }
    Ok(MainPy {
        path: path.to_path_buf(),
        inputs,
    })
}

/// The first `inputs = {...}` in `body`, looking into `try:` and `with` blocks as CrewAI's
/// template wraps the kickoff in one.
fn inputs_in(
    modules: &Modules,
    scope: Scope<'_>,
    body: &[ast::Stmt],
    function: &str,
) -> Option<MainInputs> {
    for stmt in body {
        match stmt {
            ast::Stmt::Assign(assign) => {
                let [ast::Expr::Name(target)] = assign.targets.as_slice() else {
                    continue;
                };
                let ast::Expr::Dict(dict) = &*assign.value else {
                    continue;
                };
                if target.id.as_str() != "inputs" {
                    continue;
                }
                let mut values = Map::new();
                let mut non_literal = Vec::new();
                for (key, value) in dict.keys.iter().zip(&dict.values) {
                    let Some(Ok(Value::String(key))) =
                        key.as_ref().map(|k| modules.literal(scope, k))
                    else {
                        // `**other` or a computed key: which input it is cannot be known.
                        non_literal.push((scope.file.source_of(value), scope.file.line(value)));
                        continue;
                    };
                    match modules.literal(scope, value) {
                        Ok(literal) => {
                            values.insert(key, literal);
                        }
                        Err(_) => non_literal.push((key, scope.file.line(value))),
                    }
                }
                return Some(MainInputs {
                    function: function.to_string(),
                    line: scope.file.line(stmt),
                    values,
                    non_literal,
                });
            }
            ast::Stmt::Try(block) => {
                if let Some(found) = inputs_in(modules, scope, &block.body, function) {
                    return Some(found);
                }
            }
            ast::Stmt::With(block) => {
                if let Some(found) = inputs_in(modules, scope, &block.body, function) {
                    return Some(found);
                }
            }
            _ => {}
        }
    }
    None
}
