//! The offline embedder against sentence-transformers' own numbers. The reference was computed
//! once with sentence-transformers 6.3.0 (torch 2.15 CPU) on the same pulled folder:
//! `SentenceTransformer(folder, device="cpu").encode(texts)`. The runs need the model
//! (`crewai models pull minilm`): without it they are reported as skipped, and fail under
//! `CI=true` (see `crewai_testkit::prereq`). `harness = false`: every test is registered in
//! `main`.

use std::process::ExitCode;
use std::sync::Arc;

use crewai_llm::BuildOptions;
use crewai_llm::embeddings::{Embedder, EmbedderConfig, build_embedder_from};
use crewai_local::{ALL_MINILM_L6_V2, LocalEmbedder, models_dir};
use crewai_testkit::prereq::{Prerequisite, Suite};

/// The largest difference allowed from the reference.
const TOLERANCE: f32 = 1e-3;

const GUITAR: &str = "A man is playing a guitar.";
const INSTRUMENT: &str = "Someone is playing an instrument.";
const MARKET: &str = "The stock market fell sharply today.";
/// Accents, which the BERT normaliser strips, and punctuation, which it splits off.
const ACCENTS: &str = "Café déjà vu: naïve résumés in Zürich!";

/// 402 tokens: the model sees the first 256, as sentence-transformers cuts it.
fn long_text() -> String {
    vec!["Memory and knowledge let agents remember what they read."; 40].join(" ")
}

/// sentence-transformers' cosine similarities of the pairs.
const COSINE_GUITAR_INSTRUMENT: f32 = 0.675212;
const COSINE_GUITAR_MARKET: f32 = -0.054027;
const COSINE_INSTRUMENT_MARKET: f32 = -0.059130;

/// The first six values of each reference embedding, in the order of `texts()`.
const FIRST_VALUES: [[f32; 6]; 6] = [
    [
        0.021664, -0.004864, -0.009649, -0.063401, -0.167493, 0.004676,
    ],
    [0.031437, 0.008808, 0.002505, -0.094711, -0.19351, 0.056057],
    [0.060455, 0.005445, 0.076566, 0.053829, -0.014793, -0.006096],
    [-0.04585, 0.029407, 0.06933, 0.023049, 0.086109, 0.041777],
    [0.095136, 0.019678, -0.052725, 0.046783, -0.034966, 0.165279],
    [
        -0.118838, 0.048299, -0.002548, -0.011011, 0.051951, 0.010292,
    ],
];

fn texts() -> Vec<String> {
    vec![
        GUITAR.into(),
        INSTRUMENT.into(),
        MARKET.into(),
        ACCENTS.into(),
        long_text(),
        String::new(),
    ]
}

fn main() -> ExitCode {
    let weights = ALL_MINILM_L6_V2
        .files_in(&models_dir())
        .into_iter()
        .next()
        .unwrap_or_default();
    let model = Prerequisite::file(
        "the offline embedder all-MiniLM-L6-v2",
        weights,
        "run `cargo run -q -p crewai-cli -- models pull minilm` (it downloads into CREWAI_MODELS_DIR, default ~/.cache/crewai/models)",
    );
    Suite::new()
        .test_needing(
            "embeddings_match_sentence_transformers",
            &[&model],
            embeddings_match_sentence_transformers,
        )
        .test_needing(
            "a_text_gets_the_same_vector_alone_and_in_a_batch",
            &[&model],
            a_text_gets_the_same_vector_alone_and_in_a_batch,
        )
        .test_needing(
            "the_registered_local_provider_builds_the_embedder",
            &[&model],
            the_registered_local_provider_builds_the_embedder,
        )
        .run()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn embedder() -> LocalEmbedder {
    LocalEmbedder::new(&ALL_MINILM_L6_V2, &models_dir()).unwrap_or_else(|e| panic!("{e}"))
}

fn embed(embedder: &dyn Embedder, texts: &[String]) -> Vec<Vec<f32>> {
    runtime()
        .block_on(embedder.embed(texts))
        .unwrap_or_else(|e| panic!("{}", crewai_llm::error_chain(&e)))
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn assert_close(actual: f32, expected: f32, what: &str) {
    assert!(
        (actual - expected).abs() <= TOLERANCE,
        "{what}: {actual} vs sentence-transformers' {expected}"
    );
}

fn embeddings_match_sentence_transformers() {
    let vectors = embed(&embedder(), &texts());
    assert_eq!(vectors.len(), 6);
    for (index, vector) in vectors.iter().enumerate() {
        assert_eq!(vector.len(), 384);
        assert_close(
            dot(vector, vector).sqrt(),
            1.0,
            &format!("text {index}'s length"),
        );
        for (place, expected) in FIRST_VALUES[index].iter().enumerate() {
            assert_close(
                vector[place],
                *expected,
                &format!("text {index}, value {place}"),
            );
        }
    }
    // The vectors are unit length, so their dot product is the cosine similarity.
    assert_close(
        dot(&vectors[0], &vectors[1]),
        COSINE_GUITAR_INSTRUMENT,
        "guitar/instrument",
    );
    assert_close(
        dot(&vectors[0], &vectors[2]),
        COSINE_GUITAR_MARKET,
        "guitar/market",
    );
    assert_close(
        dot(&vectors[1], &vectors[2]),
        COSINE_INSTRUMENT_MARKET,
        "instrument/market",
    );
}

fn a_text_gets_the_same_vector_alone_and_in_a_batch() {
    // 70 texts: three batches, of different lengths, padded within each.
    let mut many: Vec<String> = (0..70)
        .map(|i| format!("Sentence number {i} about {}.", "agents ".repeat(i % 9)))
        .collect();
    many[37] = GUITAR.into();
    let embedder = embedder();
    let batched = embed(&embedder, &many);
    let alone = embed(&embedder, &[GUITAR.to_string()]);
    assert_eq!(batched.len(), 70);
    for (place, (a, b)) in batched[37].iter().zip(&alone[0]).enumerate() {
        assert!(
            (a - b).abs() < 1e-5,
            "value {place}: {a} batched, {b} alone"
        );
    }
    assert_close(
        batched[37][0],
        FIRST_VALUES[0][0],
        "the guitar text in a batch",
    );
}

fn the_registered_local_provider_builds_the_embedder() {
    let options =
        BuildOptions::new().with_embedder_provider("local", Arc::new(crewai_local::build_embedder));
    let config: EmbedderConfig = yaml_serde::from_str(
        "provider: sentence-transformer\nconfig:\n  model_name: all-MiniLM-L6-v2\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let embedder = build_embedder_from(&config, &options)
        .unwrap_or_else(|e| panic!("{}", crewai_llm::error_chain(&e)));
    assert_eq!(embedder.model(), "all-minilm-l6-v2");
    let vectors = embed(&*embedder, &[GUITAR.into(), INSTRUMENT.into()]);
    assert_close(
        dot(&vectors[0], &vectors[1]),
        COSINE_GUITAR_INSTRUMENT,
        "through the provider",
    );
    // The tokens a run's usage counts are the model's own: [CLS] hello world [SEP], then
    // [CLS] hello [SEP].
    let counted = runtime()
        .block_on(embedder.embed_counted(&["hello world".into(), "hello".into()]))
        .unwrap_or_else(|e| panic!("{}", crewai_llm::error_chain(&e)));
    assert_eq!(counted.prompt_tokens, Some(7));
}
