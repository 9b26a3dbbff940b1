//! Measures prompt and generation speed of the embedded model in both weight formats.
//!
//! `cargo run -p crewai-local --example throughput [path.gguf]` (the model must be pulled:
//! `crewai models pull`).

use std::time::Instant;

use crewai_llm::Message;
use crewai_local::{GenerationParams, LoadedModel, WeightFormat, cache};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = match std::env::args().nth(1) {
        Some(path) => path.into(),
        None => cache::SMOLLM2_135M.path_in(&cache::models_dir()),
    };
    let question =
        "Explain in a few sentences what a team of AI agents is and how the agents share work. "
            .repeat(8);
    for format in [WeightFormat::Dequantized, WeightFormat::Quantized] {
        let started = Instant::now();
        let mut model = LoadedModel::load(&path, format)?;
        let load = started.elapsed();
        let prompt = model
            .template()
            .render(&[Message::user(question.clone())])
            .encode(model.tokenizer())?;
        // One untimed run warms caches and the attention masks.
        model.generate(
            &prompt,
            &GenerationParams {
                max_tokens: 4,
                ..Default::default()
            },
            |_| true,
        )?;
        let started = Instant::now();
        model.generate(
            &prompt,
            &GenerationParams {
                max_tokens: 1,
                ..Default::default()
            },
            |_| true,
        )?;
        let prefill = started.elapsed();
        let params = GenerationParams {
            max_tokens: 128,
            repeat_penalty: 1.0,
            stop: vec![],
            ..Default::default()
        };
        let started = Instant::now();
        let generation = model.generate(&prompt, &params, |_| true)?;
        let total = started.elapsed();
        let decode = total.saturating_sub(prefill);
        println!(
            "{format:?}: load {:.2} s; prompt {} tokens at {:.0} tokens/s; generated {} tokens at {:.0} tokens/s",
            load.as_secs_f64(),
            prompt.len(),
            prompt.len() as f64 / prefill.as_secs_f64(),
            generation.completion_tokens,
            generation.completion_tokens.saturating_sub(1) as f64 / decode.as_secs_f64(),
        );
    }
    Ok(())
}
