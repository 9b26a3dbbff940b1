//! [`TypedTool`]: tools with Rust types for their arguments and output.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::schema::schema_for;
use crate::tool::{EnvVar, Tool, ToolContext, ToolError, ToolOutput};

/// A tool whose arguments are a Rust type. Every `TypedTool` is a [`Tool`]: the argument schema
/// comes from `schemars` (shaped like pydantic's, see [`crate::schema_for`]), the arguments are
/// deserialised before [`TypedTool::call`], and the output is serialised (a string output is
/// passed as text, anything else as JSON).
///
/// ```
/// use crewai_tools::{ToolContext, ToolError, ToolHandle, TypedTool};
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct AddArgs {
///     /// The first addend.
///     a: i64,
///     /// The second addend.
///     b: i64,
/// }
///
/// struct Add;
///
/// #[crewai_tools::async_trait]
/// impl TypedTool for Add {
///     type Args = AddArgs;
///     type Output = i64;
///     fn name(&self) -> &str { "add" }
///     fn description(&self) -> &str { "Adds two integers." }
///     async fn call(&self, args: AddArgs, _ctx: &ToolContext) -> Result<i64, ToolError> {
///         args.a.checked_add(args.b).ok_or_else(|| ToolError::failed("the sum overflows"))
///     }
/// }
///
/// let handle = ToolHandle::from_tool(Add);
/// assert_eq!(handle.definition().parameters["properties"]["a"]["title"], "A");
/// ```
#[async_trait]
pub trait TypedTool: Send + Sync {
    type Args: DeserializeOwned + JsonSchema + Send;
    type Output: Serialize + Send;

    /// The name the model calls it by (sanitised when sent).
    fn name(&self) -> &str;
    /// What it does, for the model.
    fn description(&self) -> &str;
    /// Runs the tool.
    async fn call(&self, args: Self::Args, ctx: &ToolContext) -> Result<Self::Output, ToolError>;
    /// Environment variables the tool needs.
    fn env_vars(&self) -> Vec<EnvVar> {
        Vec::new()
    }
    /// See [`Tool::result_as_answer`].
    fn result_as_answer(&self) -> bool {
        false
    }
    /// See [`Tool::max_usage_count`].
    fn max_usage_count(&self) -> Option<u32> {
        None
    }
    /// See [`Tool::cache_result`].
    fn cache_result(&self, _args: &Value, _output: &ToolOutput) -> bool {
        true
    }
}

#[async_trait]
impl<T: TypedTool> Tool for T {
    fn name(&self) -> &str {
        TypedTool::name(self)
    }

    fn description(&self) -> &str {
        TypedTool::description(self)
    }

    fn parameters(&self) -> Value {
        schema_for::<T::Args>()
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args = parse_typed_arguments::<T::Args>(TypedTool::name(self), args)?;
        let output = self.call(args, ctx).await?;
        serialize_output(&output)
    }

    fn env_vars(&self) -> Vec<EnvVar> {
        TypedTool::env_vars(self)
    }

    fn result_as_answer(&self) -> bool {
        TypedTool::result_as_answer(self)
    }

    fn max_usage_count(&self) -> Option<u32> {
        TypedTool::max_usage_count(self)
    }

    fn cache_result(&self, args: &Value, output: &ToolOutput) -> bool {
        TypedTool::cache_result(self, args, output)
    }
}

/// Deserialises validated arguments into the tool's argument type.
pub fn parse_typed_arguments<A: DeserializeOwned>(
    tool_name: &str,
    args: Value,
) -> Result<A, ToolError> {
    // `null` means "no arguments" to a tool without any.
    let args = if args.is_null() {
        Value::Object(Default::default())
    } else {
        args
    };
    serde_json::from_value(args).map_err(|source| ToolError::ArgumentsDoNotFit {
        tool: tool_name.to_string(),
        source,
    })
}

/// A serialisable result as tool output: strings as text, everything else as JSON.
pub fn serialize_output<O: Serialize + ?Sized>(output: &O) -> Result<ToolOutput, ToolError> {
    match serde_json::to_value(output) {
        Ok(Value::String(text)) => Ok(ToolOutput::Text(text)),
        Ok(value) => Ok(ToolOutput::Json(value)),
        Err(error) => Err(ToolError::caused(
            "the tool's result could not be serialised",
            error,
        )),
    }
}

/// Runs the body of a synchronous `#[tool]` function on tokio's blocking pool, so a slow or
/// blocking function does not stall the agents' async threads, and a panic in it becomes
/// [`ToolError::Panicked`] (with the panic's text) instead of tearing down the run. Outside a
/// tokio runtime it runs inline, its panics caught the same way.
pub async fn run_blocking<T, F>(tool_name: &str, body: F) -> Result<T, ToolError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let panicked = |payload: Box<dyn std::any::Any + Send>| ToolError::Panicked {
        tool: tool_name.to_string(),
        message: panic_message(payload.as_ref()),
    };
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            runtime
                .spawn_blocking(body)
                .await
                .map_err(|error| match error.try_into_panic() {
                    Ok(payload) => panicked(payload),
                    Err(_) => ToolError::Failed(format!(
                        "the tool '{tool_name}' was stopped before it finished"
                    )),
                })
        }
        Err(_) => std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).map_err(panicked),
    }
}

/// The text of a panic payload: `panic!("...")` gives a `&str` or a `String`; anything else
/// (`std::panic::panic_any`) has no text to show. Every crate that catches a panic reports it
/// with this.
///
/// ```
/// use crewai_tools::panic_message;
/// let payload = std::panic::catch_unwind(|| panic!("the answer is {}", 42)).unwrap_err();
/// assert_eq!(panic_message(payload.as_ref()), "the answer is 42");
/// ```
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|text| text.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a text payload".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn blocking_bodies_run_and_panics_become_failures() {
        assert_eq!(run_blocking("t", || 2 + 2).await.unwrap(), 4);
        let error = run_blocking("boom", || -> u8 { panic!("kaboom {}", 7) })
            .await
            .unwrap_err();
        assert!(
            matches!(&error, ToolError::Panicked { tool, message } if tool == "boom" && message == "kaboom 7"),
            "{error:?}"
        );
        assert_eq!(
            error.to_string(),
            "the tool 'boom' crashed (it panicked): kaboom 7"
        );
    }

    #[test]
    fn without_a_runtime_bodies_run_inline() {
        let result = futures::executor::block_on(run_blocking("t", || "inline"));
        assert_eq!(result.unwrap(), "inline");
        let error = futures::executor::block_on(run_blocking("t", || -> u8 { panic!("inline") }))
            .unwrap_err();
        assert!(
            matches!(&error, ToolError::Panicked { message, .. } if message == "inline"),
            "{error:?}"
        );
    }
}
