//! The command line itself: the README's command table against `--help`, CrewAI's JSON
//! `--inputs`, `--json` on the listings, one id for a run and its trace, `traces
//! status|enable|disable`, completions and `--log`.

mod support;

use std::path::Path;

use crewai_testkit::scripted::ScriptedServer;
use serde_json::Value;
use support::{assert_contains, crewai, project, run, run_ok, text, with_server};

const FILES: &[(&str, &str)] = &[
    (
        "config/agents.yaml",
        "researcher:\n  role: Researcher\n  goal: Research {topic}\n  backstory: Curious.\n",
    ),
    (
        "config/tasks.yaml",
        "research:\n  description: Research {topic} in {year}\n  expected_output: Notes\n  agent: researcher\n",
    ),
];

/// The `(command, description)` rows of `crewai --help`'s command list, wrapped lines joined.
fn help_commands() -> Vec<(String, String)> {
    let help = text(&run_ok(crewai(&["--help"])).stdout);
    let mut rows: Vec<(String, String)> = Vec::new();
    for line in help
        .lines()
        .skip_while(|line| !line.starts_with("Commands:"))
        .skip(1)
        .take_while(|line| !line.trim().is_empty())
    {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match rows.last_mut() {
            // A continuation of the description above (clap wraps on narrow terminals).
            Some(last) if indent > 2 => {
                last.1.push(' ');
                last.1.push_str(trimmed);
            }
            _ => {
                let (name, about) = trimmed.split_once(' ').unwrap_or((trimmed, ""));
                rows.push((name.to_string(), about.trim().to_string()));
            }
        }
    }
    rows.retain(|(name, _)| name != "help");
    rows
}

/// The rows of the README's command table (between its `commands:` markers).
fn readme_commands() -> Vec<(String, String)> {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .unwrap_or_else(|e| panic!("README.md: {e}"));
    let start = readme
        .find("<!-- commands:start -->")
        .expect("README.md marks its command table with <!-- commands:start -->");
    let end = readme
        .find("<!-- commands:end -->")
        .expect("README.md ends its command table with <!-- commands:end -->");
    readme[start..end]
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.trim().trim_matches('|').split(" | ").collect();
            let [command, about] = cells.as_slice() else {
                return None;
            };
            let name = command.trim().strip_prefix("`crewai ")?.strip_suffix('`')?;
            Some((name.to_string(), about.trim().to_string()))
        })
        .collect()
}

#[test]
fn the_readme_command_table_is_what_help_lists() {
    let help = help_commands();
    assert!(help.len() > 10, "help lists the commands: {help:?}");
    assert_eq!(readme_commands(), help);
}

#[test]
fn completions_are_printed_for_each_shell() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = text(&run_ok(crewai(&["completions", shell])).stdout);
        for part in ["crewai", "log-tasks-outputs", "reset-memories"] {
            assert!(script.contains(part), "{shell}: no {part}");
        }
    }
    let unknown = run(crewai(&["completions", "tcsh"]));
    assert_eq!(unknown.status.code(), Some(2));
    assert_contains(&text(&unknown.stderr), "possible values");
}

/// The id after `Run ` on stderr.
fn printed_run_id(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|line| line.strip_prefix("Run "))
        .map(|rest| {
            rest.split_whitespace()
                .next()
                .unwrap_or_default()
                .to_string()
        })
        .unwrap_or_else(|| panic!("no `Run ID` line in:\n{stderr}"))
}

#[test]
fn json_inputs_the_run_id_and_the_json_listings() {
    let dir = project(FILES);
    let root = dir.path().to_str().unwrap();
    let server = ScriptedServer::start_blocking();
    server.push_text("AI notes");
    let out = run_ok(with_server(
        crewai(&[
            "run",
            "--project",
            root,
            "--inputs",
            r#"{"topic": "AI", "year": 2026}"#,
        ]),
        &server,
    ));
    assert_contains(
        &server.requests()[0].body.to_string(),
        "Research AI in 2026",
    );
    let run_id = printed_run_id(&text(&out.stderr));

    // The trace of the run has the run's id, in the list and by itself.
    let list: Value =
        serde_json::from_slice(&run_ok(crewai(&["traces", "--project", root, "--json"])).stdout)
            .unwrap();
    let ids: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|run| run["id"].as_str())
        .collect();
    assert_eq!(ids, [run_id.as_str()]);
    let one: Value = serde_json::from_slice(
        &run_ok(crewai(&["traces", &run_id, "--project", root, "--json"])).stdout,
    )
    .unwrap();
    assert_eq!(one["run"]["id"], run_id.as_str());
    assert_eq!(one["run"]["status"], "ok");
    assert!(
        one["events"]
            .as_array()
            .is_some_and(|events| events.iter().any(|e| e["type"] == "crew_kickoff_completed")),
        "{one}"
    );
    // The same id is the journal's.
    let runs: Value =
        serde_json::from_slice(&run_ok(crewai(&["runs", "--project", root, "--json"])).stdout)
            .unwrap();
    assert_eq!(runs[0]["id"], run_id.as_str());

    let outputs: Value = serde_json::from_slice(
        &run_ok(crewai(&["log-tasks-outputs", "--project", root, "--json"])).stdout,
    )
    .unwrap();
    assert_eq!(outputs[0]["task_name"], "research");
    assert_eq!(outputs[0]["output"]["raw"], "AI notes");
    assert_eq!(outputs[0]["inputs"]["year"], 2026);
}

#[test]
fn traces_status_enable_and_disable_say_what_they_mean_here() {
    let dir = project(FILES);
    let root = dir.path().to_str().unwrap();
    let status = text(&run_ok(crewai(&["traces", "status", "--project", root])).stdout);
    assert_contains(&status, "local traces: on");
    assert_contains(&status, "(0 runs recorded)");
    assert_contains(&status, "there is no cloud tracing");
    assert_contains(
        &text(&run_ok(crewai(&["traces", "disable"])).stdout),
        "set CREWAI_LOCAL_TRACES=0",
    );
    assert_contains(
        &text(&run_ok(crewai(&["traces", "enable"])).stdout),
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    );

    // Turned off, a run leaves no trace, and status says so.
    let server = ScriptedServer::start_blocking();
    server.push_text("notes");
    let mut command = crewai(&[
        "run",
        "--project",
        root,
        "--inputs",
        "topic=AI",
        "--inputs",
        "year=2026",
    ]);
    command.env("CREWAI_LOCAL_TRACES", "0");
    run_ok(with_server(command, &server));
    assert!(!dir.path().join(".crewai/traces").exists());
    let mut status = crewai(&["traces", "status", "--project", root]);
    status.env("CREWAI_LOCAL_TRACES", "off");
    assert_contains(&text(&run_ok(status).stdout), "local traces: off");
}

#[test]
fn models_list_has_a_json_form_and_a_bad_log_filter_is_a_usage_error() {
    let models: Value =
        serde_json::from_slice(&run_ok(crewai(&["models", "list", "--json"])).stdout).unwrap();
    assert!(
        models["known"]
            .as_array()
            .is_some_and(|known| known.iter().any(|m| m["model"] == "local/smollm2-135m")),
        "{models}"
    );
    let bad = run(crewai(&["--log", "warn,=[", "version"]));
    assert_eq!(bad.status.code(), Some(2));
    assert_contains(&text(&bad.stderr), "--log 'warn,=['");
    run_ok(crewai(&["--log", "debug", "--color", "never", "version"]));
}
