//! [`ToolSet`]: the tools an agent can call, found as tolerantly as CrewAI finds them.

use crewai_llm::ToolDefinition;

use crate::handle::ToolHandle;
use crate::name::{loose_key, sanitize_tool_name, similarity_ratio};

/// A misspelled name still finds a tool when it is at least this similar (CrewAI's threshold).
const FUZZY_THRESHOLD: f64 = 0.85;

/// An ordered set of tools, unique by sanitised name (a later tool replaces an earlier one with
/// the same name, in its place).
///
/// ```
/// use crewai_tools::{DynamicTool, ToolOutput, ToolSet};
/// let tool = |name: &str| {
///     DynamicTool::new(name, "A test tool.", serde_json::json!({"type": "object", "properties": {}}),
///         |_args, _ctx| async { Ok(ToolOutput::Text("ok".into())) }).into_handle()
/// };
/// let tools = ToolSet::from(vec![tool("Web Search"), tool("Calculator")]);
/// assert_eq!(tools.names(), vec!["web_search", "calculator"]);
/// assert_eq!(tools.find("web_search").map(|t| t.name()), Some("web_search"));
/// assert_eq!(tools.find("Web-Search").map(|t| t.name()), Some("web_search"));
/// assert_eq!(tools.find("calculater").map(|t| t.name()), Some("calculator"));
/// assert!(tools.find("weather").is_none());
/// ```
#[derive(Debug, Clone, Default)]
pub struct ToolSet {
    tools: Vec<ToolHandle>,
}

impl ToolSet {
    pub fn new() -> Self {
        ToolSet::default()
    }

    /// Adds a tool; one with the same sanitised name is replaced in its position.
    pub fn insert(&mut self, tool: ToolHandle) {
        match self
            .tools
            .iter_mut()
            .find(|existing| existing.name() == tool.name())
        {
            Some(existing) => *existing = tool,
            None => self.tools.push(tool),
        }
    }

    /// Adds a tool, builder style.
    pub fn with(mut self, tool: ToolHandle) -> Self {
        self.insert(tool);
        self
    }

    /// Finds the tool a model named: by exact sanitised name, then ignoring case, spaces,
    /// underscores and dashes, then by a similarity ratio above 0.85 (the most similar wins).
    pub fn find(&self, name: &str) -> Option<&ToolHandle> {
        let wanted = sanitize_tool_name(name.trim().trim_matches('*').trim());
        if let Some(tool) = self.tools.iter().find(|tool| tool.name() == wanted) {
            return Some(tool);
        }
        let loose = loose_key(name);
        if let Some(tool) = self.tools.iter().find(|tool| {
            loose_key(tool.name()) == loose || loose_key(tool.original_name()) == loose
        }) {
            return Some(tool);
        }
        self.tools
            .iter()
            .map(|tool| (similarity_ratio(tool.name(), &wanted), tool))
            .filter(|(ratio, _)| *ratio > FUZZY_THRESHOLD)
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, tool)| tool)
    }

    /// The observation for a model that called a tool that is not here.
    pub fn unknown_tool_message(&self, name: &str) -> String {
        if self.tools.is_empty() {
            return format!(
                "There is no tool named '{name}', and no tools are available: answer without tools."
            );
        }
        format!(
            "There is no tool named '{name}'. Call one of these tools, by exactly this name: {}.",
            self.names().join(", ")
        )
    }

    /// The sanitised names, in order.
    pub fn names(&self) -> Vec<&str> {
        self.tools.iter().map(ToolHandle::name).collect()
    }

    /// The provider definitions, in order.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.tools.iter().map(ToolHandle::definition).collect()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, ToolHandle> {
        self.tools.iter()
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The tools as a vector, in order.
    pub fn to_vec(&self) -> Vec<ToolHandle> {
        self.tools.clone()
    }
}

impl From<Vec<ToolHandle>> for ToolSet {
    fn from(tools: Vec<ToolHandle>) -> Self {
        tools.into_iter().collect()
    }
}

impl FromIterator<ToolHandle> for ToolSet {
    fn from_iter<I: IntoIterator<Item = ToolHandle>>(iter: I) -> Self {
        let mut set = ToolSet::new();
        set.extend(iter);
        set
    }
}

impl Extend<ToolHandle> for ToolSet {
    fn extend<I: IntoIterator<Item = ToolHandle>>(&mut self, iter: I) {
        for tool in iter {
            self.insert(tool);
        }
    }
}

impl IntoIterator for ToolSet {
    type Item = ToolHandle;
    type IntoIter = std::vec::IntoIter<ToolHandle>;

    fn into_iter(self) -> Self::IntoIter {
        self.tools.into_iter()
    }
}

impl<'a> IntoIterator for &'a ToolSet {
    type Item = &'a ToolHandle;
    type IntoIter = std::slice::Iter<'a, ToolHandle>;

    fn into_iter(self) -> Self::IntoIter {
        self.tools.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DynamicTool, ToolOutput};
    use serde_json::json;

    fn tool(name: &str, description: &str) -> ToolHandle {
        DynamicTool::new(
            name,
            description,
            json!({"type": "object", "properties": {}}),
            |_a, _c| async { Ok(ToolOutput::Text(String::new())) },
        )
        .into_handle()
    }

    fn set() -> ToolSet {
        ToolSet::from(vec![
            tool("Delegate work to coworker", "d"),
            tool("multiplier", "m"),
            tool("WebSearch", "w"),
        ])
    }

    #[test]
    fn exact_sanitised_names_match() {
        let tools = set();
        assert_eq!(
            tools.find("delegate_work_to_coworker").unwrap().name(),
            "delegate_work_to_coworker"
        );
        assert_eq!(
            tools.find("Delegate work to coworker").unwrap().name(),
            "delegate_work_to_coworker"
        );
        assert_eq!(tools.find("web_search").unwrap().name(), "web_search");
        assert_eq!(tools.find("**multiplier**").unwrap().name(), "multiplier");
    }

    #[test]
    fn case_spaces_underscores_and_dashes_are_ignored() {
        let tools = set();
        assert_eq!(
            tools.find("DELEGATE-WORK-TO-COWORKER").unwrap().name(),
            "delegate_work_to_coworker"
        );
        assert_eq!(tools.find("websearch").unwrap().name(), "web_search");
        assert_eq!(tools.find("Web Search").unwrap().name(), "web_search");
    }

    #[test]
    fn close_misspellings_match_and_others_do_not() {
        let tools = set();
        assert_eq!(tools.find("multiplyer").unwrap().name(), "multiplier");
        assert!(tools.find("divider").is_none());
        assert!(tools.find("").is_none());
    }

    #[test]
    fn later_tools_replace_earlier_ones_in_place() {
        let mut tools = set();
        tools.insert(tool("Multiplier", "newer"));
        assert_eq!(
            tools.names(),
            vec!["delegate_work_to_coworker", "multiplier", "web_search"]
        );
        assert_eq!(tools.find("multiplier").unwrap().description(), "newer");
        assert_eq!(tools.len(), 3);
        assert_eq!(tools.definitions().len(), 3);
        assert_eq!(tools.iter().count(), 3);
    }

    #[test]
    fn unknown_tools_get_a_helpful_message() {
        let message = set().unknown_tool_message("weather");
        assert_eq!(
            message,
            "There is no tool named 'weather'. Call one of these tools, by exactly this name: delegate_work_to_coworker, multiplier, web_search."
        );
        assert!(
            ToolSet::new()
                .unknown_tool_message("x")
                .contains("no tools are available")
        );
    }
}
