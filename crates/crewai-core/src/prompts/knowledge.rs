//! What an agent sees of knowledge: the model call that turns a task into a search query, and
//! the snippets found, added to the task prompt after any recalled memories (CrewAI appends
//! them to the task prompt too, the agent's own before its crew's).

/// The instructions of the call that rewrites a task prompt into a knowledge search query.
pub const SEARCH_QUERY_SYSTEM: &str = "You write search queries for a knowledge base. Given a \
task, reply with one short query (key terms and names, no more than a sentence) that would find \
the passages most useful for it. Reply with the query alone: no quotes, no explanation.";

/// The input of that call.
pub fn search_query_input(task_prompt: &str) -> String {
    format!("Task to find knowledge for:\n{task_prompt}")
}

/// The block appended to the task prompt: the snippets' text, closest first. Empty when
/// nothing was found, so the prompt is unchanged.
pub fn snippets_block(snippets: &[String]) -> String {
    if snippets.is_empty() {
        return String::new();
    }
    format!(
        "\n\nFrom the knowledge sources (passages related to this task; rely on them where they \
         apply):\n{}",
        snippets.join("\n\n")
    )
}
