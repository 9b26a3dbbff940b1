//! A2A with the official Python SDK (`a2a-sdk`) on both sides, the crews' model being the shared
//! scripted server (`../shared/bench/mock_llm.py`):
//! - its client against `crewai a2a serve`: the card, message/send, message/stream, tasks/get,
//!   tasks/cancel, and the errors of bad requests;
//! - a crew whose agent has `a2a:` pointing to a server written with it: the model calls the
//!   delegation tool, and the remote agent's answer is in the next request to the model.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crewai_testkit::prereq::{Prerequisite, Suite};
use crewai_testkit::process::{Announced, ListeningChild};
use serde_json::{Value, json};
use support::{assert_contains, crewai, project, run, text};

fn a2a_sdk() -> Prerequisite {
    Prerequisite::program(
        "python3 with the A2A Python SDK (a2a-sdk 1.x, with starlette and uvicorn)",
        "python3",
        &[
            "-c",
            "import a2a.client, a2a.server.routes, starlette, uvicorn",
        ],
        "python3 -m pip install 'a2a-sdk[http-server]==1.3.0' uvicorn (.ci/run does)",
    )
}

fn shared_mock() -> Prerequisite {
    Prerequisite::file(
        "the shared benchmark's scripted server",
        shared_bench().join("mock_llm.py"),
        "put the shared benchmark at ../shared/bench (beside this checkout)",
    )
}

fn shared_bench() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/bench")
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// The scripted model server, logging every request with its body to `log`.
fn mock(latency_ms: u32, log: &Path) -> ListeningChild {
    let mut command = Command::new("python3");
    command
        .arg(shared_bench().join("mock_llm.py"))
        .args([
            "--port",
            "0",
            "--latency-ms",
            &latency_ms.to_string(),
            "--log-bodies",
        ])
        .arg("--log")
        .arg(log);
    ListeningChild::start(
        command,
        Announced::Stdout,
        Duration::from_secs(30),
        ListeningChild::port_line,
    )
}

const CREW: &[(&str, &str)] = &[
    (
        "config/agents.yaml",
        "researcher:\n  role: Researcher\n  goal: Research {topic}\n  backstory: Curious.\n  llm: openai/gpt-4o-mini\n",
    ),
    (
        "config/tasks.yaml",
        "research:\n  description: Research {topic}\n  expected_output: Notes\n  agent: researcher\n",
    ),
];

/// `crewai a2a serve` for `dir` with the model at `model`, `extra` flags and `env`.
fn serve(
    dir: &Path,
    model: &ListeningChild,
    extra: &[&str],
    env: &[(&str, &str)],
) -> ListeningChild {
    let dir = dir.to_string_lossy();
    let mut args = vec!["a2a", "serve", "--project", &dir, "--port", "0"];
    args.extend_from_slice(extra);
    let mut command = crewai(&args);
    command
        .env(
            "OPENAI_BASE_URL",
            format!("http://127.0.0.1:{}/v1", model.port),
        )
        .env("OPENAI_API_KEY", "test");
    for (name, value) in env {
        command.env(name, value);
    }
    ListeningChild::start(
        command,
        Announced::Stderr,
        Duration::from_secs(30),
        |line| {
            let rest = line.strip_prefix("A2A agent listening on http://127.0.0.1:")?;
            rest.split('/').next()?.parse().ok()
        },
    )
}

/// The SDK client script's JSON lines.
fn sdk_client(server: &ListeningChild, mode: &str, message: &str) -> Vec<Value> {
    let out = Command::new("python3")
        .arg(fixture("a2a_sdk_client.py"))
        .arg(format!("http://127.0.0.1:{}", server.port))
        .args([mode, message])
        .output()
        .unwrap_or_else(|e| panic!("python3: {e}"));
    assert!(
        out.status.success(),
        "the SDK client failed:\n{}\nserver:\n{}",
        text(&out.stderr),
        server.output()
    );
    text(&out.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

fn of_kind<'a>(lines: &'a [Value], kind: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|line| line["kind"] == kind)
        .map(|line| &line["value"])
        .collect()
}

fn artifact_text(task: &Value) -> String {
    task["artifacts"][0]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn the_sdk_client_reads_the_card_sends_and_gets_the_task() {
    let dir = project(CREW);
    let log = dir.path().join("mock.jsonl");
    let model = mock(0, &log);
    let server = serve(dir.path(), &model, &[], &[]);
    let lines = sdk_client(&server, "send", "Rust async runtimes");
    let card = of_kind(&lines, "card")[0];
    assert_eq!(card["capabilities"]["streaming"], true);
    assert_eq!(card["skills"][0]["id"], "research");
    assert_eq!(card["skills"][0]["description"], "Research {topic}");
    let sent = &of_kind(&lines, "event")[0]["task"];
    assert_eq!(sent["status"]["state"], "TASK_STATE_COMPLETED", "{sent}");
    assert!(artifact_text(sent).starts_with("ANSWER "), "{sent}");
    let got = of_kind(&lines, "task")[0];
    assert_eq!(got["id"], sent["id"]);
    assert_eq!(artifact_text(got), artifact_text(sent));
    // The message's text filled the crew's only placeholder.
    assert_contains(
        &std::fs::read_to_string(&log).unwrap(),
        "Research Rust async runtimes",
    );
    // The task was a journaled kickoff, under the task's id.
    let dir_arg = dir.path().to_string_lossy();
    let runs = text(&run(crewai(&["runs", "--project", &dir_arg, "--json"])).stdout);
    assert_contains(&runs, sent["id"].as_str().unwrap());
}

fn the_sdk_client_streams_submitted_working_artifact_completed() {
    let dir = project(CREW);
    let model = mock(0, &dir.path().join("mock.jsonl"));
    let server = serve(dir.path(), &model, &[], &[]);
    let lines = sdk_client(&server, "stream", "streams");
    let events = of_kind(&lines, "event");
    let steps: Vec<String> = events
        .iter()
        .map(|event| {
            if let Some(task) = event.get("task") {
                format!("task {}", task["status"]["state"].as_str().unwrap_or("?"))
            } else if let Some(update) = event.get("statusUpdate") {
                format!(
                    "status {}",
                    update["status"]["state"].as_str().unwrap_or("?")
                )
            } else if event.get("artifactUpdate").is_some() {
                "artifact".to_string()
            } else {
                format!("other {event}")
            }
        })
        .collect();
    assert_eq!(
        steps.first().map(String::as_str),
        Some("task TASK_STATE_SUBMITTED"),
        "{steps:?}"
    );
    assert!(
        steps.contains(&"status TASK_STATE_WORKING".to_string()),
        "{steps:?}"
    );
    let artifact = steps.iter().position(|s| s == "artifact");
    let completed = steps
        .iter()
        .position(|s| s == "status TASK_STATE_COMPLETED");
    assert!(
        matches!((artifact, completed), (Some(a), Some(c)) if a < c && c == steps.len() - 1),
        "{steps:?}"
    );
    let progress = events.iter().any(|event| {
        event["statusUpdate"]["status"]["message"]["parts"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("task 'research' started"))
    });
    assert!(progress, "a working update names the task: {events:?}");
}

fn the_sdk_client_cancels_a_running_kickoff() {
    let dir = project(CREW);
    // Every model call takes 60 s: the kickoff is still running when it is cancelled.
    let model = mock(60_000, &dir.path().join("mock.jsonl"));
    let server = serve(dir.path(), &model, &[], &[]);
    let started = std::time::Instant::now();
    let lines = sdk_client(&server, "cancel", "slow topic");
    let cancelled = of_kind(&lines, "cancelled")[0];
    assert_eq!(
        cancelled["status"]["state"], "TASK_STATE_CANCELED",
        "{cancelled}"
    );
    assert_eq!(
        of_kind(&lines, "task")[0]["status"]["state"],
        "TASK_STATE_CANCELED"
    );
    assert!(
        started.elapsed() < Duration::from_secs(40),
        "{:?}",
        started.elapsed()
    );
    let dir_arg = dir.path().to_string_lossy();
    let runs = text(&run(crewai(&["runs", "--project", &dir_arg, "--json"])).stdout);
    assert_contains(&runs, "cancelled");
}

fn a_missing_input_is_an_invalid_params_error_naming_it() {
    let two_inputs: &[(&str, &str)] = &[
        CREW[0],
        (
            "config/tasks.yaml",
            "research:\n  description: Research {topic} in {year}\n  expected_output: Notes\n  agent: researcher\n",
        ),
    ];
    let dir = project(two_inputs);
    let model = mock(0, &dir.path().join("mock.jsonl"));
    let server = serve(dir.path(), &model, &[], &[]);
    let lines = sdk_client(&server, "error", "just text");
    let error = of_kind(&lines, "error")[0];
    let message = error["message"].as_str().unwrap_or_default();
    assert_contains(message, "missing crew input");
    assert_contains(message, "'year'");
}

/// Raw HTTP to the server: what an SDK would never send.
async fn raw(port: u16, body: Vec<u8>, token: Option<&str>) -> (u16, Value) {
    let client = reqwest::Client::new();
    let mut request = client
        .post(format!("http://127.0.0.1:{port}/"))
        .header("content-type", "application/json")
        .timeout(Duration::from_secs(10))
        .body(body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let body = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&body).unwrap_or(Value::String(body)),
    )
}

async fn bad_requests_get_json_rpc_errors_and_a_token_is_enforced() {
    let dir = project(CREW);
    let model = mock(0, &dir.path().join("mock.jsonl"));
    let server = serve(
        dir.path(),
        &model,
        &["--max-request-bytes", "4096"],
        &[("CREWAI_A2A_TOKEN", "s3cret")],
    );
    let port = server.port;
    let token = Some("s3cret");
    let (status, _) = raw(port, b"{}".to_vec(), None).await;
    assert_eq!(status, 401, "no token");
    let (status, _) = raw(port, b"{}".to_vec(), Some("wrong")).await;
    assert_eq!(status, 401, "a wrong token");
    let (_, answer) = raw(port, b"{not json".to_vec(), token).await;
    assert_eq!(answer["error"]["code"], -32700, "{answer}");
    let (_, answer) = raw(port, json!([1, 2]).to_string().into_bytes(), token).await;
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    let call = |method: &str, params: Value| {
        json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
            .to_string()
            .into_bytes()
    };
    let (_, answer) = raw(port, call("tasks/list", json!({})), token).await;
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
    assert_eq!(answer["id"], 7);
    let (_, answer) = raw(port, call("message/send", json!({"message": 3})), token).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    let (_, answer) = raw(port, call("tasks/get", json!({"id": "nope"})), token).await;
    assert_eq!(answer["error"]["code"], -32001, "{answer}");
    let (status, _) = raw(port, vec![b' '; 10_000], token).await;
    assert_eq!(status, 413, "over --max-request-bytes");
    // The card is public and names the scheme.
    let card: Value = reqwest::get(format!(
        "http://127.0.0.1:{port}/.well-known/agent-card.json"
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(
        card["securitySchemes"]["bearer"]["scheme"], "bearer",
        "{card}"
    );
}

fn serving_beyond_loopback_needs_a_token() {
    let dir = project(CREW);
    let dir_arg = dir.path().to_string_lossy();
    let out = run(crewai(&[
        "a2a",
        "serve",
        "--project",
        &dir_arg,
        "--host",
        "0.0.0.0",
        "--port",
        "0",
    ]));
    assert_eq!(out.status.code(), Some(2));
    assert_contains(&text(&out.stderr), "CREWAI_A2A_TOKEN");
}

fn a_crew_delegates_to_an_agent_written_with_the_sdk() {
    let mut command = Command::new("python3");
    command
        .arg(
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../crewai-a2a/tests/fixtures/sdk_server.py"),
        )
        .args(["--port", "0"]);
    let remote = ListeningChild::start(
        command,
        Announced::Stdout,
        Duration::from_secs(60),
        ListeningChild::port_line,
    );
    let agents = format!(
        "coordinator:\n  role: Coordinator\n  goal: Get {{topic}} researched\n  backstory: Knows who to ask.\n  llm: openai/gpt-4o-mini\n  a2a:\n    endpoint: http://127.0.0.1:{}\n    timeout: 20\n    max_turns: 3\n",
        remote.port
    );
    let files: &[(&str, &str)] = &[
        ("config/agents.yaml", &agents),
        (
            "config/tasks.yaml",
            "ask:\n  description: Ask the researcher about {topic}\n  expected_output: The answer\n  agent: coordinator\n",
        ),
    ];
    let dir = project(files);
    let log = dir.path().join("mock.jsonl");
    let model = mock(0, &log);
    let dir_arg = dir.path().to_string_lossy();
    let mut command = crewai(&[
        "run",
        "--project",
        &dir_arg,
        "--inputs",
        "topic=A2A",
        "--json",
    ]);
    command
        .env(
            "OPENAI_BASE_URL",
            format!("http://127.0.0.1:{}/v1", model.port),
        )
        .env("OPENAI_API_KEY", "test");
    let out = run(command);
    assert!(
        out.status.success(),
        "{}\n{}",
        text(&out.stderr),
        remote.output()
    );
    let log = std::fs::read_to_string(&log).unwrap();
    // The model was offered the remote agent as a tool, named and described from its card...
    assert_contains(&log, r#""name":"fixture_researcher""#);
    assert_contains(&log, "Answers research questions with a fixed artifact.");
    // ... called it (the mock fills `message` with "x"), and read the remote answer.
    assert_contains(&log, "REMOTE ANSWER: x");
}

fn main() -> std::process::ExitCode {
    let sdk = a2a_sdk();
    let mock = shared_mock();
    let needs: &[&Prerequisite] = &[&sdk, &mock];
    Suite::new()
        .test_needing(
            "the_sdk_client_reads_the_card_sends_and_gets_the_task",
            needs,
            the_sdk_client_reads_the_card_sends_and_gets_the_task,
        )
        .test_needing(
            "the_sdk_client_streams_submitted_working_artifact_completed",
            needs,
            the_sdk_client_streams_submitted_working_artifact_completed,
        )
        .test_needing(
            "the_sdk_client_cancels_a_running_kickoff",
            needs,
            the_sdk_client_cancels_a_running_kickoff,
        )
        .test_needing(
            "a_missing_input_is_an_invalid_params_error_naming_it",
            needs,
            a_missing_input_is_an_invalid_params_error_naming_it,
        )
        .async_test_needing(
            "bad_requests_get_json_rpc_errors_and_a_token_is_enforced",
            needs,
            bad_requests_get_json_rpc_errors_and_a_token_is_enforced,
        )
        .test(
            "serving_beyond_loopback_needs_a_token",
            serving_beyond_loopback_needs_a_token,
        )
        .test_needing(
            "a_crew_delegates_to_an_agent_written_with_the_sdk",
            needs,
            a_crew_delegates_to_an_agent_written_with_the_sdk,
        )
        .run()
}
