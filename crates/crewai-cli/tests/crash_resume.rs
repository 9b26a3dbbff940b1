//! Kills `crewai run` with SIGKILL at random moments and resumes it: whatever the journal held
//! at the kill comes back identical after `crewai run --resume`, those tasks ask the model
//! nothing more, and the resumed run completes every task. The run's journaled usage keeps what
//! the killed attempt spent on the tasks it journaled, and the resume adds its own calls to it.
//!
//! `CREWAI_CRASH_RUNS` sets the number of kills (default 10), `CREWAI_CRASH_SEED` the seed.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crewai_store::{RunStatus, Store};
use crewai_testkit::scripted::{RecordedRequest, Reply, ScriptedServer};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;

/// What the scripted server reports for every call (its default usage: 10 prompt + 5 completion).
const TOKENS_PER_CALL: u64 = 15;

/// The markers in each task's description, in task order (`alpha` and `beta` run at once).
const MARKERS: [&str; 4] = ["ALPHA-TASK", "BETA-TASK", "GAMMA-TASK", "DELTA-TASK"];

const TASKS: &str = "\
alpha:
  description: ALPHA-TASK list facts about {topic}
  expected_output: Facts
  agent: worker
  async_execution: true
beta:
  description: BETA-TASK list open questions about {topic}
  expected_output: Questions
  agent: worker
  async_execution: true
gamma:
  description: GAMMA-TASK weigh the facts against the questions
  expected_output: An assessment
  agent: worker
delta:
  description: DELTA-TASK conclude
  expected_output: A conclusion
  agent: worker
";

fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let files = [
        (
            "config/agents.yaml",
            "worker:\n  role: Analyst\n  goal: Analyse {topic}\n  backstory: Thorough.\n",
        ),
        ("config/tasks.yaml", TASKS),
        ("config/crew.yaml", "inputs: {topic: tides}\n"),
    ];
    for (name, body) in files {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, body).unwrap();
    }
    dir
}

fn crewai(args: &[&str], server: &ScriptedServer) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_crewai"));
    command
        .env_clear()
        .args(args)
        .stdin(Stdio::null())
        .env("OPENAI_BASE_URL", server.base_url())
        .env("OPENAI_API_KEY", "test");
    if let Some(path) = std::env::var_os("PATH") {
        command.env("PATH", path);
    }
    command
}

/// Which task a request is for: its description's marker is in the prompt.
fn task_of(request: &RecordedRequest) -> usize {
    let body = request.body.to_string();
    let found: Vec<usize> = (0..MARKERS.len())
        .filter(|&i| body.contains(MARKERS[i]))
        .collect();
    assert_eq!(found.len(), 1, "one task per request: {body}");
    found[0]
}

/// Unique answers, each after a short random delay.
fn push_answers(server: &ScriptedServer, rng: &mut StdRng, tag: &str) {
    for n in 0..MARKERS.len() {
        let delay = Duration::from_millis(rng.random_range(2..40));
        let id: u64 = rng.random();
        server.push(Reply::text(format!("answer {tag}-{n}-{id:x}")).delayed(delay));
    }
}

/// The run's status, its tasks' outputs by index and its journaled total tokens.
fn journaled_outputs(
    store: &Store,
    run_id: &str,
) -> Option<(RunStatus, BTreeMap<usize, String>, u64)> {
    let run = store.load_run(run_id).unwrap()?;
    let tokens = run.usage.map_or(0, |usage| usage.total_tokens);
    let outputs = run
        .tasks
        .into_iter()
        .map(|(index, row)| (index, row.output.raw))
        .collect();
    Some((run.status, outputs, tokens))
}

/// Starts `crewai run`, waits until the run is journaled, kills it `kill_after` later; returns the
/// run id.
fn run_and_kill(dir: &Path, server: &ScriptedServer, kill_after: Duration) -> String {
    let mut child = crewai(&["run", "--project", dir.to_str().unwrap()], server)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (ids, id_found) = mpsc::channel();
    // Reads the run id, then drains the rest so the child never blocks on a full pipe.
    std::thread::spawn(move || {
        let mut sent = false;
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if !sent && let Some(id) = line.strip_prefix("Run ") {
                let _ = ids.send(id.trim().to_string());
                sent = true;
            }
        }
    });
    let run_id = id_found
        .recv_timeout(Duration::from_secs(60))
        .expect("crewai run printed its run id");
    let store = Store::open_project(dir).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while store.load_run(&run_id).unwrap().is_none() {
        assert!(Instant::now() < deadline, "the run was never journaled");
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(kill_after);
    // SIGKILL: nothing in the process gets to clean up.
    let _ = child.kill();
    child.wait().unwrap();
    run_id
}

#[test]
fn a_run_killed_at_random_moments_resumes_without_losing_or_redoing_tasks() {
    let runs: usize = std::env::var("CREWAI_CRASH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let seed: u64 = std::env::var("CREWAI_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed_c0de);
    let mut rng = StdRng::seed_from_u64(seed);
    // How many tasks the journal held at each kill: 0..=4.
    let mut kept_at_kill = [0usize; MARKERS.len() + 1];

    for iteration in 0..runs {
        let dir = project();
        let server = ScriptedServer::start_blocking();
        push_answers(&server, &mut rng, &format!("{iteration}-first"));
        let kill_after = Duration::from_millis(rng.random_range(0..90));
        let run_id = run_and_kill(dir.path(), &server, kill_after);

        let store = Store::open_project(dir.path()).unwrap();
        let (status, before, tokens_at_kill) = journaled_outputs(&store, &run_id).unwrap();
        kept_at_kill[before.len()] += 1;
        let context = format!(
            "iteration {iteration} (seed {seed}, killed {kill_after:?} in, status {status}, kept {:?})",
            before.keys().collect::<Vec<_>>()
        );
        if status == RunStatus::Completed {
            assert_eq!(before.len(), MARKERS.len(), "{context}");
        }
        if status == RunStatus::Running {
            let listing = crewai(
                &["runs", "--project", dir.path().to_str().unwrap()],
                &server,
            )
            .output()
            .unwrap();
            let listing = String::from_utf8_lossy(&listing.stdout);
            assert!(
                listing.contains(&format!(
                    "is gone; resume with: crewai run --resume {run_id}"
                )),
                "{context}: {listing}"
            );
        }
        // Each task is one call; a journaled task's call was answered before the task was
        // written, and nothing is counted that the server was not asked for.
        let requests_before_resume = server.request_count();
        assert!(
            tokens_at_kill >= TOKENS_PER_CALL * before.len() as u64,
            "{context}: {tokens_at_kill} tokens journaled for {} finished tasks",
            before.len()
        );
        assert!(
            tokens_at_kill <= TOKENS_PER_CALL * requests_before_resume as u64,
            "{context}: {tokens_at_kill} tokens journaled for {requests_before_resume} requests"
        );

        push_answers(&server, &mut rng, &format!("{iteration}-resume"));
        let resumed = crewai(
            &[
                "run",
                "--project",
                dir.path().to_str().unwrap(),
                "--resume",
                &run_id,
                "--json",
            ],
            &server,
        )
        .output()
        .unwrap();
        let stdout = String::from_utf8_lossy(&resumed.stdout);
        assert!(
            resumed.status.success(),
            "{context}: {}",
            String::from_utf8_lossy(&resumed.stderr)
        );
        let output: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
        let tasks = output["tasks_output"].as_array().unwrap();
        assert_eq!(tasks.len(), MARKERS.len(), "{context}");
        for (index, raw) in &before {
            assert_eq!(
                tasks[*index]["raw"],
                raw.as_str(),
                "{context}: task {index} changed"
            );
        }
        let asked: Vec<usize> = server.requests()[requests_before_resume..]
            .iter()
            .map(task_of)
            .collect();
        for index in 0..MARKERS.len() {
            let finished = before.contains_key(&index);
            assert_eq!(
                asked.contains(&index),
                !finished,
                "{context}: task {index} (journaled: {finished}) asked during the resume: {asked:?}"
            );
        }
        let (status, after, tokens_after) = journaled_outputs(&store, &run_id).unwrap();
        assert_eq!(status, RunStatus::Completed, "{context}");
        assert_eq!(
            tokens_after,
            tokens_at_kill + TOKENS_PER_CALL * asked.len() as u64,
            "{context}: the run's usage is the killed attempt's journaled usage plus the resume's"
        );
        assert_eq!(after.len(), MARKERS.len(), "{context}");
        for (index, raw) in &before {
            assert_eq!(&after[index], raw, "{context}");
        }
    }
    eprintln!(
        "{runs} kills (seed {seed}); tasks journaled at the kill -> count: {:?}",
        kept_at_kill.iter().enumerate().collect::<Vec<_>>()
    );
}
