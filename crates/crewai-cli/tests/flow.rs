//! `crewai flow kickoff|plot` and `crewai create flow`, run as a user runs them, against a
//! scripted OpenAI-compatible server.

use std::path::{Path, PathBuf};
use std::process::Command;

mod support;

use crewai_testkit::scripted::{Reply, ScriptedServer};
use support::{assert_contains, crewai, examples, last_json_line, run, run_ok, text, with_server};

fn triage_example() -> PathBuf {
    examples().join("support-triage-flow")
}

/// `crewai flow plot <project_args…> --output <file> <extra…>` in `cwd`, which must succeed:
/// what it wrote to `file`.
fn plot(cwd: &Path, project_args: &[&str], file: &str, extra: &[&str]) -> String {
    let mut args = vec!["flow", "plot"];
    args.extend_from_slice(project_args);
    args.extend_from_slice(&["--output", file]);
    args.extend_from_slice(extra);
    run_ok(crewai_in(&args, cwd));
    std::fs::read_to_string(cwd.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// `crewai flow kickoff --json` of the triage example with `ticket`, which must succeed: its
/// JSON output.
fn kickoff_triage(ticket: &str, server: &ScriptedServer) -> serde_json::Value {
    let example = triage_example();
    let input = format!("ticket={ticket}");
    let project = example.to_str().unwrap();
    let args = [
        "flow",
        "kickoff",
        "--project",
        project,
        "--inputs",
        &input,
        "--json",
    ];
    last_json_line(&run(with_server(crewai_in(&args, &example), server)))
}

/// The binary with a clean environment, in `cwd`.
fn crewai_in(args: &[&str], cwd: &Path) -> Command {
    let mut command = crewai(args);
    command.current_dir(cwd);
    command
}

#[test]
fn plot_writes_html_and_mermaid() {
    let dir = tempfile::tempdir().unwrap();
    let example = triage_example();
    let project = ["--project", example.to_str().unwrap()];
    let html = plot(dir.path(), &project, "flow.html", &[]);
    assert!(
        html.contains("<svg") && html.contains("billing_team"),
        "{html}"
    );
    let mermaid = plot(dir.path(), &project, "flow.mmd", &["--mermaid"]);
    assert!(
        mermaid.starts_with("flowchart TD") && mermaid.contains("|\"billing\"|"),
        "{mermaid}"
    );
}

#[test]
fn plot_without_an_output_writes_crew_flow_html_here_as_crewai_does() {
    let dir = tempfile::tempdir().unwrap();
    let example = triage_example();
    let mut command = crewai(&["flow", "plot", "--project", example.to_str().unwrap()]);
    command.current_dir(dir.path());
    let out = run_ok(command);
    assert!(text(&out.stdout).contains("Wrote crew_flow.html"));
    let html = std::fs::read_to_string(dir.path().join("crew_flow.html")).unwrap();
    assert!(html.contains("<svg"), "{html}");
}

#[test]
fn kickoff_json_routes_to_the_crew() {
    let server = ScriptedServer::start_blocking();
    server.push(Reply::text("billing"));
    server.push(Reply::text("We refunded the second charge."));
    let output = kickoff_triage("Charged twice", &server);
    assert_eq!(output["result"], "We refunded the second charge.");
    assert_eq!(output["state"]["triage"], "billing");
    assert_eq!(output["state"]["ticket"], "Charged twice");
    let methods: Vec<&str> = output["method_outputs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["method"].as_str())
        .collect();
    assert_eq!(methods, ["classify", "triage", "billing_team"]);
    // The crew's task saw the flow state as its inputs.
    let crew_prompt = server.requests()[1].body.to_string();
    assert_contains(&crew_prompt, "Charged twice");
}

#[test]
fn kickoff_json_routes_general_tickets_past_the_crew() {
    let server = ScriptedServer::start_blocking();
    server.push(Reply::text("general"));
    let output = kickoff_triage("Where is the API doc?", &server);
    assert_eq!(output["state"]["triage"], "general");
    assert!(
        output["result"]["reply"]
            .as_str()
            .unwrap()
            .contains("support engineer"),
        "{output}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn invalid_flow_reports_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("flow.yaml"),
        "methods:\n  a:\n    start: true\n    set: {}\n  b:\n    listen: c\n    set: {}\n",
    )
    .unwrap();
    let out = run(crewai_in(
        &["flow", "plot", "--output", "x.html"],
        dir.path(),
    ));
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_contains(&stderr, "flow.yaml:6: method 'b' is triggered by 'c'");
}

#[test]
fn created_flow_plots_and_kicks_off() {
    let dir = tempfile::tempdir().unwrap();
    run_ok(crewai_in(&["create", "flow", "Research Flow"], dir.path()));
    let project = dir.path().join("research_flow");
    assert!(project.join("flow.yaml").is_file());
    plot(&project, &[], "flow.html", &[]);

    let server = ScriptedServer::start_blocking();
    server.push(Reply::text("Notes on AI LLMs"));
    server.push(Reply::text("The AI LLMs report"));
    let output = last_json_line(&run(with_server(
        crewai_in(&["flow", "kickoff", "--json"], &project),
        &server,
    )));
    assert_eq!(output["state"]["check_depth"], "deep");
    assert_eq!(output["result"], "The AI LLMs report");
}

#[test]
fn add_crew_adds_a_crew_the_flow_can_run() {
    let dir = tempfile::tempdir().unwrap();
    run_ok(crewai_in(&["create", "flow", "Research Flow"], dir.path()));
    let project = dir.path().join("research_flow");
    let out = run_ok(crewai_in(&["flow", "add-crew", "Fact Checkers"], &project));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_contains(&stdout, "Added crews/fact_checkers");
    assert_contains(&stdout, "crew: crews/fact_checkers");
    assert!(
        project
            .join("crews/fact_checkers/config/agents.yaml")
            .is_file()
    );
    assert!(
        project
            .join("crews/fact_checkers/config/tasks.yaml")
            .is_file()
    );
    // The new crew dry-runs as any crew does.
    let dry = run_ok(crewai_in(
        &["run", "--dry-run", "--project", "crews/fact_checkers"],
        &project,
    ));
    assert_contains(
        &String::from_utf8_lossy(&dry.stdout),
        "Dry run: the project is valid",
    );
    // Twice is refused; outside a flow project it says where to run it.
    let again = run(crewai_in(&["flow", "add-crew", "Fact Checkers"], &project));
    assert_eq!(again.status.code(), Some(2));
    assert_contains(&String::from_utf8_lossy(&again.stderr), "already exists");
    let outside = run(crewai_in(&["flow", "add-crew", "Loose"], dir.path()));
    assert_eq!(outside.status.code(), Some(2));
    assert_contains(
        &String::from_utf8_lossy(&outside.stderr),
        "holds no flow.yaml",
    );
}
