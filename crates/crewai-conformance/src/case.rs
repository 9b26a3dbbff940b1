//! The `case.yaml` format (see the conformance README): serde types for every key and catalog
//! entry, and the loader. Unknown keys are rejected with the file, line and the keys allowed, so a
//! typo in a case never silently drops an expectation.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// Why a case could not be loaded (render it with `crewai_llm::error_chain` for its cause).
#[derive(Debug, thiserror::Error)]
pub enum CaseError {
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The YAML does not fit the case format (an unknown key, a wrong type), with its line.
    #[error("{path} is not a valid case")]
    Parse {
        path: PathBuf,
        #[source]
        source: yaml_serde::Error,
    },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

/// A mapping that keeps the order its keys were written in (agent order is crew order).
#[derive(Debug, Clone, PartialEq)]
pub struct Ordered<V>(pub Vec<(String, V)>);

impl<V> Default for Ordered<V> {
    fn default() -> Self {
        Ordered(Vec::new())
    }
}

impl<V> Ordered<V> {
    pub fn get(&self, key: &str) -> Option<&V> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
    pub fn iter(&self) -> impl Iterator<Item = (&String, &V)> {
        self.0.iter().map(|(k, v)| (k, v))
    }
    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.0.iter().map(|(k, _)| k)
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for Ordered<V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct OrderedVisitor<V>(PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for OrderedVisitor<V> {
            type Value = Ordered<V>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a mapping")
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Ordered(Vec::new()))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut entries: Vec<(String, V)> = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, V>()? {
                    if entries.iter().any(|(k, _)| *k == key) {
                        return Err(de::Error::custom(format!("duplicate key `{key}`")));
                    }
                    entries.push((key, value));
                }
                Ok(Ordered(entries))
            }
        }
        deserializer.deserialize_any(OrderedVisitor(PhantomData))
    }
}

/// What the case runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// `Crew.kickoff` (or `kickoff_for_each`).
    #[default]
    Crew,
    /// `Agent.kickoff(messages)`.
    Agent,
    /// `agent.execute_task` per task (or `task.execute_sync` when the task has a guardrail).
    Task,
    /// A bare `LLM.call`.
    Llm,
    /// `crew.replay(task)` from stored task outputs.
    Replay,
    /// A Flow of agent and crew methods.
    Flow,
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Crew => "crew",
            Mode::Agent => "agent",
            Mode::Task => "task",
            Mode::Llm => "llm",
            Mode::Replay => "replay",
            Mode::Flow => "flow",
        })
    }
}

/// The API the cassette recorded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Provider {
    #[default]
    Openai,
    OpenaiResponses,
    Anthropic,
    Gemini,
    Azure,
}

/// The whole `case.yaml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub name: String,
    pub source: Option<String>,
    pub summary: Option<String>,
    pub difficulty: Option<String>,
    #[serde(default)]
    pub mode: Mode,
    #[serde(default)]
    pub provider: Provider,
    /// LLM fields (CrewAI names) of the default LLM.
    pub llm: Option<Map<String, Value>>,
    #[serde(default)]
    pub tools: Ordered<ToolSpec>,
    #[serde(default)]
    pub agents: Ordered<AgentSpec>,
    #[serde(default)]
    pub tasks: Vec<TaskSpec>,
    pub crew: Option<CrewSpec>,
    pub message: Option<MessageSpec>,
    pub inputs: Option<Map<String, Value>>,
    pub inputs_for_each: Option<Vec<Map<String, Value>>>,
    #[serde(default)]
    pub hooks: HooksSpec,
    pub flow: Option<FlowSpec>,
    pub replay: Option<ReplaySpec>,
    /// Mode agent: JSON schema of Agent.kickoff's response_format.
    pub response_format: Option<Value>,
    #[serde(default)]
    pub expect: Expect,
    pub notes: Option<String>,
}

/// A test tool.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    #[serde(default)]
    pub description: String,
    /// Argument name -> JSON type, in order.
    pub args: Option<Ordered<String>>,
    /// A full JSON schema (instead of `args`).
    pub schema: Option<Value>,
    pub behaviour: Behaviour,
    #[serde(default)]
    pub result_as_answer: bool,
    pub max_usage_count: Option<u32>,
    /// BaseTool's `cache` flag (absent: CrewAI's default, cached).
    pub cache: Option<bool>,
    pub cache_function: Option<CacheFunction>,
}

/// What a test tool does (`behaviour.kind`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Behaviour {
    Constant {
        value: Value,
    },
    Multiply,
    Add,
    Divide,
    Echo,
    Fail {
        message: String,
    },
    Sequence {
        values: Vec<Value>,
    },
    Counter,
    Format {
        template: String,
    },
    Sleep {
        seconds: f64,
        #[serde(default)]
        value: Value,
    },
    Lookup {
        arg: String,
        cases: Vec<LookupCase>,
        default: String,
    },
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LookupCase {
    pub contains: Vec<String>,
    pub value: Value,
}

/// `cache_function.kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum CacheFunction {
    EvenResult,
}

/// An agent, with CrewAI's field names.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSpec {
    pub role: String,
    #[serde(default)]
    pub goal: String,
    #[serde(default)]
    pub backstory: String,
    pub llm: Option<Map<String, Value>>,
    pub function_calling_llm: Option<Map<String, Value>>,
    #[serde(default)]
    pub tools: Vec<String>,
    pub allow_delegation: Option<bool>,
    pub max_iter: Option<u32>,
    pub max_rpm: Option<u32>,
    /// Seconds.
    pub max_execution_time: Option<f64>,
    pub max_retry_limit: Option<u32>,
    pub verbose: Option<bool>,
    pub cache: Option<bool>,
    pub use_system_prompt: Option<bool>,
    pub respect_context_window: Option<bool>,
    pub inject_date: Option<bool>,
    pub date_format: Option<String>,
    pub system_template: Option<String>,
    pub prompt_template: Option<String>,
    pub response_template: Option<String>,
    pub guardrail: Option<GuardrailSpec>,
    pub guardrail_max_retries: Option<u32>,
}

/// A task, with CrewAI's field names.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSpec {
    pub name: String,
    pub description: String,
    #[serde(default)]
    pub expected_output: String,
    pub agent: Option<String>,
    /// Names of earlier tasks; `[]` means no context at all.
    pub context: Option<Vec<String>>,
    /// Mode task: the `context` string passed to agent.execute_task.
    pub context_text: Option<String>,
    pub tools: Option<Vec<String>>,
    #[serde(default)]
    pub async_execution: bool,
    pub output_json: Option<Value>,
    pub output_pydantic: Option<Value>,
    pub output_file: Option<String>,
    pub create_directory: Option<bool>,
    #[serde(default)]
    pub markdown: bool,
    #[serde(default)]
    pub human_input: bool,
    pub guardrail: Option<GuardrailSpec>,
    #[serde(default)]
    pub guardrails: Vec<GuardrailSpec>,
    pub guardrail_max_retries: Option<u32>,
    pub condition: Option<ConditionSpec>,
}

impl TaskSpec {
    /// The guardrails in the order they apply (`guardrail` first, then `guardrails`).
    pub fn all_guardrails(&self) -> Vec<&GuardrailSpec> {
        self.guardrail
            .iter()
            .chain(self.guardrails.iter())
            .collect()
    }
}

/// A guardrail (`guardrail.kind`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum GuardrailSpec {
    Llm {
        description: String,
    },
    MaxWords {
        n: usize,
    },
    Contains {
        text: String,
    },
    ContainsAll {
        texts: Vec<String>,
    },
    AlwaysFail {
        #[serde(default = "default_guardrail_failure")]
        message: String,
    },
    AlwaysPass,
    Replace {
        value: Value,
    },
    FailThenPass {
        #[serde(default = "default_guardrail_failure")]
        message: String,
        #[serde(default = "one")]
        failures: u32,
    },
}

fn default_guardrail_failure() -> String {
    "The output did not pass the guardrail.".to_string()
}

fn one() -> u32 {
    1
}

/// A ConditionalTask's condition (`condition.kind`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ConditionSpec {
    Always { value: bool },
    PreviousContains { text: String },
}

/// Crew fields.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CrewSpec {
    pub name: Option<String>,
    pub process: Option<ProcessSpec>,
    pub manager_llm: Option<Map<String, Value>>,
    pub manager_agent: Option<String>,
    pub function_calling_llm: Option<Map<String, Value>>,
    pub cache: Option<bool>,
    pub max_rpm: Option<u32>,
    pub memory: Option<bool>,
    pub planning: Option<bool>,
    pub stream: Option<bool>,
    pub verbose: Option<bool>,
    /// Flow crews: the agents (names) and tasks (names) of this crew.
    pub agents: Option<Vec<String>>,
    pub tasks: Option<Vec<String>>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcessSpec {
    #[default]
    Sequential,
    Hierarchical,
}

/// What Agent.kickoff or LLM.call was given.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum MessageSpec {
    Text(String),
    Messages(Vec<MessageItem>),
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MessageItem {
    pub role: String,
    pub content: String,
}

/// The hook points a case can register.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookPoint {
    BeforeToolCall,
    AfterToolCall,
    BeforeLlmCall,
    AfterLlmCall,
}

impl fmt::Display for HookPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HookPoint::BeforeToolCall => "before_tool_call",
            HookPoint::AfterToolCall => "after_tool_call",
            HookPoint::BeforeLlmCall => "before_llm_call",
            HookPoint::AfterLlmCall => "after_llm_call",
        })
    }
}

/// Top-level `hooks:`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HooksSpec {
    pub before_tool_call: Option<HookSpec>,
    pub after_tool_call: Option<HookSpec>,
    pub before_llm_call: Option<HookSpec>,
    pub after_llm_call: Option<HookSpec>,
}

impl HooksSpec {
    pub fn is_empty(&self) -> bool {
        self.before_tool_call.is_none()
            && self.after_tool_call.is_none()
            && self.before_llm_call.is_none()
            && self.after_llm_call.is_none()
    }
}

/// A hook's behaviour (`kind`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum HookSpec {
    Record,
    Block { tools: Vec<String> },
    Prefix { text: String },
}

/// `mode: flow`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowSpec {
    pub methods: Vec<FlowMethod>,
    #[serde(default, rename = "async")]
    pub is_async: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowMethod {
    pub name: String,
    #[serde(default)]
    pub start: bool,
    pub listen: Option<String>,
    #[serde(default, rename = "async")]
    pub is_async: bool,
    pub agent: Option<String>,
    pub message: Option<MessageSpec>,
    pub crew: Option<CrewSpec>,
}

/// `mode: replay`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplaySpec {
    pub task: String,
    pub stored: Vec<StoredRow>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoredRow {
    pub task: String,
    /// TaskOutput fields.
    pub output: Map<String, Value>,
    #[serde(default)]
    pub inputs: Map<String, Value>,
}

/// `expect:`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    pub raw: Option<String>,
    #[serde(default)]
    pub raw_contains: Vec<String>,
    #[serde(default)]
    pub raw_matches: Vec<String>,
    pub json: Option<Value>,
    /// Absent: not checked; `null`: the final task has no JSON output.
    #[serde(default, deserialize_with = "present")]
    pub json_text: Option<Option<String>>,
    pub pydantic: Option<Value>,
    pub tasks_output: Option<TasksOutputExpect>,
    pub usage: Option<UsageExpect>,
    pub requests: Option<usize>,
    #[serde(default)]
    pub tool_calls: BTreeMap<String, usize>,
    pub error: Option<String>,
    #[serde(default)]
    pub allow_unmatched: bool,
    #[serde(default)]
    pub events: Vec<EventExpect>,
    #[serde(default)]
    pub event_counts: BTreeMap<String, usize>,
    #[serde(default)]
    pub hooks: BTreeMap<HookPoint, Vec<HookCallExpect>>,
    pub manager_tools: Option<Vec<ManagerToolExpect>>,
    #[serde(default)]
    pub files: BTreeMap<String, FileExpect>,
    pub result_type: Option<ResultType>,
    pub stream: Option<StreamExpect>,
}

/// Distinguishes `key: null` (Some(None)) from an absent key (None).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(deserializer).map(Some)
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum TasksOutputExpect {
    Count(usize),
    Each(Vec<TaskOutputExpect>),
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskOutputExpect {
    pub raw: Option<String>,
    #[serde(default)]
    pub raw_contains: Vec<String>,
    pub agent: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsageExpect {
    pub total_tokens: Option<u64>,
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    pub successful_requests: Option<u64>,
}

/// One item of `expect.events`: a name, or `{name: {field: value, parent: <name>}}`.
#[derive(Debug, Clone, PartialEq)]
pub struct EventExpect {
    pub name: String,
    pub fields: Map<String, Value>,
}

impl<'de> Deserialize<'de> for EventExpect {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            Name(String),
            Fields(BTreeMap<String, Option<Map<String, Value>>>),
        }
        match Form::deserialize(deserializer).map_err(|_| {
            de::Error::custom("an event is a name or a one-key mapping {name: {field: value}}")
        })? {
            Form::Name(name) => Ok(EventExpect {
                name,
                fields: Map::new(),
            }),
            Form::Fields(map) if map.len() == 1 => {
                let (name, fields) = map
                    .into_iter()
                    .next()
                    .ok_or_else(|| de::Error::custom("empty event item"))?;
                Ok(EventExpect {
                    name,
                    fields: fields.unwrap_or_default(),
                })
            }
            Form::Fields(map) => Err(de::Error::custom(format!(
                "an event item has exactly one name, this one has {}: {:?}",
                map.len(),
                map.keys().collect::<Vec<_>>()
            ))),
        }
    }
}

/// One item of `expect.hooks.<point>`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookCallExpect {
    pub tool_name: Option<String>,
    #[serde(default)]
    pub tool_input_keys: Vec<String>,
    pub tool_result_contains: Option<String>,
    pub agent_role: Option<String>,
    pub has_agent: Option<bool>,
    pub has_task: Option<bool>,
    pub has_crew: Option<bool>,
    pub has_llm: Option<bool>,
    pub min_messages: Option<usize>,
    pub has_response: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManagerToolExpect {
    pub name: Option<String>,
    pub description_contains: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileExpect {
    pub exists: Option<bool>,
    pub text: Option<String>,
    pub json: Option<Value>,
}

/// The Python type of the result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResultType {
    CrewOutput,
    AgentOutput,
    CrewStreamingOutput,
}

impl fmt::Display for ResultType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ResultType::CrewOutput => "crew_output",
            ResultType::AgentOutput => "agent_output",
            ResultType::CrewStreamingOutput => "crew_streaming_output",
        })
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamExpect {
    #[serde(default)]
    pub min_chunks: usize,
}

/// A case on disk: its folder, its parsed `case.yaml` and its cassette path.
#[derive(Debug, Clone)]
pub struct CaseDir {
    pub dir: PathBuf,
    pub case: Case,
    pub cassette: PathBuf,
}

impl Case {
    /// Parses case YAML; `origin` names the file in errors.
    pub fn parse(text: &str, origin: &Path) -> Result<Case, CaseError> {
        let case: Case = yaml_serde::from_str(text).map_err(|source| CaseError::Parse {
            path: origin.to_path_buf(),
            source,
        })?;
        case.validate().map_err(|message| CaseError::Invalid {
            path: origin.to_path_buf(),
            message,
        })?;
        Ok(case)
    }

    /// Cross-references: every named agent, tool, task and method exists.
    fn validate(&self) -> Result<(), String> {
        let tool = |name: &String, whose: &str| known(&self.tools, "tool", name, whose);
        let agent = |name: &String, whose: &str| known(&self.agents, "agent", name, whose);
        for (name, spec) in self.agents.iter() {
            for t in &spec.tools {
                tool(t, &format!("agent `{name}`"))?;
            }
        }
        for (i, task) in self.tasks.iter().enumerate() {
            let whose = format!("task `{}`", task.name);
            if let Some(a) = &task.agent {
                agent(a, &whose)?;
            }
            for t in task.tools.iter().flatten() {
                tool(t, &whose)?;
            }
            for c in task.context.iter().flatten() {
                if !self.tasks[..i].iter().any(|t| &t.name == c) {
                    return Err(format!(
                        "{whose} has context `{c}`, which is not an earlier task"
                    ));
                }
            }
        }
        if let Some(crew) = &self.crew
            && let Some(m) = &crew.manager_agent
        {
            agent(m, "crew.manager_agent")?;
        }
        if let Some(flow) = &self.flow {
            for method in &flow.methods {
                let whose = format!("flow method `{}`", method.name);
                if let Some(a) = &method.agent {
                    agent(a, &whose)?;
                }
                if let Some(l) = &method.listen
                    && !flow.methods.iter().any(|m| &m.name == l)
                {
                    return Err(format!("{whose} listens to `{l}`, which is not a method"));
                }
                if let Some(crew) = &method.crew {
                    for a in crew.agents.iter().flatten() {
                        agent(a, &whose)?;
                    }
                    for t in crew.tasks.iter().flatten() {
                        if !self.tasks.iter().any(|task| &task.name == t) {
                            return Err(format!(
                                "{whose} names task `{t}`, which is not under `tasks:`"
                            ));
                        }
                    }
                }
            }
        }
        if let Some(replay) = &self.replay
            && !self.tasks.iter().any(|t| t.name == replay.task)
        {
            return Err(format!(
                "replay.task `{}` is not under `tasks:`",
                replay.task
            ));
        }
        for pattern in &self.expect.raw_matches {
            regex::Regex::new(pattern)
                .map_err(|e| format!("expect.raw_matches `{pattern}` is not a valid regex: {e}"))?;
        }
        Ok(())
    }
}

impl CaseDir {
    /// Loads `dir/case.yaml` and checks that `dir/cassette.yaml` exists.
    pub fn load(dir: &Path) -> Result<CaseDir, CaseError> {
        let path = dir.join("case.yaml");
        let text = std::fs::read_to_string(&path).map_err(|source| CaseError::Read {
            path: path.clone(),
            source,
        })?;
        let case = Case::parse(&text, &path)?;
        let cassette = dir.join("cassette.yaml");
        if !cassette.is_file() {
            return Err(CaseError::Invalid {
                path: cassette,
                message: "missing: every case needs its cassette".into(),
            });
        }
        Ok(CaseDir {
            dir: dir.to_path_buf(),
            case,
            cassette,
        })
    }
}

/// Whether the `kind` named `name` by `whose` is under `<kind>s:`, saying which are if not.
fn known<V>(entries: &Ordered<V>, kind: &str, name: &str, whose: &str) -> Result<(), String> {
    if entries.get(name).is_some() {
        return Ok(());
    }
    Err(format!(
        "{whose} names {kind} `{name}`, which is not under `{kind}s:` (known: {:?})",
        entries.keys().collect::<Vec<_>>()
    ))
}

/// The case folders under `root` (folders holding a `case.yaml`), sorted by name.
pub fn discover(root: &Path) -> Result<Vec<PathBuf>, CaseError> {
    let entries = std::fs::read_dir(root).map_err(|source| CaseError::Read {
        path: root.to_path_buf(),
        source,
    })?;
    let mut dirs = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| CaseError::Read {
            path: root.to_path_buf(),
            source,
        })?;
        let path = entry.path();
        if path.join("case.yaml").is_file() {
            dirs.push(path);
        }
    }
    dirs.sort();
    Ok(dirs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Case, CaseError> {
        Case::parse(text, Path::new("case.yaml"))
    }

    #[test]
    fn parses_a_full_case() {
        let case = parse(
            r#"
name: demo
mode: crew
llm: {model: gpt-4o}
tools:
  multiplier:
    description: Multiplies.
    args: {first_number: integer, second_number: integer}
    behaviour: {kind: multiply}
    cache_function: {kind: even_result}
agents:
  zed: {role: Z, goal: g, backstory: b, tools: [multiplier]}
  alpha: {role: A, goal: g, backstory: b, guardrail: {kind: fail_then_pass, message: no}}
tasks:
  - {name: one, description: d, expected_output: e, agent: zed, guardrail: {kind: max_words, n: 3}}
  - {name: two, description: d, expected_output: e, context: [one], condition: {kind: previous_contains, text: x}}
expect:
  json_text: null
  events: [crew_kickoff_started, {task_started: {parent: crew_kickoff_started}}]
  hooks: {before_tool_call: [{tool_name: multiplier, tool_input_keys: [a]}]}
  tasks_output: [{raw: x}, {}]
"#,
        )
        .unwrap();
        assert_eq!(
            case.agents.keys().cloned().collect::<Vec<_>>(),
            vec!["zed", "alpha"]
        );
        assert_eq!(case.expect.json_text, Some(None));
        assert_eq!(case.expect.events[1].name, "task_started");
        assert_eq!(
            case.expect.events[1].fields["parent"],
            "crew_kickoff_started"
        );
        assert!(matches!(
            case.agents.get("alpha").unwrap().guardrail,
            Some(GuardrailSpec::FailThenPass { failures: 1, .. })
        ));
        assert!(
            matches!(case.expect.tasks_output, Some(TasksOutputExpect::Each(ref items)) if items.len() == 2)
        );
        assert_eq!(
            case.tools.get("multiplier").unwrap().cache_function,
            Some(CacheFunction::EvenResult)
        );
    }

    #[test]
    fn absent_json_text_is_not_null_json_text() {
        assert_eq!(parse("name: x\n").unwrap().expect.json_text, None);
        assert_eq!(
            parse("name: x\nexpect: {json_text: '{\"a\": 1}'}\n")
                .unwrap()
                .expect
                .json_text,
            Some(Some("{\"a\": 1}".into()))
        );
    }

    #[test]
    fn rejects_unknown_keys_with_location() {
        let error = crewai_llm::error_chain(&parse("name: x\nexpect:\n  raww: y\n").unwrap_err());
        assert!(error.contains("unknown field `raww`"), "{error}");
        assert!(error.contains("line 3"), "{error}");
        let error = crewai_llm::error_chain(
            &parse("name: x\ntools:\n  t: {behaviour: {kind: explode}}\n").unwrap_err(),
        );
        assert!(error.contains("explode"), "{error}");
    }

    #[test]
    fn rejects_dangling_names() {
        let error = parse("name: x\ntasks: [{name: t, description: d, agent: ghost}]\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("agent `ghost`"), "{error}");
        let error = parse("name: x\nagents: {a: {role: r, tools: [nope]}}\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("tool `nope`"), "{error}");
    }
}
