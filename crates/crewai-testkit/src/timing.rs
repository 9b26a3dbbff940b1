//! Checks on when something timed out, shared by the tests of deadlines and timeouts.

use std::time::Duration;

/// The work ended because its `what` (a deadline, a timeout) fired, on the wall clock: not before
/// it was due, and within a second after (the slack covers clock granularity: its timer starts
/// after the test's clock).
#[track_caller]
pub fn assert_ended_on_time(elapsed: Duration, due: Duration, what: &str) {
    assert!(
        elapsed + Duration::from_millis(20) >= due && elapsed <= due + Duration::from_secs(1),
        "ended after {elapsed:?}; a {due:?} {what} should end it within a second of being due"
    );
}
