//! The typed event bus.
//!
//! An [`EventBus`] is a value: a crew owns one (or is given one), a standalone agent run gets one,
//! and nothing is global, so two crews in one process never see each other's events.
//!
//! Every [`Event`] carries its id, its parent's id (crew kickoff → task → agent execution → LLM or
//! tool call), a per-bus emission sequence number and a UTC timestamp. What happened is an
//! [`EventKind`]; [`Event::type_name`] and [`Event::to_json`] use CrewAI's type strings and
//! attribute names, and an event reads back from that JSON (`serde_json::from_str::<Event>`), so a
//! trace file's lines are typed events again.
//!
//! Listeners come in two kinds. [`EventBus::subscribe`] takes a closure that runs inside the
//! emission, for cheap in-process work: [`EventRecorder`], the verbose [`ConsoleListener`].
//! [`EventBus::subscribe_channel`] gives an [`EventChannel`], a bounded queue read by a thread or
//! task of the listener's own, for anything doing I/O, which must never run inside the agent loop:
//! [`JsonLinesWriter`] writes a run's events to a file that way. The bus never waits for a
//! channel: a full queue drops the event and counts it ([`DroppedEvents`]). Nothing is built
//! when nobody listens ([`EventBus::emit_with`]).
//!
//! A panic the engine catches in code it does not own (a tool, a guardrail, a listener, a hook, a
//! callback, an async task, a flow method) is counted on the bus ([`EventBus::caught_panics`],
//! counted whether or not anyone listens) and emitted as a `panic_caught` event
//! ([`EventKind::PanicCaught`]), so a run that recovered from a panic still shows it.
//!
//! ```
//! use crewai_core::events::{EventBus, EventKind, EventRecorder};
//!
//! let bus = EventBus::new();
//! let recorder = EventRecorder::attach(&bus);
//! let crew = bus.emit(None, EventKind::CrewKickoffStarted { crew_name: "demo".into(), crew_id: None, inputs: None });
//! bus.emit(Some(crew), EventKind::TaskStarted { task_name: Some("research".into()), task_id: None, agent_role: Some("Researcher".into()), context: None });
//!
//! let events = recorder.events();
//! assert_eq!(events[1].type_name(), "task_started");
//! assert_eq!(events[1].parent_event_id, Some(crew));
//! assert_eq!(events[1].to_json()["agent_role"], "Researcher");
//! assert!(events[0].emission_sequence < events[1].emission_sequence);
//! ```

mod attribution;
mod blank;
mod bus;
mod channel;
mod console;
mod jsonl;
mod kind;
mod panics;
mod recorder;
mod tool_report;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

pub use bus::{EventBus, ListenerId};
pub use channel::{DroppedEvents, EventChannel};
pub use console::{ConsoleListener, code_execution_problem, code_execution_summary, plans_added};
pub use jsonl::{
    DEFAULT_QUEUE_CAPACITY, EventLogError, JsonLinesReport, JsonLinesWriter, ListenerGuard,
};
pub use kind::{EventKind, EventType};
pub use panics::{CaughtPanic, PanicSite, panic_message};
pub use recorder::EventRecorder;

/// One emitted event.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub event_id: Uuid,
    pub parent_event_id: Option<Uuid>,
    /// Position in the bus's emission order, starting at 1.
    pub emission_sequence: u64,
    pub timestamp: DateTime<Utc>,
    pub kind: EventKind,
}

impl Event {
    /// CrewAI's `type` string (`task_started`, `llm_call_completed`, ...).
    pub fn type_name(&self) -> &'static str {
        self.kind.type_name()
    }

    /// Which kind of event this is.
    pub fn event_type(&self) -> EventType {
        self.kind.event_type()
    }

    /// The event as a flat JSON object with CrewAI's attribute names: `type`, `event_id`,
    /// `parent_event_id`, `emission_sequence`, `timestamp` (RFC 3339) and the kind's own fields.
    pub fn to_json(&self) -> Value {
        let mut object = match serde_json::to_value(&self.kind) {
            Ok(Value::Object(map)) => map,
            // Every kind is a struct variant, so serde always yields an object; keep the type at least.
            _ => {
                let mut map = serde_json::Map::new();
                map.insert("type".into(), Value::String(self.type_name().into()));
                map
            }
        };
        object.insert("event_id".into(), Value::String(self.event_id.to_string()));
        object.insert(
            "parent_event_id".into(),
            self.parent_event_id
                .map(|id| Value::String(id.to_string()))
                .unwrap_or(Value::Null),
        );
        object.insert(
            "emission_sequence".into(),
            Value::from(self.emission_sequence),
        );
        object.insert(
            "timestamp".into(),
            Value::String(self.timestamp.to_rfc3339()),
        );
        Value::Object(object)
    }
}

/// The flat JSON form ([`Event::to_json`]).
impl Serialize for Event {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(serializer)
    }
}

/// An event as [`Event::to_json`] wrote it: the common fields beside the kind's own.
#[derive(Deserialize)]
struct FlatEvent {
    event_id: Uuid,
    #[serde(default)]
    parent_event_id: Option<Uuid>,
    emission_sequence: u64,
    timestamp: DateTime<Utc>,
    #[serde(flatten)]
    kind: EventKind,
}

/// Reads the flat JSON form back (a trace file's line); an unknown `type` is an error naming it.
impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let flat = FlatEvent::deserialize(deserializer)?;
        Ok(Event {
            event_id: flat.event_id,
            parent_event_id: flat.parent_event_id,
            emission_sequence: flat.emission_sequence,
            timestamp: flat.timestamp,
            kind: flat.kind,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_has_common_fields() {
        let bus = EventBus::new();
        let recorder = EventRecorder::attach(&bus);
        let parent = bus.emit(
            None,
            EventKind::CrewKickoffStarted {
                crew_name: "c".into(),
                crew_id: None,
                inputs: None,
            },
        );
        bus.emit(
            Some(parent),
            EventKind::CrewKickoffCompleted {
                crew_name: "c".into(),
                crew_id: None,
                output: "o".into(),
                total_tokens: 3,
            },
        );
        let json = recorder.events()[1].to_json();
        assert_eq!(json["type"], "crew_kickoff_completed");
        assert_eq!(json["parent_event_id"], parent.to_string());
        assert_eq!(json["crew_name"], "c");
        assert!(json["timestamp"].as_str().unwrap().contains('T'));
    }

    #[test]
    fn every_kind_of_event_reads_back_from_its_json() {
        let bus = EventBus::new();
        let recorder = EventRecorder::attach(&bus);
        let mut parent = None;
        for ty in EventType::all() {
            parent = Some(bus.emit(parent, EventKind::blank(ty)));
        }
        let events = recorder.events();
        assert_eq!(events.len(), EventType::all().count());
        for event in events {
            let line = event.to_json().to_string();
            let back: Event = serde_json::from_str(&line).unwrap();
            assert_eq!(back, event, "{line}");
            assert_eq!(serde_json::to_value(&back).unwrap(), event.to_json());
        }
    }

    #[test]
    fn a_trace_line_written_by_hand_reads_as_a_typed_event() {
        let line = r#"{"type": "task_started", "task_name": "research", "task_id": "t1", "agent_role": "Researcher", "context": null, "event_id": "00000000-0000-4000-8000-000000000002", "parent_event_id": "00000000-0000-4000-8000-000000000001", "emission_sequence": 2, "timestamp": "2026-12-01T09:00:00.010+00:00"}"#;
        let event: Event = serde_json::from_str(line).unwrap();
        assert_eq!(event.event_type(), EventType::TaskStarted);
        assert_eq!(event.kind.agent_role(), Some("Researcher"));
        assert_eq!(event.emission_sequence, 2);
        assert_eq!(
            event.parent_event_id.map(|id| id.to_string()).as_deref(),
            Some("00000000-0000-4000-8000-000000000001")
        );
        let unknown = line.replace("task_started", "task_exploded");
        let error = serde_json::from_str::<Event>(&unknown)
            .unwrap_err()
            .to_string();
        assert!(error.contains("task_exploded"), "{error}");
    }
}
