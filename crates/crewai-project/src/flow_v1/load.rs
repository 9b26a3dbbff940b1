//! Reading a `crewai.flow/v1` file into a [`FlowDeclaration`], every problem with its line.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use crewai_flow::{HumanFeedback, Trigger};
use serde_json::{Map, Value};

use super::{
    DeclaredMethod, DeclaredRole, FLOW_SCHEMA, FlowDeclaration, FlowMemory, StateContract,
};
use crate::error::{Diagnostic, ProjectError, did_you_mean};
use crate::flow_yaml::{parse_trigger, unknown_key};
use crate::source::{Format, SourceFile};
use crate::spec::Origin;
use crate::spec::describe;

const TOP_KEYS: &[&str] = &[
    "schema",
    "name",
    "description",
    "state",
    "config",
    "persist",
    "methods",
    "conversational",
];
const CONFIG_KEYS: &[&str] = &[
    "tracing",
    "stream",
    "memory",
    "input_provider",
    "suppress_flow_events",
    "max_method_calls",
    "defer_trace_finalization",
    "checkpoint",
];
const METHOD_KEYS: &[&str] = &[
    "description",
    "do",
    "start",
    "listen",
    "router",
    "emit",
    "human_feedback",
    "persist",
];
const FEEDBACK_KEYS: &[&str] = &[
    "message",
    "emit",
    "llm",
    "default_outcome",
    "metadata",
    "provider",
    "learn",
    "learn_source",
    "learn_strict",
];

/// Collects problems while a file is read.
pub(super) struct Reader {
    pub(super) diagnostics: Vec<Diagnostic>,
    pub(super) warnings: Vec<String>,
    /// The flow's folder: crew folders and tool roots are relative to it.
    pub(super) root: std::path::PathBuf,
}

impl Reader {
    pub(super) fn error(&mut self, at: &Origin, message: impl Into<String>) {
        self.diagnostics.push(at.diagnostic(message));
    }

    pub(super) fn unknown_keys(
        &mut self,
        map: &Map<String, Value>,
        at: &Origin,
        known: &[&str],
        owner: &str,
    ) {
        for key in map.keys().filter(|k| !known.contains(&k.as_str())) {
            self.diagnostics
                .push(unknown_key(&at.child(key.as_str()), key, known, owner));
        }
    }

    pub(super) fn text(
        &mut self,
        map: &Map<String, Value>,
        key: &str,
        at: &Origin,
        owner: &str,
    ) -> Option<String> {
        match map.get(key) {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) => Some(text.clone()),
            Some(other) => {
                self.error(
                    &at.child(key),
                    format!("{owner}: `{key}` must be text, not {}", describe(other)),
                );
                None
            }
        }
    }

    pub(super) fn flag(
        &mut self,
        map: &Map<String, Value>,
        key: &str,
        at: &Origin,
        owner: &str,
    ) -> bool {
        match map.get(key) {
            None | Some(Value::Null) | Some(Value::Bool(false)) => false,
            Some(Value::Bool(true)) => true,
            Some(other) => {
                self.error(
                    &at.child(key),
                    format!(
                        "{owner}: `{key}` must be true or false, not {}",
                        describe(other)
                    ),
                );
                false
            }
        }
    }

    /// A key that is fine at its default and refused at any other value.
    pub(super) fn refuse_unless_default(
        &mut self,
        map: &Map<String, Value>,
        key: &str,
        at: &Origin,
        owner: &str,
        why: &str,
    ) {
        if let Some(value) = map.get(key)
            && !matches!(value, Value::Null | Value::Bool(false))
        {
            self.error(
                &at.child(key),
                format!("{owner}: `{key}` is not supported: {why}"),
            );
        }
    }
}

/// Reads and parses a flow file: YAML, or JSON(C) by its `.json` / `.jsonc` extension.
fn read(path: &Path) -> Result<(Arc<SourceFile>, Value), ProjectError> {
    let root = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let format = match path.extension().and_then(|e| e.to_str()) {
        Some("json" | "jsonc") => Format::Jsonc,
        _ => Format::Yaml,
    };
    let source = Arc::new(SourceFile::read(path, &root, format)?);
    let document = source.parse().map_err(|d| ProjectError::Invalid(vec![d]))?;
    Ok((source, document))
}

/// Whether the flow file at `path` has a top-level `schema:` key (what marks a declaration).
pub(super) fn has_schema_key(path: &Path) -> Result<bool, ProjectError> {
    let (_, document) = read(path)?;
    Ok(document.get("schema").is_some())
}

pub(super) fn load(path: &Path) -> Result<FlowDeclaration, ProjectError> {
    let root = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let (source, document) = read(path)?;
    let top = Origin::new(&source, Vec::new());
    let Value::Object(document) = document else {
        return Err(ProjectError::Invalid(vec![Diagnostic::in_file(
            &source.display,
            format!(
                "a flow declaration is a mapping with `schema: {FLOW_SCHEMA}`, `name:` and `methods:`"
            ),
        )]));
    };
    let mut reader = Reader {
        diagnostics: Vec::new(),
        warnings: Vec::new(),
        root: root.clone(),
    };
    reader.unknown_keys(&document, &top, TOP_KEYS, "the flow");
    match document.get("schema") {
        Some(Value::String(schema)) if schema == FLOW_SCHEMA => {}
        Some(other) => reader.error(
            &top.child("schema"),
            format!("unknown schema {other}; this reads `schema: {FLOW_SCHEMA}`"),
        ),
        None => reader.error(
            &top,
            format!("a flow declaration needs `schema: {FLOW_SCHEMA}`"),
        ),
    }
    let name = reader.text(&document, "name", &top, "the flow");
    if name.is_none() && !document.contains_key("name") {
        reader.diagnostics.push(Diagnostic::in_file(
            &source.display,
            "a flow declaration needs `name:`",
        ));
    }
    let description = reader.text(&document, "description", &top, "the flow");
    if document.contains_key("conversational") {
        reader.error(&top.child("conversational"), "`conversational` flows (chat) are not supported; run the flow with kickoff inputs instead");
    }
    let state = read_state(&mut reader, document.get("state"), &top.child("state"));
    let config = read_config(&mut reader, document.get("config"), &top.child("config"));
    let persist = read_persist(
        &mut reader,
        document.get("persist"),
        &top.child("persist"),
        "the flow",
    );

    let mut methods = Vec::new();
    match document.get("methods") {
        Some(Value::Object(entries)) if !entries.is_empty() => {
            for (method, value) in entries {
                let at = top.child("methods").child(method.as_str());
                if let Some(parsed) = read_method(&mut reader, method, value, &at) {
                    methods.push(parsed);
                }
            }
        }
        _ => reader.error(
            &top.child("methods"),
            "`methods:` must map method names to their `do:` and trigger",
        ),
    }
    if reader.diagnostics.is_empty() {
        settle_labels(&mut reader, &mut methods, &top);
    }
    if reader.diagnostics.is_empty()
        && !methods
            .iter()
            .any(|m| matches!(m.role, DeclaredRole::Start))
    {
        reader.diagnostics.push(Diagnostic::in_file(
            &source.display,
            "no method has `start: true`; mark the first step of the flow",
        ));
    }
    if !reader.diagnostics.is_empty() {
        return Err(ProjectError::Invalid(reader.diagnostics));
    }
    Ok(FlowDeclaration {
        root,
        file: source.display.clone(),
        name: name.unwrap_or_default(),
        description,
        state,
        max_method_calls: config.max_method_calls,
        emit_events: config.emit_events,
        memory: config.memory,
        persist,
        methods,
        warnings: reader.warnings,
    })
}

pub(super) fn object<'a>(
    reader: &mut Reader,
    value: Option<&'a Value>,
    at: &Origin,
    what: &str,
) -> Option<&'a Map<String, Value>> {
    match value {
        None | Some(Value::Null) => None,
        Some(Value::Object(map)) => Some(map),
        Some(other) => {
            reader.error(
                at,
                format!("{what} must be a mapping, not {}", describe(other)),
            );
            None
        }
    }
}

fn read_state(reader: &mut Reader, value: Option<&Value>, at: &Origin) -> StateContract {
    let Some(map) = object(reader, value, at, "`state`") else {
        return StateContract::default();
    };
    let kind = map.get("type").and_then(Value::as_str).unwrap_or("dict");
    let known: &[&str] = match kind {
        "dict" => &["type", "default"],
        "unknown" => &["type", "ref", "default"],
        "pydantic" => &["type", "ref", "json_schema", "default"],
        "json_schema" => &["type", "json_schema", "default"],
        other => {
            reader.error(
                &at.child("type"),
                format!("unknown state type '{other}'; use dict, json_schema, pydantic or unknown"),
            );
            return StateContract::default();
        }
    };
    reader.unknown_keys(map, at, known, "the state");
    let mut defaults = object(
        reader,
        map.get("default"),
        &at.child("default"),
        "`state.default`",
    )
    .cloned()
    .unwrap_or_default();
    let json_schema = match (kind, map.get("json_schema")) {
        ("json_schema", None) => {
            reader.error(at, "a `type: json_schema` state needs `json_schema:`");
            None
        }
        ("pydantic", None) => {
            reader.error(at, "a `type: pydantic` state names a Python model, which cannot be imported here; add its `json_schema:` (CrewAI's fallback) or use `type: dict`");
            None
        }
        (_, Some(Value::Object(schema))) => Some(Value::Object(schema.clone())),
        (_, Some(other)) => {
            reader.error(
                &at.child("json_schema"),
                format!("`json_schema` must be a mapping, not {}", describe(other)),
            );
            None
        }
        (_, None) => None,
    };
    if kind == "pydantic" && json_schema.is_some() {
        reader.warnings.push(
            "the state's pydantic `ref` is not imported; its `json_schema` is used instead".into(),
        );
    }
    if let Some(schema) = &json_schema {
        if let Err(err) = jsonschema::validator_for(schema) {
            reader.error(
                &at.child("json_schema"),
                format!("`json_schema` is not a valid JSON Schema: {err}"),
            );
        }
        // The defaults a schema gives its properties apply, as the model CrewAI builds from it does.
        if let Some(Value::Object(properties)) = schema.get("properties") {
            for (key, property) in properties {
                if let Some(default) = property.get("default") {
                    defaults
                        .entry(key.clone())
                        .or_insert_with(|| default.clone());
                }
            }
        }
    }
    StateContract {
        defaults,
        json_schema,
    }
}

/// What `config:` sets: the method-call limit, whether events are emitted, the flow's memory.
struct Config {
    max_method_calls: u32,
    emit_events: bool,
    memory: Option<FlowMemory>,
}

fn read_config(reader: &mut Reader, value: Option<&Value>, at: &Origin) -> Config {
    let Some(map) = object(reader, value, at, "`config`") else {
        return Config {
            max_method_calls: crewai_flow::DEFAULT_MAX_METHOD_CALLS,
            emit_events: true,
            memory: None,
        };
    };
    reader.unknown_keys(map, at, CONFIG_KEYS, "the config");
    let owner = "the config";
    reader.refuse_unless_default(map, "tracing", at, owner, "CrewAI's platform tracing is not part of this runtime; use `crewai traces` / the observe exporters");
    reader.refuse_unless_default(
        map,
        "stream",
        at,
        owner,
        "streamed flow events are not supported; leave it false",
    );
    reader.refuse_unless_default(
        map,
        "input_provider",
        at,
        owner,
        "an input provider is a Python reference; pass kickoff inputs instead",
    );
    reader.refuse_unless_default(
        map,
        "checkpoint",
        at,
        owner,
        "use `persist: {enabled: true}` to save the state after each method",
    );
    reader.refuse_unless_default(
        map,
        "defer_trace_finalization",
        at,
        owner,
        "platform tracing is not part of this runtime",
    );
    let emit_events = !reader.flag(map, "suppress_flow_events", at, owner);
    let max_method_calls = match map.get("max_method_calls") {
        None | Some(Value::Null) => crewai_flow::DEFAULT_MAX_METHOD_CALLS,
        Some(value) => match value
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| *n > 0)
        {
            Some(n) => n,
            None => {
                reader.error(
                    &at.child("max_method_calls"),
                    "`max_method_calls` must be a whole number of at least 1",
                );
                crewai_flow::DEFAULT_MAX_METHOD_CALLS
            }
        },
    };
    let memory = read_memory(reader, map.get("memory"), &at.child("memory"));
    Config {
        max_method_calls,
        emit_events,
        memory,
    }
}

/// `config.memory`: `true`, or a mapping with `enabled` (default true, as `persist:` has it) and
/// `embedder: {provider, config}` (CrewAI's embedder shape) to choose what embeds it; `false`
/// or absent for none.
fn read_memory(reader: &mut Reader, value: Option<&Value>, at: &Origin) -> Option<FlowMemory> {
    match value {
        None | Some(Value::Null) | Some(Value::Bool(false)) => None,
        Some(Value::Bool(true)) => Some(FlowMemory { embedder: None }),
        Some(Value::Object(map)) => {
            reader.unknown_keys(map, at, &["enabled", "embedder"], "the flow's memory");
            match map.get("enabled") {
                None | Some(Value::Bool(true)) => {}
                Some(Value::Bool(false)) => return None,
                Some(_) => {
                    reader.error(&at.child("enabled"), "`enabled` must be true or false");
                    return None;
                }
            }
            let embedder = map.get("embedder").filter(|v| !v.is_null()).cloned();
            if let Some(value) = &embedder
                && let Err(error) = crate::memory::configured_embedder(value)
            {
                reader.error(
                    &at.child("embedder"),
                    crate::memory::embedder_message(&error),
                );
            }
            Some(FlowMemory { embedder })
        }
        Some(_) => {
            reader.error(
                at,
                "`memory` must be true, false, or {enabled: true, embedder: {provider: <name>, config: {...}}}",
            );
            None
        }
    }
}

fn read_persist(reader: &mut Reader, value: Option<&Value>, at: &Origin, owner: &str) -> bool {
    let Some(map) = object(reader, value, at, "`persist`") else {
        return false;
    };
    reader.unknown_keys(
        map,
        at,
        &["enabled", "verbose", "persistence"],
        &format!("the persist of {owner}"),
    );
    reader.refuse_unless_default(
        map,
        "persistence",
        at,
        owner,
        "a persistence backend is a Python object; the built-in SQLite store is used",
    );
    reader.refuse_unless_default(
        map,
        "verbose",
        at,
        owner,
        "verbose persistence output is not supported",
    );
    reader.flag(map, "enabled", at, owner)
}

fn condition(reader: &mut Reader, value: &Value, at: &Origin, owner: &str) -> Option<Trigger> {
    parse_trigger(value)
        .map_err(|message| reader.error(at, format!("{owner}: {message}")))
        .ok()
}

fn read_method(
    reader: &mut Reader,
    name: &str,
    value: &Value,
    at: &Origin,
) -> Option<DeclaredMethod> {
    let owner = format!("method '{name}'");
    let before = reader.diagnostics.len();
    let valid_name = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid_name {
        reader.error(
            at,
            format!("{owner}: a method name is letters, digits and `_`, not starting with a digit"),
        );
    }
    let Value::Object(map) = value else {
        reader.error(
            at,
            format!("{owner} must be a mapping with `do:` and a trigger"),
        );
        return None;
    };
    reader.unknown_keys(map, at, METHOD_KEYS, &owner);
    let description = reader.text(map, "description", at, &owner);
    let start = match map.get("start") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => None,
        Some(Value::Bool(true)) => Some(None),
        Some(Value::String(s)) if s.is_empty() => None,
        Some(cond) => condition(reader, cond, &at.child("start"), &owner).map(Some),
    };
    let listen = map
        .get("listen")
        .filter(|v| !v.is_null())
        .and_then(|cond| condition(reader, cond, &at.child("listen"), &owner));
    let router = reader.flag(map, "router", at, &owner);
    let emit: Option<Vec<String>> = match map.get("emit") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => Some(
            items
                .iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect(),
        ),
        Some(_) => {
            reader.error(
                &at.child("emit"),
                format!("{owner}: `emit` must be a list of labels"),
            );
            None
        }
    };
    let feedback = read_feedback(
        reader,
        map.get("human_feedback"),
        &at.child("human_feedback"),
        &owner,
    );
    // As in CrewAI, a method whose feedback declares outcomes routes on the answer whatever
    // `router`/`emit` say; the engine runs it as a method with feedback.
    let feedback_routes = feedback.as_ref().is_some_and(|f| !f.outcomes.is_empty());
    let router = router && !feedback_routes;
    if emit.is_some() && !router && !feedback_routes {
        reader.warnings.push(format!("{owner}: `emit` lists a router's labels but the method has no `router: true`; the labels are not used"));
    }
    let persist = read_persist(reader, map.get("persist"), &at.child("persist"), &owner);
    let role = match (start, listen, router) {
        (Some(_), _, true) => {
            reader.error(at, format!("{owner}: a router runs after another method; give it `listen:` instead of `start:`"));
            None
        }
        (Some(_), Some(_), false) => {
            reader.error(at, format!("{owner}: has both `start` and `listen`; a conditional start is `start: <condition>`"));
            None
        }
        (Some(None), None, false) => Some(DeclaredRole::Start),
        (Some(Some(trigger)), None, false) => Some(DeclaredRole::StartOn(trigger)),
        (None, Some(trigger), true) => Some(DeclaredRole::Router {
            trigger,
            labels: emit.clone().unwrap_or_default(),
        }),
        (None, Some(trigger), false) => Some(DeclaredRole::Listen(trigger)),
        (None, None, _) => {
            // A `listen:` that did not parse is reported already.
            if map.get("listen").is_none_or(Value::is_null) {
                reader.error(
                    at,
                    format!("{owner} has no `start` or `listen`, so it would never run"),
                );
            }
            None
        }
    };
    let action = match map.get("do") {
        Some(Value::Object(action)) => {
            super::actions::read_action(reader, action, &at.child("do"), &owner)
        }
        Some(other) => {
            reader.error(
                &at.child("do"),
                format!(
                    "{owner}: `do` must be a mapping with `call:`, not {}",
                    describe(other)
                ),
            );
            None
        }
        None => {
            reader.error(
                at,
                format!("{owner} needs `do:` (call: expression, crew or agent)"),
            );
            None
        }
    };
    if reader.diagnostics.len() > before {
        return None;
    }
    Some(DeclaredMethod {
        name: name.to_string(),
        description,
        role: role?,
        action: action?,
        persist,
        feedback,
    })
}

fn read_feedback(
    reader: &mut Reader,
    value: Option<&Value>,
    at: &Origin,
    owner: &str,
) -> Option<HumanFeedback> {
    let map = object(reader, value, at, "`human_feedback`")?;
    reader.unknown_keys(
        map,
        at,
        FEEDBACK_KEYS,
        &format!("the human_feedback of {owner}"),
    );
    let message = reader.text(map, "message", at, owner);
    if message.is_none() {
        reader.error(at, format!("{owner}: `human_feedback` needs `message:`"));
    }
    for (key, why) in [
        (
            "provider",
            "a feedback provider is a Python reference; the console asks, or the caller's provider",
        ),
        ("metadata", "feedback metadata is not carried"),
        ("learn", "learning from feedback is not supported"),
    ] {
        reader.refuse_unless_default(map, key, at, owner, why);
    }
    let mut feedback = HumanFeedback::new(message.unwrap_or_default());
    if let Some(emit) = map.get("emit").filter(|v| !v.is_null()) {
        match emit
            .as_array()
            .filter(|items| items.iter().all(Value::is_string))
        {
            Some(items) => feedback = feedback.emit(items.iter().filter_map(Value::as_str)),
            None => reader.error(
                &at.child("emit"),
                format!("{owner}: `human_feedback.emit` must be a list of outcomes"),
            ),
        }
        if map.get("llm").is_some_and(|v| !v.is_null()) {
            reader.warnings.push(format!(
                "{owner}: human_feedback.llm is not used; the answer is matched against the outcome names ({})",
                feedback.outcomes.join(", ")
            ));
        }
    }
    if let Some(default) = reader.text(map, "default_outcome", at, owner) {
        if feedback.outcomes.is_empty() {
            reader.error(
                &at.child("default_outcome"),
                format!("{owner}: `default_outcome` needs `human_feedback.emit`"),
            );
        } else if !feedback.outcomes.contains(&default) {
            reader.error(
                &at.child("default_outcome"),
                format!(
                    "{owner}: default_outcome '{default}' is not one of `emit` ({})",
                    feedback.outcomes.join(", ")
                ),
            );
        }
        feedback = feedback.default_outcome(default);
    }
    Some(feedback)
}

/// Routers without `emit` take the labels listeners wait for; every condition must name a
/// method or a label.
fn settle_labels(reader: &mut Reader, methods: &mut [DeclaredMethod], top: &Origin) {
    let names: BTreeSet<String> = methods.iter().map(|m| m.name.clone()).collect();
    let waited: BTreeSet<String> = methods
        .iter()
        .filter_map(|m| match &m.role {
            DeclaredRole::Listen(t)
            | DeclaredRole::StartOn(t)
            | DeclaredRole::Router { trigger: t, .. } => Some(t),
            DeclaredRole::Start => None,
        })
        .flat_map(|t| t.names().into_iter().map(String::from).collect::<Vec<_>>())
        .filter(|n| !names.contains(n))
        .collect();
    for method in methods.iter_mut() {
        if let DeclaredRole::Router { labels, .. } = &mut method.role
            && labels.is_empty()
        {
            if waited.is_empty() {
                reader.error(&top.child("methods").child(method.name.as_str()), format!("router '{}' has no `emit:` and no method listens to a label; list its labels in `emit:`", method.name));
            }
            labels.extend(waited.iter().cloned());
        }
    }
    let mut known: BTreeSet<String> = names;
    for method in methods.iter() {
        if let DeclaredRole::Router { labels, .. } = &method.role {
            known.extend(labels.iter().cloned());
        }
        if let Some(feedback) = &method.feedback {
            known.extend(feedback.outcomes.iter().cloned());
        }
    }
    for method in methods.iter() {
        let (key, trigger) = match &method.role {
            DeclaredRole::Start => continue,
            DeclaredRole::StartOn(t) => ("start", t),
            DeclaredRole::Listen(t) | DeclaredRole::Router { trigger: t, .. } => ("listen", t),
        };
        for name in trigger.names() {
            if !known.contains(name) {
                let hint = did_you_mean(name, known.iter().map(String::as_str));
                reader.diagnostics.push(
                    top.child("methods").child(method.name.as_str()).child(key)
                        .diagnostic(format!("method '{}' waits for '{name}', which is neither a method nor a label a router or human_feedback emits", method.name))
                        .with_hint(hint),
                );
            }
        }
    }
}
