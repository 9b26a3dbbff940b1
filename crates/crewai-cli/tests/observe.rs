//! What `crewai run` records besides its output: cost in `--json`, a trace per kickoff under
//! `.crewai/traces/`, `crewai traces` (list, tree, HTML), a budget stop from crew.yaml that
//! `crewai replay` resumes, and OTLP export when `OTEL_EXPORTER_OTLP_ENDPOINT` is set.

use std::path::Path;

mod support;

use crewai_testkit::scripted::{Reply, ScriptedServer};
use support::{crewai_at, last_json_line, run, run_ok, text};

fn project(crew_yaml: &str) -> tempfile::TempDir {
    support::project(&[
        (
            "config/agents.yaml",
            "researcher:\n  role: Researcher\n  goal: Research {topic}\n  backstory: Curious.\n  llm: openai/gpt-4o-mini\nwriter:\n  role: Writer\n  goal: Write\n  backstory: Clear.\n  llm: openai/gpt-4o-mini\n",
        ),
        (
            "config/tasks.yaml",
            "research:\n  description: Research {topic}\n  expected_output: Notes\n  agent: researcher\nreport:\n  description: Write the report\n  expected_output: A report\n  agent: writer\n",
        ),
        ("config/crew.yaml", crew_yaml),
    ])
}

fn trace_ids(dir: &Path) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(dir.join(".crewai/traces"))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path().file_stem().unwrap().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    ids
}

/// A server with the project's two answers: 1000 + 200 tokens, then 3000 (1000 of them cached)
/// + 400.
fn research_and_report_server() -> ScriptedServer {
    let server = ScriptedServer::start_blocking();
    server.push(Reply::text("Rust notes").with_usage(1000, 200));
    server.push(
        Reply::text("The Rust report")
            .with_usage(3000, 400)
            .with_cached_tokens(1000),
    );
    server
}

#[test]
fn run_json_reports_cost_and_every_kickoff_leaves_a_trace_to_view() {
    let dir = project("inputs:\n  topic: Rust\n");
    let root = dir.path().to_str().unwrap();
    let server = research_and_report_server();

    let output = last_json_line(&run(crewai_at(
        &["run", "--project", root, "--json"],
        &server,
    )));
    let usage = &output["token_usage"];
    assert_eq!(
        (
            usage["prompt_tokens"].as_u64(),
            usage["completion_tokens"].as_u64()
        ),
        (Some(4000), Some(600))
    );
    let expected =
        (1000.0 * 0.15 + 200.0 * 0.60 + 2000.0 * 0.15 + 1000.0 * 0.075 + 400.0 * 0.60) / 1e6;
    assert!(
        (usage["cost_usd"].as_f64().unwrap() - expected).abs() < 1e-12,
        "{usage}"
    );

    let ids = trace_ids(dir.path());
    assert_eq!(ids.len(), 1, "one trace per kickoff");
    let list = run(crewai_at(&["traces", "--project", root], &server));
    let listing = text(&list.stdout);
    assert!(
        list.status.success()
            && listing.contains(&ids[0])
            && listing.contains("4600")
            && listing.contains(" ok"),
        "{listing}"
    );

    let tree = run(crewai_at(
        &["traces", &ids[0][..12], "--project", root],
        &server,
    ));
    let tree = text(&tree.stdout);
    for part in [
        "└─ crew",
        "├─ task research",
        "└─ task report",
        "agent Researcher",
        "llm gpt-4o-mini",
        "1000 in / 200 out tokens",
        "3000 in (1000 cached) / 400 out tokens",
    ] {
        assert!(tree.contains(part), "the tree shows {part}:\n{tree}");
    }

    let page = dir.path().join("timeline.html");
    run_ok(crewai_at(
        &[
            "traces",
            &ids[0],
            "--html",
            page.to_str().unwrap(),
            "--project",
            root,
        ],
        &server,
    ));
    let page = std::fs::read_to_string(page).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>") && page.contains("class=\"bar llm\""));
}

#[test]
fn a_budget_in_crew_yaml_stops_the_run_and_replay_resumes_it() {
    // The first call uses 1300 tokens, so the second one's prompt (over 10 tokens) would go over 1310.
    let dir = project("inputs:\n  topic: Rust\nmax_tokens: 1310\n");
    let root = dir.path().to_str().unwrap();
    let server = ScriptedServer::start_blocking();
    server.push(Reply::text("Rust notes").with_usage(1200, 100));
    server.push(Reply::text("The Rust report").with_usage(1500, 100));

    let out = run(crewai_at(&["run", "--project", root], &server));
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("max_tokens = 1310") && stderr.contains("'report'"),
        "{stderr}"
    );
    assert_eq!(server.request_count(), 1);

    std::fs::write(
        dir.path().join("config/crew.yaml"),
        "inputs:\n  topic: Rust\nmax_tokens: 100000\n",
    )
    .unwrap();
    let output = last_json_line(&run(crewai_at(
        &["replay", "--project", root, "-t", "report", "--json"],
        &server,
    )));
    assert_eq!(output["raw"], "The Rust report");
    assert_eq!(
        output["tasks_output"][0]["raw"], "Rust notes",
        "the finished task was kept"
    );
    assert_eq!(server.request_count(), 2);
}

#[test]
fn verbose_prints_each_calls_tokens_and_cost_and_the_running_total() {
    let dir = project("inputs:\n  topic: Rust\n");
    let root = dir.path().to_str().unwrap();
    let server = research_and_report_server();

    let out = run_ok(crewai_at(&["run", "--project", root, "--verbose"], &server));
    let stderr = text(&out.stderr);
    // gpt-4o-mini: $0.15 / $0.075 cached / $0.60 per million tokens.
    for line in [
        "  [Researcher · gpt-4o-mini] 1000 in / 200 out tokens · $0.000270 · run so far 1200 tokens, $0.000270",
        "  [Writer · gpt-4o-mini] 3000 in (1000 cached) / 400 out tokens · $0.000615 · run so far 4600 tokens, $0.000885",
    ] {
        assert!(
            stderr.lines().any(|l| l == line),
            "no line {line:?} in:\n{stderr}"
        );
    }
    assert!(text(&out.stdout).contains("The Rust report"));
}

#[test]
fn a_budget_in_flow_yaml_stops_the_flow_and_json_reports_its_usage() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let agent = "{role: Writer, goal: Write, backstory: Clear., llm: openai/gpt-4o-mini}";
    let flow = |max_tokens: u64| {
        format!(
            "name: notes\nmax_tokens: {max_tokens}\nmethods:\n  outline:\n    start: true\n    agent: {agent}\n    prompt: Outline notes on Rust.\n  write:\n    listen: outline\n    agent: {agent}\n    prompt: \"Write notes from {{outline}}\"\n"
        )
    };
    std::fs::write(dir.path().join("flow.yaml"), flow(1000)).unwrap();
    let server = ScriptedServer::start_blocking();
    server.push(Reply::text("1. Ownership").with_usage(900, 100));

    let out = run(crewai_at(&["flow", "kickoff", "--project", root], &server));
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("flow `notes` stopped in method `write` with 1 method output(s) kept")
            && stderr.contains("max_tokens = 1000"),
        "{stderr}"
    );
    assert_eq!(
        server.request_count(),
        1,
        "the call over budget was never sent"
    );

    std::fs::write(dir.path().join("flow.yaml"), flow(100_000)).unwrap();
    server.push(Reply::text("1. Ownership").with_usage(900, 100));
    server.push(Reply::text("Notes on ownership.").with_usage(300, 40));
    let output = last_json_line(&run(crewai_at(
        &["flow", "kickoff", "--project", root, "--json"],
        &server,
    )));
    assert_eq!(output["result"], "Notes on ownership.");
    assert_eq!(output["usage"]["total_tokens"], 1340);
    assert_eq!(output["usage"]["prompt_tokens"], 1200);
}

#[test]
fn spans_go_to_the_collector_named_by_the_environment() {
    let dir = project("inputs:\n  topic: Rust\n");
    let root = dir.path().to_str().unwrap();
    let server = ScriptedServer::start_blocking();
    server.push_text("Rust notes").push_text("The Rust report");
    let collector = support::collector::Collector::start();

    let mut command = crewai_at(&["run", "--project", root], &server);
    command
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.url)
        .env("OTEL_SERVICE_NAME", "cli-test");
    run_ok(command);

    let seen = collector.paths_and_content_types();
    assert!(!seen.is_empty(), "no span reached the collector");
    assert!(
        seen.iter()
            .all(|(path, content_type)| path == "/v1/traces"
                && content_type == "application/x-protobuf"),
        "{seen:?}"
    );
}

#[test]
fn a_cost_budget_over_an_unpriced_model_needs_allow_unpriced() {
    let dir = support::project(&[
        (
            "config/agents.yaml",
            "researcher:\n  role: Researcher\n  goal: Research {topic}\n  backstory: Curious.\n  llm: openai/our-own-finetune-7\n",
        ),
        (
            "config/tasks.yaml",
            "research:\n  description: Research {topic}\n  expected_output: Notes\n  agent: researcher\n",
        ),
        (
            "config/crew.yaml",
            "inputs:\n  topic: Rust\nmax_cost_usd: 0.5\n",
        ),
    ]);
    let root = dir.path().to_str().unwrap();
    let server = ScriptedServer::start_blocking();
    server.push(Reply::text("Rust notes").with_usage(100, 10));

    let refused = run(crewai_at(&["run", "--project", root], &server));
    assert_eq!(refused.status.code(), Some(2), "a configuration error");
    let stderr = text(&refused.stderr);
    assert!(
        stderr.contains("our-own-finetune-7") && stderr.contains("--allow-unpriced"),
        "{stderr}"
    );
    assert_eq!(server.request_count(), 0, "refused before any call");

    let output = last_json_line(&run(crewai_at(
        &["run", "--project", root, "--allow-unpriced", "--json"],
        &server,
    )));
    assert_eq!(output["raw"], "Rust notes");
    assert_eq!(server.request_count(), 1);
}
