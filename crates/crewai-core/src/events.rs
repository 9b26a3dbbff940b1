//! The typed event bus.
//!
//! An [`EventBus`] is a value: a crew owns one (or is given one), a standalone agent run gets one,
//! and nothing is global, so two crews in one process never see each other's events. Listeners are
//! plain closures registered with [`EventBus::subscribe`]; the verbose console output is one of them
//! ([`ConsoleListener`]).
//!
//! Every [`Event`] carries its id, its parent's id (crew kickoff → task → agent execution → LLM or
//! tool call), a per-bus emission sequence number and a UTC timestamp. [`Event::type_name`] and
//! [`Event::to_json`] use CrewAI's type strings and attribute names.
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

mod panics;

use std::collections::{BTreeMap, VecDeque};
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use chrono::{DateTime, Utc};
use crewai_llm::Usage;
use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

pub use panics::{CaughtPanic, PanicSite, panic_message};

/// What happened. Variant names map to CrewAI's event `type` strings (`CrewKickoffStarted` →
/// `crew_kickoff_started`); fields carry CrewAI's attribute names.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum EventKind {
    CrewKickoffStarted {
        crew_name: String,
        crew_id: Option<String>,
        inputs: Option<Value>,
    },
    CrewKickoffCompleted {
        crew_name: String,
        crew_id: Option<String>,
        output: String,
        total_tokens: u64,
    },
    CrewKickoffFailed {
        crew_name: String,
        crew_id: Option<String>,
        error: String,
    },

    TaskStarted {
        task_name: Option<String>,
        task_id: Option<String>,
        agent_role: Option<String>,
        context: Option<String>,
    },
    TaskCompleted {
        task_name: Option<String>,
        task_id: Option<String>,
        agent_role: Option<String>,
        output: String,
    },
    TaskFailed {
        task_name: Option<String>,
        task_id: Option<String>,
        agent_role: Option<String>,
        error: String,
    },

    /// An agent starts working on a task; `task_prompt` is the task text without the user-message
    /// wrapper, `tools` the names of the tools it may use.
    AgentExecutionStarted {
        agent_role: String,
        agent_id: String,
        task_name: Option<String>,
        task_prompt: String,
        tools: Vec<String>,
    },
    AgentExecutionCompleted {
        agent_role: String,
        agent_id: String,
        task_name: Option<String>,
        output: String,
    },
    AgentExecutionError {
        agent_role: String,
        agent_id: String,
        task_name: Option<String>,
        error: String,
    },

    /// `Agent::kickoff` (CrewAI's LiteAgent) starts.
    LiteAgentExecutionStarted {
        agent_role: String,
        agent_id: String,
        tools: Vec<String>,
        messages: Value,
    },
    LiteAgentExecutionCompleted {
        agent_role: String,
        agent_id: String,
        output: String,
    },
    LiteAgentExecutionError {
        agent_role: String,
        agent_id: String,
        error: String,
    },

    /// A model call starts; `messages` is the request's conversation as JSON.
    LlmCallStarted {
        call_id: String,
        model: String,
        agent_role: Option<String>,
        task_name: Option<String>,
        messages: Value,
        tools: Vec<String>,
    },
    LlmCallCompleted {
        call_id: String,
        model: String,
        agent_role: Option<String>,
        task_name: Option<String>,
        response: Value,
        usage: Usage,
    },
    LlmCallFailed {
        call_id: String,
        model: String,
        agent_role: Option<String>,
        task_name: Option<String>,
        error: String,
    },
    /// A model call is held back by the requests-per-minute limit (the agent's `max_rpm`, the
    /// crew's, or a shared limiter) and waits `wait_ms` before it is sent.
    RateLimitWaitStarted {
        agent_role: String,
        task_name: Option<String>,
        max_rpm: Option<u32>,
        wait_ms: u64,
    },
    /// A piece of streamed reply text.
    LlmStreamChunk {
        call_id: String,
        agent_role: Option<String>,
        task_name: Option<String>,
        chunk: String,
    },

    ToolUsageStarted {
        tool_name: String,
        tool_args: Value,
        agent_role: Option<String>,
        task_name: Option<String>,
    },
    ToolUsageFinished {
        tool_name: String,
        tool_args: Value,
        agent_role: Option<String>,
        task_name: Option<String>,
        output: String,
        from_cache: bool,
    },
    ToolUsageError {
        tool_name: String,
        tool_args: Value,
        agent_role: Option<String>,
        task_name: Option<String>,
        error: String,
    },

    /// A guardrail check starts; `guardrail` is the description of an LLM guardrail or the name of a
    /// function guardrail; `retry_count` counts the retries before this check.
    LlmGuardrailStarted {
        guardrail: String,
        retry_count: u32,
        agent_role: Option<String>,
        task_name: Option<String>,
    },
    /// `result` is the (possibly replaced) output when it passed, `error` the feedback when not.
    LlmGuardrailCompleted {
        success: bool,
        result: Option<Value>,
        error: Option<String>,
        retry_count: u32,
        agent_role: Option<String>,
        task_name: Option<String>,
    },

    /// An agent hands work to (or asks) a coworker; `kind` is `delegate` or `ask`.
    AgentDelegationStarted {
        from_agent: String,
        to_agent: String,
        kind: String,
        task: String,
    },
    AgentDelegationCompleted {
        from_agent: String,
        to_agent: String,
        kind: String,
        output: String,
    },

    // Reserved for the flow engine, with CrewAI's names.
    FlowStarted {
        flow_name: String,
        inputs: Option<Value>,
    },
    FlowFinished {
        flow_name: String,
        result: Option<Value>,
    },
    MethodExecutionStarted {
        flow_name: String,
        method_name: String,
    },
    MethodExecutionFinished {
        flow_name: String,
        method_name: String,
        result: Option<Value>,
    },
    MethodExecutionFailed {
        flow_name: String,
        method_name: String,
        error: String,
    },

    /// A panic was caught at `site` (not a CrewAI event: CrewAI has no panics to catch). `name`
    /// says what panicked (the tool's or guardrail's name, the hook's kind, the task's key, the
    /// flow method's name); `message` is the panic's text. The run went on or failed with a typed
    /// error; either way the bus counted it ([`EventBus::caught_panics`]).
    PanicCaught {
        site: PanicSite,
        name: String,
        message: String,
        agent_role: Option<String>,
        task_name: Option<String>,
    },
}

impl EventKind {
    /// CrewAI's `type` string for this kind of event.
    pub fn type_name(&self) -> &'static str {
        match self {
            EventKind::CrewKickoffStarted { .. } => "crew_kickoff_started",
            EventKind::CrewKickoffCompleted { .. } => "crew_kickoff_completed",
            EventKind::CrewKickoffFailed { .. } => "crew_kickoff_failed",
            EventKind::TaskStarted { .. } => "task_started",
            EventKind::TaskCompleted { .. } => "task_completed",
            EventKind::TaskFailed { .. } => "task_failed",
            EventKind::AgentExecutionStarted { .. } => "agent_execution_started",
            EventKind::AgentExecutionCompleted { .. } => "agent_execution_completed",
            EventKind::AgentExecutionError { .. } => "agent_execution_error",
            EventKind::LiteAgentExecutionStarted { .. } => "lite_agent_execution_started",
            EventKind::LiteAgentExecutionCompleted { .. } => "lite_agent_execution_completed",
            EventKind::LiteAgentExecutionError { .. } => "lite_agent_execution_error",
            EventKind::LlmCallStarted { .. } => "llm_call_started",
            EventKind::LlmCallCompleted { .. } => "llm_call_completed",
            EventKind::LlmCallFailed { .. } => "llm_call_failed",
            EventKind::LlmStreamChunk { .. } => "llm_stream_chunk",
            EventKind::RateLimitWaitStarted { .. } => "rate_limit_wait_started",
            EventKind::ToolUsageStarted { .. } => "tool_usage_started",
            EventKind::ToolUsageFinished { .. } => "tool_usage_finished",
            EventKind::ToolUsageError { .. } => "tool_usage_error",
            EventKind::LlmGuardrailStarted { .. } => "llm_guardrail_started",
            EventKind::LlmGuardrailCompleted { .. } => "llm_guardrail_completed",
            EventKind::AgentDelegationStarted { .. } => "agent_delegation_started",
            EventKind::AgentDelegationCompleted { .. } => "agent_delegation_completed",
            EventKind::FlowStarted { .. } => "flow_started",
            EventKind::FlowFinished { .. } => "flow_finished",
            EventKind::MethodExecutionStarted { .. } => "method_execution_started",
            EventKind::MethodExecutionFinished { .. } => "method_execution_finished",
            EventKind::MethodExecutionFailed { .. } => "method_execution_failed",
            EventKind::PanicCaught { .. } => "panic_caught",
        }
    }
}

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

/// Identifies a listener, for [`EventBus::unsubscribe`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ListenerId(u64);

type Listener = Arc<dyn Fn(&Event) + Send + Sync>;

#[derive(Default)]
struct BusInner {
    listeners: RwLock<Vec<(ListenerId, Listener)>>,
    sequence: AtomicU64,
    next_listener: AtomicU64,
    /// Caught panics per site (indexed by [`PanicSite::index`]).
    panics: [AtomicU64; PanicSite::ALL.len()],
}

/// A bus of typed events (cheap to clone; clones share listeners, the sequence counter and the
/// caught-panic counts).
#[derive(Clone, Default)]
pub struct EventBus {
    inner: Arc<BusInner>,
}

impl std::fmt::Debug for EventBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventBus")
            .field("listeners", &self.listener_count())
            .finish()
    }
}

impl EventBus {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a listener; it is called synchronously, in emission order, for every event.
    pub fn subscribe(&self, listener: impl Fn(&Event) + Send + Sync + 'static) -> ListenerId {
        let id = ListenerId(self.inner.next_listener.fetch_add(1, Ordering::Relaxed));
        self.inner
            .listeners
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push((id, Arc::new(listener)));
        id
    }

    /// Removes a listener; returns whether it was registered.
    pub fn unsubscribe(&self, id: ListenerId) -> bool {
        let mut listeners = self
            .inner
            .listeners
            .write()
            .unwrap_or_else(|p| p.into_inner());
        let before = listeners.len();
        listeners.retain(|(listener_id, _)| *listener_id != id);
        listeners.len() != before
    }

    pub fn listener_count(&self) -> usize {
        self.inner
            .listeners
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }

    /// Emits an event under `parent` and returns its id (the parent of the events it causes).
    ///
    /// A listener that panics is skipped for that event and counted as a caught panic; the other
    /// listeners get a `panic_caught` event about it, and the run goes on.
    pub fn emit(&self, parent: Option<Uuid>, kind: EventKind) -> Uuid {
        self.emit_with(parent, || kind)
    }

    /// Like [`EventBus::emit`], but builds the event's payload only when a listener will see
    /// it: for events whose payload is costly (a call's whole conversation as JSON) on the hot
    /// path of runs nobody observes. The event still gets its id and sequence number, so ids
    /// used as parents and the numbering of later events do not depend on who listens.
    ///
    /// ```
    /// use crewai_core::events::{EventBus, EventKind, EventRecorder};
    ///
    /// let bus = EventBus::new();
    /// let quiet = bus.emit_with(None, || unreachable!("no listener, so no payload"));
    /// let recorder = EventRecorder::attach(&bus);
    /// let heard = bus.emit_with(None, || EventKind::FlowStarted { flow_name: "f".into(), inputs: None });
    /// assert_ne!(quiet, heard);
    /// assert_eq!(recorder.events()[0].emission_sequence, 2);
    /// ```
    pub fn emit_with(&self, parent: Option<Uuid>, kind: impl FnOnce() -> EventKind) -> Uuid {
        let emission_sequence = self.next_sequence();
        // Listeners are cloned out so one may subscribe or emit from inside a callback without deadlocking.
        let listeners: Vec<(ListenerId, Listener)> = {
            let registered = self
                .inner
                .listeners
                .read()
                .unwrap_or_else(|p| p.into_inner());
            if registered.is_empty() {
                return Uuid::new_v4();
            }
            registered.clone()
        };
        let event = Event {
            event_id: Uuid::new_v4(),
            parent_event_id: parent,
            emission_sequence,
            timestamp: Utc::now(),
            kind: kind(),
        };
        let event_id = event.event_id;
        self.deliver(event, &listeners);
        event_id
    }

    /// Calls each listener with `first`. A listener that panics is counted (site `listener`) and
    /// the others hear of it as a `panic_caught` event under the event it panicked on; no
    /// listener that panicked during this emission is called again for it, so a listener that
    /// panics on every event (the notices included) cannot recurse: each notice needs a listener
    /// that has not panicked yet, and there are finitely many.
    fn deliver(&self, first: Event, listeners: &[(ListenerId, Listener)]) {
        let mut panicked: Vec<ListenerId> = Vec::new();
        let mut queue = VecDeque::from([first]);
        while let Some(event) = queue.pop_front() {
            for (id, listener) in listeners {
                if panicked.contains(id) {
                    continue;
                }
                let Err(payload) =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| listener(&event)))
                else {
                    continue;
                };
                panicked.push(*id);
                let panic = CaughtPanic::new(
                    PanicSite::Listener,
                    format!("listener {} on {}", id.0, event.type_name()),
                    panic_message(payload.as_ref()),
                );
                self.count_panic(&panic);
                queue.push_back(Event {
                    event_id: Uuid::new_v4(),
                    parent_event_id: Some(event.event_id),
                    emission_sequence: self.next_sequence(),
                    timestamp: Utc::now(),
                    kind: panic.into(),
                });
            }
        }
    }

    fn next_sequence(&self) -> u64 {
        self.inner.sequence.fetch_add(1, Ordering::SeqCst) + 1
    }

    fn count_panic(&self, panic: &CaughtPanic) {
        self.inner.panics[panic.site.index()].fetch_add(1, Ordering::SeqCst);
        tracing::warn!(
            site = panic.site.name(),
            name = %panic.name,
            message = %panic.message,
            "a panic was caught; the run goes on without that step"
        );
    }

    /// Counts a panic caught at `panic.site` and emits it as a `panic_caught` event under
    /// `parent`. The count is kept even when nobody listens.
    ///
    /// ```
    /// use crewai_core::events::{CaughtPanic, EventBus, EventRecorder, PanicSite};
    ///
    /// let bus = EventBus::new();
    /// bus.report_panic(None, CaughtPanic::new(PanicSite::Tool, "word_count", "index out of bounds"));
    /// let recorder = EventRecorder::attach(&bus);
    /// bus.report_panic(None, CaughtPanic::new(PanicSite::Guardrail, "sign_off", "oops"));
    /// assert_eq!(bus.caught_panics(), 2);
    /// assert_eq!(bus.caught_panics_at(PanicSite::Tool), 1);
    /// let heard = recorder.of_type("panic_caught");
    /// assert_eq!(heard.len(), 1);
    /// assert_eq!(heard[0].to_json()["site"], "guardrail");
    /// assert_eq!(heard[0].to_json()["message"], "oops");
    /// ```
    pub fn report_panic(&self, parent: Option<Uuid>, panic: CaughtPanic) -> Uuid {
        self.count_panic(&panic);
        self.emit(parent, panic.into())
    }

    /// Panics caught on this bus so far, at every site.
    pub fn caught_panics(&self) -> u64 {
        self.inner
            .panics
            .iter()
            .map(|count| count.load(Ordering::SeqCst))
            .sum()
    }

    /// Panics caught on this bus so far at one site.
    pub fn caught_panics_at(&self, site: PanicSite) -> u64 {
        self.inner.panics[site.index()].load(Ordering::SeqCst)
    }

    /// The sites where panics were caught, with their counts (sites without any left out).
    pub fn caught_panics_by_site(&self) -> BTreeMap<PanicSite, u64> {
        PanicSite::ALL
            .into_iter()
            .map(|site| (site, self.caught_panics_at(site)))
            .filter(|(_, count)| *count > 0)
            .collect()
    }
}

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

/// The verbose console output, as a listener: one readable block per crew, task, agent, tool and
/// guardrail event (LLM call events are left out as noise).
///
/// ```
/// use crewai_core::events::{ConsoleListener, EventBus, EventKind};
/// let bus = EventBus::new();
/// ConsoleListener::stderr().attach(&bus);
/// bus.emit(None, EventKind::CrewKickoffStarted { crew_name: "demo".into(), crew_id: None, inputs: None });
/// ```
pub struct ConsoleListener {
    out: Mutex<Box<dyn Write + Send>>,
}

impl ConsoleListener {
    /// Writes to standard output (where CrewAI's verbose output goes).
    pub fn stdout() -> Self {
        Self::with_writer(Box::new(std::io::stdout()))
    }

    /// Writes to standard error (keeps stdout clean for machine-readable output).
    pub fn stderr() -> Self {
        Self::with_writer(Box::new(std::io::stderr()))
    }

    pub fn with_writer(out: Box<dyn Write + Send>) -> Self {
        ConsoleListener {
            out: Mutex::new(out),
        }
    }

    /// Subscribes this listener to `bus`.
    pub fn attach(self, bus: &EventBus) -> ListenerId {
        bus.subscribe(move |event| {
            if let Some(text) = console_line(event) {
                let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
                // The console is best effort: a closed pipe must not fail the run.
                let _ = writeln!(out, "{text}");
                let _ = out.flush();
            }
        })
    }
}

fn console_line(event: &Event) -> Option<String> {
    let optional = |value: &Option<String>| value.clone().unwrap_or_else(|| "-".into());
    let text = match &event.kind {
        EventKind::CrewKickoffStarted { crew_name, .. } => format!("🚀 Crew '{crew_name}' started"),
        EventKind::CrewKickoffCompleted {
            crew_name,
            output,
            total_tokens,
            ..
        } => {
            format!(
                "✅ Crew '{crew_name}' completed ({total_tokens} tokens)\nFinal output:\n{output}"
            )
        }
        EventKind::CrewKickoffFailed {
            crew_name, error, ..
        } => format!("❌ Crew '{crew_name}' failed: {error}"),
        EventKind::TaskStarted {
            task_name,
            agent_role,
            ..
        } => format!(
            "📋 Task '{}' started (agent: {})",
            optional(task_name),
            optional(agent_role)
        ),
        EventKind::TaskCompleted { task_name, .. } => {
            format!("📋 Task '{}' completed", optional(task_name))
        }
        EventKind::TaskFailed {
            task_name, error, ..
        } => format!("❌ Task '{}' failed: {error}", optional(task_name)),
        EventKind::AgentExecutionStarted {
            agent_role,
            task_prompt,
            ..
        } => format!("🤖 Agent: {agent_role}\n   Task: {task_prompt}"),
        EventKind::AgentExecutionCompleted {
            agent_role, output, ..
        } => format!("🤖 Agent: {agent_role}\n   Final Answer:\n{output}"),
        EventKind::AgentExecutionError {
            agent_role, error, ..
        } => format!("⚠️  Agent {agent_role} failed: {error}"),
        EventKind::LiteAgentExecutionStarted { agent_role, .. } => {
            format!("🤖 Agent {agent_role} started")
        }
        EventKind::LiteAgentExecutionCompleted {
            agent_role, output, ..
        } => format!("🤖 Agent: {agent_role}\n   Final Answer:\n{output}"),
        EventKind::LiteAgentExecutionError {
            agent_role, error, ..
        } => format!("⚠️  Agent {agent_role} failed: {error}"),
        EventKind::ToolUsageStarted {
            tool_name,
            tool_args,
            ..
        } => format!("🔧 Using tool {tool_name} with {tool_args}"),
        EventKind::ToolUsageFinished {
            tool_name,
            output,
            from_cache,
            ..
        } => {
            format!(
                "🔧 Tool {tool_name}{} returned:\n{output}",
                if *from_cache { " (cached)" } else { "" }
            )
        }
        EventKind::ToolUsageError {
            tool_name, error, ..
        } => format!("🔧 Tool {tool_name} failed: {error}"),
        EventKind::LlmGuardrailStarted {
            guardrail,
            retry_count,
            ..
        } => format!("🛡️  Guardrail '{guardrail}' checking (retry {retry_count})"),
        EventKind::LlmGuardrailCompleted { success, error, .. } => {
            if *success {
                "🛡️  Guardrail passed".to_string()
            } else {
                format!("🛡️  Guardrail failed: {}", optional(error))
            }
        }
        EventKind::AgentDelegationStarted {
            from_agent,
            to_agent,
            kind,
            ..
        } => format!("🤝 {from_agent} -> {to_agent} ({kind})"),
        EventKind::FlowStarted { flow_name, .. } => format!("🌊 Flow '{flow_name}' started"),
        EventKind::FlowFinished { flow_name, .. } => format!("🌊 Flow '{flow_name}' finished"),
        EventKind::MethodExecutionFailed {
            flow_name,
            method_name,
            error,
        } => format!("❌ Flow '{flow_name}' method '{method_name}' failed: {error}"),
        EventKind::PanicCaught {
            site,
            name,
            message,
            ..
        } => format!("💥 {site} '{name}' panicked (caught): {message}"),
        _ => return None,
    };
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_names_match_serde_tags() {
        let kinds = vec![
            EventKind::CrewKickoffFailed {
                crew_name: "c".into(),
                crew_id: None,
                error: "e".into(),
            },
            EventKind::LlmGuardrailCompleted {
                success: true,
                result: None,
                error: None,
                retry_count: 0,
                agent_role: None,
                task_name: None,
            },
            EventKind::LiteAgentExecutionError {
                agent_role: "a".into(),
                agent_id: "1".into(),
                error: "e".into(),
            },
            EventKind::ToolUsageError {
                tool_name: "t".into(),
                tool_args: Value::Null,
                agent_role: None,
                task_name: None,
                error: "e".into(),
            },
            EventKind::MethodExecutionFinished {
                flow_name: "f".into(),
                method_name: "m".into(),
                result: None,
            },
            EventKind::PanicCaught {
                site: PanicSite::Tool,
                name: "t".into(),
                message: "m".into(),
                agent_role: None,
                task_name: None,
            },
        ];
        for kind in kinds {
            let json = serde_json::to_value(&kind).unwrap();
            assert_eq!(json["type"], kind.type_name());
        }
    }

    #[test]
    fn buses_are_isolated_and_sequence_counts_up() {
        let first = EventBus::new();
        let second = EventBus::new();
        let seen_first = EventRecorder::attach(&first);
        let seen_second = EventRecorder::attach(&second);
        first.emit(
            None,
            EventKind::FlowStarted {
                flow_name: "a".into(),
                inputs: None,
            },
        );
        first.emit(
            None,
            EventKind::FlowFinished {
                flow_name: "a".into(),
                result: None,
            },
        );
        assert_eq!(
            seen_first
                .events()
                .iter()
                .map(|e| e.emission_sequence)
                .collect::<Vec<_>>(),
            vec![1, 2]
        );
        assert!(seen_second.events().is_empty());
    }

    #[test]
    fn a_panicking_listener_does_not_stop_others() {
        let bus = EventBus::new();
        bus.subscribe(|_| panic!("listener bug"));
        let recorder = EventRecorder::attach(&bus);
        bus.emit(
            None,
            EventKind::FlowStarted {
                flow_name: "a".into(),
                inputs: None,
            },
        );
        // The event itself, then the notice of the listener's panic.
        assert_eq!(recorder.type_names(), vec!["flow_started", "panic_caught"]);
        assert_eq!(bus.caught_panics(), 1);
    }

    #[test]
    fn unsubscribe_stops_delivery() {
        let bus = EventBus::new();
        let count = Arc::new(AtomicU64::new(0));
        let counter = count.clone();
        let id = bus.subscribe(move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
        });
        bus.emit(
            None,
            EventKind::FlowStarted {
                flow_name: "a".into(),
                inputs: None,
            },
        );
        assert!(bus.unsubscribe(id));
        bus.emit(
            None,
            EventKind::FlowStarted {
                flow_name: "a".into(),
                inputs: None,
            },
        );
        assert_eq!(count.load(Ordering::SeqCst), 1);
    }

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
}
