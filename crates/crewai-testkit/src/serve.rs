//! What the test servers share: a listener on a free loopback port, a server thread with its own
//! runtime (for synchronous tests), and a lock that a panicked test does not poison.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard};
use std::thread::JoinHandle;

use tokio::net::TcpListener;
use tokio::sync::watch;

/// Locks `mutex`, taking the data even if a test panicked while holding it: the test's own
/// failure must not be hidden behind a poison error, and the servers' state stays readable.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A listener on a random port of 127.0.0.1 and its address.
///
/// Panics if no port can be bound (a broken test machine, not a test outcome); `server` names
/// the server in the message.
pub(crate) async fn bind_loopback(server: &str) -> (TcpListener, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|error| panic!("bind 127.0.0.1:0 for the {server}: {error}"));
    let address = listener
        .local_addr()
        .unwrap_or_else(|error| panic!("local address of the {server}: {error}"));
    (listener, address)
}

/// A running server: where it listens, and the switch that stops it. Dropping it stops the
/// server; a server thread is then detached rather than joined, so that dropping stays prompt
/// (delayed replies may still be sleeping; the thread ends when its runtime is dropped).
pub(crate) struct Running {
    address: SocketAddr,
    shutdown: watch::Sender<bool>,
    background: Option<JoinHandle<()>>,
}

/// The switch a server watches: it answers on its listener until this turns `true` (or the
/// [`Running`] that holds the other end is dropped).
pub(crate) type Stopped = watch::Receiver<bool>;

impl Running {
    /// Runs `serve` on a listener of [`bind_loopback`] as a task of the current tokio runtime.
    pub(crate) async fn spawn<F, Fut>(server: &str, serve: F) -> Running
    where
        F: FnOnce(TcpListener, Stopped) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let (listener, address) = bind_loopback(server).await;
        let (shutdown, stopped) = watch::channel(false);
        tokio::spawn(serve(listener, stopped));
        Running {
            address,
            shutdown,
            background: None,
        }
    }

    /// Runs `serve` on a listener of [`bind_loopback`] on a new thread with its own
    /// current-thread tokio runtime (for synchronous tests, which spawn a binary); returns once
    /// the address is known.
    pub(crate) fn on_own_thread<F, Fut>(server: &'static str, serve: F) -> Running
    where
        F: FnOnce(TcpListener, Stopped) -> Fut + Send + 'static,
        Fut: Future<Output = ()>,
    {
        let (shutdown, stopped) = watch::channel(false);
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let background = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap_or_else(|error| panic!("tokio runtime for the {server}: {error}"));
            runtime.block_on(async move {
                let (listener, address) = bind_loopback(server).await;
                let _ = ready_tx.send(address);
                serve(listener, stopped).await;
            });
        });
        let address = ready_rx
            .recv()
            .unwrap_or_else(|_| panic!("the {server} thread did not start"));
        Running {
            address,
            shutdown,
            background: Some(background),
        }
    }

    /// The socket address the server listens on.
    pub(crate) fn address(&self) -> SocketAddr {
        self.address
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        drop(self.background.take());
    }
}
