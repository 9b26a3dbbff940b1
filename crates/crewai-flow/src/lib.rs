//! The crewai flow engine (in progress).
