//! The bearer token of a served crew (`crewai serve`, `crewai a2a serve`): from its flag or
//! environment variable, or the first line of a file, and the rule that a server without one
//! listens on loopback only.

use std::net::IpAddr;
use std::path::Path;

use anyhow::{Context, anyhow};

use crate::outcome::Failure;

/// Where a command takes its token from, named in its messages.
pub(crate) struct TokenSettings<'a> {
    /// The token given by flag or environment.
    pub token: Option<&'a str>,
    /// A file whose first line is the token (wins over `token`).
    pub token_file: Option<&'a Path>,
    /// How the user sets it, e.g. `CREWAI_SERVE_TOKEN (or --token / --token-file)`.
    pub how_to_set: &'a str,
}

/// The token to require, or `None` when none is set and `host` is loopback (said on stderr);
/// refused when none is set and `host` is reachable from elsewhere.
pub(crate) fn token_for(
    settings: &TokenSettings<'_>,
    host: IpAddr,
) -> Result<Option<String>, Failure> {
    let token = match settings.token_file {
        Some(path) => Some(read_token_file(path)?),
        None => settings.token.map(str::to_string),
    }
    .filter(|t| !t.is_empty());
    if token.is_none() {
        if !host.is_loopback() {
            return Err(Failure::config(anyhow!(
                "refusing to serve on {host} without a token: anyone who reaches it could run the crew"
            ))
            .with_hint(format!("set {}, or serve on 127.0.0.1", settings.how_to_set)));
        }
        eprintln!(
            "No token set ({}): serving on loopback only, without authentication.",
            settings.how_to_set
        );
    }
    Ok(token)
}

fn read_token_file(path: &Path) -> Result<String, Failure> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the token file {}", path.display()))
        .map_err(Failure::config)?;
    let token = text.lines().next().unwrap_or("").trim().to_string();
    if token.is_empty() {
        return Err(Failure::config(anyhow!(
            "the token file {} is empty",
            path.display()
        )));
    }
    Ok(token)
}
