//! The workload contract against the real scripted server (`shared/bench/mock_llm.py`): four
//! chat completions per kickoff and one distinct output, sequentially and concurrently.
//!
//! Needs `python3` and the shared benchmark beside the checkout: without them the test is
//! reported as skipped, and fails under `CI=true` (see `crewai_testkit::prereq`).
//! `harness = false`: every test is registered in `main`.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, Stdio};

use crewai_testkit::prereq::{Prerequisite, Suite};

fn main() -> ExitCode {
    let python = Prerequisite::program(
        "python3",
        "python3",
        &["--version"],
        "install python3 (`apt-get install python3`; .ci/run does it)",
    );
    let bench = Prerequisite::file(
        "the shared benchmark's scripted server",
        shared_bench().join("mock_llm.py"),
        "put the shared benchmark at ../shared/bench (beside this checkout)",
    );
    Suite::new()
        .test_needing(
            "four_calls_per_kickoff_and_one_output",
            &[&python, &bench],
            four_calls_per_kickoff_and_one_output,
        )
        .run()
}

fn shared_bench() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/bench")
}

/// The mock server on a free port; killed when dropped.
struct Mock {
    child: Child,
    port: u16,
}

impl Mock {
    fn start() -> Mock {
        let script = shared_bench().join("mock_llm.py");
        let mut child = Command::new("python3")
            .arg(&script)
            .args(["--port", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("python3 {} could not start: {e}", script.display()));
        let stdout = child.stdout.take().expect("piped stdout");
        let mut first = String::new();
        BufReader::new(stdout)
            .read_line(&mut first)
            .expect("the mock prints its port");
        let port = first
            .strip_prefix("PORT ")
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line from the mock: {first:?}"));
        Mock { child, port }
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn run_bench(port: u16, runs: &str, concurrency: &str) -> serde_json::Value {
    let output = Command::new(env!("CARGO_BIN_EXE_crewai-bench"))
        .arg("--config")
        .arg(shared_bench().join("crewai_py/config"))
        .args([
            "--port",
            &port.to_string(),
            "--runs",
            runs,
            "--concurrency",
            concurrency,
            "--label",
            "test",
        ])
        .stdin(Stdio::null())
        .output()
        .expect("crewai-bench runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "crewai-bench failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "exactly one line on stdout, got {stdout:?}");
    serde_json::from_str(lines[0]).expect("the line is JSON")
}

fn four_calls_per_kickoff_and_one_output() {
    let mock = Mock::start();
    for (runs, concurrency) in [("3", "1"), ("6", "3")] {
        let line = run_bench(mock.port, runs, concurrency);
        let runs: u64 = runs.parse().unwrap();
        assert_eq!(line["llm_calls"], runs * 4, "{line}");
        assert_eq!(line["llm_calls_usage"], runs * 4, "{line}");
        assert_eq!(line["distinct_outputs"], 1, "{line}");
        assert!(
            line["output"]
                .as_str()
                .is_some_and(|o| o.starts_with("ANSWER ")),
            "{line}"
        );
        assert_eq!(line["label"], "test");
        for field in [
            "import_s",
            "total_wall_s",
            "per_kickoff_ms",
            "per_kickoff_ms_min",
            "per_kickoff_ms_max",
            "first_kickoff_ms",
            "build_ms",
            "llm_calls_per_s",
            "cpu_kickoffs_s",
            "cpu_per_llm_call_ms",
            "cpu_s",
            "peak_rss_mb",
            "process_s",
            "mock_max_in_flight",
        ] {
            assert!(line[field].is_number(), "{field} missing in {line}");
        }
    }
}
