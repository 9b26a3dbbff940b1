//! Every piece of text crewai sends to a model lives here, and nothing else in the engine builds
//! prompt text.
//!
//! - [`agent`]: what one agent sees: the role-playing system prompt, tool and ReAct format
//!   instructions, the task prompt with its expected output and context, the forced final answer,
//!   observations for tool problems, context-window summarisation, templates and the date block.
//! - [`memory`]: the memories recalled for a task, added to its prompt.
//! - [`knowledge`]: the search query a task becomes, and the snippets found for it.
//! - [`skills`]: the skills block of the system prompt and what `load_skill` returns.
//! - [`crew`]: what crews add: delegation tool descriptions, the default manager, guardrail retry
//!   feedback, the LLM guardrail judge, structured-output conversion, human feedback.
//! - [`planning`]: the crew's planner (`planning: true`) and how a plan joins its task.
//! - [`consensus`]: a consensual crew's revisions, ballots and judge.
//! - [`evaluation`]: the judges of `Crew::test` and `Crew::train`, and trained instructions.
//!
//! The structure follows CrewAI's (users and recorded runs depend on where things go); the wording is
//! our own, except for the few sentences conformance cases check byte for byte, which say so.

pub mod agent;
pub mod consensus;
pub mod crew;
pub mod evaluation;
pub mod knowledge;
pub mod memory;
pub mod planning;
pub mod reasoning;
pub mod skills;
