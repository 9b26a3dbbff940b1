//! An agent's `a2a:` as written in a project, read into [`A2aClientConfig`]s: one mapping, a
//! list of them, or an endpoint URL alone, with CrewAI's `A2AClientConfig` fields.

use std::time::Duration;

use crewai_core::a2a::{A2aAuth, A2aClientConfig, A2aUpdates};
use serde_json::{Map, Value};

use crate::error::Diagnostic;
use crate::spec::{Origin, describe};

/// Every field an `a2a:` mapping takes.
const FIELDS: &[&str] = &[
    "endpoint",
    "auth",
    "timeout",
    "max_turns",
    "fail_fast",
    "updates",
    "trust_remote_completion_status",
    "max_response_bytes",
    "transport",
    "transport_protocol",
];

/// CrewAI fields this crate does not build, with what to do instead.
const REFUSED: &[(&str, &str)] = &[
    (
        "response_model",
        "a structured response model for the remote agent's answer is not supported; ask for the shape in the task's expected_output",
    ),
    (
        "client_extensions",
        "A2A client extensions are not supported",
    ),
    ("signing_config", "agent card signing is not supported"),
    (
        "push_notifications",
        "push notifications are not supported; use `updates: streaming` or `updates: polling`",
    ),
];

/// Reads `a2a` (written at `origin`). Every problem is reported, each at its entry.
pub(crate) fn read_a2a(
    value: &Value,
    origin: &Origin,
) -> Result<Vec<A2aClientConfig>, Vec<Diagnostic>> {
    let entries: Vec<(&Value, Origin)> = match value {
        Value::Array(entries) => entries
            .iter()
            .enumerate()
            .map(|(index, entry)| (entry, origin.child(index)))
            .collect(),
        single => vec![(single, origin.clone())],
    };
    let mut remotes = Vec::new();
    let mut problems = Vec::new();
    let many = matches!(value, Value::Array(_));
    for (index, (entry, at)) in entries.into_iter().enumerate() {
        match read_entry(entry) {
            Ok(remote) => remotes.push(remote),
            Err(message) if many => {
                problems.push(at.diagnostic(format!("a2a[{index}]: {message}")))
            }
            Err(message) => problems.push(at.diagnostic(format!("a2a: {message}"))),
        }
    }
    if problems.is_empty() {
        Ok(remotes)
    } else {
        Err(problems)
    }
}

fn read_entry(entry: &Value) -> Result<A2aClientConfig, String> {
    match entry {
        Value::String(endpoint) => A2aClientConfig::new(endpoint).map_err(|e| e.to_string()),
        Value::Object(fields) if fields.contains_key("python") => Err(
            "an A2A config written in Python (A2AClientConfig(...) in crew.py) cannot be read; write it in agents.yaml as `a2a: {endpoint: ..., ...}`"
                .into(),
        ),
        Value::Object(fields) => read_mapping(fields),
        other => Err(format!(
            "a remote agent is an endpoint URL or a mapping with `endpoint`, not {}",
            describe(other)
        )),
    }
}

fn read_mapping(fields: &Map<String, Value>) -> Result<A2aClientConfig, String> {
    for (field, why) in REFUSED {
        if fields.contains_key(*field) {
            return Err(format!("`{field}`: {why}"));
        }
    }
    if let Some(unknown) = fields.keys().find(|key| !FIELDS.contains(&key.as_str())) {
        return Err(format!(
            "unknown field `{unknown}`; a remote A2A agent takes {} (an A2A server config on an agent is not supported: serve a crew with `crewai a2a serve`)",
            FIELDS.join(", ")
        ));
    }
    for field in ["transport", "transport_protocol"] {
        match fields.get(field) {
            None | Some(Value::Null) => {}
            Some(Value::String(t)) if t.eq_ignore_ascii_case("jsonrpc") => {}
            Some(other) => {
                return Err(format!(
                    "`{field}` {other}: only the JSON-RPC transport is supported (not gRPC or HTTP+JSON)"
                ));
            }
        }
    }
    let endpoint = match fields.get("endpoint") {
        Some(Value::String(url)) => url,
        Some(other) => return Err(format!("`endpoint` is a URL, not {}", describe(other))),
        None => {
            return Err("a remote A2A agent needs `endpoint` (its URL or its card's URL)".into());
        }
    };
    let mut remote = A2aClientConfig::new(endpoint).map_err(|e| e.to_string())?;
    if let Some(auth) = fields.get("auth").filter(|v| !v.is_null()) {
        remote = remote.auth(read_auth(auth)?);
    }
    if let Some(timeout) = seconds(fields, "timeout")? {
        remote = remote.timeout(timeout);
    }
    if let Some(turns) = positive(fields, "max_turns")? {
        remote = remote.max_turns(u32::try_from(turns).unwrap_or(u32::MAX));
    }
    if let Some(limit) = positive(fields, "max_response_bytes")? {
        remote = remote.max_response_bytes(usize::try_from(limit).unwrap_or(usize::MAX));
    }
    if let Some(flag) = flag(fields, "fail_fast")? {
        remote = remote.fail_fast(flag);
    }
    if let Some(flag) = flag(fields, "trust_remote_completion_status")? {
        remote = remote.trust_remote_completion_status(flag);
    }
    if let Some(updates) = fields.get("updates").filter(|v| !v.is_null()) {
        remote = remote.updates(read_updates(updates)?);
    }
    Ok(remote)
}

fn read_updates(value: &Value) -> Result<A2aUpdates, String> {
    let push =
        "push notifications are not supported; use `updates: streaming` or `updates: polling`";
    match value {
        Value::String(mode) => match mode.as_str() {
            "streaming" => Ok(A2aUpdates::Streaming),
            "polling" => Ok(A2aUpdates::Polling {
                interval: crewai_core::a2a::DEFAULT_POLL_INTERVAL,
            }),
            "push" | "push_notifications" => Err(format!("`updates: {mode}`: {push}")),
            other => Err(format!(
                "`updates` is `streaming` or `polling`, not `{other}`"
            )),
        },
        Value::Object(modes) => match modes.iter().next() {
            Some((mode, settings)) if modes.len() == 1 => match mode.as_str() {
                "streaming" if settings.as_object().is_none_or(Map::is_empty) => {
                    Ok(A2aUpdates::Streaming)
                }
                "streaming" => Err("`updates.streaming` takes no settings".into()),
                "polling" => {
                    let empty = Map::new();
                    let settings = match settings {
                        Value::Null => &empty,
                        Value::Object(settings) => settings,
                        other => {
                            return Err(format!(
                                "`updates.polling` is a mapping (`interval`), not {}",
                                describe(other)
                            ));
                        }
                    };
                    if let Some(other) = settings.keys().find(|k| *k != "interval") {
                        return Err(format!(
                            "`updates.polling.{other}` is not supported; polling takes `interval` (seconds), and each turn is bounded by `timeout`"
                        ));
                    }
                    Ok(A2aUpdates::Polling {
                        interval: seconds(settings, "interval")?
                            .unwrap_or(crewai_core::a2a::DEFAULT_POLL_INTERVAL),
                    })
                }
                "push" | "push_notifications" => Err(format!("`updates.{mode}`: {push}")),
                other => Err(format!(
                    "`updates` is `streaming` or `polling`, not `{other}`"
                )),
            },
            _ => Err("`updates` names one mode: `streaming` or `polling`".into()),
        },
        other => Err(format!(
            "`updates` is `streaming` or `polling`, not {}",
            describe(other)
        )),
    }
}

/// `auth`: `{type: bearer, token}`, `{type: basic, username, password}`, or a header
/// (`{type: header, name, value}`, CrewAI's `{type: api_key, name, api_key, location: header}`).
/// Any secret may be given as `<field>_env`, the name of an environment variable holding it.
fn read_auth(value: &Value) -> Result<A2aAuth, String> {
    let Value::Object(fields) = value else {
        return Err(format!(
            "`auth` is a mapping (`type: bearer` with `token`, `basic`, or `header`), not {}",
            describe(value)
        ));
    };
    let kind = match fields.get("type") {
        Some(Value::String(kind)) => kind.to_ascii_lowercase(),
        None if fields.contains_key("token") || fields.contains_key("token_env") => "bearer".into(),
        _ => return Err("`auth.type` is `bearer`, `basic`, `header` or `api_key`".into()),
    };
    let allowed: &[&str] = match kind.as_str() {
        "bearer" | "bearer_token" => &["type", "token", "token_env"],
        "basic" | "http_basic" => &["type", "username", "password", "password_env"],
        "header" => &["type", "name", "value", "value_env"],
        "api_key" => &["type", "name", "api_key", "api_key_env", "location"],
        "oauth2" | "oauth2_client_credentials" | "oauth2_authorization_code" | "openid_connect" => {
            return Err(format!(
                "`auth.type: {kind}` is not supported; give a bearer token you obtained (`type: bearer`, `token_env: NAME`)"
            ));
        }
        other => {
            return Err(format!(
                "`auth.type: {other}` is not one of bearer, basic, header, api_key"
            ));
        }
    };
    if let Some(unknown) = fields.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(format!(
            "`auth.{unknown}` is not a field of `type: {kind}` (it takes {})",
            allowed.join(", ")
        ));
    }
    match kind.as_str() {
        "bearer" | "bearer_token" => Ok(A2aAuth::Bearer(secret(fields, "token")?)),
        "basic" | "http_basic" => Ok(A2aAuth::Basic {
            username: text(fields, "username")?,
            password: secret(fields, "password")?,
        }),
        "header" => Ok(A2aAuth::Header {
            name: text(fields, "name")?,
            value: secret(fields, "value")?,
        }),
        _ => {
            match fields.get("location").and_then(Value::as_str) {
                None | Some("header") => {}
                Some(other) => {
                    return Err(format!(
                        "`auth.location: {other}` is not supported; the API key is sent in a header"
                    ));
                }
            }
            Ok(A2aAuth::Header {
                name: text(fields, "name").unwrap_or_else(|_| "X-API-Key".into()),
                value: secret(fields, "api_key")?,
            })
        }
    }
}

fn text(fields: &Map<String, Value>, name: &str) -> Result<String, String> {
    match fields.get(name) {
        Some(Value::String(value)) if !value.is_empty() => Ok(value.clone()),
        _ => Err(format!("`auth.{name}` is required (text)")),
    }
}

/// A secret written as it is, or as `<name>_env` naming the variable that holds it. The value
/// itself never appears in an error.
fn secret(fields: &Map<String, Value>, name: &str) -> Result<String, String> {
    if let Some(Value::String(value)) = fields.get(name) {
        return Ok(value.clone());
    }
    let env_field = format!("{name}_env");
    match fields.get(&env_field) {
        Some(Value::String(var)) => std::env::var(var).map_err(|_| {
            format!("`auth.{env_field}` names the environment variable {var}, which is not set")
        }),
        _ => Err(format!(
            "`auth.{name}` (or `auth.{env_field}`, an environment variable's name) is required"
        )),
    }
}

fn seconds(fields: &Map<String, Value>, name: &str) -> Result<Option<Duration>, String> {
    match fields.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => match value.as_f64().filter(|s| s.is_finite() && *s > 0.0) {
            Some(seconds) => Ok(Some(Duration::from_secs_f64(seconds))),
            None => Err(format!(
                "`{name}` is a number of seconds above zero, not {value}"
            )),
        },
    }
}

fn positive(fields: &Map<String, Value>, name: &str) -> Result<Option<u64>, String> {
    match fields.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => match value.as_u64().filter(|n| *n > 0) {
            Some(n) => Ok(Some(n)),
            None => Err(format!(
                "`{name}` is a whole number above zero, not {value}"
            )),
        },
    }
}

fn flag(fields: &Map<String, Value>, name: &str) -> Result<Option<bool>, String> {
    match fields.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(flag)) => Ok(Some(*flag)),
        Some(other) => Err(format!(
            "`{name}` is true or false, not {}",
            describe(other)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(value: Value) -> Result<A2aClientConfig, String> {
        read_entry(&value)
    }

    #[test]
    fn reads_crewai_fields() {
        let remote = read(json!({
            "endpoint": "http://127.0.0.1:8000",
            "auth": {"type": "bearer", "token": "t"},
            "timeout": 30, "max_turns": 3, "fail_fast": false,
            "updates": {"polling": {"interval": 0.5}},
            "trust_remote_completion_status": true
        }))
        .unwrap();
        assert_eq!(remote.timeout, Duration::from_secs(30));
        assert_eq!(remote.max_turns, 3);
        assert!(!remote.fail_fast && remote.trust_remote_completion_status);
        assert_eq!(
            remote.updates,
            A2aUpdates::Polling {
                interval: Duration::from_millis(500)
            }
        );
        assert_eq!(remote.auth, Some(A2aAuth::Bearer("t".into())));
    }

    #[test]
    fn refuses_what_is_not_built() {
        for (value, words) in [
            (
                json!({"endpoint": "http://h", "updates": "push"}),
                "push notifications",
            ),
            (
                json!({"endpoint": "http://h", "transport": "GRPC"}),
                "JSON-RPC transport",
            ),
            (
                json!({"endpoint": "http://h", "response_model": "X"}),
                "response model",
            ),
            (
                json!({"endpoint": "http://h", "auth": {"type": "oauth2"}}),
                "not supported",
            ),
            (
                json!({"endpoint": "http://h", "skills": []}),
                "unknown field `skills`",
            ),
            (json!({"timeout": 3}), "needs `endpoint`"),
        ] {
            let error = read(value.clone()).unwrap_err();
            assert!(error.contains(words), "{value}: {error}");
        }
    }

    #[test]
    fn a_secret_from_the_environment_is_not_shown_when_missing() {
        let error = read(
            json!({"endpoint": "http://h", "auth": {"token_env": "CREWAI_A2A_TEST_UNSET_VAR"}}),
        )
        .unwrap_err();
        assert!(error.contains("CREWAI_A2A_TEST_UNSET_VAR"), "{error}");
    }
}
