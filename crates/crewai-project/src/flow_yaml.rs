//! Declarative flows: `flow.yaml` in a project folder, run by the CLI without compiling.
//!
//! ```yaml
//! name: support-triage
//! inputs: { ticket: I was charged twice. }   # the initial state; kickoff inputs override it
//! max_cost_usd: 0.05   # optional run budgets, over every crew and agent call of the flow
//! max_tokens: 20000
//! methods:
//!   classify:
//!     start: true
//!     agent: { role: Triage clerk, goal: Sort tickets, backstory: You read every ticket., llm: openai/gpt-4o-mini }
//!     prompt: "Is this ticket about billing? {ticket}"
//!   triage:
//!     router: classify
//!     emits: [billing, general]
//!     route: { if_contains: { text: billing, then: billing, else: general } }
//!   billing_team:
//!     listen: billing
//!     crew: crews/billing        # a crew project, relative to flow.yaml
//!   general_reply:
//!     listen: general
//!     set: { answer: "We will get back to you." }
//! ```
//!
//! A method has one trigger (`start: true`, `listen: <trigger>` or `router: <trigger>`, where a
//! trigger is a method name, a label, or `{or: [..]}` / `{and: [..]}`) and one step: `crew:`,
//! `agent:` + `prompt:`, `set:`, or (routers only) `route:`. Every method's output is also written
//! into the state under the method's name, so later prompts and crews can use `{classify}`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crewai_core::agent::Agent;
use crewai_core::interpolate::{Inputs, Location, interpolate};
use crewai_core::usage::Budget;
use crewai_flow::{Flow, FlowContext, MethodError, Trigger};
use crewai_llm::LlmConfig;
use serde_json::{Map, Value};

use crate::Project;
use crate::error::{Diagnostic, ProjectError, did_you_mean};
use crate::options::{BuildOptions, make_llm};
use crate::source::{Format, SourceFile};
use crate::spec::Origin;

/// The file name of a declarative flow.
pub const FLOW_FILE: &str = "flow.yaml";

const METHOD_KEYS: &[&str] = &[
    "start", "listen", "router", "emits", "crew", "agent", "prompt", "set", "route",
];
const AGENT_KEYS: &[&str] = &["role", "goal", "backstory", "llm"];

/// A loaded and checked `flow.yaml`.
#[derive(Debug, Clone)]
pub struct FlowProject {
    /// The folder holding `flow.yaml`.
    pub root: PathBuf,
    pub name: String,
    /// `inputs:`: the state a kickoff starts from (kickoff inputs are laid over it).
    pub inputs: Map<String, Value>,
    /// Methods in file order.
    pub methods: Vec<FlowMethod>,
    /// `max_cost_usd:` / `max_tokens:`: the run's budget over every crew and agent call.
    pub budget: Budget,
}

/// One method of a declarative flow.
#[derive(Debug, Clone)]
pub struct FlowMethod {
    pub name: String,
    pub role: FlowMethodRole,
    pub step: FlowStep,
    pub origin: Origin,
}

/// When a method runs.
#[derive(Debug, Clone)]
pub enum FlowMethodRole {
    Start,
    Listen(Trigger),
    Router {
        trigger: Trigger,
        emits: Vec<String>,
    },
}

/// What a method does.
#[derive(Debug, Clone)]
pub enum FlowStep {
    /// Kicks off a crew project with the flow state as inputs; the output is the crew's raw text.
    Crew {
        path: PathBuf,
        project: Box<Project>,
    },
    /// Asks one agent `prompt` (with `{state_field}` placeholders filled from the state).
    Agent {
        role: String,
        goal: String,
        backstory: String,
        llm: Option<Box<LlmConfig>>,
        prompt: String,
    },
    /// Writes these keys into the state; the output is the mapping.
    Set(Map<String, Value>),
    /// A router rule on the triggering output: `then` when it contains `text` (ignoring case), else `otherwise`.
    RouteIfContains {
        text: String,
        then: String,
        otherwise: String,
    },
}

impl FlowProject {
    /// Reads `dir/flow.yaml` and every crew project it names; all problems come back together,
    /// each with its file and line.
    pub fn load(dir: impl AsRef<Path>) -> Result<FlowProject, ProjectError> {
        let root = dir.as_ref().to_path_buf();
        let source = Arc::new(SourceFile::read(
            &root.join(FLOW_FILE),
            &root,
            Format::Yaml,
        )?);
        let document = source.parse().map_err(|d| ProjectError::Invalid(vec![d]))?;
        let mut diagnostics = Vec::new();
        let top = Origin::new(&source, Vec::new());
        let Value::Object(document) = document else {
            return Err(ProjectError::Invalid(vec![Diagnostic::in_file(
                FLOW_FILE,
                "expected a mapping with `methods:`",
            )]));
        };
        const FLOW_KEYS: &[&str] = &["name", "inputs", "methods", "max_cost_usd", "max_tokens"];
        for key in document.keys().filter(|k| !FLOW_KEYS.contains(&k.as_str())) {
            diagnostics.push(unknown_key(
                &top.child(key.as_str()),
                key,
                FLOW_KEYS,
                "the flow",
            ));
        }
        let inputs = match document.get("inputs") {
            None => Map::new(),
            Some(Value::Object(inputs)) => inputs.clone(),
            Some(_) => {
                diagnostics.push(
                    top.child("inputs")
                        .diagnostic("`inputs` must be a mapping of state keys to values"),
                );
                Map::new()
            }
        };
        let name = match document.get("name") {
            None => root
                .canonicalize()
                .ok()
                .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                .unwrap_or_else(|| "flow".into()),
            Some(Value::String(name)) => name.clone(),
            Some(_) => {
                diagnostics.push(top.child("name").diagnostic("`name` must be text"));
                String::new()
            }
        };
        let budget = Budget {
            max_cost_usd: match document.get("max_cost_usd") {
                None => None,
                Some(value) => match value.as_f64().filter(|usd| usd.is_finite() && *usd > 0.0) {
                    Some(usd) => Some(usd),
                    None => {
                        diagnostics.push(top.child("max_cost_usd").diagnostic(
                            "`max_cost_usd` must be a positive number of US dollars (leave it out for no limit)",
                        ));
                        None
                    }
                },
            },
            max_tokens: match document.get("max_tokens") {
                None => None,
                Some(value) => match value.as_u64().filter(|tokens| *tokens > 0) {
                    Some(tokens) => Some(tokens),
                    None => {
                        diagnostics.push(top.child("max_tokens").diagnostic(
                            "`max_tokens` must be a whole number of at least 1 (leave it out for no limit)",
                        ));
                        None
                    }
                },
            },
        };
        let mut methods = Vec::new();
        match document.get("methods") {
            Some(Value::Object(entries)) => {
                for (method, value) in entries {
                    let origin = top.child("methods").child(method.as_str());
                    if let Some(parsed) =
                        parse_method(&root, method, value, &origin, &mut diagnostics)
                    {
                        methods.push(parsed);
                    }
                }
            }
            _ => diagnostics.push(Diagnostic::in_file(
                FLOW_FILE,
                "`methods:` must be a mapping of method names to their trigger and step",
            )),
        }
        check_triggers(&methods, &mut diagnostics);
        if diagnostics.is_empty()
            && !methods
                .iter()
                .any(|m| matches!(m.role, FlowMethodRole::Start))
        {
            diagnostics.push(Diagnostic::in_file(
                FLOW_FILE,
                "no method has `start: true`; mark the first step of the flow",
            ));
        }
        if !diagnostics.is_empty() {
            return Err(ProjectError::Invalid(diagnostics));
        }
        Ok(FlowProject {
            root,
            name,
            inputs,
            methods,
            budget,
        })
    }

    /// Builds the runnable flow; crews and agents are built at each call with these options.
    pub fn build(&self, options: &BuildOptions) -> Result<Flow, ProjectError> {
        let mut builder = Flow::builder()
            .name(self.name.clone())
            .initial_state(self.inputs.clone());
        if let Some(bus) = &options.event_bus {
            builder = builder.event_bus(bus.clone());
        }
        if let Some(usd) = self.budget.max_cost_usd {
            builder = builder.max_cost_usd(usd);
        }
        if let Some(tokens) = self.budget.max_tokens {
            builder = builder.max_tokens(tokens);
        }
        for method in &self.methods {
            let step = Arc::new(method.step.clone());
            let options = options.clone();
            let name = method.name.clone();
            let run = move |ctx: FlowContext| {
                let step = Arc::clone(&step);
                let options = options.clone();
                let name = name.clone();
                async move {
                    let output = run_step(&name, &step, &ctx, &options).await?;
                    ctx.update_state(|s| s.insert(name.clone(), output.clone()));
                    Ok(output)
                }
            };
            builder = match &method.role {
                FlowMethodRole::Start => builder.start(method.name.clone(), run),
                FlowMethodRole::Listen(trigger) => {
                    builder.listen(method.name.clone(), trigger.clone(), run)
                }
                FlowMethodRole::Router { trigger, emits } => builder
                    .router(
                        method.name.clone(),
                        trigger.clone(),
                        move |ctx: FlowContext| {
                            let run = run.clone();
                            async move {
                                match run(ctx).await? {
                                    Value::String(label) => Ok(label),
                                    other => Err(MethodError::msg(format!(
                                        "a router step must produce a label, not {other}"
                                    ))),
                                }
                            }
                        },
                    )
                    .emits(emits.clone()),
            };
        }
        builder
            .build()
            .map_err(|err| ProjectError::build(format!("flow '{}' ({FLOW_FILE})", self.name), err))
    }
}

async fn run_step(
    method: &str,
    step: &FlowStep,
    ctx: &FlowContext,
    options: &BuildOptions,
) -> Result<Value, MethodError> {
    let inputs: Inputs = ctx.state().into_iter().collect();
    match step {
        FlowStep::Set(values) => {
            ctx.update_state(|s| s.extend(values.clone()));
            Ok(Value::Object(values.clone()))
        }
        FlowStep::RouteIfContains {
            text,
            then,
            otherwise,
        } => {
            let seen = match ctx.trigger_output() {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            };
            let label = if seen.to_lowercase().contains(&text.to_lowercase()) {
                then
            } else {
                otherwise
            };
            Ok(Value::String(label.clone()))
        }
        FlowStep::Agent {
            role,
            goal,
            backstory,
            llm,
            prompt,
        } => {
            let location = Location {
                owner: format!("flow method '{method}'"),
                field: "prompt",
            };
            let prompt = interpolate(prompt, &inputs, &location)?;
            let llm = make_llm(
                llm.as_deref(),
                &format!("flow method '{method}'"),
                None,
                options,
            )?;
            let agent = Agent::builder()
                .role(role.clone())
                .goal(goal.clone())
                .backstory(backstory.clone())
                .llm(llm)
                .build()?;
            let output = agent
                .kickoff_with(prompt, ctx.agent_kickoff_options())
                .await?;
            Ok(Value::String(output.raw))
        }
        FlowStep::Crew { project, .. } => {
            let crew = project.build(&inputs, options)?;
            // The crew draws from the flow's budget, and hangs under this method's event.
            let output = crew
                .kickoff_with(
                    project.effective_inputs(&inputs),
                    ctx.crew_kickoff_options(),
                )
                .await?;
            Ok(Value::String(output.raw))
        }
    }
}

pub(crate) fn unknown_key(origin: &Origin, key: &str, known: &[&str], owner: &str) -> Diagnostic {
    let hint = did_you_mean(key, known.iter().copied())
        .unwrap_or_else(|| format!("known keys: {}", known.join(", ")));
    origin
        .diagnostic(format!("{owner} has an unknown key '{key}'"))
        .with_hint(Some(hint))
}

fn text_field(
    map: &Map<String, Value>,
    key: &str,
    origin: &Origin,
    owner: &str,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<String> {
    match map.get(key) {
        Some(Value::String(text)) => Some(text.trim().to_string()),
        Some(_) => {
            diagnostics.push(
                origin
                    .child(key)
                    .diagnostic(format!("{owner}: `{key}` must be text")),
            );
            None
        }
        None => {
            diagnostics.push(origin.diagnostic(format!("{owner} needs `{key}`")));
            None
        }
    }
}

fn parse_method(
    root: &Path,
    name: &str,
    value: &Value,
    origin: &Origin,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<FlowMethod> {
    let owner = format!("method '{name}'");
    let Value::Object(map) = value else {
        diagnostics.push(origin.diagnostic(format!(
            "{owner} must be a mapping with a trigger and a step"
        )));
        return None;
    };
    let before = diagnostics.len();
    for key in map.keys().filter(|k| !METHOD_KEYS.contains(&k.as_str())) {
        diagnostics.push(unknown_key(
            &origin.child(key.as_str()),
            key,
            METHOD_KEYS,
            &owner,
        ));
    }
    let trigger = |key: &str, diagnostics: &mut Vec<Diagnostic>| {
        map.get(key).and_then(|v| {
            parse_trigger(v)
                .map_err(|m| {
                    diagnostics.push(origin.child(key).diagnostic(format!("{owner}: {m}")))
                })
                .ok()
        })
    };
    let start = match map.get("start") {
        None | Some(Value::Bool(false)) => false,
        Some(Value::Bool(true)) => true,
        Some(_) => {
            diagnostics.push(
                origin
                    .child("start")
                    .diagnostic(format!("{owner}: `start` must be true or false")),
            );
            false
        }
    };
    let listen = trigger("listen", diagnostics);
    let router = trigger("router", diagnostics);
    let chosen = usize::from(start)
        + usize::from(map.contains_key("listen"))
        + usize::from(map.contains_key("router"));
    if chosen != 1 {
        diagnostics.push(origin.diagnostic(format!(
            "{owner} needs exactly one of `start: true`, `listen: <trigger>` or `router: <trigger>`"
        )));
    }
    let emits: Vec<String> = match map.get("emits") {
        None => Vec::new(),
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => items
            .iter()
            .filter_map(|v| v.as_str().map(String::from))
            .collect(),
        Some(_) => {
            diagnostics.push(
                origin
                    .child("emits")
                    .diagnostic(format!("{owner}: `emits` must be a list of labels")),
            );
            Vec::new()
        }
    };
    if map.contains_key("emits") && !map.contains_key("router") {
        diagnostics.push(
            origin
                .child("emits")
                .diagnostic(format!("{owner}: `emits` applies to routers only")),
        );
    }
    let steps: Vec<&str> = ["crew", "agent", "set", "route"]
        .into_iter()
        .filter(|k| map.contains_key(*k))
        .collect();
    if steps.len() != 1 {
        diagnostics.push(origin.diagnostic(format!("{owner} needs exactly one step: `crew:`, `agent:` + `prompt:`, `set:` or (routers) `route:`")).with_hint(
            (!steps.is_empty()).then(|| format!("found: {}", steps.join(", "))),
        ));
        return None;
    }
    if map.contains_key("prompt") && steps[0] != "agent" {
        diagnostics.push(
            origin
                .child("prompt")
                .diagnostic(format!("{owner}: `prompt` goes with an `agent:` step")),
        );
    }
    let step = match steps[0] {
        "crew" => {
            let relative = text_field(map, "crew", origin, &owner, diagnostics)?;
            let path = root.join(&relative);
            match Project::load(&path) {
                Ok(project) => FlowStep::Crew {
                    path,
                    project: Box::new(project),
                },
                Err(error) => {
                    let message = match &error {
                        ProjectError::Invalid(list) => list
                            .iter()
                            .map(|d| format!("{relative}/{d}"))
                            .collect::<Vec<_>>()
                            .join("; "),
                        other => other.to_string(),
                    };
                    diagnostics.push(origin.child("crew").diagnostic(format!(
                        "{owner}: crew project '{relative}' cannot be loaded: {message}"
                    )));
                    return None;
                }
            }
        }
        "agent" => {
            let agent_origin = origin.child("agent");
            let Some(Value::Object(agent)) = map.get("agent") else {
                diagnostics.push(agent_origin.diagnostic(format!("{owner}: `agent` must be a mapping with role, goal, backstory and optionally llm")));
                return None;
            };
            for key in agent.keys().filter(|k| !AGENT_KEYS.contains(&k.as_str())) {
                diagnostics.push(unknown_key(
                    &agent_origin.child(key.as_str()),
                    key,
                    AGENT_KEYS,
                    &format!("the agent of {owner}"),
                ));
            }
            let llm = match agent.get("llm") {
                None => None,
                Some(value) => match serde_json::from_value::<LlmConfig>(value.clone()) {
                    Ok(config) => Some(Box::new(config)),
                    Err(err) => {
                        diagnostics.push(
                            agent_origin
                                .child("llm")
                                .diagnostic(format!("{owner}: invalid `llm`: {err}")),
                        );
                        None
                    }
                },
            };
            let role = text_field(agent, "role", &agent_origin, &owner, diagnostics);
            let goal = text_field(agent, "goal", &agent_origin, &owner, diagnostics);
            let backstory = text_field(agent, "backstory", &agent_origin, &owner, diagnostics);
            let prompt = text_field(map, "prompt", origin, &owner, diagnostics);
            FlowStep::Agent {
                role: role?,
                goal: goal?,
                backstory: backstory?,
                llm,
                prompt: prompt?,
            }
        }
        "set" => match map.get("set") {
            Some(Value::Object(values)) => FlowStep::Set(values.clone()),
            _ => {
                diagnostics.push(origin.child("set").diagnostic(format!(
                    "{owner}: `set` must be a mapping of state keys to values"
                )));
                return None;
            }
        },
        _ => parse_route(map, origin, &owner, &emits, diagnostics)?,
    };
    if matches!(step, FlowStep::RouteIfContains { .. }) != router.is_some() {
        let message = if router.is_some() {
            "a router needs a `route:` step that picks its label"
        } else {
            "`route:` is a router step; use `router: <trigger>`"
        };
        diagnostics.push(origin.diagnostic(format!("{owner}: {message}")));
    }
    if diagnostics.len() > before {
        return None;
    }
    let role = match (listen, router) {
        (Some(trigger), _) => FlowMethodRole::Listen(trigger),
        (None, Some(trigger)) => FlowMethodRole::Router { trigger, emits },
        (None, None) => FlowMethodRole::Start,
    };
    Some(FlowMethod {
        name: name.to_string(),
        role,
        step,
        origin: origin.clone(),
    })
}

fn parse_route(
    map: &Map<String, Value>,
    origin: &Origin,
    owner: &str,
    emits: &[String],
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<FlowStep> {
    let route = origin.child("route");
    let rule = match map.get("route") {
        Some(Value::Object(rule)) if rule.len() == 1 && rule.contains_key("if_contains") => {
            rule.get("if_contains")
        }
        _ => None,
    };
    let Some(Value::Object(rule)) = rule else {
        diagnostics.push(route.diagnostic(format!(
            "{owner}: `route` must be `{{if_contains: {{text, then, else}}}}`"
        )));
        return None;
    };
    let rule_origin = route.child("if_contains");
    for key in rule
        .keys()
        .filter(|k| !["text", "then", "else"].contains(&k.as_str()))
    {
        diagnostics.push(unknown_key(
            &rule_origin.child(key.as_str()),
            key,
            &["text", "then", "else"],
            &format!("the route of {owner}"),
        ));
    }
    let text = text_field(rule, "text", &rule_origin, owner, diagnostics);
    let then = text_field(rule, "then", &rule_origin, owner, diagnostics);
    let otherwise = text_field(rule, "else", &rule_origin, owner, diagnostics);
    let (text, then, otherwise) = (text?, then?, otherwise?);
    for (key, label) in [("then", &then), ("else", &otherwise)] {
        if !emits.contains(label) {
            diagnostics.push(
                rule_origin
                    .child(key)
                    .diagnostic(format!(
                        "{owner} routes to '{label}', which is not in its `emits`"
                    ))
                    .with_hint(Some(format!("declared: {}", emits.join(", ")))),
            );
        }
    }
    Some(FlowStep::RouteIfContains {
        text,
        then,
        otherwise,
    })
}

pub(crate) fn parse_trigger(value: &Value) -> Result<Trigger, String> {
    match value {
        Value::String(name) => Ok(crewai_flow::on(name.as_str())),
        Value::Object(map) if map.len() == 1 => {
            let (combinator, parts) = map.iter().next().ok_or("an empty trigger")?;
            let Value::Array(parts) = parts else {
                return Err(format!("`{combinator}` takes a list of triggers"));
            };
            let parts = parts
                .iter()
                .map(parse_trigger)
                .collect::<Result<Vec<_>, _>>()?;
            match combinator.as_str() {
                "or" => Ok(crewai_flow::or(parts)),
                "and" => Ok(crewai_flow::and(parts)),
                other => Err(format!(
                    "unknown trigger combinator '{other}'; use `or` or `and`"
                )),
            }
        }
        _ => Err("a trigger is a method name, a label, or `{or: [..]}` / `{and: [..]}`".into()),
    }
}

/// Every trigger must name a method or a label some router emits.
fn check_triggers(methods: &[FlowMethod], diagnostics: &mut Vec<Diagnostic>) {
    let mut known: BTreeSet<&str> = methods.iter().map(|m| m.name.as_str()).collect();
    for method in methods {
        if let FlowMethodRole::Router { emits, .. } = &method.role {
            known.extend(emits.iter().map(String::as_str));
        }
    }
    for method in methods {
        let (key, trigger) = match &method.role {
            FlowMethodRole::Start => continue,
            FlowMethodRole::Listen(trigger) => ("listen", trigger),
            FlowMethodRole::Router { trigger, .. } => ("router", trigger),
        };
        for name in trigger.names() {
            if !known.contains(name) {
                let hint = did_you_mean(name, known.iter().copied()).unwrap_or_else(|| {
                    format!(
                        "known methods and labels: {}",
                        known.iter().copied().collect::<Vec<_>>().join(", ")
                    )
                });
                diagnostics.push(
                    method.origin.child(key).diagnostic(format!("method '{}' is triggered by '{name}', which is neither a method nor a label a router emits", method.name)).with_hint(Some(hint)),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(yaml: &str) -> Result<FlowProject, ProjectError> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FLOW_FILE), yaml).unwrap();
        FlowProject::load(dir.path())
    }

    fn errors(yaml: &str) -> String {
        load(yaml).unwrap_err().to_string()
    }

    const VALID: &str = "name: triage\ninputs: {ticket: none}\nmethods:\n  classify:\n    start: true\n    set: {category: billing}\n  pick:\n    router: classify\n    emits: [billing, other]\n    route: {if_contains: {text: billing, then: billing, else: other}}\n  pay:\n    listen: billing\n    set: {answer: refund}\n  done:\n    listen: {or: [pay, other]}\n    set: {finished: true}\n";

    #[tokio::test]
    async fn a_valid_flow_loads_and_runs() {
        let flow_project = load(VALID).unwrap();
        assert_eq!(flow_project.name, "triage");
        assert_eq!(flow_project.methods.len(), 4);
        let flow = flow_project
            .build(&BuildOptions::new(crate::ToolRegistry::new()))
            .unwrap();
        let output = flow
            .kickoff([("ticket", serde_json::json!("x"))])
            .await
            .unwrap();
        assert_eq!(output.state["answer"], "refund");
        assert_eq!(output.state["ticket"], "x");
        assert_eq!(output.state["pick"], "billing");
        assert_eq!(output.result, Some(serde_json::json!({"finished": true})));
        assert!(flow.to_mermaid().contains("billing"));
    }

    #[test]
    fn unknown_trigger_names_the_method_and_line() {
        let text = errors(&VALID.replace("listen: billing", "listen: biling"));
        assert!(
            text.contains("flow.yaml:12: method 'pay' is triggered by 'biling'"),
            "{text}"
        );
        assert!(text.contains("did you mean 'billing'?"), "{text}");
    }

    #[test]
    fn unknown_keys_and_bad_steps_have_lines() {
        let bad_route = VALID.replace("then: billing", "then: bill");
        for (yaml, expected) in [
            (
                "methods:\n  a:\n    start: true\n    sett: {x: 1}\n",
                "flow.yaml:4: method 'a' has an unknown key 'sett'; did you mean 'set'?",
            ),
            (
                "methods:\n  a:\n    start: true\n    agent: {role: r, goal: g}\n    prompt: hi\n",
                "flow.yaml:4: method 'a' needs `backstory`",
            ),
            (
                "methods:\n  a:\n    start: true\n    crew: missing\n",
                "flow.yaml:4: method 'a': crew project 'missing' cannot be loaded",
            ),
            (
                bad_route.as_str(),
                "routes to 'bill', which is not in its `emits`",
            ),
            (
                "methods:\n  a:\n    listen: {xor: [b]}\n    set: {}\n",
                "flow.yaml:3: method 'a': unknown trigger combinator 'xor'",
            ),
        ] {
            let text = errors(yaml);
            assert!(text.contains(expected), "{expected}: {text}");
        }
    }

    #[test]
    fn budgets_are_read_and_checked() {
        let project = load(&format!("max_cost_usd: 0.5\nmax_tokens: 1200\n{VALID}")).unwrap();
        assert_eq!(
            project.budget,
            Budget {
                max_cost_usd: Some(0.5),
                max_tokens: Some(1200)
            }
        );
        let flow = project
            .build(&BuildOptions::new(crate::ToolRegistry::new()))
            .unwrap();
        assert_eq!(flow.budget(), project.budget);
        let text = errors(&format!("max_cost_usd: -1\nmax_tokens: lots\n{VALID}"));
        assert!(
            text.contains("flow.yaml:1: `max_cost_usd` must be a positive number"),
            "{text}"
        );
        assert!(
            text.contains("flow.yaml:2: `max_tokens` must be a whole number"),
            "{text}"
        );
    }

    #[test]
    fn a_flow_needs_a_start() {
        let text = errors("methods:\n  a:\n    listen: a\n    set: {}\n");
        assert!(text.contains("no method has `start: true`"), "{text}");
    }
}
