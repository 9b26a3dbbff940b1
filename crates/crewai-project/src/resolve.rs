//! Fields a project file can only name, never hold: guardrails written as mappings
//! (`{python: module.check}`), the condition of a ConditionalTask, callbacks. A caller that has
//! the code behind such names supplies a [`CodeResolver`]; without one (as in `crewai run`), each
//! such field is refused at its place, so a run never goes ahead without something it asked for.

use std::collections::BTreeMap;

use crewai_core::agent::StepCallback;
use crewai_core::guardrail::Guardrail;
use crewai_core::task::{Condition, TaskCallback};
use serde_json::{Map, Value};

use crate::Project;
use crate::check::not_supported;
use crate::error::Diagnostic;
use crate::spec::{GuardrailSpec, OneOrMany, Origin, is_requested};

/// Supplies the code a project names. Each method gets the value as written and answers `None`
/// when it does not provide that kind of thing (the field is then refused as in `crewai run`),
/// or `Some(Err(why))` when the value is wrong for it (reported at the field's place).
///
/// ```
/// use std::sync::Arc;
/// use crewai_core::guardrail::{Guardrail, GuardrailPass};
/// use crewai_core::output::TaskOutput;
/// use crewai_project::CodeResolver;
/// use serde_json::{Map, Value};
///
/// /// Guardrails named `{rust: non_empty}` in the files.
/// struct MyCode;
/// impl CodeResolver for MyCode {
///     fn guardrail(&self, reference: &Map<String, Value>) -> Option<Result<Guardrail, String>> {
///         match reference.get("rust")?.as_str()? {
///             "non_empty" => Some(Ok(Guardrail::named("non_empty", |out: &TaskOutput| {
///                 if out.raw.trim().is_empty() { Err("say something".to_string()) } else { Ok(GuardrailPass::Keep) }
///             }))),
///             other => Some(Err(format!("no guardrail is named `{other}`"))),
///         }
///     }
/// }
/// let options = crewai_project::BuildOptions::new(Default::default()).with_code_resolver(Arc::new(MyCode));
/// assert!(options.code_resolver.is_some());
/// ```
pub trait CodeResolver: Send + Sync {
    /// A guardrail of an agent or task written as a mapping (a rule in words needs no resolver:
    /// it is checked by the agent's model).
    fn guardrail(&self, reference: &Map<String, Value>) -> Option<Result<Guardrail, String>> {
        let _ = reference;
        None
    }
    /// A task's `condition`, which makes it a ConditionalTask: run only when the condition
    /// accepts the previous task's output.
    fn condition(&self, condition: &Value) -> Option<Result<Condition, String>> {
        let _ = condition;
        None
    }
    /// A task's `callback`, or the crew's `task_callback`.
    fn task_callback(&self, callback: &Value) -> Option<Result<TaskCallback, String>> {
        let _ = callback;
        None
    }
    /// An agent's `step_callback`, or the crew's.
    fn step_callback(&self, callback: &Value) -> Option<Result<StepCallback, String>> {
        let _ = callback;
        None
    }
}

/// The code of one agent.
#[derive(Clone, Default)]
pub(crate) struct AgentCode {
    pub guardrail: Option<Guardrail>,
    pub step_callback: Option<StepCallback>,
}

/// The code of one task.
#[derive(Clone, Default)]
pub(crate) struct TaskCode {
    /// In the order they apply: `guardrails` when given (CrewAI then ignores `guardrail`),
    /// else `guardrail`.
    pub guardrails: Vec<Guardrail>,
    pub condition: Option<Condition>,
    pub callback: Option<TaskCallback>,
}

/// The crew's code.
#[derive(Clone, Default)]
pub(crate) struct CrewCode {
    pub step_callback: Option<StepCallback>,
    pub task_callback: Option<TaskCallback>,
}

/// Everything resolved for a build, by agent and task key.
#[derive(Clone, Default)]
pub(crate) struct ResolvedCode {
    pub agents: BTreeMap<String, AgentCode>,
    pub tasks: BTreeMap<String, TaskCode>,
    pub crew: CrewCode,
}

/// The message for a guardrail mapping nothing resolves.
pub(crate) fn code_reference(
    owner: &str,
    field: &str,
    reference: &Map<String, Value>,
    origin: &Origin,
) -> Diagnostic {
    let shown = Value::Object(reference.clone()).to_string();
    origin
        .diagnostic(format!("{owner} field '{field}' refers to code ({shown}), which a project file cannot run"))
        .with_hint(Some("write the guardrail as a rule in words (checked by the agent's model), or attach a function from Rust (BuildOptions::with_code_resolver)".into()))
}

/// Resolves fields one by one, collecting every problem.
struct Resolution<'a> {
    resolver: Option<&'a dyn CodeResolver>,
    diagnostics: Vec<Diagnostic>,
}

impl Resolution<'_> {
    fn guardrail(
        &mut self,
        owner: &str,
        field: &str,
        spec: &GuardrailSpec,
        origin: &Origin,
    ) -> Option<Guardrail> {
        match spec {
            GuardrailSpec::Rule(rule) => Some(Guardrail::llm(rule.trim().to_string())),
            GuardrailSpec::Reference(reference) => {
                match self.resolver.and_then(|r| r.guardrail(reference)) {
                    Some(Ok(guardrail)) => Some(guardrail),
                    Some(Err(why)) => {
                        self.diagnostics
                            .push(origin.diagnostic(format!("{owner} field '{field}': {why}")));
                        None
                    }
                    None => {
                        self.diagnostics
                            .push(code_reference(owner, field, reference, origin));
                        None
                    }
                }
            }
        }
    }

    /// A value-typed code field: `resolve` asks the resolver; `why` is what a user without one
    /// is told.
    fn code<T>(
        &mut self,
        owner: &str,
        field: &str,
        value: Option<&Value>,
        origin: Option<&Origin>,
        why: &str,
        resolve: impl Fn(&dyn CodeResolver, &Value) -> Option<Result<T, String>>,
    ) -> Option<T> {
        let (value, origin) = (value?, origin?);
        if !is_requested(value) {
            return None;
        }
        match self.resolver.and_then(|r| resolve(r, value)) {
            Some(Ok(code)) => Some(code),
            Some(Err(problem)) => {
                self.diagnostics
                    .push(origin.diagnostic(format!("{owner} field '{field}': {problem}")));
                None
            }
            None => {
                self.diagnostics
                    .push(not_supported(owner, field, why, origin, true));
                None
            }
        }
    }
}

const STEP_CALLBACK: &str = "Python callbacks cannot run here; register a step callback from Rust (crewai::Agent::builder().step_callback, or BuildOptions::with_code_resolver)";
const TASK_CALLBACK: &str = "Python callbacks cannot run here; register a task callback from Rust (crewai::Task::builder().callback, or BuildOptions::with_code_resolver)";
const CONDITION: &str = "conditional tasks need a Rust condition (crewai::Task::builder().condition, or BuildOptions::with_code_resolver)";

impl Project {
    /// Turns every guardrail, condition and callback the project names into code, through
    /// `resolver`; every field nothing resolves is reported at its place.
    pub(crate) fn resolve_code(
        &self,
        resolver: Option<&dyn CodeResolver>,
    ) -> Result<ResolvedCode, Vec<Diagnostic>> {
        let mut run = Resolution {
            resolver,
            diagnostics: Vec::new(),
        };
        let mut resolved = ResolvedCode::default();
        for agent in &self.agents {
            let owner = format!("agent '{}'", agent.key);
            let s = &agent.spec;
            let guardrail = match (&s.guardrail, s.origin("guardrail")) {
                (Some(spec), Some(origin)) => run.guardrail(&owner, "guardrail", spec, origin),
                _ => None,
            };
            let step_callback = run.code(
                &owner,
                "step_callback",
                s.step_callback.as_ref(),
                s.origin("step_callback"),
                STEP_CALLBACK,
                |r, v| r.step_callback(v),
            );
            resolved.agents.insert(
                agent.key.clone(),
                AgentCode {
                    guardrail,
                    step_callback,
                },
            );
        }
        for task in &self.tasks {
            let owner = format!("task '{}'", task.key);
            let s = &task.spec;
            let guardrails = match (&s.guardrails, s.origin("guardrails"), &s.guardrail) {
                (Some(list), Some(origin), _) => {
                    let many = matches!(list, OneOrMany::Many(_));
                    list.to_vec()
                        .iter()
                        .enumerate()
                        .filter_map(|(i, spec)| {
                            let at = if many {
                                origin.child(i)
                            } else {
                                origin.clone()
                            };
                            run.guardrail(&owner, "guardrails", spec, &at)
                        })
                        .collect()
                }
                (None, _, Some(spec)) => s
                    .origin("guardrail")
                    .and_then(|origin| run.guardrail(&owner, "guardrail", spec, origin))
                    .into_iter()
                    .collect(),
                _ => Vec::new(),
            };
            let condition = run.code(
                &owner,
                "condition",
                s.condition.as_ref(),
                s.origin("condition"),
                CONDITION,
                |r, v| r.condition(v),
            );
            let callback = run.code(
                &owner,
                "callback",
                s.callback.as_ref(),
                s.origin("callback"),
                TASK_CALLBACK,
                |r, v| r.task_callback(v),
            );
            resolved.tasks.insert(
                task.key.clone(),
                TaskCode {
                    guardrails,
                    condition,
                    callback,
                },
            );
        }
        let crew = &self.crew;
        resolved.crew = CrewCode {
            step_callback: run.code(
                "crew",
                "step_callback",
                crew.step_callback.as_ref(),
                crew.origin("step_callback"),
                STEP_CALLBACK,
                |r, v| r.step_callback(v),
            ),
            task_callback: run.code(
                "crew",
                "task_callback",
                crew.task_callback.as_ref(),
                crew.origin("task_callback"),
                TASK_CALLBACK,
                |r, v| r.task_callback(v),
            ),
        };
        if run.diagnostics.is_empty() {
            Ok(resolved)
        } else {
            Err(run.diagnostics)
        }
    }
}
