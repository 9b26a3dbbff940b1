//! A request body reduced to its structure, whichever provider wire format it is in.
//!
//! Each format spells the same things differently (see [`WireFormat`]); [`Shape::of`] reads one
//! body into the provider-neutral [`Shape`] that [`super::compare`] compares. Nothing here
//! judges: a field the body does not have is absent (or its API default, where the API defines
//! one, as `stream: false`).

use serde_json::{Map, Value};

use crate::case::Provider;

/// The wire format of a provider's request bodies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireFormat {
    /// OpenAI chat completions (also Azure OpenAI): `messages`, `tools[].function`,
    /// `response_format.json_schema`, `stop`.
    Chat,
    /// OpenAI Responses: `instructions`, `input` items (`function_call`,
    /// `function_call_output`), flat `tools[]`, `text.format`.
    Responses,
    /// Anthropic messages: top-level `system`, content blocks (`tool_use` / `tool_result`),
    /// `tools[].input_schema`, `stop_sequences`.
    Anthropic,
    /// Gemini: `systemInstruction`, `contents` with roles user/model and `functionCall` /
    /// `functionResponse` parts, `tools[].functionDeclarations`, `toolConfig`,
    /// `generationConfig.responseSchema` / `stopSequences`.
    Gemini,
}

impl WireFormat {
    pub fn of(provider: Provider) -> WireFormat {
        match provider {
            Provider::Openai | Provider::Azure => WireFormat::Chat,
            Provider::OpenaiResponses => WireFormat::Responses,
            Provider::Anthropic => WireFormat::Anthropic,
            Provider::Gemini => WireFormat::Gemini,
        }
    }
}

/// How a request offers its tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// In the API's tool field (native function calling).
    Native,
    /// Listed in the prompt text (`Tool Name: ...` lines of the ReAct instructions).
    Text,
}

/// One tool offered.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolShape {
    /// As sent (compare with [`super::schema::tool_key`]).
    pub name: String,
    /// None for a tool listed in text.
    pub description: Option<String>,
    /// The parameters' JSON schema (None for a tool listed in text).
    pub parameters: Option<Value>,
    pub strict: Option<bool>,
}

/// The structured-output request.
#[derive(Debug, Clone, PartialEq)]
pub struct FormatShape {
    /// `json_schema`, `json_object`, `text`, or Gemini's MIME type.
    pub kind: String,
    pub name: Option<String>,
    pub schema: Option<Value>,
    pub strict: Option<bool>,
}

/// A tool call an assistant message carries.
#[derive(Debug, Clone, PartialEq)]
pub struct CallShape {
    /// The call's id (Gemini without ids: the function name, which is what answers refer to).
    pub id: String,
    pub name: String,
}

/// One message (or Responses input item), by role.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageShape {
    /// The role as the format names it (`system` for a top-level system prompt; a Responses
    /// item without a role by its `type`).
    pub role: String,
    pub calls: Vec<CallShape>,
    /// The ids of the tool calls this message answers (a tool message's `tool_call_id`,
    /// Anthropic `tool_result` blocks, Responses `function_call_output`, Gemini
    /// `functionResponse` parts).
    pub answers: Vec<String>,
    /// Its text (only read for `Tool Name:` lines; never compared).
    pub text: String,
}

/// Everything [`super::compare`] looks at in one request body.
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    pub model: Option<String>,
    pub protocol: Protocol,
    /// Native tools, or (when there are none) the tools the prompt lists in text.
    pub tools: Vec<ToolShape>,
    /// Normalised: `auto`, `none`, `required`, `function:<name>` or the raw JSON of anything
    /// else; absent is the API default (`auto` with tools, `none` without).
    pub tool_choice: String,
    pub response_format: Option<FormatShape>,
    pub stream: bool,
    pub stream_options: Option<Value>,
    /// Absent is the empty list.
    pub stop: Vec<String>,
    pub messages: Vec<MessageShape>,
}

fn text(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| match p {
                Value::String(s) => Some(s.clone()),
                other => other
                    .get("text")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Some(Value::Object(o)) => text(o.get("parts").or_else(|| o.get("text"))),
        _ => String::new(),
    }
}

/// The items of the array under `key` (none when there is no array there).
fn items<'v>(value: &'v Value, key: &str) -> impl Iterator<Item = &'v Value> {
    value
        .get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn str_of(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_string)
}

fn stop_list(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

/// `Tool Name: X` lines of a ReAct tool listing (older CrewAI wrote `X(arg: type, ...)`).
fn listed_tools(messages: &[MessageShape]) -> Vec<ToolShape> {
    let mut out: Vec<ToolShape> = Vec::new();
    for message in messages.iter().filter(|m| m.role != "assistant") {
        for line in message.text.lines() {
            let Some(rest) = line.trim_start().strip_prefix("Tool Name:") else {
                continue;
            };
            let name = rest.split('(').next().unwrap_or(rest).trim();
            if !name.is_empty() && !out.iter().any(|t| t.name == name) {
                out.push(ToolShape {
                    name: name.to_string(),
                    description: None,
                    parameters: None,
                    strict: None,
                });
            }
        }
    }
    out
}

fn default_choice(tools: &[ToolShape]) -> String {
    if tools.is_empty() { "none" } else { "auto" }.to_string()
}

/// OpenAI's `tool_choice` (chat and Responses spell the forced form differently).
fn openai_choice(choice: Option<&Value>, tools: &[ToolShape]) -> String {
    match choice {
        None | Some(Value::Null) => default_choice(tools),
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            let name = other
                .get("function")
                .and_then(|f| str_of(f, "name"))
                .or_else(|| str_of(other, "name"));
            match (str_of(other, "type").as_deref(), name) {
                (Some("function"), Some(name)) => format!("function:{name}"),
                _ => other.to_string(),
            }
        }
    }
}

impl Shape {
    /// The structure of `body`, read as `format`.
    pub fn of(format: WireFormat, body: &Value) -> Shape {
        let mut shape = match format {
            WireFormat::Chat => chat(body),
            WireFormat::Responses => responses(body),
            WireFormat::Anthropic => anthropic(body),
            WireFormat::Gemini => gemini(body),
        };
        if shape.tools.is_empty() {
            let listed = listed_tools(&shape.messages);
            if !listed.is_empty() {
                shape.protocol = Protocol::Text;
                shape.tools = listed;
            }
        }
        shape
    }
}

fn empty(body: &Value) -> Shape {
    Shape {
        model: str_of(body, "model"),
        protocol: Protocol::Native,
        tools: Vec::new(),
        tool_choice: String::new(),
        response_format: None,
        stream: body.get("stream").and_then(Value::as_bool).unwrap_or(false),
        stream_options: body.get("stream_options").cloned(),
        stop: Vec::new(),
        messages: Vec::new(),
    }
}

fn chat(body: &Value) -> Shape {
    let mut shape = empty(body);
    for tool in items(body, "tools") {
        let function = tool.get("function").unwrap_or(tool);
        shape.tools.push(ToolShape {
            name: str_of(function, "name")
                .or_else(|| str_of(tool, "type"))
                .unwrap_or_default(),
            description: str_of(function, "description"),
            parameters: function.get("parameters").cloned(),
            strict: function.get("strict").and_then(Value::as_bool),
        });
    }
    shape.tool_choice = openai_choice(body.get("tool_choice"), &shape.tools);
    shape.response_format = body.get("response_format").map(|format| {
        let inner = format.get("json_schema");
        FormatShape {
            kind: str_of(format, "type").unwrap_or_default(),
            name: inner.and_then(|i| str_of(i, "name")),
            schema: inner.and_then(|i| i.get("schema")).cloned(),
            strict: inner.and_then(|i| i.get("strict")).and_then(Value::as_bool),
        }
    });
    shape.stop = stop_list(body.get("stop"));
    for message in items(body, "messages") {
        let calls = items(message, "tool_calls")
            .map(|call| CallShape {
                id: str_of(call, "id").unwrap_or_default(),
                name: call
                    .get("function")
                    .and_then(|f| str_of(f, "name"))
                    .unwrap_or_default(),
            })
            .collect();
        shape.messages.push(MessageShape {
            role: str_of(message, "role").unwrap_or_default(),
            calls,
            answers: str_of(message, "tool_call_id").into_iter().collect(),
            text: text(message.get("content")),
        });
    }
    shape
}

fn responses(body: &Value) -> Shape {
    let mut shape = empty(body);
    for tool in items(body, "tools") {
        shape.tools.push(ToolShape {
            name: str_of(tool, "name")
                .or_else(|| str_of(tool, "type"))
                .unwrap_or_default(),
            description: str_of(tool, "description"),
            parameters: tool.get("parameters").cloned(),
            strict: tool.get("strict").and_then(Value::as_bool),
        });
    }
    shape.tool_choice = openai_choice(body.get("tool_choice"), &shape.tools);
    shape.response_format = body
        .get("text")
        .and_then(|t| t.get("format"))
        .map(|format| FormatShape {
            kind: str_of(format, "type").unwrap_or_default(),
            name: str_of(format, "name"),
            schema: format.get("schema").cloned(),
            strict: format.get("strict").and_then(Value::as_bool),
        });
    if let Some(instructions) = body.get("instructions").filter(|v| !v.is_null()) {
        shape.messages.push(system(text(Some(instructions))));
    }
    match body.get("input") {
        Some(Value::String(s)) => shape.messages.push(MessageShape {
            role: "user".into(),
            calls: Vec::new(),
            answers: Vec::new(),
            text: s.clone(),
        }),
        Some(Value::Array(items)) => {
            for item in items {
                let kind = str_of(item, "type");
                let call_id = str_of(item, "call_id").unwrap_or_default();
                shape.messages.push(match kind.as_deref() {
                    Some("function_call") => MessageShape {
                        role: "function_call".into(),
                        calls: vec![CallShape {
                            id: call_id,
                            name: str_of(item, "name").unwrap_or_default(),
                        }],
                        answers: Vec::new(),
                        text: String::new(),
                    },
                    Some("function_call_output") => MessageShape {
                        role: "function_call_output".into(),
                        calls: Vec::new(),
                        answers: vec![call_id],
                        text: String::new(),
                    },
                    _ => MessageShape {
                        role: str_of(item, "role").or(kind).unwrap_or_default(),
                        calls: Vec::new(),
                        answers: Vec::new(),
                        text: text(item.get("content")),
                    },
                });
            }
        }
        _ => {}
    }
    shape
}

fn system(text: String) -> MessageShape {
    MessageShape {
        role: "system".into(),
        calls: Vec::new(),
        answers: Vec::new(),
        text,
    }
}

fn anthropic(body: &Value) -> Shape {
    let mut shape = empty(body);
    for tool in items(body, "tools") {
        shape.tools.push(ToolShape {
            name: str_of(tool, "name").unwrap_or_default(),
            description: str_of(tool, "description"),
            parameters: tool.get("input_schema").cloned(),
            strict: tool.get("strict").and_then(Value::as_bool),
        });
    }
    shape.tool_choice = match body.get("tool_choice") {
        None | Some(Value::Null) => default_choice(&shape.tools),
        Some(choice) => match (str_of(choice, "type").as_deref(), str_of(choice, "name")) {
            (Some("auto"), _) => "auto".into(),
            (Some("any"), _) => "required".into(),
            (Some("none"), _) => "none".into(),
            (Some("tool"), Some(name)) => format!("function:{name}"),
            _ => choice.to_string(),
        },
    };
    shape.response_format = body.get("output_format").map(|format| FormatShape {
        kind: str_of(format, "type").unwrap_or_default(),
        name: None,
        schema: format.get("schema").cloned(),
        strict: None,
    });
    shape.stop = stop_list(body.get("stop_sequences"));
    if let Some(prompt) = body.get("system").filter(|v| !v.is_null()) {
        shape.messages.push(system(text(Some(prompt))));
    }
    for message in items(body, "messages") {
        let blocks: &[Value] = message
            .get("content")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice);
        fn of_type<'a>(blocks: &'a [Value], kind: &'a str) -> impl Iterator<Item = &'a Value> {
            blocks
                .iter()
                .filter(move |b| b.get("type").and_then(Value::as_str) == Some(kind))
        }
        shape.messages.push(MessageShape {
            role: str_of(message, "role").unwrap_or_default(),
            calls: of_type(blocks, "tool_use")
                .map(|b| CallShape {
                    id: str_of(b, "id").unwrap_or_default(),
                    name: str_of(b, "name").unwrap_or_default(),
                })
                .collect(),
            answers: of_type(blocks, "tool_result")
                .map(|b| str_of(b, "tool_use_id").unwrap_or_default())
                .collect(),
            text: text(message.get("content")),
        });
    }
    shape
}

fn gemini(body: &Value) -> Shape {
    let mut shape = empty(body);
    for tool in items(body, "tools") {
        let declarations = tool
            .get("functionDeclarations")
            .or_else(|| tool.get("function_declarations"))
            .and_then(Value::as_array);
        for declaration in declarations.into_iter().flatten() {
            shape.tools.push(ToolShape {
                name: str_of(declaration, "name").unwrap_or_default(),
                description: str_of(declaration, "description"),
                parameters: declaration
                    .get("parameters")
                    .or_else(|| declaration.get("parametersJsonSchema"))
                    .cloned(),
                strict: None,
            });
        }
    }
    let calling = body
        .get("toolConfig")
        .and_then(|c| c.get("functionCallingConfig"));
    shape.tool_choice = match calling {
        None => default_choice(&shape.tools),
        Some(config) => {
            let allowed: Vec<&str> = items(config, "allowedFunctionNames")
                .filter_map(Value::as_str)
                .collect();
            match (
                str_of(config, "mode").map(|m| m.to_ascii_uppercase()),
                allowed.as_slice(),
            ) {
                (Some(m), [one]) if m == "ANY" => format!("function:{one}"),
                (Some(m), _) if m == "ANY" => "required".into(),
                (Some(m), _) if m == "NONE" => "none".into(),
                (Some(m), _) if m == "AUTO" => "auto".into(),
                _ => config.to_string(),
            }
        }
    };
    let empty_config = Value::Object(Map::new());
    let generation = body.get("generationConfig").unwrap_or(&empty_config);
    let schema = generation
        .get("responseSchema")
        .or_else(|| generation.get("responseJsonSchema"));
    shape.response_format = match (str_of(generation, "responseMimeType"), schema) {
        (None, None) => None,
        (kind, schema) => Some(FormatShape {
            kind: kind.unwrap_or_default(),
            name: None,
            schema: schema.cloned(),
            strict: None,
        }),
    };
    shape.stop = stop_list(generation.get("stopSequences"));
    if let Some(prompt) = body
        .get("systemInstruction")
        .or_else(|| body.get("system_instruction"))
    {
        shape.messages.push(system(text(Some(prompt))));
    }
    for content in items(body, "contents") {
        let parts: &[Value] = content
            .get("parts")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice);
        // Gemini may carry no call ids: a response answers the call of the same name.
        let id_of = |part: &Value| str_of(part, "id").or_else(|| str_of(part, "name"));
        shape.messages.push(MessageShape {
            role: str_of(content, "role").unwrap_or_else(|| "user".into()),
            calls: parts
                .iter()
                .filter_map(|p| p.get("functionCall"))
                .map(|call| CallShape {
                    id: id_of(call).unwrap_or_default(),
                    name: str_of(call, "name").unwrap_or_default(),
                })
                .collect(),
            answers: parts
                .iter()
                .filter_map(|p| p.get("functionResponse"))
                .filter_map(id_of)
                .collect(),
            text: text(content.get("parts")),
        });
    }
    shape
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_chat_bodies() {
        let body = json!({"model": "gpt-4o", "stop": [], "tool_choice": {"type": "function", "function": {"name": "m"}},
            "tools": [{"type": "function", "function": {"name": "m", "description": "d", "strict": true, "parameters": {"type": "object"}}}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "S", "schema": {"type": "object"}, "strict": true}},
            "messages": [{"role": "system", "content": "s"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "m", "arguments": "{}"}}]},
                         {"role": "tool", "tool_call_id": "c1", "content": "42"}]});
        let shape = Shape::of(WireFormat::Chat, &body);
        assert_eq!(shape.model.as_deref(), Some("gpt-4o"));
        assert_eq!(shape.protocol, Protocol::Native);
        assert_eq!(shape.tools[0].strict, Some(true));
        assert_eq!(shape.tool_choice, "function:m");
        assert_eq!(
            shape.response_format.as_ref().unwrap().name.as_deref(),
            Some("S")
        );
        assert!(shape.stop.is_empty() && !shape.stream);
        assert_eq!(
            shape.messages[1].calls,
            vec![CallShape {
                id: "c1".into(),
                name: "m".into()
            }]
        );
        assert_eq!(shape.messages[2].answers, vec!["c1".to_string()]);
    }

    #[test]
    fn a_react_prompt_lists_its_tools_in_text() {
        let body = json!({"messages": [{"role": "system", "content": "Tools:\n\nTool Name: Delegate work to coworker(task: str, context: str)\nTool Description: d\nTool Name: search\n"}]});
        let shape = Shape::of(WireFormat::Chat, &body);
        assert_eq!(shape.protocol, Protocol::Text);
        let names: Vec<&str> = shape.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["Delegate work to coworker", "search"]);
        assert_eq!(
            shape.tool_choice, "none",
            "no native tools: the API default"
        );
    }

    #[test]
    fn reads_the_other_formats() {
        let anthropic = json!({"model": "claude", "system": [{"type": "text", "text": "S"}], "stop_sequences": ["X"],
            "tools": [{"name": "t", "description": "d", "input_schema": {"type": "object"}}], "tool_choice": {"type": "any"},
            "messages": [{"role": "user", "content": "hi"},
                         {"role": "assistant", "content": [{"type": "tool_use", "id": "u1", "name": "t", "input": {}}]},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "u1", "content": "r"}]}]});
        let shape = Shape::of(WireFormat::Anthropic, &anthropic);
        let roles: Vec<&str> = shape.messages.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "user"]);
        assert_eq!(
            (shape.tool_choice.as_str(), shape.stop.clone()),
            ("required", vec!["X".to_string()])
        );
        assert_eq!(shape.messages[3].answers, ["u1"]);

        let gemini = json!({"systemInstruction": {"parts": [{"text": "S"}]},
            "contents": [{"role": "user", "parts": [{"text": "hi"}]}, {"role": "model", "parts": [{"functionCall": {"name": "t", "args": {}}}]},
                         {"role": "user", "parts": [{"functionResponse": {"name": "t", "response": {}}}]}],
            "tools": [{"functionDeclarations": [{"name": "t", "description": "d", "parameters": {"type": "OBJECT"}}]}],
            "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["t"]}},
            "generationConfig": {"responseMimeType": "application/json", "responseSchema": {"type": "OBJECT"}, "stopSequences": ["Y"]}});
        let shape = Shape::of(WireFormat::Gemini, &gemini);
        assert_eq!(shape.tool_choice, "function:t");
        assert_eq!(shape.messages[2].calls[0].id, "t");
        assert_eq!(shape.messages[3].answers, ["t"]);
        assert_eq!(shape.response_format.unwrap().kind, "application/json");
        assert_eq!(shape.stop, ["Y"]);

        let responses = json!({"model": "gpt-4o", "instructions": "S", "stream": true,
            "input": [{"role": "user", "content": "hi"}, {"type": "function_call", "call_id": "f1", "name": "t", "arguments": "{}"},
                      {"type": "function_call_output", "call_id": "f1", "output": "r"}],
            "tools": [{"type": "function", "name": "t", "parameters": {}}], "tool_choice": {"type": "function", "name": "t"},
            "text": {"format": {"type": "json_schema", "name": "S", "schema": {}, "strict": true}}});
        let shape = Shape::of(WireFormat::Responses, &responses);
        let roles: Vec<&str> = shape.messages.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(
            roles,
            ["system", "user", "function_call", "function_call_output"]
        );
        assert_eq!(shape.tool_choice, "function:t");
        assert!(shape.stream);
        assert_eq!(shape.response_format.unwrap().name.as_deref(), Some("S"));
    }
}
