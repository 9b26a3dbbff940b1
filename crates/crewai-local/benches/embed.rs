//! Embedding throughput of the offline embedder (all-MiniLM-L6-v2) on this machine's cores:
//! `cargo bench -p crewai-local --bench embed`. Needs the model (`crewai models pull minilm`);
//! without it the bench says so and measures nothing.
//!
//! Two shapes: short texts (a sentence, ~12 tokens, as memories are) and knowledge chunks cut
//! at the model's 256 tokens (CrewAI's 4,000-character chunks are longer, so every one is cut).
//! divan reports the time per call; the counter turns it into texts per second.

use std::sync::atomic::AtomicBool;

use crewai_local::{ALL_MINILM_L6_V2, SentenceEncoder, models_dir};
use divan::Bencher;
use divan::counter::ItemsCount;

fn main() {
    if !ALL_MINILM_L6_V2.is_pulled(&models_dir()) {
        eprintln!(
            "the embed bench needs all-MiniLM-L6-v2: run `cargo run -q -p crewai-cli -- models pull minilm`"
        );
        return;
    }
    divan::main();
}

fn encoder() -> SentenceEncoder {
    SentenceEncoder::load(&ALL_MINILM_L6_V2.path_in(&models_dir()))
        .unwrap_or_else(|e| panic!("{}", crewai_llm::error_chain(&e)))
}

fn sentences(count: usize) -> Vec<String> {
    (0..count)
        .map(|i| format!("Agent {i} remembered that the quarterly report is due on Friday."))
        .collect()
}

fn chunks(count: usize) -> Vec<String> {
    let paragraph = "Knowledge sources are split into overlapping chunks, embedded once, and searched by meaning when a task starts. ";
    (0..count)
        .map(|i| format!("Chunk {i}. {}", paragraph.repeat(40)))
        .collect()
}

#[divan::bench(args = [1, 32, 128], sample_count = 10)]
fn short_texts(bencher: Bencher, count: usize) {
    let encoder = encoder();
    let texts = sentences(count);
    let keep_going = AtomicBool::new(false);
    bencher
        .counter(ItemsCount::new(count))
        .bench_local(|| encoder.encode(&texts, &keep_going));
}

#[divan::bench(args = [1, 32], sample_count = 5)]
fn chunks_of_256_tokens(bencher: Bencher, count: usize) {
    let encoder = encoder();
    let texts = chunks(count);
    let keep_going = AtomicBool::new(false);
    bencher
        .counter(ItemsCount::new(count))
        .bench_local(|| encoder.encode(&texts, &keep_going));
}
