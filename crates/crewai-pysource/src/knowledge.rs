//! `knowledge_sources=[...]` and `knowledge_config=...`: crewai's knowledge source classes
//! (`PDFKnowledgeSource(file_paths=[...], chunk_size=...)`) read into the mapping form
//! crewai-knowledge takes (`{type: PDFKnowledgeSource, file_paths: [...], ...}`), and
//! `KnowledgeConfig(...)` into a mapping of its arguments.

use rustpython_parser::ast;
use serde_json::{Map, Value};

use crate::crew::Reader;
use crate::eval::{Scope, Symbol, literal_kwargs};
use crate::module::dotted;
use crate::tools::list_items;

/// The knowledge source classes this reader follows (their keyword arguments must be literals).
const SOURCE_CLASSES: &[&str] = &[
    "StringKnowledgeSource",
    "TextFileKnowledgeSource",
    "PDFKnowledgeSource",
    "CSVKnowledgeSource",
    "ExcelKnowledgeSource",
    "JSONKnowledgeSource",
    "CrewDoclingSource",
];

/// How deep names are followed (`source = PDFKnowledgeSource(...)`, then `[source]`).
const MAX_DEPTH: usize = 8;

impl<'m> Reader<'m> {
    /// The sources of a `knowledge_sources=` value, as a JSON list of mappings.
    pub(crate) fn knowledge_sources(
        &self,
        scope: Scope<'m>,
        value: &'m ast::Expr,
    ) -> Result<Value, String> {
        let (at, items) = list_items(self, scope, value).ok_or_else(|| {
            format!(
                "`{}` is not a list of knowledge sources",
                scope.file.source_of(value)
            )
        })?;
        items
            .iter()
            .map(|item| {
                self.crewai_call(at, item, SOURCE_CLASSES, 0)
                    .map(|(class, mut kwargs)| {
                        let mut source = Map::new();
                        source.insert("type".into(), Value::String(class));
                        source.append(&mut kwargs);
                        Value::Object(source)
                    })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array)
    }

    /// A configuration object given to crewai (`knowledge_config=KnowledgeConfig(...)`,
    /// `planning_config=PlanningConfig(...)`), or a dict literal, as the mapping of its arguments.
    pub(crate) fn config_object(
        &self,
        scope: Scope<'m>,
        value: &'m ast::Expr,
        class: &str,
    ) -> Result<Value, String> {
        if let Ok(literal @ Value::Object(_)) = self.modules.literal(scope, value) {
            return Ok(literal);
        }
        self.crewai_call(scope, value, &[class], 0)
            .map(|(_, kwargs)| Value::Object(kwargs))
    }

    /// `expr` (or what a name binds it to) as a call of one of crewai's `classes` with literal
    /// keyword arguments: the class and the arguments.
    fn crewai_call(
        &self,
        scope: Scope<'m>,
        expr: &'m ast::Expr,
        classes: &[&str],
        depth: usize,
    ) -> Result<(String, Map<String, Value>), String> {
        let file = scope.file;
        if depth < MAX_DEPTH
            && let Some((at, bound)) = self.modules.follow(scope, expr)
        {
            return self.crewai_call(at, bound, classes, depth + 1);
        }
        let expected = || {
            format!(
                "`{}` is not a call of {}",
                file.source_of(expr),
                classes.join(", ")
            )
        };
        let ast::Expr::Call(call) = expr else {
            return Err(expected());
        };
        let callee = dotted(&call.func).unwrap_or_default();
        let class = match self.modules.symbol_dotted(file, &callee) {
            Symbol::External { module, attr } if module.starts_with("crewai") => attr,
            Symbol::Unbound(name) => name,
            _ => return Err(expected()),
        };
        if !classes.contains(&class.as_str()) {
            return Err(expected());
        }
        if let Some(positional) = call.args.first() {
            return Err(format!(
                "{class} takes keyword arguments here, not `{}`",
                file.source_of(positional)
            ));
        }
        let kwargs = literal_kwargs(self.modules, scope, &call.keywords).map_err(|(kw, not)| {
            format!(
                "{class} argument `{kw}=` is not a literal (`{}`)",
                not.source
            )
        })?;
        Ok((class, kwargs))
    }
}
