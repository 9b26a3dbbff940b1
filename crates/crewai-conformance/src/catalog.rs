//! The README's catalog: test tools, tool cache functions, guardrails, conditions and hooks,
//! built through the public API (`crewai_tools::DynamicTool`, `ToolHandle`,
//! `crewai_core::guardrail::Guardrail`, `crewai_core::hooks::Hooks`). Guardrails and conditions
//! reach agents and tasks through crewai-project, as the code a case's spec names
//! ([`CatalogCode`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crewai_core::guardrail::{Guardrail, GuardrailPass};
use crewai_core::hooks::{CallOrigin, HookDecision, Hooks, LlmCallContext, ToolCallContext};
use crewai_core::output::{TaskOutput, python_float_repr, python_json_dumps};
use crewai_core::task::Condition;
use crewai_llm::{RateLimiter, VirtualClock};
use crewai_project::CodeResolver;
use crewai_tools::{DynamicTool, ToolError, ToolHandle, ToolOutput, field_title};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::case::{
    Behaviour, CacheFunction, ConditionSpec, GuardrailSpec, HookPoint, HookSpec, HooksSpec,
    ToolSpec,
};
use crate::outcome::{HookCall, RateLimitScope, RateLimitView};

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // The data behind these locks stays consistent across a panicking holder (plain counters
    // and lists), so a poisoned lock is still safe to read.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// How many times each test tool's body ran (shared by every copy of the tool).
#[derive(Debug, Clone, Default)]
pub struct ToolRuns(Arc<Mutex<BTreeMap<String, usize>>>);

impl ToolRuns {
    fn record(&self, tool: &str) {
        *lock(&self.0).entry(tool.to_string()).or_default() += 1;
    }

    pub fn snapshot(&self) -> BTreeMap<String, usize> {
        lock(&self.0).clone()
    }
}

/// The rate limiters a case's `max_rpm` settings made, each on a virtual clock of its own: a
/// recorded run replays in no time, so a limit's wait must not take real time, yet it has to
/// happen (and be seen) just as in CrewAI's run.
#[derive(Debug, Clone, Default)]
pub struct RateLimits(Arc<Mutex<Vec<MadeLimiter>>>);

/// One limiter made for a case, with the clock it sleeps on.
#[derive(Debug)]
struct MadeLimiter {
    scope: RateLimitScope,
    max_rpm: u32,
    clock: Arc<VirtualClock>,
}

impl RateLimits {
    /// A limiter of `max_rpm` for `scope`, on a fresh virtual clock.
    pub fn limiter(&self, scope: RateLimitScope, max_rpm: u32) -> Arc<RateLimiter> {
        let clock = VirtualClock::new();
        lock(&self.0).push(MadeLimiter {
            scope,
            max_rpm,
            clock: clock.clone(),
        });
        RateLimiter::with_clock(Some(max_rpm), None, clock)
    }

    pub fn snapshot(&self) -> Vec<RateLimitView> {
        lock(&self.0)
            .iter()
            .map(|made| RateLimitView {
                scope: made.scope.clone(),
                max_rpm: made.max_rpm,
                sleeps: made.clock.sleeps().len(),
            })
            .collect()
    }
}

/// `str(value)` as Python prints it (strings verbatim, `True`, `None`, `2.0`).
pub fn python_str(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.to_string(),
            (_, Some(u), _) => u.to_string(),
            (_, _, Some(f)) => python_float(f),
            _ => n.to_string(),
        },
        other => python_json_dumps(other),
    }
}

/// A float as Python's `str` prints it (`25.0`, `0.5`, `1e+16`, `inf`).
pub fn python_float(f: f64) -> String {
    if f.is_nan() {
        "nan".into()
    } else if f.is_infinite() {
        if f > 0.0 { "inf".into() } else { "-inf".into() }
    } else {
        python_float_repr(f)
    }
}

/// The JSON schema of a tool: its `schema`, or one built from `args` the way a Python `@tool`
/// function's signature becomes one (each property titled, all required).
pub fn tool_schema(spec: &ToolSpec) -> Value {
    if let Some(schema) = &spec.schema {
        return schema.clone();
    }
    let mut properties = Map::new();
    let mut required = Vec::new();
    for (name, kind) in spec.args.iter().flat_map(|a| a.iter()) {
        properties.insert(
            name.clone(),
            json!({"title": field_title(name), "type": kind}),
        );
        required.push(Value::String(name.clone()));
    }
    if required.is_empty() {
        json!({"properties": properties, "type": "object"})
    } else {
        json!({"properties": properties, "required": required, "type": "object"})
    }
}

/// The argument names in schema order.
fn argument_names(schema: &Value) -> Vec<String> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

/// A number argument as i64 when it is an integer, else f64.
enum Number {
    Int(i64),
    Float(f64),
}

fn number(args: &Value, name: &str) -> Result<Number, ToolError> {
    let value = args
        .get(name)
        .ok_or_else(|| ToolError::InvalidArguments(format!("missing argument `{name}`")))?;
    let parsed = match value {
        Value::String(s) => serde_json::from_str::<Value>(s.trim()).ok(),
        other => Some(other.clone()),
    };
    match parsed.as_ref().and_then(|v| v.as_number()) {
        Some(n) if n.as_i64().is_some() => Ok(Number::Int(n.as_i64().unwrap_or_default())),
        Some(n) => n
            .as_f64()
            .map(Number::Float)
            .ok_or_else(|| ToolError::InvalidArguments(format!("`{name}` is not a number"))),
        None => Err(ToolError::InvalidArguments(format!(
            "`{name}` must be a number, got {value}"
        ))),
    }
}

fn two_numbers(args: &Value, names: &[String]) -> Result<(Number, Number), ToolError> {
    match names {
        [a, b, ..] => Ok((number(args, a)?, number(args, b)?)),
        _ => Err(ToolError::InvalidArguments(
            "this tool needs two numeric arguments".into(),
        )),
    }
}

fn as_f64(n: &Number) -> f64 {
    match n {
        Number::Int(i) => *i as f64,
        Number::Float(f) => *f,
    }
}

fn arithmetic(
    args: &Value,
    names: &[String],
    int: fn(i64, i64) -> Option<i64>,
    float: fn(f64, f64) -> f64,
) -> Result<String, ToolError> {
    let (a, b) = two_numbers(args, names)?;
    if let (Number::Int(x), Number::Int(y)) = (&a, &b)
        && let Some(result) = int(*x, *y)
    {
        return Ok(result.to_string());
    }
    Ok(python_float(float(as_f64(&a), as_f64(&b))))
}

/// `template` with each `{arg}` replaced by that argument's value (unknown names stay as written).
pub fn fill_template(template: &str, args: &Value) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) if args.get(&after[..close]).is_some() => {
                out.push_str(&python_str(&args[&after[..close]]));
                rest = &after[close + 1..];
            }
            _ => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Runs one behaviour; `runs` is how many times this tool ran before (0 on the first call).
async fn behave(
    behaviour: &Behaviour,
    args: &Value,
    names: &[String],
    runs: usize,
    cancel: &CancellationToken,
) -> Result<String, ToolError> {
    match behaviour {
        Behaviour::Constant { value } => Ok(python_str(value)),
        Behaviour::Multiply => arithmetic(args, names, i64::checked_mul, |a, b| a * b),
        Behaviour::Add => arithmetic(args, names, i64::checked_add, |a, b| a + b),
        Behaviour::Divide => {
            let (a, b) = two_numbers(args, names)?;
            let divisor = as_f64(&b);
            if divisor == 0.0 {
                return Err(ToolError::failed("division by zero"));
            }
            Ok(python_float(as_f64(&a) / divisor))
        }
        Behaviour::Echo => Ok(python_json_dumps(args)),
        Behaviour::Fail { message } => Err(ToolError::failed(message.clone())),
        Behaviour::Sequence { values } => Ok(values
            .get(runs)
            .or(values.last())
            .map(python_str)
            .unwrap_or_default()),
        Behaviour::Counter => Ok((runs + 1).to_string()),
        Behaviour::Format { template } => Ok(fill_template(template, args)),
        Behaviour::Sleep { seconds, value } => {
            let wait = Duration::from_secs_f64(seconds.max(0.0));
            tokio::select! {
                _ = tokio::time::sleep(wait) => Ok(python_str(value)),
                _ = cancel.cancelled() => Err(ToolError::Cancelled),
            }
        }
        Behaviour::Lookup {
            arg,
            cases,
            default,
        } => {
            let haystack = args
                .get(arg)
                .map(python_str)
                .unwrap_or_default()
                .to_lowercase();
            let hit = cases.iter().find(|case| {
                case.contains
                    .iter()
                    .all(|text| haystack.contains(&text.to_lowercase()))
            });
            Ok(match hit {
                Some(case) => python_str(&case.value),
                None => fill_template(default, args),
            })
        }
    }
}

/// True when `output` is an even integer (the `even_result` cache function).
fn is_even_integer(output: &ToolOutput) -> bool {
    output
        .to_text()
        .trim()
        .parse::<i64>()
        .is_ok_and(|n| n % 2 == 0)
}

/// A description the way Python presents a docstring (`__doc__` since 3.13, `inspect.cleandoc`):
/// the indentation the lines after the first share is removed. Cases copy a `@tool` function's
/// docstring verbatim, indentation included, and CrewAI sends it cleaned.
pub fn docstring_text(text: &str) -> String {
    let mut lines = text.lines();
    let Some(first) = lines.next() else {
        return String::new();
    };
    let rest: Vec<&str> = lines.collect();
    let indent = rest
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    if rest.is_empty() || indent == 0 {
        return text.to_string();
    }
    let mut out = first.to_string();
    for line in rest {
        out.push('\n');
        // A blank line may be shorter than the indent; never cut into its text.
        let cut = (line.len() - line.trim_start().len()).min(indent);
        out.push_str(line.get(cut..).unwrap_or_else(|| line.trim_start()));
    }
    out
}

/// Builds test tool `name` as a user would: a `DynamicTool` in a `ToolHandle` with the
/// BaseTool options the case gives. Every run of its body is counted in `runs`.
pub fn build_tool(name: &str, spec: &ToolSpec, runs: &ToolRuns) -> ToolHandle {
    let schema = tool_schema(spec);
    let names = Arc::new(argument_names(&schema));
    let behaviour = Arc::new(spec.behaviour.clone());
    let own_runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let tool_name = name.to_string();
    let description = docstring_text(&spec.description);
    let tool = DynamicTool::new(name, description, schema, move |args, ctx| {
        let behaviour = behaviour.clone();
        let names = names.clone();
        let before = own_runs.fetch_add(1, Ordering::SeqCst);
        counter.record(&tool_name);
        async move {
            behave(&behaviour, &args, &names, before, &ctx.cancellation)
                .await
                .map(ToolOutput::Text)
        }
    });
    let mut handle = tool
        .into_handle()
        .with_result_as_answer(spec.result_as_answer);
    if let Some(limit) = spec.max_usage_count {
        handle = handle.with_max_usage_count(limit);
    }
    match (spec.cache, spec.cache_function) {
        (Some(false), _) => handle = handle.with_cache_function(|_, _| false),
        (_, Some(CacheFunction::EvenResult)) => {
            handle = handle.with_cache_function(|_, output| is_even_integer(output))
        }
        _ => {}
    }
    handle
}

/// The guardrail a catalog entry describes.
pub fn build_guardrail(spec: &GuardrailSpec) -> Guardrail {
    fn words(text: &str) -> usize {
        text.split_whitespace().count()
    }
    match spec.clone() {
        GuardrailSpec::Llm { description } => Guardrail::llm(description),
        GuardrailSpec::MaxWords { n } => Guardrail::named("max_words", move |out: &TaskOutput| {
            let count = words(&out.raw);
            if count <= n {
                Ok(GuardrailPass::Keep)
            } else {
                Err(format!(
                    "The output has {count} words; it must have at most {n}."
                ))
            }
        }),
        GuardrailSpec::Contains { text } => {
            Guardrail::named("contains", move |out: &TaskOutput| {
                if out.raw.contains(&text) {
                    Ok(GuardrailPass::Keep)
                } else {
                    Err(format!("The output must contain \"{text}\"."))
                }
            })
        }
        GuardrailSpec::ContainsAll { texts } => {
            Guardrail::named("contains_all", move |out: &TaskOutput| {
                let missing: Vec<&String> = texts
                    .iter()
                    .filter(|t| !out.raw.contains(t.as_str()))
                    .collect();
                if missing.is_empty() {
                    Ok(GuardrailPass::Keep)
                } else {
                    Err(format!("The output must contain each of: {missing:?}."))
                }
            })
        }
        GuardrailSpec::AlwaysFail { message } => {
            Guardrail::named("always_fail", move |_: &TaskOutput| Err(message.clone()))
        }
        GuardrailSpec::AlwaysPass => {
            Guardrail::named("always_pass", |_: &TaskOutput| Ok(GuardrailPass::Keep))
        }
        GuardrailSpec::Replace { value } => Guardrail::named("replace", move |_: &TaskOutput| {
            Ok(match &value {
                Value::String(text) => GuardrailPass::Raw(text.clone()),
                other => GuardrailPass::Typed(other.clone()),
            })
        }),
        GuardrailSpec::FailThenPass { message, failures } => {
            let calls = AtomicU32::new(0);
            Guardrail::named("fail_then_pass", move |_: &TaskOutput| {
                if calls.fetch_add(1, Ordering::SeqCst) < failures {
                    Err(message.clone())
                } else {
                    Ok(GuardrailPass::Keep)
                }
            })
        }
    }
}

/// A ConditionalTask's condition over the previous task's output.
pub fn condition(spec: &ConditionSpec) -> Condition {
    let spec = spec.clone();
    Arc::new(move |previous: &TaskOutput| match &spec {
        ConditionSpec::Always { value } => *value,
        ConditionSpec::PreviousContains { text } => previous.raw.contains(text.as_str()),
    })
}

/// The catalog as the code a case's agents and tasks name: a guardrail mapping `{kind: ...}` and
/// a `condition: {kind: ...}` are catalog entries. Callbacks are not in the catalog, so they
/// stay refused, as in `crewai run`.
pub struct CatalogCode;

impl CodeResolver for CatalogCode {
    fn guardrail(&self, reference: &Map<String, Value>) -> Option<Result<Guardrail, String>> {
        Some(
            serde_json::from_value::<GuardrailSpec>(Value::Object(reference.clone()))
                .map(|spec| build_guardrail(&spec))
                .map_err(|e| format!("not a catalog guardrail: {e}")),
        )
    }

    fn condition(&self, spec: &Value) -> Option<Result<Condition, String>> {
        Some(
            serde_json::from_value::<ConditionSpec>(spec.clone())
                .map(|spec| condition(&spec))
                .map_err(|e| format!("not a catalog condition: {e}")),
        )
    }
}

/// Every call of every registered hook, by hook point.
#[derive(Debug, Clone, Default)]
pub struct HookLog(Arc<Mutex<BTreeMap<HookPoint, Vec<HookCall>>>>);

impl HookLog {
    fn push(&self, point: HookPoint, call: HookCall) {
        lock(&self.0).entry(point).or_default().push(call);
    }

    pub fn snapshot(&self) -> BTreeMap<HookPoint, Vec<HookCall>> {
        lock(&self.0).clone()
    }
}

/// What every hook call records of who made it.
fn call_from(origin: &CallOrigin) -> HookCall {
    HookCall {
        agent_role: origin.agent_role.clone(),
        has_agent: origin.agent_role.is_some(),
        has_task: origin.task_name.is_some(),
        has_crew: origin.crew_name.is_some(),
        ..Default::default()
    }
}

fn tool_call(ctx: &ToolCallContext) -> HookCall {
    HookCall {
        tool_name: Some(ctx.tool_name.clone()),
        tool_input: Some(ctx.tool_input.clone()),
        tool_result: ctx.tool_result.clone(),
        ..call_from(&ctx.origin)
    }
}

fn llm_call(ctx: &LlmCallContext) -> HookCall {
    HookCall {
        has_llm: ctx.model.is_some(),
        messages: ctx.messages.len(),
        response: ctx.response.clone(),
        ..call_from(&ctx.origin)
    }
}

/// Why a hook spec cannot be registered where it was put.
fn misplaced(point: HookPoint, spec: &HookSpec) -> String {
    format!(
        "hook `{point}` cannot be {spec:?} (block is for before_tool_call, prefix for after_llm_call)"
    )
}

/// Whether the hook at `point` is asked for, where `record` is all it may do.
fn recording(point: HookPoint, spec: &Option<HookSpec>) -> Result<bool, String> {
    match spec {
        None => Ok(false),
        Some(HookSpec::Record) => Ok(true),
        Some(other) => Err(misplaced(point, other)),
    }
}

/// The case's hooks as a [`Hooks`] set; each records its calls in `log`.
pub fn build_hooks(spec: &HooksSpec, log: &HookLog) -> Result<Hooks, String> {
    let mut hooks = Hooks::new();
    if let Some(kind) = &spec.before_tool_call {
        let log = log.clone();
        let blocked: Vec<String> = match kind {
            HookSpec::Record => Vec::new(),
            HookSpec::Block { tools } => tools.clone(),
            other => return Err(misplaced(HookPoint::BeforeToolCall, other)),
        };
        hooks = hooks.before_tool_call(move |ctx| {
            log.push(HookPoint::BeforeToolCall, tool_call(ctx));
            if blocked.contains(&ctx.tool_name) {
                HookDecision::block()
            } else {
                HookDecision::Continue
            }
        });
    }
    if recording(HookPoint::AfterToolCall, &spec.after_tool_call)? {
        let log = log.clone();
        hooks = hooks.after_tool_call(move |ctx| {
            log.push(HookPoint::AfterToolCall, tool_call(ctx));
            None
        });
    }
    if recording(HookPoint::BeforeLlmCall, &spec.before_llm_call)? {
        let log = log.clone();
        hooks = hooks.before_llm_call(move |ctx| {
            log.push(HookPoint::BeforeLlmCall, llm_call(ctx));
            HookDecision::Continue
        });
    }
    if let Some(kind) = &spec.after_llm_call {
        let prefix = match kind {
            HookSpec::Record => None,
            HookSpec::Prefix { text } => Some(text.clone()),
            other => return Err(misplaced(HookPoint::AfterLlmCall, other)),
        };
        let log = log.clone();
        hooks = hooks.after_llm_call(move |ctx| {
            log.push(HookPoint::AfterLlmCall, llm_call(ctx));
            prefix
                .as_ref()
                .map(|p| format!("{p}{}", ctx.response.as_deref().unwrap_or_default()))
        });
    }
    Ok(hooks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(spec: &str, raw: &str) -> Result<GuardrailPass, String> {
        let spec: GuardrailSpec = yaml_serde::from_str(spec).unwrap();
        let guardrail = build_guardrail(&spec);
        guardrail
            .check_fn(&TaskOutput::new("d", "e", raw, "R"))
            .unwrap()
    }

    #[test]
    fn guardrails() {
        assert_eq!(
            check("{kind: max_words, n: 2}", "two words"),
            Ok(GuardrailPass::Keep)
        );
        assert!(
            check("{kind: max_words, n: 2}", "three words here")
                .unwrap_err()
                .contains("at most 2")
        );
        assert!(check("{kind: contains, text: x}", "abc").is_err());
        assert_eq!(
            check("{kind: contains_all, texts: [a, b]}", "a b"),
            Ok(GuardrailPass::Keep)
        );
        assert!(
            check("{kind: contains_all, texts: [a, z]}", "a b")
                .unwrap_err()
                .contains("\"z\"")
        );
        assert_eq!(
            check("{kind: always_fail, message: no}", "x"),
            Err("no".into())
        );
        assert_eq!(check("{kind: always_pass}", "x"), Ok(GuardrailPass::Keep));
        assert_eq!(
            check("{kind: replace, value: new}", "x"),
            Ok(GuardrailPass::Raw("new".into()))
        );
        assert_eq!(
            check("{kind: replace, value: {a: 1}}", "x"),
            Ok(GuardrailPass::Typed(json!({"a": 1})))
        );
        let twice: GuardrailSpec =
            yaml_serde::from_str("{kind: fail_then_pass, message: again, failures: 2}").unwrap();
        let guardrail = build_guardrail(&twice);
        let out = TaskOutput::new("d", "e", "x", "R");
        let verdicts: Vec<bool> = (0..3)
            .map(|_| guardrail.check_fn(&out).unwrap().is_ok())
            .collect();
        assert_eq!(verdicts, [false, false, true]);
        assert!(
            build_guardrail(&GuardrailSpec::Llm {
                description: "be nice".into()
            })
            .check_fn(&out)
            .is_none()
        );
    }

    #[test]
    fn conditions() {
        let out = TaskOutput::new("d", "e", "the answer is yes", "R");
        assert!(!condition(&ConditionSpec::Always { value: false })(&out));
        assert!(condition(&ConditionSpec::PreviousContains {
            text: "yes".into()
        })(&out));
        assert!(!condition(&ConditionSpec::PreviousContains {
            text: "no way".into()
        })(&out));
    }

    #[test]
    fn the_catalog_resolves_guardrail_and_condition_entries_and_no_callbacks() {
        let guardrail = CatalogCode
            .guardrail(
                json!({"kind": "always_fail", "message": "no"})
                    .as_object()
                    .unwrap(),
            )
            .unwrap()
            .unwrap();
        let out = TaskOutput::new("d", "e", "x", "R");
        assert_eq!(guardrail.check_fn(&out).unwrap(), Err("no".into()));
        let error = CatalogCode
            .guardrail(json!({"kind": "explode"}).as_object().unwrap())
            .unwrap()
            .err()
            .unwrap();
        assert!(error.contains("explode"), "{error}");
        let skip = CatalogCode
            .condition(&json!({"kind": "always", "value": false}))
            .unwrap()
            .unwrap();
        assert!(!skip(&out));
        assert!(CatalogCode.task_callback(&json!("my.callback")).is_none());
    }

    #[test]
    fn docstrings_lose_their_shared_indentation() {
        assert_eq!(
            docstring_text("Get the answer, just re-use this\n        tool non-stop."),
            "Get the answer, just re-use this\ntool non-stop."
        );
        assert_eq!(
            docstring_text("a\n    b\n      c\n\n    d"),
            "a\nb\n  c\n\nd"
        );
        assert_eq!(docstring_text("One line."), "One line.");
        assert_eq!(docstring_text("no\nindent"), "no\nindent");
    }

    use crewai_tools::ToolContext;

    fn spec(yaml: &str) -> ToolSpec {
        yaml_serde::from_str(yaml).unwrap()
    }

    async fn run(handle: &ToolHandle, args: Value) -> Result<String, ToolError> {
        handle
            .tool()
            .run(args, &ToolContext::default())
            .await
            .map(|o| o.to_text())
    }

    #[test]
    fn python_printing() {
        assert_eq!(python_str(&json!(42)), "42");
        assert_eq!(python_str(&json!(2.5)), "2.5");
        assert_eq!(python_float(25.0), "25.0");
        assert_eq!(
            (python_float(1e16), python_float(f64::INFINITY)),
            ("1e+16".to_string(), "inf".to_string())
        );
        assert_eq!(python_str(&json!(true)), "True");
        assert_eq!(
            python_json_dumps(&json!({"a": 1, "b": "é"})),
            r#"{"a": 1, "b": "\u00e9"}"#
        );
    }

    #[test]
    fn schema_from_args() {
        let s = spec(
            "description: d\nargs: {first_number: integer, b: string}\nbehaviour: {kind: multiply}\n",
        );
        assert_eq!(
            tool_schema(&s),
            json!({"properties": {"first_number": {"title": "First Number", "type": "integer"}, "b": {"title": "B", "type": "string"}}, "required": ["first_number", "b"], "type": "object"})
        );
        assert_eq!(
            tool_schema(&spec("args: {}\nbehaviour: {kind: counter}\n")),
            json!({"properties": {}, "type": "object"})
        );
    }

    /// The catalog tool `name` of the YAML spec `yaml`, counting its runs in `runs`.
    fn test_tool(name: &str, yaml: &str, runs: &ToolRuns) -> ToolHandle {
        build_tool(name, &spec(yaml), runs)
    }

    #[tokio::test]
    async fn behaviours() {
        let runs = ToolRuns::default();
        let multiply = test_tool(
            "m",
            "args: {a: integer, b: integer}\nbehaviour: {kind: multiply}\n",
            &runs,
        );
        assert_eq!(run(&multiply, json!({"a": 7, "b": 6})).await.unwrap(), "42");
        assert_eq!(
            run(&multiply, json!({"a": 1.5, "b": 2})).await.unwrap(),
            "3.0"
        );
        let add = test_tool(
            "a",
            "args: {a: number, b: number}\nbehaviour: {kind: add}\n",
            &runs,
        );
        assert_eq!(run(&add, json!({"a": 2, "b": 3})).await.unwrap(), "5");
        let divide = test_tool(
            "d",
            "args: {a: number, b: number}\nbehaviour: {kind: divide}\n",
            &runs,
        );
        assert_eq!(
            run(&divide, json!({"a": 100, "b": 4})).await.unwrap(),
            "25.0"
        );
        assert!(run(&divide, json!({"a": 1, "b": 0})).await.is_err());
        let echo = test_tool("e", "args: {x: string}\nbehaviour: {kind: echo}\n", &runs);
        assert_eq!(
            run(&echo, json!({"x": "y"})).await.unwrap(),
            r#"{"x": "y"}"#
        );
        let fail = test_tool("f", "behaviour: {kind: fail, message: nope}\n", &runs);
        assert_eq!(run(&fail, json!({})).await.unwrap_err().to_string(), "nope");
        let sequence = test_tool("s", "behaviour: {kind: sequence, values: [a, 2]}\n", &runs);
        let mut seen = Vec::new();
        for _ in 0..3 {
            seen.push(run(&sequence, json!({})).await.unwrap());
        }
        assert_eq!(seen, ["a", "2", "2"]);
        let counter = test_tool("c", "behaviour: {kind: counter}\n", &runs);
        run(&counter, json!({})).await.unwrap();
        assert_eq!(run(&counter, json!({})).await.unwrap(), "2");
        let format = test_tool(
            "fmt",
            "args: {q: string}\nbehaviour: {kind: format, template: 'R: {q} {missing}'}\n",
            &runs,
        );
        assert_eq!(
            run(&format, json!({"q": "x"})).await.unwrap(),
            "R: x {missing}"
        );
        let lookup = test_tool(
            "l",
            "args: {query: string}\nbehaviour: {kind: lookup, arg: query, cases: [{contains: [tokyo], value: T}], default: 'none for {query}'}\n",
            &runs,
        );
        assert_eq!(
            run(&lookup, json!({"query": "TOKYO size"})).await.unwrap(),
            "T"
        );
        assert_eq!(
            run(&lookup, json!({"query": "Paris"})).await.unwrap(),
            "none for Paris"
        );
        let sleep = test_tool(
            "z",
            "behaviour: {kind: sleep, seconds: 0.01, value: ok}\n",
            &runs,
        );
        assert_eq!(run(&sleep, json!({})).await.unwrap(), "ok");
        let counts = runs.snapshot();
        assert_eq!(
            (counts["m"], counts["f"], counts["s"], counts["c"]),
            (2, 1, 3, 2)
        );
    }

    #[tokio::test]
    async fn sleep_is_cancellable() {
        let runs = ToolRuns::default();
        let sleep = test_tool(
            "z",
            "behaviour: {kind: sleep, seconds: 30, value: ok}\n",
            &runs,
        );
        let ctx = ToolContext::default();
        ctx.cancellation.cancel();
        assert!(matches!(
            sleep.tool().run(json!({}), &ctx).await,
            Err(ToolError::Cancelled)
        ));
    }

    #[test]
    fn options_and_cache_functions() {
        let runs = ToolRuns::default();
        let handle = test_tool(
            "m",
            "behaviour: {kind: multiply}\nresult_as_answer: true\nmax_usage_count: 2\ncache_function: {kind: even_result}\n",
            &runs,
        );
        assert!(handle.result_as_answer());
        assert_eq!(handle.max_usage_count(), Some(2));
        assert!(handle.should_cache(&json!({}), &ToolOutput::Text("12".into())));
        assert!(!handle.should_cache(&json!({}), &ToolOutput::Text("3".into())));
        let uncached = test_tool("u", "behaviour: {kind: counter}\ncache: false\n", &runs);
        assert!(!uncached.should_cache(&json!({}), &ToolOutput::Text("2".into())));
    }

    #[test]
    fn hooks_record_block_and_prefix() {
        let spec: HooksSpec = yaml_serde::from_str(
            "before_tool_call: {kind: block, tools: [danger]}\nafter_tool_call: {kind: record}\nbefore_llm_call: {kind: record}\nafter_llm_call: {kind: prefix, text: '[H] '}\n",
        )
        .unwrap();
        let log = HookLog::default();
        let hooks = build_hooks(&spec, &log).unwrap();
        let mut danger = ToolCallContext {
            tool_name: "danger".into(),
            tool_input: json!({"a": 1}),
            origin: CallOrigin {
                agent_role: Some("R".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(hooks.run_before_tool(&mut danger), HookDecision::block());
        let mut safe = ToolCallContext {
            tool_name: "safe".into(),
            ..Default::default()
        };
        assert_eq!(hooks.run_before_tool(&mut safe), HookDecision::Continue);
        let mut llm = LlmCallContext {
            model: Some("gpt".into()),
            response: Some("hi".into()),
            ..Default::default()
        };
        assert_eq!(hooks.run_after_llm(&mut llm).as_deref(), Some("[H] hi"));
        let calls = log.snapshot();
        assert_eq!(calls[&HookPoint::BeforeToolCall].len(), 2);
        assert!(calls[&HookPoint::BeforeToolCall][0].has_agent);
        assert!(calls[&HookPoint::AfterLlmCall][0].has_llm);
        let bad: HooksSpec =
            yaml_serde::from_str("after_tool_call: {kind: prefix, text: x}\n").unwrap();
        assert!(build_hooks(&bad, &log).is_err());
    }
}
