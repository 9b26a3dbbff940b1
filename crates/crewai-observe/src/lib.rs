//! # crewai-observe
//!
//! Seeing what a run did, on open standards:
//! - [`otel`]: OpenTelemetry spans for crew kickoff → task → agent → LLM call / tool call /
//!   delegation with the GenAI semantic conventions, exported over OTLP/HTTP when the standard
//!   `OTEL_*` variables ask for it, and never otherwise;
//! - [`local`]: every run's events as JSON lines under `.crewai/traces/`, shown as a list, a tree
//!   or an HTML timeline;
//! - [`spans`]: the event-to-span assembly both share.
//!
//! Only this crate (and the CLI) depends on OpenTelemetry; the engine just emits typed events.
//! Both listeners read the bus through a bounded channel
//! ([`EventBus::subscribe_channel`](crewai_core::events::EventBus::subscribe_channel)): writing
//! the file and exporting spans run on a thread or task of their own, never inside the agent
//! loop, and the bus drops (and counts) events rather than wait for them.
//!
//! ```
//! use crewai_core::events::{EventBus, EventKind};
//! use crewai_observe::local::{RunTrace, TraceWriter};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let bus = EventBus::new();
//! let writer = TraceWriter::attach(&bus, dir.path(), "run-1").unwrap();
//! let crew = bus.emit(None, EventKind::CrewKickoffStarted { crew_name: "demo".into(), crew_id: None, inputs: None });
//! bus.emit(Some(crew), EventKind::CrewKickoffCompleted { crew_name: "demo".into(), crew_id: None, output: "done".into(), total_tokens: 0 });
//! let path = writer.finish().unwrap();
//!
//! let trace = RunTrace::read(&path).unwrap();
//! assert_eq!(trace.summary().name, "demo");
//! assert!(trace.render_tree().contains("└─ crew demo"));
//! ```

pub mod local;
pub mod otel;
pub mod spans;

pub use local::{RunSummary, RunTrace, TraceError, TraceWriter, list_runs, traces_dir};
pub use otel::{OtelConfig, OtelError, OtelExport, OtlpProtocol};
pub use spans::{SpanAssembler, SpanKind, SpanRecord};
