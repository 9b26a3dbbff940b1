//! Measures prompt and generation speed of the embedded model: both weight formats, free text
//! and JSON held to a schema; three timed runs each, the median reported, with the machine's load.
//!
//! `cargo run --release -p crewai-local --example throughput [path.gguf]` (the model must be
//! pulled: `crewai models pull`). `THROUGHPUT_FORMATS=f32` skips the slow Q4_1 format.

use std::time::{Duration, Instant};

use crewai_llm::Message;
use crewai_local::{GenerationParams, LoadedModel, WeightFormat, cache};

const RUNS: usize = 3;
const GENERATED: usize = 128;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = match std::env::args().nth(1) {
        Some(path) => path.into(),
        None => cache::SMOLLM2_135M.path_in(&cache::models_dir()),
    };
    let question =
        "Explain in a few sentences what a team of AI agents is and how the agents share work. "
            .repeat(8);
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "summary": {"type": "string"},
            "agents": {"type": "array", "items": {
                "type": "object",
                "properties": {"role": {"type": "string"}, "task": {"type": "string"}},
                "required": ["role", "task"]
            }}
        },
        "required": ["summary", "agents"]
    });
    let only_f32 = std::env::var("THROUGHPUT_FORMATS").is_ok_and(|f| f.trim() == "f32");
    println!("load before: {}", load_average());
    for format in [WeightFormat::Dequantized, WeightFormat::Quantized] {
        if only_f32 && format == WeightFormat::Quantized {
            continue;
        }
        let started = Instant::now();
        let mut model = LoadedModel::load(&path, format)?;
        let load = started.elapsed();
        let prompt = model
            .template()
            .render(&[Message::user(question.clone())])
            .encode(model.tokenizer())?;
        let free = GenerationParams {
            max_tokens: GENERATED,
            repeat_penalty: 1.0,
            ..Default::default()
        };
        let json = GenerationParams {
            json_schema: Some(schema.clone()),
            ..free.clone()
        };
        // One untimed run of each kind warms caches, the attention masks and the token texts.
        model.generate(&prompt, &json, |_| true)?;
        let mut prefill = Vec::new();
        let mut decode = Vec::new();
        let mut decode_json = Vec::new();
        for _ in 0..RUNS {
            let one_token = GenerationParams {
                max_tokens: 1,
                ..free.clone()
            };
            let started = Instant::now();
            model.generate(&prompt, &one_token, |_| true)?;
            let first = started.elapsed();
            prefill.push(prompt.len() as f64 / first.as_secs_f64());
            for (params, rates) in [(&free, &mut decode), (&json, &mut decode_json)] {
                let started = Instant::now();
                let generation = model.generate(&prompt, params, |_| true)?;
                let rest = started
                    .elapsed()
                    .saturating_sub(first)
                    .max(Duration::from_micros(1));
                rates.push(
                    generation.completion_tokens.saturating_sub(1) as f64 / rest.as_secs_f64(),
                );
            }
        }
        println!(
            "{format:?}: load {:.2} s; prompt {} tokens at {:.0} tokens/s; generation {:.1} tokens/s free text, {:.1} tokens/s JSON under a schema (median of {RUNS}: {})",
            load.as_secs_f64(),
            prompt.len(),
            median(&mut prefill),
            median(&mut decode),
            median(&mut decode_json),
            [&prefill, &decode, &decode_json]
                .iter()
                .map(|runs| runs
                    .iter()
                    .map(|r| format!("{r:.1}"))
                    .collect::<Vec<_>>()
                    .join("/"))
                .collect::<Vec<_>>()
                .join(", "),
        );
    }
    println!("load after: {}", load_average());
    Ok(())
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// The 1, 5 and 15 minute load averages (Linux), as the machine may be busy with other work.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}
