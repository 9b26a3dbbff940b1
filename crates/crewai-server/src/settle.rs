//! What every [`crate::KickoffQueue`] decides the same way whatever its database: how an attempt's
//! end changes the kickoff, what a lapsed lease means, when two submissions are the same request,
//! and how stored text reads back.

use std::time::Duration;

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::error::QueueError;
use crate::queue::{AttemptEnd, KickoffState, QueueConfig};

/// Why a kickoff cancelled while queued ended.
pub(crate) const CANCELLED_BEFORE_CLAIM: &str = "cancelled before a worker took it";

/// The request's identity for `Idempotency-Key`: a hash of the inputs with every object's keys
/// sorted, so two bodies that differ only in key order are the same request.
pub(crate) fn request_hash(inputs: &Value) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sorted(&map[k])))
                        .collect(),
                )
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    hex::encode(Sha256::digest(sorted(inputs).to_string().as_bytes()))
}

/// The kickoff's row after an attempt ended, and the event that says so.
pub(crate) struct Settlement {
    pub state: KickoffState,
    pub result: Option<String>,
    pub error: Option<String>,
    /// `None` keeps the usage already stored.
    pub usage: Option<String>,
    /// How long a retried kickoff waits before it is due again (zero otherwise).
    pub retry_in: Duration,
    pub event_kind: String,
    pub event: Value,
}

/// How `end` of attempt number `attempts` leaves the kickoff: task errors and cancellations are
/// final, infrastructure failures are retried with backoff until the last attempt.
pub(crate) fn settle(end: AttemptEnd, attempts: u32, config: &QueueConfig) -> Settlement {
    let (state, result, error, usage, retry_in, event) = match end {
        AttemptEnd::Completed { result, usage } => (
            KickoffState::Completed,
            Some(result.to_string()),
            None,
            Some(usage.to_string()),
            Duration::ZERO,
            json!({"result": result}),
        ),
        AttemptEnd::Failed { error, usage } => (
            KickoffState::Failed,
            None,
            Some(error.clone()),
            Some(usage.to_string()),
            Duration::ZERO,
            json!({"error": error}),
        ),
        AttemptEnd::Cancelled { error } => (
            KickoffState::Cancelled,
            None,
            Some(error.clone()),
            None,
            Duration::ZERO,
            json!({"error": error}),
        ),
        AttemptEnd::Infrastructure { error } if attempts >= config.max_attempts => (
            KickoffState::DeadLettered,
            None,
            Some(error.clone()),
            None,
            Duration::ZERO,
            json!({"error": error, "attempts": attempts}),
        ),
        AttemptEnd::Infrastructure { error } => {
            let wait = config.backoff_after(attempts);
            (
                KickoffState::Queued,
                None,
                Some(error.clone()),
                None,
                wait,
                json!({"error": error, "attempt": attempts, "retry_in_ms": millis(wait)}),
            )
        }
    };
    let event_kind = match state {
        KickoffState::Queued => "kickoff_retry_scheduled".to_string(),
        other => format!("kickoff_{}", other.as_str()),
    };
    Settlement {
        state,
        result,
        error,
        usage,
        retry_in,
        event_kind,
        event,
    }
}

/// Why a kickoff whose lease lapsed on its last attempt is dead-lettered.
pub(crate) fn lapsed_on_every_attempt(attempts: u32, last_owner: Option<&str>) -> String {
    format!(
        "its worker stopped answering on each of {attempts} attempts (last: {})",
        last_owner.unwrap_or("unknown")
    )
}

pub(crate) fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

pub(crate) fn parse_state(id: &str, text: &str) -> Result<KickoffState, QueueError> {
    KickoffState::parse(text).ok_or_else(|| QueueError::Corrupt {
        kickoff_id: id.to_string(),
        field: "state",
    })
}

pub(crate) fn parse_json(
    id: &str,
    field: &'static str,
    text: Option<String>,
) -> Result<Option<Value>, QueueError> {
    text.map(|text| {
        serde_json::from_str(&text).map_err(|_| QueueError::Corrupt {
            kickoff_id: id.to_string(),
            field,
        })
    })
    .transpose()
}

pub(crate) fn parse_inputs(id: &str, text: &str) -> Result<Map<String, Value>, QueueError> {
    match serde_json::from_str(text) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(QueueError::Corrupt {
            kickoff_id: id.to_string(),
            field: "inputs",
        }),
    }
}
