//! # crewai-testkit
//!
//! Real HTTP servers on 127.0.0.1 that stand in for LLM providers in tests:
//! [`scripted`] answers from a queue of scripted replies and records every request;
//! [`replay`] plays a VCR cassette recorded from a real provider;
//! [`fault`] injects failures (hung and slow requests, 429s, 5xx, connection resets, malformed
//! replies, cut streams, impossible tool calls) per request, scripted or seeded at random.
//!
//! [`fixtures`] holds data several crates' tests share (a structured-output schema).
//!
//! [`process`] checks that a test's child processes are gone (reaped, or no longer running).
//!
//! [`prereq`] is the harness for test binaries that need something from outside the repository
//! (a model file, shared fixtures, a program): skipped locally when it is missing, failed under CI.
//!
//! [`postgres`] (feature `postgres`) gives each test a fresh database on the test PostgreSQL.

pub mod fault;
pub mod fixtures;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod prereq;
pub mod process;
pub mod replay;
pub mod scripted;
mod serve;
pub mod timing;
