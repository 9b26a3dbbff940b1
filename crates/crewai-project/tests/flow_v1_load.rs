//! Loading CrewAI's declarative flows (`schema: crewai.flow/v1`): every construct read into the
//! declaration, and every refusal with its file, line and what to do.

mod common;

use std::path::Path;

use crewai_flow::{HumanFeedback, and, on, or};
use crewai_project::ProjectError;
use crewai_project::flow_v1::{Action, AnyFlow, DeclaredRole, FlowDeclaration};
use serde_json::json;

use common::write;

fn load_in(dir: &Path, yaml: &str) -> Result<FlowDeclaration, ProjectError> {
    write(dir, &[("flow.yaml", yaml)]);
    FlowDeclaration::load(dir.join("flow.yaml"))
}

fn load(yaml: &str) -> FlowDeclaration {
    let dir = tempfile::tempdir().unwrap();
    load_in(dir.path(), yaml).unwrap_or_else(|err| panic!("should load:\n{err}"))
}

fn errors(yaml: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    match load_in(dir.path(), yaml) {
        Ok(_) => panic!("should not load:\n{yaml}"),
        Err(err) => err.to_string(),
    }
}

fn assert_has(text: &str, part: &str) {
    assert!(text.contains(part), "expected `{part}` in:\n{text}");
}

const AGENT: &str =
    "role: Researcher\n            goal: Research {topic}\n            backstory: Careful.";

fn every_construct() -> String {
    format!(
        "schema: crewai.flow/v1
name: Everything
description: Reads every construct.
state:
  type: dict
  default: {{topic: AI agents, limit: 3}}
config:
  max_method_calls: 12
  suppress_flow_events: true
  tracing: false
  stream: false
persist: {{enabled: true}}
methods:
  seed:
    description: The first step.
    start: true
    do: {{call: expression, expr: \"size(state.topic) > 3 ? 'deep' : 'quick'\"}}
  route:
    listen: seed
    router: true
    emit: [deep, quick]
    do: {{call: expression, expr: outputs.seed}}
  route_inferred:
    listen: {{or: [seed, route]}}
    router: true
    do: {{call: expression, expr: \"'again_label'\"}}
  again:
    start: again_label
    do: {{call: expression, expr: \"1\"}}
  research:
    listen: {{and: [deep, seed]}}
    persist: {{enabled: true}}
    do:
      call: crew
      with:
        name: inline_research
        process: sequential
        agents:
          researcher:
            {AGENT}
        tasks:
          - name: find
            description: Research {{topic}}
            expected_output: Notes
            agent: researcher
        inputs: {{topic: Default topic, limit: 1}}
      inputs: {{topic: \"${{state.topic}}\"}}
  listed:
    listen: quick
    do:
      call: crew
      with:
        agents:
          - name: writer
            role: Writer
            goal: Write
            backstory: Writes.
          - editor: {{role: Editor, goal: Edit, backstory: Edits.}}
        tasks:
          - {{description: Write, expected_output: Text, agent: writer}}
          - {{description: Edit, expected_output: Text, agent: editor}}
  ask:
    listen: research
    human_feedback:
      message: Approve the notes?
      emit: [approved, rejected]
      default_outcome: rejected
    do:
      call: agent
      with:
        role: Analyst
        goal: Answer questions
        backstory: Precise.
        settings: {{llm: openai/gpt-4o-mini, max_iter: 3}}
        input: \"Notes: ${{outputs.research.raw}}\"
  publish:
    listen: approved
    human_feedback: {{message: Anything to add?}}
    do: {{call: expression, expr: \"'published'\"}}
  redo:
    listen: {{or: [rejected, again_label]}}
    do: {{call: expression, expr: \"'redo'\"}}
"
    )
}

#[test]
fn every_construct_is_read_into_the_declaration() {
    let flow = load(&every_construct());
    assert_eq!(flow.name, "Everything");
    assert_eq!(flow.description.as_deref(), Some("Reads every construct."));
    assert_eq!(flow.file, "flow.yaml");
    assert_eq!(
        serde_json::Value::Object(flow.state.defaults.clone()),
        json!({"topic": "AI agents", "limit": 3})
    );
    assert!(flow.state.json_schema.is_none());
    assert_eq!(flow.max_method_calls, 12);
    assert!(!flow.emit_events);
    assert!(flow.persist);
    assert!(flow.warnings.is_empty(), "{:?}", flow.warnings);
    let names: Vec<&str> = flow.methods.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "seed",
            "route",
            "route_inferred",
            "again",
            "research",
            "listed",
            "ask",
            "publish",
            "redo"
        ]
    );
    let method = |name: &str| flow.methods.iter().find(|m| m.name == name).unwrap();

    let seed = method("seed");
    assert!(matches!(seed.role, DeclaredRole::Start));
    assert_eq!(seed.description.as_deref(), Some("The first step."));
    match &seed.action {
        Action::Expression(e) => assert_eq!(e.source(), "size(state.topic) > 3 ? 'deep' : 'quick'"),
        other => panic!("{other:?}"),
    }
    match &method("route").role {
        DeclaredRole::Router { trigger, labels } => {
            assert_eq!(trigger, &on("seed"));
            assert_eq!(labels, &["deep", "quick"]);
        }
        other => panic!("{other:?}"),
    }
    // Without `emit`, a router's labels are the names listeners wait for that are no method.
    match &method("route_inferred").role {
        DeclaredRole::Router { trigger, labels } => {
            assert_eq!(trigger, &or([on("seed"), on("route")]));
            assert_eq!(
                labels,
                &["again_label", "approved", "deep", "quick", "rejected"]
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(&method("again").role, DeclaredRole::StartOn(t) if t == &on("again_label")));

    let research = method("research");
    assert!(research.persist);
    assert!(
        matches!(&research.role, DeclaredRole::Listen(t) if t == &and([on("deep"), on("seed")]))
    );
    match &research.action {
        Action::Crew { project, inputs } => {
            assert_eq!(project.name(), "inline_research");
            assert_eq!(project.tasks[0].key, "find");
            assert_eq!(project.agents[0].key, "researcher");
            assert_eq!(
                project.agents[0].spec.goal.as_deref(),
                Some("Research {topic}")
            );
            // The crew's own inputs and the action's are one template; the action's win.
            let scope = crewai_project::flow_v1::ExpressionScope {
                state: json!({"topic": "qubits"}).as_object().cloned().unwrap(),
                outputs: Default::default(),
            };
            assert_eq!(
                inputs.render(&scope).unwrap(),
                json!({"topic": "qubits", "limit": 1})
            );
        }
        other => panic!("{other:?}"),
    }
    match &method("listed").action {
        Action::Crew { project, .. } => {
            assert_eq!(project.agents.len(), 2);
            assert!(project.agent("writer").is_some() && project.agent("editor").is_some());
            assert_eq!(project.tasks.len(), 2);
        }
        other => panic!("{other:?}"),
    }

    let ask = method("ask");
    assert_eq!(
        ask.feedback,
        Some(
            HumanFeedback::new("Approve the notes?")
                .emit(["approved", "rejected"])
                .default_outcome("rejected")
        )
    );
    match &ask.action {
        Action::Agent {
            project,
            key,
            input,
        } => {
            let agent = project.agent(key).unwrap();
            assert_eq!(agent.spec.role.as_deref(), Some("Analyst"));
            assert_eq!(agent.spec.max_iter, Some(3));
            assert_eq!(
                agent.spec.llm.as_ref().map(|l| l.model.as_str()),
                Some("openai/gpt-4o-mini")
            );
            let scope = crewai_project::flow_v1::ExpressionScope {
                state: Default::default(),
                outputs: json!({"research": {"raw": "n1"}})
                    .as_object()
                    .cloned()
                    .unwrap(),
            };
            assert_eq!(input.render(&scope).unwrap(), json!("Notes: n1"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        method("publish").feedback,
        Some(HumanFeedback::new("Anything to add?"))
    );
    assert!(
        matches!(&method("redo").role, DeclaredRole::Listen(t) if t == &or([on("rejected"), on("again_label")]))
    );
}

#[test]
fn a_json_schema_state_gives_defaults_and_checks_kickoff_inputs() {
    let flow = load(
        "schema: crewai.flow/v1
name: S
state:
  type: json_schema
  json_schema:
    type: object
    properties:
      topic: {type: string}
      depth: {type: integer, default: 2}
      audience: {type: string, default: leads}
    required: [topic]
    additionalProperties: false
  default: {audience: engineers}
methods:
  a: {start: true, do: {call: expression, expr: state.topic}}
",
    );
    assert_eq!(
        serde_json::Value::Object(flow.state.defaults.clone()),
        json!({"audience": "engineers", "depth": 2})
    );
    let state = flow
        .kickoff_state(
            &[("topic".to_string(), json!("qubits"))]
                .into_iter()
                .collect(),
        )
        .unwrap();
    assert_eq!(state["topic"], "qubits");
    assert_eq!(state["depth"], 2);
    let err = flow
        .kickoff_state(&Default::default())
        .unwrap_err()
        .to_string();
    assert_has(
        &err,
        "flow.yaml: the kickoff state does not fit the state's json_schema: the state: \"topic\" is a required property",
    );
    assert_has(
        &err,
        "pass the missing or corrected values as kickoff inputs",
    );
    let err = flow
        .kickoff_state(
            &[
                ("topic".to_string(), json!(7)),
                ("extra".to_string(), json!(1)),
            ]
            .into_iter()
            .collect(),
        )
        .unwrap_err()
        .to_string();
    assert_has(&err, "state.topic: 7 is not of type \"string\"");
    assert_has(
        &err,
        "Additional properties are not allowed ('extra' was unexpected)",
    );
}

#[test]
fn a_pydantic_state_runs_from_its_json_schema_with_a_warning() {
    let flow = load(
        "schema: crewai.flow/v1
name: P
state: {type: pydantic, ref: 'app.models:State', json_schema: {type: object, properties: {n: {type: integer, default: 1}}}}
methods:
  a: {start: true, do: {call: expression, expr: state.n}}
",
    );
    assert_eq!(flow.state.defaults["n"], 1);
    assert_eq!(
        flow.warnings,
        ["the state's pydantic `ref` is not imported; its `json_schema` is used instead"]
    );
    let err = errors(
        "schema: crewai.flow/v1\nname: P\nstate: {type: pydantic, ref: 'app.models:State'}\nmethods:\n  a: {start: true, do: {call: expression, expr: '1'}}\n",
    );
    assert_has(
        &err,
        "flow.yaml:3: a `type: pydantic` state names a Python model, which cannot be imported here; add its `json_schema:` (CrewAI's fallback) or use `type: dict`",
    );
}

#[test]
fn a_json_declaration_loads_and_any_flow_dispatches_on_schema() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &[(
            "flow.json",
            r#"{"schema": "crewai.flow/v1", "name": "J", "methods": {"a": {"start": true, "do": {"call": "expression", "expr": "'x'"}}}}"#,
        )],
    );
    let any = AnyFlow::load(dir.path()).unwrap();
    assert!(matches!(&any, AnyFlow::Declaration(d) if d.name == "J"));
    assert!(AnyFlow::is_declaration(dir.path()).unwrap());

    // flow.yaml without `schema:` is our own format.
    let ours = tempfile::tempdir().unwrap();
    write(
        ours.path(),
        &[(
            "flow.yaml",
            "name: ours\nmethods:\n  a:\n    start: true\n    set: {x: 1}\n",
        )],
    );
    assert!(matches!(AnyFlow::load(ours.path()).unwrap(), AnyFlow::Yaml(f) if f.name == "ours"));
    assert!(!AnyFlow::is_declaration(ours.path()).unwrap());
    assert!(!AnyFlow::is_declaration(tempfile::tempdir().unwrap().path()).unwrap());

    let wrong = tempfile::tempdir().unwrap();
    write(
        wrong.path(),
        &[(
            "flow.yaml",
            "schema: crewai.flow/v2\nname: W\nmethods:\n  a: {start: true, do: {call: expression, expr: '1'}}\n",
        )],
    );
    let err = AnyFlow::load(wrong.path()).unwrap_err().to_string();
    assert_has(
        &err,
        "flow.yaml:1: unknown schema \"crewai.flow/v2\"; this reads `schema: crewai.flow/v1`",
    );
}

#[test]
fn from_declaration_loads_a_crew_folder_beside_the_flow() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &[
            (
                "crews/brief/config/agents.yaml",
                "writer:\n  role: Writer\n  goal: Write for {audience}\n  backstory: Clear.\n",
            ),
            (
                "crews/brief/config/tasks.yaml",
                "brief:\n  description: Brief {audience} on {findings}\n  expected_output: A brief\n  agent: writer\n",
            ),
        ],
    );
    let flow = load_in(
        dir.path(),
        "schema: crewai.flow/v1\nname: F\nmethods:\n  a:\n    start: true\n    do:\n      call: crew\n      from_declaration: crews/brief\n      inputs: {findings: '${state.f}', audience: all}\n",
    )
    .unwrap();
    match &flow.methods[0].action {
        Action::Crew { project, .. } => assert_eq!(project.tasks[0].key, "brief"),
        other => panic!("{other:?}"),
    }
    let err = load_in(
        dir.path(),
        "schema: crewai.flow/v1\nname: F\nmethods:\n  a:\n    start: true\n    do:\n      call: crew\n      from_declaration: ../elsewhere\n",
    )
    .unwrap_err()
    .to_string();
    assert_has(
        &err,
        "flow.yaml:8: method 'a': crew '../elsewhere' is outside the flow's folder; keep crews beside flow.yaml",
    );
}

/// A flow whose one method `a` (line 4) has `do:` at line 6 and `call:` at line 7.
fn with_action(action: &str) -> String {
    format!("schema: crewai.flow/v1\nname: R\nmethods:\n  a:\n    start: true\n    do:\n{action}")
}

/// An agent action whose `with:` is at line 8 and whose extra fields start at line 13.
fn with_agent_field(field: &str) -> String {
    with_action(&format!(
        "      call: agent\n      with:\n        role: R\n        goal: G\n        backstory: B\n        input: hi\n        {field}\n"
    ))
}

#[test]
fn python_actions_are_refused_with_line_and_what_to_do() {
    for (action, expected) in [
        (
            "      call: script\n      code: return 1\n",
            "flow.yaml:7: method 'a': `call: script` runs trusted inline Python, which this runtime does not execute; write it as `call: expression` (CEL) or as a crew/agent step",
        ),
        (
            "      call: code\n      ref: app.steps:clean\n",
            "flow.yaml:7: method 'a': `call: code` imports Python (`ref: module:qualname`), which this runtime cannot; use `call: expression`, `crew` or `agent` (agents can use tools)",
        ),
        (
            "      call: tool\n      ref: app.tools:Search\n",
            "flow.yaml:7: method 'a': `call: tool` imports Python",
        ),
        (
            "      call: each\n      in: state.rows\n",
            "flow.yaml:7: method 'a': `call: each` (a loop over a list) is not supported yet; run a crew whose task handles the whole list",
        ),
        (
            "      call: expresion\n      expr: '1'\n",
            "flow.yaml:7: method 'a': unknown call 'expresion'; did you mean 'expression'?",
        ),
    ] {
        assert_has(&errors(&with_action(action)), expected);
    }
}

#[test]
fn expressions_other_roots_and_now_are_refused_with_line() {
    for (expr, expected) in [
        (
            "inputs.topic",
            "flow.yaml:8: method 'a': expression 'inputs.topic' reads 'inputs'; an expression reads only `state` (e.g. state.topic) and `outputs` (e.g. outputs.step_name)",
        ),
        (
            "string(now())",
            "flow.yaml:8: method 'a': expression 'string(now())' calls now(), which is not supported here; pass the time in as an input (state.now)",
        ),
        (
            "state.topic +",
            "flow.yaml:8: method 'a': expression 'state.topic +' is not valid CEL: ",
        ),
    ] {
        let text = errors(&with_action(&format!(
            "      call: expression\n      expr: '{expr}'\n"
        )));
        assert_has(&text, expected);
    }
    // Templates are checked the same way, where they are written.
    let text = errors(&with_agent_field("settings: {}").replace("input: hi", "input: '${item.x}'"));
    assert_has(
        &text,
        "flow.yaml:12: method 'a': expression 'item.x' reads 'item'",
    );
}

#[test]
fn agent_fields_needing_python_or_the_platform_are_refused_with_line() {
    for (field, expected) in [
        (
            "type: {python: app.agents.Mine}",
            "flow.yaml:13: method 'a': an agent `type` other than `agent` names Python code, which cannot be imported",
        ),
        (
            "apps: [gmail]",
            "flow.yaml:13: method 'a': an agent's `apps` is not supported: platform apps are not available",
        ),
        (
            "mcps: ['https://x.example/mcp']",
            "flow.yaml:13: method 'a': an agent's `mcps` is not supported: give MCP servers as tools of the project instead",
        ),
        (
            "response_format: {python: app.schemas.Reply}",
            "flow.yaml:13: method 'a': `response_format` names a Python model, which cannot be imported; ask for JSON in the input instead",
        ),
    ] {
        assert_has(&errors(&with_agent_field(field)), expected);
    }
    // An agent's own fields are checked as agents.yaml's are, at their line.
    assert_has(
        &errors(&with_agent_field("max_iterr: 3")),
        "flow.yaml:13: method 'a': agent 'agent' has an unknown field 'max_iterr'; did you mean 'max_iter'?",
    );
}

#[test]
fn a_manager_given_as_a_python_reference_is_refused() {
    let text = errors(&with_action(
        "      call: crew\n      with:\n        manager_agent: {python: app.agents.Boss}\n        agents: {w: {role: W, goal: G, backstory: B}}\n        tasks: [{description: D, expected_output: E, agent: w}]\n",
    ));
    assert_has(
        &text,
        "flow.yaml:9: method 'a': a manager given as a Python reference cannot be imported; name one of the crew's agents",
    );
}

#[test]
fn feedback_persistence_config_and_chat_features_are_refused_with_line() {
    let feedback = |extra: &str| {
        format!(
            "schema: crewai.flow/v1\nname: R\nmethods:\n  a:\n    start: true\n    do: {{call: expression, expr: '1'}}\n    human_feedback:\n      message: ok?\n      {extra}\n"
        )
    };
    for (extra, expected) in [
        (
            "provider: app.feedback:Slack",
            "`provider` is not supported: a feedback provider is a Python reference; the console asks, or the caller's provider",
        ),
        (
            "metadata: {team: a}",
            "`metadata` is not supported: feedback metadata is not carried",
        ),
        (
            "learn: true",
            "`learn` is not supported: learning from feedback is not supported",
        ),
    ] {
        assert_has(
            &errors(&feedback(extra)),
            &format!("flow.yaml:9: method 'a': {expected}"),
        );
    }
    assert_has(
        &errors(
            "schema: crewai.flow/v1\nname: R\npersist:\n  enabled: true\n  persistence: {ref: app.store:Mongo}\nmethods:\n  a: {start: true, do: {call: expression, expr: '1'}}\n",
        ),
        "flow.yaml:5: the flow: `persistence` is not supported: a persistence backend is a Python object; the built-in SQLite store is used",
    );
    for (line, expected) in [
        (
            "tracing: true",
            "`tracing` is not supported: CrewAI's platform tracing is not part of this runtime",
        ),
        (
            "stream: true",
            "`stream` is not supported: streamed flow events are not supported; leave it false",
        ),
        (
            "input_provider: app.inputs:load",
            "`input_provider` is not supported: an input provider is a Python reference; pass kickoff inputs instead",
        ),
        (
            "checkpoint: true",
            "`checkpoint` is not supported: use `persist: {enabled: true}` to save the state after each method",
        ),
        (
            "defer_trace_finalization: true",
            "`defer_trace_finalization` is not supported: platform tracing is not part of this runtime",
        ),
    ] {
        let text = errors(&format!(
            "schema: crewai.flow/v1\nname: R\nconfig:\n  {line}\nmethods:\n  a: {{start: true, do: {{call: expression, expr: '1'}}}}\n"
        ));
        assert_has(&text, &format!("flow.yaml:4: the config: {expected}"));
    }
    assert_has(
        &errors(
            "schema: crewai.flow/v1\nname: R\nconversational: {enabled: true}\nmethods:\n  a: {start: true, do: {call: expression, expr: '1'}}\n",
        ),
        "flow.yaml:3: `conversational` flows (chat) are not supported; run the flow with kickoff inputs instead",
    );
}

#[test]
fn structure_errors_name_the_method_and_line() {
    let text = errors(
        "schema: crewai.flow/v1\nname: R\nmethods:\n  a:\n    start: true\n    do: {call: expression, expr: '1'}\n  b:\n    listen: aa\n    do: {call: expression, expr: '2'}\n",
    );
    assert_has(
        &text,
        "flow.yaml:8: method 'b' waits for 'aa', which is neither a method nor a label a router or human_feedback emits; did you mean 'a'?",
    );
    let text = errors(
        "schema: crewai.flow/v1\nname: R\nmethods:\n  a:\n    listen: a\n    do: {call: expression, expr: '1'}\n",
    );
    assert_has(
        &text,
        "flow.yaml: no method has `start: true`; mark the first step of the flow",
    );
    let text = errors(
        "schema: crewai.flow/v1\nname: R\nmethods:\n  a:\n    start: true\n    router: true\n    emit: [x]\n    do: {call: expression, expr: '1'}\n",
    );
    assert_has(
        &text,
        "flow.yaml:4: method 'a': a router runs after another method; give it `listen:` instead of `start:`",
    );
    let text = errors(
        "schema: crewai.flow/v1\nname: R\nmethods:\n  a:\n    start: true\n    do: {call: expression, expr: '1'}\n    retries: 2\n",
    );
    assert_has(
        &text,
        "flow.yaml:7: method 'a' has an unknown key 'retries'",
    );
}

#[test]
fn feedback_outcomes_make_a_method_route_and_stray_emit_warns() {
    // As CrewAI does, `router: true` beside feedback outcomes is the same routing.
    let flow = load(
        "schema: crewai.flow/v1\nname: H\nmethods:\n  a:\n    start: true\n    router: true\n    do: {call: expression, expr: \"'d'\"}\n    human_feedback: {message: ok?, emit: [yes, no], llm: gpt-4o-mini}\n  b:\n    listen: 'yes'\n    emit: [x]\n    do: {call: expression, expr: '1'}\n  c:\n    listen: 'no'\n    do: {call: expression, expr: '2'}\n",
    );
    assert!(matches!(flow.methods[0].role, DeclaredRole::Start));
    assert_eq!(
        flow.methods[0]
            .feedback
            .as_ref()
            .map(|f| f.outcomes.clone()),
        Some(vec!["yes".to_string(), "no".to_string()])
    );
    assert_eq!(
        flow.warnings,
        [
            "method 'a': human_feedback.llm is not used; the answer is matched against the outcome names (yes, no)",
            "method 'b': `emit` lists a router's labels but the method has no `router: true`; the labels are not used",
        ]
    );
}
