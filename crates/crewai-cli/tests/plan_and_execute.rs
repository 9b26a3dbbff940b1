//! The `plan-and-execute` example run as a user runs it, against a scripted OpenAI-compatible
//! server: the inspector's plan, its two reading steps in one round (each reading a file with
//! the file tool), the observer, the deciding step, and the answer; the progress lines.

mod support;

use crewai_testkit::scripted::{Reply, ScriptedServer};
use serde_json::json;
use support::{assert_contains, copy_dir, crewai_at, dry_run, examples, run_ok, succeeded, text};

#[test]
fn the_example_plans_reads_both_notes_at_once_and_answers() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&examples().join("plan-and-execute"), dir.path());
    let server = ScriptedServer::start_blocking();
    server.push(Reply::tool_call(
        "create_reasoning_plan",
        json!({"plan": "Read both rows, then pick.", "ready": true, "steps": [
            {"step_number": 1, "description": "Read the north notes", "tool_to_use": "file_read", "depends_on": []},
            {"step_number": 2, "description": "Read the south notes", "tool_to_use": "file_read", "depends_on": []},
            {"step_number": 3, "description": "Pick the hive", "tool_to_use": null, "depends_on": [1, 2]}
        ]}),
    ));
    // Both reading steps run at once: each asks for one file, then reports it.
    server.push(Reply::tool_call(
        "file_read",
        json!({"file_path": "notes/north.md"}),
    ));
    server.push(Reply::tool_call(
        "file_read",
        json!({"file_path": "notes/south.md"}),
    ));
    server.push_text("Notes read.");
    server.push_text("Notes read.");
    server.push(Reply::tool_call(
        "observe_step_results",
        json!({"goal_achieved": false, "last_result_is_answer": false, "replan": false, "reason": "Both rows read."}),
    ));
    server.push_text("N2. No eggs and queen cells started: the colony may be queenless.");
    server.push(Reply::tool_call(
        "observe_step_results",
        json!({"goal_achieved": true, "last_result_is_answer": true, "replan": false, "reason": "Hive picked."}),
    ));
    let mut command = crewai_at(&["run", "--project", dir.path().to_str().unwrap()], &server);
    command.current_dir(dir.path());
    let out = run_ok(command);
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert_contains(&stdout, "N2. No eggs and queen cells started");
    assert_contains(&stderr, "planned 3 step(s)");
    assert_contains(&stderr, "step 3: Pick the hive");

    let requests = server.requests();
    assert_eq!(
        requests.len(),
        8,
        "plan, 2 × 2 step calls, observe, step, observe"
    );
    assert_eq!(requests[0].tool_names(), vec!["create_reasoning_plan"]);
    let tool_results: String = requests
        .iter()
        .flat_map(|r| r.messages().to_vec())
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str().map(str::to_string))
        .collect();
    assert!(
        tool_results.contains("two queen cells started") && tool_results.contains("chalkbrood"),
        "both files were read: {tool_results}"
    );
    let decide = requests[6].messages().last().unwrap()["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(decide.contains("Pick the hive"), "{decide}");
}

#[test]
fn a_dry_run_shows_how_the_agent_plans() {
    let out = succeeded(dry_run(&examples().join("plan-and-execute"), &[]));
    assert_contains(
        &text(&out.stdout),
        "plans each task: medium effort, at most 5 steps, 1 replan(s), results observed",
    );
}
