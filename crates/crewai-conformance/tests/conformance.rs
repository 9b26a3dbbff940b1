//! The acceptance suite: every shared CrewAI case must pass, except those listed with a reason
//! in `conformance/expected-failures.txt` at the repository root. A listed case that now passes
//! fails the test too, so the list only shrinks.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crewai_conformance::runner::{RunOptions, run_all, select_cases, summary_line};

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `name: reason` lines; `#` starts a comment.
fn expected_failures(path: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut out = BTreeMap::new();
    for (number, line) in text.lines().enumerate() {
        let line = line
            .split_once('#')
            .map_or(line, |(before, _)| before)
            .trim();
        if line.is_empty() {
            continue;
        }
        let (name, reason) = line.split_once(':').unwrap_or_else(|| {
            panic!(
                "{}:{}: expected `name: reason`, got {line:?}",
                path.display(),
                number + 1
            )
        });
        let reason = reason.trim();
        assert!(
            !reason.is_empty(),
            "{}:{}: `{name}` needs a reason naming the missing behaviour",
            path.display(),
            number + 1
        );
        out.insert(name.trim().to_string(), reason.to_string());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_cases_pass_except_the_expected_failures() {
    let cases = manifest_dir().join("../../../shared/conformance/cases");
    assert!(
        cases.is_dir(),
        "the shared conformance cases are not at {} (they live next to the repository, in ../shared/conformance/cases)",
        cases.display()
    );
    let expected =
        expected_failures(&manifest_dir().join("../../conformance/expected-failures.txt"));
    let dirs = select_cases(&cases, None).unwrap_or_else(|e| panic!("{e}"));
    // A shorter deadline than the binary's: no shared case needs more than a few seconds.
    let options = RunOptions {
        timeout: std::time::Duration::from_secs(30),
        ..RunOptions::default()
    };
    let reports = run_all(dirs, &options, |_| {}).await;

    let mut problems = Vec::new();
    for report in &reports {
        match (report.passed(), expected.get(&report.name)) {
            (false, None) => {
                let mut text = format!("FAIL {}: {} (not in expected-failures.txt)", report.name, report.reason);
                if let Some(diff) = &report.diff {
                    text.push('\n');
                    text.push_str(diff);
                }
                problems.push(text);
            }
            (true, Some(reason)) => problems.push(format!(
                "PASS {}: listed in expected-failures.txt ({reason}) but passes now; remove it from the list",
                report.name
            )),
            _ => {}
        }
    }
    for name in expected.keys() {
        if !reports.iter().any(|r| &r.name == name) {
            problems.push(format!(
                "expected-failures.txt lists `{name}`, which is not a case"
            ));
        }
    }
    for report in &reports {
        println!("{}", report.line());
    }
    println!("{}", summary_line(&reports));
    assert!(
        problems.is_empty(),
        "{} problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}
