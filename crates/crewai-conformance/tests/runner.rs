//! The runner end to end on small synthetic cases (a bare LLM call through the real OpenAI
//! client against the replay server), and the shared cases' files all load.

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
