//! CEL expressions and `${...}` templates of declarative flows.
//!
//! CrewAI evaluates these with a CEL interpreter (cel-python); here the `cel` crate does, so
//! the language is CEL itself (safe by design: no loops, no I/O, no host calls), not an
//! imitation of it. An expression sees `state` (the flow state) and `outputs` (each completed
//! method's latest output, by method name) and nothing else: any other root is refused when the
//! file loads, as CrewAI refuses it. CrewAI's one extra function, `now()`, is refused too (this
//! build of CEL has no timestamps).

use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};

/// The names an expression may start from.
pub const EXPRESSION_ROOTS: &[&str] = &["outputs", "state"];

/// What an expression reads: the state and the outputs so far.
#[derive(Debug, Clone, Default)]
pub struct ExpressionScope {
    pub state: Map<String, Value>,
    pub outputs: Map<String, Value>,
}

/// Why an expression did not load or did not evaluate; the message names the expression.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ExpressionError(String);

/// One compiled CEL expression.
#[derive(Clone)]
pub struct Expression {
    source: String,
    program: Arc<cel::Program>,
}

impl fmt::Debug for Expression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Expression").field(&self.source).finish()
    }
}

impl Expression {
    /// Compiles `source` (a bare expression, or one wrapped in `${...}`) and checks it reads only
    /// `state` and `outputs`.
    pub fn compile(source: &str) -> Result<Expression, ExpressionError> {
        let mut text = source.trim();
        if let Some(inner) = text.strip_prefix("${").and_then(|t| t.strip_suffix('}')) {
            text = inner.trim();
        }
        if text.is_empty() {
            return Err(ExpressionError(
                "empty expression; write CEL such as `state.topic` or `outputs.step_name`".into(),
            ));
        }
        let program = cel::Program::compile(text).map_err(|err| {
            ExpressionError(format!(
                "expression '{text}' is not valid CEL: {}",
                one_line(&err.to_string())
            ))
        })?;
        let mut roots = Vec::new();
        collect_roots(program.expression(), &mut Vec::new(), &mut roots);
        roots.retain(|root| !EXPRESSION_ROOTS.contains(&root.as_str()));
        roots.sort_unstable();
        roots.dedup();
        if !roots.is_empty() {
            return Err(ExpressionError(format!(
                "expression '{text}' reads {}; an expression reads only `state` (e.g. state.topic) and `outputs` (e.g. outputs.step_name)",
                roots
                    .iter()
                    .map(|r| format!("'{r}'"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let references = program.references();
        if references.has_function("now") {
            return Err(ExpressionError(format!(
                "expression '{text}' calls now(), which is not supported here; pass the time in as an input (state.now)"
            )));
        }
        Ok(Expression {
            source: text.to_string(),
            program: Arc::new(program),
        })
    }

    /// The expression's text.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Evaluates the expression; the result is plain JSON.
    pub fn evaluate(&self, scope: &ExpressionScope) -> Result<Value, ExpressionError> {
        let fail =
            |what: String| ExpressionError(format!("expression '{}' failed: {what}", self.source));
        let mut context = cel::Context::default();
        context.add_variable_from_value("state", object_to_cel(&scope.state));
        context.add_variable_from_value("outputs", object_to_cel(&scope.outputs));
        let value = self
            .program
            .execute(&context)
            .map_err(|e| fail(e.to_string()))?;
        value
            .json()
            .map_err(|e| fail(format!("its result has no JSON form ({e})")))
    }
}

/// JSON as CEL reads it (as cel-python's JSON adapter does for CrewAI): a whole number is an
/// `int` (a `uint` only above `i64::MAX`), so `state.count + 1` adds two ints.
fn to_cel(value: &Value) -> cel::Value {
    match value {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => cel::Value::Int(i),
            (None, Some(u)) => cel::Value::UInt(u),
            _ => cel::Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(text) => cel::Value::String(Arc::new(text.clone())),
        Value::Array(items) => cel::Value::List(Arc::new(items.iter().map(to_cel).collect())),
        Value::Object(map) => object_to_cel(map),
    }
}

fn object_to_cel(map: &Map<String, Value>) -> cel::Value {
    let entries: std::collections::HashMap<String, cel::Value> =
        map.iter().map(|(k, v)| (k.clone(), to_cel(v))).collect();
    cel::Value::from(entries)
}

/// The identifiers `expr` reads that no comprehension (`list.map(x, ...)`, `all`, `exists`,
/// `exists_one`, `filter`) binds around them: the roots the expression needs from outside.
fn collect_roots(expr: &cel::IdedExpr, bound: &mut Vec<String>, roots: &mut Vec<String>) {
    use cel::common::ast::{EntryExpr, Expr};
    match &expr.expr {
        Expr::Ident(name) => {
            // `@`-names are the parser's own accumulators.
            if !name.starts_with('@') && !bound.contains(name) {
                roots.push(name.clone());
            }
        }
        Expr::Select(select) => collect_roots(&select.operand, bound, roots),
        Expr::Call(call) => {
            if let Some(target) = &call.target {
                collect_roots(target, bound, roots);
            }
            for arg in &call.args {
                collect_roots(arg, bound, roots);
            }
        }
        Expr::List(list) => {
            for element in &list.elements {
                collect_roots(element, bound, roots);
            }
        }
        Expr::Map(map) => {
            for entry in &map.entries {
                if let EntryExpr::MapEntry(entry) = &entry.expr {
                    collect_roots(&entry.key, bound, roots);
                    collect_roots(&entry.value, bound, roots);
                }
            }
        }
        Expr::Struct(fields) => {
            for entry in &fields.entries {
                match &entry.expr {
                    EntryExpr::StructField(field) => collect_roots(&field.value, bound, roots),
                    EntryExpr::MapEntry(entry) => {
                        collect_roots(&entry.key, bound, roots);
                        collect_roots(&entry.value, bound, roots);
                    }
                }
            }
        }
        Expr::Comprehension(comprehension) => {
            collect_roots(&comprehension.iter_range, bound, roots);
            collect_roots(&comprehension.accu_init, bound, roots);
            let depth = bound.len();
            bound.push(comprehension.iter_var.clone());
            bound.extend(comprehension.iter_var2.clone());
            bound.push(comprehension.accu_var.clone());
            collect_roots(&comprehension.loop_cond, bound, roots);
            collect_roots(&comprehension.loop_step, bound, roots);
            collect_roots(&comprehension.result, bound, roots);
            bound.truncate(depth);
        }
        Expr::Literal(_) | Expr::Unspecified => {}
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// One piece of a template string.
#[derive(Debug, Clone)]
pub enum Segment {
    Text(String),
    Expr(Expression),
}

/// A value whose strings may hold `${...}` expressions (a crew's `inputs`, an agent's `input`).
///
/// A string that is exactly one `${...}` (spaces around allowed) becomes the expression's value
/// with its type; a string mixing text and expressions becomes text, each value written as JSON
/// unless it is text, `null` as nothing. Mappings and lists are rendered item by item; other
/// values are kept.
#[derive(Debug, Clone)]
pub enum Template {
    Literal(Value),
    Text(Vec<Segment>),
    List(Vec<Template>),
    Map(Vec<(String, Template)>),
}

impl Template {
    /// Parses (and checks) every `${...}` in the strings of `value`.
    pub fn parse(value: &Value) -> Result<Template, ExpressionError> {
        Ok(match value {
            Value::String(text) => match segments(text)? {
                Some(parts) => Template::Text(parts),
                None => Template::Literal(value.clone()),
            },
            Value::Array(items) => Template::List(
                items
                    .iter()
                    .map(Template::parse)
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(map) => Template::Map(
                map.iter()
                    .map(|(k, v)| Ok((k.clone(), Template::parse(v)?)))
                    .collect::<Result<_, ExpressionError>>()?,
            ),
            other => Template::Literal(other.clone()),
        })
    }

    pub fn render(&self, scope: &ExpressionScope) -> Result<Value, ExpressionError> {
        Ok(match self {
            Template::Literal(value) => value.clone(),
            Template::List(items) => Value::Array(
                items
                    .iter()
                    .map(|t| t.render(scope))
                    .collect::<Result<_, _>>()?,
            ),
            Template::Map(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(k, t)| Ok((k.clone(), t.render(scope)?)))
                    .collect::<Result<_, ExpressionError>>()?,
            ),
            Template::Text(parts) => {
                let expressions: Vec<&Expression> = parts
                    .iter()
                    .filter_map(|p| match p {
                        Segment::Expr(e) => Some(e),
                        Segment::Text(_) => None,
                    })
                    .collect();
                let only_spaces = parts.iter().all(|p| match p {
                    Segment::Text(t) => t.trim().is_empty(),
                    Segment::Expr(_) => true,
                });
                if let [single] = expressions.as_slice()
                    && only_spaces
                {
                    return single.evaluate(scope);
                }
                let mut text = String::new();
                for part in parts {
                    match part {
                        Segment::Text(t) => text.push_str(t),
                        Segment::Expr(e) => match e.evaluate(scope)? {
                            Value::Null => {}
                            Value::String(s) => text.push_str(&s),
                            other => text.push_str(&other.to_string()),
                        },
                    }
                }
                Value::String(text)
            }
        })
    }
}

/// Splits `text` at its `${...}` markers; `None` when it has none. A marker ends at the `}`
/// that closes it, so braces of CEL map literals and braces inside CEL strings are skipped.
fn segments(text: &str) -> Result<Option<Vec<Segment>>, ExpressionError> {
    if !text.contains("${") {
        return Ok(None);
    }
    let mut parts = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        if start > 0 {
            parts.push(Segment::Text(rest[..start].to_string()));
        }
        let body = &rest[start + 2..];
        let end = closing_brace(body).ok_or_else(|| {
            ExpressionError(format!(
                "'{text}' has a `${{` that is never closed with `}}`"
            ))
        })?;
        parts.push(Segment::Expr(Expression::compile(&body[..end])?));
        rest = &body[end + 1..];
    }
    if !rest.is_empty() {
        parts.push(Segment::Text(rest.to_string()));
    }
    Ok(Some(parts))
}

/// The byte offset of the `}` closing a marker whose body starts `body`.
fn closing_brace(body: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in body.char_indices() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '"' => quote = Some(c),
            '{' => depth += 1,
            '}' if depth == 0 => return Some(i),
            '}' => depth -= 1,
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn scope() -> ExpressionScope {
        ExpressionScope {
            state: json!({"topic": "AI", "count": 2, "tags": ["a", "b"], "nested": {"x": 1.5}})
                .as_object()
                .cloned()
                .unwrap(),
            outputs: json!({"research": {"raw": "findings"}, "plain": "text"})
                .as_object()
                .cloned()
                .unwrap(),
        }
    }

    fn eval(source: &str) -> Value {
        Expression::compile(source)
            .unwrap()
            .evaluate(&scope())
            .unwrap()
    }

    #[test]
    fn cel_reads_state_and_outputs() {
        assert_eq!(eval("state.topic"), json!("AI"));
        assert_eq!(eval("${ state.topic }"), json!("AI"));
        assert_eq!(eval("outputs.research.raw"), json!("findings"));
        assert_eq!(eval("state.count + 1"), json!(3));
        // CEL does not mix int and double implicitly; `double()` converts.
        assert_eq!(eval("double(state.count) * 2.5"), json!(5.0));
        assert_eq!(eval("state.nested.x * 2.0"), json!(3.0));
        assert_eq!(eval("state.count > 1 && state.topic == 'AI'"), json!(true));
        assert_eq!(eval("!(state.count > 1) || false"), json!(false));
        assert_eq!(eval("state.count > 5 ? 'big' : 'small'"), json!("small"));
        assert_eq!(eval("size(state.tags)"), json!(2));
        assert_eq!(eval("state.tags[1]"), json!("b"));
        assert_eq!(eval("state.nested['x']"), json!(1.5));
        assert_eq!(eval("'AI' + ' agents'"), json!("AI agents"));
        assert_eq!(eval("string(state.count)"), json!("2"));
        assert_eq!(eval("int('7') * 2"), json!(14));
        assert_eq!(eval("'x' in state.tags"), json!(false));
        assert_eq!(eval("state.tags.map(t, t + '!')"), json!(["a!", "b!"]));
        assert_eq!(eval("state.tags.exists(t, t == 'b')"), json!(true));
        assert_eq!(
            eval("state.tags.filter(t, state.tags.exists(u, u == t)).size()"),
            json!(2)
        );
        assert_eq!(eval("state.topic.matches('^A')"), json!(true));
        assert_eq!(eval("{'k': state.count}"), json!({"k": 2}));
        assert_eq!(eval("has(state.missing)"), json!(false));
    }

    #[test]
    fn other_roots_bad_syntax_and_now_are_refused_naming_the_expression() {
        let err = Expression::compile("inputs.topic").unwrap_err().to_string();
        assert_eq!(
            err,
            "expression 'inputs.topic' reads 'inputs'; an expression reads only `state` (e.g. state.topic) and `outputs` (e.g. outputs.step_name)"
        );
        let err = Expression::compile("state.topic +")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("expression 'state.topic +' is not valid CEL: "),
            "{err}"
        );
        let err = Expression::compile("string(now())")
            .unwrap_err()
            .to_string();
        assert!(err.contains("calls now(), which is not supported"), "{err}");
        // A comprehension's variable is local only inside it.
        let err = Expression::compile("state.tags.map(t, t) + [t]")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("expression 'state.tags.map(t, t) + [t]' reads 't'"),
            "{err}"
        );
        assert!(
            Expression::compile("  ")
                .unwrap_err()
                .to_string()
                .starts_with("empty expression")
        );
    }

    #[test]
    fn evaluation_errors_name_the_expression() {
        let err = Expression::compile("state.missing.deeper")
            .unwrap()
            .evaluate(&scope())
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("expression 'state.missing.deeper' failed: "),
            "{err}"
        );
    }

    #[test]
    fn templates_keep_types_for_one_marker_and_make_text_otherwise() {
        let template = Template::parse(&json!({
            "topic": "${state.topic}",
            "count": " ${state.count} ",
            "line": "About ${state.topic}: ${state.tags} (${state.missing_or_null})",
            "plain": "no markers {topic}",
            "list": ["${outputs.research.raw}", 3],
            "map": "${ {'a': 1}.a }",
        }))
        .unwrap();
        let mut scope = scope();
        scope.state.insert("missing_or_null".into(), Value::Null);
        assert_eq!(
            template.render(&scope).unwrap(),
            json!({
                "topic": "AI",
                "count": 2,
                "line": "About AI: [\"a\",\"b\"] ()",
                "plain": "no markers {topic}",
                "list": ["findings", 3],
                "map": 1,
            })
        );
        let err = Template::parse(&json!("x ${state.topic"))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "'x ${state.topic' has a `${` that is never closed with `}`"
        );
        let err = Template::parse(&json!("${item.x}"))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("expression 'item.x' reads 'item'"), "{err}");
    }
}
