//! A [`FlowDeclaration`] onto [`crewai_flow::Flow`]: one engine method per declared method, its
//! trigger, router labels, persistence and human feedback as the engine's own; the action reads
//! the state and the outputs so far through CEL.

use std::sync::Arc;

use crewai_core::interpolate::Inputs;
use crewai_flow::{Flow, FlowBuilder, FlowContext, MethodError};
use serde_json::{Map, Value, json};

use super::{
    Action, DeclaredMethod, DeclaredRole, ExpressionScope, FlowDeclaration, StateContract,
};
use crate::ProjectError;
use crate::memory::flow_memory;
use crate::options::BuildOptions;

/// What every method of one built flow shares.
struct Shared {
    /// Every method, by name: expressions read their latest outputs as `outputs.<name>`.
    methods: Vec<(String, bool)>,
    state: StateContract,
    options: BuildOptions,
}

pub(super) fn builder(
    declaration: &FlowDeclaration,
    options: &BuildOptions,
) -> Result<FlowBuilder, ProjectError> {
    let memory = match &declaration.memory {
        Some(spec) => Some(flow_memory(
            &declaration.root,
            &declaration.name,
            spec.embedder.as_ref(),
            options,
        )?),
        None => None,
    };
    let mut options = options.clone();
    if let Some(memory) = &memory {
        options = options.with_flow_memory(memory.clone());
    }
    let shared = Arc::new(Shared {
        methods: declaration
            .methods
            .iter()
            .map(|m| (m.name.clone(), m.feedback.is_some()))
            .collect(),
        state: declaration.state.clone(),
        options: options.clone(),
    });
    let mut builder = Flow::builder()
        .name(declaration.name.clone())
        .initial_state(declaration.state.defaults.clone())
        .max_method_calls(declaration.max_method_calls);
    if declaration.emit_events
        && let Some(bus) = &options.event_bus
    {
        builder = builder.event_bus(bus.clone());
    }
    if declaration.persist {
        builder = builder.persist();
    }
    if let Some(memory) = memory {
        builder = builder.memory(memory);
    }
    for method in &declaration.methods {
        let method_shared = Arc::clone(&shared);
        let declared = Arc::new(method.clone());
        // A start run at kickoff checks the state first: nothing has run yet, and declared
        // actions never write the state, so this is the kickoff state.
        let checks_state = matches!(method.role, DeclaredRole::Start);
        let run = move |ctx: FlowContext| {
            let shared = Arc::clone(&method_shared);
            let declared = Arc::clone(&declared);
            async move {
                if checks_state {
                    shared
                        .state
                        .check_run_state(&ctx.state())
                        .map_err(MethodError::msg)?;
                }
                run_action(&declared, &ctx, &shared).await
            }
        };
        let name = method.name.clone();
        builder = match &method.role {
            DeclaredRole::Start => builder.start(name, run),
            DeclaredRole::StartOn(trigger) => builder.start_on(name, trigger.clone(), run),
            DeclaredRole::Listen(trigger) => builder.listen(name, trigger.clone(), run),
            DeclaredRole::Router { trigger, labels } => builder
                .router(name, trigger.clone(), move |ctx: FlowContext| {
                    let run = run.clone();
                    async move { label_of(run(ctx).await?) }
                })
                .emits(labels.clone()),
        };
        if method.persist {
            builder = builder.persist_method();
        }
        if let Some(feedback) = &method.feedback {
            builder = builder.human_feedback(feedback.clone());
        }
    }
    Ok(builder)
}

/// A router's label: its output when that is text, else the `raw` text of a crew or agent
/// output; surrounding space (a model's trailing newline) is not part of the label.
fn label_of(output: Value) -> Result<String, MethodError> {
    let label = match &output {
        Value::String(label) => Some(label.as_str()),
        Value::Object(fields) => fields.get("raw").and_then(Value::as_str),
        _ => None,
    };
    label.map(|l| l.trim().to_string()).ok_or_else(|| {
        MethodError::msg(format!(
            "a router's output must be a label (text), not {output}"
        ))
    })
}

/// What an expression sees: the state, and the latest output of every method that has run (for
/// a method with human feedback, `{output, feedback, outcome}` once it was answered).
fn scope(ctx: &FlowContext, shared: &Shared) -> ExpressionScope {
    let mut outputs = Map::new();
    for (name, has_feedback) in &shared.methods {
        let Some(output) = ctx.method_output(name) else {
            continue;
        };
        let value = match ctx.feedback_of(name).filter(|_| *has_feedback) {
            Some(record) => json!({
                "output": output,
                "feedback": record.feedback,
                "outcome": record.outcome,
            }),
            None => output,
        };
        outputs.insert(name.clone(), value);
    }
    ExpressionScope {
        state: ctx.state(),
        outputs,
    }
}

async fn run_action(
    method: &DeclaredMethod,
    ctx: &FlowContext,
    shared: &Shared,
) -> Result<Value, MethodError> {
    let scope = scope(ctx, shared);
    match &method.action {
        Action::Expression(expression) => Ok(expression.evaluate(&scope)?),
        Action::Crew { project, inputs } => {
            let inputs: Inputs = match inputs.render(&scope)? {
                Value::Object(map) => map.into_iter().collect(),
                other => {
                    return Err(MethodError::msg(format!(
                        "method '{}': the crew's inputs must render to a mapping, not {other}",
                        method.name
                    )));
                }
            };
            let crew = project.build(&inputs, &shared.options)?;
            // The crew draws from the flow's budget, and hangs under this method's event.
            let output = crew
                .kickoff_with(
                    project.effective_inputs(&inputs),
                    ctx.crew_kickoff_options(),
                )
                .await?;
            Ok(serde_json::to_value(&output)?)
        }
        Action::Agent {
            project,
            key,
            input,
        } => {
            let input = match input.render(&scope)? {
                Value::String(text) => text,
                other => {
                    return Err(MethodError::msg(format!(
                        "method '{}': the agent's input must render to text, not {other}",
                        method.name
                    )));
                }
            };
            let agent = project.build_agent(key, &shared.options)?;
            let output = agent
                .kickoff_with(input, ctx.agent_kickoff_options())
                .await?;
            // The names of CrewAI's LiteAgentOutput, which expressions read.
            Ok(json!({
                "raw": output.raw,
                "pydantic": output.typed,
                "agent_role": output.agent_role,
                "usage_metrics": output.usage,
            }))
        }
    }
}
