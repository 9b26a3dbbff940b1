//! Micro-benchmarks of the engine's per-call work: building an agent's prompt, parsing a ReAct
//! reply, and dispatching events to listeners. Run: `cargo bench -p crewai-core --bench hot_paths`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crewai_core::events::{EventBus, EventKind};
use crewai_core::preview::{self, TaskLoop};
use crewai_core::react;
use crewai_llm::ToolDefinition;
use divan::{Bencher, black_box};

fn main() {
    divan::main();
}

const ROLE: &str = "Rust async runtimes Senior Researcher";
const GOAL: &str = "Collect the key facts about Rust async runtimes";
const BACKSTORY: &str = "You are a meticulous researcher who always checks the length of what you collected \
before handing it on. You write short, factual notes about Rust async runtimes.";
const DESCRIPTION: &str = "Using the research notes and the findings you received as context, write a concise \
summary of Rust async runtimes for engineers.";
const EXPECTED: &str = "A summary of Rust async runtimes in one paragraph.";
const CONTEXT: &str = "ANSWER 1a2b3c4d\n\n----------\n\nANSWER 5e6f7a8b";

/// The system and user messages of the benchmark crew's writer (no tools, two context outputs).
#[divan::bench]
fn prompt_writer_messages() -> (String, String) {
    let system = preview::system_prompt(black_box(ROLE), black_box(GOAL), black_box(BACKSTORY));
    let task = preview::task_prompt(black_box(DESCRIPTION), black_box(EXPECTED));
    let user = preview::task_message(
        &preview::with_context(&task, black_box(CONTEXT)),
        TaskLoop::NoTools,
    );
    (system, user)
}

/// A ReAct system prompt with one tool described, as for a model without function calling.
#[divan::bench]
fn prompt_react_instructions(bencher: Bencher) {
    let tool = ToolDefinition {
        name: "word_counter".into(),
        description: "Counts the words in a text.".into(),
        parameters: serde_json::json!({
            "type": "object",
            "properties": {"text": {"description": "The text whose words should be counted.", "type": "string"}},
            "required": ["text"]
        }),
        strict: false,
    };
    bencher.bench(|| preview::react_instructions(black_box(std::slice::from_ref(&tool))));
}

const ACTION_REPLY: &str = "Thought: I should count the words of my notes first.\nAction: word_counter\n\
Action Input: {\"text\": \"Tokio is the most used runtime; smol and async-std are smaller.\"}\n\
Observation: the model made this up";
const FINAL_REPLY: &str = "Thought: I now know the final answer\nFinal Answer: Tokio dominates; \
smol is minimal; async-std mirrors std.\n\n1. Work stealing\n2. io_uring\n3. Structured concurrency";

#[divan::bench]
fn react_parse_action() -> react::ReactStep {
    react::parse(black_box(ACTION_REPLY))
}

#[divan::bench]
fn react_parse_final_answer() -> react::ReactStep {
    react::parse(black_box(FINAL_REPLY))
}

/// One `llm_call_completed` event (the most frequent kind) through a bus with N listeners.
#[divan::bench(args = [0, 1, 4])]
fn event_dispatch(bencher: Bencher, listeners: usize) {
    let bus = EventBus::new();
    let seen = Arc::new(AtomicU64::new(0));
    for _ in 0..listeners {
        let seen = Arc::clone(&seen);
        bus.subscribe(move |event| {
            black_box(event.type_name());
            seen.fetch_add(1, Ordering::Relaxed);
        });
    }
    bencher.bench_local(|| {
        bus.emit(
            None,
            EventKind::LlmCallCompleted {
                call_id: "call-1".to_string(),
                model: "gpt-4o-mini".to_string(),
                agent_role: Some(ROLE.to_string()),
                task_name: Some("research_task".to_string()),
                response: serde_json::Value::String("ANSWER 1a2b3c4d".to_string()),
                usage: Default::default(),
            },
        )
    });
}

/// Serialising an event the way listeners that log JSON do.
#[divan::bench]
fn event_to_json(bencher: Bencher) {
    let bus = EventBus::new();
    let recorder = crewai_core::events::EventRecorder::attach(&bus);
    bus.emit(
        None,
        EventKind::TaskStarted {
            task_name: Some("research_task".to_string()),
            task_id: None,
            agent_role: Some(ROLE.to_string()),
            context: Some(CONTEXT.to_string()),
        },
    );
    let events = recorder.events();
    let event = &events[0];
    bencher.bench_local(|| black_box(event).to_json());
}
