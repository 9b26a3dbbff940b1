//! The fields of agents, tasks and the crew, as CrewAI names them, with where each was written.
//!
//! Every field is optional here: an unset field takes the engine's default when the crew is
//! built, and an overlay in `config/crew.yaml` replaces only the fields it names.

use std::collections::BTreeMap;
use std::sync::Arc;

use crewai_llm::LlmConfig;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::Diagnostic;
use crate::source::{DocPath, Seg, SourceFile};

/// Where a value was written: a file and the path of its key.
#[derive(Debug, Clone)]
pub struct Origin {
    pub source: Arc<SourceFile>,
    pub path: DocPath,
}

impl Origin {
    pub fn new(source: &Arc<SourceFile>, path: DocPath) -> Self {
        Origin {
            source: Arc::clone(source),
            path,
        }
    }

    /// The same file, one step deeper (`tools` → `tools[2]`).
    pub fn child(&self, seg: impl Into<Seg>) -> Self {
        let mut path = self.path.clone();
        path.push(seg.into());
        Origin {
            source: Arc::clone(&self.source),
            path,
        }
    }

    /// The 1-based line of the key, found in the source text.
    pub fn line(&self) -> Option<usize> {
        self.source.line_of(&self.path)
    }

    /// A problem at this place.
    pub fn diagnostic(&self, message: impl Into<String>) -> Diagnostic {
        Diagnostic::new(&self.source, self.line(), message)
    }
}

/// A tool named in `tools:`: a bare name, or a mapping with `name:` and constructor arguments
/// (`{name: ScrapeWebsiteTool, website_url: https://...}`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolRef {
    pub name: String,
    /// Constructor arguments given beside the name.
    pub args: Map<String, Value>,
}

impl<'de> Deserialize<'de> for ToolRef {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match Value::deserialize(deserializer)? {
            Value::String(name) => Ok(ToolRef {
                name,
                args: Map::new(),
            }),
            Value::Object(mut map) => match map.remove("name") {
                Some(Value::String(name)) => Ok(ToolRef { name, args: map }),
                _ => Err(serde::de::Error::custom(
                    "a tool given as a mapping needs `name:` (the tool's name) beside its arguments",
                )),
            },
            other => Err(serde::de::Error::custom(format!(
                "a tool is a name like `file_read` or a mapping with `name:`, not {}",
                describe(&other)
            ))),
        }
    }
}

/// `output_json` / `output_pydantic`: a JSON schema inline, or the path of a schema file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SchemaRef {
    /// A path relative to the project folder (`schemas/report.json`).
    File(String),
    /// The schema itself.
    Inline(Map<String, Value>),
}

/// A guardrail written in a project file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum GuardrailSpec {
    /// A rule in words, checked by the agent's model (CrewAI's LLMGuardrail).
    Rule(String),
    /// A code reference such as `{python: module.fn}`, which a YAML-only project cannot run.
    Reference(Map<String, Value>),
}

/// `guardrails:` takes one guardrail or a list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

impl<T: Clone> OneOrMany<T> {
    pub fn to_vec(&self) -> Vec<T> {
        match self {
            OneOrMany::One(item) => vec![item.clone()],
            OneOrMany::Many(items) => items.clone(),
        }
    }
}

/// What an agent does when a tool fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolFailurePolicySpec {
    Ignore,
    Warn,
    Raise,
}

/// How the crew runs its tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProcessSpec {
    #[default]
    Sequential,
    Hierarchical,
    /// Several agents answer each task and agree on one answer (configured by `consensus:`).
    Consensual,
}

/// A number of seconds, as `max_execution_time` takes it. CrewAI declares a whole number; a
/// fraction is accepted too and honoured (nothing is lost by it), a negative or non-finite one
/// is refused.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Seconds(f64);

impl Seconds {
    /// `seconds` when it is a finite number of seconds, 0 or more.
    pub fn new(seconds: f64) -> Option<Seconds> {
        (seconds.is_finite() && seconds >= 0.0).then_some(Seconds(seconds))
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0
    }
    pub fn as_duration(self) -> std::time::Duration {
        std::time::Duration::from_secs_f64(self.0)
    }
}

impl<'de> Deserialize<'de> for Seconds {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        value
            .as_f64()
            .and_then(Seconds::new)
            .ok_or_else(|| match value {
                Value::Number(n) => serde::de::Error::custom(format!(
                    "expected a number of seconds, 0 or more, found {n}"
                )),
                other => serde::de::Error::custom(format!(
                    "expected a number of seconds, found {}",
                    describe(&other)
                )),
            })
    }
}

/// `output_log_file`: `true` (CrewAI's `logs.txt`) or a path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum LogFileSpec {
    Enabled(bool),
    Path(String),
}

/// A short name of a JSON value's kind, for messages.
pub(crate) fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "text",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// Turns serde's wording into ours ("expected a string" → "expected text").
pub(crate) fn type_error(err: &serde_json::Error) -> String {
    err.to_string()
        .replace("a string", "text")
        .replace("expected u32", "expected a whole number")
        .replace("expected u64", "expected a whole number")
}

/// A spec whose fields can be set by name (the loader's view of agents, tasks and the crew).
pub(crate) trait Fields {
    fn fields() -> &'static [&'static str];
    fn canonical_field(key: &str) -> Option<&'static str>;
    fn set_field(
        &mut self,
        field: &'static str,
        value: Value,
        origin: Origin,
    ) -> Result<(), String>;
}

/// Declares a spec struct whose fields are all optional and settable by name, so the loader can
/// check each key, report a misspelt one with the nearest field, and merge overlays field by field.
macro_rules! spec_struct {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[doc = $doc:literal])* $field:ident : $ty:ty $(, alias $alias:literal)? ; )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default)]
        pub struct $name {
            $( $(#[doc = $doc])* pub $field: Option<$ty>, )*
            /// Where each set field was written (the overlay's place when an overlay set it).
            pub origins: BTreeMap<&'static str, Origin>,
        }

        impl Fields for $name {
            fn fields() -> &'static [&'static str] {
                Self::FIELDS
            }
            fn canonical_field(key: &str) -> Option<&'static str> {
                Self::canonical(key)
            }
            fn set_field(&mut self, field: &'static str, value: Value, origin: Origin) -> Result<(), String> {
                self.set(field, value, origin)
            }
        }

        impl $name {
            /// Every field name this spec accepts.
            pub const FIELDS: &'static [&'static str] = &[$(stringify!($field)),*];

            /// The canonical name of `key` (aliases resolved), if it is a field.
            pub fn canonical(key: &str) -> Option<&'static str> {
                match key {
                    $( stringify!($field) $(| $alias)? => Some(stringify!($field)), )*
                    _ => None,
                }
            }

            /// Sets one field from a parsed value; `Err` carries the type problem.
            pub(crate) fn set(&mut self, field: &'static str, value: Value, origin: Origin) -> Result<(), String> {
                match field {
                    $( stringify!($field) => {
                        self.$field = Some(serde_json::from_value(value).map_err(|e| type_error(&e))?);
                    } )*
                    _ => return Err(format!("`{field}` is not a field")),
                }
                self.origins.insert(field, origin);
                Ok(())
            }

            /// Where `field` was written, if it was.
            pub fn origin(&self, field: &str) -> Option<&Origin> {
                self.origins.get(field)
            }
        }
    };
}

spec_struct! {
    /// An agent as written in `config/agents.yaml` (or `agents/<name>.jsonc`), with every field
    /// CrewAI's `Agent` takes.
    pub struct AgentSpec {
        role: String;
        goal: String;
        backstory: String;
        /// A model string (`openai/gpt-4o-mini`) or a mapping of CrewAI's LLM fields.
        llm: LlmConfig;
        function_calling_llm: LlmConfig;
        tools: Vec<ToolRef>;
        max_iter: u32;
        max_rpm: u32;
        /// A deadline on each execution of the agent.
        max_execution_time: Seconds;
        max_retry_limit: u32;
        max_tokens: u32;
        allow_delegation: bool;
        verbose: bool;
        cache: bool;
        use_system_prompt: bool;
        system_template: String;
        prompt_template: String;
        response_template: String;
        respect_context_window: bool;
        inject_date: bool;
        date_format: String;
        guardrail: GuardrailSpec;
        guardrail_max_retries: u32;
        tool_failure_policy: ToolFailurePolicySpec;
        step_callback: Value;
        cache_handler: Value;
        callbacks: Value;
        multimodal: bool;
        allow_code_execution: bool;
        code_execution_mode: String;
        reasoning: bool;
        max_reasoning_attempts: u32;
        planning: bool;
        planning_config: Value;
        /// Files of the project's `knowledge/` folder, web pages and text (see
        /// `crewai_knowledge::KnowledgeSource::from_value` for the form).
        knowledge_sources: Value;
        knowledge_storage: Value;
        knowledge_config: crewai_knowledge::KnowledgeConfig;
        embedder: Value;
        memory: Value;
        apps: Value;
        mcps: Value;
        skills: Value;
        a2a: Value;
        security_config: Value;
        checkpoint: Value;
        from_repository: Value;
        executor_class: Value;
        id: Value;
    }
}

spec_struct! {
    /// A task as written in `config/tasks.yaml` (or an entry of `tasks` in `crew.jsonc`), with
    /// every field CrewAI's `Task` takes.
    pub struct TaskSpec {
        name: String;
        description: String;
        expected_output: String;
        /// The key of the agent in `agents.yaml`.
        agent: String;
        /// Keys of earlier tasks whose outputs this task sees; `[]` for none.
        context: Vec<String>;
        tools: Vec<ToolRef>;
        async_execution: bool;
        output_json: SchemaRef;
        output_pydantic: SchemaRef;
        response_model: SchemaRef;
        output_file: String;
        create_directory: bool;
        human_input: bool;
        markdown: bool;
        guardrail: GuardrailSpec;
        guardrails: OneOrMany<GuardrailSpec>;
        guardrail_max_retries: u32, alias "max_retries";
        tool_failure_policy: ToolFailurePolicySpec;
        callback: Value;
        callbacks: Value;
        converter_cls: Value;
        allow_crewai_trigger_context: bool;
        input_files: Value;
        security_config: Value;
        condition: Value;
    }
}

spec_struct! {
    /// What CrewAI keeps in `crew.py`, written in `config/crew.yaml` (or `crew.jsonc`).
    pub struct CrewSpec {
        name: String;
        process: ProcessSpec;
        verbose: bool;
        manager_llm: LlmConfig;
        /// The key of an agent in `agents.yaml` that manages a hierarchical crew.
        manager_agent: String;
        function_calling_llm: LlmConfig;
        max_rpm: u32;
        memory: bool;
        cache: bool;
        planning: bool;
        planning_llm: LlmConfig;
        /// `process: consensual`'s voters, revisions and decision (see `crate::consensus`).
        consensus: Value;
        output_log_file: LogFileSpec;
        stream: bool;
        /// Default inputs; the command line and the caller override them.
        inputs: Map<String, Value>;
        chat_llm: LlmConfig;
        embedder: Value;
        knowledge_sources: Value;
        /// The agents' `knowledge_config` when they set none (a crewai-rs addition; CrewAI sets
        /// it per agent only).
        knowledge_config: crewai_knowledge::KnowledgeConfig;
        prompt_file: Value;
        before_kickoff_callbacks: Value;
        after_kickoff_callbacks: Value;
        step_callback: Value;
        task_callback: Value;
        skills: Value;
        tool_failure_policy: ToolFailurePolicySpec;
        tracing: bool;
        share_crew: bool;
        security_config: Value;
        checkpoint: Value;
        /// Stop the run before an LLM call that would take its cost over this many US dollars.
        max_cost_usd: f64;
        /// Stop the run before an LLM call that would take its tokens over this many.
        max_tokens: u64;
        /// Model prices (USD per million tokens) over the built-in table:
        /// `model: {input: .., cached_input: .., output: ..}`.
        pricing: std::collections::BTreeMap<String, crewai_llm::ModelPrice>;
    }
}

/// Whether a value written for a field asks for something (so ignoring it would change a run):
/// `false`, `null`, `""`, `[]` and `{}` ask for nothing.
pub(crate) fn is_requested(value: &Value) -> bool {
    match value {
        Value::Null | Value::Bool(false) => false,
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
        _ => true,
    }
}

/// Fields we read but cannot honour yet, with what a user should know (fields that name code,
/// such as `step_callback` or `condition`, are resolved or refused when the crew is built; see
/// `crate::resolve`). `true` = the run would
/// behave differently if we ignored the field, so it is an error; `false` = a warning.
pub(crate) const AGENT_UNSUPPORTED: &[(&str, bool, &str)] = &[
    (
        "cache_handler",
        true,
        "a custom cache handler is not supported yet; the crew's `cache: true` gives a shared tool cache",
    ),
    (
        "callbacks",
        true,
        "Python callbacks cannot run here; use the crew's event bus from Rust",
    ),
    (
        "multimodal",
        true,
        "multimodal agents are not supported yet",
    ),
    (
        "knowledge_storage",
        true,
        "custom knowledge storage is not supported yet; knowledge is stored in the project's .crewai/memory.db",
    ),
    ("apps", true, "platform apps are not supported yet"),
    ("checkpoint", true, "checkpointing is not supported yet"),
    (
        "from_repository",
        true,
        "loading agents from a repository is not supported yet",
    ),
    (
        "security_config",
        false,
        "security_config (fingerprints) has no effect here",
    ),
    (
        "executor_class",
        false,
        "there is one executor; executor_class has no effect",
    ),
];

pub(crate) const TASK_UNSUPPORTED: &[(&str, bool, &str)] = &[
    (
        "callbacks",
        true,
        "Python callbacks cannot run here; register a task callback from Rust",
    ),
    (
        "converter_cls",
        true,
        "custom converters are not supported yet",
    ),
    (
        "allow_crewai_trigger_context",
        true,
        "trigger payloads are not supported yet",
    ),
    ("input_files", true, "input files are not supported yet"),
    (
        "security_config",
        false,
        "security_config (fingerprints) has no effect here",
    ),
];

pub(crate) const CREW_UNSUPPORTED: &[(&str, bool, &str)] = &[
    (
        "prompt_file",
        true,
        "custom prompt files are not supported yet",
    ),
    (
        "before_kickoff_callbacks",
        true,
        "Python callbacks cannot run here; register them from Rust (Crew::builder().before_kickoff)",
    ),
    (
        "after_kickoff_callbacks",
        true,
        "Python callbacks cannot run here; register them from Rust (Crew::builder().after_kickoff)",
    ),
    ("checkpoint", true, "checkpointing is not supported yet"),
    (
        "tracing",
        false,
        "CrewAI's hosted tracing is not available; events go to the crew's event bus",
    ),
    (
        "share_crew",
        false,
        "sharing crew data with CrewAI has no effect here",
    ),
    (
        "security_config",
        false,
        "security_config (fingerprints) has no effect here",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tool_refs_take_a_name_or_a_mapping() {
        let bare: ToolRef = serde_json::from_value(json!("file_read")).unwrap();
        assert_eq!(bare.name, "file_read");
        let full: ToolRef = serde_json::from_value(
            json!({"name": "ScrapeWebsiteTool", "website_url": "https://x"}),
        )
        .unwrap();
        assert_eq!(full.name, "ScrapeWebsiteTool");
        assert_eq!(full.args["website_url"], "https://x");
        let err = serde_json::from_value::<ToolRef>(json!({"website_url": "x"})).unwrap_err();
        assert!(err.to_string().contains("needs `name:`"));
    }

    #[test]
    fn aliases_map_to_canonical_fields() {
        assert_eq!(
            TaskSpec::canonical("max_retries"),
            Some("guardrail_max_retries")
        );
        assert_eq!(AgentSpec::canonical("rol"), None);
        assert!(AgentSpec::FIELDS.contains(&"respect_context_window"));
    }

    #[test]
    fn requested_means_not_empty_or_false() {
        assert!(!is_requested(&json!(false)));
        assert!(!is_requested(&json!([])));
        assert!(is_requested(&json!(true)));
        assert!(is_requested(&json!(["x"])));
    }
}
