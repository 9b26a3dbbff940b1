//! `crewai serve` and `crewai worker` as a client sees them, against the scripted model server:
//! the AMP routes, typed 4xx answers to bad input, idempotent submission, the event stream, the
//! OpenAPI document walked against the running server, concurrent submissions, and a worker
//! SIGKILLed mid-run whose kickoffs another worker resumes without re-running finished tasks
//! (counted on the model server's requests) — on SQLite, and on Postgres with three workers
//! sharing the database, whose outage the API answers with 503, and a memory crew whose memory
//! the workers share there.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crewai_testkit::prereq::{Suite, block_on_multi_thread};
use crewai_testkit::process::{Announced, ListeningChild};
use crewai_testkit::scripted::{Reply, ScriptedServer};
use futures::future::BoxFuture;
use reqwest::StatusCode;
use serde_json::{Value, json};
use support::{crewai_at, project};

const TOKEN: &str = "s3cret-token";
const MARKERS: [&str; 3] = ["ALPHA-TASK", "BETA-TASK", "GAMMA-TASK"];

const FILES: &[(&str, &str)] = &[
    (
        "config/agents.yaml",
        "worker:\n  role: Worker\n  goal: Work on {topic}\n  backstory: Diligent.\n",
    ),
    (
        "config/tasks.yaml",
        "alpha:\n  description: ALPHA-TASK facts about {topic}\n  expected_output: Facts\n  agent: worker\nbeta:\n  description: BETA-TASK questions about {topic}\n  expected_output: Questions\n  agent: worker\ngamma:\n  description: GAMMA-TASK conclude on {topic}\n  expected_output: A conclusion\n  agent: worker\n",
    ),
];

fn address_port(line: &str) -> Option<u16> {
    let rest = line.strip_prefix("Kickoff API listening on http://")?;
    rest.split('/').next()?.rsplit(':').next()?.parse().ok()
}

/// Where a test's kickoffs are queued and journaled.
#[derive(Debug, Clone, Copy)]
enum Backend {
    /// The default: `<project>/.crewai/queue.db` and the project's store.
    Sqlite,
    /// A fresh database on the test PostgreSQL, through `--database postgres://…`.
    Postgres,
}

/// One test's setting: the scripted model server, the project, and its database.
struct Cluster {
    server: ScriptedServer,
    dir: tempfile::TempDir,
    /// The `--database` URL (`None`: the SQLite default).
    database: Option<String>,
}

impl Cluster {
    async fn new(backend: Backend) -> Cluster {
        Cluster::of(backend, FILES).await
    }

    async fn of(backend: Backend, files: &[(&str, &str)]) -> Cluster {
        let database = match backend {
            Backend::Sqlite => None,
            Backend::Postgres => Some(crewai_testkit::postgres::fresh_database().await),
        };
        Cluster {
            server: ScriptedServer::start().await,
            dir: project(files),
            database,
        }
    }

    /// `crewai COMMAND --project DIR [--database URL] EXTRA…`, started and announced.
    fn start(
        &self,
        command: &str,
        extra: &[&str],
        announced: fn(&str) -> Option<u16>,
    ) -> ListeningChild {
        self.start_on(self.database.as_deref(), command, extra, announced)
    }

    fn start_on(
        &self,
        database: Option<&str>,
        command: &str,
        extra: &[&str],
        announced: fn(&str) -> Option<u16>,
    ) -> ListeningChild {
        let project = self.dir.path().to_string_lossy().to_string();
        let mut args = vec![command, "--project", &project];
        if let Some(url) = database {
            args.extend(["--database", url]);
        }
        args.extend_from_slice(extra);
        let mut child = crewai_at(&args, &self.server);
        child.env("CREWAI_SERVE_TOKEN", TOKEN);
        tokio::task::block_in_place(|| {
            ListeningChild::start(child, Announced::Stderr, Duration::from_secs(60), announced)
        })
    }

    /// `crewai serve` on a free port; returns it with a client of its API.
    fn serve(&self, extra: &[&str]) -> (ListeningChild, Api) {
        let mut args = vec!["--port", "0"];
        args.extend_from_slice(extra);
        let child = self.start("serve", &args, address_port);
        let api = Api::new(child.port);
        (child, api)
    }

    fn worker(&self, extra: &[&str]) -> ListeningChild {
        self.start("worker", extra, |line| {
            line.starts_with("Worker ").then_some(1)
        })
    }
}

struct Api {
    client: reqwest::Client,
    base: String,
}

impl Api {
    fn new(port: u16) -> Api {
        Api {
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .unwrap(),
            base: format!("http://127.0.0.1:{port}"),
        }
    }

    fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.client
            .get(format!("{}{path}", self.base))
            .bearer_auth(TOKEN)
    }

    fn post(&self, path: &str) -> reqwest::RequestBuilder {
        self.client
            .post(format!("{}{path}", self.base))
            .bearer_auth(TOKEN)
    }

    async fn kickoff(&self, inputs: Value) -> String {
        let response = self
            .post("/kickoff")
            .json(&json!({"inputs": inputs}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::ACCEPTED);
        let body: Value = response.json().await.unwrap();
        body["kickoff_id"].as_str().unwrap().to_string()
    }

    async fn status(&self, id: &str) -> Value {
        self.get(&format!("/status/{id}"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    async fn wait_final(&self, id: &str, within: Duration) -> Value {
        let deadline = Instant::now() + within;
        loop {
            let status = self.status(id).await;
            let state = status["state"].as_str().unwrap_or("").to_string();
            if !["queued", "running"].contains(&state.as_str()) {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "kickoff {id} did not end: {status}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// The status and error code of an answer.
async fn error_of(response: reqwest::Response) -> (StatusCode, String, Value) {
    let status = response.status();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    (
        status,
        body["error"]["code"].as_str().unwrap_or("").to_string(),
        body,
    )
}

fn answers(server: &ScriptedServer, count: usize, delay: Duration) {
    for i in 0..count {
        server.push(Reply::text(format!("answer {i}")).delayed(delay));
    }
}

async fn the_api_answers_amp_routes_refuses_bad_input_and_streams_progress(cluster: Cluster) {
    let server = &cluster.server;
    // A small limit, so the refused body fits in the socket's buffers: the client has sent all
    // of it before the server answers 413 and closes, which a body of megabytes would race (the
    // client would see the connection end mid-write).
    let (child, api) = cluster.serve(&["--workers", "2", "--max-request-bytes", "16384"]);

    // Authentication: missing and wrong tokens are 401; the document is public.
    let url = format!("{}/inputs", api.base);
    let (status, code, _) = error_of(api.client.get(&url).send().await.unwrap()).await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::UNAUTHORIZED, "unauthorized")
    );
    let wrong = api
        .client
        .get(&url)
        .bearer_auth("s3cret-tokem")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    let inputs: Value = api
        .get("/inputs")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(inputs["inputs"], json!(["topic"]));

    // Bad input: typed 4xx answers.
    let bad = [
        (
            api.post("/kickoff")
                .header("content-type", "application/json")
                .body("{\"inputs\": {"),
            StatusCode::BAD_REQUEST,
            "malformed_json",
        ),
        (
            api.post("/kickoff")
                .json(&json!({"inputs": {"topic": "x"}, "extra": 1})),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_request",
        ),
        (
            api.post("/kickoff").json(&json!({"inputs": ["topic"]})),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_request",
        ),
        (
            api.post("/kickoff").json(&json!({"inputs": {"topc": "x"}})),
            StatusCode::UNPROCESSABLE_ENTITY,
            "missing_inputs",
        ),
        (
            api.post("/kickoff").body("{\"inputs\": {}}"),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "not_json",
        ),
        (
            api.post("/kickoff")
                .header("content-type", "application/json")
                .body(format!(
                    "{{\"inputs\": {{\"topic\": \"{}\"}}}}",
                    "x".repeat(32 * 1024)
                )),
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
        ),
        (
            api.post("/kickoff")
                .header("idempotency-key", "")
                .json(&json!({"inputs": {"topic": "x"}})),
            StatusCode::BAD_REQUEST,
            "invalid_idempotency_key",
        ),
        (
            api.get("/status/no-such-kickoff"),
            StatusCode::NOT_FOUND,
            "unknown_kickoff",
        ),
        (
            api.post("/runs/no-such-kickoff/cancel"),
            StatusCode::NOT_FOUND,
            "unknown_kickoff",
        ),
        (api.get("/nowhere"), StatusCode::NOT_FOUND, "not_found"),
    ];
    for (request, expected, expected_code) in bad {
        let (status, code, body) = error_of(request.send().await.unwrap()).await;
        assert_eq!((status, code.as_str()), (expected, expected_code), "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{body}"
        );
    }
    // The missing input is named as `crewai run` names it, with the hint.
    let (_, _, body) = error_of(
        api.post("/kickoff")
            .json(&json!({"inputs": {"topc": "x"}}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("{topic}") && message.contains("config/"),
        "{message}"
    );
    // Nothing was queued by any of them.
    assert_eq!(server.request_count(), 0);

    // An idempotent kickoff: the repeat returns the first id, other inputs under the key are 409.
    answers(server, 3, Duration::ZERO);
    let first = api
        .post("/kickoff")
        .header("idempotency-key", "order-1")
        .json(&json!({"inputs": {"topic": "T0"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), StatusCode::ACCEPTED);
    let id = first.json::<Value>().await.unwrap()["kickoff_id"]
        .as_str()
        .unwrap()
        .to_string();
    let again = api
        .post("/kickoff")
        .header("idempotency-key", "order-1")
        .json(&json!({"inputs": {"topic": "T0"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::OK);
    assert_eq!(
        again.json::<Value>().await.unwrap()["kickoff_id"],
        json!(id)
    );
    let (status, code, _) = error_of(
        api.post("/kickoff")
            .header("idempotency-key", "order-1")
            .json(&json!({"inputs": {"topic": "T1"}}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::CONFLICT, "idempotency_conflict")
    );

    let done = api.wait_final(&id, Duration::from_secs(60)).await;
    assert_eq!(done["state"], "completed", "{done}");
    assert_eq!(done["result"], "answer 2");
    assert_eq!(done["usage"]["total_tokens"], 45);
    let tasks: Vec<&str> = done["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["state"].as_str().unwrap())
        .collect();
    assert_eq!(tasks, ["completed"; 3]);
    // The event stream replays the kickoff's events and ends with it.
    let stream = api.get(&format!("/runs/{id}/events")).send().await.unwrap();
    assert_eq!(stream.headers()["content-type"], "text/event-stream");
    let text = stream.text().await.unwrap();
    assert_eq!(text.matches("event: task_completed").count(), 3, "{text}");
    assert!(text.contains("event: kickoff_completed"), "{text}");
    // Resuming a completed kickoff is refused.
    let (status, code, _) = error_of(
        api.post(&format!("/runs/{id}/resume"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::CONFLICT, "not_resumable")
    );

    // Every path and method the OpenAPI document lists is served.
    let document: Value = api
        .client
        .get(format!("{}/openapi.json", api.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let paths = document["paths"].as_object().unwrap();
    assert_eq!(paths.len(), 7);
    for (path, methods) in paths {
        for method in methods.as_object().unwrap().keys() {
            let path = path.replace("{id}", &id);
            let request = match method.as_str() {
                "get" => api.get(&path),
                "post" => api.post(&path).json(&json!({"inputs": {"topic": "doc"}})),
                other => panic!("the document lists {other} {path}"),
            };
            let response = request.send().await.unwrap();
            assert_ne!(
                response.status(),
                StatusCode::METHOD_NOT_ALLOWED,
                "{method} {path}"
            );
            let (status, code, _) = error_of(response).await;
            assert!(code != "not_found", "{method} {path}: {status}");
        }
    }
    // The document's POST /kickoff queued one more: let it finish before the next part.
    answers(server, 3, Duration::ZERO);

    // Many concurrent submissions: each gets its own kickoff, and each completes once.
    const MANY: usize = 200;
    answers(server, MANY * 3, Duration::ZERO);
    let submissions = (0..MANY).map(|i| {
        let request = api
            .post("/kickoff")
            .json(&json!({"inputs": {"topic": format!("many-{i}")}}));
        async move { request.send().await.unwrap() }
    });
    let responses = futures::future::join_all(submissions).await;
    let mut ids = BTreeSet::new();
    for response in responses {
        assert_eq!(response.status(), StatusCode::ACCEPTED);
        ids.insert(
            response.json::<Value>().await.unwrap()["kickoff_id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    assert_eq!(ids.len(), MANY);
    for id in &ids {
        let done = api.wait_final(id, Duration::from_secs(180)).await;
        assert_eq!(done["state"], "completed", "{done}");
        assert_eq!(done["attempts"], 1, "{done}");
    }
    drop(child);
}

/// The model requests per (topic, task marker).
fn requests_per_task(server: &ScriptedServer) -> BTreeMap<(String, String), usize> {
    let mut counts = BTreeMap::new();
    for request in server.requests() {
        let text = request.body["messages"].to_string();
        let Some(marker) = MARKERS.iter().find(|m| text.contains(*m)) else {
            continue;
        };
        let Some(topic) = text
            .split("about ")
            .nth(1)
            .or_else(|| text.split("conclude on ").nth(1))
        else {
            continue;
        };
        let topic: String = topic
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        *counts.entry((topic, marker.to_string())).or_insert(0) += 1;
    }
    counts
}

/// `workers` workers share the kickoffs; one is SIGKILLed once a kickoff it holds has a
/// finished task, and a replacement starts: every kickoff completes exactly once and no task
/// finished before the kill asks the model again.
async fn killed_worker(cluster: Cluster, kickoffs: usize, workers: usize) {
    let server = &cluster.server;
    // Every reply takes a while, so kickoffs are mid-run when the worker is killed; enough for
    // every task twice.
    answers(server, kickoffs * 3 * 2, Duration::from_millis(300));
    let (_api_child, api) = cluster.serve(&["--workers", "0", "--lease-seconds", "2"]);
    let worker_args = ["--concurrency", "2", "--lease-seconds", "2"];
    let victim = cluster.worker(&worker_args);
    let mut others: Vec<ListeningChild> =
        (1..workers).map(|_| cluster.worker(&worker_args)).collect();
    let victim_label = format!(":{}", victim.pid());
    let topics: Vec<String> = (0..kickoffs).map(|i| format!("topic-{i}")).collect();
    let mut ids = Vec::new();
    for topic in &topics {
        ids.push(api.kickoff(json!({"topic": topic})).await);
    }
    // Kill the victim once a kickoff it holds has a finished task (and so a task in flight).
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut held = false;
        for id in &ids {
            let status = api.status(id).await;
            let tasks = status["tasks"].as_array().unwrap();
            held |= status["worker"]
                .as_str()
                .is_some_and(|w| w.ends_with(&victim_label))
                && tasks.iter().any(|t| t["state"] == "completed")
                && tasks.iter().any(|t| t["state"] != "completed");
        }
        if held {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the victim never held a half-done kickoff"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pid = i32::try_from(victim.pid()).unwrap();
    // SAFETY: signalling the worker process this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    drop(victim);
    // What was finished at the kill, read after it: nothing finishes in a dead process.
    let mut finished_at_kill = BTreeSet::new();
    for (id, topic) in ids.iter().zip(&topics) {
        let status = api.status(id).await;
        for (task, marker) in status["tasks"].as_array().unwrap().iter().zip(MARKERS) {
            if task["state"] == "completed" {
                finished_at_kill.insert((topic.clone(), marker.to_string()));
            }
        }
    }
    others.push(cluster.worker(&worker_args));

    let mut reclaimed = 0;
    for id in &ids {
        let done = api.wait_final(id, Duration::from_secs(120)).await;
        assert_eq!(done["state"], "completed", "{done}");
        let events = api
            .get(&format!("/runs/{id}/events"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if done["attempts"].as_u64() > Some(1) {
            reclaimed += 1;
        }
        assert_eq!(
            events.matches("event: kickoff_completed").count(),
            1,
            "{events}"
        );
    }
    // The killed worker's kickoffs were claimed again once their leases lapsed.
    assert!(reclaimed >= 1, "no kickoff was re-claimed after the kill");
    let counts = requests_per_task(server);
    eprintln!("finished at the kill: {finished_at_kill:?}; re-claimed kickoffs: {reclaimed}");
    for topic in &topics {
        for marker in MARKERS {
            let key = (topic.clone(), marker.to_string());
            let asked = counts.get(&key).copied().unwrap_or(0);
            if finished_at_kill.contains(&key) {
                assert_eq!(
                    asked, 1,
                    "{key:?} was finished before the kill and ran again"
                );
            } else {
                assert!(
                    (1..=2).contains(&asked),
                    "{key:?} asked the model {asked} times"
                );
            }
        }
    }
    let reruns: usize = counts.values().filter(|n| **n > 1).count();
    // Only what the killed worker had in flight is asked twice: a task of each kickoff it held.
    assert!(reruns <= reclaimed, "{counts:?}");

    if let Some(url) = &cluster.database {
        // No output is lost: the shared journal holds every task of every kickoff.
        use sqlx::Connection as _;
        let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
        for id in &ids {
            let (tasks,): (i64,) =
                sqlx::query_as("SELECT COUNT(*) FROM crewai_run_tasks WHERE run_id = $1")
                    .bind(id)
                    .fetch_one(&mut conn)
                    .await
                    .unwrap();
            assert_eq!(tasks, 3, "kickoff {id}");
        }
    }
    drop(others);
}

/// A TCP forwarder between the server and Postgres that the test can cut and restore: the
/// database "going away" and coming back, on the real wire.
struct Proxy {
    port: u16,
    target: std::net::SocketAddr,
    accepting: Option<tokio::task::JoinHandle<()>>,
}

impl Proxy {
    async fn start(target: std::net::SocketAddr) -> Proxy {
        let mut proxy = Proxy {
            port: 0,
            target,
            accepting: None,
        };
        proxy.restore().await;
        proxy
    }

    /// Listens again (on the same port once it has one) and forwards new connections.
    async fn restore(&mut self) {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", self.port))
            .await
            .unwrap();
        self.port = listener.local_addr().unwrap().port();
        let target = self.target;
        self.accepting = Some(tokio::spawn(async move {
            // Dropping the set (when this task is aborted) aborts every forwarded connection.
            let mut connections = tokio::task::JoinSet::new();
            while let Ok((mut inbound, _)) = listener.accept().await {
                connections.spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        }));
    }

    /// Closes the port and every connection through it.
    async fn cut(&mut self) {
        if let Some(accepting) = self.accepting.take() {
            accepting.abort();
            let _ = accepting.await;
        }
    }
}

/// The URL `url` names, reached through `proxy` instead.
fn through(url: &str, proxy: &Proxy) -> String {
    let (scheme_and_auth, rest) = url.rsplit_once('@').unwrap();
    let (_, path) = rest.split_once('/').unwrap();
    format!("{scheme_and_auth}@127.0.0.1:{}/{path}", proxy.port)
}

/// The database going away: the API answers 503 with `Retry-After` while it is away and works
/// again, with nothing lost, once it is back.
async fn the_api_answers_503_while_postgres_is_unreachable(cluster: Cluster) {
    let url = cluster.database.clone().unwrap();
    let host_port = url.rsplit_once('@').unwrap().1.split('/').next().unwrap();
    let target: std::net::SocketAddr = host_port.parse().unwrap();
    let mut proxy = Proxy::start(target).await;
    let proxied = through(&url, &proxy);
    let child = cluster.start_on(
        Some(&proxied),
        "serve",
        &["--port", "0", "--workers", "0"],
        address_port,
    );
    let api = Api::new(child.port);
    let id = api.kickoff(json!({"topic": "outage"})).await;

    proxy.cut().await;
    let requests = [
        api.get(&format!("/status/{id}")),
        api.post("/kickoff")
            .json(&json!({"inputs": {"topic": "during"}})),
    ];
    for request in requests {
        let response = request.send().await.unwrap();
        let retry_after = response.headers().get("retry-after").cloned();
        let (status, code, body) = error_of(response).await;
        assert_eq!(
            (status, code.as_str()),
            (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            "{body}"
        );
        assert!(
            retry_after.is_some_and(|v| v.to_str().unwrap().parse::<u64>().is_ok()),
            "no Retry-After"
        );
    }

    proxy.restore().await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let response = api.get(&format!("/status/{id}")).send().await.unwrap();
        if response.status() == StatusCode::OK {
            let status: Value = response.json().await.unwrap();
            assert_eq!(status["state"], "queued", "{status}");
            break;
        }
        assert!(Instant::now() < deadline, "the API did not reconnect");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let after = api.kickoff(json!({"topic": "after"})).await;
    assert_ne!(after, id);
    drop(child);
}

const MEMORY_FILES: &[(&str, &str)] = &[
    (
        "config/agents.yaml",
        "planner:\n  role: Planner\n  goal: Plan launches\n  backstory: Careful.\n",
    ),
    (
        "config/tasks.yaml",
        "plan:\n  description: Plan the product launch\n  expected_output: A plan\n  agent: planner\n",
    ),
    (
        "config/crew.yaml",
        "name: launch\nmemory: true\nembedder:\n  provider: hash\n  config: {dimensions: 256}\n",
    ),
];

/// On `--database postgres://…` a crew's memory is kept in the database (pgvector), not in the
/// project's file: what one worker's kickoff saved, another worker's kickoff recalls.
async fn a_memory_crews_workers_share_its_memory_in_postgres(cluster: Cluster) {
    let server = &cluster.server;
    server.push_text("Launch on May 4 in Lisbon.");
    server.push_text("{\"memories\": [\"The product launches on May 4 in Lisbon\"]}");
    server.push_text(
        r#"{"memories": [{"scope": "/", "categories": ["launch"], "importance": 0.8}]}"#,
    );
    let (_api_child, api) = cluster.serve(&["--workers", "0"]);
    let first_worker = cluster.worker(&[]);
    let first = api.kickoff(json!({})).await;
    let done = api.wait_final(&first, Duration::from_secs(60)).await;
    assert_eq!(done["state"], "completed", "{done}");
    assert_eq!(server.requests().len(), 3);
    drop(first_worker);

    let url = cluster.database.clone().unwrap();
    {
        use sqlx::Connection as _;
        let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
        let rows: Vec<(String, String)> =
            sqlx::query_as("SELECT scope, content FROM memory_records ORDER BY seq")
                .fetch_all(&mut conn)
                .await
                .unwrap();
        assert_eq!(
            rows,
            [(
                "/crew/launch/agent/planner".to_string(),
                "The product launches on May 4 in Lisbon".to_string()
            )]
        );
    }
    assert!(!cluster.dir.path().join(".crewai/memory.db").exists());

    server.push_text("Same plan.");
    server.push_text("{\"memories\": []}");
    let _second_worker = cluster.worker(&[]);
    let second = api.kickoff(json!({})).await;
    let done = api.wait_final(&second, Duration::from_secs(60)).await;
    assert_eq!(done["state"], "completed", "{done}");
    let prompt = server.requests()[3].body.to_string();
    assert!(prompt.contains("Plan the product launch"), "{prompt}");
    assert!(
        prompt.contains("The product launches on May 4 in Lisbon"),
        "{prompt}"
    );
}

type Test = fn(Cluster) -> BoxFuture<'static, ()>;

fn main() -> std::process::ExitCode {
    let postgres = crewai_testkit::postgres::prerequisite();
    let tests: [(&str, Backend, Test); 4] = [
        (
            "the_api_answers_amp_routes_refuses_bad_input_and_streams_progress",
            Backend::Sqlite,
            |cluster| {
                Box::pin(the_api_answers_amp_routes_refuses_bad_input_and_streams_progress(cluster))
            },
        ),
        (
            "a_killed_workers_kickoffs_complete_once_on_another_without_rerunning_finished_tasks",
            Backend::Sqlite,
            |cluster| Box::pin(killed_worker(cluster, 8, 1)),
        ),
        (
            "postgres::killed_workers_kickoffs_complete_once_without_rerunning_finished_tasks",
            Backend::Postgres,
            |cluster| Box::pin(killed_worker(cluster, 24, 3)),
        ),
        (
            "postgres::the_api_answers_503_while_postgres_is_unreachable",
            Backend::Postgres,
            |cluster| Box::pin(the_api_answers_503_while_postgres_is_unreachable(cluster)),
        ),
    ];
    let mut suite = Suite::new();
    for (name, backend, test) in tests {
        let needs = match backend {
            Backend::Sqlite => Vec::new(),
            Backend::Postgres => vec![&postgres],
        };
        suite = suite.test_needing(name, &needs, move || {
            block_on_multi_thread(2, async move { test(Cluster::new(backend).await).await })
        });
    }
    suite = suite.test_needing(
        "postgres::a_memory_crews_workers_share_its_memory_in_postgres",
        &[&postgres],
        || {
            block_on_multi_thread(2, async {
                let cluster = Cluster::of(Backend::Postgres, MEMORY_FILES).await;
                a_memory_crews_workers_share_its_memory_in_postgres(cluster).await
            })
        },
    );
    suite.run()
}
