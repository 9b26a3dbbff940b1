//! Calls a model with one tool, runs the tool, and prints the final answer and the token usage.
//!
//! ```text
//! OPENAI_API_KEY=sk-... cargo run -p crewai-llm --example tool_call
//! # or against any OpenAI-compatible server, no key needed for a local one:
//! OPENAI_BASE_URL=http://127.0.0.1:8000/v1 cargo run -p crewai-llm --example tool_call -- "What is 6 * 7?"
//! ```
//! The model comes from `MODEL` (default `gpt-4.1-mini`); any provider prefix works.

use crewai_llm::{LlmError, LlmRequest, Message, ToolDefinition, Usage, default_llm};
use serde_json::{Value, json};

fn multiply(arguments: &Value) -> String {
    let number = |key: &str| arguments.get(key).and_then(Value::as_f64);
    match (number("a"), number("b")) {
        (Some(a), Some(b)) => format!("{}", a * b),
        _ => format!("multiply needs numbers `a` and `b`, got {arguments}"),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), LlmError> {
    let question = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "What is 6 times 7? Use the tool.".to_string());
    let llm = default_llm()?;
    let tool = ToolDefinition {
        name: "multiply".into(),
        description: "Multiplies two numbers.".into(),
        parameters: json!({
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
            "additionalProperties": false
        }),
        strict: true,
    };
    let mut messages = vec![
        Message::system("You answer arithmetic questions with the multiply tool."),
        Message::user(question),
    ];
    let mut usage = Usage::default();
    // A few rounds at most: each either calls tools or answers.
    for _ in 0..4 {
        let reply = llm
            .call(LlmRequest::new(messages.clone()).with_tools(vec![tool.clone()]))
            .await?;
        usage += reply.usage;
        if reply.tool_calls.is_empty() {
            println!("{}", reply.content.unwrap_or_default());
            println!(
                "({} model calls, {} tokens)",
                usage.successful_requests, usage.total_tokens
            );
            return Ok(());
        }
        messages.push(reply.to_message());
        for call in &reply.tool_calls {
            let result = multiply(&call.arguments);
            eprintln!("tool {}({}) = {result}", call.name, call.arguments);
            messages.push(Message::tool_result(&call.id, &call.name, result));
        }
    }
    Err(LlmError::Unsupported(format!(
        "{} kept calling tools without answering",
        llm.model()
    )))
}
