//! Kills `crewai run` with SIGKILL and resumes it: whatever the journal held at the kill comes
//! back identical after `crewai run --resume`, those tasks ask the model nothing more, every other
//! task asks it exactly once, and the resumed run completes. The run's journaled usage keeps what
//! the killed attempt spent on the tasks it journaled, and the resume adds its own calls to it.
//!
//! The kills land where they are meant to, not where timing happens to put them: the scripted
//! server holds back the reply of the task after the ones the kill should find journaled, so the
//! run cannot get further, and the test watches the journal (or the server) before it kills.
//!
//! - right after spawn, before the journal exists: a plain `crewai run` starts over and completes;
//! - during the first model call: the server has the request and has not answered;
//! - with 1, 2 or 3 of the 4 tasks journaled, at a random moment (up to 40 ms) after the journal
//!   shows them, while the next task's reply is held;
//! - racing the next task: the kill comes up to 8 ms after the journal shows 1 or 2 tasks while
//!   the next reply is due within 3 ms (and the one after it held), so some kills land while that
//!   task is being journaled; the journal then holds those tasks or one more.
//!
//! The test prints how many tasks the journal held at each kill and requires at least 80% of the
//! mid-run kills to land with 1 to 3 of the 4 tasks journaled.
//!
//! `CREWAI_CRASH_RUNS` sets the number of mid-run kills (default 10; the two boundary kills come
//! on top), `CREWAI_CRASH_SEED` the seed.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

mod support;

use crewai_store::{RunStatus, Store};
use crewai_testkit::scripted::{RecordedRequest, Reply, ScriptedServer};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use support::crewai_at;

/// What the scripted server reports for every call (its default usage: 10 prompt + 5 completion).
const TOKENS_PER_CALL: u64 = 15;

/// The markers in each task's description, in task order (`alpha` and `beta` run at once).
const MARKERS: [&str; 4] = ["ALPHA-TASK", "BETA-TASK", "GAMMA-TASK", "DELTA-TASK"];
const TASK_COUNT: usize = MARKERS.len();

/// Longer than any run of this test: a reply held this long is never given.
const HELD: Duration = Duration::from_secs(300);

/// How long the test waits for the killed attempt to get where the kill should land.
const PATIENCE: Duration = Duration::from_secs(60);

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

/// Where a kill lands.
#[derive(Debug, Clone, Copy)]
enum Kill {
    /// The moment the process is spawned, before it opened the journal.
    AtSpawn,
    /// When the server has the first model request and has not answered it.
    DuringFirstCall,
    /// `jitter` after the journal shows `journaled` tasks, with the next task's reply held.
    Held { journaled: usize, jitter: Duration },
    /// `jitter` after the journal shows `journaled` tasks, with the next task's reply due in
    /// `next_after` (and the one after held): the kill races that task's journal write.
    Racing {
        journaled: usize,
        next_after: Duration,
        jitter: Duration,
    },
}

impl Kill {
    /// The replies the killed attempt gets, in order.
    fn replies(&self, rng: &mut StdRng, tag: &str) -> Vec<Reply> {
        let held = || Reply::text(format!("held {tag}")).delayed(HELD);
        match *self {
            // `alpha` and `beta` ask at once: hold both so no task can finish.
            Kill::AtSpawn | Kill::DuringFirstCall => vec![held(), held()],
            Kill::Held { journaled, .. } => {
                let mut replies = answers(rng, tag, journaled);
                replies.push(held());
                replies
            }
            Kill::Racing {
                journaled,
                next_after,
                ..
            } => {
                let mut replies = answers(rng, tag, journaled);
                replies.push(
                    Reply::text(format!("answer {tag}-raced-{:x}", rng.random::<u64>()))
                        .delayed(next_after),
                );
                replies.push(held());
                replies
            }
        }
    }

    /// How many tasks the journal may hold after this kill.
    fn expected_journaled(&self) -> std::ops::RangeInclusive<usize> {
        match *self {
            Kill::AtSpawn | Kill::DuringFirstCall => 0..=0,
            Kill::Held { journaled, .. } => journaled..=journaled,
            Kill::Racing { journaled, .. } => journaled..=journaled + 1,
        }
    }
}

fn project() -> tempfile::TempDir {
    support::project(&[
        (
            "config/agents.yaml",
            "worker:\n  role: Analyst\n  goal: Analyse {topic}\n  backstory: Thorough.\n",
        ),
        ("config/tasks.yaml", TASKS),
        ("config/crew.yaml", "inputs: {topic: tides}\n"),
    ])
}

/// Which task a request is for: its description's marker is in the prompt.
fn task_of(request: &RecordedRequest) -> usize {
    let body = request.body.to_string();
    let found: Vec<usize> = (0..TASK_COUNT)
        .filter(|&i| body.contains(MARKERS[i]))
        .collect();
    assert_eq!(found.len(), 1, "one task per request: {body}");
    found[0]
}

/// `count` unique answers, each after a short random delay.
fn answers(rng: &mut StdRng, tag: &str, count: usize) -> Vec<Reply> {
    (0..count)
        .map(|n| {
            let delay = Duration::from_millis(rng.random_range(2..40));
            let id: u64 = rng.random();
            Reply::text(format!("answer {tag}-{n}-{id:x}")).delayed(delay)
        })
        .collect()
}

/// What the journal holds of one run: its status, its tasks' outputs by index and its total
/// tokens.
struct Journaled {
    status: RunStatus,
    outputs: BTreeMap<usize, String>,
    tokens: u64,
}

fn journaled(store: &Store, run_id: &str) -> Option<Journaled> {
    let run = store.load_run(run_id).unwrap()?;
    Some(Journaled {
        status: run.status,
        tokens: run.usage.map_or(0, |usage| usage.total_tokens),
        outputs: run
            .tasks
            .into_iter()
            .map(|(index, row)| (index, row.output.raw))
            .collect(),
    })
}

/// Starts `crewai run` with its stderr drained (so it never blocks on a full pipe); the receiver
/// gets the run id it prints.
fn spawn_run(dir: &Path, server: &ScriptedServer) -> (Child, mpsc::Receiver<String>) {
    let mut child = crewai_at(&["run", "--project", dir.to_str().unwrap()], server)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (ids, id_found) = mpsc::channel();
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
    (child, id_found)
}

/// Polls `ready` every millisecond until it holds; fails after [`PATIENCE`] with `what`.
fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !ready() {
        assert!(Instant::now() < deadline, "{what} within {PATIENCE:?}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Runs the killed attempt and kills it where `kill` says; returns the run id when the journal
/// has the run.
fn run_and_kill(dir: &Path, server: &ScriptedServer, kill: Kill) -> Option<String> {
    let (mut child, id_found) = spawn_run(dir, server);
    match kill {
        Kill::AtSpawn => {}
        Kill::DuringFirstCall => wait_until("the first model request arrived", || {
            server.request_count() >= 1
        }),
        Kill::Held { journaled, .. } | Kill::Racing { journaled, .. } => {
            let run_id = id_found
                .recv_timeout(PATIENCE)
                .expect("crewai run printed its run id");
            let store = Store::open_project(dir).unwrap();
            wait_until(&format!("{journaled} task(s) journaled"), || {
                store
                    .load_run(&run_id)
                    .unwrap()
                    .is_some_and(|run| run.tasks.len() >= journaled)
            });
            if let Kill::Held { jitter, .. } | Kill::Racing { jitter, .. } = kill {
                std::thread::sleep(jitter);
            }
        }
    }
    // SIGKILL: nothing in the process gets to clean up.
    let _ = child.kill();
    child.wait().unwrap();
    journaled_run(dir)
}

/// The project's latest run in the journal, if there is a journal (opening the store would
/// create one, so its file is looked for first).
fn journaled_run(dir: &Path) -> Option<String> {
    if !dir.join(".crewai/crewai.db").is_file() {
        return None;
    }
    let store = Store::open_project(dir).unwrap();
    let latest = store.runs(1).unwrap().into_iter().next()?;
    Some(latest.id)
}

/// How many tasks the journal held at each kill.
#[derive(Default)]
struct Distribution {
    /// Kills before the run was in the journal.
    before_the_journal: usize,
    /// By the number of journaled tasks, 0..=TASK_COUNT.
    journaled: [usize; TASK_COUNT + 1],
}

impl Distribution {
    fn mid_run(&self) -> usize {
        self.journaled[1..TASK_COUNT].iter().sum()
    }

    fn total(&self) -> usize {
        self.before_the_journal + self.journaled.iter().sum::<usize>()
    }
}

/// One kill and its resume (or restart), with every check; returns how many tasks the journal
/// held at the kill (`None`: the run was not in the journal).
fn kill_and_resume(iteration: usize, seed: u64, kill: Kill, rng: &mut StdRng) -> Option<usize> {
    let dir = project();
    let project_dir = dir.path().to_str().unwrap();
    let killed_server = ScriptedServer::start_blocking();
    killed_server.push_all(kill.replies(rng, &format!("{iteration}-killed")));
    let run_id = run_and_kill(dir.path(), &killed_server, kill);
    let requests_before_resume = killed_server.request_count();
    let asked_before: Vec<usize> = killed_server.requests().iter().map(task_of).collect();

    let before = run_id.as_deref().map(|id| {
        let store = Store::open_project(dir.path()).unwrap();
        journaled(&store, id).unwrap_or_else(|| panic!("run {id} is listed but not loadable"))
    });
    let kept: BTreeMap<usize, String> = before
        .as_ref()
        .map(|b| b.outputs.clone())
        .unwrap_or_default();
    let context = format!(
        "iteration {iteration} (seed {seed}, kill {kill:?}, run {run_id:?}, status {:?}, kept {:?}, asked before the kill {asked_before:?})",
        before.as_ref().map(|b| b.status),
        kept.keys().collect::<Vec<_>>()
    );
    assert!(
        kill.expected_journaled().contains(&kept.len()),
        "{context}: expected {:?} journaled tasks",
        kill.expected_journaled()
    );
    match kill {
        // Only a run that has not journaled a task can be in the journal so early, and usually
        // none is.
        Kill::AtSpawn => {}
        // The run is journaled before its first call: the kill leaves it to resume.
        Kill::DuringFirstCall => {
            assert!(run_id.is_some(), "{context}: the run was not journaled");
            assert!(
                (1..=2).contains(&requests_before_resume),
                "{context}: {requests_before_resume} requests before the kill"
            );
        }
        Kill::Held { .. } | Kill::Racing { .. } => {
            assert!(run_id.is_some(), "{context}: the run was not journaled");
        }
    }

    if let (Some(run_id), Some(before)) = (&run_id, &before) {
        // The kill always lands before the run's end: it is running, with its process gone.
        assert_eq!(before.status, RunStatus::Running, "{context}");
        let listing = crewai_at(&["runs", "--project", project_dir], &killed_server)
            .output()
            .unwrap();
        let listing = String::from_utf8_lossy(&listing.stdout);
        assert!(
            listing.contains(&format!(
                "is gone; resume with: crewai run --resume {run_id}"
            )),
            "{context}: {listing}"
        );
        // Each task is one call; a journaled task's call was answered before the task was
        // written, and nothing is counted that the server was not asked for.
        assert!(
            before.tokens >= TOKENS_PER_CALL * kept.len() as u64,
            "{context}: {} tokens journaled for {} finished tasks",
            before.tokens,
            kept.len()
        );
        assert!(
            before.tokens <= TOKENS_PER_CALL * requests_before_resume as u64,
            "{context}: {} tokens journaled for {requests_before_resume} requests",
            before.tokens
        );
    }

    // A fresh server for the resume: replies still queued (or held) for the killed attempt can
    // never reach it.
    let resume_server = ScriptedServer::start_blocking();
    resume_server.push_all(answers(
        rng,
        &format!("{iteration}-resumed"),
        TASK_COUNT - kept.len(),
    ));
    let mut args = vec!["run", "--project", project_dir, "--json"];
    if let Some(run_id) = &run_id {
        args.extend(["--resume", run_id.as_str()]);
    }
    let resumed = crewai_at(&args, &resume_server).output().unwrap();
    let stdout = String::from_utf8_lossy(&resumed.stdout);
    assert!(
        resumed.status.success(),
        "{context}: {}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    let output: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{context}: {e}: {stdout}"));
    let tasks = output["tasks_output"].as_array().unwrap();
    assert_eq!(tasks.len(), TASK_COUNT, "{context}");
    for (index, raw) in &kept {
        assert_eq!(
            tasks[*index]["raw"],
            raw.as_str(),
            "{context}: task {index} changed"
        );
    }
    // No journaled task asks again; every other task asks exactly once.
    let asked: Vec<usize> = resume_server.requests().iter().map(task_of).collect();
    for index in 0..TASK_COUNT {
        let times = asked.iter().filter(|&&t| t == index).count();
        let finished = kept.contains_key(&index);
        assert_eq!(
            times,
            usize::from(!finished),
            "{context}: task {index} (journaled: {finished}) asked {times} times during the resume: {asked:?}"
        );
    }

    // The completed run: the resumed one, or the restart's own.
    let final_id = run_id
        .clone()
        .or_else(|| journaled_run(dir.path()))
        .unwrap_or_else(|| panic!("{context}: the completed run is not in the journal"));
    let store = Store::open_project(dir.path()).unwrap();
    let after = journaled(&store, &final_id).unwrap();
    assert_eq!(after.status, RunStatus::Completed, "{context}");
    let tokens_at_kill = before.as_ref().map_or(0, |b| b.tokens);
    assert_eq!(
        after.tokens,
        tokens_at_kill + TOKENS_PER_CALL * asked.len() as u64,
        "{context}: the run's usage is the killed attempt's journaled usage plus the resume's"
    );
    assert_eq!(after.outputs.len(), TASK_COUNT, "{context}");
    for (index, raw) in &kept {
        assert_eq!(&after.outputs[index], raw, "{context}");
    }
    run_id.map(|_| kept.len())
}

#[test]
fn a_run_killed_at_random_moments_resumes_without_losing_or_redoing_tasks() {
    let runs: usize = std::env::var("CREWAI_CRASH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10)
        .max(1);
    let seed: u64 = std::env::var("CREWAI_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed_c0de);
    let mut rng = StdRng::seed_from_u64(seed);

    // The two boundary kills, then the mid-run ones cycling through every kind so each is hit.
    let mut kills = vec![Kill::AtSpawn, Kill::DuringFirstCall];
    for n in 0..runs {
        kills.push(match n % 5 {
            0..=2 => Kill::Held {
                journaled: n % 5 + 1,
                jitter: Duration::from_millis(rng.random_range(0..40)),
            },
            k => Kill::Racing {
                journaled: k - 2,
                next_after: Duration::from_millis(rng.random_range(0..3)),
                jitter: Duration::from_millis(rng.random_range(0..8)),
            },
        });
    }

    let mut all = Distribution::default();
    let mut mid_run = Distribution::default();
    let mut raced = [0usize; 2];
    for (iteration, kill) in kills.into_iter().enumerate() {
        let kept = kill_and_resume(iteration, seed, kill, &mut rng);
        let count = |distribution: &mut Distribution| match kept {
            Some(tasks) => distribution.journaled[tasks] += 1,
            None => distribution.before_the_journal += 1,
        };
        count(&mut all);
        if matches!(kill, Kill::Held { .. } | Kill::Racing { .. }) {
            count(&mut mid_run);
        }
        if let (Kill::Racing { journaled, .. }, Some(count)) = (kill, kept) {
            raced[count - journaled] += 1;
        }
    }
    let share = |d: &Distribution| 100.0 * d.mid_run() as f64 / d.total() as f64;
    eprintln!(
        "{} kills (seed {seed}): {} before the journal existed; tasks journaled at the kill -> kills: {:?}; \
         with 1..{} of {TASK_COUNT} journaled: {} of {} mid-run kills ({:.0}%), {} of all {} ({:.0}%); \
         racing kills that found the raced task journaled: {} of {}",
        all.total(),
        all.before_the_journal,
        all.journaled.iter().enumerate().collect::<Vec<_>>(),
        TASK_COUNT - 1,
        mid_run.mid_run(),
        mid_run.total(),
        share(&mid_run),
        all.mid_run(),
        all.total(),
        share(&all),
        raced[1],
        raced[0] + raced[1],
    );
    assert!(
        mid_run.mid_run() * 5 >= mid_run.total() * 4,
        "only {} of {} mid-run kills landed with 1..{} tasks journaled",
        mid_run.mid_run(),
        mid_run.total(),
        TASK_COUNT - 1
    );
}
