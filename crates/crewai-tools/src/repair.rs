//! Repairing the almost-JSON models write.

use serde_json::Value;

/// Parses JSON a model wrote, repairing the usual mistakes: code fences around it, prose before
/// or after it, trailing commas, single-quoted strings, Python's `True`/`False`/`None`, unquoted
/// keys and missing closing brackets. `None` when nothing JSON-like can be recovered.
///
/// ```
/// use crewai_tools::repair_json;
/// use serde_json::json;
/// assert_eq!(repair_json("```json\n{'a': True, b: [1, 2,],}\n```"), Some(json!({"a": true, "b": [1, 2]})));
/// assert_eq!(repair_json("no json here"), None);
/// ```
pub fn repair_json(text: &str) -> Option<Value> {
    let text = text.trim();
    if let Ok(value) = serde_json::from_str(text) {
        return Some(value);
    }
    let unfenced = strip_code_fence(text);
    if let Ok(value) = serde_json::from_str(unfenced) {
        return Some(value);
    }
    let candidate = json_like_span(unfenced)?;
    if let Ok(value) = serde_json::from_str(candidate) {
        return Some(value);
    }
    serde_json::from_str(&rewrite(candidate)).ok()
}

/// The text inside the first Markdown code fence, or the text itself.
fn strip_code_fence(text: &str) -> &str {
    let Some(start) = text.find("```") else {
        return text;
    };
    let after_fence = &text[start + 3..];
    // Skip the info string (`json`, `python`, ...) up to the end of the fence line.
    let body_start = after_fence
        .find('\n')
        .map_or(after_fence.len(), |newline| newline + 1);
    let info = &after_fence[..body_start];
    let body = if info
        .trim()
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        &after_fence[body_start..]
    } else {
        // "```{...}```" on one line: there is no info string.
        after_fence
    };
    match body.find("```") {
        Some(end) => body[..end].trim(),
        None => body.trim(),
    }
}

/// From the first `{` or `[` to the matching last `}` or `]` (or the end when it was never closed).
fn json_like_span(text: &str) -> Option<&str> {
    let start = text.find(['{', '['])?;
    let closer = if text[start..].starts_with('{') {
        '}'
    } else {
        ']'
    };
    match text.rfind(closer) {
        Some(end) if end > start => Some(&text[start..=end]),
        _ => Some(&text[start..]),
    }
}

/// Rewrites almost-JSON into JSON, one character at a time, outside and inside strings.
fn rewrite(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len() + 16);
    let mut open: Vec<char> = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' | '\'' => i = copy_string(&chars, i, &mut out),
            '{' | '[' => {
                open.push(if c == '{' { '}' } else { ']' });
                out.push(c);
                i += 1;
            }
            '}' | ']' => {
                if open.last() == Some(&c) {
                    open.pop();
                }
                out.push(c);
                i += 1;
            }
            ',' => {
                let next = chars[i + 1..].iter().find(|c| !c.is_whitespace());
                if !matches!(next, None | Some('}') | Some(']')) {
                    out.push(',');
                }
                i += 1;
            }
            c if c.is_alphabetic() || c == '_' || c == '$' => {
                let start = i;
                while i < chars.len()
                    && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '$')
                {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let is_key = chars[i..].iter().find(|c| !c.is_whitespace()) == Some(&':');
                if is_key {
                    out.push_str(&serde_json::Value::String(word).to_string());
                } else {
                    out.push_str(match word.as_str() {
                        "True" => "true",
                        "False" => "false",
                        "None" => "null",
                        other => other,
                    });
                }
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    // Close what the model left open; a dangling comma would make that invalid again.
    while out.trim_end().ends_with(',') {
        let trimmed = out.trim_end().len() - 1;
        out.truncate(trimmed);
    }
    while let Some(closer) = open.pop() {
        out.push(closer);
    }
    out
}

/// Copies the string starting at `chars[start]` (a `"` or `'`) as a double-quoted JSON string and
/// returns the index after it. An unterminated string is closed at the end of the text.
fn copy_string(chars: &[char], start: usize, out: &mut String) -> usize {
    let quote = chars[start];
    out.push('"');
    let mut i = start + 1;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' && i + 1 < chars.len() {
            let escaped = chars[i + 1];
            if escaped == '\'' {
                out.push('\'');
            } else {
                out.push('\\');
                out.push(escaped);
            }
            i += 2;
            continue;
        }
        if c == quote {
            out.push('"');
            return i + 1;
        }
        match c {
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            other => out.push(other),
        }
        i += 1;
    }
    out.push('"');
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn valid_json_is_untouched() {
        assert_eq!(repair_json(r#"{"a": "it's"}"#), Some(json!({"a": "it's"})));
        assert_eq!(repair_json("42"), Some(json!(42)));
    }

    #[test]
    fn repairs_common_mistakes() {
        let cases = [
            ("{\"a\": 1,}", json!({"a": 1})),
            ("[1, 2, 3,]", json!([1, 2, 3])),
            ("{'a': 'say \"hi\"'}", json!({"a": "say \"hi\""})),
            ("{'a': 'it\\'s'}", json!({"a": "it's"})),
            ("{a: 1, b_2: None}", json!({"a": 1, "b_2": null})),
            (
                "{\"ok\": True, \"no\": False}",
                json!({"ok": true, "no": false}),
            ),
            ("{\"a\": {\"b\": [1, 2", json!({"a": {"b": [1, 2]}})),
            ("{\"a\": \"unterminated", json!({"a": "unterminated"})),
            ("```json\n{\"a\": 1}\n```", json!({"a": 1})),
            ("```{\"a\": 1}```", json!({"a": 1})),
            ("Action Input: {\"a\": 1}\nObservation", json!({"a": 1})),
            (
                "{'text': 'line one\nline two'}",
                json!({"text": "line one\nline two"}),
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(repair_json(text), Some(expected), "case {text:?}");
        }
    }

    #[test]
    fn words_inside_strings_are_kept() {
        assert_eq!(
            repair_json("{'a': 'True or None', }"),
            Some(json!({"a": "True or None"}))
        );
    }

    #[test]
    fn hopeless_text_gives_none() {
        assert_eq!(repair_json("just words"), None);
        assert_eq!(repair_json(""), None);
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    /// Almost-JSON: the tokens repair looks at, in any order.
    fn json_like_text() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop_oneof![
                "[{}\\[\\],:'\"\\\\ \n]",
                Just("```".to_string()),
                Just("```json\n".to_string()),
                Just("True".to_string()),
                Just("None".to_string()),
                "[a-z_$0-9é]{1,5}",
                any::<String>(),
            ],
            0..32,
        )
        .prop_map(|parts| parts.concat())
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            (-1000i32..1000).prop_map(|n| Value::from(f64::from(n) / 8.0)),
            any::<String>().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::vec((any::<String>(), inner), 0..5)
                    .prop_map(|fields| Value::Object(fields.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn arbitrary_text_never_panics(text in any::<String>()) {
            let _ = repair_json(&text);
        }

        #[test]
        fn almost_json_never_panics(text in json_like_text()) {
            let _ = repair_json(&text);
        }

        #[test]
        fn valid_json_is_returned_unchanged(value in json_value(), pretty in any::<bool>()) {
            let text = if pretty {
                serde_json::to_string_pretty(&value)
            } else {
                serde_json::to_string(&value)
            }
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(repair_json(&text), Some(value));
        }

        #[test]
        fn fenced_json_is_recovered(value in json_value()) {
            let text = serde_json::to_string(&value).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assume!(!text.contains("```"));
            prop_assert_eq!(repair_json(&format!("```json\n{text}\n```")), Some(value));
        }
    }
}
