//! The plan and the observation as the model writes them: their function schemas, reading them
//! from a reply (a forced function call, or JSON text from a model without function calling),
//! and making a model's plan safe to run (numbers unique, dependencies only on earlier steps, at
//! most `max_steps`).

use std::collections::{BTreeMap, BTreeSet};

use crewai_llm::{LlmResponse, ResponseFormat, ToolDefinition};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::executor::parse_structured;
use crate::prompts::reasoning as prompts;

/// The function the planner is made to call.
pub const PLAN_FUNCTION: &str = "create_reasoning_plan";
/// The function the observer is made to call.
pub const OBSERVE_FUNCTION: &str = "observe_step_results";

/// One step of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanStep {
    pub step_number: u32,
    pub description: String,
    /// The tool the planner means the step to use, if any (a hint: the step may use any of the
    /// agent's tools).
    #[serde(default)]
    pub tool_to_use: Option<String>,
    /// Steps whose results this one needs.
    #[serde(default)]
    pub depends_on: Vec<u32>,
}

/// A plan (the arguments of `create_reasoning_plan`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReasoningPlan {
    /// The approach, in a few sentences.
    pub plan: String,
    #[serde(default)]
    pub steps: Vec<PlanStep>,
    /// Whether the planner thinks the plan is good enough to run.
    #[serde(default)]
    pub ready: bool,
}

/// The observer's judgement of the results so far (the arguments of `observe_step_results`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct StepObservation {
    /// The task's goal is reached: the remaining steps are not run.
    #[serde(default)]
    pub goal_achieved: bool,
    /// The last result is already the final answer, as it stands.
    #[serde(default)]
    pub last_result_is_answer: bool,
    /// The remaining steps no longer fit what the results showed.
    #[serde(default)]
    pub replan: bool,
    #[serde(default)]
    pub reason: String,
}

fn plan_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "plan": {"type": "string", "description": "The approach in a few sentences."},
            "steps": {
                "type": "array",
                "description": "The steps, in the order they should run.",
                "items": {
                    "type": "object",
                    "properties": {
                        "step_number": {"type": "integer", "minimum": 1},
                        "description": {"type": "string", "description": "What the step does and what it produces."},
                        "tool_to_use": {"type": ["string", "null"], "description": "The tool the step needs, or null."},
                        "depends_on": {
                            "type": "array",
                            "items": {"type": "integer"},
                            "description": "The numbers of the earlier steps whose results this step needs."
                        }
                    },
                    "required": ["step_number", "description", "tool_to_use", "depends_on"],
                    "additionalProperties": false
                }
            },
            "ready": {"type": "boolean", "description": "True when the plan is good enough to carry out."}
        },
        "required": ["plan", "steps", "ready"],
        "additionalProperties": false
    })
}

fn observation_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "goal_achieved": {"type": "boolean", "description": "True when the task is fully done with the results so far."},
            "last_result_is_answer": {"type": "boolean", "description": "True when the latest result is, word for word, a complete final answer."},
            "replan": {"type": "boolean", "description": "True when the remaining steps must change."},
            "reason": {"type": "string", "description": "Why, in one or two sentences."}
        },
        "required": ["goal_achieved", "last_result_is_answer", "replan", "reason"],
        "additionalProperties": false
    })
}

/// A function the model is made to call, and the same schema as a response format for a model
/// that cannot call functions.
pub(crate) struct ForcedFunction {
    pub(crate) definition: ToolDefinition,
}

impl ForcedFunction {
    pub(crate) fn plan() -> Self {
        ForcedFunction {
            definition: ToolDefinition {
                name: PLAN_FUNCTION.to_string(),
                description: prompts::PLAN_FUNCTION_DESCRIPTION.to_string(),
                parameters: plan_schema(),
                strict: true,
            },
        }
    }

    pub(crate) fn observation() -> Self {
        ForcedFunction {
            definition: ToolDefinition {
                name: OBSERVE_FUNCTION.to_string(),
                description: prompts::OBSERVE_FUNCTION_DESCRIPTION.to_string(),
                parameters: observation_schema(),
                strict: true,
            },
        }
    }

    pub(crate) fn response_format(&self) -> ResponseFormat {
        ResponseFormat {
            name: self.definition.name.clone(),
            schema: self.definition.parameters.clone(),
            strict: true,
        }
    }

    /// The arguments the reply gives: the call of this function, else JSON in its text.
    pub(crate) fn arguments(&self, response: &LlmResponse) -> Result<Value, String> {
        if let Some(call) = response
            .tool_calls
            .iter()
            .find(|call| call.name == self.definition.name)
        {
            return match &call.arguments {
                Value::String(raw) => serde_json::from_str(raw)
                    .map_err(|e| format!("the arguments of {} are not JSON ({e})", call.name)),
                other => Ok(other.clone()),
            };
        }
        parse_structured(response.content.as_deref().unwrap_or_default())
    }
}

impl ReasoningPlan {
    /// The plan a reply gives. A reply that is not in the schema is read as a plan in prose:
    /// one step (the whole task), ready when it carries the ready mark.
    pub(crate) fn from_reply(response: &LlmResponse) -> Self {
        let function = ForcedFunction::plan();
        match function
            .arguments(response)
            .and_then(|value| serde_json::from_value(value).map_err(|e| e.to_string()))
        {
            Ok(plan) => plan,
            Err(problem) => {
                let text = response.content.clone().unwrap_or_default();
                tracing::warn!(
                    problem,
                    "the planner did not answer in the plan's schema; its text is the plan"
                );
                ReasoningPlan {
                    ready: prompts::says_ready(&text),
                    plan: text.trim().to_string(),
                    steps: Vec::new(),
                }
            }
        }
    }

    /// The plan made safe to run: steps renumbered from `first_number` in their order, a step
    /// depending only on steps before it (or on `done`, steps that already ran), at most
    /// `max_steps` of them. A plan without steps gets one: `whole_task`.
    pub(crate) fn normalized(
        mut self,
        first_number: u32,
        done: &BTreeSet<u32>,
        max_steps: usize,
        whole_task: &str,
    ) -> Self {
        self.steps
            .retain(|step| !step.description.trim().is_empty());
        if self.steps.is_empty() {
            self.steps.push(PlanStep {
                step_number: first_number,
                description: whole_task.to_string(),
                tool_to_use: None,
                depends_on: Vec::new(),
            });
        }
        if self.steps.len() > max_steps {
            tracing::warn!(
                steps = self.steps.len(),
                max_steps,
                "the plan has more steps than max_steps; the rest are dropped"
            );
            self.steps.truncate(max_steps);
        }
        let mut renumbered: BTreeMap<u32, u32> = BTreeMap::new();
        for (number, step) in (first_number..).zip(self.steps.iter_mut()) {
            // A repeated number refers to its first step.
            renumbered.entry(step.step_number).or_insert(number);
            let depends_on: BTreeSet<u32> = step
                .depends_on
                .iter()
                .filter_map(|dep| match renumbered.get(dep) {
                    Some(&earlier) if earlier < number => Some(earlier),
                    _ if done.contains(dep) => Some(*dep),
                    _ => {
                        tracing::warn!(
                            step = number,
                            depends_on = dep,
                            "a plan step depends on a step that is not before it; the dependency is dropped"
                        );
                        None
                    }
                })
                .collect();
            step.step_number = number;
            step.depends_on = depends_on.into_iter().collect();
            step.tool_to_use = step
                .tool_to_use
                .take()
                .filter(|tool| !tool.trim().is_empty() && tool != "null");
        }
        self
    }

    /// The steps that can run now: not run yet, and every step they depend on done.
    pub(crate) fn runnable<'a>(
        &'a self,
        done: &BTreeSet<u32>,
        ran: &BTreeSet<u32>,
    ) -> Vec<&'a PlanStep> {
        self.steps
            .iter()
            .filter(|step| !ran.contains(&step.step_number))
            .filter(|step| step.depends_on.iter().all(|dep| done.contains(dep)))
            .collect()
    }

    /// The steps' descriptions, as events list them.
    pub(crate) fn descriptions(&self) -> Vec<String> {
        self.steps
            .iter()
            .map(|step| format!("{}. {}", step.step_number, step.description))
            .collect()
    }
}

impl StepObservation {
    pub(crate) fn from_reply(response: &LlmResponse) -> Result<Self, String> {
        ForcedFunction::observation()
            .arguments(response)
            .and_then(|value| serde_json::from_value(value).map_err(|e| e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(number: u32, depends_on: &[u32]) -> PlanStep {
        PlanStep {
            step_number: number,
            description: format!("step {number}"),
            tool_to_use: Some("null".into()),
            depends_on: depends_on.to_vec(),
        }
    }

    #[test]
    fn dependencies_point_only_backwards_and_numbers_are_unique() {
        let plan = ReasoningPlan {
            plan: "p".into(),
            steps: vec![
                step(1, &[]),
                step(1, &[1]),
                step(3, &[1, 4, 3]),
                step(4, &[2]),
            ],
            ready: true,
        }
        .normalized(1, &BTreeSet::new(), 20, "task");
        let numbers: Vec<u32> = plan.steps.iter().map(|s| s.step_number).collect();
        assert_eq!(numbers, vec![1, 2, 3, 4]);
        assert_eq!(plan.steps[1].depends_on, vec![1]);
        // 4 is later, 3 is itself: both dropped.
        assert_eq!(plan.steps[2].depends_on, vec![1]);
        // "2" is not a number the model used, so nothing before step 4 answers to it.
        assert!(plan.steps[3].depends_on.is_empty());
        assert!(plan.steps.iter().all(|s| s.tool_to_use.is_none()));
    }

    #[test]
    fn a_replan_continues_the_numbers_and_may_use_done_steps() {
        let done: BTreeSet<u32> = [1, 2].into();
        let plan = ReasoningPlan {
            plan: "again".into(),
            steps: vec![step(1, &[2]), step(2, &[1])],
            ready: true,
        }
        .normalized(3, &done, 20, "task");
        assert_eq!(plan.steps[0].step_number, 3);
        assert_eq!(plan.steps[0].depends_on, vec![2]);
        // The model's "1" is its own first step here (now 3), which comes first.
        assert_eq!(plan.steps[1].depends_on, vec![3]);
    }

    #[test]
    fn an_empty_plan_is_the_whole_task_and_long_plans_are_cut() {
        let plan = ReasoningPlan {
            plan: "p".into(),
            steps: Vec::new(),
            ready: false,
        }
        .normalized(1, &BTreeSet::new(), 2, "do it all");
        assert_eq!(plan.steps.len(), 1);
        assert_eq!(plan.steps[0].description, "do it all");
        let long = ReasoningPlan {
            plan: "p".into(),
            steps: (1..=5).map(|n| step(n, &[])).collect(),
            ready: true,
        }
        .normalized(1, &BTreeSet::new(), 2, "t");
        assert_eq!(long.steps.len(), 2);
    }

    #[test]
    fn runnable_steps_wait_for_their_dependencies() {
        let plan = ReasoningPlan {
            plan: "p".into(),
            steps: vec![step(1, &[]), step(2, &[]), step(3, &[1, 2])],
            ready: true,
        };
        let none = BTreeSet::new();
        let first: Vec<u32> = plan
            .runnable(&none, &none)
            .iter()
            .map(|s| s.step_number)
            .collect();
        assert_eq!(first, vec![1, 2]);
        let done: BTreeSet<u32> = [1, 2].into();
        let next: Vec<u32> = plan
            .runnable(&done, &done)
            .iter()
            .map(|s| s.step_number)
            .collect();
        assert_eq!(next, vec![3]);
    }

    #[test]
    fn a_plan_is_read_from_the_call_or_from_text() {
        let call = LlmResponse {
            tool_calls: vec![crewai_llm::ToolCall::from_raw_arguments(
                "c1",
                PLAN_FUNCTION,
                r#"{"plan":"p","steps":[{"step_number":1,"description":"d","tool_to_use":null,"depends_on":[]}],"ready":true}"#,
            )],
            ..LlmResponse::default()
        };
        let plan = ReasoningPlan::from_reply(&call);
        assert!(plan.ready);
        assert_eq!(plan.steps.len(), 1);
        let prose = LlmResponse {
            content: Some(format!("First look, then write.\n{}", prompts::READY_MARK)),
            ..LlmResponse::default()
        };
        let plan = ReasoningPlan::from_reply(&prose);
        assert!(plan.ready && plan.steps.is_empty());
    }

    #[test]
    fn the_schemas_are_valid() {
        for function in [ForcedFunction::plan(), ForcedFunction::observation()] {
            jsonschema::validator_for(&function.definition.parameters).unwrap();
        }
    }
}
