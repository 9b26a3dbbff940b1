//! An API key must reach the provider and nowhere else: not the console (even `--verbose`), not
//! the project's `.crewai/` store or traces, not the files a run writes, not the OTLP export, and
//! not the prompts sent to the model. The crew below runs three times with a known fake key (a
//! good run with a tool call, a run whose tool fails, a run the provider rejects with an error
//! body that echoes the key) and then everything written is searched for the key.

use std::path::{Path, PathBuf};
use std::process::Output;

mod support;

use crewai_testkit::scripted::{Reply, ScriptedServer};
use serde_json::json;
use support::{crewai_at, run, succeeded};

fn write_project(dir: &Path) {
    support::write(
        dir,
        &[
            (
                "config/agents.yaml",
                "reader:\n  role: Reader\n  goal: Summarise {topic} notes\n  backstory: Careful.\n  llm: openai/gpt-4o-mini\n  tools: [file_read]\n  max_iter: 3\n",
            ),
            (
                "config/tasks.yaml",
                "summary:\n  description: Read the notes on {topic} and summarise them\n  expected_output: A summary\n  agent: reader\n  output_file: output/summary.md\n",
            ),
            (
                "config/crew.yaml",
                "inputs:\n  topic: Rust\noutput_log_file: logs/run.txt\n",
            ),
            ("notes.txt", "Rust has no garbage collector.\n"),
        ],
    );
}

/// `crewai run --verbose` on the project, with only the environment a user would set.
fn run_crew(
    project: &Path,
    home: &Path,
    key: &str,
    server: &ScriptedServer,
    collector: &str,
) -> Output {
    let mut command = crewai_at(
        &["run", "--project", project.to_str().unwrap(), "--verbose"],
        server,
    );
    command
        .current_dir(project)
        .env("HOME", home)
        .env("OPENAI_API_KEY", key)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector)
        .env("OTEL_SERVICE_NAME", "secrets-test");
    run(command)
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().filter_map(Result::ok) {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

/// Where `secret` appears among `(place, bytes)`.
fn leaks<'a>(places: &'a [(String, Vec<u8>)], secret: &str) -> Vec<&'a str> {
    places
        .iter()
        .filter(|(_, bytes)| contains(bytes, secret))
        .map(|(place, _)| place.as_str())
        .collect()
}

#[test]
fn the_api_key_reaches_the_provider_and_nothing_else() {
    let key = format!("sk-test-SECRET-{}", uuid::Uuid::new_v4().simple());
    let project = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    write_project(project.path());
    let server = ScriptedServer::start_blocking();
    let collector = support::collector::Collector::start();
    let mut places: Vec<(String, Vec<u8>)> = Vec::new();
    let mut keep_output = |run: &str, output: &Output| {
        places.push((format!("{run} stdout"), output.stdout.clone()));
        places.push((format!("{run} stderr"), output.stderr.clone()));
    };

    // 1. A good run: the tool reads the notes, then the model answers.
    server.push(Reply::tool_call(
        "file_read",
        json!({"file_path": "notes.txt"}),
    ));
    server.push(Reply::text("Rust manages memory without a collector."));
    let good = succeeded(run_crew(
        project.path(),
        home.path(),
        &key,
        &server,
        &collector.url,
    ));
    keep_output("good run", &good);

    // 2. The tool fails (no such file); the model answers anyway.
    server.push(Reply::tool_call(
        "file_read",
        json!({"file_path": "missing.txt"}),
    ));
    server.push(Reply::text("The notes are missing."));
    let tool_failed = succeeded(run_crew(
        project.path(),
        home.path(),
        &key,
        &server,
        &collector.url,
    ));
    // The tool's result is the request's `tool` message (a user turn may follow it).
    let tool_result = server.requests()[3]
        .messages()
        .iter()
        .rev()
        .find(|message| message["role"] == "tool")
        .cloned()
        .unwrap_or_default();
    assert!(
        tool_result.to_string().contains("missing.txt"),
        "the tool failed and the model was told: {tool_result}"
    );
    keep_output("tool failure run", &tool_failed);

    // 3. The provider rejects the key and, as providers do, names it in the error.
    let rejection = json!({"error": {
        "message": format!("Incorrect API key provided: {key}. You can find your API key in your account settings."),
        "type": "invalid_request_error",
        "param": null,
        "code": "invalid_api_key"
    }});
    server.push(Reply::raw(401, "application/json", rejection.to_string()));
    let rejected = run_crew(project.path(), home.path(), &key, &server, &collector.url);
    assert!(!rejected.status.success(), "a rejected key fails the run");
    let rejected_stderr = String::from_utf8_lossy(&rejected.stderr).into_owned();
    assert!(
        rejected_stderr.contains("OPENAI_API_KEY")
            && rejected_stderr.contains("Incorrect API key provided: [redacted]"),
        "the error says what was wrong, without the key, and which setting to fix: {rejected_stderr}"
    );
    keep_output("rejected run", &rejected);

    // The key was used: every request the provider saw carried it, and only in the header.
    let requests = server.requests();
    assert_eq!(requests.len(), 5, "two calls per good run, one rejected");
    for request in &requests {
        let authorization = format!("Bearer {key}");
        assert_eq!(
            request.header("authorization"),
            Some(authorization.as_str())
        );
        assert!(
            !request.body.to_string().contains(&key),
            "the key is not sent to the model as text: {}",
            request.body
        );
    }

    // Everything written: the project folder (store, traces, logs, outputs), the home folder,
    // and what the OTLP collector received.
    for root in [project.path(), home.path()] {
        for file in files_under(root) {
            places.push((file.display().to_string(), std::fs::read(&file).unwrap()));
        }
    }
    let files: Vec<&str> = places.iter().map(|(place, _)| place.as_str()).collect();
    for expected in [".crewai/traces/", "output/summary.md", "logs/run.txt"] {
        assert!(
            files.iter().any(|place| place.contains(expected)),
            "the runs wrote {expected}: {files:#?}"
        );
    }
    let otlp = collector.requests();
    assert!(!otlp.is_empty(), "spans reached the collector");
    for (index, body) in otlp.into_iter().enumerate() {
        places.push((format!("OTLP export {index}"), body));
    }

    assert_eq!(leaks(&places, &key), Vec::<&str>::new(), "the key leaked");
    // The part after the fixed prefix alone would identify the key too.
    let unique = key.trim_start_matches("sk-test-SECRET-");
    assert_eq!(
        leaks(&places, unique),
        Vec::<&str>::new(),
        "part of the key leaked"
    );
}
