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
