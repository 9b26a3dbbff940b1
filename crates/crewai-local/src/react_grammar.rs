//! A character-level automaton for one ReAct step over a set of tools, used to hold the local
//! model's reply when the ReAct loop asks for one ([`crewai_llm::ReplyShape::React`]).
//!
//! The accepted replies are exactly
//!
//! ```text
//! Thought: <reasoning, one line>
//! Action: <one of the tool names>
//! Action Input: <a JSON document matching that tool's parameter schema>
//! ```
//!
//! or
//!
//! ```text
//! Thought: <reasoning, one line>
//! Final Answer: <any text, to the end of the reply>
//! ```
//!
//! so the ReAct parser always reads a known tool with schema-valid arguments, or a final answer.
//! The leading `Thought:` may be left out (the prompt already ends on it). A grammar may be
//! narrowed to one of the two forms ([`ReactGrammar::with_form`]). The reasoning has no
//! `:` (it could otherwise spell a label the parser would read) and at most
//! [`MAX_THOUGHT_CHARS`] characters, after which only its newline may follow: a rambling model
//! still reaches a decision. The arguments are held to the tool's schema by a [`JsonGrammar`].

use std::sync::Arc;

use crewai_llm::ToolDefinition;

use crate::json_grammar::JsonGrammar;

/// How long the reasoning line may get before it must end.
pub const MAX_THOUGHT_CHARS: usize = 200;

const THOUGHT_LABEL: &str = "Thought";
const ACTION_LABEL: &str = "Action: ";
const INPUT_LABEL: &str = "\nAction Input: ";
const ANSWER_LABEL: &str = "Final Answer: ";

/// Which of the two forms of a step are accepted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ReactForm {
    /// An action or a final answer.
    #[default]
    Either,
    /// Only an action (when there is a tool to name; with none, a final answer).
    Action,
    /// Only a final answer.
    FinalAnswer,
}

/// A tool the reply may name, with the grammar of its arguments at their start.
#[derive(Debug, Clone, PartialEq)]
struct ReactTool {
    name: String,
    arguments: JsonGrammar,
}

/// Where the reply is.
#[derive(Debug, Clone, PartialEq)]
enum Phase {
    /// The reasoning line. `written` is its text so far, `labelled` whether `Thought:` was
    /// already written (it may come once, first).
    Thought {
        written: String,
        chars: usize,
        has_content: bool,
        labelled: bool,
    },
    /// After the reasoning's newline: `Action: ` or `Final Answer: ` is being written.
    Label { matched: String },
    /// After `Action: `: a tool name is being written.
    ToolName { matched: String },
    /// After the tool name: the `Action Input:` line start is being written.
    InputLabel { tool: usize, matched: usize },
    /// The arguments of the tool.
    Input { arguments: JsonGrammar },
    /// After `Final Answer: `: free text.
    Answer { has_content: bool },
}

/// The ReAct step automaton over a set of tools, plus the position in the reply written so far.
///
/// ```
/// use crewai_llm::ToolDefinition;
/// use crewai_local::react_grammar::ReactGrammar;
/// let search = ToolDefinition {
///     name: "search".into(),
///     description: "Searches the web".into(),
///     parameters: serde_json::json!({
///         "type": "object",
///         "properties": {"query": {"type": "string"}},
///         "required": ["query"]
///     }),
///     strict: false,
/// };
/// let mut grammar = ReactGrammar::new(&[search]);
/// assert!(grammar.accepts(" I should look it up.\nAction: search\nAction Input: {\"query\":\"ru"));
/// assert!(!grammar.accepts(" I should look it up.\nAction: browse"));
/// grammar.advance(" I should look it up.\nAction: sea");
/// assert_eq!(grammar.completion(), "rch\nAction Input: {\"query\":\"\"}");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ReactGrammar {
    /// Shared between the copies made to try a token.
    tools: Arc<[ReactTool]>,
    /// The forms accepted.
    form: ReactForm,
    phase: Phase,
}

impl ReactGrammar {
    /// The grammar of a ReAct step that may name any of `tools`, at the start of the reply.
    /// With no tools, only a final answer fits.
    pub fn new(tools: &[ToolDefinition]) -> Self {
        let tools: Vec<ReactTool> = tools
            .iter()
            .filter(|tool| !tool.name.is_empty())
            .map(|tool| ReactTool {
                name: tool.name.clone(),
                arguments: JsonGrammar::new(&tool.parameters),
            })
            .collect();
        ReactGrammar {
            tools: tools.into(),
            form: ReactForm::Either,
            phase: Phase::Thought {
                written: String::new(),
                chars: 0,
                has_content: false,
                labelled: false,
            },
        }
    }

    /// Accepts only the steps of `form`. An action needs a tool: with no tools, a final answer
    /// is accepted whatever the form.
    pub fn with_form(mut self, form: ReactForm) -> Self {
        self.form = if self.tools.is_empty() {
            ReactForm::FinalAnswer
        } else {
            form
        };
        self
    }

    /// True once the tool's arguments are complete (nothing more may follow).
    pub fn is_complete(&self) -> bool {
        matches!(&self.phase, Phase::Input { arguments } if arguments.is_complete())
    }

    /// True if the reply may stop right here: the arguments are complete, or the final answer
    /// has some text.
    pub fn may_end(&self) -> bool {
        match &self.phase {
            Phase::Input { arguments } => arguments.is_complete(),
            Phase::Answer { has_content } => *has_content,
            _ => false,
        }
    }

    /// Whether `text` may be written next (the automaton is not changed).
    pub fn accepts(&self, text: &str) -> bool {
        let mut trial = self.clone();
        trial.advance(text)
    }

    /// Writes `text`; false (with the automaton left part-way) if some character is not allowed.
    pub fn advance(&mut self, text: &str) -> bool {
        text.chars().all(|c| self.feed(c))
    }

    /// The shortest text that ends the reply from here, once an action has been chosen (the
    /// rest of the tool name, the `Action Input:` line and the shortest valid arguments).
    /// Empty before that and in the final answer: the reasoning and the answer are the model's
    /// to write, so nothing is made up for them.
    pub fn completion(&self) -> String {
        let (tool, name_rest, label_rest) = match &self.phase {
            Phase::Thought { .. } | Phase::Answer { .. } => return String::new(),
            Phase::Input { arguments } => return arguments.completion(),
            Phase::Label { matched } => {
                let Some(tool) = self.tools.first() else {
                    return String::new();
                };
                if self.form == ReactForm::FinalAnswer
                    || matched.is_empty()
                    || !ACTION_LABEL.starts_with(matched.as_str())
                {
                    return String::new();
                }
                let name_rest = format!("{}{}", &ACTION_LABEL[matched.len()..], tool.name);
                (tool, name_rest, INPUT_LABEL)
            }
            Phase::ToolName { matched } => {
                let Some(tool) = self
                    .tools
                    .iter()
                    .find(|t| t.name.starts_with(matched.as_str()))
                else {
                    return String::new();
                };
                (tool, tool.name[matched.len()..].to_string(), INPUT_LABEL)
            }
            Phase::InputLabel { tool, matched } => {
                let Some(tool) = self.tools.get(*tool) else {
                    return String::new();
                };
                // The label is ASCII, so the characters matched are also a byte index.
                (tool, String::new(), &INPUT_LABEL[*matched..])
            }
        };
        format!("{name_rest}{label_rest}{}", tool.arguments.completion())
    }

    fn feed(&mut self, c: char) -> bool {
        let tools = Arc::clone(&self.tools);
        match &mut self.phase {
            Phase::Thought {
                written,
                chars,
                has_content,
                labelled,
            } => {
                if c == '\n' {
                    if !*has_content && *chars < MAX_THOUGHT_CHARS {
                        return false;
                    }
                    self.phase = Phase::Label {
                        matched: String::new(),
                    };
                    return true;
                }
                if c == ':' {
                    // Only as the `Thought:` label, once, before any reasoning.
                    if *labelled || written.trim_start() != THOUGHT_LABEL {
                        return false;
                    }
                    self.phase = Phase::Thought {
                        written: String::new(),
                        chars: 0,
                        has_content: false,
                        labelled: true,
                    };
                    return true;
                }
                if *chars >= MAX_THOUGHT_CHARS || c == '\r' {
                    return false;
                }
                *chars += 1;
                *has_content |= !c.is_whitespace();
                // Only the start matters (to spot the `Thought` label).
                if written.len() <= THOUGHT_LABEL.len() + 8 {
                    written.push(c);
                }
                true
            }
            Phase::Label { matched } => {
                matched.push(c);
                let offers_action = !tools.is_empty() && self.form != ReactForm::FinalAnswer;
                let offers_answer = self.form != ReactForm::Action;
                if offers_action && matched == ACTION_LABEL {
                    self.phase = Phase::ToolName {
                        matched: String::new(),
                    };
                    true
                } else if offers_answer && matched == ANSWER_LABEL {
                    self.phase = Phase::Answer { has_content: false };
                    true
                } else {
                    (offers_action && ACTION_LABEL.starts_with(matched.as_str()))
                        || (offers_answer && ANSWER_LABEL.starts_with(matched.as_str()))
                }
            }
            Phase::ToolName { matched } => {
                if c == '\n' {
                    // The name is complete when it is one of the tools' names exactly.
                    let Some(tool) = tools.iter().position(|t| t.name == *matched) else {
                        return false;
                    };
                    self.phase = Phase::InputLabel { tool, matched: 1 };
                    return true;
                }
                matched.push(c);
                tools.iter().any(|t| t.name.starts_with(matched.as_str()))
            }
            Phase::InputLabel { tool, matched } => {
                if !INPUT_LABEL[*matched..].starts_with(c) {
                    return false;
                }
                *matched += 1;
                if *matched == INPUT_LABEL.len() {
                    let Some(tool) = tools.get(*tool) else {
                        return false;
                    };
                    self.phase = Phase::Input {
                        arguments: tool.arguments.clone(),
                    };
                }
                true
            }
            Phase::Input { arguments } => arguments.advance(c.encode_utf8(&mut [0; 4])),
            Phase::Answer { has_content } => {
                *has_content |= !c.is_whitespace();
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, parameters: serde_json::Value) -> ToolDefinition {
        ToolDefinition {
            name: name.into(),
            description: format!("The {name} tool"),
            parameters,
            strict: false,
        }
    }

    fn tools() -> Vec<ToolDefinition> {
        vec![
            tool(
                "search",
                json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}),
            ),
            tool(
                "search_news",
                json!({
                    "type": "object",
                    "properties": {"query": {"type": "string"}, "days": {"type": "integer"}},
                    "required": ["query", "days"]
                }),
            ),
        ]
    }

    fn written(text: &str) -> ReactGrammar {
        written_with(ReactGrammar::new(&tools()), text)
    }

    fn written_with(mut grammar: ReactGrammar, text: &str) -> ReactGrammar {
        assert!(grammar.advance(text), "refused: {text:?}");
        grammar
    }

    #[test]
    fn an_action_with_valid_arguments_is_a_complete_reply() {
        for reply in [
            "Thought: I need recent news.\nAction: search_news\nAction Input: {\"query\":\"rust\",\"days\":7}",
            " I will look it up\nAction: search\nAction Input: {\"query\":\"capital of France\"}",
        ] {
            let grammar = written(reply);
            assert!(grammar.is_complete() && grammar.may_end(), "{reply}");
            assert!(!grammar.accepts(" "), "nothing may follow the arguments");
        }
    }

    #[test]
    fn a_final_answer_may_end_once_it_has_text() {
        let mut grammar = written("Thought: I know it.\nFinal Answer: ");
        assert!(!grammar.may_end());
        assert!(grammar.advance("Paris.\nIt is: the capital, Action: none"));
        assert!(grammar.may_end() && !grammar.is_complete());
    }

    #[test]
    fn only_the_offered_tool_names_are_accepted() {
        let grammar = written("Thought: go\nAction: ");
        assert!(grammar.accepts("search\n"));
        assert!(grammar.accepts("search_news\n"));
        assert!(!grammar.accepts("browse"));
        assert!(!grammar.accepts("Search"));
        // A prefix of a name is not a name.
        assert!(!grammar.accepts("search_\n"));
        assert!(!grammar.accepts("sear\n"));
        // The label itself is fixed.
        assert!(!written("Thought: go\n").accepts("Action Input: {}"));
        assert!(!written("Thought: go\n").accepts("Observation: x"));
    }

    #[test]
    fn arguments_are_held_to_the_schema_of_the_named_tool() {
        let news = written("Thought: go\nAction: search_news\nAction Input: ");
        assert!(news.accepts("{\"query\":\"x\",\"days\":3}"));
        assert!(!news.accepts("{\"query\":\"x\",\"days\":\"3\""));
        assert!(!news.accepts("{\"topic\""));
        assert!(!news.accepts("[1]"));
        // `search` takes no `days`.
        let search = written("Thought: go\nAction: search\nAction Input: ");
        assert!(!search.accepts("{\"query\":\"x\",\"days\""));
        assert!(search.accepts("{\"query\":\"x\"}"));
    }

    #[test]
    fn the_reasoning_is_one_bounded_line_without_colons() {
        let grammar = ReactGrammar::new(&tools());
        assert!(
            !grammar.accepts("\n"),
            "an empty thought does not decide anything"
        );
        assert!(!grammar.accepts("Plan: search"));
        assert!(!grammar.accepts("Thought: a\nThought: b"));
        assert!(!grammar.accepts("Thought:Thought:"));
        let long = "x".repeat(MAX_THOUGHT_CHARS);
        let at_limit = written(&format!("Thought:{long}"));
        assert!(!at_limit.accepts("y"));
        assert!(at_limit.accepts("\nFinal Answer: done"));
    }

    #[test]
    fn without_tools_only_a_final_answer_fits() {
        for form in [ReactForm::Either, ReactForm::Action, ReactForm::FinalAnswer] {
            let grammar = ReactGrammar::new(&[]).with_form(form);
            assert!(!grammar.accepts("Thought: go\nAction"));
            assert!(grammar.accepts("Thought: go\nFinal Answer: yes"));
        }
    }

    #[test]
    fn a_grammar_narrowed_to_one_form_refuses_the_other() {
        let action = "Thought: go\nAction: search\nAction Input: {\"query\":\"x\"}";
        let answer = "Thought: go\nFinal Answer: x";
        let acting = ReactGrammar::new(&tools()).with_form(ReactForm::Action);
        assert!(acting.accepts(action) && !acting.accepts(answer));
        let answering = ReactGrammar::new(&tools()).with_form(ReactForm::FinalAnswer);
        assert!(answering.accepts(answer) && !answering.accepts("Thought: go\nA"));
        assert_eq!(written_with(answering, "Thought: go\n").completion(), "");
    }

    #[test]
    fn the_completion_finishes_a_chosen_action_and_nothing_else() {
        assert_eq!(written("Thought: hm").completion(), "");
        assert_eq!(written("Thought: hm\nFinal Answer: ").completion(), "");
        assert_eq!(
            written("Thought: hm\nAct").completion(),
            "ion: search\nAction Input: {\"query\":\"\"}"
        );
        assert_eq!(
            written("Thought: hm\nAction: search_n").completion(),
            "ews\nAction Input: {\"query\":\"\",\"days\":0}"
        );
        assert_eq!(
            written("Thought: hm\nAction: search\nAction In").completion(),
            "put: {\"query\":\"\"}"
        );
        for partial in [
            "Thought: hm\nAct",
            "Thought: hm\nAction: search_n",
            "Thought: hm\nAction: search\nAction Input: {\"query\":\"ab",
        ] {
            let mut grammar = written(partial);
            let completion = grammar.completion();
            assert!(
                grammar.advance(&completion) && grammar.is_complete(),
                "{partial}"
            );
        }
    }
}
