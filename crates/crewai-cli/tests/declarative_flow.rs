//! CrewAI's declarative flows (`schema: crewai.flow/v1`) run unchanged by `crewai flow kickoff`,
//! `crewai flow plot` and `crewai run`, against a scripted OpenAI-compatible server.

use std::path::PathBuf;

mod support;

use crewai_testkit::scripted::{Reply, ScriptedServer};
use support::{assert_contains, crewai, crewai_at, examples, last_json_line, run, run_ok, text};

fn example() -> PathBuf {
    examples().join("research-declarative-flow")
}

fn example_arg() -> String {
    example().to_string_lossy().into_owned()
}

/// The method names of a `--json` line, in completion order.
fn methods(output: &serde_json::Value) -> Vec<String> {
    output["method_outputs"]
        .as_array()
        .unwrap_or_else(|| panic!("no method_outputs in {output}"))
        .iter()
        .filter_map(|r| r["method"].as_str().map(String::from))
        .collect()
}

#[test]
fn flow_kickoff_runs_the_example_through_both_crews() {
    let server = ScriptedServer::start_blocking();
    server.push(Reply::text("1. Indexes. 2. Recall. 3. Cost."));
    server.push(Reply::text("brief"));
    server.push(Reply::text("Vector databases trade recall for cost."));
    let project = example_arg();
    let args = [
        "flow",
        "kickoff",
        "--project",
        &project,
        "--inputs",
        "topic=vector databases",
        "--json",
    ];
    let output = last_json_line(&run(crewai_at(&args, &server)));
    // The last method's output: the brief crew's, as JSON.
    assert_eq!(
        output["result"]["raw"], "Vector databases trade recall for cost.",
        "{output}"
    );
    assert_eq!(output["result"]["tasks_output"][0]["name"], "brief_task");
    assert_eq!(methods(&output), ["research", "decide", "write_brief"]);
    assert_eq!(output["state"]["topic"], "vector databases");
    // The schema's default for the audience applies.
    assert_eq!(output["state"]["audience"], "engineering leads");

    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let research = requests[0].body["messages"].to_string();
    assert_contains(
        &research,
        "most important facts about vector databases for engineering leads",
    );
    let editor = requests[1].body["messages"].to_string();
    assert_contains(&editor, "Findings: 1. Indexes. 2. Recall. 3. Cost.");
    // The crew folder got the research crew's output as its `{findings}`.
    let writer = requests[2].body["messages"].to_string();
    assert_contains(&writer, "1. Indexes. 2. Recall. 3. Cost.");
    assert_contains(&writer, "brief for engineering leads");
}

#[test]
fn crewai_run_runs_a_declared_flow_and_takes_the_other_route() {
    let server = ScriptedServer::start_blocking();
    server.push(Reply::text("Nothing surprising."));
    server.push(Reply::text("skip"));
    let project = example_arg();
    let args = [
        "run",
        "--project",
        &project,
        "--inputs",
        "topic=tea",
        "--json",
    ];
    let output = last_json_line(&run(crewai_at(&args, &server)));
    assert_eq!(output["result"], "No brief needed for tea.", "{output}");
    assert_eq!(methods(&output), ["research", "decide", "no_brief"]);
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn crewai_run_dry_run_checks_a_declared_flow_without_calling_a_model() {
    let project = example_arg();
    let out = run_ok(crewai(&["run", "--project", &project, "--dry-run"]));
    let stdout = text(&out.stdout);
    assert_contains(&stdout, "flowchart TD");
    assert_contains(&stdout, "Dry run: the flow is valid; no model was called.");
}

#[test]
fn flow_plot_draws_the_declared_routes() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("flow.mmd");
    let project = example_arg();
    let file_arg = file.to_string_lossy().into_owned();
    run_ok(crewai(&[
        "flow",
        "plot",
        "--project",
        &project,
        "--output",
        &file_arg,
        "--mermaid",
    ]));
    let mermaid = std::fs::read_to_string(&file).unwrap();
    assert!(mermaid.starts_with("flowchart TD"), "{mermaid}");
    assert_contains(&mermaid, "|\"brief\"|");
    assert_contains(&mermaid, "write_brief");
}

#[test]
fn a_refused_construct_exits_2_with_file_and_line_before_any_call() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("flow.yaml"),
        "schema: crewai.flow/v1\nname: S\nmethods:\n  a:\n    start: true\n    do:\n      call: script\n      code: return 1\n",
    )
    .unwrap();
    let server = ScriptedServer::start_blocking();
    let project = dir.path().to_string_lossy().into_owned();
    let out = run(crewai_at(
        &["flow", "kickoff", "--project", &project],
        &server,
    ));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert_contains(
        &text(&out.stderr),
        "flow.yaml:7: method 'a': `call: script` runs trusted inline Python",
    );
    assert_eq!(server.requests().len(), 0);
}

#[test]
fn a_kickoff_missing_a_required_state_field_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("flow.yaml"),
        "schema: crewai.flow/v1\nname: S\nstate:\n  type: json_schema\n  json_schema: {type: object, properties: {topic: {type: string}}, required: [topic]}\nmethods:\n  a:\n    start: true\n    do: {call: expression, expr: state.topic}\n",
    )
    .unwrap();
    let project = dir.path().to_string_lossy().into_owned();
    let out = run(crewai(&["flow", "kickoff", "--project", &project]));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert_contains(&text(&out.stderr), "\"topic\" is a required property");
    let server = ScriptedServer::start_blocking();
    let ok = run_ok(crewai_at(
        &[
            "flow",
            "kickoff",
            "--project",
            &project,
            "--inputs",
            "topic=tea",
        ],
        &server,
    ));
    assert_contains(&text(&ok.stdout), "tea");
}

#[test]
fn flow_kickoff_prints_a_crew_result_as_its_text() {
    let server = ScriptedServer::start_blocking();
    server.push(Reply::text("Facts."));
    server.push(Reply::text("brief"));
    server.push(Reply::text("The brief."));
    let project = example_arg();
    let out = run_ok(crewai_at(
        &[
            "flow",
            "kickoff",
            "--project",
            &project,
            "--inputs",
            "topic=tea",
        ],
        &server,
    ));
    assert_eq!(text(&out.stdout).trim(), "The brief.");
}
