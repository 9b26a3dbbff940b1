//! What `#[tool]` generates: names, descriptions, schemas, settings, and calls.

use crewai_tools::{Tool, ToolContext, ToolError, ToolHandle, ToolOutput, prepare_arguments, tool};
use serde_json::json;

/// Counts the words in a text.
///
/// # Arguments
/// * `text` - The text whose words are counted.
#[tool]
fn word_counter(text: String) -> usize {
    text.split_whitespace().count()
}

/// Useful for when you need to multiply two numbers together.
#[tool(name = "multiplier", result_as_answer = true, max_usage_count = 3)]
async fn multiply(first_number: i64, second_number: i64) -> Result<i64, String> {
    first_number
        .checked_mul(second_number)
        .ok_or_else(|| format!("{first_number} * {second_number} overflows"))
}

/// Greets someone, in the agent's name.
///
/// # Arguments
/// * `name`: Who to greet.
/// * `excited` - Whether to add an exclamation mark; wrapped onto
///   a second line.
#[tool]
pub fn greet(name: String, excited: Option<bool>, ctx: &ToolContext) -> String {
    let from = ctx.agent_role.as_deref().unwrap_or("nobody");
    let mark = if excited.unwrap_or(false) { "!" } else { "." };
    format!("Hello {name}, from {from}{mark}")
}

#[derive(serde::Serialize)]
struct Stats {
    count: usize,
    longest: String,
}

/// Reports statistics about a list of words.
#[tool]
fn word_stats(words: Vec<String>) -> Stats {
    let longest = words
        .iter()
        .max_by_key(|word| word.len())
        .cloned()
        .unwrap_or_default();
    Stats {
        count: words.len(),
        longest,
    }
}

/// Takes no arguments and always fails.
#[tool]
fn failing_tool() -> Result<String, std::io::Error> {
    Err(std::io::Error::other("the disk is on fire"))
}

fn ctx() -> ToolContext {
    ToolContext::default()
}

#[test]
fn name_and_description_come_from_the_function() {
    let handle = word_counter_tool();
    assert_eq!(handle.name(), "word_counter");
    assert_eq!(handle.description(), "Counts the words in a text.");
    assert_eq!(WordCounter.name(), "word_counter");
    let handle = multiply_tool();
    assert_eq!(handle.name(), "multiplier");
    assert_eq!(
        handle.description(),
        "Useful for when you need to multiply two numbers together."
    );
}

#[test]
fn schema_matches_crewai_for_the_same_signature() {
    // CrewAI's request for `def multiplier(first_number: int, second_number: int)`, made strict.
    assert_eq!(
        serde_json::to_string(&multiply_tool().definition().parameters).unwrap(),
        r#"{"properties":{"first_number":{"title":"First Number","type":"integer"},"second_number":{"title":"Second Number","type":"integer"}},"required":["first_number","second_number"],"type":"object","additionalProperties":false}"#
    );
    assert_eq!(
        serde_json::to_string(&FailingTool.parameters()).unwrap(),
        r#"{"properties":{},"type":"object"}"#
    );
    assert_eq!(
        serde_json::to_string(&failing_tool_tool().definition().parameters).unwrap(),
        r#"{"properties":{},"type":"object","additionalProperties":false,"required":[]}"#
    );
}

#[test]
fn argument_docs_become_property_descriptions() {
    let parameters = Greet.parameters();
    assert_eq!(
        parameters["properties"]["name"],
        json!({"description": "Who to greet.", "title": "Name", "type": "string"})
    );
    assert_eq!(
        parameters["properties"]["excited"]["description"],
        "Whether to add an exclamation mark; wrapped onto a second line."
    );
    assert_eq!(
        parameters["required"],
        json!(["name"]),
        "Option arguments are optional; the context is no argument"
    );
    assert!(parameters["properties"].get("ctx").is_none());
    assert_eq!(Greet.description(), "Greets someone, in the agent's name.");
    assert_eq!(
        WordCounter.parameters()["properties"]["text"]["description"],
        "The text whose words are counted."
    );
}

#[test]
fn settings_reach_the_handle() {
    let handle = multiply_tool();
    assert!(handle.result_as_answer());
    assert_eq!(handle.max_usage_count(), Some(3));
    let plain = word_counter_tool();
    assert!(!plain.result_as_answer());
    assert_eq!(plain.max_usage_count(), None);
    assert_eq!(ToolHandle::from_tool(Multiply).max_usage_count(), Some(3));
}

#[tokio::test]
async fn sync_and_async_functions_run() {
    let output = WordCounter
        .run(json!({"text": "one two three"}), &ctx())
        .await
        .unwrap();
    assert_eq!(output, ToolOutput::Json(json!(3)));
    assert_eq!(output.to_text(), "3");
    let output = Multiply
        .run(json!({"first_number": 6, "second_number": 7}), &ctx())
        .await
        .unwrap();
    assert_eq!(output.to_text(), "42");
}

#[tokio::test]
async fn string_results_are_text_and_structs_are_json() {
    let context = ToolContext {
        agent_role: Some("Researcher".into()),
        ..ToolContext::default()
    };
    let output = Greet
        .run(json!({"name": "Ada", "excited": true}), &context)
        .await
        .unwrap();
    assert_eq!(
        output,
        ToolOutput::Text("Hello Ada, from Researcher!".into())
    );
    let output = Greet.run(json!({"name": "Ada"}), &ctx()).await.unwrap();
    assert_eq!(output.to_text(), "Hello Ada, from nobody.");
    let output = WordStats
        .run(json!({"words": ["a", "abc", "ab"]}), &ctx())
        .await
        .unwrap();
    assert_eq!(
        output,
        ToolOutput::Json(json!({"count": 3, "longest": "abc"}))
    );
}

#[tokio::test]
async fn errors_become_tool_failures() {
    let error = FailingTool.run(json!({}), &ctx()).await.unwrap_err();
    assert!(
        matches!(&error, ToolError::Failed(message) if message == "the disk is on fire"),
        "{error:?}"
    );
    let error = Multiply
        .run(
            json!({"first_number": i64::MAX, "second_number": 2}),
            &ctx(),
        )
        .await
        .unwrap_err();
    assert!(error.to_string().contains("overflows"), "{error}");
    let error = FailingTool
        .run(serde_json::Value::Null, &ctx())
        .await
        .unwrap_err();
    assert!(
        matches!(error, ToolError::Failed(_)),
        "null means no arguments"
    );
}

#[tokio::test]
async fn arguments_that_do_not_fit_are_reported_not_panicked() {
    let error = WordCounter
        .run(json!({"text": 5}), &ctx())
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ToolError::ArgumentsDoNotFit { tool, .. } if tool == "word_counter"),
        "{error:?}"
    );
}

#[tokio::test]
async fn prepared_model_arguments_run() {
    let handle = multiply_tool();
    let args = prepare_arguments(
        &handle.parameters(),
        &json!("{'first_number': '6', 'second_number': 7,}"),
    )
    .unwrap();
    let output = handle.tool().run(args, &ctx()).await.unwrap();
    assert_eq!(output.to_text(), "42");
}

#[test]
fn the_function_stays_callable() {
    assert_eq!(word_counter("a b".into()), 2);
}

mod custom_path {
    use crewai_tools as renamed;

    /// Echoes its input.
    #[renamed::tool(crate = "renamed")]
    pub fn echo(text: String) -> String {
        text
    }

    #[test]
    fn the_crate_path_is_configurable() {
        assert_eq!(echo_tool().name(), "echo");
    }
}

static RELEASED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Blocks its thread until released, the way a blocking client waits for a reply.
#[tool]
fn wait_for_release() -> String {
    let started = std::time::Instant::now();
    while !RELEASED.load(std::sync::atomic::Ordering::SeqCst) {
        if started.elapsed() > std::time::Duration::from_secs(10) {
            return "never released".to_string();
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    "released".to_string()
}

/// Panics, as buggy code does.
#[tool]
fn panicking_tool() -> String {
    panic!("bug in a tool")
}

#[tokio::test(flavor = "current_thread")]
async fn sync_functions_do_not_block_the_runtime() {
    // On a single-threaded runtime the releasing task can only run if the blocking tool is not
    // occupying the runtime's thread.
    tokio::spawn(async { RELEASED.store(true, std::sync::atomic::Ordering::SeqCst) });
    let output = WaitForRelease.run(json!({}), &ctx()).await.unwrap();
    assert_eq!(output.to_text(), "released");
}

#[tokio::test]
async fn panics_become_tool_failures() {
    let error = PanickingTool.run(json!({}), &ctx()).await.unwrap_err();
    assert!(
        matches!(&error, ToolError::Panicked { tool, message } if tool == "panicking_tool" && message == "bug in a tool"),
        "{error:?}"
    );
}
