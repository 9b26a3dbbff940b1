//! [`EventBus`]: listeners, emission and delivery, and the caught-panic counts.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use chrono::Utc;
use uuid::Uuid;

use super::channel::{ChannelSink, EventChannel, Offer};
use super::{CaughtPanic, Event, EventKind, PanicSite, panic_message};

/// Identifies a listener, for [`EventBus::unsubscribe`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ListenerId(pub(super) u64);

/// Where the bus sends an event.
#[derive(Clone)]
enum Sink {
    /// A closure called inside the emission ([`EventBus::subscribe`]).
    Call(Arc<dyn Fn(&Event) + Send + Sync>),
    /// A bounded queue to a consumer elsewhere ([`EventBus::subscribe_channel`]).
    Channel(ChannelSink),
}

/// The registered listeners. The list is replaced on (un)subscribe, never changed in place, so an
/// emission takes it by cloning the `Arc`: no lock is held while listeners run (one may
/// subscribe or emit from inside a callback) and nothing is allocated for it.
type Listeners = Arc<Vec<(ListenerId, Sink)>>;

#[derive(Default)]
struct BusInner {
    listeners: RwLock<Listeners>,
    sequence: AtomicU64,
    next_listener: AtomicU64,
    /// Caught panics per site (indexed by [`PanicSite::index`]).
    panics: [AtomicU64; PanicSite::ALL.len()],
}

/// A bus of typed events (cheap to clone; clones share listeners, the sequence counter and the
/// caught-panic counts).
///
/// Two kinds of listeners: [`EventBus::subscribe`] takes a closure that runs inside each
/// emission, in the emitting task — for cheap in-process work (recording, counting, a console
/// line); [`EventBus::subscribe_channel`] gives a bounded queue to a consumer that runs on its
/// own thread or task — for anything that does I/O, which must not hold up the agent loop.
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
    /// It runs inside the emitting code (the agent loop): keep it cheap, and give anything that
    /// writes files or talks to the network a [`EventBus::subscribe_channel`] instead.
    pub fn subscribe(&self, listener: impl Fn(&Event) + Send + Sync + 'static) -> ListenerId {
        let id = self.next_listener_id();
        self.add(id, Sink::Call(Arc::new(listener)));
        id
    }

    /// Registers a channel listener: every event goes into a bounded queue of `capacity` events
    /// (at least one) that the returned [`EventChannel`] reads from another thread or task. The
    /// bus never waits for it: when the queue is full, the event is dropped and counted
    /// ([`EventChannel::dropped`]).
    pub fn subscribe_channel(&self, capacity: usize) -> EventChannel {
        self.channel(capacity, None)
    }

    /// [`EventBus::subscribe_channel`] for the events `wanted` accepts (it runs inside the
    /// emission, so it should only look at the event); the others are not queued and take no
    /// room.
    ///
    /// ```
    /// use crewai_core::events::{EventBus, EventKind};
    ///
    /// let bus = EventBus::new();
    /// let mut flows = bus.subscribe_channel_filtered(8, |e| matches!(e.kind, EventKind::FlowStarted { .. }));
    /// bus.emit(None, EventKind::MethodExecutionStarted { flow_name: "f".into(), method_name: "m".into() });
    /// bus.emit(None, EventKind::FlowStarted { flow_name: "f".into(), inputs: None });
    /// assert_eq!(flows.try_recv().map(|e| e.type_name()), Some("flow_started"));
    /// assert!(flows.try_recv().is_none());
    /// ```
    pub fn subscribe_channel_filtered(
        &self,
        capacity: usize,
        wanted: impl Fn(&Event) -> bool + Send + Sync + 'static,
    ) -> EventChannel {
        self.channel(capacity, Some(Arc::new(wanted)))
    }

    fn channel(&self, capacity: usize, filter: Option<super::channel::Filter>) -> EventChannel {
        let id = self.next_listener_id();
        let (sink, channel) = EventChannel::new(id, capacity, filter);
        self.add(id, Sink::Channel(sink));
        channel
    }

    fn next_listener_id(&self) -> ListenerId {
        ListenerId(self.inner.next_listener.fetch_add(1, Ordering::Relaxed))
    }

    fn add(&self, id: ListenerId, sink: Sink) {
        let mut listeners = self
            .inner
            .listeners
            .write()
            .unwrap_or_else(|p| p.into_inner());
        let mut next = Vec::with_capacity(listeners.len() + 1);
        next.extend(listeners.iter().cloned());
        next.push((id, sink));
        *listeners = Arc::new(next);
    }

    /// Removes a listener; returns whether it was registered. A channel listener's channel ends
    /// once the emissions in flight are done with it.
    pub fn unsubscribe(&self, id: ListenerId) -> bool {
        let mut listeners = self
            .inner
            .listeners
            .write()
            .unwrap_or_else(|p| p.into_inner());
        if !listeners.iter().any(|(listener, _)| *listener == id) {
            return false;
        }
        let next: Vec<(ListenerId, Sink)> = listeners
            .iter()
            .filter(|(listener, _)| *listener != id)
            .cloned()
            .collect();
        *listeners = Arc::new(next);
        true
    }

    pub fn listener_count(&self) -> usize {
        self.snapshot().len()
    }

    fn snapshot(&self) -> Listeners {
        Arc::clone(
            &self
                .inner
                .listeners
                .read()
                .unwrap_or_else(|p| p.into_inner()),
        )
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
        // Checked under the lock before the list is shared: an emission nobody hears costs the
        // sequence number, a read lock and an id, and builds nothing.
        let listeners = {
            let registered = self
                .inner
                .listeners
                .read()
                .unwrap_or_else(|p| p.into_inner());
            if registered.is_empty() {
                return Uuid::new_v4();
            }
            Arc::clone(&registered)
        };
        let event = Arc::new(Event {
            event_id: Uuid::new_v4(),
            parent_event_id: parent,
            emission_sequence,
            timestamp: Utc::now(),
            kind: kind(),
        });
        let event_id = event.event_id;
        self.deliver(event, &listeners);
        event_id
    }

    /// Gives `first` to each listener. A listener that panics is counted (site `listener`) and
    /// the others hear of it as a `panic_caught` event under the event it panicked on; no
    /// listener that panicked during this emission is called again for it, so a listener that
    /// panics on every event (the notices included) cannot recurse: each notice needs a listener
    /// that has not panicked yet, and there are finitely many. A channel listener whose consumer
    /// is gone is removed.
    fn deliver(&self, first: Arc<Event>, listeners: &[(ListenerId, Sink)]) {
        // Both stay unallocated unless a listener panics.
        let mut panicked: Vec<ListenerId> = Vec::new();
        let mut notices: VecDeque<Arc<Event>> = VecDeque::new();
        let mut next = Some(first);
        while let Some(event) = next.take().or_else(|| notices.pop_front()) {
            for (id, sink) in listeners {
                if panicked.contains(id) {
                    continue;
                }
                let delivered =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match sink {
                        Sink::Call(listener) => {
                            listener(&event);
                            Offer::Done
                        }
                        Sink::Channel(channel) => channel.offer(*id, &event),
                    }));
                let payload = match delivered {
                    Ok(Offer::Done) => continue,
                    Ok(Offer::Closed) => {
                        self.unsubscribe(*id);
                        continue;
                    }
                    Err(payload) => payload,
                };
                panicked.push(*id);
                let panic = CaughtPanic::new(
                    PanicSite::Listener,
                    format!("listener {} on {}", id.0, event.type_name()),
                    panic_message(payload.as_ref()),
                );
                self.count_panic(&panic);
                notices.push_back(Arc::new(Event {
                    event_id: Uuid::new_v4(),
                    parent_event_id: Some(event.event_id),
                    emission_sequence: self.next_sequence(),
                    timestamp: Utc::now(),
                    kind: panic.into(),
                }));
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::EventRecorder;
    use super::*;

    fn flow_started() -> EventKind {
        EventKind::FlowStarted {
            flow_name: "a".into(),
            inputs: None,
        }
    }

    #[test]
    fn buses_are_isolated_and_sequence_counts_up() {
        let first = EventBus::new();
        let second = EventBus::new();
        let seen_first = EventRecorder::attach(&first);
        let seen_second = EventRecorder::attach(&second);
        first.emit(None, flow_started());
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
        bus.emit(None, flow_started());
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
        bus.emit(None, flow_started());
        assert!(bus.unsubscribe(id));
        assert!(!bus.unsubscribe(id), "already gone");
        bus.emit(None, flow_started());
        assert_eq!(count.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_listener_may_subscribe_from_inside_a_callback() {
        let bus = EventBus::new();
        let inner = bus.clone();
        bus.subscribe(move |event| {
            if event.emission_sequence == 1 {
                inner.subscribe(|_| {});
            }
        });
        bus.emit(None, flow_started());
        assert_eq!(bus.listener_count(), 2);
    }

    #[test]
    fn a_channel_gets_the_same_events_the_callbacks_get_in_order() {
        let bus = EventBus::new();
        let recorder = EventRecorder::attach(&bus);
        let mut channel = bus.subscribe_channel(8);
        for _ in 0..3 {
            bus.emit(None, flow_started());
        }
        let received: Vec<Event> = std::iter::from_fn(|| channel.try_recv())
            .map(|e| (*e).clone())
            .collect();
        assert_eq!(received, recorder.events());
        assert_eq!(
            received
                .iter()
                .map(|e| e.emission_sequence)
                .collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
        assert_eq!(channel.dropped().count(), 0);
    }

    #[test]
    fn a_full_channel_drops_and_counts_without_waiting() {
        let bus = EventBus::new();
        let mut channel = bus.subscribe_channel(2);
        let started = std::time::Instant::now();
        for _ in 0..5 {
            bus.emit(None, flow_started());
        }
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "the bus never waits"
        );
        assert_eq!(channel.dropped().count(), 3);
        // The oldest events are kept: the queue fills, later ones are dropped.
        let kept: Vec<u64> = std::iter::from_fn(|| channel.try_recv())
            .map(|e| e.emission_sequence)
            .collect();
        assert_eq!(kept, vec![1, 2]);
        bus.emit(None, flow_started());
        assert_eq!(channel.try_recv().map(|e| e.emission_sequence), Some(6));
    }

    #[test]
    fn unsubscribing_a_channel_ends_it_after_what_was_queued() {
        let bus = EventBus::new();
        let mut channel = bus.subscribe_channel(8);
        bus.emit(None, flow_started());
        assert!(bus.unsubscribe(channel.listener_id()));
        bus.emit(None, flow_started());
        assert_eq!(
            channel.blocking_recv().map(|e| e.emission_sequence),
            Some(1)
        );
        assert!(channel.blocking_recv().is_none(), "the channel ended");
    }

    #[test]
    fn a_dropped_channel_is_removed_at_the_next_emission() {
        let bus = EventBus::new();
        drop(bus.subscribe_channel(8));
        assert_eq!(bus.listener_count(), 1);
        bus.emit(None, flow_started());
        assert_eq!(bus.listener_count(), 0);
    }

    #[test]
    fn a_panicking_channel_filter_is_counted_and_the_channel_still_hears_notices() {
        let bus = EventBus::new();
        let mut channel = bus.subscribe_channel_filtered(8, |event| {
            if matches!(event.kind, EventKind::FlowStarted { .. }) {
                panic!("filter bug");
            }
            true
        });
        let recorder = EventRecorder::attach(&bus);
        bus.emit(None, flow_started());
        assert_eq!(bus.caught_panics_at(PanicSite::Listener), 1);
        assert_eq!(recorder.type_names(), vec!["flow_started", "panic_caught"]);
        // The filter panicked on this emission, so it is skipped for its notice too.
        assert!(channel.try_recv().is_none());
        bus.emit(
            None,
            EventKind::FlowFinished {
                flow_name: "a".into(),
                result: None,
            },
        );
        assert_eq!(
            channel.try_recv().map(|e| e.type_name()),
            Some("flow_finished")
        );
    }

    #[tokio::test]
    async fn an_async_consumer_receives_from_another_task() {
        let bus = EventBus::new();
        let mut channel = bus.subscribe_channel(8);
        let id = channel.listener_id();
        let consumer = tokio::spawn(async move {
            let mut count = 0;
            while channel.recv().await.is_some() {
                count += 1;
            }
            count
        });
        bus.emit(None, flow_started());
        bus.emit(None, flow_started());
        bus.unsubscribe(id);
        assert_eq!(consumer.await.unwrap(), 2);
    }
}
