//! # crewai-conformance
//!
//! Replays CrewAI's own recorded test runs against crewai-rs. Each case folder holds a
//! `case.yaml` (the crew the test built and what it asserted, see [`case`]) and a VCR
//! `cassette.yaml` (the real provider traffic). The runner ([`runner`]) serves the cassette from
//! a local replay server, builds the case through the public API ([`build`], with the test tools,
//! guardrails and hooks of [`catalog`]), runs it and checks its expectations ([`expect`]); when a
//! case fails, [`diff`] shows where our requests differ from the ones CrewAI sent. Every request
//! is also compared in structure with the recorded one that answered it ([`structure`]: model,
//! tools and their schemas, tool choice, response format, streaming, stop words, message roles,
//! tool-call references); a structural difference fails the case.
//!
//! The checker is a pure function of the case's `expect` and an [`outcome::Outcome`]:
//!
//! ```
//! use std::path::Path;
//! use crewai_conformance::case::Case;
//! use crewai_conformance::expect::check;
//! use crewai_conformance::outcome::{Outcome, Output};
//!
//! let case = Case::parse("name: demo\nexpect: {raw_contains: [Paris], requests: 1}\n", Path::new("case.yaml")).unwrap();
//! let mut outcome = Outcome { requests_consumed: 1, requests_recorded: 2, ..Default::default() };
//! outcome.result = Ok(vec![Output { raw: "Paris".into(), ..Default::default() }]);
//! assert!(check(&case.expect, &outcome).is_empty());
//! outcome.requests_consumed = 2;
//! assert_eq!(check(&case.expect, &outcome), vec!["requests: consumed 2 of 2 recorded, expected exactly 1".to_string()]);
//! ```

pub mod build;
pub mod case;
pub mod catalog;
pub mod diff;
pub mod expect;
mod flow_mode;
pub mod outcome;
pub mod returned;
pub mod runner;
pub mod structure;
