//! [`required`], the check of the builders' required text fields. Their setters come from
//! [`crewai_llm::setters!`], shared by every crewai crate.

/// A required text field of a builder: its value when set to more than whitespace, else the
/// message that says it is required.
pub(crate) fn required(value: Option<String>, field: &str) -> Result<String, String> {
    value
        .filter(|v| !v.trim().is_empty())
        .ok_or_else(|| format!("`{field}` is required"))
}
