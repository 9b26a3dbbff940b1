//! # crewai-conformance
//!
//! Replays CrewAI's own recorded test runs against crewai-rs. Each case folder holds a
//! `case.yaml` (the crew the test built and what it asserted, see [`case`]) and a VCR
//! `cassette.yaml` (the real provider traffic). The runner serves the cassette from a local
//! replay server, builds the case through the public API, runs it and checks its expectations
//! ([`expect`]); when a case fails, [`diff`] shows where our requests differ from CrewAI's.

pub mod build;
pub mod case;
pub mod catalog;
pub mod diff;
pub mod expect;
pub mod outcome;
pub mod runner;
