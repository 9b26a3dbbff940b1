//! [`JsonLinesWriter`]: a bus's events as JSON lines, written by a thread of its own, so the
//! file's I/O never runs inside an emission (the agent loop).

use std::io::{BufWriter, Write};
use std::thread::JoinHandle;

use super::{
    CaughtPanic, DroppedEvents, Event, EventBus, EventChannel, EventKind, ListenerId, PanicSite,
    panic_message,
};

/// The queue of a [`JsonLinesWriter`] by default: far more events than a run emits while the
/// thread writes one line, so events are dropped only when the disk stalls.
pub const DEFAULT_QUEUE_CAPACITY: usize = 4096;

/// A [`JsonLinesWriter`] could not write every event.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EventLogError {
    #[error("cannot start the event writer thread")]
    Spawn(#[source] std::io::Error),
    /// The first write (or flush) that failed; later events were not written.
    #[error("cannot write the events")]
    Write(#[source] std::io::Error),
    #[error("the event writer thread panicked: {0}")]
    Panicked(String),
}

/// What a [`JsonLinesWriter`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonLinesReport {
    /// Events written.
    pub written: u64,
    /// Events the bus dropped because the writer's queue was full (the file misses them).
    pub dropped: u64,
}

/// Writes a bus's events, one [`Event::to_json`] object per line, from a thread that owns the
/// writer: the bus only queues each event ([`EventBus::subscribe_channel`]), never waiting for
/// the disk. Lines are buffered and flushed whenever the queue runs empty, so the file keeps up
/// with the run without a write per event. Stream chunks are left out (the completed call
/// carries the whole reply).
///
/// [`JsonLinesWriter::finish`] detaches it, waits until every queued event is written, and
/// reports what it wrote and what it missed. Dropping it detaches it too, without waiting: the
/// thread writes what was queued and ends.
///
/// ```
/// use crewai_core::events::{EventBus, EventKind, JsonLinesWriter};
///
/// let bus = EventBus::new();
/// let file = tempfile::NamedTempFile::new().unwrap();
/// let writer = JsonLinesWriter::attach(&bus, file.reopen().unwrap()).unwrap();
/// bus.emit(None, EventKind::FlowStarted { flow_name: "f".into(), inputs: None });
/// let report = writer.finish().unwrap();
/// assert_eq!((report.written, report.dropped), (1, 0));
/// let text = std::fs::read_to_string(file.path()).unwrap();
/// assert!(text.starts_with("{\"type\":\"flow_started\""));
/// ```
pub struct JsonLinesWriter {
    /// Dropped first thing in [`JsonLinesWriter::finish`] (and with the writer): ends the channel.
    attached: ListenerGuard,
    dropped: DroppedEvents,
    worker: JoinHandle<Result<u64, std::io::Error>>,
}

/// A listener that is removed from its bus when this is dropped.
#[derive(Debug)]
pub struct ListenerGuard {
    bus: EventBus,
    listener: ListenerId,
}

impl ListenerGuard {
    /// Keeps `listener` on `bus` for as long as the value lives.
    pub fn new(bus: &EventBus, listener: ListenerId) -> Self {
        ListenerGuard {
            bus: bus.clone(),
            listener,
        }
    }

    /// The bus the listener is on.
    pub fn bus(&self) -> &EventBus {
        &self.bus
    }
}

impl Drop for ListenerGuard {
    fn drop(&mut self) {
        self.bus.unsubscribe(self.listener);
    }
}

impl std::fmt::Debug for JsonLinesWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonLinesWriter")
            .field("listener", &self.attached.listener)
            .field("dropped", &self.dropped.count())
            .finish_non_exhaustive()
    }
}

impl JsonLinesWriter {
    /// Starts writing `bus`'s events (all but stream chunks) to `out`, with a queue of
    /// [`DEFAULT_QUEUE_CAPACITY`] events.
    pub fn attach(bus: &EventBus, out: impl Write + Send + 'static) -> Result<Self, EventLogError> {
        Self::attach_with(bus, out, DEFAULT_QUEUE_CAPACITY)
    }

    /// [`JsonLinesWriter::attach`] with a queue of `capacity` events.
    pub fn attach_with(
        bus: &EventBus,
        out: impl Write + Send + 'static,
        capacity: usize,
    ) -> Result<Self, EventLogError> {
        let channel = bus.subscribe_channel_filtered(capacity, |event| {
            !matches!(event.kind, EventKind::LlmStreamChunk { .. })
        });
        let listener = channel.listener_id();
        let dropped = channel.dropped();
        let worker = std::thread::Builder::new()
            .name("crewai-event-writer".into())
            .spawn(move || write_all(channel, out));
        match worker {
            Ok(worker) => Ok(JsonLinesWriter {
                attached: ListenerGuard::new(bus, listener),
                dropped,
                worker,
            }),
            Err(error) => {
                bus.unsubscribe(listener);
                Err(EventLogError::Spawn(error))
            }
        }
    }

    /// The events dropped so far because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.count()
    }

    /// Stops listening, waits until every queued event is written and flushed, and reports.
    /// Call it from outside the bus's listeners (a listener calling it would wait for its own
    /// emission). A panic of the writer is counted on the bus (site `listener`).
    pub fn finish(self) -> Result<JsonLinesReport, EventLogError> {
        let bus = self.attached.bus().clone();
        drop(self.attached);
        match self.worker.join() {
            Ok(Ok(written)) => Ok(JsonLinesReport {
                written,
                dropped: self.dropped.count(),
            }),
            Ok(Err(error)) => Err(EventLogError::Write(error)),
            Err(payload) => {
                let message = panic_message(payload.as_ref());
                bus.report_panic(
                    None,
                    CaughtPanic::new(PanicSite::Listener, "json-lines writer", message.clone()),
                );
                Err(EventLogError::Panicked(message))
            }
        }
    }
}

/// The writer thread: every event until the channel ends. After a failed write it keeps
/// receiving (so the queue does not fill and count drops that are not the disk's fault) and
/// reports the first error at the end.
fn write_all(mut channel: EventChannel, out: impl Write) -> Result<u64, std::io::Error> {
    let mut out = BufWriter::new(out);
    let mut written = 0_u64;
    let mut failure: Option<std::io::Error> = None;
    let mut write =
        |out: &mut BufWriter<_>, event: &Event, failure: &mut Option<std::io::Error>| {
            if failure.is_some() {
                return;
            }
            match writeln!(out, "{}", event.to_json()) {
                Ok(()) => written += 1,
                Err(error) => *failure = Some(error),
            }
        };
    while let Some(event) = channel.blocking_recv() {
        write(&mut out, &event, &mut failure);
        while let Some(event) = channel.try_recv() {
            write(&mut out, &event, &mut failure);
        }
        // Caught up: flush, so a reader sees the run so far.
        if failure.is_none()
            && let Err(error) = out.flush()
        {
            failure = Some(error);
        }
    }
    if failure.is_none()
        && let Err(error) = out.flush()
    {
        failure = Some(error);
    }
    match failure {
        Some(error) => Err(error),
        None => Ok(written),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A writer the test reads back, that can be told to fail.
    #[derive(Clone, Default)]
    struct Shared {
        bytes: Arc<Mutex<Vec<u8>>>,
        fail: bool,
    }

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.fail {
                return Err(std::io::Error::other("disk full"));
            }
            self.bytes.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn chunk() -> EventKind {
        EventKind::LlmStreamChunk {
            call_id: "k".into(),
            agent_role: None,
            task_name: None,
            chunk: "par".into(),
        }
    }

    #[test]
    fn every_event_but_stream_chunks_is_written_by_the_time_finish_returns() {
        let bus = EventBus::new();
        let out = Shared::default();
        let writer = JsonLinesWriter::attach(&bus, out.clone()).unwrap();
        for n in 0..200 {
            bus.emit(
                None,
                EventKind::MethodExecutionStarted {
                    flow_name: "f".into(),
                    method_name: format!("m{n}"),
                },
            );
            bus.emit(None, chunk());
        }
        let report = writer.finish().unwrap();
        assert_eq!(
            report,
            JsonLinesReport {
                written: 200,
                dropped: 0
            }
        );
        assert_eq!(bus.listener_count(), 0, "finish detaches the writer");
        let text = String::from_utf8(out.bytes.lock().unwrap().clone()).unwrap();
        let lines: Vec<Event> = text
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(lines.len(), 200);
        assert!(
            lines
                .windows(2)
                .all(|w| w[0].emission_sequence < w[1].emission_sequence)
        );
        assert_eq!(lines[199].to_json()["method_name"], "m199");
    }

    #[test]
    fn a_dropped_writer_detaches_and_its_thread_writes_what_was_queued() {
        let bus = EventBus::new();
        let out = Shared::default();
        let writer = JsonLinesWriter::attach(&bus, out.clone()).unwrap();
        bus.emit(
            None,
            EventKind::FlowStarted {
                flow_name: "f".into(),
                inputs: None,
            },
        );
        drop(writer);
        assert_eq!(bus.listener_count(), 0);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while out.bytes.lock().unwrap().is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "the queued event was never written"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let text = String::from_utf8(out.bytes.lock().unwrap().clone()).unwrap();
        assert_eq!(text.lines().count(), 1);
    }

    #[test]
    fn a_failed_write_is_reported_at_finish() {
        let bus = EventBus::new();
        let out = Shared {
            fail: true,
            ..Default::default()
        };
        let writer = JsonLinesWriter::attach(&bus, out).unwrap();
        bus.emit(
            None,
            EventKind::FlowStarted {
                flow_name: "f".into(),
                inputs: None,
            },
        );
        let error = writer.finish().unwrap_err();
        assert!(
            matches!(&error, EventLogError::Write(e) if e.to_string() == "disk full"),
            "{error}"
        );
    }

    #[test]
    fn a_writer_that_cannot_keep_up_reports_the_events_it_missed() {
        /// Says when the writer thread reaches the disk, then holds it there until the test
        /// lets it go.
        struct Gate {
            entered: std::sync::mpsc::Sender<()>,
            open: Arc<Mutex<()>>,
        }
        impl Gate {
            fn pass(&self) {
                let _ = self.entered.send(());
                let _open = self.open.lock().unwrap();
            }
        }
        impl Write for Gate {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.pass();
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                self.pass();
                Ok(())
            }
        }
        let open = Arc::new(Mutex::new(()));
        let closed = open.lock().unwrap();
        let (entered, reached_disk) = std::sync::mpsc::channel();
        let bus = EventBus::new();
        let gate = Gate {
            entered,
            open: open.clone(),
        };
        let writer = JsonLinesWriter::attach_with(&bus, gate, 4).unwrap();
        let flow_started = || EventKind::FlowStarted {
            flow_name: "f".into(),
            inputs: None,
        };
        bus.emit(None, flow_started());
        reached_disk.recv().unwrap();
        // The thread is stuck writing the first event: four more fit in the queue.
        let started = std::time::Instant::now();
        for _ in 0..49 {
            bus.emit(None, flow_started());
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(2),
            "the run is never held up by a stalled writer"
        );
        assert_eq!(writer.dropped(), 45);
        drop(closed);
        let report = writer.finish().unwrap();
        assert_eq!(
            report,
            JsonLinesReport {
                written: 5,
                dropped: 45
            }
        );
    }
}
