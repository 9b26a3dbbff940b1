//! The benchmark crew: load the YAML, build the crew, kick it off, N times, and report.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use crewai::Crew;
use crewai_core::interpolate::Inputs;
use crewai_project::{BuildOptions, Project, ToolRegistry};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use crate::cli::Args;
use crate::error::BenchError;
use crate::mock::StatsClient;
use crate::report::{max, median, min, ratio, round};
use crate::rusage;

/// The input the contract fixes for every kickoff.
pub const TOPIC: &str = "Rust async runtimes";

/// Counts the words (whitespace-separated tokens) in a text and returns the count.
///
/// # Arguments
/// * `text` - The text whose words should be counted.
#[crewai::tool]
async fn word_counter(text: String) -> String {
    // Python's `str.split()` with no separator: runs of whitespace, no empty pieces.
    text.split_whitespace().count().to_string()
}

/// Where the benchmark crew lives and how its models reach the mock server.
#[derive(Clone)]
struct Workload {
    /// The project folder (the one holding `config/`).
    root: PathBuf,
    base_url: String,
}

/// What one kickoff measured.
struct Kickoff {
    total_ms: f64,
    build_ms: f64,
    output: String,
    successful_requests: u64,
}

/// The project folder for `--config`: the loader looks for `config/agents.yaml` below it, so a
/// path to the `config` folder itself means its parent.
fn project_root(config: &Path) -> PathBuf {
    let holds_agents = ["agents.yaml", "agents.yml"]
        .iter()
        .any(|f| config.join(f).is_file());
    match (holds_agents, config.parent()) {
        (true, Some(parent)) if config.file_name().is_some_and(|n| n == "config") => {
            parent.to_path_buf()
        }
        _ => config.to_path_buf(),
    }
}

fn inputs() -> Inputs {
    Inputs::from([("topic".to_string(), Value::String(TOPIC.to_string()))])
}

impl Workload {
    /// Reads the YAML and builds the crew, as `BenchCrew().crew()` does on the CrewAI side: each
    /// agent keeps the model its YAML names, pointed at the mock server with API key `x`.
    fn build(&self) -> Result<Crew, BenchError> {
        let project_error = |source| BenchError::Project {
            path: self.root.clone(),
            source: Box::new(source),
        };
        let mut project = Project::load(&self.root).map_err(project_error)?;
        for agent in &mut project.agents {
            let mut llm = agent
                .spec
                .llm
                .take()
                .unwrap_or_else(|| crewai::LlmConfig::new("openai/gpt-4o-mini"));
            llm.base_url = Some(self.base_url.clone());
            llm.api_key = Some("x".to_string());
            llm.stream = false;
            agent.spec.llm = Some(llm);
        }
        let mut tools = ToolRegistry::new();
        tools.register_handle(word_counter_tool());
        project
            .build(&inputs(), &BuildOptions::new(tools))
            .map_err(project_error)
    }

    async fn kickoff(&self, index: usize) -> Result<Kickoff, BenchError> {
        let start = Instant::now();
        let crew = self.build()?;
        let built = Instant::now();
        let output = crew
            .kickoff(inputs())
            .await
            .map_err(|source| BenchError::Kickoff {
                index,
                source: Box::new(source),
            })?;
        let end = Instant::now();
        Ok(Kickoff {
            total_ms: (end - start).as_secs_f64() * 1000.0,
            build_ms: (built - start).as_secs_f64() * 1000.0,
            output: output.raw,
            successful_requests: crew.usage().total.successful_requests,
        })
    }
}

/// C = 1: one after another. C > 1: all started together as tasks on the runtime, at most C
/// holding a slot; each is timed from the moment it got its slot.
async fn run_kickoffs(
    workload: &Workload,
    runs: usize,
    concurrency: usize,
) -> Result<Vec<Kickoff>, BenchError> {
    if concurrency <= 1 {
        let mut done = Vec::with_capacity(runs);
        for index in 0..runs {
            done.push(workload.kickoff(index).await?);
        }
        return Ok(done);
    }
    let slots = Arc::new(Semaphore::new(concurrency));
    let handles: Vec<_> = (0..runs)
        .map(|index| {
            let slots = Arc::clone(&slots);
            let workload = workload.clone();
            tokio::spawn(async move {
                // The semaphore is never closed, so acquiring only waits.
                let _slot = slots.acquire_owned().await;
                workload.kickoff(index).await
            })
        })
        .collect();
    let mut done = Vec::with_capacity(runs);
    for handle in handles {
        done.push(handle.await??);
    }
    Ok(done)
}

pub async fn run(
    args: &Args,
    stats: &StatsClient,
    process_start: Instant,
) -> Result<String, BenchError> {
    if args.runs == 0 {
        return Err(BenchError::NoRuns);
    }
    let config = args.config.as_deref().unwrap_or(Path::new("."));
    let workload = Workload {
        root: project_root(config),
        base_url: format!("http://127.0.0.1:{}/v1", stats.port()),
    };
    for index in 0..args.warmup {
        workload.kickoff(index).await?;
    }
    stats.reset().await?;
    let before_stats = stats.stats().await?;
    let before = rusage::now();
    let start = Instant::now();
    let kickoffs = run_kickoffs(&workload, args.runs, args.concurrency).await?;
    let wall_s = start.elapsed().as_secs_f64();
    let after = rusage::now();
    let counted_by_engine: u64 = kickoffs.iter().map(|k| k.successful_requests).sum();
    let after_stats = stats
        .settled(before_stats.chat_completions + counted_by_engine)
        .await?;

    let per: Vec<f64> = kickoffs.iter().map(|k| k.total_ms).collect();
    let build: Vec<f64> = kickoffs.iter().map(|k| k.build_ms).collect();
    let outputs: BTreeSet<&str> = kickoffs.iter().map(|k| k.output.as_str()).collect();
    let llm_calls = after_stats
        .chat_completions
        .saturating_sub(before_stats.chat_completions);
    let cpu_kickoffs_s = after.cpu_s - before.cpu_s;
    let end = rusage::now();
    let output: Value = match outputs.len() {
        1 => json!(outputs.iter().next()),
        _ => json!(outputs),
    };
    let line = json!({
        "impl": "crewai-rs",
        "version": env!("CARGO_PKG_VERSION"),
        "label": args.label,
        "runs": args.runs,
        "concurrency": args.concurrency,
        "api": if args.concurrency <= 1 { "kickoff" } else { "tokio::spawn + Semaphore + kickoff" },
        "runtime": if args.concurrency <= 1 { "tokio current_thread" } else { "tokio multi_thread" },
        // A compiled binary has nothing to import; its startup before main is not measured.
        "import_s": 0.0,
        "total_wall_s": round(wall_s, 4),
        "per_kickoff_ms": round(median(&per), 3),
        "per_kickoff_ms_min": round(min(&per), 3),
        "per_kickoff_ms_max": round(max(&per), 3),
        "first_kickoff_ms": round(per[0], 3),
        "build_ms": round(median(&build), 3),
        "llm_calls": llm_calls,
        "llm_calls_usage": counted_by_engine,
        "llm_calls_per_kickoff": round(llm_calls as f64 / args.runs as f64, 3),
        "llm_calls_per_s": ratio(llm_calls as f64, wall_s).map(|v| round(v, 3)),
        "cpu_kickoffs_s": round(cpu_kickoffs_s, 4),
        "cpu_per_llm_call_ms": ratio(cpu_kickoffs_s * 1000.0, llm_calls as f64).map(|v| round(v, 4)),
        "cpu_s": round(end.cpu_s, 4),
        "peak_rss_mb": round(end.max_rss_kib as f64 / 1024.0, 1),
        "process_s": round(process_start.elapsed().as_secs_f64(), 4),
        "distinct_outputs": outputs.len(),
        "output": output,
        "mock_max_in_flight": after_stats.max_in_flight,
    });
    Ok(line.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_folder_means_its_project() {
        let dir = std::env::temp_dir().join(format!("crewai-bench-root-{}", std::process::id()));
        let config = dir.join("config");
        std::fs::create_dir_all(&config).unwrap();
        std::fs::write(config.join("agents.yaml"), "a: {}\n").unwrap();
        assert_eq!(project_root(&config), dir);
        assert_eq!(project_root(&dir), dir);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn word_counter_counts_like_python_split() {
        use crewai_tools::ToolContext;
        let handle = word_counter_tool();
        assert_eq!(handle.name(), "word_counter");
        let out = handle
            .tool()
            .run(
                json!({"text": "  two\twords\n and  more "}),
                &ToolContext::default(),
            )
            .await
            .unwrap();
        assert_eq!(out, crewai_tools::ToolOutput::Text("4".to_string()));
    }
}
