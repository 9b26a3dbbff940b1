//! The trace viewer on a recorded run (a fixture trace file with fixed ids and times): the tree
//! and the HTML timeline, compared as plain strings.

use std::path::Path;

use crewai_observe::local::{RunTrace, list_runs, render_run_list};

fn fixture() -> RunTrace {
    RunTrace::read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/two_tasks.jsonl"))
        .unwrap()
}

const TREE: &str = "\
run two_tasks · 1.63s · 3700 in (1000 cached) / 230 out tokens · $0.000580 · failed
└─ crew research crew · 1.63s · 3700 in (1000 cached) / 230 out tokens · $0.000580 · error: task 'write': agent failed
   ├─ task research · 1.31s · 3700 in (1000 cached) / 230 out tokens · $0.000580
   │  └─ agent Researcher · 1.29s · 3700 in (1000 cached) / 230 out tokens · $0.000580
   │     ├─ llm gpt-4o-mini · 500ms · 1200 in / 80 out tokens · $0.000228
   │     ├─ tool search · 250ms
   │     └─ llm gpt-4o-mini · 500ms · 2500 in (1000 cached) / 150 out tokens · $0.000352
   └─ task write · 290ms · error: task 'write': agent failed
      └─ agent Writer · 270ms · error: agent 'Writer': the LLM call failed
         └─ llm gpt-4o-mini · 250ms · error: HTTP 500 from the provider
";

#[test]
fn the_tree_shows_agents_tasks_calls_durations_tokens_and_cost() {
    assert_eq!(fixture().render_tree(), TREE);
}

#[test]
fn the_html_page_is_self_contained_with_one_timeline_row_per_span() {
    let html = fixture().render_html();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(
        !html.contains("<script") && !html.contains("http://") && !html.contains("https://"),
        "no scripts, no external resources"
    );
    assert_eq!(html.matches("<tr><td class=\"name\"").count(), 9);
    let first_call = "<tr><td class=\"name\" style=\"padding-left:4.0em\">llm <b>gpt-4o-mini</b></td><td class=\"num\">500ms</td><td class=\"num\">1200 in / 80 out tokens · $0.000228</td><td class=\"lane\"><div class=\"bar llm\" style=\"left:1.84%;width:30.67%\" title=\"llm gpt-4o-mini\"></div></td></tr>";
    assert!(html.contains(first_call), "{html}");
    assert!(
        html.contains("class=\"bar llm failed\""),
        "the failed call is marked"
    );
}

#[test]
fn the_run_list_has_one_line_per_trace() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/two_tasks.jsonl"),
        dir.path().join("run-a.jsonl"),
    )
    .unwrap();
    let runs = list_runs(dir.path()).unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(
        (
            runs[0].name.as_str(),
            runs[0].status,
            runs[0].usage.total_tokens
        ),
        ("research crew", "failed", 3930)
    );
    let table = render_run_list(&runs);
    assert!(
        table.lines().nth(1).unwrap().starts_with("run-a "),
        "{table}"
    );
    assert!(
        table.contains("$0.000580") && table.contains("2026-12-01 09:00:00 UTC"),
        "{table}"
    );
    assert!(
        RunTrace::find(dir.path(), "run-").is_ok(),
        "a prefix of the id is enough"
    );
    assert!(RunTrace::find(dir.path(), "nope").is_err());
}
