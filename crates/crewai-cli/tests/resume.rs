//! `crewai run --resume`, `--fork`, `crewai runs` and Ctrl-C, run as a user runs them against a
//! scripted OpenAI-compatible server.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod support;

use crewai_testkit::scripted::{RecordedRequest, Reply, ScriptedServer};
use serde_json::Value;
use support::{assert_contains, crewai_at, last_json_line, run, run_ok, text};

fn project() -> tempfile::TempDir {
    support::project(&[
        (
            "config/agents.yaml",
            "researcher:\n  role: Researcher\n  goal: Research {topic}\n  backstory: Curious.\n",
        ),
        (
            "config/tasks.yaml",
            "research:\n  description: Research {topic} thoroughly\n  expected_output: Notes\n  agent: researcher\n\
             report:\n  description: Write the report on {topic}\n  expected_output: A report\n  agent: researcher\n",
        ),
        ("config/crew.yaml", "inputs: {topic: Rust}\n"),
    ])
}

/// The id in the `resume with: crewai run --resume ID` hint.
fn resume_hint(stderr: &str) -> String {
    let (_, after) = stderr
        .split_once("resume with: crewai run --resume ")
        .unwrap_or_else(|| panic!("no resume hint in: {stderr}"));
    after.split_whitespace().next().unwrap().to_string()
}

/// `crewai run --resume <id>`, which must succeed: the final answer it prints.
fn resume(project: &str, id: &str, server: &ScriptedServer) -> String {
    let out = run_ok(crewai_at(
        &["run", "--project", project, "--resume", id],
        server,
    ));
    text(&out.stdout).trim().to_string()
}

fn runs(project: &str, server: &ScriptedServer) -> Vec<Value> {
    let out = run_ok(crewai_at(&["runs", "--project", project, "--json"], server));
    serde_json::from_slice::<Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

fn asks_for(request: &RecordedRequest, task: &str) -> bool {
    request.body.to_string().contains(task)
}

#[test]
fn a_failed_run_resumes_and_forks_from_its_journal() {
    let dir = project();
    let project = dir.path().to_str().unwrap();
    let server = ScriptedServer::start_blocking();
    server.push_text("Rust notes");
    server.push(Reply::error(400, "the model refused"));

    let failed = run(crewai_at(&["run", "--project", project], &server));
    assert_eq!(failed.status.code(), Some(1));
    let stderr = text(&failed.stderr);
    let id = resume_hint(&stderr);
    assert_contains(&stderr, &format!("Run {id}"));
    let listed = runs(project, &server);
    assert_eq!(listed[0]["id"], id.as_str());
    assert_eq!(listed[0]["status"], "failed");
    assert_eq!(
        (
            listed[0]["tasks_finished"].as_u64(),
            listed[0]["task_count"].as_u64()
        ),
        (Some(1), Some(2))
    );

    server.push_text("The Rust report");
    let resumed = run(crewai_at(
        &["run", "--project", project, "--resume", &id, "--json"],
        &server,
    ));
    let output = last_json_line(&resumed);
    assert_eq!(output["run_id"], id.as_str());
    assert_eq!(output["tasks_output"][0]["raw"], "Rust notes");
    assert_eq!(output["raw"], "The Rust report");
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert!(!asks_for(&requests[2], "Research Rust thoroughly"));
    assert!(
        asks_for(&requests[2], "Rust notes"),
        "the kept output is the context"
    );

    // A completed run resumes to its stored output without a call.
    assert_eq!(resume(project, &id, &server), "The Rust report");
    assert_eq!(server.request_count(), 3);

    server.push_text("A second report");
    let forked = run(crewai_at(
        &[
            "run",
            "--project",
            project,
            "--fork",
            &id,
            "--from-task",
            "report",
            "--json",
        ],
        &server,
    ));
    let output = last_json_line(&forked);
    let fork_id = output["run_id"].as_str().unwrap().to_string();
    assert_ne!(fork_id, id);
    assert_eq!(output["tasks_output"][0]["raw"], "Rust notes");
    assert_eq!(output["raw"], "A second report");
    let listed = runs(project, &server);
    assert_eq!(listed[0]["id"], fork_id.as_str());
    assert_eq!(listed[0]["parent"]["run_id"], id.as_str());
    assert_eq!(listed[1]["status"], "completed");

    let human = run(crewai_at(&["runs", "--project", project], &server));
    let listing = text(&human.stdout);
    assert!(
        listing.contains(&fork_id) && listing.contains(&format!("forked from {id} at task 2")),
        "{listing}"
    );

    let unknown = run(crewai_at(
        &["run", "--project", project, "--resume", "nope"],
        &server,
    ));
    assert_eq!(unknown.status.code(), Some(2));
    assert!(text(&unknown.stderr).contains("no run 'nope'"));
    let no_task = run(crewai_at(
        &["run", "--project", project, "--fork", &id],
        &server,
    ));
    assert_eq!(no_task.status.code(), Some(2), "--fork needs --from-task");
}

fn wait_for(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "crewai did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn ctrl_c_cancels_the_run_which_then_resumes() {
    let dir = project();
    let project = dir.path().to_str().unwrap();
    let server = ScriptedServer::start_blocking();
    server.push_text("Rust notes");
    server.push(Reply::text("too late").delayed(Duration::from_secs(60)));

    let mut child = crewai_at(&["run", "--project", project], &server)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.request_count() < 2 {
        assert!(Instant::now() < deadline, "the second call never came");
        std::thread::sleep(Duration::from_millis(10));
    }
    // While it runs, a resume from another process is refused and asks nothing.
    let running = runs(project, &server);
    assert_eq!(running[0]["status"], "running");
    let id = running[0]["id"].as_str().unwrap().to_string();
    let refused = run(crewai_at(
        &["run", "--project", project, "--resume", &id],
        &server,
    ));
    let refusal = text(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{refusal}");
    assert!(
        refusal.contains(&format!(
            "run {id} is still running in process {}",
            child.id()
        )) && refusal.contains("once that process ends or is stopped"),
        "{refusal}"
    );
    assert_eq!(server.request_count(), 2);
    let listing = text(&run(crewai_at(&["runs", "--project", project], &server)).stdout);
    assert!(
        listing.contains(&format!("in process {}, last heartbeat", child.id())),
        "{listing}"
    );

    let interrupted = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupted.success());
    // The call in flight is a minute long: stopping well before it shows it was dropped.
    let status = wait_for(&mut child, Duration::from_secs(20));
    let out = child.wait_with_output().unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert_contains(&stderr, "cancelled");
    let id = resume_hint(&stderr);
    let listed = runs(project, &server);
    assert_eq!(listed[0]["status"], "cancelled");
    assert_eq!(listed[0]["tasks_finished"], 1);

    server.push_text("The Rust report");
    assert_eq!(resume(project, &id, &server), "The Rust report");
    assert_eq!(server.request_count(), 3);
    assert!(!asks_for(&server.requests()[2], "Research Rust thoroughly"));
}

#[test]
fn a_budget_stop_is_resumable() {
    let dir = project();
    let project = dir.path().to_str().unwrap();
    std::fs::write(
        dir.path().join("config/crew.yaml"),
        "inputs: {topic: Rust}\nmax_tokens: 1300\n",
    )
    .unwrap();
    let server = ScriptedServer::start_blocking();
    server.push(Reply::text("Rust notes").with_usage(1200, 80));
    let stopped = run(crewai_at(&["run", "--project", project], &server));
    let stderr = text(&stopped.stderr);
    assert_eq!(stopped.status.code(), Some(1), "{stderr}");
    let id = resume_hint(&stderr);
    assert_eq!(runs(project, &server)[0]["status"], "budget_stopped");
    assert_eq!(server.request_count(), 1);
    assert!(Path::new(project).join(".crewai/crewai.db").is_file());

    // The budget is the run's: with the 1280 tokens spent, the same limit stops it again.
    let again = run(crewai_at(
        &["run", "--project", project, "--resume", &id],
        &server,
    ));
    let stderr = text(&again.stderr);
    assert_eq!(again.status.code(), Some(1), "{stderr}");
    assert_contains(&stderr, "1280 tokens used");
    assert_eq!(server.request_count(), 1);

    // With the limit raised, the resume finishes the report.
    std::fs::write(
        dir.path().join("config/crew.yaml"),
        "inputs: {topic: Rust}\nmax_tokens: 2000\n",
    )
    .unwrap();
    server.push(Reply::text("The Rust report").with_usage(300, 20));
    assert_eq!(resume(project, &id, &server), "The Rust report");
    let listed = runs(project, &server);
    assert_eq!(listed[0]["status"], "completed");
    assert_eq!(listed[0]["token_usage"]["total_tokens"], 1280 + 320);
}
