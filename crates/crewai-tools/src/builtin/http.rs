//! `http_get`: fetches a web page and returns its readable text.

use std::sync::OnceLock;
use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::html::html_to_text;
use crate::tool::{ToolContext, ToolError};
use crate::typed::TypedTool;

pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
pub const DEFAULT_TOTAL_TIMEOUT: Duration = Duration::from_secs(30);
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 2 * 1024 * 1024;
const MAX_REDIRECTS: usize = 5;

/// Fetches an `http(s)` URL with a GET request and returns the body as text: HTML reduced to its
/// readable text, other text types as they are. Every request has a connect timeout and a total
/// deadline, and at most `max_bytes` of the body are read.
///
/// ```no_run
/// use crewai_tools::builtin::HttpGetTool;
/// use std::time::Duration;
/// let tool = HttpGetTool::new().with_total_timeout(Duration::from_secs(10)).with_max_bytes(256 * 1024);
/// # let _ = tool;
/// ```
#[derive(Debug, Clone)]
pub struct HttpGetTool {
    connect_timeout: Duration,
    total_timeout: Duration,
    max_bytes: usize,
    /// Built on first use (with the settings at that time) and reused for its connection pool.
    client: OnceLock<Result<reqwest::Client, String>>,
}

/// Arguments of `http_get`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct HttpGetArgs {
    /// The http or https URL to fetch.
    pub url: String,
}

impl Default for HttpGetTool {
    fn default() -> Self {
        HttpGetTool {
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            total_timeout: DEFAULT_TOTAL_TIMEOUT,
            max_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            client: OnceLock::new(),
        }
    }
}

impl HttpGetTool {
    pub fn new() -> Self {
        HttpGetTool::default()
    }

    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self.client = OnceLock::new();
        self
    }

    /// The deadline for the whole request, body included.
    pub fn with_total_timeout(mut self, timeout: Duration) -> Self {
        self.total_timeout = timeout;
        self.client = OnceLock::new();
        self
    }

    /// The most body bytes read; a longer body is cut, with a note saying so.
    pub fn with_max_bytes(mut self, max_bytes: usize) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    fn client(&self) -> Result<reqwest::Client, ToolError> {
        self.client
            .get_or_init(|| {
                reqwest::Client::builder()
                    .connect_timeout(self.connect_timeout)
                    .timeout(self.total_timeout)
                    .redirect(reqwest::redirect::Policy::limited(MAX_REDIRECTS))
                    .user_agent(concat!("crewai-rs/", env!("CARGO_PKG_VERSION")))
                    .build()
                    .map_err(|error| error.to_string())
            })
            .clone()
            .map_err(|error| {
                ToolError::Failed(format!("the HTTP client cannot be created: {error}"))
            })
    }

    async fn fetch(&self, url: reqwest::Url) -> Result<String, ToolError> {
        let shown = url.to_string();
        let mut response = self
            .client()?
            .get(url)
            .send()
            .await
            .map_err(|error| describe(&shown, &error))?;
        let status = response.status();
        if !status.is_success() {
            return Err(ToolError::Failed(format!(
                "GET {shown} answered HTTP {status}"
            )));
        }
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        if !is_textual(&content_type) {
            return Err(ToolError::Failed(format!(
                "GET {shown} returned {content_type}, which is not text this tool can read"
            )));
        }
        let mut body = Vec::new();
        let mut truncated = false;
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|error| describe(&shown, &error))?
        {
            let room = self.max_bytes.saturating_sub(body.len());
            if chunk.len() > room {
                body.extend_from_slice(&chunk[..room]);
                truncated = true;
                break;
            }
            body.extend_from_slice(&chunk);
        }
        let text = String::from_utf8_lossy(&body);
        let looks_like_html = content_type.contains("html")
            || (content_type.is_empty()
                && text.trim_start().get(..15).is_some_and(|start| {
                    let start = start.to_ascii_lowercase();
                    start.starts_with("<!doctype html") || start.starts_with("<html")
                }));
        let mut text = if looks_like_html {
            html_to_text(&text)
        } else {
            text.trim().to_string()
        };
        if truncated {
            text.push_str(&format!(
                "\n[The page is longer than {} bytes; only the start was read.]",
                self.max_bytes
            ));
        }
        Ok(text)
    }
}

/// Parses an `http(s)` URL, saying what is wrong with any other.
pub(crate) fn parse_http_url(raw: &str) -> Result<reqwest::Url, ToolError> {
    let url = reqwest::Url::parse(raw.trim()).map_err(|error| {
        ToolError::InvalidArguments(format!("'{raw}' is not a valid URL: {error}"))
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ToolError::InvalidArguments(format!(
            "only http and https URLs can be fetched, not {}:",
            url.scheme()
        )));
    }
    Ok(url)
}

impl HttpGetTool {
    /// Fetches `raw_url` and returns its readable text, stopping when the run is cancelled.
    pub(crate) async fn fetch_text(
        &self,
        raw_url: &str,
        ctx: &ToolContext,
    ) -> Result<String, ToolError> {
        let url = parse_http_url(raw_url)?;
        tokio::select! {
            result = self.fetch(url) => result,
            () = ctx.cancellation.cancelled() => Err(ToolError::Cancelled),
        }
    }
}

fn is_textual(content_type: &str) -> bool {
    content_type.is_empty()
        || content_type.starts_with("text/")
        || ["json", "xml", "html", "javascript", "yaml", "csv"]
            .iter()
            .any(|kind| content_type.contains(kind))
}

fn describe(url: &str, error: &reqwest::Error) -> ToolError {
    let what = if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "could not connect"
    } else if error.is_redirect() {
        "redirected too often"
    } else {
        "failed"
    };
    ToolError::Failed(format!("GET {url} {what}: {error}"))
}

#[async_trait]
impl TypedTool for HttpGetTool {
    type Args = HttpGetArgs;
    type Output = String;

    fn name(&self) -> &str {
        "http_get"
    }

    fn description(&self) -> &str {
        "Fetches a web page or other text resource by its http(s) `url` and returns its readable \
         text (HTML is reduced to plain text)."
    }

    async fn call(&self, args: HttpGetArgs, ctx: &ToolContext) -> Result<String, ToolError> {
        self.fetch_text(&args.url, ctx).await
    }
}
