//! What the mock server itself can serve: the recorded CrewAI requests sent raw, four per
//! "kickoff", with the same concurrency rule as the crew runs and no framework in between.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use crewai_llm::http::{ErrorContext, HttpRequest, NetworkTransport, Transport};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use crate::cli::Args;
use crate::error::{BenchError, BoxError};
use crate::mock::StatsClient;
use crate::report::{ratio, round};
use crate::rusage;

/// The request bodies of a fixtures file (`{"kind", "request", "answer"}` per line).
fn read_fixtures(path: &Path) -> Result<Vec<Bytes>, BenchError> {
    let failure = |problem: String| BenchError::Fixtures {
        path: path.to_path_buf(),
        problem,
    };
    let text = std::fs::read_to_string(path).map_err(|source| BenchError::FixturesRead {
        path: path.to_path_buf(),
        source,
    })?;
    let mut bodies = Vec::new();
    for (number, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let record: Value =
            serde_json::from_str(line).map_err(|source| BenchError::FixturesJson {
                path: path.to_path_buf(),
                line: number + 1,
                source,
            })?;
        let mut request = record
            .get("request")
            .cloned()
            .ok_or_else(|| failure(format!("line {}: no \"request\"", number + 1)))?;
        if let Some(body) = request.as_object_mut() {
            body.insert("stream".into(), Value::Bool(false));
        }
        bodies.push(Bytes::from(request.to_string()));
    }
    if bodies.is_empty() {
        return Err(failure("no requests in the file".to_string()));
    }
    Ok(bodies)
}

pub async fn run(args: &Args, fixtures: &Path, stats: &StatsClient) -> Result<String, BenchError> {
    if args.runs == 0 {
        return Err(BenchError::NoRuns);
    }
    let bodies = read_fixtures(fixtures)?;
    let port = stats.port();
    let failed = |what: &'static str, source: BoxError| BenchError::Mock { port, what, source };
    // The HTTP stack the crews use (crewai-llm's transport: one keep-alive pool, prompt ACKs),
    // with nothing of the framework above it, so the ceiling is the server's and not a
    // client's stall.
    let transport: Arc<dyn Transport> = Arc::new(
        NetworkTransport::new(Duration::from_secs(10), Duration::from_secs(600))
            .map_err(|e| failed("(client setup)", e.into()))?,
    );
    let context = ErrorContext::new("mock", "gpt-4o-mini", "(none)");
    let url = stats.url("/v1/chat/completions");
    // One "kickoff" = the fixtures' requests one after another, like a crew's calls.
    let kickoff = move |transport: Arc<dyn Transport>,
                        context: ErrorContext,
                        url: String,
                        bodies: Vec<Bytes>| async move {
        for body in bodies {
            let request = HttpRequest {
                method: "POST".into(),
                url: url.clone(),
                headers: vec![
                    ("content-type".into(), "application/json".into()),
                    ("authorization".into(), "Bearer x".into()),
                ],
                body,
                streaming: false,
            };
            let response = transport
                .send(request, &context)
                .await
                .map_err(BoxError::from)?;
            let status = response.status;
            response.body.into_bytes().await.map_err(BoxError::from)?;
            if status >= 400 {
                return Err(BoxError::from(format!("status {status}")));
            }
        }
        Ok::<(), BoxError>(())
    };
    stats.reset().await?;
    let before = rusage::now();
    let start = Instant::now();
    let slots = Arc::new(Semaphore::new(args.concurrency.max(1)));
    let handles: Vec<_> = (0..args.runs)
        .map(|_| {
            let slots = Arc::clone(&slots);
            let job = kickoff(
                transport.clone(),
                context.clone(),
                url.clone(),
                bodies.clone(),
            );
            tokio::spawn(async move {
                let _slot = slots.acquire_owned().await;
                job.await
            })
        })
        .collect();
    for handle in handles {
        handle
            .await?
            .map_err(|source| failed("POST /v1/chat/completions", source))?;
    }
    let wall_s = start.elapsed().as_secs_f64();
    let cpu_s = rusage::now().cpu_s - before.cpu_s;
    let served = stats.settled((args.runs * bodies.len()) as u64).await?;
    let line = json!({
        "impl": "raw-http",
        "label": args.label,
        "runs": args.runs,
        "concurrency": args.concurrency,
        "requests_per_kickoff": bodies.len(),
        "total_wall_s": round(wall_s, 4),
        "llm_calls": served.chat_completions,
        "llm_calls_per_s": ratio(served.chat_completions as f64, wall_s).map(|v| round(v, 3)),
        "cpu_kickoffs_s": round(cpu_s, 4),
        "mock_max_in_flight": served.max_in_flight,
    });
    Ok(line.to_string())
}
