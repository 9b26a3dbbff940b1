//! Caught panics: where they were caught ([`PanicSite`]), what the bus is told ([`CaughtPanic`]),
//! and the text of a panic payload ([`panic_message`]).

use std::fmt;

use serde::{Deserialize, Serialize};

use super::EventKind;

/// Where the engine caught a panic: each site is code the engine runs but does not own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum PanicSite {
    /// A tool's run (a `#[tool]` function on the blocking pool, or an async tool).
    Tool,
    /// A function guardrail.
    Guardrail,
    /// An event listener.
    Listener,
    /// A before- or after-call hook (LLM or tool).
    Hook,
    /// An agent's or crew's step callback.
    StepCallback,
    /// A task's or crew's task callback.
    TaskCallback,
    /// An async task of a crew (a panic nothing inside the task caught, such as one in a
    /// custom model client).
    AsyncTask,
    /// The spawned task behind `Crew::kickoff_stream`.
    Kickoff,
    /// A flow method.
    FlowMethod,
}

impl PanicSite {
    /// Every site, in report order.
    pub const ALL: [PanicSite; 9] = [
        PanicSite::Tool,
        PanicSite::Guardrail,
        PanicSite::Listener,
        PanicSite::Hook,
        PanicSite::StepCallback,
        PanicSite::TaskCallback,
        PanicSite::AsyncTask,
        PanicSite::Kickoff,
        PanicSite::FlowMethod,
    ];

    /// The snake_case name (the `site` field of `panic_caught`).
    pub fn name(self) -> &'static str {
        match self {
            PanicSite::Tool => "tool",
            PanicSite::Guardrail => "guardrail",
            PanicSite::Listener => "listener",
            PanicSite::Hook => "hook",
            PanicSite::StepCallback => "step_callback",
            PanicSite::TaskCallback => "task_callback",
            PanicSite::AsyncTask => "async_task",
            PanicSite::Kickoff => "kickoff",
            PanicSite::FlowMethod => "flow_method",
        }
    }

    /// The site's slot in the bus's counters (its position in [`PanicSite::ALL`]).
    pub(crate) fn index(self) -> usize {
        // ALL lists the variants in declaration order, so the discriminant is the position.
        self as usize
    }
}

impl fmt::Display for PanicSite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One caught panic, as reported to [`super::EventBus::report_panic`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaughtPanic {
    pub site: PanicSite,
    /// What panicked: the tool's or guardrail's name, the hook's kind, the task's key...
    pub name: String,
    /// The panic's text (its payload, when that is a string).
    pub message: String,
    pub agent_role: Option<String>,
    pub task_name: Option<String>,
}

impl CaughtPanic {
    pub fn new(site: PanicSite, name: impl Into<String>, message: impl Into<String>) -> Self {
        CaughtPanic {
            site,
            name: name.into(),
            message: message.into(),
            agent_role: None,
            task_name: None,
        }
    }

    /// The same panic, with the agent and task it happened in.
    pub fn in_task(mut self, agent_role: Option<&str>, task_name: Option<&str>) -> Self {
        self.agent_role = agent_role.map(str::to_string);
        self.task_name = task_name.map(str::to_string);
        self
    }
}

impl From<CaughtPanic> for EventKind {
    fn from(panic: CaughtPanic) -> Self {
        EventKind::PanicCaught {
            site: panic.site,
            name: panic.name,
            message: panic.message,
            agent_role: panic.agent_role,
            task_name: panic.task_name,
        }
    }
}

pub use crewai_tools::panic_message;

#[cfg(test)]
mod tests {
    use super::super::{EventBus, EventKind, EventRecorder};
    use super::*;

    fn flow_started() -> EventKind {
        EventKind::FlowStarted {
            flow_name: "f".into(),
            inputs: None,
        }
    }

    #[test]
    fn sites_index_their_own_slot_and_serialise_by_name() {
        for (position, site) in PanicSite::ALL.into_iter().enumerate() {
            assert_eq!(site.index(), position);
            assert_eq!(serde_json::to_value(site).unwrap(), site.name());
            assert_eq!(
                serde_json::from_value::<PanicSite>(site.name().into()).unwrap(),
                site
            );
        }
    }

    #[test]
    fn a_panic_is_counted_with_nobody_listening() {
        let bus = EventBus::new();
        bus.report_panic(
            None,
            CaughtPanic::new(PanicSite::Hook, "before_tool_call", "x"),
        );
        bus.report_panic(
            None,
            CaughtPanic::new(PanicSite::Hook, "after_llm_call", "y"),
        );
        assert_eq!(bus.caught_panics(), 2);
        assert_eq!(bus.caught_panics_at(PanicSite::Hook), 2);
        assert_eq!(bus.caught_panics_at(PanicSite::Tool), 0);
        assert_eq!(
            bus.caught_panics_by_site().into_iter().collect::<Vec<_>>(),
            vec![(PanicSite::Hook, 2)]
        );
    }

    #[test]
    fn clones_share_the_count() {
        let bus = EventBus::new();
        let clone = bus.clone();
        clone.report_panic(None, CaughtPanic::new(PanicSite::Tool, "t", "m"));
        assert_eq!(bus.caught_panics(), 1);
        assert_eq!(EventBus::new().caught_panics(), 0);
    }

    #[test]
    fn a_panicking_listener_is_counted_and_the_others_hear_of_it() {
        let bus = EventBus::new();
        let recorder = EventRecorder::attach(&bus);
        bus.subscribe(|_| panic!("listener bug"));
        let started = bus.emit(None, flow_started());
        assert_eq!(bus.caught_panics_at(PanicSite::Listener), 1);
        let events = recorder.events();
        assert_eq!(events.len(), 2, "{events:?}");
        assert_eq!(events[1].parent_event_id, Some(started));
        let EventKind::PanicCaught {
            site,
            name,
            message,
            ..
        } = &events[1].kind
        else {
            panic!("expected a panic_caught event, got {:?}", events[1]);
        };
        assert_eq!(*site, PanicSite::Listener);
        assert!(name.ends_with("on flow_started"), "{name}");
        assert_eq!(message, "listener bug");
        assert!(events[0].emission_sequence < events[1].emission_sequence);
    }

    #[test]
    fn listeners_that_panic_on_everything_do_not_recurse() {
        let bus = EventBus::new();
        bus.subscribe(|_| panic!("first"));
        bus.subscribe(|_| panic!("second"));
        let recorder = EventRecorder::attach(&bus);
        bus.emit(None, flow_started());
        // Both panicked once, on the event itself; each notice reached only the recorder.
        assert_eq!(bus.caught_panics(), 2);
        assert_eq!(
            recorder.type_names(),
            vec!["flow_started", "panic_caught", "panic_caught"]
        );
        // The next event is delivered (and counted) again: skipping lasts one emission.
        bus.emit(None, flow_started());
        assert_eq!(bus.caught_panics(), 4);
    }

    #[test]
    fn a_listener_that_panics_on_the_notice_is_counted_too() {
        let bus = EventBus::new();
        bus.subscribe(|event| {
            if event.type_name() == "panic_caught" {
                panic!("cannot handle panics");
            }
        });
        let recorder = EventRecorder::attach(&bus);
        bus.report_panic(None, CaughtPanic::new(PanicSite::Tool, "t", "m"));
        assert_eq!(bus.caught_panics_at(PanicSite::Tool), 1);
        assert_eq!(bus.caught_panics_at(PanicSite::Listener), 1);
        let sites: Vec<_> = recorder
            .of_type("panic_caught")
            .iter()
            .map(|e| e.to_json()["site"].clone())
            .collect();
        assert_eq!(sites, vec!["tool", "listener"]);
    }

    #[test]
    fn non_text_payloads_have_a_fixed_message() {
        let payload = std::panic::catch_unwind(|| std::panic::panic_any(7_u8)).unwrap_err();
        assert_eq!(
            panic_message(payload.as_ref()),
            "a panic without a text payload"
        );
    }
}
