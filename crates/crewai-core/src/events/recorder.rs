//! [`EventRecorder`]: a listener that keeps every event.

use std::sync::{Arc, Mutex};

use super::{Event, EventBus};

/// A listener that keeps every event, for tests and for callers that want the trace afterwards.
#[derive(Clone, Default)]
pub struct EventRecorder {
    events: Arc<Mutex<Vec<Event>>>,
}

impl EventRecorder {
    /// Subscribes a new recorder to `bus`.
    pub fn attach(bus: &EventBus) -> Self {
        let recorder = EventRecorder::default();
        let sink = recorder.events.clone();
        bus.subscribe(move |event| {
            sink.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(event.clone())
        });
        recorder
    }

    /// The events recorded so far, in emission order.
    pub fn events(&self) -> Vec<Event> {
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The type names recorded so far, in emission order.
    pub fn type_names(&self) -> Vec<&'static str> {
        self.events().iter().map(Event::type_name).collect()
    }

    /// The recorded events of one type.
    pub fn of_type(&self, type_name: &str) -> Vec<Event> {
        self.events()
            .into_iter()
            .filter(|e| e.type_name() == type_name)
            .collect()
    }
}
