//! # crewai-core
//!
//! The crewai engine: agents, tasks, crews, the executor loops, prompts, guardrails, delegation,
//! events and hooks.

pub mod agent;
pub mod converter;
pub mod crew;
pub mod delegation;
pub mod error;
pub mod events;
pub mod executor;
pub mod guardrail;
pub mod hooks;
pub mod interpolate;
pub mod output;
pub mod process;
pub mod prompts;
pub mod store;
pub mod task;
pub mod usage;
