//! [`Task`]: one piece of work for an agent, with CrewAI's fields and defaults.
//!
//! A task is a specification: running it (in a crew, or alone with [`Task::execute`]) never
//! changes it, so one `Task` can be shared by many kickoffs at once.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use crewai_tools::{ToolFailurePolicy, ToolHandle};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;
use uuid::Uuid;

use crate::agent::Agent;
use crate::converter::{ConversionError, OutputSchema};
use crate::error::AgentError;
use crate::guardrail::{Guardrail, GuardrailError};
use crate::interpolate::{Filler, Inputs, InterpolationError};
use crate::output::{OutputFormat, TaskOutput};
use crate::prompts;

/// Called with every output of the task (CrewAI's `callback`).
pub type TaskCallback = Arc<dyn Fn(&TaskOutput) + Send + Sync>;
/// Decides from the previous task's output whether a conditional task runs.
pub type Condition = Arc<dyn Fn(&TaskOutput) -> bool + Send + Sync>;

/// Which earlier outputs a task sees (CrewAI's `context`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum TaskContext {
    /// Every earlier task's output (CrewAI's default, `NOT_SPECIFIED`).
    #[default]
    AllPrevious,
    /// No context (`context: []`).
    None,
    /// The outputs of these earlier tasks, by name (or id).
    Tasks(Vec<String>),
}

/// Asks a human for feedback on a task's answer (`human_input: true`).
#[async_trait]
pub trait InputProvider: Send + Sync {
    /// Shows `prompt` and returns the reply; an empty reply accepts the answer.
    async fn ask(&self, prompt: &str) -> Result<String, std::io::Error>;
}

/// Reads feedback from the terminal (the default [`InputProvider`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct ConsoleInputProvider;

#[async_trait]
impl InputProvider for ConsoleInputProvider {
    async fn ask(&self, prompt: &str) -> Result<String, std::io::Error> {
        let prompt = prompt.to_string();
        tokio::task::spawn_blocking(move || {
            use std::io::Write;
            let mut out = std::io::stderr();
            write!(out, "{prompt}")?;
            out.flush()?;
            let mut line = String::new();
            std::io::stdin().read_line(&mut line)?;
            Ok(line.trim().to_string())
        })
        .await
        .map_err(std::io::Error::other)?
    }
}

/// Everything that can go wrong building or running a task. A variant that wraps another error
/// keeps it as its source (show the chain with [`crewai_llm::error_chain`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TaskError {
    #[error("task '{task}' is misconfigured: {message}")]
    Config { task: String, message: String },
    #[error(
        "task '{task}' has no agent: give it one with `.agent(..)`, or run it in a hierarchical crew"
    )]
    NoAgent { task: String },
    #[error("task '{task}' failed")]
    Agent {
        task: String,
        source: Box<AgentError>,
    },
    #[error(
        "task '{task}' (agent '{agent}') timed out after {}s; raise the agent's max_execution_time or the crew's task_timeout, or make the task smaller",
        .after.as_secs_f64()
    )]
    Timeout {
        task: String,
        agent: String,
        after: Duration,
    },
    /// The text starts the way CrewAI's does.
    #[error(
        "Task failed guardrail validation after {retries} retries. Last error: {last_error} (task '{task}', {guardrail})"
    )]
    GuardrailFailed {
        task: String,
        guardrail: String,
        retries: u32,
        last_error: String,
    },
    #[error("task '{task}': the guardrail could not be evaluated")]
    Guardrail {
        task: String,
        source: Box<GuardrailError>,
    },
    /// The answer (kept in `raw`) could not be made into the task's structured output.
    #[error("task '{task}': structured output failed")]
    Conversion {
        task: String,
        source: Box<ConversionError>,
        raw: String,
    },
    #[error("task '{task}': could not write output_file {}", .path.display())]
    OutputFile {
        task: String,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("task '{task}': asking for human feedback failed")]
    HumanInput {
        task: String,
        source: std::io::Error,
    },
    /// A consensual crew's voters or judge gave no usable decision.
    #[error("task '{task}': the consensus could not be decided")]
    Consensus {
        task: String,
        source: Box<crate::consensus::ConsensusError>,
    },
    #[error("task '{task}': the training iteration could not be kept")]
    TrainingLog {
        task: String,
        source: crate::store::StoreError,
    },
    #[error(transparent)]
    Interpolation(#[from] InterpolationError),
}

/// One piece of work (CrewAI's `Task`, and `ConditionalTask` when it has a condition).
///
/// ```
/// use crewai_core::task::{Task, TaskContext};
/// let research = Task::builder()
///     .name("research")
///     .description("Find three facts about {topic}")
///     .expected_output("Three bullet points")
///     .build()
///     .unwrap();
/// let report = Task::builder()
///     .name("report")
///     .description("Write a paragraph from the facts")
///     .expected_output("One paragraph")
///     .context(["research"])
///     .output_file("out/{topic}.md")
///     .build()
///     .unwrap();
/// assert_eq!(research.context(), &TaskContext::AllPrevious);
/// assert_eq!(report.context(), &TaskContext::Tasks(vec!["research".into()]));
/// assert!(report.prompt().starts_with("Write a paragraph from the facts"));
/// ```
#[derive(Clone)]
pub struct Task {
    id: Uuid,
    name: Option<String>,
    description: String,
    expected_output: String,
    agent: Option<Agent>,
    context: TaskContext,
    tools: Vec<ToolHandle>,
    async_execution: bool,
    output_schema: Option<OutputSchema>,
    output_file: Option<String>,
    create_directory: bool,
    markdown: bool,
    callback: Option<TaskCallback>,
    human_input: bool,
    guardrails: Vec<Guardrail>,
    guardrail_max_retries: u32,
    tool_failure_policy: Option<ToolFailurePolicy>,
    condition: Option<Condition>,
}

impl fmt::Debug for Task {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Task")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("description", &self.description)
            .field("agent", &self.agent.as_ref().map(|a| a.role().to_string()))
            .field("context", &self.context)
            .field("async_execution", &self.async_execution)
            .field("output_schema", &self.output_schema)
            .field("output_file", &self.output_file)
            .field("guardrails", &self.guardrails.len())
            .field("conditional", &self.condition.is_some())
            .finish()
    }
}

impl Task {
    pub fn builder() -> TaskBuilder {
        TaskBuilder::default()
    }

    /// A unique id, fixed at build time (replay accepts it or the name).
    pub fn id(&self) -> Uuid {
        self.id
    }
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }
    /// The name, or else the start of the description: how errors and events refer to the task.
    pub fn key(&self) -> String {
        self.name
            .clone()
            .unwrap_or_else(|| crate::output::summarize_description(&self.description))
    }
    pub fn description(&self) -> &str {
        &self.description
    }
    pub fn expected_output(&self) -> &str {
        &self.expected_output
    }
    pub fn agent(&self) -> Option<&Agent> {
        self.agent.as_ref()
    }
    pub fn context(&self) -> &TaskContext {
        &self.context
    }
    /// The task's own tools (they replace the agent's when not empty).
    pub fn tools(&self) -> &[ToolHandle] {
        &self.tools
    }
    pub fn is_async(&self) -> bool {
        self.async_execution
    }
    pub fn output_schema(&self) -> Option<&OutputSchema> {
        self.output_schema.as_ref()
    }
    /// The output format a result of this task has.
    pub fn output_format(&self) -> OutputFormat {
        self.output_schema
            .as_ref()
            .map(OutputSchema::format)
            .unwrap_or_default()
    }
    pub fn output_file(&self) -> Option<&str> {
        self.output_file.as_deref()
    }
    pub fn create_directory(&self) -> bool {
        self.create_directory
    }
    pub fn markdown(&self) -> bool {
        self.markdown
    }
    pub fn callback(&self) -> Option<&TaskCallback> {
        self.callback.as_ref()
    }
    pub fn human_input(&self) -> bool {
        self.human_input
    }
    pub fn guardrails(&self) -> &[Guardrail] {
        &self.guardrails
    }
    pub fn guardrail_max_retries(&self) -> u32 {
        self.guardrail_max_retries
    }
    /// The task's own tool failure policy; it wins over the agent's and the crew's.
    pub fn tool_failure_policy(&self) -> Option<ToolFailurePolicy> {
        self.tool_failure_policy
    }
    /// The condition of a conditional task.
    pub fn condition(&self) -> Option<&Condition> {
        self.condition.as_ref()
    }
    pub fn is_conditional(&self) -> bool {
        self.condition.is_some()
    }

    /// Whether `reference` (a name or an id) names this task.
    pub fn is_called(&self, reference: &str) -> bool {
        self.name.as_deref() == Some(reference) || self.id.to_string() == reference
    }

    /// CrewAI's `Task.prompt()`: the description, the expected output, the Markdown instructions
    /// and the description of the output schema.
    pub fn prompt(&self) -> String {
        let mut prompt = prompts::agent::task_prompt(&self.description, &self.expected_output);
        if self.markdown {
            prompt.push('\n');
            prompt.push_str(prompts::agent::MARKDOWN_INSTRUCTIONS);
        }
        if let Some(schema) = &self.output_schema {
            prompt.push('\n');
            prompt.push_str(&prompts::crew::structured_output_instructions(
                &schema.pretty(),
            ));
        }
        prompt
    }

    /// A copy with the crew planner's `plan` appended to the description (for one run).
    pub(crate) fn with_plan(&self, plan: &str) -> Task {
        let mut task = self.clone();
        task.description = prompts::planning::description_with_plan(&self.description, plan);
        task
    }

    /// A copy that asks for human feedback or not (training asks on every task).
    pub(crate) fn with_human_input(&self, human_input: bool) -> Task {
        let mut task = self.clone();
        task.human_input = human_input;
        task
    }

    /// A copy with a different agent.
    pub fn with_agent(&self, agent: Agent) -> Task {
        let mut task = self.clone();
        task.agent = Some(agent);
        task
    }

    /// A copy with `inputs` interpolated into the description, expected output and output file.
    /// Empty inputs change nothing. A `crew_chat_messages` input (the conversation of a chat
    /// that started the kickoff) is appended to the description, as CrewAI does.
    pub fn interpolated(&self, inputs: &Inputs) -> Result<Task, InterpolationError> {
        if inputs.is_empty() {
            return Ok(self.clone());
        }
        let fill = Filler::new(inputs, format!("task '{}'", self.key()));
        let mut task = self.clone();
        task.description = fill.field(&self.description, "description")?;
        task.expected_output = fill.field(&self.expected_output, "expected_output")?;
        if let Some(file) = &self.output_file {
            task.output_file = Some(fill.field(file, "output_file")?);
        }
        if let Some(turns) = crate::interpolate::chat_turns(inputs) {
            task.description
                .push_str(&crate::prompts::crew::chat_history_block(&turns));
        }
        Ok(task)
    }

    /// Runs the task alone with `agent` (or its own), guardrails and output file included
    /// (CrewAI's `task.execute_sync`). Events go to the agent's event bus, when it has one.
    pub async fn execute(&self, agent: Option<&Agent>) -> Result<TaskOutput, TaskError> {
        self.execute_with(agent, None, None).await
    }

    /// [`Task::execute`] with a context text (earlier results) and tools replacing the task's
    /// and the agent's.
    pub async fn execute_with(
        &self,
        agent: Option<&Agent>,
        context: Option<&str>,
        tools: Option<Vec<ToolHandle>>,
    ) -> Result<TaskOutput, TaskError> {
        let agent = agent
            .or(self.agent.as_ref())
            .cloned()
            .ok_or_else(|| TaskError::NoAgent { task: self.key() })?;
        let mut run = crate::process::RunContext::standalone();
        if let Some(bus) = agent.event_bus() {
            run.services.events = bus.clone();
        }
        let tools = tools.unwrap_or_else(|| {
            if self.tools.is_empty() {
                agent.tools().to_vec()
            } else {
                self.tools.clone()
            }
        });
        crate::process::execute_task(&run, self, &agent, context.map(str::to_string), tools, None)
            .await
    }
}

/// A task for unit tests: named `name`, with a placeholder description and expected output and
/// no agent, set up further by `more`.
#[cfg(test)]
pub(crate) fn test_task(name: &str, more: impl FnOnce(TaskBuilder) -> TaskBuilder) -> Task {
    more(
        Task::builder()
            .name(name)
            .description("d")
            .expected_output("e"),
    )
    .build()
    .expect("a valid test task")
}

/// Builds a [`Task`].
#[derive(Default)]
pub struct TaskBuilder {
    name: Option<String>,
    description: Option<String>,
    expected_output: Option<String>,
    agent: Option<Agent>,
    context: TaskContext,
    tools: Vec<ToolHandle>,
    async_execution: bool,
    output_json: Option<Value>,
    output_pydantic: Option<OutputSchema>,
    output_file: Option<String>,
    create_directory: Option<bool>,
    markdown: bool,
    callback: Option<TaskCallback>,
    human_input: bool,
    guardrail: Option<Guardrail>,
    guardrails: Vec<Guardrail>,
    guardrail_max_retries: Option<u32>,
    tool_failure_policy: Option<ToolFailurePolicy>,
    condition: Option<Condition>,
}

impl TaskBuilder {
    setters! {
        pub fn name(name: impl Into<String>) => name = Some(name.into());
        pub fn description(description: impl Into<String>)
            => description = Some(description.into());
        pub fn expected_output(expected_output: impl Into<String>)
            => expected_output = Some(expected_output.into());
        pub fn agent(agent: Agent) => agent = Some(agent);
        /// Tools for this task, used instead of the agent's.
        pub fn tools(tools: Vec<ToolHandle>) => tools = tools;
        pub fn async_execution(async_execution: bool) => async_execution = async_execution;
        /// The result must be a JSON object following `schema`; it lands in `json_dict`.
        pub fn output_json(schema: Value) => output_json = Some(schema);
        /// The result must follow `schema`; it lands in `pydantic` (the typed value).
        pub fn output_pydantic(schema: Value)
            => output_pydantic = Some(OutputSchema::pydantic(schema));
        /// Writes the result to this file (placeholders allowed; directories are created).
        pub fn output_file(path: impl AsRef<std::path::Path>)
            => output_file = Some(path.as_ref().to_string_lossy().into_owned());
        /// Whether missing directories of `output_file` are created (default true).
        pub fn create_directory(create: bool) => create_directory = Some(create);
        pub fn markdown(markdown: bool) => markdown = markdown;
        pub fn callback(callback: impl Fn(&TaskOutput) + Send + Sync + 'static)
            => callback = Some(Arc::new(callback));
        pub fn human_input(human_input: bool) => human_input = human_input;
        /// One guardrail (ignored when `guardrails` is also given, as CrewAI).
        pub fn guardrail(guardrail: Guardrail) => guardrail = Some(guardrail);
        /// Guardrails applied in order.
        pub fn guardrails(guardrails: Vec<Guardrail>) => guardrails = guardrails;
        /// Retries after a failed guardrail (default 3).
        pub fn guardrail_max_retries(retries: u32) => guardrail_max_retries = Some(retries);
        /// What a failing tool does while the agent works on this task (`raise` fails the task,
        /// `warn` and `ignore` tell the model); wins over the agent's and the crew's policy.
        pub fn tool_failure_policy(policy: ToolFailurePolicy)
            => tool_failure_policy = Some(policy);
        /// Makes this a conditional task: it runs only when `condition` accepts the previous
        /// output.
        pub fn condition(condition: impl Fn(&TaskOutput) -> bool + Send + Sync + 'static)
            => condition = Some(Arc::new(condition));
    }
    /// The outputs of these earlier tasks (by name) become this task's context.
    pub fn context<S: Into<String>>(mut self, tasks: impl IntoIterator<Item = S>) -> Self {
        self.context = TaskContext::Tasks(tasks.into_iter().map(Into::into).collect());
        self
    }
    /// No context at all (CrewAI's `context=[]`).
    pub fn context_none(mut self) -> Self {
        self.context = TaskContext::None;
        self
    }
    /// The result must be a `T`; read it with `TaskOutput::typed::<T>()`.
    pub fn output<T: JsonSchema + DeserializeOwned + 'static>(mut self) -> Self {
        self.output_pydantic = Some(OutputSchema::of::<T>());
        self
    }

    pub fn build(self) -> Result<Task, TaskError> {
        let label = self.name.clone().unwrap_or_else(|| {
            self.description
                .as_deref()
                .map(crate::output::summarize_description)
                .unwrap_or_else(|| "unnamed".into())
        });
        let config = |message: &str| TaskError::Config {
            task: label.clone(),
            message: message.to_string(),
        };
        let description =
            crate::setters::required(self.description, "description").map_err(|m| config(&m))?;
        let expected_output = crate::setters::required(self.expected_output, "expected_output")
            .map_err(|m| config(&m))?;
        let output_schema = match (self.output_json, self.output_pydantic) {
            (Some(_), Some(_)) => {
                return Err(config(
                    "only one output type can be set: choose output_json or output_pydantic",
                ));
            }
            (Some(schema), None) => Some(OutputSchema::json(schema)),
            (None, pydantic) => pydantic,
        };
        if let Some(schema) = &output_schema {
            schema
                .check_schema()
                .map_err(|e| config(&crewai_llm::error_chain(&e)))?;
        }
        if let Some(file) = &self.output_file {
            validate_output_file(file).map_err(|m| config(&m))?;
        }
        if self.condition.is_some() && self.async_execution {
            return Err(config("a conditional task cannot run asynchronously"));
        }
        let guardrails = if self.guardrails.is_empty() {
            self.guardrail.into_iter().collect()
        } else {
            self.guardrails
        };
        Ok(Task {
            id: Uuid::new_v4(),
            name: self.name,
            description,
            expected_output,
            agent: self.agent,
            context: self.context,
            tools: self.tools,
            async_execution: self.async_execution,
            output_schema,
            output_file: self.output_file,
            create_directory: self.create_directory.unwrap_or(true),
            markdown: self.markdown,
            callback: self.callback,
            human_input: self.human_input,
            guardrails,
            guardrail_max_retries: self.guardrail_max_retries.unwrap_or(3),
            tool_failure_policy: self.tool_failure_policy,
            condition: self.condition,
        })
    }
}

/// CrewAI's output_file rules: no `..`, no shell expansion (`~`, `$` at the start), no shell
/// operators. Unlike CrewAI, an absolute path stays absolute.
fn validate_output_file(path: &str) -> Result<(), String> {
    if path.trim().is_empty() {
        return Err("output_file is empty".into());
    }
    if path.split(['/', '\\']).any(|part| part == "..") {
        return Err(format!("output_file '{path}' must not contain '..'"));
    }
    if path.starts_with('~') || path.starts_with('$') {
        return Err(format!(
            "output_file '{path}' must not start with '~' or '$': shell expansion is not performed"
        ));
    }
    if let Some(c) = path
        .chars()
        .find(|c| matches!(c, '|' | '>' | '<' | '&' | ';'))
    {
        return Err(format!(
            "output_file '{path}' must not contain the shell character '{c}'"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn base() -> TaskBuilder {
        Task::builder()
            .name("t")
            .description("Say hi about {topic}")
            .expected_output("A greeting")
    }

    #[test]
    fn a_chat_conversation_in_the_inputs_is_appended_to_the_description() {
        let task = base().build().unwrap();
        let conversation = json!([
            {"role": "user", "content": "I want something on rust"},
            {"role": "assistant", "content": "Running it on rust."}
        ]);
        for given in [
            conversation.clone(),
            Value::String(conversation.to_string()),
        ] {
            let mut inputs = Inputs::new();
            inputs.insert("topic".into(), json!("rust"));
            inputs.insert(crate::interpolate::CHAT_MESSAGES_INPUT.into(), given);
            let filled = task.interpolated(&inputs).unwrap();
            assert!(
                filled.description.starts_with("Say hi about rust"),
                "{}",
                filled.description
            );
            assert!(
                filled
                    .description
                    .contains("\nuser: I want something on rust\nassistant: Running it on rust."),
                "{}",
                filled.description
            );
        }
        // Without it, nothing is added; text that is not a list still reaches the task.
        let mut inputs = Inputs::new();
        inputs.insert("topic".into(), json!("rust"));
        assert_eq!(
            task.interpolated(&inputs).unwrap().description,
            "Say hi about rust"
        );
        inputs.insert(
            crate::interpolate::CHAT_MESSAGES_INPUT.into(),
            json!("we spoke of rust"),
        );
        assert!(
            task.interpolated(&inputs)
                .unwrap()
                .description
                .ends_with("conversation: we spoke of rust")
        );
    }

    #[test]
    fn required_fields_and_exclusive_outputs() {
        assert!(Task::builder().description("d").build().is_err());
        let err = base()
            .output_json(json!({"type": "object"}))
            .output_pydantic(json!({"type": "object"}))
            .build()
            .unwrap_err();
        assert!(err.to_string().contains("only one output type"), "{err}");
    }

    #[test]
    fn output_file_rules() {
        for bad in ["../x.txt", "~/x", "$HOME/x", "a|b", "a;b"] {
            assert!(base().output_file(bad).build().is_err(), "{bad} accepted");
        }
        assert!(base().output_file("/tmp/out/{topic}.md").build().is_ok());
    }

    #[test]
    fn conditional_tasks_cannot_be_async() {
        assert!(
            base()
                .condition(|_| true)
                .async_execution(true)
                .build()
                .is_err()
        );
    }

    #[test]
    fn interpolation_covers_output_file_and_names_the_task() {
        let task = base().output_file("out/{topic}.md").build().unwrap();
        let inputs: Inputs = [("topic".to_string(), json!("AI"))].into();
        let done = task.interpolated(&inputs).unwrap();
        assert_eq!(done.description(), "Say hi about AI");
        assert_eq!(done.output_file(), Some("out/AI.md"));
        let other: Inputs = [("x".to_string(), json!(1))].into();
        let err = task.interpolated(&other).unwrap_err().to_string();
        assert!(
            err.contains("task 't' description") && err.contains("{topic}"),
            "{err}"
        );
        assert_eq!(
            task.interpolated(&Inputs::new()).unwrap().description(),
            "Say hi about {topic}"
        );
    }

    #[test]
    fn prompt_describes_schema_and_markdown() {
        let task = base()
            .markdown(true)
            .output_json(json!({"type": "object", "properties": {"score": {"type": "integer"}}}))
            .build()
            .unwrap();
        let prompt = task.prompt();
        assert!(
            prompt.contains("A greeting")
                && prompt.contains("\"score\"")
                && prompt.contains("Markdown"),
            "{prompt}"
        );
        assert_eq!(task.output_format(), OutputFormat::Json);
    }
}
