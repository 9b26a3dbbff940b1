//! Prompt text used at the crew level: the delegation tools, the default hierarchical manager,
//! guardrail retries, structured-output conversion and the joining of task context.
//!
//! The first line of each delegation tool description is kept as CrewAI words it, because
//! users and CrewAI's own tests look for it; everything else is our own wording.

/// The description of `delegate_work_to_coworker` for these coworker roles.
pub fn delegate_tool_description(coworkers: &[String]) -> String {
    format!(
        "Delegate a specific task to one of the following coworkers: {}\n\
         Give the coworker's role, the task you want done, and every piece of context they need: \
         they know nothing about your work except what you write here, so spell it all out.",
        coworkers.join(", ")
    )
}

/// The description of `ask_question_to_coworker` for these coworker roles.
pub fn ask_tool_description(coworkers: &[String]) -> String {
    format!(
        "Ask a specific question to one of the following coworkers: {}\n\
         Give the coworker's role, the question, and every piece of context they need to answer it: \
         they have not seen your conversation, so include whatever they must know.",
        coworkers.join(", ")
    )
}

/// Argument descriptions of the delegation tools.
pub const DELEGATE_TASK_ARG: &str = "What the coworker should do";
pub const ASK_QUESTION_ARG: &str = "What you want to ask the coworker";
pub const CONTEXT_ARG: &str = "Everything the coworker needs to know to do it";
pub const COWORKER_ARG: &str = "The role of the coworker, exactly as listed";

/// The expected output of the task a coworker receives through delegation.
pub const DELEGATED_EXPECTED_OUTPUT: &str = "The most useful answer you can give the coworker who asked, taking all the context they shared into account.";

/// The observation when the named coworker does not exist.
pub fn unknown_coworker(named: &str, coworkers: &[String]) -> String {
    let list: String = coworkers.iter().map(|c| format!("\n- {c}")).collect();
    format!(
        "\nError executing tool. There is no coworker called '{named}'. Use one of these roles, written exactly as shown:{list}"
    )
}

/// The observation when a delegation would go back to an agent already working on the request.
pub fn delegation_cycle(coworker: &str, chain: &[String]) -> String {
    format!(
        "Delegation refused: {coworker} is already working on this request further up the chain ({}). \
         Handing it back would go in circles. Do this part yourself or pick another coworker.",
        chain.join(" -> ")
    )
}

/// The observation when the delegation chain is already as deep as allowed.
pub fn delegation_too_deep(max_depth: usize, chain: &[String]) -> String {
    format!(
        "Delegation refused: this request has already been passed along {max_depth} times ({}), the most allowed. \
         Finish the work yourself with what you have.",
        chain.join(" -> ")
    )
}

/// The observation when the coworker failed.
pub fn coworker_failed(role: &str, error: &str) -> String {
    format!("The coworker '{role}' could not complete the work. Error: {error}")
}

/// Role of the manager a hierarchical crew creates when none is given.
pub const MANAGER_ROLE: &str = "Crew Manager";
/// Goal of the default manager.
pub const MANAGER_GOAL: &str = "Get every task done as well as possible by sending the right work to the right member of the team.";
/// Backstory of the default manager.
pub const MANAGER_BACKSTORY: &str = "You have led many teams of specialists and know how to get the best from each of them. \
You do not do the work yourself: you split it, hand each part to the teammate best suited for it with \
all the context they need, ask questions when something is unclear, and check that what comes back \
really meets the goal before you accept it.";

/// What the agent is told when its answer failed a guardrail; passed as the retry's context.
pub fn guardrail_retry_context(error: &str, previous_result: &str) -> String {
    format!(
        "### Your previous answer was rejected by a validation check:\n{error}\n\n\
         ### The rejected answer:\n{previous_result}\n\n\
         Answer again, and this time make sure the answer passes the check."
    )
}

/// The task for the LLM that judges a text guardrail.
pub fn llm_guardrail_query(guardrail: &str, output: &str) -> String {
    format!(
        "You check whether a piece of work meets a requirement.\n\n\
         Requirement:\n{guardrail}\n\n\
         Work to check:\n{output}\n\n\
         Reply with `valid` true when the work fully meets the requirement. Otherwise set `valid` to \
         false and explain in `feedback` what is missing or wrong, so the author can fix it."
    )
}

/// Appended to the task prompt when the task asks for structured output.
pub fn structured_output_instructions(schema_pretty: &str) -> String {
    format!(
        "Your final answer must be a JSON object that follows this JSON schema:\n{schema_pretty}\n\
         Return only the JSON object, with no prose and no code fences around it."
    )
}

/// System message of the conversion call that turns a text answer into structured output.
pub fn converter_system(schema_pretty: &str) -> String {
    format!(
        "You turn text into JSON. Read the text you are given and write a single JSON object that \
         follows this JSON schema, filling every field from the text:\n{schema_pretty}\n\
         Return only the JSON object."
    )
}

/// The retry message of the conversion call when its previous reply was not valid.
pub fn converter_retry(error: &str) -> String {
    format!(
        "That reply could not be used: {error}. Return only a JSON object that follows the schema."
    )
}

/// Separator between the outputs of earlier tasks when they form a task's context.
pub const CONTEXT_SEPARATOR: &str = "\n\n----------\n\n";

/// Joins earlier outputs into one context block.
pub fn join_context<'a>(outputs: impl IntoIterator<Item = &'a str>) -> String {
    outputs
        .into_iter()
        .collect::<Vec<_>>()
        .join(CONTEXT_SEPARATOR)
}

/// The question shown to a human when a task has `human_input`.
pub fn human_feedback_request(task: &str, answer: &str) -> String {
    format!(
        "Task: {task}\n\nFinal answer:\n{answer}\n\nGive feedback to improve the answer, or press Enter to accept it: "
    )
}

/// How human feedback reaches the agent on its next attempt.
pub fn human_feedback_context(feedback: &str, previous_result: &str) -> String {
    format!(
        "### Your previous answer:\n{previous_result}\n\n### Feedback from the user:\n{feedback}\n\n\
         Improve the answer using this feedback. Reply with the improved answer only, with no remarks about the feedback."
    )
}

/// Appended to every task's description when the kickoff inputs carry the conversation that
/// led to it (`crew_chat_messages`, which `crewai chat` passes, as CrewAI's chat does): each
/// `(role, text)` turn on its own line.
pub fn chat_history_block(turns: &[(String, String)]) -> String {
    let mut block = String::from(
        "\n\nThe conversation with the user that led to this run, for context (follow the task \
         above; use the conversation only to understand what the user wants):",
    );
    for (role, text) in turns {
        block.push_str(&format!("\n{role}: {text}"));
    }
    block
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delegation_descriptions_start_like_crewai() {
        let roles = vec!["Researcher".to_string(), "Senior Writer".to_string()];
        assert!(delegate_tool_description(&roles).starts_with("Delegate a specific task to one of the following coworkers: Researcher, Senior Writer\n"));
        assert!(ask_tool_description(&roles).starts_with(
            "Ask a specific question to one of the following coworkers: Researcher, Senior Writer\n"
        ));
    }

    #[test]
    fn context_join_uses_separator() {
        assert_eq!(join_context(["a", "b"]), "a\n\n----------\n\nb");
    }
}
