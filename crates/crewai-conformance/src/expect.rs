//! The expectation checker: pure functions from a case's `expect` and a run's [`Outcome`] to the
//! list of expectations that did not hold (empty: the case passes).

use serde_json::{Map, Value};

use crate::case::{EventExpect, Expect, HookCallExpect, TasksOutputExpect};
use crate::outcome::{EventRecord, HookCall, Outcome, Output, RateLimitScope, RateLimitView};

/// JSON equality where numbers compare by value (`4` equals `4.0`).
pub fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => x == y,
            _ => x == y,
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// A short, single-line rendering of a text for a failure message.
pub fn excerpt(text: &str, max: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c == '\n' { '⏎' } else { c })
        .collect();
    if flat.chars().count() <= max {
        format!("{flat:?}")
    } else {
        let head: String = flat.chars().take(max).collect();
        format!("{head:?}… ({} chars)", text.chars().count())
    }
}

/// Checks every expectation; returns one message per expectation that failed, most telling first.
pub fn check(expect: &Expect, outcome: &Outcome) -> Vec<String> {
    let mut failures = Vec::new();
    if !expect.allow_unmatched {
        failures.extend(outcome.unmatched.iter().cloned());
    }
    match (&outcome.result, &expect.error) {
        (Err(error), None) => failures.push(format!("run failed: {error}")),
        (Err(error), Some(wanted)) => {
            if !error.contains(wanted.as_str()) {
                failures.push(format!(
                    "error {} does not contain {wanted:?}",
                    excerpt(error, 300)
                ));
            }
        }
        (Ok(outputs), Some(wanted)) => {
            let raw = outputs
                .first()
                .map(|o| excerpt(&o.raw, 120))
                .unwrap_or_default();
            failures.push(format!(
                "expected an error containing {wanted:?}, but the run succeeded (raw {raw})"
            ));
        }
        (Ok(outputs), None) => {
            if outputs.is_empty() {
                failures.push("the run produced no output".into());
            }
            for (i, output) in outputs.iter().enumerate() {
                let which = if outputs.len() > 1 {
                    format!("output {}: ", i + 1)
                } else {
                    String::new()
                };
                failures.extend(
                    check_output(expect, output)
                        .into_iter()
                        .map(|f| format!("{which}{f}")),
                );
            }
        }
    }
    if let Some(wanted) = expect.requests
        && outcome.requests_consumed != wanted
    {
        failures.push(format!(
            "requests: consumed {} of {} recorded, expected exactly {wanted}",
            outcome.requests_consumed, outcome.requests_recorded
        ));
    }
    for (tool, wanted) in &expect.tool_calls {
        let ran = outcome.tool_runs.get(tool).copied().unwrap_or(0);
        if ran != *wanted {
            failures.push(format!(
                "tool_calls: `{tool}` ran {ran} times, expected {wanted}"
            ));
        }
    }
    if let Err(f) = check_event_ids(&outcome.events) {
        failures.push(f);
    }
    failures.extend(check_rate_limits(&outcome.rate_limits, &outcome.events));
    if let Err(f) = check_events(&expect.events, &outcome.events) {
        failures.push(f);
    }
    for (name, wanted) in &expect.event_counts {
        let count = outcome.events.iter().filter(|e| &e.name == name).count();
        if count != *wanted {
            failures.push(format!(
                "event_counts: {count} `{name}` events, expected {wanted}"
            ));
        }
    }
    for (point, items) in &expect.hooks {
        let calls = outcome
            .hook_calls
            .get(point)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for (i, item) in items.iter().enumerate() {
            match calls.get(i) {
                None => {
                    failures.push(format!(
                        "hooks.{point}: expected at least {} calls, got {}",
                        items.len(),
                        calls.len()
                    ));
                    break;
                }
                Some(call) => {
                    if let Err(f) = check_hook_call(item, call) {
                        failures.push(format!("hooks.{point}[{i}]: {f}"));
                    }
                }
            }
        }
    }
    if let Some(wanted) = &expect.manager_tools {
        match &outcome.manager_tools {
            None => failures.push("manager_tools: the crew has no manager".into()),
            Some(tools) => {
                if tools.len() != wanted.len() {
                    failures.push(format!(
                        "manager_tools: {} tools {:?}, expected {}",
                        tools.len(),
                        tools.iter().map(|t| &t.name).collect::<Vec<_>>(),
                        wanted.len()
                    ));
                }
                for (i, (want, tool)) in wanted.iter().zip(tools).enumerate() {
                    if let Some(name) = &want.name
                        && name != &tool.name
                    {
                        failures.push(format!(
                            "manager_tools[{i}]: name {:?}, expected {name:?}",
                            tool.name
                        ));
                    }
                    if let Some(part) = &want.description_contains
                        && !tool.description.contains(part.as_str())
                    {
                        failures.push(format!(
                            "manager_tools[{i}] `{}`: description {} does not contain {}",
                            tool.name,
                            excerpt(&tool.description, 300),
                            excerpt(part, 200)
                        ));
                    }
                }
            }
        }
    }
    for (path, want) in &expect.files {
        let full = outcome.workdir.join(path);
        let text = std::fs::read_to_string(&full);
        if let Some(exists) = want.exists
            && full.exists() != exists
        {
            failures.push(format!(
                "files: `{path}` {}",
                if exists {
                    "was not written"
                } else {
                    "exists but should not"
                }
            ));
            continue;
        }
        if want.text.is_none() && want.json.is_none() {
            continue;
        }
        let text = match text {
            Ok(text) => text,
            Err(e) => {
                failures.push(format!("files: cannot read `{path}`: {e}"));
                continue;
            }
        };
        if let Some(wanted) = &want.text
            && &text != wanted
        {
            failures.push(format!(
                "files: `{path}` holds {}, expected {}",
                excerpt(&text, 200),
                excerpt(wanted, 200)
            ));
        }
        if let Some(wanted) = &want.json {
            match serde_json::from_str::<Value>(&text) {
                Ok(value) if json_eq(&value, wanted) => {}
                Ok(value) => failures.push(format!(
                    "files: `{path}` holds JSON {value}, expected {wanted}"
                )),
                Err(e) => failures.push(format!(
                    "files: `{path}` is not JSON ({e}): {}",
                    excerpt(&text, 200)
                )),
            }
        }
    }
    failures
}

fn check_output(expect: &Expect, output: &Output) -> Vec<String> {
    let mut failures = Vec::new();
    if let Some(kind) = expect.result_type
        && output.kind.result_type() != Some(kind)
    {
        failures.push(format!("result_type: got {}, expected {kind}", output.kind));
    }
    if let Some(stream) = &expect.stream {
        match output.chunks {
            None => failures.push("stream: the result is not a streaming output".into()),
            Some(n) if n < stream.min_chunks => failures.push(format!(
                "stream: {n} chunks, expected at least {}",
                stream.min_chunks
            )),
            Some(_) => {}
        }
    }
    if let Some(wanted) = &expect.raw
        && &output.raw != wanted
    {
        failures.push(format!(
            "raw: got {}, expected {}",
            excerpt(&output.raw, 300),
            excerpt(wanted, 300)
        ));
    }
    for part in &expect.raw_contains {
        if !output.raw.contains(part.as_str()) {
            failures.push(format!(
                "raw_contains: {} not in raw {}",
                excerpt(part, 100),
                excerpt(&output.raw, 300)
            ));
        }
    }
    for pattern in &expect.raw_matches {
        match regex::Regex::new(pattern) {
            Ok(re) if re.is_match(&output.raw) => {}
            Ok(_) => failures.push(format!(
                "raw_matches: /{pattern}/ does not match raw {}",
                excerpt(&output.raw, 300)
            )),
            Err(e) => failures.push(format!(
                "raw_matches: /{pattern}/ is not a valid regex: {e}"
            )),
        }
    }
    if let Some(wanted) = &expect.json {
        match output.json_dict.as_ref().or(output.pydantic.as_ref()) {
            Some(value) if json_eq(value, wanted) => {}
            Some(value) => failures.push(format!("json: got {value}, expected {wanted}")),
            None => failures.push(format!(
                "json: no JSON output, expected {wanted} (raw {})",
                excerpt(&output.raw, 200)
            )),
        }
    }
    match &expect.json_text {
        None => {}
        Some(Some(wanted)) => match &output.json_text {
            Ok(text) if text == wanted => {}
            Ok(text) => failures.push(format!("json_text: got {text:?}, expected {wanted:?}")),
            Err(e) => failures.push(format!(
                "json_text: reading it failed ({e}), expected {wanted:?}"
            )),
        },
        Some(None) => {
            const NO_JSON: &str = "No JSON output found in the final task.";
            match &output.json_text {
                Err(e) if e.contains(NO_JSON) => {}
                Err(e) => failures.push(format!(
                    "json_text: reading it failed with {e:?}, expected {NO_JSON:?}"
                )),
                Ok(text) => {
                    failures.push(format!("json_text: got {text:?}, expected no JSON output"))
                }
            }
        }
    }
    if let Some(wanted) = &expect.pydantic {
        match &output.pydantic {
            Some(value) if json_eq(value, wanted) => {}
            Some(value) => failures.push(format!("pydantic: got {value}, expected {wanted}")),
            None => failures.push(format!(
                "pydantic: not set, expected {wanted} (raw {})",
                excerpt(&output.raw, 200)
            )),
        }
    }
    match &expect.tasks_output {
        None => {}
        Some(TasksOutputExpect::Count(n)) if output.tasks_output.len() != *n => {
            failures.push(format!(
                "tasks_output: {} task outputs, expected {n}",
                output.tasks_output.len()
            ));
        }
        Some(TasksOutputExpect::Count(_)) => {}
        Some(TasksOutputExpect::Each(items)) => {
            if output.tasks_output.len() != items.len() {
                failures.push(format!(
                    "tasks_output: {} task outputs, expected {}",
                    output.tasks_output.len(),
                    items.len()
                ));
            }
            for (i, (want, task)) in items.iter().zip(&output.tasks_output).enumerate() {
                if let Some(raw) = &want.raw
                    && &task.raw != raw
                {
                    failures.push(format!(
                        "tasks_output[{i}].raw: got {}, expected {}",
                        excerpt(&task.raw, 200),
                        excerpt(raw, 200)
                    ));
                }
                for part in &want.raw_contains {
                    if !task.raw.contains(part.as_str()) {
                        failures.push(format!(
                            "tasks_output[{i}].raw: {} not in {}",
                            excerpt(part, 100),
                            excerpt(&task.raw, 200)
                        ));
                    }
                }
                if let Some(agent) = &want.agent
                    && &task.agent != agent
                {
                    failures.push(format!(
                        "tasks_output[{i}].agent: got {:?}, expected {agent:?}",
                        task.agent
                    ));
                }
            }
        }
    }
    if let Some(wanted) = &expect.usage {
        match &output.usage {
            None => failures.push("usage: the result carries no usage".into()),
            Some(usage) => {
                let fields = [
                    ("total_tokens", wanted.total_tokens, usage.total_tokens),
                    ("prompt_tokens", wanted.prompt_tokens, usage.prompt_tokens),
                    (
                        "completion_tokens",
                        wanted.completion_tokens,
                        usage.completion_tokens,
                    ),
                    (
                        "successful_requests",
                        wanted.successful_requests,
                        usage.successful_requests,
                    ),
                ];
                for (name, want, got) in fields {
                    if let Some(want) = want
                        && want != got
                    {
                        failures.push(format!("usage.{name}: got {got}, expected {want}"));
                    }
                }
            }
        }
    }
    failures
}

/// Does `event` satisfy `item`'s fields? `parent_ids` maps the name of each earlier matched item
/// to the event id it matched (the nearest one wins).
fn event_matches(
    item: &EventExpect,
    event: &EventRecord,
    matched: &[(String, String)],
) -> Result<(), String> {
    if event.name != item.name {
        return Err("different name".into());
    }
    for (field, wanted) in &item.fields {
        if field == "parent" {
            let Some(parent_name) = wanted.as_str() else {
                return Err(format!("`parent` must name an event, got {wanted}"));
            };
            let Some((_, parent_id)) = matched.iter().rev().find(|(name, _)| name == parent_name)
            else {
                return Err(format!("no earlier item `{parent_name}` to be the parent"));
            };
            if event.parent_event_id.as_deref() != Some(parent_id.as_str()) {
                return Err(format!(
                    "parent_event_id {:?} is not the `{parent_name}` event's id {parent_id:?}",
                    event.parent_event_id.as_deref().unwrap_or("none")
                ));
            }
            continue;
        }
        match event.attributes.get(field) {
            None => return Err(format!("has no attribute `{field}`")),
            Some(value) if json_eq(value, wanted) => {}
            Some(value) => {
                let got = value
                    .as_str()
                    .map(|s| excerpt(s, 200))
                    .unwrap_or_else(|| value.to_string());
                let want = wanted
                    .as_str()
                    .map(|s| excerpt(s, 200))
                    .unwrap_or_else(|| wanted.to_string());
                return Err(format!("`{field}` is {got}, expected {want}"));
            }
        }
    }
    Ok(())
}

fn describe_item(item: &EventExpect) -> String {
    if item.fields.is_empty() {
        format!("`{}`", item.name)
    } else {
        format!("`{}` {}", item.name, Value::Object(item.fields.clone()))
    }
}

/// The items must occur as a subsequence of `events` (earliest match first).
fn check_events(items: &[EventExpect], events: &[EventRecord]) -> Result<(), String> {
    let mut position = 0;
    let mut matched: Vec<(String, String)> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let mut near_misses = Vec::new();
        let found = events[position..]
            .iter()
            .enumerate()
            .find_map(
                |(offset, event)| match event_matches(item, event, &matched) {
                    Ok(()) => Some(position + offset),
                    Err(why) => {
                        if event.name == item.name {
                            near_misses.push(format!("#{} {why}", position + offset + 1));
                        }
                        None
                    }
                },
            );
        match found {
            Some(index) => {
                matched.push((item.name.clone(), events[index].event_id.clone()));
                position = index + 1;
            }
            None => {
                let after = if i == 0 {
                    String::new()
                } else {
                    format!(" after item {i} (event #{position})")
                };
                let detail = if near_misses.is_empty() {
                    let total = events.iter().filter(|e| e.name == item.name).count();
                    let names: Vec<&str> = events.iter().map(|e| e.name.as_str()).collect();
                    format!(
                        "{total} `{}` events emitted in all; emitted: [{}]",
                        item.name,
                        compress_names(&names)
                    )
                } else {
                    near_misses.truncate(4);
                    near_misses.join("; ")
                };
                return Err(format!(
                    "events: item {} {}{after} not found: {detail}",
                    i + 1,
                    describe_item(item)
                ));
            }
        }
    }
    Ok(())
}

/// Every event has a non-empty id, unique within the run (the README's invariant).
/// What `max_rpm` implies, whatever the case declares: on a clock that only moves when slept on,
/// a limiter admits `max_rpm` calls, then one per wait, so a scope that made more model calls
/// than its limit must have waited at least that many times beyond it, and every wait must have
/// been announced (a `rate_limit_wait_started` event before the clock slept).
pub fn check_rate_limits(limits: &[RateLimitView], events: &[EventRecord]) -> Vec<String> {
    let own_roles: Vec<&str> = limits
        .iter()
        .filter_map(|l| match &l.scope {
            RateLimitScope::Agent(role) => Some(role.as_str()),
            RateLimitScope::Crew => None,
        })
        .collect();
    let in_scope = |scope: &RateLimitScope, event: &EventRecord| {
        let role = event
            .attributes
            .get("agent_role")
            .and_then(Value::as_str)
            .unwrap_or_default();
        match scope {
            RateLimitScope::Agent(own) => role == own,
            RateLimitScope::Crew => !own_roles.contains(&role),
        }
    };
    let mut failures = Vec::new();
    let mut scopes: Vec<&RateLimitScope> = Vec::new();
    for limit in limits {
        if !scopes.contains(&&limit.scope) {
            scopes.push(&limit.scope);
        }
    }
    for scope in scopes {
        let same: Vec<&RateLimitView> = limits.iter().filter(|l| &l.scope == scope).collect();
        let max_rpm = same.iter().map(|l| l.max_rpm).min().unwrap_or(0) as usize;
        let sleeps: usize = same.iter().map(|l| l.sleeps).sum();
        let count = |name: &str| {
            events
                .iter()
                .filter(|e| e.name == name && in_scope(scope, e))
                .count()
        };
        let (calls, waits) = (count("llm_call_started"), count("rate_limit_wait_started"));
        let who = match scope {
            RateLimitScope::Agent(role) => format!("agent `{role}`"),
            RateLimitScope::Crew => "the crew".to_string(),
        };
        let needed = calls.saturating_sub(max_rpm);
        if waits < needed {
            failures.push(format!("max_rpm: {who} made {calls} model calls under max_rpm {max_rpm} but announced {waits} rate-limit waits (at least {needed} expected)"));
        }
        if sleeps < waits || (sleeps > 0 && waits == 0) {
            failures.push(format!("max_rpm: {who} announced {waits} rate-limit waits, but its limiter slept {sleeps} times"));
        }
    }
    failures
}

fn check_event_ids(events: &[EventRecord]) -> Result<(), String> {
    let mut seen = std::collections::HashMap::new();
    for (i, event) in events.iter().enumerate() {
        if event.event_id.is_empty() {
            return Err(format!(
                "events: event #{} `{}` has an empty event_id",
                i + 1,
                event.name
            ));
        }
        if let Some(first) = seen.insert(event.event_id.as_str(), i) {
            return Err(format!(
                "events: event #{} `{}` reuses the event_id of event #{}",
                i + 1,
                event.name,
                first + 1
            ));
        }
    }
    Ok(())
}

/// `a, b×3, c` for a long run of event names.
fn compress_names(names: &[&str]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut iter = names.iter().peekable();
    while let Some(name) = iter.next() {
        let mut count = 1;
        while iter.peek() == Some(&name) {
            iter.next();
            count += 1;
        }
        out.push(if count > 1 {
            format!("{name}×{count}")
        } else {
            name.to_string()
        });
    }
    out.join(", ")
}

fn check_hook_call(item: &HookCallExpect, call: &HookCall) -> Result<(), String> {
    if let Some(name) = &item.tool_name
        && call.tool_name.as_deref() != Some(name.as_str())
    {
        return Err(format!("tool_name {:?}, expected {name:?}", call.tool_name));
    }
    if !item.tool_input_keys.is_empty() {
        let keys: Vec<&String> = call
            .tool_input
            .as_ref()
            .and_then(Value::as_object)
            .map(|m| m.keys().collect())
            .unwrap_or_default();
        for key in &item.tool_input_keys {
            if !keys.contains(&key) {
                return Err(format!("tool_input has no `{key}` (keys {keys:?})"));
            }
        }
    }
    if let Some(part) = &item.tool_result_contains {
        match &call.tool_result {
            Some(result) if result.contains(part.as_str()) => {}
            other => {
                return Err(format!(
                    "tool_result {:?} does not contain {part:?}",
                    other.as_deref().map(|r| excerpt(r, 200))
                ));
            }
        }
    }
    if let Some(role) = &item.agent_role
        && call.agent_role.as_deref() != Some(role.as_str())
    {
        return Err(format!(
            "agent_role {:?}, expected {role:?}",
            call.agent_role
        ));
    }
    let flags = [
        ("has_agent", item.has_agent, call.has_agent),
        ("has_task", item.has_task, call.has_task),
        ("has_crew", item.has_crew, call.has_crew),
        ("has_llm", item.has_llm, call.has_llm),
        (
            "has_response",
            item.has_response,
            call.response.as_deref().is_some_and(|r| !r.is_empty()),
        ),
    ];
    for (name, want, got) in flags {
        if let Some(want) = want
            && want != got
        {
            return Err(format!("{name} is {got}, expected {want}"));
        }
    }
    if let Some(min) = item.min_messages
        && call.messages < min
    {
        return Err(format!(
            "{} messages, expected at least {min}",
            call.messages
        ));
    }
    Ok(())
}

/// Event attributes as a JSON object (helper for building [`EventRecord`]s in tests).
pub fn attributes(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::{Case, HookPoint};
    use crate::outcome::ResultKind;
    use crate::outcome::{TaskView, ToolInfo, UsageView};
    use serde_json::json;
    use std::path::Path;

    fn expect(yaml: &str) -> Expect {
        Case::parse(&format!("name: t\nexpect:\n{yaml}"), Path::new("case.yaml"))
            .unwrap()
            .expect
    }

    fn output(raw: &str) -> Output {
        Output {
            raw: raw.into(),
            ..Default::default()
        }
    }

    fn ok(outputs: Vec<Output>) -> Outcome {
        Outcome {
            result: Ok(outputs),
            requests_consumed: 1,
            requests_recorded: 2,
            ..Default::default()
        }
    }

    fn event(name: &str, id: &str, parent: Option<&str>, attrs: Value) -> EventRecord {
        EventRecord {
            name: name.into(),
            event_id: id.into(),
            parent_event_id: parent.map(String::from),
            attributes: attributes(attrs),
        }
    }

    #[test]
    fn max_rpm_waits_must_happen_and_be_announced() {
        let call =
            |id: &str, role: &str| event("llm_call_started", id, None, json!({"agent_role": role}));
        let wait = |id: &str, role: &str| {
            event(
                "rate_limit_wait_started",
                id,
                None,
                json!({"agent_role": role}),
            )
        };
        let limit = |scope: RateLimitScope, sleeps| RateLimitView {
            scope,
            max_rpm: 1,
            sleeps,
        };
        let agent = || RateLimitScope::Agent("writer".into());

        let waited = [
            call("1", "writer"),
            wait("2", "writer"),
            call("3", "writer"),
            call("4", "other"),
        ];
        assert!(check_rate_limits(&[limit(agent(), 1)], &waited).is_empty());

        let no_wait = [call("1", "writer"), call("2", "writer")];
        let failures = check_rate_limits(&[limit(agent(), 0)], &no_wait);
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert!(
            failures[0].contains("agent `writer` made 2 model calls under max_rpm 1"),
            "{failures:?}"
        );

        let silent = [
            call("1", "writer"),
            call("2", "writer"),
            wait("3", "writer"),
        ];
        assert!(check_rate_limits(&[limit(agent(), 0)], &silent)[0].contains("slept 0 times"));

        // The crew's limit holds the agents without one of their own.
        let crew = [
            call("1", "writer"),
            call("2", "writer"),
            call("3", "other"),
            call("4", "other"),
        ];
        let failures =
            check_rate_limits(&[limit(agent(), 0), limit(RateLimitScope::Crew, 0)], &crew);
        assert_eq!(failures.len(), 2, "{failures:?}");
        assert!(
            failures[1].contains("the crew made 2 model calls"),
            "{failures:?}"
        );
    }

    #[test]
    fn raw_family() {
        let e = expect("  raw: hi\n  raw_contains: [h]\n  raw_matches: ['(?i)^H']\n");
        assert!(check(&e, &ok(vec![output("hi")])).is_empty());
        let failures = check(&e, &ok(vec![output("bye")]));
        assert_eq!(failures.len(), 3, "{failures:?}");
        assert!(failures[0].starts_with("raw: got \"bye\""), "{failures:?}");
    }

    #[test]
    fn json_and_pydantic() {
        let e = expect("  json: {score: 4}\n  json_text: '{\"score\": 4}'\n");
        let good = Output {
            json_dict: Some(json!({"score": 4.0})),
            json_text: Ok("{\"score\": 4}".into()),
            ..output("x")
        };
        assert!(check(&e, &ok(vec![good])).is_empty());
        let none = expect("  json_text: null\n");
        let bad = Output {
            json_text: Err("No JSON output found in the final task.".into()),
            ..output("x")
        };
        assert!(check(&none, &ok(vec![bad])).is_empty());
        assert_eq!(
            check(
                &none,
                &ok(vec![Output {
                    json_text: Ok("{}".into()),
                    ..output("x")
                }])
            )
            .len(),
            1
        );
        let p = expect("  pydantic: {name: Messi}\n");
        assert_eq!(check(&p, &ok(vec![output("x")])).len(), 1);
    }

    #[test]
    fn errors_requests_and_unmatched() {
        let e = expect("  error: timed out\n  requests: 1\n");
        let outcome = Outcome {
            result: Err("task timed out after 1s".into()),
            requests_consumed: 1,
            ..Default::default()
        };
        assert!(check(&e, &outcome).is_empty());
        let failures = check(&expect("  requests: 2\n"), &ok(vec![output("x")]));
        assert_eq!(
            failures,
            vec!["requests: consumed 1 of 2 recorded, expected exactly 2".to_string()]
        );
        let mut outcome = ok(vec![output("x")]);
        outcome
            .unmatched
            .push("ran out of recorded responses at request 3 (/v1/chat/completions)".into());
        assert_eq!(check(&Expect::default(), &outcome).len(), 1);
        assert!(check(&expect("  allow_unmatched: true\n"), &outcome).is_empty());
        assert!(
            check(
                &Expect::default(),
                &Outcome {
                    result: Err("boom".into()),
                    ..Default::default()
                }
            )[0]
            .contains("run failed: boom")
        );
    }

    #[test]
    fn events_subsequence_with_parents() {
        let e = expect(
            "  events: [crew_kickoff_started, {task_started: {parent: crew_kickoff_started}}, crew_kickoff_started, {task_started: {parent: crew_kickoff_started}}]\n  event_counts: {task_started: 2}\n",
        );
        let events = vec![
            event("crew_kickoff_started", "c1", None, json!({})),
            event("llm_call_started", "l", Some("t1"), json!({})),
            event("task_started", "t1", Some("c1"), json!({})),
            event("crew_kickoff_started", "c2", None, json!({})),
            event("task_started", "t2", Some("c2"), json!({})),
        ];
        let mut outcome = ok(vec![output("x")]);
        outcome.events = events.clone();
        assert!(check(&e, &outcome).is_empty(), "{:?}", check(&e, &outcome));
        let mut duplicate = outcome.clone();
        duplicate.events[1].event_id = "c1".into();
        assert!(
            check(&Expect::default(), &duplicate)[0].contains("reuses the event_id of event #1")
        );
        // The second task pointing at the first crew breaks the nearest-earlier rule.
        outcome.events[4].parent_event_id = Some("c1".into());
        let failures = check(&e, &outcome);
        assert_eq!(failures.len(), 1);
        assert!(
            failures[0].contains("item 4") && failures[0].contains("parent_event_id \"c1\""),
            "{failures:?}"
        );
    }

    #[test]
    fn event_fields() {
        let e = expect(
            "  events: [{llm_guardrail_started: {retry_count: 0, guardrail: g}}, {llm_guardrail_completed: {success: true}}]\n",
        );
        let mut outcome = ok(vec![output("x")]);
        outcome.events = vec![
            event(
                "llm_guardrail_started",
                "a",
                None,
                json!({"retry_count": 0, "guardrail": "g"}),
            ),
            event(
                "llm_guardrail_completed",
                "b",
                None,
                json!({"success": false}),
            ),
        ];
        let failures = check(&e, &outcome);
        assert_eq!(failures.len(), 1);
        assert!(
            failures[0].contains("`success` is false, expected true"),
            "{failures:?}"
        );
    }

    #[test]
    fn hooks_tools_and_manager() {
        let e = expect(
            "  hooks: {before_tool_call: [{tool_name: m, tool_input_keys: [a], has_agent: true}]}\n  tool_calls: {m: 1, other: 0}\n  manager_tools: [{description_contains: Delegate}]\n",
        );
        let mut outcome = ok(vec![output("x")]);
        outcome.hook_calls.insert(
            HookPoint::BeforeToolCall,
            vec![HookCall {
                tool_name: Some("m".into()),
                tool_input: Some(json!({"a": 1})),
                has_agent: true,
                ..Default::default()
            }],
        );
        outcome.tool_runs.insert("m".into(), 1);
        outcome.manager_tools = Some(vec![ToolInfo {
            name: "delegate".into(),
            description: "Delegate work".into(),
        }]);
        assert!(check(&e, &outcome).is_empty(), "{:?}", check(&e, &outcome));
        outcome.hook_calls.clear();
        outcome.tool_runs.clear();
        let failures = check(&e, &outcome);
        assert_eq!(failures.len(), 2, "{failures:?}");
    }

    #[test]
    fn tasks_usage_stream_type() {
        let e = expect(
            "  tasks_output: [{raw: a, agent: R}, {}]\n  usage: {total_tokens: 3}\n  result_type: crew_streaming_output\n  stream: {min_chunks: 2}\n",
        );
        let good = Output {
            kind: ResultKind::CrewStreamingOutput,
            tasks_output: vec![
                TaskView {
                    raw: "a".into(),
                    agent: "R".into(),
                },
                TaskView::default(),
            ],
            usage: Some(UsageView {
                total_tokens: 3,
                ..Default::default()
            }),
            chunks: Some(2),
            ..output("x")
        };
        assert!(check(&e, &ok(vec![good.clone()])).is_empty());
        let bad = Output {
            kind: ResultKind::CrewOutput,
            chunks: None,
            tasks_output: vec![],
            ..good.clone()
        };
        assert_eq!(check(&e, &ok(vec![bad])).len(), 3);
        // Task outputs are not any of the case format's result types.
        let tasks = Output {
            kind: ResultKind::TaskOutputs,
            ..good
        };
        assert!(check(&e, &ok(vec![tasks])).contains(
            &"result_type: got task outputs, expected crew_streaming_output".to_string()
        ));
    }

    #[test]
    fn files() {
        let dir = std::env::temp_dir().join(format!("conformance-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("out.json"), "{\"score\": 4}").unwrap();
        let e = expect("  files: {out.json: {json: {score: 4}}, missing.txt: {exists: true}}\n");
        let mut outcome = ok(vec![output("x")]);
        outcome.workdir = dir.clone();
        let failures = check(&e, &outcome);
        assert_eq!(
            failures,
            vec!["files: `missing.txt` was not written".to_string()]
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
