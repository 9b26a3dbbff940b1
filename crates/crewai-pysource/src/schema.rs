//! Pydantic models read from source into the JSON schema `model_json_schema()` gives, with
//! nested models and enums inlined (so every consumer of a schema understands it).

use rustpython_parser::ast;
use serde_json::{Map, Value, json};

use crate::crew::Reader;
use crate::eval::{Scope, Symbol};
use crate::model::ModelSchema;
use crate::module::{PyFile, dotted};

/// Models nested deeper than this are refused (a model that contains itself has no inline form).
const MAX_NESTING: usize = 16;

impl<'m> Reader<'m> {
    /// `output_pydantic=Model`: the schema of the model class the name resolves to.
    pub(crate) fn model_schema(
        &mut self,
        scope: Scope<'m>,
        value: &'m ast::Expr,
    ) -> Result<ModelSchema, String> {
        let name = dotted(value).ok_or_else(|| {
            format!(
                "`{}` is not the name of a pydantic model",
                scope.file.source_of(value)
            )
        })?;
        match self.modules.symbol_dotted(scope.file, &name) {
            Symbol::Class(file, class) => {
                let mut stack = Vec::new();
                let schema = self.class_schema(file, class, &mut stack)?;
                Ok(ModelSchema {
                    name: class.name.to_string(),
                    path: file.path.clone(),
                    line: file.line(class),
                    schema,
                })
            }
            Symbol::External { module, attr } => Err(format!(
                "the model {module}.{attr} is defined outside the project, so its fields cannot be read"
            )),
            _ => Err(format!(
                "`{name}` is not a class defined or imported in the project"
            )),
        }
    }

    /// The schema of a `BaseModel` subclass (its bases' fields first, as pydantic orders them).
    fn class_schema(
        &mut self,
        file: &'m PyFile,
        class: &'m ast::StmtClassDef,
        stack: &mut Vec<String>,
    ) -> Result<Value, String> {
        let qualified = format!("{}.{}", file.module, class.name);
        if stack.contains(&qualified) || stack.len() > MAX_NESTING {
            return Err(format!(
                "model {} contains itself, which has no inline JSON schema",
                class.name
            ));
        }
        stack.push(qualified);
        let mut properties = Map::new();
        let mut required = Vec::new();
        let mut is_model = false;
        for base in &class.bases {
            let base_name = dotted(base).unwrap_or_default();
            match self.modules.symbol_dotted(file, &base_name) {
                Symbol::External { module, attr }
                    if module.starts_with("pydantic") && attr == "BaseModel" =>
                {
                    is_model = true
                }
                Symbol::Class(base_file, base_class) => {
                    let inherited = self.class_schema(base_file, base_class, stack)?;
                    is_model = true;
                    if let Some(Value::Object(props)) = inherited.get("properties") {
                        properties.extend(props.clone());
                    }
                    if let Some(Value::Array(names)) = inherited.get("required") {
                        required.extend(names.iter().filter_map(|n| n.as_str().map(String::from)));
                    }
                }
                _ => {}
            }
        }
        if !is_model {
            stack.pop();
            return Err(format!("class {} is not a pydantic BaseModel", class.name));
        }
        let scope = Scope::top(file);
        for stmt in &class.body {
            match stmt {
                ast::Stmt::AnnAssign(field) => {
                    let ast::Expr::Name(target) = &*field.target else {
                        continue;
                    };
                    let name = target.id.to_string();
                    if name == "model_config" || is_class_var(&field.annotation) {
                        continue;
                    }
                    let mut schema = self.annotation_schema(scope, &field.annotation, stack)?;
                    let mut has_default = false;
                    if let Some(default) = field.value.as_deref() {
                        has_default = self.field_default(scope, &name, default, &mut schema)?;
                    }
                    if !schema.contains_key("title") {
                        schema.insert("title".into(), Value::String(title_case(&name)));
                    }
                    required.retain(|r| *r != name);
                    if !has_default {
                        required.push(name.clone());
                    }
                    properties.insert(name, Value::Object(schema));
                }
                ast::Stmt::FunctionDef(method) if !method.decorator_list.is_empty() => self.warning(
                    file,
                    file.line(stmt),
                    format!(
                        "model {}: the validator '{}' is Python and is not run on the answer; the answer is checked against the fields' types only",
                        class.name, method.name
                    ),
                    None,
                ),
                _ => {}
            }
        }
        stack.pop();
        let mut schema = Map::new();
        if let Some(doc) = docstring(&class.body) {
            schema.insert("description".into(), Value::String(doc));
        }
        schema.insert("properties".into(), Value::Object(properties));
        if !required.is_empty() {
            schema.insert("required".into(), json!(required));
        }
        schema.insert("title".into(), Value::String(class.name.to_string()));
        schema.insert("type".into(), Value::String("object".into()));
        Ok(Value::Object(schema))
    }

    /// `= literal` or `= Field(...)`: sets default, description, title and constraints on the
    /// field's schema; returns whether the field has a default (is not required).
    fn field_default(
        &mut self,
        scope: Scope<'m>,
        name: &str,
        default: &'m ast::Expr,
        schema: &mut Map<String, Value>,
    ) -> Result<bool, String> {
        let file = scope.file;
        let ast::Expr::Call(call) = default else {
            let value = self
                .modules
                .literal(scope, default)
                .map_err(|e| format!("field '{name}' has a computed default (`{}`)", e.source))?;
            schema.insert("default".into(), value);
            return Ok(true);
        };
        let is_field = dotted(&call.func).is_some_and(|d| d == "Field" || d.ends_with(".Field"));
        if !is_field {
            return Err(format!(
                "field '{name}' has a computed default (`{}`)",
                file.source_of(default)
            ));
        }
        let mut has_default = false;
        // `Field(...)` with `...` first is required; any other first argument is the default.
        if let Some(first) = call.args.first()
            && !matches!(first, ast::Expr::Constant(c) if matches!(c.value, ast::Constant::Ellipsis))
        {
            let value = self
                .modules
                .literal(scope, first)
                .map_err(|e| format!("field '{name}' has a computed default (`{}`)", e.source))?;
            schema.insert("default".into(), value);
            has_default = true;
        }
        for keyword in &call.keywords {
            let Some(arg) = &keyword.arg else { continue };
            let literal = || self.modules.literal(scope, &keyword.value);
            match arg.as_str() {
                "default" => {
                    let value = literal().map_err(|e| {
                        format!("field '{name}' has a computed default (`{}`)", e.source)
                    })?;
                    schema.insert("default".into(), value);
                    has_default = true;
                }
                // The factory's value is made when the model is; the field is optional.
                "default_factory" => has_default = true,
                "description" | "title" | "examples" | "pattern" => {
                    if let Ok(value) = literal() {
                        schema.insert(arg.to_string(), value);
                    }
                }
                "ge" | "le" | "gt" | "lt" | "min_length" | "max_length" => {
                    if let Ok(value) = literal() {
                        let key = constraint_key(arg.as_str(), schema);
                        schema.insert(key.into(), value);
                    }
                }
                other => self.warning(
                    file,
                    file.line(keyword),
                    format!("field '{name}': Field({other}=...) is not part of the schema given to the model"),
                    None,
                ),
            }
        }
        Ok(has_default)
    }

    /// The schema of a type annotation.
    fn annotation_schema(
        &mut self,
        scope: Scope<'m>,
        annotation: &'m ast::Expr,
        stack: &mut Vec<String>,
    ) -> Result<Map<String, Value>, String> {
        let file = scope.file;
        let unsupported = || {
            format!(
                "the type `{}` has no JSON schema form here",
                file.source_of(annotation)
            )
        };
        let object = |value: Value| match value {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        match annotation {
            // A forward reference: `"Item"`.
            ast::Expr::Constant(c) => match &c.value {
                ast::Constant::Str(name) => self
                    .named_type(file, name, stack)
                    .map_err(|_| unsupported()),
                ast::Constant::None => Ok(object(json!({"type": "null"}))),
                _ => Err(unsupported()),
            },
            ast::Expr::BinOp(union) if matches!(union.op, ast::Operator::BitOr) => {
                let left = self.annotation_schema(scope, &union.left, stack)?;
                let right = self.annotation_schema(scope, &union.right, stack)?;
                Ok(any_of(vec![left, right]))
            }
            ast::Expr::Name(_) | ast::Expr::Attribute(_) => {
                let name = dotted(annotation).ok_or_else(unsupported)?;
                self.named_type(file, &name, stack)
            }
            ast::Expr::Subscript(subscript) => {
                let generic = dotted(&subscript.value).ok_or_else(unsupported)?;
                let generic = generic.rsplit('.').next().unwrap_or_default().to_string();
                let params: Vec<&ast::Expr> = match &*subscript.slice {
                    ast::Expr::Tuple(tuple) => tuple.elts.iter().collect(),
                    one => vec![one],
                };
                match (generic.as_str(), params.as_slice()) {
                    ("Optional", [inner]) => {
                        let inner = self.annotation_schema(scope, inner, stack)?;
                        Ok(any_of(vec![inner, object(json!({"type": "null"}))]))
                    }
                    ("Union", many) => {
                        let mut options = Vec::new();
                        for option in many {
                            options.push(self.annotation_schema(scope, option, stack)?);
                        }
                        Ok(any_of(options))
                    }
                    (
                        "List" | "list" | "Sequence" | "Set" | "set" | "FrozenSet" | "frozenset",
                        [item],
                    ) => {
                        let items = self.annotation_schema(scope, item, stack)?;
                        let mut schema = object(json!({"type": "array"}));
                        schema.insert("items".into(), Value::Object(items));
                        if generic.to_lowercase().contains("set") {
                            schema.insert("uniqueItems".into(), Value::Bool(true));
                        }
                        Ok(schema)
                    }
                    ("Tuple" | "tuple", items) => {
                        let mut prefix = Vec::new();
                        for item in items {
                            prefix.push(Value::Object(self.annotation_schema(scope, item, stack)?));
                        }
                        Ok(object(
                            json!({"type": "array", "prefixItems": prefix, "minItems": prefix.len(), "maxItems": prefix.len()}),
                        ))
                    }
                    ("Dict" | "dict" | "Mapping", [_, value]) => {
                        let values = self.annotation_schema(scope, value, stack)?;
                        let mut schema = object(json!({"type": "object"}));
                        schema.insert("additionalProperties".into(), Value::Object(values));
                        Ok(schema)
                    }
                    ("Literal", values) => {
                        let mut literals = Vec::new();
                        for value in values {
                            literals.push(
                                self.modules
                                    .literal(scope, value)
                                    .map_err(|_| unsupported())?,
                            );
                        }
                        let mut schema = Map::new();
                        if let Some(kind) = common_type(&literals) {
                            schema.insert("type".into(), Value::String(kind.into()));
                        }
                        schema.insert("enum".into(), Value::Array(literals));
                        Ok(schema)
                    }
                    ("Annotated", [inner, ..]) => self.annotation_schema(scope, inner, stack),
                    _ => Err(unsupported()),
                }
            }
            _ => Err(unsupported()),
        }
    }

    /// A type written as a name: a builtin, a model, or an enum.
    fn named_type(
        &mut self,
        file: &'m PyFile,
        name: &str,
        stack: &mut Vec<String>,
    ) -> Result<Map<String, Value>, String> {
        let simple = |kind: Value| match kind {
            Value::Object(map) => Ok(map),
            _ => Ok(Map::new()),
        };
        let last = name.rsplit('.').next().unwrap_or(name);
        let builtin = match last {
            "str" => Some(json!({"type": "string"})),
            "int" => Some(json!({"type": "integer"})),
            "float" => Some(json!({"type": "number"})),
            "bool" => Some(json!({"type": "boolean"})),
            "list" | "List" => Some(json!({"type": "array", "items": {}})),
            "dict" | "Dict" => Some(json!({"type": "object"})),
            "Any" => Some(json!({})),
            "datetime" => Some(json!({"type": "string", "format": "date-time"})),
            "date" => Some(json!({"type": "string", "format": "date"})),
            "HttpUrl" | "AnyUrl" => Some(json!({"type": "string", "format": "uri"})),
            "EmailStr" => Some(json!({"type": "string", "format": "email"})),
            _ => None,
        };
        match self.modules.symbol_dotted(file, name) {
            Symbol::Class(defined_in, class) => {
                if let Some(values) = self.enum_values(defined_in, class) {
                    let mut schema = Map::new();
                    if let Some(kind) = common_type(&values) {
                        schema.insert("type".into(), Value::String(kind.into()));
                    }
                    schema.insert("enum".into(), Value::Array(values));
                    schema.insert("title".into(), Value::String(class.name.to_string()));
                    return Ok(schema);
                }
                simple(self.class_schema(defined_in, class, stack)?)
            }
            _ => match builtin {
                Some(schema) => simple(schema),
                None => Err(format!("the type `{name}` has no JSON schema form here")),
            },
        }
    }

    /// The member values of an `Enum` subclass (`class Color(str, Enum)`), if it is one.
    fn enum_values(&self, file: &'m PyFile, class: &'m ast::StmtClassDef) -> Option<Vec<Value>> {
        let is_enum = class.bases.iter().any(|base| {
            dotted(base).is_some_and(|b| {
                matches!(b.rsplit('.').next(), Some("Enum" | "StrEnum" | "IntEnum"))
            })
        });
        if !is_enum {
            return None;
        }
        let scope = Scope::top(file);
        Some(
            class
                .body
                .iter()
                .filter_map(|stmt| match stmt {
                    ast::Stmt::Assign(assign) if crate::module::assigned_name(stmt).is_some() => {
                        self.modules.literal(scope, &assign.value).ok()
                    }
                    _ => None,
                })
                .collect(),
        )
    }
}

/// `ClassVar[...]` fields are not model fields.
fn is_class_var(annotation: &ast::Expr) -> bool {
    let head = match annotation {
        ast::Expr::Subscript(s) => &*s.value,
        other => other,
    };
    dotted(head).is_some_and(|d| d == "ClassVar" || d.ends_with(".ClassVar"))
}

/// `minLength` for strings, `minItems` for arrays, and the numeric bounds.
fn constraint_key(arg: &str, schema: &Map<String, Value>) -> &'static str {
    let is_array = schema.get("type").and_then(Value::as_str) == Some("array");
    match arg {
        "ge" => "minimum",
        "le" => "maximum",
        "gt" => "exclusiveMinimum",
        "lt" => "exclusiveMaximum",
        "min_length" if is_array => "minItems",
        "max_length" if is_array => "maxItems",
        "min_length" => "minLength",
        _ => "maxLength",
    }
}

fn any_of(options: Vec<Map<String, Value>>) -> Map<String, Value> {
    let mut schema = Map::new();
    schema.insert(
        "anyOf".into(),
        Value::Array(options.into_iter().map(Value::Object).collect()),
    );
    schema
}

/// The JSON type all values share, if they share one.
fn common_type(values: &[Value]) -> Option<&'static str> {
    let kind = |v: &Value| match v {
        Value::String(_) => Some("string"),
        Value::Number(n) if n.is_i64() || n.is_u64() => Some("integer"),
        Value::Number(_) => Some("number"),
        Value::Bool(_) => Some("boolean"),
        _ => None,
    };
    let first = kind(values.first()?)?;
    values
        .iter()
        .all(|v| kind(v) == Some(first))
        .then_some(first)
}

/// pydantic's default field title: `due_date` → `Due Date`.
fn title_case(name: &str) -> String {
    name.split('_')
        .filter(|w| !w.is_empty())
        .map(|word| {
            let mut chars = word.chars();
            match chars.next() {
                Some(first) => first.to_uppercase().chain(chars).collect::<String>(),
                None => String::new(),
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A body's docstring, cleaned as `inspect.cleandoc` does.
pub(crate) fn docstring(body: &[ast::Stmt]) -> Option<String> {
    let ast::Stmt::Expr(expr) = body.first()? else {
        return None;
    };
    let ast::Expr::Constant(constant) = &*expr.value else {
        return None;
    };
    let ast::Constant::Str(text) = &constant.value else {
        return None;
    };
    let lines: Vec<&str> = text.lines().collect();
    let indent = lines
        .iter()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    let mut cleaned: Vec<String> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| match i {
            0 => l.trim().to_string(),
            _ => l.get(indent..).unwrap_or("").trim_end().to_string(),
        })
        .collect();
    while cleaned.first().is_some_and(|l| l.is_empty()) {
        cleaned.remove(0);
    }
    while cleaned.last().is_some_and(|l| l.is_empty()) {
        cleaned.pop();
    }
    Some(cleaned.join("\n"))
}
