//! The `consensual` example (`process: consensual`, three voters, one revision round, a judge)
//! run as a user runs it, against a scripted OpenAI-compatible server: the voters' first
//! answers, the revision requests that show the others' answers by label only, the judge's
//! structured request, the merged answer as the run's output, and the record in `--json`.
//!
//! The voters of a round answer at the same time, so which voter gets which scripted reply of
//! that round is not fixed; a round's replies are all taken before the next round starts, so
//! the assertions hold whatever the order.

mod support;

use crewai_testkit::scripted::{RecordedRequest, ScriptedServer};
use serde_json::json;
use support::{assert_contains, copy_dir, crewai_at, examples, last_json_line, run};

fn user_text(request: &RecordedRequest) -> String {
    request
        .messages()
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

const FIRST: [&str; 3] = [
    "Estimate: 40 piano tuners",
    "Estimate: 60 piano tuners",
    "Estimate: 150 piano tuners",
];
const REVISED: [&str; 3] = [
    "Estimate: 50 piano tuners",
    "Estimate: 55 piano tuners",
    "Estimate: 90 piano tuners",
];
const MERGED: &str = "Households with a piano: 1 in 20.\nEstimate: 60 piano tuners";

#[test]
fn the_consensual_example_revises_then_the_judge_merges() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&examples().join("consensual"), dir.path());
    let project = dir.path().to_str().unwrap();
    let server = ScriptedServer::start_blocking();
    for answer in FIRST.iter().chain(&REVISED) {
        server.push_text(*answer);
    }
    server.push_text(
        json!({"pick": "MERGE", "merged_answer": MERGED, "reason": "The estimates agree on the order of magnitude."})
            .to_string(),
    );

    let out = run(crewai_at(&["run", "--project", project, "--json"], &server));
    let output = last_json_line(&out);
    assert_eq!(output["raw"], MERGED);
    assert_eq!(output["token_usage"]["successful_requests"], 7);

    let requests = server.requests();
    assert_eq!(requests.len(), 7, "3 answers, 3 revisions, 1 judge call");
    let roles = ["Economist", "Engineer", "Skeptic"];
    for request in &requests[..3] {
        let text = user_text(request);
        assert_contains(&text, "Estimate how many piano tuners work in Lisbon.");
        assert!(!text.contains("### Answer"), "{text}");
    }
    for request in &requests[3..6] {
        let text = user_text(request);
        assert_contains(&text, "### Your answer\n");
        assert_eq!(text.matches("### Answer ").count(), 2, "{text}");
        let shown = FIRST.iter().filter(|a| text.contains(*a)).count();
        assert_eq!(shown, 3, "its own answer and the two others: {text}");
        for role in roles {
            assert!(!text.contains(role), "{role} is named in {text}");
        }
    }
    let judge = &requests[6];
    assert_eq!(
        judge.body["response_format"]["json_schema"]["name"],
        "ConsensusJudgement"
    );
    let brief = user_text(judge);
    for label in ["### Answer A\n", "### Answer B\n", "### Answer C\n"] {
        assert_contains(&brief, label);
    }
    for answer in REVISED {
        assert_contains(&brief, answer);
    }

    let record = &output["tasks_output"][0]["consensus"];
    assert_eq!(record["method"], "judge");
    assert_eq!(record["voters"], json!(roles));
    assert_eq!(record["rounds"].as_array().map(Vec::len), Some(2));
    assert_eq!(record["outcome"]["kind"], "merged");
    assert_eq!(
        record["reason"],
        "The estimates agree on the order of magnitude."
    );
    assert_eq!(output["tasks_output"][0]["agent"], "Consensus Judge");
}

#[test]
fn the_dry_run_says_what_a_task_costs() {
    let out = run(support::crewai(&[
        "run",
        "--project",
        examples().join("consensual").to_str().unwrap(),
        "--dry-run",
    ]));
    let stdout = support::text(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{stdout}",
        support::text(&out.stderr)
    );
    assert_contains(&stdout, "consensual process, 3 agents, 1 tasks");
    assert_contains(
        &stdout,
        "Consensus: voters economist, engineer, skeptic; 1 revision round(s); decided by a judge [llm: default]; at least 7 model calls per task",
    );
}
