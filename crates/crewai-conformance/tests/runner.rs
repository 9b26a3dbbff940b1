//! The runner end to end on small synthetic cases (a bare LLM call through the real OpenAI
//! client against the replay server), the shared cases' files all load, and shared cases whose
//! requests are made to differ from CrewAI's fail the structural check.

use std::path::{Path, PathBuf};

use crewai_conformance::case::CaseDir;
use crewai_conformance::runner::{
    RunOptions, Status, json_report, run_all, run_case, select_cases, summary_line,
};
use crewai_testkit::replay::Cassette;

const REPLY: &str = r#"{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"The capital of France is Paris."},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}"#;

fn cassette(replies: usize) -> String {
    let mut text = String::from("interactions:\n");
    text.push_str("- request: {body: null, headers: {}, method: POST, uri: 'https://app.crewai.com/crewai_plus/api/v1/tracing/batches'}\n");
    text.push_str("  response: {body: {string: '{}'}, headers: {}, status: {code: 401, message: Unauthorized}}\n");
    for _ in 0..replies {
        let recorded = r#"{"messages":[{"role":"user","content":"What is the capital of France?"}],"model":"gpt-4o-mini"}"#;
        text.push_str(&format!("- request: {{body: '{recorded}', headers: {{}}, method: POST, uri: 'https://api.openai.com/v1/chat/completions'}}\n"));
        text.push_str(&format!(
            "  response: {{body: {{string: '{REPLY}'}}, headers: {{Content-Type: [application/json]}}, status: {{code: 200, message: OK}}}}\n"
        ));
    }
    text
}

fn write_case(root: &Path, name: &str, message: &str, expect: &str, replies: usize) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let case = format!(
        "name: {name}\nmode: llm\nprovider: openai\nllm: {{model: gpt-4o-mini}}\nmessage: {message:?}\nexpect:\n{expect}"
    );
    std::fs::write(dir.join("case.yaml"), case).unwrap();
    std::fs::write(dir.join("cassette.yaml"), cassette(replies)).unwrap();
    dir
}

/// The case failed with exactly one structural difference, `difference`, in its first request.
fn assert_fails_structurally(report: &CaseReport, difference: &str) {
    assert_eq!(report.status, Status::Fail);
    let expected = format!(
        "structure: request 1 POST /v1/chat/completions (recorded interaction 0): {difference}"
    );
    assert_eq!(
        structural_failures(report),
        [&expected],
        "{:?}",
        report.failures
    );
}

#[tokio::test]
async fn a_matching_case_passes_and_failures_say_why() {
    let root = tempfile::tempdir().unwrap();
    let good = write_case(
        root.path(),
        "good",
        "What is the capital of France?",
        "  raw_contains: [Paris]\n  requests: 1\n  usage: {total_tokens: 19}\n",
        2,
    );
    let wrong = write_case(
        root.path(),
        "wrong",
        "What is the capital of Spain?",
        "  raw: Madrid\n",
        1,
    );
    let empty = write_case(root.path(), "empty", "hi", "  raw_contains: [x]\n", 0);
    let options = RunOptions {
        parallel: 2,
        ..Default::default()
    };

    let report = run_case(&good, &options).await;
    assert_eq!(report.status, Status::Pass, "{report:?}");
    assert_eq!((report.requests_consumed, report.requests_recorded), (1, 2));
    assert_eq!(report.line(), "PASS good");

    let report = run_case(&wrong, &options).await;
    assert_eq!(report.status, Status::Fail);
    assert_eq!(
        report.line(),
        "FAIL wrong: raw: got \"The capital of France is Paris.\", expected \"Madrid\""
    );
    let diff = report.diff.unwrap();
    assert!(
        diff.contains("message 0 (user) differs at char 23"),
        "{diff}"
    );
    assert!(
        diff.contains("capital of ⟦Spain?⟧") && diff.contains("capital of ⟦France?⟧"),
        "{diff}"
    );

    let report = run_case(&empty, &options).await;
    assert_eq!(report.status, Status::Fail);
    assert_eq!(
        report.reason, "ran out of recorded responses at request 1 (/v1/chat/completions)",
        "{report:?}"
    );

    let reports = run_all(select_cases(root.path(), None).unwrap(), &options, |_| {}).await;
    assert_eq!(summary_line(&reports), "1 passed, 2 failed");
    let json = json_report(&reports);
    assert_eq!(json["cases"][1]["name"], "good");
    assert_eq!(json["cases"][1]["status"], "pass");
    assert_eq!(json["cases"][1]["requests_consumed"], 1);
    assert!(json["cases"][0]["duration_ms"].is_u64());
    assert_eq!(select_cases(root.path(), Some("wrong")).unwrap().len(), 1);
    assert!(select_cases(root.path(), Some("nope")).is_err());
}

#[tokio::test]
async fn broken_cases_fail_with_the_file_and_key() {
    let root = tempfile::tempdir().unwrap();
    let dir = write_case(root.path(), "typo", "hi", "  raww: x\n", 1);
    let report = run_case(&dir, &RunOptions::default()).await;
    assert_eq!(report.status, Status::Fail);
    assert!(
        report.reason.starts_with("invalid case: ")
            && report.reason.contains("unknown field `raww`"),
        "{}",
        report.reason
    );
}

#[test]
fn every_shared_case_and_cassette_loads() {
    let cases = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance/cases");
    if !cases.is_dir() {
        panic!(
            "the shared conformance cases are not at {}",
            cases.display()
        );
    }
    let dirs = select_cases(&cases, None).unwrap();
    assert!(dirs.len() >= 50, "only {} cases", dirs.len());
    for dir in dirs {
        let case = CaseDir::load(&dir).unwrap_or_else(|e| panic!("{e}"));
        let cassette = Cassette::load(&case.cassette).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            !cassette.interactions.is_empty(),
            "{}: no LLM interaction",
            dir.display()
        );
    }
}

// The structural check fails a case whose requests differ from CrewAI's. Each test takes a
// real shared case, makes our side differ in one way (by changing what the engine is asked to
// do, or by rewriting what it sent before the comparison), and shows the case then fails with a
// diff naming the field. The cassettes on disk are never touched.

use crewai_conformance::runner::{CaseReport, RewriteSent};
use serde_json::json;

fn shared_case(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/conformance/cases")
        .join(name);
    assert!(dir.is_dir(), "the shared case {} is missing", dir.display());
    dir
}

/// A copy of a shared case in a temporary folder, its case.yaml changed by `edit`.
fn edited_case(root: &Path, name: &str, edit: impl FnOnce(&mut yaml_serde::Value)) -> PathBuf {
    let source = shared_case(name);
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(source.join("cassette.yaml"), dir.join("cassette.yaml")).unwrap();
    let text = std::fs::read_to_string(source.join("case.yaml")).unwrap();
    let mut case: yaml_serde::Value = yaml_serde::from_str(&text).unwrap();
    edit(&mut case);
    std::fs::write(dir.join("case.yaml"), yaml_serde::to_string(&case).unwrap()).unwrap();
    dir
}

fn rewriting(rewrite: impl Fn(&mut serde_json::Value) + Send + Sync + 'static) -> RunOptions {
    RunOptions {
        rewrite_sent: Some(RewriteSent::new(move |request| {
            if request.number == 1
                && let Some(body) = request.body.as_mut()
            {
                rewrite(body);
            }
        })),
        ..RunOptions::default()
    }
}

fn structural_failures(report: &CaseReport) -> Vec<&String> {
    report
        .failures
        .iter()
        .filter(|f| f.starts_with("structure: "))
        .collect()
}

#[tokio::test]
async fn a_dropped_tool_fails_the_case() {
    let case = shared_case("crew_with_delegating_agents");
    let untouched = run_case(&case, &RunOptions::default()).await;
    assert_eq!(untouched.status, Status::Pass, "{untouched:?}");

    // What the engine sent loses one of its two delegation tools.
    let options = rewriting(|body| {
        if let Some(tools) = body["tools"].as_array_mut() {
            tools.retain(|t| t["function"]["name"] != "ask_question_to_coworker");
        }
    });
    let report = run_case(&case, &options).await;
    assert_fails_structurally(
        &report,
        "tools: sent [\"delegate_work_to_coworker\"], recorded [\"delegate_work_to_coworker\", \"ask_question_to_coworker\"] (not sent: [\"ask_question_to_coworker\"]; not recorded: [])",
    );
    let diff = report.diff.as_deref().unwrap_or_default();
    assert!(
        diff.contains("request 1 POST /v1/chat/completions vs recorded interaction 0:\n    ✗ structure: tools: sent [\"delegate_work_to_coworker\"]"),
        "{diff}"
    );

    // The same through the engine: the case's agent is given no tool at all.
    let root = tempfile::tempdir().unwrap();
    let dir = edited_case(root.path(), "agent_execute_task_with_tool", |case| {
        case["agents"]["agent"]["tools"] = yaml_serde::Value::Sequence(vec![]);
        for task in case["tasks"].as_sequence_mut().into_iter().flatten() {
            if let yaml_serde::Value::Mapping(task) = task {
                task.remove("tools");
            }
        }
    });
    let report = run_case(&dir, &RunOptions::default()).await;
    assert_eq!(report.status, Status::Fail);
    assert!(
        structural_failures(&report).iter().any(|f| f.starts_with(
            "structure: request 1 POST /v1/chat/completions (recorded interaction 0): tools: sent [], recorded [\"dummy_tool\"]"
        )),
        "{:?}",
        report.failures
    );
}

#[tokio::test]
async fn a_changed_tool_choice_fails_the_case() {
    let case = shared_case("agent_execute_task_with_tool");
    let untouched = run_case(&case, &RunOptions::default()).await;
    assert_eq!(untouched.status, Status::Pass, "{untouched:?}");

    let report = run_case(
        &case,
        &rewriting(|body| body["tool_choice"] = json!("required")),
    )
    .await;
    assert_fails_structurally(&report, "tool_choice: sent required, recorded auto");
    assert_eq!(
        report.reason, report.failures[0],
        "the structural difference is the reason"
    );
    let diff = report.diff.as_deref().unwrap_or_default();
    assert!(
        diff.contains("✗ structure: tool_choice: sent required, recorded auto"),
        "{diff}"
    );

    // Forcing one tool by name is a different choice too.
    let forced = rewriting(|body| {
        body["tool_choice"] = json!({"type": "function", "function": {"name": "dummy_tool"}})
    });
    let report = run_case(&case, &forced).await;
    assert!(
        report
            .failures
            .iter()
            .any(|f| f.ends_with("tool_choice: sent function:dummy_tool, recorded auto")),
        "{:?}",
        report.failures
    );
}

#[tokio::test]
async fn an_added_message_fails_the_case() {
    let untouched = run_case(
        &shared_case("llm_call_with_message_list"),
        &RunOptions::default(),
    )
    .await;
    assert_eq!(untouched.status, Status::Pass, "{untouched:?}");

    // The engine is asked to send one message more than CrewAI sent: every expectation of the
    // case still holds (the reply is the same), only the structure tells.
    let root = tempfile::tempdir().unwrap();
    let dir = edited_case(root.path(), "llm_call_with_message_list", |case| {
        let extra: yaml_serde::Value =
            yaml_serde::from_str("{role: user, content: 'And of Spain?'}").unwrap();
        if let Some(messages) = case["message"].as_sequence_mut() {
            messages.push(extra);
        }
    });
    let report = run_case(&dir, &RunOptions::default()).await;
    assert_eq!(report.status, Status::Fail);
    assert_eq!(
        report.failures,
        ["structure: request 1 POST /v1/chat/completions (recorded interaction 0): messages.roles: sent [\"user\", \"user\"], recorded [\"user\"] (first difference at message 1: sent user, recorded nothing)".to_string()]
    );
    let diff = report.diff.as_deref().unwrap_or_default();
    assert!(
        diff.contains("✗ structure: messages.roles: sent [\"user\", \"user\"]"),
        "{diff}"
    );

    // An added tool result that answers no call fails on its reference as well.
    let case = shared_case("agent_execute_task_with_tool");
    let dangling = rewriting(|body| {
        if let Some(messages) = body["messages"].as_array_mut() {
            messages
                .push(json!({"role": "tool", "tool_call_id": "call_nobody_made", "content": "?"}));
        }
    });
    let report = run_case(&case, &dangling).await;
    let failures = structural_failures(&report);
    assert!(
        failures.iter().any(|f| f.contains(
            "messages.roles: sent [\"system\", \"user\", \"tool\"], recorded [\"system\", \"user\"]"
        )),
        "{failures:?}"
    );
    assert!(
        failures.iter().any(|f| f.contains("messages[2].tool_call_id: sent a tool answering id \"call_nobody_made\", which no earlier message's tool calls carry")),
        "{failures:?}"
    );
}
