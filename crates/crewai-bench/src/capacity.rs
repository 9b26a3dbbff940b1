//! What the mock server itself can serve: the recorded CrewAI requests sent raw, four per
//! "kickoff", with the same concurrency rule as the crew runs and no framework in between.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::Semaphore;

use crate::cli::Args;
use crate::error::BenchError;
use crate::mock::StatsClient;
use crate::report::{ratio, round};
use crate::rusage;

/// The request bodies of a fixtures file (`{"kind", "request", "answer"}` per line).
fn read_fixtures(path: &Path) -> Result<Vec<Arc<String>>, BenchError> {
    let failure = |message: String| BenchError::Fixtures {
        path: path.to_path_buf(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| failure(e.to_string()))?;
    let mut bodies = Vec::new();
    for (number, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let record: Value =
            serde_json::from_str(line).map_err(|e| failure(format!("line {}: {e}", number + 1)))?;
        let mut request = record
            .get("request")
            .cloned()
            .ok_or_else(|| failure(format!("line {}: no \"request\"", number + 1)))?;
        if let Some(body) = request.as_object_mut() {
            body.insert("stream".into(), Value::Bool(false));
        }
        bodies.push(Arc::new(request.to_string()));
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
    let http = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(600))
        .build()
        .map_err(|e| BenchError::Mock {
            port: stats.port(),
            what: "(client setup)",
            message: e.to_string(),
        })?;
    let url = stats.url("/v1/chat/completions");
    // One "kickoff" = the fixtures' requests one after another, like a crew's calls.
    let kickoff = move |http: reqwest::Client, url: String, bodies: Vec<Arc<String>>| async move {
        for body in bodies {
            http.post(&url)
                .header("content-type", "application/json")
                .bearer_auth("x")
                .body(body.as_str().to_owned())
                .send()
                .await
                .and_then(reqwest::Response::error_for_status)?
                .bytes()
                .await?;
        }
        Ok::<(), reqwest::Error>(())
    };
    let port = stats.port();
    let failed = |e: reqwest::Error| BenchError::Mock {
        port,
        what: "POST /v1/chat/completions",
        message: e.to_string(),
    };
    stats.reset().await?;
    let before = rusage::now();
    let start = Instant::now();
    let slots = Arc::new(Semaphore::new(args.concurrency.max(1)));
    let handles: Vec<_> = (0..args.runs)
        .map(|_| {
            let slots = Arc::clone(&slots);
            let job = kickoff(http.clone(), url.clone(), bodies.clone());
            tokio::spawn(async move {
                let _slot = slots.acquire_owned().await;
                job.await
            })
        })
        .collect();
    for handle in handles {
        handle.await?.map_err(failed)?;
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
