//! What one agent sees (see the [module docs](super)).
//!
//! Message layout, as CrewAI's: a system message with the role-playing prompt (plus the ReAct tool
//! instructions in text mode, plus the date block), then a user message `"\nCurrent Task: <task
//! prompt>"` with an ending that depends on the loop. With `use_system_prompt: false` or custom
//! templates everything goes into one user message.

/// The role-playing system prompt (CrewAI's structure: who you are, then your goal).
pub fn role_playing(role: &str, backstory: &str, goal: &str) -> String {
    format!("You are {role}. {backstory}\nYour personal goal is: {goal}")
}

/// The date block appended to the system prompt when `inject_date` is set.
pub fn date_block(date: &str) -> String {
    format!("\n\nCurrent Date: {date}")
}

/// One tool as the ReAct instructions list it.
pub fn react_tool_entry(name: &str, arguments_schema_pretty: &str, description: &str) -> String {
    format!(
        "Tool Name: {name}\nTool Arguments: {arguments_schema_pretty}\nTool Description: {description}"
    )
}

/// The ReAct text-mode instructions: the tools, then the reply format the parser understands.
pub fn react_instructions(tool_entries: &[String], tool_names: &[&str]) -> String {
    format!(
        "\nYou can use the following tools:\n\n{}\n\n\
         To use a tool, reply in exactly this format:\n\n\
         Thought: your reasoning about what to do next\n\
         Action: the tool to use, one of [{}], written exactly as listed\n\
         Action Input: the tool's arguments as a single JSON object, with keys and string values in double quotes\n\
         Observation: the tool's result (this line is written for you: stop after the Action Input)\n\n\
         Thought, Action, Action Input and Observation may repeat as often as needed. \
         Once you know the answer, reply in exactly this format:\n\n\
         Thought: I now know the final answer\n\
         Final Answer: your complete answer to the task, in the form the task asks for",
        tool_entries.join("\n\n"),
        tool_names.join(", ")
    )
}

/// The start of the user message that carries the task.
fn current_task(task_prompt: &str) -> String {
    format!("\nCurrent Task: {task_prompt}")
}

/// The user message in the ReAct text loop (it ends on `Thought:` so the reply starts with reasoning).
pub fn task_message_react(task_prompt: &str) -> String {
    format!(
        "{}\n\nStart now. Use the tools when they help, and end with your Final Answer: getting this right matters.\n\nThought:",
        current_task(task_prompt)
    )
}

/// The user message in the native tool-calling loop (tools are described by the API, not the text).
pub fn task_message_native(task_prompt: &str) -> String {
    current_task(task_prompt)
}

/// The user message when the agent has no tools.
pub fn task_message_no_tools(task_prompt: &str) -> String {
    format!(
        "{}\n\nGive your complete response:",
        current_task(task_prompt)
    )
}

/// The task prompt: the description, then what the final answer must be.
///
/// The expected-criteria sentence is CrewAI's wording, kept because conformance checks the
/// `task_prompt` of `agent_execution_started` events byte for byte.
pub fn task_prompt(description: &str, expected_output: &str) -> String {
    format!(
        "{description}\n\nThis is the expected criteria for your final answer: {expected_output}\n\
         you MUST return the actual complete content as the final answer, not a summary."
    )
}

/// Appended (after a newline) to the task prompt of a task with `markdown: true`.
pub const MARKDOWN_INSTRUCTIONS: &str = "Write your final answer in Markdown: use headings (#, ##, ###) for sections, \
**bold** and *italics* for emphasis, - or 1. for lists, and fenced code blocks for code.";

/// The task prompt followed by the context it works from (earlier tasks' outputs).
pub fn with_context(task_prompt: &str, context: &str) -> String {
    format!("{task_prompt}\n\nUse this context to do the task:\n{context}")
}

/// What `Agent::kickoff` with a response format adds to the user's request.
pub fn kickoff_format_hint(fields: &[String]) -> String {
    format!(
        " Reply with a JSON object that has these fields: {}",
        fields.join(", ")
    )
}

/// The assistant message appended when `max_iter` tool rounds are used up; the next call has no tools.
pub const FORCED_FINAL_ANSWER: &str = "I have used all the tool rounds I am allowed. I must now stop using tools \
and give my best complete final answer with what I have learned so far.";

/// The user message after a ReAct observation: decide between finishing and another tool.
pub const AFTER_TOOL_REACT: &str = "Look at the result. If it gives you what the task needs, reply with your Final Answer; \
otherwise use the next tool. Reply with the answer itself, without remarks about the process.";

/// The user message after the results of a reply's native tool calls, in a task's run (CrewAI's
/// task executor asks the model to weigh the results before its next step; `Agent::kickoff` does not).
pub const AFTER_TOOLS_NATIVE: &str = "Weigh the tool results above. If they give you what the task needs, \
give your final answer now; otherwise call the next tool you need. Reply with the answer itself, without remarks about the process.";

/// The observation when a tool call's arguments do not match its schema (native or ReAct).
pub fn invalid_arguments(tool_name: &str, problem: &str) -> String {
    format!(
        "The arguments for the tool '{tool_name}' are not valid: {problem}\nCall it again with corrected arguments."
    )
}

/// The observation when a tool failed.
pub fn tool_error(tool_name: &str, error: &str) -> String {
    format!("Error executing tool '{tool_name}': {error}")
}

/// The user message that moves a run from native tool calls to ReAct text when a provider turns out
/// not to support tools.
pub fn native_tools_unavailable(react_instructions: &str) -> String {
    format!(
        "This model cannot call tools natively here, so continue with the text format below instead.\n{react_instructions}"
    )
}

/// The user message `Agent::kickoff` appends when its guardrail rejected an answer.
pub fn guardrail_feedback(error: &str) -> String {
    format!("Your answer did not pass validation: {error}\nAnswer again and fix this.")
}

/// Who judges an LLM guardrail (the system prompt of the judge call).
pub const GUARDRAIL_ROLE: &str = "Guardrail Agent";
pub const GUARDRAIL_GOAL: &str =
    "Decide fairly whether a piece of work meets the stated requirement";
pub const GUARDRAIL_BACKSTORY: &str = "You review work against requirements. You judge only what the requirement asks, \
and when the work falls short you say precisely what to change.";

/// The system message of the calls that summarise a conversation that no longer fits the window.
pub const SUMMARIZER_SYSTEM: &str = "You condense conversations. Keep every fact, number, name, tool result and decision \
that matters for finishing the work; drop repetition and chatter.";

/// The request to summarise one chunk of the conversation.
pub fn summarize_chunk(conversation: &str) -> String {
    format!(
        "Summarise this part of a conversation between an AI agent and its tools. \
         Put the summary between <summary> and </summary>.\n\n{conversation}"
    )
}

/// The user message that replaces the summarised history.
pub fn summary_continuation(summary: &str) -> String {
    format!(
        "<summary>\n{summary}\n</summary>\n\n\
         That is a summary of the work so far (the full conversation no longer fits). Continue the task from here."
    )
}

/// Placeholders of the user templates (CrewAI's Go-template style).
pub const SYSTEM_PLACEHOLDER: &str = "{{ .System }}";
pub const PROMPT_PLACEHOLDER: &str = "{{ .Prompt }}";
pub const RESPONSE_PLACEHOLDER: &str = "{{ .Response }}";

/// The single prompt built from user templates, as CrewAI builds it: the rendered system template,
/// the rendered prompt template, and the part of the response template before `{{ .Response }}`,
/// joined with newlines.
pub fn render_templates(
    system_template: &str,
    prompt_template: &str,
    response_template: Option<&str>,
    system: &str,
    prompt: &str,
) -> String {
    let system_part = system_template.replace(SYSTEM_PLACEHOLDER, system);
    let prompt_part = prompt_template.replace(PROMPT_PLACEHOLDER, prompt);
    match response_template {
        Some(response) => {
            let response_prefix = response
                .split(RESPONSE_PLACEHOLDER)
                .next()
                .unwrap_or_default();
            format!("{system_part}\n{prompt_part}\n{response_prefix}")
        }
        None => format!("{system_part}\n{prompt_part}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_prompt_has_crewais_structure() {
        assert_eq!(
            role_playing("test role", "test backstory", "test goal"),
            "You are test role. test backstory\nYour personal goal is: test goal"
        );
    }

    #[test]
    fn task_prompt_matches_the_event_conformance_case() {
        assert_eq!(
            task_prompt("Just say hi", "hi"),
            "Just say hi\n\nThis is the expected criteria for your final answer: hi\nyou MUST return the actual complete content as the final answer, not a summary."
        );
    }

    #[test]
    fn user_messages_start_with_the_current_task() {
        for message in [
            task_message_react("T"),
            task_message_native("T"),
            task_message_no_tools("T"),
        ] {
            assert!(message.starts_with("\nCurrent Task: T"));
        }
        assert!(task_message_react("T").ends_with("Thought:"));
    }

    #[test]
    fn react_instructions_list_tools_and_names() {
        let entry = react_tool_entry("search", "{}", "Searches");
        let text = react_instructions(&[entry], &["search"]);
        assert!(text.contains("Tool Name: search\nTool Arguments: {}\nTool Description: Searches"));
        assert!(text.contains("[search]"));
        assert!(text.contains("Final Answer:"));
        assert!(text.contains("Action Input:"));
    }

    #[test]
    fn templates_render_like_crewai() {
        let rendered = render_templates(
            "<sys>{{ .System }}</sys>",
            "<p>{{ .Prompt }}</p>",
            Some("<r>{{ .Response }}</r>"),
            "S",
            "P",
        );
        assert_eq!(rendered, "<sys>S</sys>\n<p>P</p>\n<r>");
        assert_eq!(
            render_templates("{{ .System }}", "{{ .Prompt }}", None, "S", "P"),
            "S\nP"
        );
    }
}
