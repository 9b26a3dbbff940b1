//! [`ToolHandle`]: a tool plus the per-use settings CrewAI keeps on its tool objects.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use crewai_llm::ToolDefinition;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::args::{ArgumentError, prepare_arguments};
use crate::name::sanitize_tool_name;
use crate::schema::strict_parameters;
use crate::tool::{Tool, ToolContext, ToolError, ToolOutput};

/// Decides per call whether a result may be cached (CrewAI's `cache_function`).
pub type CacheFunction = Arc<dyn Fn(&Value, &ToolOutput) -> bool + Send + Sync>;

/// A tool as an agent holds it: the shared tool, its sanitised name, `result_as_answer`,
/// the usage limit with its counter, and the cache decision.
///
/// Clones are cheap and share the usage counter, like CrewAI's tool objects shared by agents.
/// Settings declared by the tool itself ([`Tool::result_as_answer`], [`Tool::max_usage_count`])
/// are the defaults; the `with_*` builders override them.
///
/// ```
/// use crewai_tools::{ToolHandle, DynamicTool, ToolOutput};
/// use serde_json::json;
///
/// let echo = DynamicTool::new(
///     "Echo Tool",
///     "Repeats its input.",
///     json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
///     |args, _ctx| async move { Ok(ToolOutput::Text(args["text"].as_str().unwrap_or_default().into())) },
/// );
/// let handle = ToolHandle::from_tool(echo).with_max_usage_count(1);
/// assert_eq!(handle.name(), "echo_tool");
/// assert!(handle.try_claim_use().is_ok());
/// assert!(handle.try_claim_use().is_err());
/// ```
#[derive(Clone)]
pub struct ToolHandle {
    tool: Arc<dyn Tool>,
    name: String,
    result_as_answer: bool,
    max_usage_count: Option<u32>,
    usage_count: Arc<AtomicU32>,
    cache_function: Option<CacheFunction>,
    failure_policy: Option<ToolFailurePolicy>,
}

impl ToolHandle {
    /// Wraps a shared tool, taking `result_as_answer` and `max_usage_count` from the tool.
    pub fn new(tool: Arc<dyn Tool>) -> Self {
        ToolHandle {
            name: sanitize_tool_name(tool.name()),
            result_as_answer: tool.result_as_answer(),
            max_usage_count: tool.max_usage_count(),
            usage_count: Arc::new(AtomicU32::new(0)),
            cache_function: None,
            failure_policy: None,
            tool,
        }
    }

    /// Wraps a tool value.
    pub fn from_tool(tool: impl Tool + 'static) -> Self {
        ToolHandle::new(Arc::new(tool))
    }

    crewai_llm::setters! {
        /// When true, the tool's output ends the agent's run and becomes its final answer.
        pub fn with_result_as_answer(result_as_answer: bool) => result_as_answer = result_as_answer;
        /// Limits how often the tool may run (per handle and its clones). `0` forbids every use.
        pub fn with_max_usage_count(max_usage_count: u32) => max_usage_count = Some(max_usage_count);
        /// What happens when this tool fails, overriding the agent's and crew's policy.
        pub fn with_failure_policy(failure_policy: ToolFailurePolicy) => failure_policy = Some(failure_policy);
    }

    /// Decides per call whether a result may be stored in the crew's [`crate::ToolCache`].
    pub fn with_cache_function(
        mut self,
        cache_function: impl Fn(&Value, &ToolOutput) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.cache_function = Some(Arc::new(cache_function));
        self
    }

    /// The tool's own failure policy, if it has one (else the agent's, then the crew's apply).
    pub fn failure_policy(&self) -> Option<ToolFailurePolicy> {
        self.failure_policy
    }

    /// The same tool under another name (a [`crate::ToolSet`] gives a tool whose name collides
    /// with a different tool's a numeric suffix). Clones share the usage counter still.
    pub(crate) fn renamed(mut self, name: String) -> Self {
        self.name = name;
        self
    }

    /// The sanitised name the model calls the tool by.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The name as the tool's author wrote it.
    pub fn original_name(&self) -> &str {
        self.tool.name()
    }

    /// The description as authored.
    pub fn description(&self) -> &str {
        self.tool.description()
    }

    /// The tool's own argument schema (before the strict shaping of [`ToolHandle::definition`]).
    pub fn parameters(&self) -> Value {
        self.tool.parameters()
    }

    /// The function definition sent to providers, in CrewAI's native (strict) form.
    pub fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: self.name.clone(),
            description: self.tool.description().to_string(),
            parameters: strict_parameters(&self.tool.parameters()),
            strict: true,
        }
    }

    /// The definition a provider that constrains its decoding holds the model to: like
    /// [`ToolHandle::definition`], with [`Tool::decoding_parameters`] as the schema.
    pub fn decoding_definition(&self) -> ToolDefinition {
        ToolDefinition {
            parameters: strict_parameters(&self.tool.decoding_parameters()),
            ..self.definition()
        }
    }

    pub fn result_as_answer(&self) -> bool {
        self.result_as_answer
    }

    pub fn max_usage_count(&self) -> Option<u32> {
        self.max_usage_count
    }

    /// How many uses have been claimed so far.
    pub fn current_usage_count(&self) -> u32 {
        self.usage_count.load(Ordering::SeqCst)
    }

    /// Sets the usage counter back to zero.
    pub fn reset_usage_count(&self) {
        self.usage_count.store(0, Ordering::SeqCst);
    }

    /// Claims one use, atomically; fails once the limit is reached (concurrent calls never
    /// overshoot it).
    pub fn try_claim_use(&self) -> Result<(), UsageLimitReached> {
        let Some(limit) = self.max_usage_count else {
            self.usage_count.fetch_add(1, Ordering::SeqCst);
            return Ok(());
        };
        self.usage_count
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |used| {
                (used < limit).then(|| used + 1)
            })
            .map(|_| ())
            .map_err(|_| UsageLimitReached {
                tool: self.name.clone(),
                limit,
            })
    }

    /// Whether this result may be cached: the handle's cache function, else the tool's own
    /// [`Tool::cache_result`].
    pub fn should_cache(&self, args: &Value, output: &ToolOutput) -> bool {
        match &self.cache_function {
            Some(decide) => decide(args, output),
            None => self.tool.cache_result(args, output),
        }
    }

    /// Turns a model's raw arguments into valid ones for this tool (see [`prepare_arguments`]).
    pub fn prepare_arguments(&self, raw: &Value) -> Result<Value, ArgumentError> {
        prepare_arguments(&self.tool.parameters(), raw)
    }

    /// Runs the tool with prepared arguments. Usage limits, caching and hooks are the caller's
    /// (the executor's) business; this is the bare call.
    pub async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.tool.run(args, ctx).await
    }

    /// The tool itself.
    pub fn tool(&self) -> &Arc<dyn Tool> {
        &self.tool
    }
}

impl fmt::Debug for ToolHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolHandle")
            .field("name", &self.name)
            .field("result_as_answer", &self.result_as_answer)
            .field("max_usage_count", &self.max_usage_count)
            .field("current_usage_count", &self.current_usage_count())
            .field("has_cache_function", &self.cache_function.is_some())
            .field("failure_policy", &self.failure_policy)
            .finish()
    }
}

impl From<Arc<dyn Tool>> for ToolHandle {
    fn from(tool: Arc<dyn Tool>) -> Self {
        ToolHandle::new(tool)
    }
}

/// A tool's usage limit is used up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", usage_limit_message(.tool, *.limit))]
pub struct UsageLimitReached {
    /// The sanitised tool name.
    pub tool: String,
    pub limit: u32,
}

/// What the model is told when it calls a tool whose usage limit is used up.
pub fn usage_limit_message(tool_name: &str, limit: u32) -> String {
    let times = if limit == 1 { "time" } else { "times" };
    format!(
        "The tool '{tool_name}' may be used at most {limit} {times} and that limit is reached, \
         so it is no longer available. Continue without it."
    )
}

/// What happens when a tool fails (CrewAI's `tool_failure_policy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolFailurePolicy {
    /// The error text goes back to the model; nothing is logged.
    Ignore,
    /// The error text goes back to the model and a warning is logged.
    #[default]
    Warn,
    /// The run fails with the tool's error.
    Raise,
}

impl std::str::FromStr for ToolFailurePolicy {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        match value.trim().to_ascii_lowercase().as_str() {
            "ignore" => Ok(ToolFailurePolicy::Ignore),
            "warn" => Ok(ToolFailurePolicy::Warn),
            "raise" => Ok(ToolFailurePolicy::Raise),
            other => Err(format!(
                "unknown tool_failure_policy '{other}': use one of ignore, warn, raise"
            )),
        }
    }
}

impl fmt::Display for ToolFailurePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ToolFailurePolicy::Ignore => "ignore",
            ToolFailurePolicy::Warn => "warn",
            ToolFailurePolicy::Raise => "raise",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DynamicTool;
    use serde_json::json;

    fn counting_tool() -> DynamicTool {
        DynamicTool::new(
            "Counting Tool",
            "A tool that counts how many times it's been called",
            json!({
                "title": "CountingToolSchema",
                "type": "object",
                "properties": {"value": {"description": "Value to count", "title": "Value", "type": "string"}},
                "required": ["value"]
            }),
            |_args, _ctx| async { Ok(ToolOutput::Text("counted".into())) },
        )
    }

    #[test]
    fn definition_is_crewai_native_schema() {
        let definition = ToolHandle::from_tool(counting_tool()).definition();
        assert_eq!(definition.name, "counting_tool");
        assert_eq!(
            definition.description,
            "A tool that counts how many times it's been called"
        );
        assert!(definition.strict);
        assert_eq!(
            serde_json::to_string(&definition.parameters).unwrap(),
            r#"{"properties":{"value":{"description":"Value to count","title":"Value","type":"string"}},"required":["value"],"type":"object","additionalProperties":false}"#
        );
    }

    #[tokio::test]
    async fn prepares_and_runs() {
        let handle = ToolHandle::from_tool(counting_tool());
        let args = handle.prepare_arguments(&json!("{'value': 'a'}")).unwrap();
        assert_eq!(args, json!({"value": "a"}));
        let output = handle.run(args, &ToolContext::new()).await.unwrap();
        assert_eq!(output.to_text(), "counted");
        let error: ToolError = handle.prepare_arguments(&json!({})).unwrap_err().into();
        assert!(
            matches!(&error, ToolError::Arguments(_))
                && error.to_string().contains("`value` is required"),
            "{error:?}"
        );
    }

    #[test]
    fn names_keep_the_original() {
        let handle = ToolHandle::from_tool(counting_tool());
        assert_eq!(handle.name(), "counting_tool");
        assert_eq!(handle.original_name(), "Counting Tool");
    }

    #[test]
    fn usage_limit_is_enforced_and_shared_by_clones() {
        let handle = ToolHandle::from_tool(counting_tool()).with_max_usage_count(2);
        let clone = handle.clone();
        assert!(handle.try_claim_use().is_ok());
        assert!(clone.try_claim_use().is_ok());
        let error = handle.try_claim_use().unwrap_err();
        assert_eq!(
            error,
            UsageLimitReached {
                tool: "counting_tool".into(),
                limit: 2
            }
        );
        assert!(
            error.to_string().contains("'counting_tool'")
                && error.to_string().contains("no longer available")
        );
        assert_eq!(handle.current_usage_count(), 2);
        handle.reset_usage_count();
        assert!(clone.try_claim_use().is_ok());
    }

    #[test]
    fn concurrent_claims_never_overshoot() {
        let handle = ToolHandle::from_tool(counting_tool()).with_max_usage_count(50);
        let granted: usize = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..8)
                .map(|_| scope.spawn(|| (0..20).filter(|_| handle.try_claim_use().is_ok()).count()))
                .collect();
            workers
                .into_iter()
                .map(|worker| worker.join().unwrap())
                .sum()
        });
        assert_eq!(granted, 50);
        assert_eq!(handle.current_usage_count(), 50);
    }

    #[test]
    fn unlimited_tools_count_uses() {
        let handle = ToolHandle::from_tool(counting_tool());
        assert_eq!(handle.max_usage_count(), None);
        for _ in 0..3 {
            handle.try_claim_use().unwrap();
        }
        assert_eq!(handle.current_usage_count(), 3);
        assert!(
            ToolHandle::from_tool(counting_tool())
                .with_max_usage_count(0)
                .try_claim_use()
                .is_err()
        );
    }

    #[test]
    fn tool_declared_settings_are_defaults() {
        let handle = ToolHandle::from_tool(
            counting_tool()
                .with_result_as_answer(true)
                .with_max_usage_count(4),
        );
        assert!(handle.result_as_answer());
        assert_eq!(handle.max_usage_count(), Some(4));
        let overridden = handle.with_result_as_answer(false).with_max_usage_count(1);
        assert!(!overridden.result_as_answer());
        assert_eq!(overridden.max_usage_count(), Some(1));
    }

    #[test]
    fn cache_function_decides() {
        let handle = ToolHandle::from_tool(counting_tool());
        assert!(handle.should_cache(&json!({}), &ToolOutput::Text("x".into())));
        let even_only = handle
            .with_cache_function(|args, _output| args["n"].as_i64().is_some_and(|n| n % 2 == 0));
        assert!(even_only.should_cache(&json!({"n": 2}), &ToolOutput::Text("x".into())));
        assert!(!even_only.should_cache(&json!({"n": 3}), &ToolOutput::Text("x".into())));
    }

    #[test]
    fn tools_may_carry_their_own_failure_policy() {
        let handle = ToolHandle::from_tool(counting_tool());
        assert_eq!(handle.failure_policy(), None);
        assert_eq!(
            handle
                .with_failure_policy(ToolFailurePolicy::Raise)
                .failure_policy(),
            Some(ToolFailurePolicy::Raise)
        );
    }

    #[test]
    fn failure_policy_parses_and_defaults_to_warn() {
        assert_eq!(ToolFailurePolicy::default(), ToolFailurePolicy::Warn);
        assert_eq!(
            "RAISE".parse::<ToolFailurePolicy>(),
            Ok(ToolFailurePolicy::Raise)
        );
        assert!(
            "explode"
                .parse::<ToolFailurePolicy>()
                .unwrap_err()
                .contains("ignore, warn, raise")
        );
        let parsed: ToolFailurePolicy = serde_json::from_value(json!("ignore")).unwrap();
        assert_eq!(parsed, ToolFailurePolicy::Ignore);
        assert_eq!(ToolFailurePolicy::Warn.to_string(), "warn");
    }

    #[test]
    fn usage_limit_message_names_tool_and_limit() {
        assert_eq!(
            usage_limit_message("counting_tool", 1),
            "The tool 'counting_tool' may be used at most 1 time and that limit is reached, so it is no longer available. Continue without it."
        );
        assert!(usage_limit_message("x", 3).contains("3 times"));
    }
}
