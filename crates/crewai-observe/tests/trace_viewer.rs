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

/// The fixture's lines with `extra` lines inserted, each after the fixture's line of that
/// number (0: first), as a trace file in a fresh folder.
fn fixture_with(extra: &[(usize, &str)]) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let fixture = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/two_tasks.jsonl"),
    )
    .unwrap();
    let mut lines: Vec<(usize, &str)> = fixture
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l))
        .collect();
    lines.extend(extra.iter().copied());
    // Stable: an inserted line goes after the fixture's line of the same number.
    lines.sort_by_key(|(after, _)| *after);
    let text: String = lines.iter().map(|(_, line)| format!("{line}\n")).collect();
    let path = dir.path().join("two_tasks.jsonl");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

#[test]
fn lines_of_unknown_types_are_skipped_and_said_so_but_a_broken_line_is_an_error() {
    let newer = r#"{"type": "crew_teleported", "event_id": "00000000-0000-4000-8000-0000000000f1", "parent_event_id": null, "emission_sequence": 99, "timestamp": "2026-12-01T09:00:02.000+00:00"}"#;
    let (_dir, path) = fixture_with(&[(usize::MAX, newer), (usize::MAX, newer)]);
    let trace = RunTrace::read(&path).unwrap();
    assert_eq!(trace.unknown_types.get("crew_teleported"), Some(&2));
    let tree = trace.render_tree();
    let mut lines = tree.lines();
    assert!(lines.next().unwrap().starts_with("run two_tasks"));
    assert_eq!(
        lines.next(),
        Some("(skipped events of types this version does not know: crew_teleported ×2)")
    );
    assert!(
        tree.ends_with(&TREE[TREE.find('\n').unwrap() + 1..]),
        "{tree}"
    );

    // A known type with a field of the wrong shape is corruption, with its line number.
    let broken = r#"{"type": "task_started", "task_name": 7, "event_id": "00000000-0000-4000-8000-0000000000f2", "emission_sequence": 100, "timestamp": "2026-12-01T09:00:02.000+00:00"}"#;
    let (_dir, path) = fixture_with(&[(usize::MAX, broken)]);
    let error = RunTrace::read(&path).unwrap_err().to_string();
    let lines = std::fs::read_to_string(&path).unwrap().lines().count();
    assert!(
        error.contains(&format!("line {lines} is not a trace event")),
        "{error}"
    );
}

#[test]
fn panics_and_rate_limit_waits_show_in_the_tree_where_they_happened() {
    let wait = r#"{"type": "rate_limit_wait_started", "agent_role": "Researcher", "task_name": "research", "max_rpm": 2, "wait_ms": 1500, "event_id": "00000000-0000-4000-8000-0000000000f3", "parent_event_id": "00000000-0000-4000-8000-000000000003", "emission_sequence": 101, "timestamp": "2026-12-01T09:00:00.025+00:00"}"#;
    let panic = r#"{"type": "panic_caught", "site": "tool", "name": "search", "message": "index out of bounds", "agent_role": "Researcher", "task_name": "research", "event_id": "00000000-0000-4000-8000-0000000000f4", "parent_event_id": "00000000-0000-4000-8000-000000000003", "emission_sequence": 102, "timestamp": "2026-12-01T09:00:00.795+00:00"}"#;
    let (_dir, path) = fixture_with(&[(3, wait), (7, panic)]);
    let tree = RunTrace::read(&path).unwrap().render_tree();
    let expected = "\
   │  └─ agent Researcher · 1.29s · 3700 in (1000 cached) / 230 out tokens · $0.000580
   │     ├─ rate limit · waited 1.50s (2 per minute)
   │     ├─ llm gpt-4o-mini · 500ms · 1200 in / 80 out tokens · $0.000228
   │     ├─ tool search · 250ms
   │     ├─ ! tool 'search' panicked (caught): index out of bounds
   │     └─ llm gpt-4o-mini · 500ms · 2500 in (1000 cached) / 150 out tokens · $0.000352
";
    assert!(tree.contains(expected), "{tree}");
}

#[test]
fn a_trace_written_from_a_bus_has_every_event_once_finish_returns() {
    use crewai_core::events::{EventBus, EventKind};
    use crewai_observe::local::TraceWriter;

    let dir = tempfile::tempdir().unwrap();
    let bus = EventBus::new();
    let writer = TraceWriter::attach(&bus, dir.path(), "busy").unwrap();
    let crew = bus.emit(
        None,
        EventKind::CrewKickoffStarted {
            crew_name: "busy crew".into(),
            crew_id: None,
            inputs: None,
        },
    );
    for n in 0..500 {
        bus.emit(
            Some(crew),
            EventKind::LlmStreamChunk {
                call_id: "k".into(),
                agent_role: None,
                task_name: None,
                chunk: format!("part {n}"),
            },
        );
        bus.emit(
            Some(crew),
            EventKind::TaskStarted {
                task_name: Some(format!("t{n}")),
                task_id: None,
                agent_role: None,
                context: None,
            },
        );
    }
    bus.emit(
        Some(crew),
        EventKind::CrewKickoffCompleted {
            crew_name: "busy crew".into(),
            crew_id: None,
            output: "done".into(),
            total_tokens: 0,
        },
    );
    let path = writer.finish().unwrap();
    let trace = RunTrace::read(&path).unwrap();
    // Stream chunks are left out; everything else is there, in emission order.
    assert_eq!(trace.events.len(), 502);
    assert!(
        trace
            .events
            .windows(2)
            .all(|w| w[0].emission_sequence < w[1].emission_sequence)
    );
    assert_eq!(trace.summary().name, "busy crew");
    assert_eq!(bus.listener_count(), 0, "finish detaches the writer");
}
