//! Checks on processes for tests that prove nothing is left running (Linux: they read `/proc`).

use std::time::{Duration, Instant};

/// Whether process `pid` is gone and reaped: no `/proc` entry at all, not even a zombie.
pub fn is_reaped(pid: u32) -> bool {
    !std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Whether process `pid` is still running (it exists and is not a zombie waiting for its
/// parent to reap it).
pub fn is_running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        // The state letter follows the command name, which is in parentheses and may hold any
        // character, so look after the last `)`.
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

/// Polls `done` every 50 ms; panics with `what` (what is still wrong) after `within`.
pub async fn wait_until(what: &str, within: Duration, done: impl Fn() -> bool) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < deadline, "{what} after {within:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A server process a test starts that says on one of its outputs which port it listens on
/// (`PORT 8765` from the shared mock and the SDK fixtures, an address line from `crewai`).
/// Killed and reaped when dropped; what it printed is kept for failure messages.
pub struct ListeningChild {
    child: std::process::Child,
    pub port: u16,
    output: std::sync::Arc<std::sync::Mutex<String>>,
}

/// Which output of a [`ListeningChild`] announces the port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Announced {
    Stdout,
    Stderr,
}

impl ListeningChild {
    /// Starts `command` and waits (at most `within`) for a line `port_of` reads a port from.
    /// Both outputs are read to their end in the background, so the child never blocks on a
    /// full pipe.
    pub fn start(
        mut command: std::process::Command,
        announced: Announced,
        within: Duration,
        port_of: impl Fn(&str) -> Option<u16> + Send + Sync + 'static,
    ) -> ListeningChild {
        use std::io::{BufRead, BufReader};
        use std::process::Stdio;
        let shown = format!("{command:?}");
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{shown} could not start: {e}"));
        let output = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let (found, port) = std::sync::mpsc::channel();
        let port_of = std::sync::Arc::new(port_of);
        let streams: [(Option<Box<dyn std::io::Read + Send>>, bool); 2] = [
            (
                child.stdout.take().map(|s| Box::new(s) as _),
                announced == Announced::Stdout,
            ),
            (
                child.stderr.take().map(|s| Box::new(s) as _),
                announced == Announced::Stderr,
            ),
        ];
        for (stream, announces) in streams {
            let Some(stream) = stream else { continue };
            let output = std::sync::Arc::clone(&output);
            let found = found.clone();
            let port_of = std::sync::Arc::clone(&port_of);
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    if announces && let Some(port) = port_of(&line) {
                        let _ = found.send(port);
                    }
                    if let Ok(mut text) = output.lock() {
                        text.push_str(&line);
                        text.push('\n');
                    }
                }
            });
        }
        let port = match port.recv_timeout(within) {
            Ok(port) => port,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                let printed = output.lock().map(|t| t.clone()).unwrap_or_default();
                panic!("{shown} did not say its port within {within:?}; it printed:\n{printed}");
            }
        };
        ListeningChild {
            child,
            port,
            output,
        }
    }

    /// A line `PORT <n>`.
    pub fn port_line(line: &str) -> Option<u16> {
        line.strip_prefix("PORT ")?.trim().parse().ok()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the process printed so far (both outputs, interleaved by line).
    pub fn output(&self) -> String {
        self.output.lock().map(|t| t.clone()).unwrap_or_default()
    }
}

impl Drop for ListeningChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_runs_and_a_reaped_child_is_gone() {
        assert!(is_running(std::process::id()));
        assert!(!is_reaped(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(is_reaped(pid) && !is_running(pid));
    }
}
