//! The end of a server's stderr, kept for error messages.

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// A bounded buffer holding the last bytes a child wrote to stderr.
#[derive(Debug)]
pub(crate) struct StderrRing {
    capacity: usize,
    bytes: Mutex<VecDeque<u8>>,
    /// Set when the stream has ended (the child closed its stderr, usually by exiting).
    ended: AtomicBool,
    ended_notify: Notify,
}

impl StderrRing {
    pub(crate) fn new(capacity: usize) -> Arc<Self> {
        Arc::new(StderrRing {
            capacity,
            bytes: Mutex::new(VecDeque::with_capacity(capacity.min(64 * 1024))),
            ended: AtomicBool::new(false),
            ended_notify: Notify::new(),
        })
    }

    fn push(&self, chunk: &[u8]) {
        // A poisoned lock only means a reader panicked mid-copy; the bytes are still usable.
        let mut bytes = self.bytes.lock().unwrap_or_else(PoisonError::into_inner);
        let keep = chunk.len().min(self.capacity);
        bytes.extend(&chunk[chunk.len() - keep..]);
        let excess = bytes.len().saturating_sub(self.capacity);
        bytes.drain(..excess);
    }

    /// What is held now.
    pub(crate) fn tail(&self) -> StderrTail {
        let bytes = self.bytes.lock().unwrap_or_else(PoisonError::into_inner);
        let (front, back) = bytes.as_slices();
        let mut all = Vec::with_capacity(bytes.len());
        all.extend_from_slice(front);
        all.extend_from_slice(back);
        StderrTail(String::from_utf8_lossy(&all).trim_end().to_string())
    }

    /// The tail once the stream has ended, waiting at most `wait` for that: a dying server's
    /// stdout closes a moment before the last of its stderr (the traceback) has been read.
    pub(crate) async fn settled_tail(&self, wait: Duration) -> StderrTail {
        let ended = self.ended_notify.notified();
        if !self.ended.load(Ordering::Acquire) {
            let _ = tokio::time::timeout(wait, ended).await;
        }
        self.tail()
    }

    /// Copies `stderr` into the ring until it ends, logging each chunk at debug level.
    pub(crate) fn collect(
        self: &Arc<Self>,
        server: String,
        mut stderr: impl AsyncRead + Unpin + Send + 'static,
    ) -> JoinHandle<()> {
        let ring = Arc::clone(self);
        tokio::spawn(async move {
            let mut buffer = vec![0u8; 4096];
            loop {
                match stderr.read(&mut buffer).await {
                    Ok(0) | Err(_) => {
                        ring.ended.store(true, Ordering::Release);
                        ring.ended_notify.notify_waiters();
                        return;
                    }
                    Ok(read) => {
                        let chunk = &buffer[..read];
                        tracing::debug!(server = %server, stderr = %String::from_utf8_lossy(chunk).trim_end());
                        ring.push(chunk);
                    }
                }
            }
        })
    }
}

/// The last part of what a server wrote to stderr; shown after an error's own text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StderrTail(pub String);

impl StderrTail {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for StderrTail {
    /// Empty when the server wrote nothing; otherwise `; its stderr ended with:` and the text.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            Ok(())
        } else {
            write!(f, "; its stderr ended with:\n{}", self.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_only_the_last_bytes() {
        let ring = StderrRing::new(8);
        ring.push(b"hello ");
        ring.push(b"world, again");
        assert_eq!(ring.tail().0, "d, again");
        assert_eq!(ring.bytes.lock().map(|b| b.len()).unwrap_or(0), 8);
        ring.push(b"0123456789abcdef");
        assert_eq!(ring.tail().0, "89abcdef");
    }

    #[test]
    fn an_empty_tail_adds_nothing_to_a_message() {
        assert_eq!(format!("failed{}", StderrTail::default()), "failed");
        assert_eq!(
            format!("failed{}", StderrTail("boom".into())),
            "failed; its stderr ended with:\nboom"
        );
    }
}
