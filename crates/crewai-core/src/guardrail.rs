//! Guardrails: checks an answer must pass before it is accepted (CrewAI's `guardrail`).
//!
//! A guardrail is either a Rust function of the [`TaskOutput`] or a plain-language requirement that
//! an LLM judges (CrewAI's string guardrail). Tasks apply them (`Task::guardrail(s)`), and so does
//! `Agent::kickoff` (the agent's own `guardrail`): on failure the feedback goes back to the agent,
//! which tries again, up to `guardrail_max_retries` times.
//!
//! ```
//! use crewai_core::guardrail::{Guardrail, GuardrailPass};
//! use crewai_core::output::TaskOutput;
//!
//! let short = Guardrail::named("under_100_words", |out: &TaskOutput| {
//!     if out.raw.split_whitespace().count() <= 100 { Ok(GuardrailPass::Keep) } else { Err("Keep it under 100 words.".into()) }
//! });
//! assert_eq!(short.name(), "under_100_words");
//! assert!(short.check_fn(&TaskOutput::new("d", "e", "brief", "Writer")).unwrap().is_ok());
//!
//! let italian = Guardrail::llm("Ensure the authors are from Italy");
//! assert_eq!(italian.name(), "Ensure the authors are from Italy");
//! ```

use std::fmt;
use std::sync::Arc;

use crewai_llm::{Llm, LlmError, LlmRequest, Message, ResponseFormat, Usage};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::events::{CaughtPanic, EventBus, EventKind, PanicSite, panic_message};
use crate::output::{OutputFormat, TaskOutput};
use crate::prompts::{agent as agent_prompts, crew as crew_prompts};

/// What a passing guardrail does with the output.
#[derive(Debug, Clone, PartialEq)]
pub enum GuardrailPass {
    /// Accept the output as it is.
    Keep,
    /// Accept, replacing the raw text.
    Raw(String),
    /// Accept, setting the typed value (CrewAI: a guardrail that returns a Pydantic model); the raw
    /// text is kept.
    Typed(Value),
}

impl GuardrailPass {
    /// Applies the pass to an output.
    pub fn apply(self, output: &mut TaskOutput) {
        match self {
            GuardrailPass::Keep => {}
            GuardrailPass::Raw(raw) => output.raw = raw,
            GuardrailPass::Typed(value) => {
                if output.output_format == OutputFormat::Json {
                    output.json_dict = Some(value.clone());
                }
                output.pydantic = Some(value);
            }
        }
    }

    /// The `result` field of the `llm_guardrail_completed` event.
    fn event_result(&self, output: &TaskOutput) -> Value {
        match self {
            GuardrailPass::Keep => Value::String(output.raw.clone()),
            GuardrailPass::Raw(raw) => Value::String(raw.clone()),
            GuardrailPass::Typed(value) => value.clone(),
        }
    }
}

type GuardrailFn = Arc<dyn Fn(&TaskOutput) -> Result<GuardrailPass, String> + Send + Sync>;

#[derive(Clone)]
enum Check {
    Function(GuardrailFn),
    Llm {
        requirement: String,
        llm: Option<Arc<dyn Llm>>,
    },
}

/// A check an answer must pass.
#[derive(Clone)]
pub struct Guardrail {
    name: String,
    check: Check,
}

impl fmt::Debug for Guardrail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.check {
            Check::Function(_) => "function",
            Check::Llm { .. } => "llm",
        };
        f.debug_struct("Guardrail")
            .field("name", &self.name)
            .field("kind", &kind)
            .finish()
    }
}

/// The outcome of one guardrail evaluation and the tokens it used.
#[derive(Debug, Clone, PartialEq)]
pub struct GuardrailVerdict {
    /// `Ok` when the output passed, `Err(feedback)` when it did not.
    pub outcome: Result<GuardrailPass, String>,
    pub usage: Usage,
}

/// Where a guardrail runs: the model for LLM guardrails and where its events go.
#[derive(Clone)]
pub struct GuardrailContext<'a> {
    /// Judges LLM guardrails that were not given their own model (the agent's LLM, as CrewAI).
    pub llm: Option<&'a Arc<dyn Llm>>,
    pub events: &'a EventBus,
    pub parent_event_id: Option<Uuid>,
    /// Retries made before this check (0 on the first check).
    pub retry_count: u32,
    pub agent_role: Option<&'a str>,
    pub task_name: Option<&'a str>,
}

/// Why a guardrail could not be evaluated at all (as opposed to rejecting the output).
#[derive(Debug, thiserror::Error)]
pub enum GuardrailError {
    #[error(
        "the LLM guardrail '{requirement}' has no model to judge it: give the guardrail or its agent an LLM"
    )]
    NoLlm { requirement: String },
    #[error("the LLM guardrail '{requirement}' could not be judged: {message}")]
    Judge {
        requirement: String,
        message: String,
    },
    /// The judge's model call failed; the error is kept typed (a budget refusal stops the run).
    #[error("the LLM guardrail '{requirement}' could not be judged")]
    JudgeCall {
        requirement: String,
        source: LlmError,
    },
}

impl GuardrailError {
    /// The model-call error behind the failure, when the judge's call failed.
    pub fn llm_error(&self) -> Option<&LlmError> {
        match self {
            GuardrailError::JudgeCall { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl Guardrail {
    /// A function guardrail, named `guardrail` in events (use [`Guardrail::named`] to name it).
    pub fn func(
        check: impl Fn(&TaskOutput) -> Result<GuardrailPass, String> + Send + Sync + 'static,
    ) -> Self {
        Self::named("guardrail", check)
    }

    /// A function guardrail with the name its events carry (CrewAI uses the function's name).
    pub fn named(
        name: impl Into<String>,
        check: impl Fn(&TaskOutput) -> Result<GuardrailPass, String> + Send + Sync + 'static,
    ) -> Self {
        Guardrail {
            name: name.into(),
            check: Check::Function(Arc::new(check)),
        }
    }

    /// A requirement in plain language, judged by the agent's LLM.
    pub fn llm(requirement: impl Into<String>) -> Self {
        let requirement = requirement.into();
        Guardrail {
            name: requirement.clone(),
            check: Check::Llm {
                requirement,
                llm: None,
            },
        }
    }

    /// A requirement judged by a given model.
    pub fn llm_with(requirement: impl Into<String>, llm: Arc<dyn Llm>) -> Self {
        let requirement = requirement.into();
        Guardrail {
            name: requirement.clone(),
            check: Check::Llm {
                requirement,
                llm: Some(llm),
            },
        }
    }

    /// The model an LLM guardrail was given with [`Guardrail::llm_with`] (`None` for a function
    /// guardrail, or one judged by the agent's model).
    pub fn judge_llm(&self) -> Option<&Arc<dyn Llm>> {
        match &self.check {
            Check::Llm { llm, .. } => llm.as_ref(),
            Check::Function(_) => None,
        }
    }

    /// A copy judged by `llm` (a function guardrail is returned unchanged). The task layer uses
    /// it to route the judge's call through the run's rate limit, usage and budget.
    pub fn judged_by(&self, llm: Arc<dyn Llm>) -> Guardrail {
        match &self.check {
            Check::Llm { requirement, .. } => Guardrail {
                name: self.name.clone(),
                check: Check::Llm {
                    requirement: requirement.clone(),
                    llm: Some(llm),
                },
            },
            Check::Function(_) => self.clone(),
        }
    }

    /// The `guardrail` field of its events: the requirement, or the function's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether it needs a model.
    pub fn is_llm(&self) -> bool {
        matches!(self.check, Check::Llm { .. })
    }

    /// Runs a function guardrail synchronously; `None` for LLM guardrails. A function that
    /// panics fails the check (with the panic's text); with no bus here, the panic is only
    /// logged ([`Guardrail::evaluate`] counts it on the run's bus).
    pub fn check_fn(&self, output: &TaskOutput) -> Option<Result<GuardrailPass, String>> {
        match &self.check {
            Check::Function(check) => Some(guarded_call(check, output).unwrap_or_else(|message| {
                tracing::warn!(guardrail = %self.name, %message, "a guardrail function panicked");
                Err(format!("{GUARDRAIL_PANICKED}: {message}"))
            })),
            Check::Llm { .. } => None,
        }
    }

    /// Evaluates the guardrail, emitting `llm_guardrail_started` and `llm_guardrail_completed`.
    pub async fn evaluate(
        &self,
        output: &TaskOutput,
        ctx: GuardrailContext<'_>,
    ) -> Result<GuardrailVerdict, GuardrailError> {
        ctx.events.emit(
            ctx.parent_event_id,
            EventKind::LlmGuardrailStarted {
                guardrail: self.name.clone(),
                retry_count: ctx.retry_count,
                agent_role: ctx.agent_role.map(str::to_string),
                task_name: ctx.task_name.map(str::to_string),
            },
        );
        let verdict = match &self.check {
            Check::Function(check) => Ok(GuardrailVerdict {
                outcome: guarded_call(check, output).unwrap_or_else(|message| {
                    let panic = CaughtPanic::new(PanicSite::Guardrail, self.name.clone(), message)
                        .in_task(ctx.agent_role, ctx.task_name);
                    ctx.events.report_panic(ctx.parent_event_id, panic);
                    // The model is told its output was not accepted, not the guardrail's internals.
                    Err(GUARDRAIL_PANICKED.to_string())
                }),
                usage: Usage::default(),
            }),
            Check::Llm { requirement, llm } => match llm.as_ref().or(ctx.llm) {
                Some(llm) => judge(requirement, llm.as_ref(), output).await,
                None => Err(GuardrailError::NoLlm {
                    requirement: requirement.clone(),
                }),
            },
        };
        let (success, result, error) = match &verdict {
            Ok(GuardrailVerdict {
                outcome: Ok(pass), ..
            }) => (true, Some(pass.event_result(output)), None),
            Ok(GuardrailVerdict {
                outcome: Err(feedback),
                ..
            }) => (false, None, Some(feedback.clone())),
            Err(error) => (false, None, Some(crewai_llm::error_chain(error))),
        };
        // Both events hang under the caller's event (the task or the agent run).
        ctx.events.emit(
            ctx.parent_event_id,
            EventKind::LlmGuardrailCompleted {
                success,
                result,
                error,
                retry_count: ctx.retry_count,
                agent_role: ctx.agent_role.map(str::to_string),
                task_name: ctx.task_name.map(str::to_string),
            },
        );
        verdict
    }
}

/// The feedback of a guardrail function that panicked.
const GUARDRAIL_PANICKED: &str = "the guardrail function panicked";

/// A guardrail function written by the user must not take the run down with a panic: the outer
/// `Err` is a caught panic's text, for the caller to report.
fn guarded_call(
    check: &GuardrailFn,
    output: &TaskOutput,
) -> Result<Result<GuardrailPass, String>, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(output)))
        .map_err(|payload| panic_message(payload.as_ref()))
}

/// The judge's answer shape (CrewAI's `LLMGuardrailResult`).
fn judge_format() -> ResponseFormat {
    ResponseFormat {
        name: "LLMGuardrailResult".into(),
        schema: json!({
            "type": "object",
            "properties": {
                "valid": {"type": "boolean", "description": "Whether the work meets the requirement"},
                "feedback": {"type": ["string", "null"], "description": "What to fix when it does not"}
            },
            "required": ["valid", "feedback"],
            "additionalProperties": false
        }),
        strict: true,
    }
}

async fn judge(
    requirement: &str,
    llm: &dyn Llm,
    output: &TaskOutput,
) -> Result<GuardrailVerdict, GuardrailError> {
    let system = agent_prompts::role_playing(
        agent_prompts::GUARDRAIL_ROLE,
        agent_prompts::GUARDRAIL_BACKSTORY,
        agent_prompts::GUARDRAIL_GOAL,
    );
    let query = crew_prompts::llm_guardrail_query(requirement, &output.raw);
    let request = LlmRequest::new(vec![
        Message::system(system),
        Message::user(agent_prompts::task_message_no_tools(&query)),
    ])
    .with_response_format(judge_format());
    let failed = |message: String| GuardrailError::Judge {
        requirement: requirement.to_string(),
        message,
    };
    let response = llm
        .call(request)
        .await
        .map_err(|source| GuardrailError::JudgeCall {
            requirement: requirement.to_string(),
            source,
        })?;
    let text = response.content.clone().unwrap_or_default();
    let verdict = parse_judgement(&text).map_err(failed)?;
    Ok(GuardrailVerdict {
        outcome: verdict,
        usage: response.usage,
    })
}

/// Reads `{"valid": bool, "feedback": str|null}` (tolerating a code fence around it).
fn parse_judgement(text: &str) -> Result<Result<GuardrailPass, String>, String> {
    let trimmed = text
        .trim()
        .trim_start_matches("```json")
        .trim_start_matches("```")
        .trim_end_matches("```")
        .trim();
    let value: Value = serde_json::from_str(trimmed)
        .map_err(|e| format!("the judge's reply is not the expected JSON ({e}): {text}"))?;
    match value.get("valid").and_then(Value::as_bool) {
        Some(true) => Ok(Ok(GuardrailPass::Keep)),
        Some(false) => {
            let feedback = value
                .get("feedback")
                .and_then(Value::as_str)
                .filter(|f| !f.trim().is_empty())
                .unwrap_or("The output does not meet the requirement.");
            Ok(Err(feedback.to_string()))
        }
        None => Err(format!("the judge's reply has no boolean `valid`: {text}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::EventRecorder;

    fn output(raw: &str) -> TaskOutput {
        TaskOutput::new("describe", "expected", raw, "Writer")
    }

    #[tokio::test]
    async fn function_guardrails_emit_started_and_completed() {
        let bus = EventBus::new();
        let recorder = EventRecorder::attach(&bus);
        let guardrail = Guardrail::named("custom_guardrail", |_| {
            Ok(GuardrailPass::Raw("good result".into()))
        });
        let ctx = GuardrailContext {
            llm: None,
            events: &bus,
            parent_event_id: None,
            retry_count: 0,
            agent_role: Some("Writer"),
            task_name: None,
        };
        let verdict = guardrail.evaluate(&output("x"), ctx).await.unwrap();
        assert_eq!(
            verdict.outcome,
            Ok(GuardrailPass::Raw("good result".into()))
        );
        let events = recorder.events();
        assert_eq!(events[0].to_json()["guardrail"], "custom_guardrail");
        assert_eq!(events[1].to_json()["result"], "good result");
        assert_eq!(events[1].to_json()["success"], true);
        assert_eq!(events[1].parent_event_id, events[0].parent_event_id);
    }

    #[tokio::test]
    async fn an_llm_guardrail_without_a_model_is_an_error() {
        let bus = EventBus::new();
        let ctx = GuardrailContext {
            llm: None,
            events: &bus,
            parent_event_id: None,
            retry_count: 1,
            agent_role: None,
            task_name: None,
        };
        assert!(matches!(
            Guardrail::llm("be nice").evaluate(&output("x"), ctx).await,
            Err(GuardrailError::NoLlm { .. })
        ));
    }

    #[test]
    fn judgements_are_read() {
        assert_eq!(
            parse_judgement("{\"valid\": true, \"feedback\": null}").unwrap(),
            Ok(GuardrailPass::Keep)
        );
        assert_eq!(
            parse_judgement("```json\n{\"valid\": false, \"feedback\": \"no\"}\n```").unwrap(),
            Err("no".to_string())
        );
        assert!(parse_judgement("yes").is_err());
    }

    #[test]
    fn typed_passes_set_the_typed_value_and_keep_raw() {
        let mut out = output("top 10 list");
        GuardrailPass::Typed(json!({"name": "Lionel Messi"})).apply(&mut out);
        assert_eq!(out.raw, "top 10 list");
        assert_eq!(out.pydantic, Some(json!({"name": "Lionel Messi"})));
    }

    #[test]
    fn a_panicking_function_fails_the_check() {
        let guardrail = Guardrail::func(|_| panic!("bug"));
        assert_eq!(
            guardrail.check_fn(&output("x")).unwrap(),
            Err("the guardrail function panicked: bug".to_string())
        );
    }

    #[tokio::test]
    async fn a_panicking_function_is_counted_on_the_bus_and_fails_the_check() {
        let bus = EventBus::new();
        let recorder = EventRecorder::attach(&bus);
        let guardrail = Guardrail::named("sign_off", |_| panic!("index {} out of range", 3));
        let ctx = GuardrailContext {
            llm: None,
            events: &bus,
            parent_event_id: None,
            retry_count: 0,
            agent_role: Some("Editor"),
            task_name: Some("summary"),
        };
        let verdict = guardrail.evaluate(&output("x"), ctx).await.unwrap();
        assert_eq!(verdict.outcome, Err(GUARDRAIL_PANICKED.to_string()));
        assert_eq!(bus.caught_panics_at(PanicSite::Guardrail), 1);
        let caught = recorder.of_type("panic_caught");
        assert_eq!(caught.len(), 1);
        let json = caught[0].to_json();
        assert_eq!(
            (
                json["site"].as_str(),
                json["name"].as_str(),
                json["message"].as_str()
            ),
            (
                Some("guardrail"),
                Some("sign_off"),
                Some("index 3 out of range")
            )
        );
        assert_eq!(json["task_name"], "summary");
    }
}
