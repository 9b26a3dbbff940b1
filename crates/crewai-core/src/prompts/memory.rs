//! What an agent sees of its crew's memory: the memories recalled for a task, added to the task
//! prompt after its description and expected output (and before any context), as CrewAI places
//! them.

/// The block appended to the task prompt; `memories` are already formatted one per item
/// (`MemoryMatch::format`). Empty when nothing was recalled, so the prompt is unchanged.
pub fn recalled_block(memories: &[String]) -> String {
    if memories.is_empty() {
        return String::new();
    }
    format!(
        "\n\nWhat memory holds from earlier work that may help with this task (use what \
         applies, ignore the rest):\n{}",
        memories.join("\n")
    )
}
