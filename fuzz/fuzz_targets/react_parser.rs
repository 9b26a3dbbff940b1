//! The ReAct parser reads whatever a model wrote: it must never panic, and what it returns must
//! come from the reply it was given.
#![no_main]

use crewai_core::react::{ReactStep, cut_at_observation, parse};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(reply) = std::str::from_utf8(data) else {
        return;
    };
    let kept = cut_at_observation(reply);
    match parse(reply) {
        ReactStep::Action {
            tool,
            tool_input,
            text,
            ..
        } => {
            assert_eq!(text, kept);
            assert!(!tool.is_empty(), "an action always names a tool");
            assert!(kept.contains(tool_input.as_str()));
        }
        ReactStep::Finish { output, text, .. } => {
            assert_eq!(text, kept);
            assert!(kept.contains(output.as_str()));
        }
    }
});
