//! Knowledge through the binary: the example crew with `memory: true` and a `knowledge/` PDF
//! (`examples/tea-shop-knowledge`), run twice against the shared scripted server
//! (`shared/bench/mock_llm.py`, whose request log is read back), and on the embedded model with
//! the offline embedder and no network (twice as well, read back from the runs' traces);
//! relevance with a scripted search query; and
//! `crewai memory collections` / `crewai reset-memories -kn|-akn|-m` on what the runs stored.
//!
//! The mock and local runs need python3 and the shared benchmark, or the embedded model and
//! MiniLM (`crewai models pull`, `crewai models pull minilm`): without them they are reported as
//! skipped, and fail under `CI=true` (see `crewai_testkit::prereq`). `harness = false`: every
//! test is registered in `main`.

mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};

use crewai_testkit::prereq::{Prerequisite, Suite};
use crewai_testkit::scripted::ScriptedServer;
use serde_json::Value;
use support::{
    assert_contains, copy_dir, crewai, new_trace_events, run_ok, text, trace_files, with_server,
};

/// A sentence of the PDF's third paragraph (what a question about shipping days needs).
const SHIPPING: &str = "Lisbon warehouse dispatches orders every Tuesday and Friday";

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
    let models = crewai_local::models_dir();
    let chat_model =
        Prerequisite::embedded_model(crewai_local::cache::SMOLLM2_135M.path_in(&models));
    let minilm = Prerequisite::file(
        "the offline embedder all-MiniLM-L6-v2",
        crewai_local::cache::ALL_MINILM_L6_V2
            .files_in(&models)
            .into_iter()
            .next()
            .unwrap_or_default(),
        "run `cargo run -q -p crewai-cli -- models pull minilm` (it downloads into CREWAI_MODELS_DIR, default ~/.cache/crewai/models)",
    );
    Suite::new()
        .test_needing(
            "the_second_run_sends_the_first_runs_memories_and_the_pdf_snippet",
            &[&python, &bench],
            the_second_run_sends_the_first_runs_memories_and_the_pdf_snippet,
        )
        .test_needing(
            "the_crew_runs_offline_on_the_embedded_model_and_minilm",
            &[&chat_model, &minilm],
            the_crew_runs_offline_on_the_embedded_model_and_minilm,
        )
        .test(
            "the_rewritten_query_picks_the_relevant_chunk_and_resets_are_separate",
            the_rewritten_query_picks_the_relevant_chunk_and_resets_are_separate,
        )
        .test(
            "a_malformed_source_is_reported_at_its_line",
            a_malformed_source_is_reported_at_its_line,
        )
        .run()
}

fn shared_bench() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/bench")
}

/// The example copied into a fresh folder (its `.crewai/` starts empty).
fn example(extra_crew_yaml: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let source =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/tea-shop-knowledge");
    copy_dir(&source, dir.path());
    let crew = dir.path().join("config/crew.yaml");
    let mut yaml = std::fs::read_to_string(&crew).unwrap();
    yaml.push_str(extra_crew_yaml);
    std::fs::write(&crew, yaml).unwrap();
    dir
}

/// mock_llm.py on a free port, logging every request with its body; killed when dropped.
struct Mock {
    child: Child,
    port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Mock {
    fn start() -> Mock {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("requests.jsonl");
        let script = shared_bench().join("mock_llm.py");
        let mut child = Command::new("python3")
            .arg(&script)
            .args(["--port", "0", "--log-bodies", "--log"])
            .arg(&log)
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
        Mock {
            child,
            port,
            log,
            _dir: dir,
        }
    }

    /// The chat completion requests logged so far, in order.
    fn chat_requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|entry| entry["path"] == "/v1/chat/completions")
            .map(|entry| entry["request"].clone())
            .collect()
    }

    fn run(&self, project: &Path) {
        let project = project.to_string_lossy();
        let mut command = crewai(&["run", "--project", &project]);
        command.env("OPENAI_API_KEY", "x").env(
            "OPENAI_BASE_URL",
            format!("http://127.0.0.1:{}/v1", self.port),
        );
        let out = run_ok(command);
        assert_contains(
            &text(&out.stderr),
            "Knowledge: on, embedding with openai (its default model) — no `embedder:` and OPENAI_API_KEY is set",
        );
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every message's text of a chat request, joined.
fn request_text(request: &Value) -> String {
    request["messages"]
        .as_array()
        .map(|messages| {
            messages
                .iter()
                .filter_map(|m| m["content"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// The agent's own requests (its system prompt plays its role), not the query rewrite or the
/// memory extraction.
fn agent_requests(requests: &[Value]) -> Vec<String> {
    requests
        .iter()
        .filter(|r| {
            r["messages"][0]["content"]
                .as_str()
                .is_some_and(|s| s.starts_with("You are Shop Clerk"))
        })
        .map(request_text)
        .collect()
}

fn the_second_run_sends_the_first_runs_memories_and_the_pdf_snippet() {
    let mock = Mock::start();
    // The mock answers every call with `ANSWER <hash>`, the search query included, so no chunk
    // is close to the query in meaning: the threshold is lifted to let the best chunk through.
    let project = example("knowledge_config:\n  results_limit: 1\n  score_threshold: -1.0\n");
    mock.run(project.path());
    let first = mock.chat_requests();
    let first_agent = agent_requests(&first);
    assert!(!first_agent.is_empty(), "{first:#?}");
    assert_contains(&first_agent[0], SHIPPING);

    let path = project.path().to_string_lossy().to_string();
    let saved: Value = serde_json::from_slice(
        &run_ok(crewai(&["memory", "list", "--project", &path, "--json"])).stdout,
    )
    .unwrap();
    let memories: Vec<String> = saved
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["content"].as_str().map(str::to_string))
        .collect();
    assert!(!memories.is_empty(), "the first run saved nothing: {saved}");
    for memory in &memories {
        assert!(
            !first_agent[0].contains(memory.as_str()),
            "{memory} before it was saved"
        );
    }

    mock.run(project.path());
    let second = &mock.chat_requests()[first.len()..];
    let second_agent = agent_requests(second);
    assert!(!second_agent.is_empty(), "{second:#?}");
    for memory in &memories {
        assert_contains(&second_agent[0], memory);
    }
    assert_contains(&second_agent[0], SHIPPING);

    let collections: Value = serde_json::from_slice(
        &run_ok(crewai(&[
            "memory",
            "collections",
            "--project",
            &path,
            "--json",
        ]))
        .stdout,
    )
    .unwrap();
    let crew = collections
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "knowledge:crew")
        .unwrap_or_else(|| panic!("{collections}"));
    assert_eq!(crew["kind"], "crew knowledge");
    assert_eq!(crew["records"], 1, "{collections}");
}

/// The one `knowledge_retrieval_completed` event of a run, which found the PDF's passage.
fn assert_retrieved_the_passage(events: &[Value]) {
    let retrieved: Vec<&Value> = events
        .iter()
        .filter(|event| event["type"] == "knowledge_retrieval_completed")
        .collect();
    assert_eq!(retrieved.len(), 1, "{events:#?}");
    assert_eq!(retrieved[0]["results"], 1, "{}", retrieved[0]);
    assert_contains(
        retrieved[0]["retrieved_knowledge"]
            .as_str()
            .unwrap_or_default(),
        SHIPPING,
    );
}

/// The Done-when's second clause: the same two runs as against the scripted server, on the
/// embedded model and MiniLM with no key and no server. The model is too small to answer
/// well, so what is asserted is what the run sends it: the second run's task prompt carries
/// every memory the first saved and the PDF's passage (read from the runs' traces).
fn the_crew_runs_offline_on_the_embedded_model_and_minilm() {
    let project = example("knowledge_config:\n  results_limit: 1\n  score_threshold: 0.0\n");
    let path = project.path().to_string_lossy().to_string();
    let offline_run = || {
        let mut command = crewai(&["run", "--project", &path, "--llm", "local/smollm2-135m"]);
        // No key, no server: every model call and embedding runs in process.
        command
            .env("CREWAI_MODELS_DIR", crewai_local::models_dir())
            .env("OLLAMA_HOST", "127.0.0.1:9");
        run_ok(command)
    };
    let traces = project.path().join(".crewai/traces");
    let out = offline_run();
    assert_contains(
        &text(&out.stderr),
        "Knowledge: on, embedding with local (its default model) — no `embedder:` and no OPENAI_API_KEY: the offline model",
    );
    let first = new_trace_events(&traces, &[]);
    assert_retrieved_the_passage(&first);

    let saved: Value = serde_json::from_slice(
        &run_ok(crewai(&["memory", "list", "--project", &path, "--json"])).stdout,
    )
    .unwrap();
    let memories: Vec<String> = saved
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["content"].as_str().map(str::to_string))
        .collect();
    assert!(!memories.is_empty(), "the first run saved nothing: {saved}");

    let before = trace_files(&traces);
    offline_run();
    let second = new_trace_events(&traces, &before);
    assert_retrieved_the_passage(&second);
    // The recall before the task (the agent may search memory with its tool after it).
    let recalled = second
        .iter()
        .find(|event| event["type"] == "memory_query_completed")
        .unwrap_or_else(|| panic!("no recall in the second run: {second:#?}"));
    assert_eq!(recalled["results"], memories.len(), "{recalled}");
    // The agent's task prompt: the model call whose last message is the task.
    let prompts: Vec<String> = second
        .iter()
        .filter(|event| event["type"] == "llm_call_started")
        .filter_map(|event| event["messages"].as_array())
        .map(|messages| {
            messages
                .iter()
                .map(message_text)
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect();
    let task_prompt = prompts
        .iter()
        .find(|prompt| prompt.contains("Current Task:"))
        .unwrap_or_else(|| panic!("no task prompt in the second run: {prompts:#?}"));
    assert_contains(task_prompt, SHIPPING);
    for memory in &memories {
        assert_contains(task_prompt, memory);
    }
}

/// A message's text, whether its content is a string or a list of parts (as traces keep it).
fn message_text(message: &Value) -> String {
    match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn the_rewritten_query_picks_the_relevant_chunk_and_resets_are_separate() {
    let dir = support::project(&[
        (
            "config/agents.yaml",
            "clerk:\n  role: Shop Clerk\n  goal: Answer customers\n  backstory: Knows the shop.\n  knowledge_sources:\n    - content: The tasting room opens at ten on Saturdays.\n",
        ),
        (
            "config/tasks.yaml",
            "answer:\n  description: When does the warehouse ship?\n  expected_output: A sentence\n  agent: clerk\n",
        ),
        (
            "config/crew.yaml",
            "name: shop\nmemory: true\nembedder:\n  provider: hash\n  config: {dimensions: 256}\nknowledge_config:\n  results_limit: 2\n  score_threshold: 0.3\nknowledge_sources:\n  - type: pdf\n    file_paths: [orbital-tea.pdf]\n    chunk_size: 120\n    chunk_overlap: 90\n",
        ),
    ]);
    std::fs::create_dir_all(dir.path().join("knowledge")).unwrap();
    std::fs::copy(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../crewai-knowledge/tests/fixtures/orbital-tea.pdf"),
        dir.path().join("knowledge/orbital-tea.pdf"),
    )
    .unwrap();
    let path = dir.path().to_string_lossy().to_string();
    let server = ScriptedServer::start_blocking();
    server.push_text("Lisbon warehouse dispatches orders Tuesday Friday");
    server.push_text("Tuesdays and Fridays.");
    server.push_text("{\"memories\": [\"Orders ship on Tuesdays and Fridays\"]}");
    run_ok(with_server(crewai(&["run", "--project", &path]), &server));
    let requests = server.requests();
    let prompt = requests[1].body.to_string();
    assert_contains(&prompt, SHIPPING);
    // Other chunks of the PDF, and the agent's own knowledge, are not close enough.
    assert!(!prompt.contains("botanists"), "{prompt}");
    assert!(!prompt.contains("tasting room"), "{prompt}");

    let collections = |dir: &str| -> Vec<(String, u64)> {
        let listed: Value = serde_json::from_slice(
            &run_ok(crewai(&[
                "memory",
                "collections",
                "--project",
                dir,
                "--json",
            ]))
            .stdout,
        )
        .unwrap();
        listed
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["name"].as_str().unwrap().to_string(),
                    c["records"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    let before = collections(&path);
    assert!(
        before.contains(&("knowledge:agent:shop_clerk".into(), 1)),
        "{before:?}"
    );
    assert!(
        before.iter().any(|(n, r)| n == "knowledge:crew" && *r > 1),
        "{before:?}"
    );
    assert!(before.contains(&("memory".into(), 1)), "{before:?}");

    let reset = run_ok(crewai(&["reset-memories", "--project", &path, "-akn"]));
    assert_contains(
        &text(&reset.stdout),
        "Agent knowledge reset (1 chunks deleted).",
    );
    let after = collections(&path);
    assert!(
        !after.iter().any(|(n, _)| n.starts_with("knowledge:agent")),
        "{after:?}"
    );
    assert!(
        after.iter().any(|(n, _)| n == "knowledge:crew"),
        "{after:?}"
    );
    let reset = run_ok(crewai(&["reset-memories", "--project", &path, "-m"]));
    assert_contains(&text(&reset.stdout), "Memory reset (1 records deleted).");
    assert!(
        collections(&path)
            .iter()
            .any(|(n, _)| n == "knowledge:crew")
    );
    let reset = run_ok(crewai(&["reset-memories", "--project", &path, "-kn"]));
    assert_contains(&text(&reset.stdout), "Crew knowledge reset (");
    assert!(collections(&path).is_empty(), "{:?}", collections(&path));
}

fn a_malformed_source_is_reported_at_its_line() {
    let dir = support::project(&[
        (
            "config/agents.yaml",
            "clerk:\n  role: Shop Clerk\n  goal: Answer customers\n  backstory: Knows the shop.\n",
        ),
        (
            "config/tasks.yaml",
            "answer:\n  description: When?\n  expected_output: A sentence\n  agent: clerk\n",
        ),
        (
            "config/crew.yaml",
            "name: shop\nknowledge_sources:\n  - handbook.pdf\n  - type: pdf\n    content: oops\n",
        ),
    ]);
    let path = dir.path().to_string_lossy().to_string();
    let out = support::run(crewai(&["run", "--project", &path, "--dry-run"]));
    assert!(!out.status.success());
    assert_contains(
        &text(&out.stderr),
        "config/crew.yaml:4: crew knowledge source: `content:` is for string sources",
    );
}
