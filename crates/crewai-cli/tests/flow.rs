//! `crewai flow kickoff|plot` and `crewai create flow`, run as a user runs them, against a
//! scripted OpenAI-compatible server.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crewai_testkit::scripted::{Reply, ScriptedServer};
use serde_json::Value;

fn triage_example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/support-triage-flow")
}

/// The binary with a clean environment: no provider keys leak in from the machine.
fn crewai(args: &[&str], cwd: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_crewai"));
    command
        .env_clear()
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null());
    if let Some(path) = std::env::var_os("PATH") {
        command.env("PATH", path);
    }
    command
}

fn run(mut command: Command) -> Output {
    command.output().expect("the crewai binary runs")
}

fn with_server(mut command: Command, server: &ScriptedServer) -> Command {
    command
        .env("OPENAI_BASE_URL", server.base_url())
        .env("OPENAI_API_KEY", "test");
    command
}

fn last_json_line(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or_default()).unwrap()
}

#[test]
fn plot_writes_html_and_mermaid() {
    let dir = tempfile::tempdir().unwrap();
    let example = triage_example();
    let project = example.to_str().unwrap();
    let out = run(crewai(
        &[
            "flow",
            "plot",
            "--project",
            project,
            "--output",
            "flow.html",
        ],
        dir.path(),
    ));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(dir.path().join("flow.html")).unwrap();
    assert!(
        html.contains("<svg") && html.contains("billing_team"),
        "{html}"
    );
    let out = run(crewai(
        &[
            "flow",
            "plot",
            "--project",
            project,
            "--output",
            "flow.mmd",
            "--mermaid",
        ],
        dir.path(),
    ));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mermaid = std::fs::read_to_string(dir.path().join("flow.mmd")).unwrap();
    assert!(
        mermaid.starts_with("flowchart TD") && mermaid.contains("|\"billing\"|"),
        "{mermaid}"
    );
}

#[test]
fn kickoff_json_routes_to_the_crew() {
    let server = ScriptedServer::start_blocking();
    server.push(Reply::text("billing"));
    server.push(Reply::text("We refunded the second charge."));
    let example = triage_example();
    let args = [
        "flow",
        "kickoff",
        "--project",
        example.to_str().unwrap(),
        "--inputs",
        "ticket=Charged twice",
        "--json",
    ];
    let output = last_json_line(&run(with_server(crewai(&args, &example), &server)));
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
    assert!(crew_prompt.contains("Charged twice"), "{crew_prompt}");
}

#[test]
fn kickoff_json_routes_general_tickets_past_the_crew() {
    let server = ScriptedServer::start_blocking();
    server.push(Reply::text("general"));
    let example = triage_example();
    let args = [
        "flow",
        "kickoff",
        "--project",
        example.to_str().unwrap(),
        "--inputs",
        "ticket=Where is the API doc?",
        "--json",
    ];
    let output = last_json_line(&run(with_server(crewai(&args, &example), &server)));
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
    let out = run(crewai(&["flow", "plot", "--output", "x.html"], dir.path()));
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("flow.yaml:6: method 'b' is triggered by 'c'"),
        "{stderr}"
    );
}

#[test]
fn created_flow_plots_and_kicks_off() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(crewai(&["create", "flow", "Research Flow"], dir.path()));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let project = dir.path().join("research_flow");
    assert!(project.join("flow.yaml").is_file());
    let out = run(crewai(&["flow", "plot", "--output", "flow.html"], &project));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(project.join("flow.html").is_file());

    let server = ScriptedServer::start_blocking();
    server.push(Reply::text("Notes on AI LLMs"));
    server.push(Reply::text("The AI LLMs report"));
    let output = last_json_line(&run(with_server(
        crewai(&["flow", "kickoff", "--json"], &project),
        &server,
    )));
    assert_eq!(output["state"]["check_depth"], "deep");
    assert_eq!(output["result"], "The AI LLMs report");
}
