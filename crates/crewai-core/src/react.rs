//! The ReAct reply format of agents whose model has no tool calling: `Thought:` / `Action:` /
//! `Action Input:` for a tool call, `Final Answer:` to finish. The executor parses replies with
//! [`parse`]; a model served locally can be held to the same shape (`LlmRequest::reply_shape`).
//!
//! ```
//! use crewai_core::react::{self, ReactStep};
//!
//! let step = react::parse("Thought: look it up\nAction: search\nAction Input: {\"q\": \"bees\"}");
//! assert!(matches!(step, ReactStep::Action { ref tool, .. } if tool == "search"));
//! ```

pub use crate::executor::react::{OBSERVATION_STOP, ReactStep, cut_at_observation, parse};
