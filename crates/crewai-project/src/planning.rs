//! An agent's planning as a project writes it: `planning_config:` (CrewAI's `PlanningConfig`
//! fields), and the older `planning: true` and `reasoning: true` / `max_reasoning_attempts` that
//! map onto it ([`crewai_core::reasoning`]).

use std::sync::Arc;

use crewai_core::reasoning::{PlanningConfig, ReasoningEffort};
use crewai_llm::{Llm, LlmConfig};
use serde::Deserialize;
use serde_json::Value;

use crate::error::Diagnostic;
use crate::spec::{AgentSpec, Origin, Seconds, describe, type_error};

/// `planning_config:` as written: every field CrewAI's `PlanningConfig` has.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PlanningConfigSpec {
    reasoning_effort: Option<String>,
    observe_steps: Option<bool>,
    max_attempts: Option<u32>,
    max_steps: Option<usize>,
    max_replans: Option<u32>,
    max_step_iterations: Option<u32>,
    step_timeout: Option<Seconds>,
    system_prompt: Option<String>,
    plan_prompt: Option<String>,
    refine_prompt: Option<String>,
    llm: Option<LlmConfig>,
}

impl PlanningConfigSpec {
    /// Reads `planning_config:`, with the line it is on in every problem.
    pub(crate) fn read(value: &Value, origin: &Origin) -> Result<Self, Diagnostic> {
        if let Some(reference) = value.get("python").and_then(Value::as_str) {
            return Err(origin
                .diagnostic(format!(
                    "`planning_config` is the Python object `{reference}`, which cannot be read here"
                ))
                .with_hint(Some(
                    "write its fields in agents.yaml instead, for example `planning_config: {reasoning_effort: high, max_replans: 1}`"
                        .into(),
                )));
        }
        if !value.is_object() {
            return Err(origin.diagnostic(format!(
                "`planning_config` must be a mapping of PlanningConfig fields, found {}",
                describe(value)
            )));
        }
        let spec: PlanningConfigSpec = serde_json::from_value(value.clone()).map_err(|e| {
            origin
                .diagnostic(format!("`planning_config`: {}", type_error(&e)))
                .with_hint(Some(
                    "its fields are reasoning_effort (low, medium, high), observe_steps, \
                     max_attempts, max_steps, max_replans, max_step_iterations, step_timeout \
                     (seconds), system_prompt, plan_prompt, refine_prompt and llm"
                        .into(),
                ))
        })?;
        if let Some(effort) = &spec.reasoning_effort {
            effort
                .parse::<ReasoningEffort>()
                .map_err(|message| origin.diagnostic(format!("`planning_config`: {message}")))?;
        }
        // The numbers' own limits, with the agent builder's words.
        spec.config(None).problem().map_or(Ok(()), |message| {
            Err(origin.diagnostic(message.to_string()))
        })?;
        Ok(spec)
    }

    /// The planner's own model, when it has one.
    pub(crate) fn llm(&self) -> Option<&LlmConfig> {
        self.llm.as_ref()
    }

    /// The configuration, with the planner's model built from `llm` (when it has one).
    pub(crate) fn config(&self, llm: Option<Arc<dyn Llm>>) -> PlanningConfig {
        let defaults = PlanningConfig::default();
        PlanningConfig {
            reasoning_effort: self
                .reasoning_effort
                .as_deref()
                .and_then(|e| e.parse().ok())
                .unwrap_or(defaults.reasoning_effort),
            observe_steps: self.observe_steps,
            max_attempts: self.max_attempts,
            max_steps: self.max_steps.unwrap_or(defaults.max_steps),
            max_replans: self.max_replans.unwrap_or(defaults.max_replans),
            max_step_iterations: self
                .max_step_iterations
                .unwrap_or(defaults.max_step_iterations),
            step_timeout: self.step_timeout.map(Seconds::as_duration),
            system_prompt: self.system_prompt.clone(),
            plan_prompt: self.plan_prompt.clone(),
            refine_prompt: self.refine_prompt.clone(),
            llm,
        }
    }
}

/// How the agent plans, for a dry run: `medium effort, at most 20 steps, 3 replans` (`None`
/// when it does not plan, or its `planning_config` is not valid, which the check reports).
pub(crate) fn planning_label(spec: &AgentSpec) -> Option<String> {
    let config = match (&spec.planning_config, spec.origin("planning_config")) {
        (Some(value), Some(origin)) => PlanningConfigSpec::read(value, origin).ok()?.config(None),
        _ if spec.planning == Some(true) => PlanningConfig::quick(),
        _ if spec.reasoning == Some(true) => {
            PlanningConfig::from_reasoning(spec.max_reasoning_attempts)
        }
        _ => return None,
    };
    let effort = match config.reasoning_effort {
        ReasoningEffort::Low => "low",
        ReasoningEffort::Medium => "medium",
        ReasoningEffort::High => "high",
    };
    Some(format!(
        "{effort} effort, at most {} steps, {} replan(s){}",
        config.max_steps,
        config.max_replans,
        if config.observes() {
            ", results observed"
        } else {
            ""
        }
    ))
}

/// The warnings of an agent's planning fields: settings that do nothing as written.
pub(crate) fn planning_warnings(spec: &AgentSpec, owner: &str) -> Vec<Diagnostic> {
    let mut warnings = Vec::new();
    if spec.reasoning != Some(true)
        && let Some(origin) = spec.origin("max_reasoning_attempts")
    {
        warnings.push(origin.diagnostic(format!(
            "{owner} `max_reasoning_attempts` has no effect without `reasoning: true`"
        )));
    }
    if spec.planning_config.is_some() {
        for field in ["planning", "reasoning"] {
            if let Some(origin) = spec.origin(field) {
                warnings.push(origin.diagnostic(format!(
                    "{owner} `{field}` has no effect: its `planning_config` decides how it plans"
                )));
            }
        }
    } else if spec.planning == Some(true)
        && let Some(origin) = spec.origin("reasoning")
    {
        warnings.push(origin.diagnostic(format!(
            "{owner} `reasoning` has no effect: `planning: true` decides how it plans"
        )));
    }
    warnings
}

impl crate::Project {
    /// `builder` with the agent's planning, as its fields ask: `planning_config` (its `llm`
    /// built like the agent's, `--llm` overriding it), else `planning: true`, else
    /// `reasoning: true` with `max_reasoning_attempts`.
    pub(crate) fn agent_planning(
        &self,
        builder: crewai_core::agent::AgentBuilder,
        spec: &AgentSpec,
        owner: &str,
        options: &crate::options::BuildOptions,
    ) -> Result<crewai_core::agent::AgentBuilder, crate::error::ProjectError> {
        if let (Some(value), Some(origin)) = (&spec.planning_config, spec.origin("planning_config"))
        {
            let planning = PlanningConfigSpec::read(value, origin)
                .map_err(|problem| crate::error::ProjectError::Invalid(vec![problem]))?;
            let llm = match options.llm_override.as_ref().or(planning.llm()) {
                Some(config) => Some(crate::options::make_llm(
                    Some(config),
                    &format!("{owner} planning_config llm"),
                    Some(origin),
                    options,
                )?),
                None => None,
            };
            return Ok(builder.planning_config(planning.config(llm)));
        }
        let mut builder = builder;
        if spec.planning == Some(true) {
            builder = builder.planning(true);
        }
        if spec.reasoning == Some(true) {
            builder = builder.reasoning(true);
            if let Some(attempts) = spec.max_reasoning_attempts {
                builder = builder.max_reasoning_attempts(attempts);
            }
        }
        Ok(builder)
    }
}
