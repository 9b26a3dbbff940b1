//! [`ToolSet`]: the tools an agent can call, found as tolerantly as CrewAI finds them.

use crewai_llm::ToolDefinition;

use crate::handle::ToolHandle;
use crate::name::{loose_key, sanitize_tool_name, similarity_ratio};

/// A misspelled name still finds a tool when it is at least this similar (CrewAI's threshold).
const FUZZY_THRESHOLD: f64 = 0.85;

/// An ordered set of tools, unique by sanitised name.
///
/// Adding a tool whose sanitised name is taken by a *different* tool (another description or
/// schema: "Search Web" and "search_web") keeps both, as CrewAI does when it converts tools for
/// the model: the later one is renamed with a numeric suffix (`search_web_2`, `search_web_3`, ...)
/// and a warning is logged. Adding the same tool again (an identical definition) replaces it in
/// its place. [`ToolSet::replace`] is the "later wins" merge instead.
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
///
/// let mut tools = ToolSet::from(vec![tool("Search Web")]);
/// assert_eq!(tools.insert(tool("Search Web")), None, "the same tool again is one entry");
/// let other = DynamicTool::new("search_web", "Another search.", serde_json::json!({"type": "object", "properties": {}}),
///     |_args, _ctx| async { Ok(ToolOutput::Text("ok".into())) }).into_handle();
/// assert_eq!(tools.insert(other).as_deref(), Some("search_web_2"));
/// assert_eq!(tools.names(), vec!["search_web", "search_web_2"]);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ToolSet {
    tools: Vec<ToolHandle>,
}

impl ToolSet {
    pub fn new() -> Self {
        ToolSet::default()
    }

    /// Adds a tool. The same tool again (an identical definition) replaces the earlier entry in
    /// its place; a different tool whose sanitised name is taken is added under the first free
    /// name `{name}_2`, `{name}_3`, ..., which is returned (and logged as a warning).
    pub fn insert(&mut self, tool: ToolHandle) -> Option<String> {
        let Some(position) = self.position(tool.name()) else {
            self.tools.push(tool);
            return None;
        };
        if self.tools[position].definition() == tool.definition() {
            self.tools[position] = tool;
            return None;
        }
        let mut suffix = 2;
        let free_name = loop {
            let candidate = format!("{}_{suffix}", tool.name());
            if self.position(&candidate).is_none() {
                break candidate;
            }
            suffix += 1;
        };
        tracing::warn!(
            tool = tool.original_name(),
            taken = tool.name(),
            renamed_to = %free_name,
            "two different tools share a name; the later one is offered to the model under a new name"
        );
        self.tools.push(tool.renamed(free_name.clone()));
        Some(free_name)
    }

    /// Adds a tool, replacing any tool with the same sanitised name in its position ("later
    /// wins", as CrewAI merges an agent's tools with the ones a crew adds).
    pub fn replace(&mut self, tool: ToolHandle) {
        match self.position(tool.name()) {
            Some(position) => self.tools[position] = tool,
            None => self.tools.push(tool),
        }
    }

    fn position(&self, name: &str) -> Option<usize> {
        self.tools
            .iter()
            .position(|existing| existing.name() == name)
    }

    /// Adds a tool, builder style (as [`ToolSet::insert`] does).
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

    /// The definitions for constrained decoding, in order (see [`ToolHandle::decoding_definition`]).
    pub fn decoding_definitions(&self) -> Vec<ToolDefinition> {
        self.tools
            .iter()
            .map(ToolHandle::decoding_definition)
            .collect()
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

    /// Each name asked for finds the tool with the name given beside it.
    fn assert_finds(tools: &ToolSet, cases: &[(&str, &str)]) {
        for (asked, found) in cases {
            assert_eq!(
                tools.find(asked).map(ToolHandle::name),
                Some(*found),
                "{asked}"
            );
        }
    }

    #[test]
    fn exact_sanitised_names_match() {
        assert_finds(
            &set(),
            &[
                ("delegate_work_to_coworker", "delegate_work_to_coworker"),
                ("Delegate work to coworker", "delegate_work_to_coworker"),
                ("web_search", "web_search"),
                ("**multiplier**", "multiplier"),
            ],
        );
    }

    #[test]
    fn case_spaces_underscores_and_dashes_are_ignored() {
        assert_finds(
            &set(),
            &[
                ("DELEGATE-WORK-TO-COWORKER", "delegate_work_to_coworker"),
                ("websearch", "web_search"),
                ("Web Search", "web_search"),
            ],
        );
    }

    #[test]
    fn close_misspellings_match_and_others_do_not() {
        let tools = set();
        assert_eq!(tools.find("multiplyer").unwrap().name(), "multiplier");
        assert!(tools.find("divider").is_none());
        assert!(tools.find("").is_none());
    }

    #[test]
    fn colliding_different_tools_get_numeric_suffixes() {
        let mut tools = set();
        assert_eq!(
            tools.insert(tool("Multiplier", "newer")).as_deref(),
            Some("multiplier_2")
        );
        assert_eq!(
            tools.insert(tool("multiplier", "newest")).as_deref(),
            Some("multiplier_3")
        );
        assert_eq!(
            tools.names(),
            vec![
                "delegate_work_to_coworker",
                "multiplier",
                "web_search",
                "multiplier_2",
                "multiplier_3"
            ]
        );
        assert_eq!(tools.find("multiplier").unwrap().description(), "m");
        assert_eq!(tools.find("multiplier_2").unwrap().description(), "newer");
        let definition = tools.find("multiplier_3").unwrap().definition();
        assert_eq!(definition.name, "multiplier_3");
        assert_eq!(definition.description, "newest");
        assert_eq!(
            tools.find("multiplier_3").unwrap().original_name(),
            "multiplier"
        );
        // A suffixed name that a third tool already has is skipped over.
        let mut taken = ToolSet::from(vec![tool("a", "1"), tool("a_2", "2")]);
        assert_eq!(taken.insert(tool("A", "3")).as_deref(), Some("a_3"));
    }

    #[test]
    fn the_same_tool_added_again_is_one_entry_in_place() {
        let mut tools = set();
        let before = tools.names().len();
        assert_eq!(tools.insert(tool("multiplier", "m")), None);
        assert_eq!(tools.insert(tools.to_vec()[0].clone()), None);
        assert_eq!(tools.len(), before);
        let mut doubled = set();
        doubled.extend(set());
        assert_eq!(doubled.names(), set().names());
    }

    #[test]
    fn replace_lets_later_tools_win_in_place() {
        let mut tools = set();
        tools.replace(tool("Multiplier", "newer"));
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
