//! Checking, before a crew starts, that every tool has the environment variables it declares.

use crate::handle::ToolHandle;
use crate::tool::ToolError;

/// Fails with [`ToolError::MissingEnvVar`] naming the first required variable (without a
/// default) that is unset or empty, in tool order.
///
/// ```
/// use crewai_tools::{check_env_vars, DynamicTool, EnvVar, ToolError, ToolOutput};
/// let tool = DynamicTool::new("search", "Searches.", serde_json::json!({"type": "object"}),
///     |_a, _c| async { Ok(ToolOutput::Text(String::new())) })
///     .with_env_vars(vec![EnvVar {
///         name: "CREWAI_DOC_EXAMPLE_UNSET_KEY".into(),
///         description: "API key for the search service".into(),
///         required: true,
///         default: None,
///     }])
///     .into_handle();
/// let error = check_env_vars(&[tool]).unwrap_err();
/// assert!(matches!(error, ToolError::MissingEnvVar { ref var, .. } if var == "CREWAI_DOC_EXAMPLE_UNSET_KEY"));
/// ```
pub fn check_env_vars(tools: &[ToolHandle]) -> Result<(), ToolError> {
    for tool in tools {
        for var in tool.tool().env_vars() {
            if !var.required || var.default.is_some() {
                continue;
            }
            let present = std::env::var_os(&var.name).is_some_and(|value| !value.is_empty());
            if !present {
                return Err(ToolError::MissingEnvVar {
                    tool: tool.name().to_string(),
                    var: var.name,
                    description: var.description,
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DynamicTool, EnvVar, ToolOutput};

    fn tool_needing(name: &str, vars: Vec<EnvVar>) -> ToolHandle {
        DynamicTool::new(
            name,
            "needs variables",
            serde_json::json!({"type": "object"}),
            |_a, _c| async { Ok(ToolOutput::Text(String::new())) },
        )
        .with_env_vars(vars)
        .into_handle()
    }

    fn var(name: &str, required: bool, default: Option<&str>) -> EnvVar {
        EnvVar {
            name: name.into(),
            description: format!("{name} for tests"),
            required,
            default: default.map(str::to_string),
        }
    }

    #[test]
    fn only_required_variables_without_default_must_be_set() {
        let ok = tool_needing(
            "fine",
            vec![
                var("PATH", true, None),
                var("CREWAI_TEST_OPTIONAL_UNSET", false, None),
                var("CREWAI_TEST_DEFAULTED_UNSET", true, Some("x")),
            ],
        );
        assert!(check_env_vars(std::slice::from_ref(&ok)).is_ok());
        let missing = tool_needing(
            "Search Tool",
            vec![
                var("CREWAI_TEST_FIRST_UNSET", true, None),
                var("CREWAI_TEST_SECOND_UNSET", true, None),
            ],
        );
        let error = check_env_vars(&[ok, missing]).unwrap_err();
        let ToolError::MissingEnvVar {
            tool,
            var,
            description,
        } = &error
        else {
            panic!("{error:?}")
        };
        assert_eq!(
            (tool.as_str(), var.as_str()),
            ("search_tool", "CREWAI_TEST_FIRST_UNSET")
        );
        assert_eq!(description, "CREWAI_TEST_FIRST_UNSET for tests");
        assert!(error.to_string().contains("CREWAI_TEST_FIRST_UNSET"));
        assert!(check_env_vars(&[]).is_ok());
    }
}
