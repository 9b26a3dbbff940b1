//! Channel listeners: a bounded queue from the bus to a consumer that runs elsewhere (a thread or
//! a task of its own), for listeners whose work is I/O — a trace file, an OTLP exporter — and so
//! must never run inside an emission, which is inside the agent loop.
//!
//! Overflow policy: the bus never waits for a channel listener. When the queue is full the event
//! is dropped and counted ([`DroppedEvents`]); the first drop of a channel is logged as a warning.
//! The consumer reports the count when it finishes, so a trace that misses events says so
//! instead of looking complete. Events are shared (`Arc<Event>`), never copied, so sending one
//! costs a reference count, whatever its payload.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;

use super::{Event, ListenerId};

/// Decides which events a channel listener wants (the others are not queued at all).
pub(super) type Filter = Arc<dyn Fn(&Event) -> bool + Send + Sync>;

/// How many events a channel listener missed because its queue was full (cheap to clone; clones
/// share the count).
#[derive(Debug, Clone, Default)]
pub struct DroppedEvents(Arc<AtomicU64>);

impl DroppedEvents {
    /// The events dropped so far.
    pub fn count(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// Counts one drop; true for the channel's first.
    fn add_one(&self) -> bool {
        self.0.fetch_add(1, Ordering::Relaxed) == 0
    }
}

/// The bus's end of a channel listener.
#[derive(Clone)]
pub(super) struct ChannelSink {
    sender: mpsc::Sender<Arc<Event>>,
    filter: Option<Filter>,
    dropped: DroppedEvents,
    capacity: usize,
}

/// What became of one event offered to a channel listener.
pub(super) enum Offer {
    /// Queued, or not wanted by the filter.
    Done,
    /// The consumer is gone (it dropped its [`EventChannel`]); the listener can be removed.
    Closed,
}

impl ChannelSink {
    /// Queues `event` unless the filter declines it; a full queue drops it (counted), it never
    /// waits.
    pub(super) fn offer(&self, id: ListenerId, event: &Arc<Event>) -> Offer {
        if let Some(filter) = &self.filter
            && !filter(event)
        {
            return Offer::Done;
        }
        match self.sender.try_send(Arc::clone(event)) {
            Ok(()) => Offer::Done,
            Err(TrySendError::Full(_)) => {
                if self.dropped.add_one() {
                    tracing::warn!(
                        listener = id.0,
                        capacity = self.capacity,
                        event = event.type_name(),
                        "an event listener fell behind: its queue is full, so events are dropped \
                         (and counted) rather than holding up the run"
                    );
                }
                Offer::Done
            }
            Err(TrySendError::Closed(_)) => Offer::Closed,
        }
    }
}

/// The consumer's end of a channel listener ([`EventBus::subscribe_channel`](super::EventBus::subscribe_channel)):
/// the bus's events in emission order, through a bounded queue, for a thread or task that owns
/// the listener's I/O.
///
/// The channel ends (`recv` returns `None` once the queue is drained) when the listener is
/// removed with [`EventBus::unsubscribe`](super::EventBus::unsubscribe)
/// ([`EventChannel::listener_id`]) or when every clone of the bus is gone. Dropping the
/// `EventChannel` removes the listener at the next emission.
///
/// ```
/// use crewai_core::events::{EventBus, EventKind};
///
/// let bus = EventBus::new();
/// let mut channel = bus.subscribe_channel(16);
/// let id = channel.listener_id();
/// let worker = std::thread::spawn(move || {
///     let mut seen = Vec::new();
///     while let Some(event) = channel.blocking_recv() {
///         seen.push(event.type_name());
///     }
///     seen
/// });
/// bus.emit(None, EventKind::FlowStarted { flow_name: "f".into(), inputs: None });
/// bus.unsubscribe(id); // ends the channel: the worker drains it and stops
/// assert_eq!(worker.join().unwrap(), vec!["flow_started"]);
/// ```
pub struct EventChannel {
    id: ListenerId,
    receiver: mpsc::Receiver<Arc<Event>>,
    dropped: DroppedEvents,
}

impl std::fmt::Debug for EventChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventChannel")
            .field("id", &self.id)
            .field("queued", &self.receiver.len())
            .field("dropped", &self.dropped.count())
            .finish()
    }
}

impl EventChannel {
    /// A new channel of `capacity` events (at least one) and the bus's end of it.
    pub(super) fn new(
        id: ListenerId,
        capacity: usize,
        filter: Option<Filter>,
    ) -> (ChannelSink, EventChannel) {
        let capacity = capacity.max(1);
        let (sender, receiver) = mpsc::channel(capacity);
        let dropped = DroppedEvents::default();
        let sink = ChannelSink {
            sender,
            filter,
            dropped: dropped.clone(),
            capacity,
        };
        (
            sink,
            EventChannel {
                id,
                receiver,
                dropped,
            },
        )
    }

    /// The listener's id on the bus (for [`EventBus::unsubscribe`](super::EventBus::unsubscribe),
    /// which ends the channel).
    pub fn listener_id(&self) -> ListenerId {
        self.id
    }

    /// The count of events this channel dropped because its queue was full.
    pub fn dropped(&self) -> DroppedEvents {
        self.dropped.clone()
    }

    /// The next event; `None` once the channel ended and everything queued was received.
    pub async fn recv(&mut self) -> Option<Arc<Event>> {
        self.receiver.recv().await
    }

    /// [`EventChannel::recv`] for a thread that is not running async code (it must not be
    /// called from inside an async runtime).
    pub fn blocking_recv(&mut self) -> Option<Arc<Event>> {
        self.receiver.blocking_recv()
    }

    /// An event already queued, without waiting (`None` when the queue is empty right now, or
    /// the channel ended), for consumers that work in batches.
    pub fn try_recv(&mut self) -> Option<Arc<Event>> {
        // Empty and ended alike: the next `recv` tells them apart.
        self.receiver.try_recv().ok()
    }
}
