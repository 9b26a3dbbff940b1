//! `http_get`: fetches a web page and returns its readable text.

use std::sync::OnceLock;
use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::html::html_to_text;
use super::network::{
    PublicOnlyResolver, check_domain_host, check_literal_host, find_refusal,
    private_network_allowed_by_env,
};
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
/// Loopback, private, link-local, unspecified, multicast and carrier-grade NAT addresses are
/// refused (also behind a domain name or a redirect), so a prompt-injected page cannot make an
/// agent read cloud metadata or local admin endpoints. [`HttpGetTool::allow_private_network`]
/// or the environment variable
/// [`CREWAI_TOOLS_ALLOW_PRIVATE_NETWORK=1`](super::ALLOW_PRIVATE_NETWORK_ENV) lifts that.
///
/// ```no_run
/// use crewai_tools::builtin::HttpGetTool;
/// use std::time::Duration;
/// let tool = HttpGetTool::new().with_total_timeout(Duration::from_secs(10)).with_max_bytes(256 * 1024);
/// let intranet = HttpGetTool::new().allow_private_network(true);
/// # let _ = (tool, intranet);
/// ```
#[derive(Debug, Clone)]
pub struct HttpGetTool {
    connect_timeout: Duration,
    total_timeout: Duration,
    max_bytes: usize,
    /// `None` defers to the environment variable.
    allow_private_network: Option<bool>,
    /// Built on first use (with the settings at that time) and reused for its connection pool.
    client: OnceLock<reqwest::Client>,
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
            allow_private_network: None,
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

    crewai_llm::setters! {
        /// The most body bytes read; a longer body is cut, with a note saying so.
        pub fn with_max_bytes(max_bytes: usize) => max_bytes = max_bytes;
    }

    /// Whether the tool may fetch loopback, private and other internal addresses. Without this
    /// setting, the environment variable `CREWAI_TOOLS_ALLOW_PRIVATE_NETWORK` decides (off when
    /// unset).
    pub fn allow_private_network(mut self, allow: bool) -> Self {
        self.allow_private_network = Some(allow);
        self.client = OnceLock::new();
        self
    }

    /// Whether internal addresses may be fetched, by this tool's setting or else the environment.
    pub fn allows_private_network(&self) -> bool {
        self.allow_private_network
            .unwrap_or_else(private_network_allowed_by_env)
    }

    /// The client settings: timeouts, and unless private networks are allowed, the resolver and
    /// redirect policy that refuse internal addresses.
    fn client_builder(&self) -> reqwest::ClientBuilder {
        let builder = reqwest::Client::builder()
            .connect_timeout(self.connect_timeout)
            .timeout(self.total_timeout)
            .user_agent(concat!("crewai-rs/", env!("CARGO_PKG_VERSION")));
        if self.allows_private_network() {
            builder.redirect(reqwest::redirect::Policy::limited(MAX_REDIRECTS))
        } else {
            builder
                .dns_resolver(PublicOnlyResolver)
                .redirect(public_only_redirects())
        }
    }

    fn client(&self) -> Result<reqwest::Client, ToolError> {
        cached_client(&self.client, || self.client_builder())
    }

    async fn fetch(&self, url: reqwest::Url) -> Result<String, ToolError> {
        let shown = url.to_string();
        if !self.allows_private_network() {
            let checked = match check_literal_host(&url) {
                // A slow resolver must not stretch the deadline; the request resolves again
                // (through the guarded resolver) within its own timeouts.
                Ok(()) => tokio::time::timeout(self.connect_timeout, check_domain_host(&url))
                    .await
                    .unwrap_or(Ok(())),
                refused => refused,
            };
            checked.map_err(|refusal| {
                ToolError::Failed(format!("GET {shown} was refused: {refusal}"))
            })?;
        }
        let mut response = self
            .client()?
            .get(url)
            .send()
            .await
            .map_err(|error| describe(&shown, error))?;
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
            .map_err(|error| describe(&shown, error))?
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

/// The client in `cell`, built by `builder` on first use and reused for its connection pool. A
/// client that cannot be built is not cached: the next call tries again.
pub(crate) fn cached_client(
    cell: &OnceLock<reqwest::Client>,
    builder: impl FnOnce() -> reqwest::ClientBuilder,
) -> Result<reqwest::Client, ToolError> {
    if let Some(client) = cell.get() {
        return Ok(client.clone());
    }
    let client = builder()
        .build()
        .map_err(|error| ToolError::caused("the HTTP client cannot be created", error))?;
    Ok(cell.get_or_init(|| client).clone())
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
    /// Fetches `raw_url` and returns its readable text, stopping when the run is cancelled
    /// (what the web tools return, and what knowledge's web sources ingest).
    pub async fn fetch_text(&self, raw_url: &str, ctx: &ToolContext) -> Result<String, ToolError> {
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

/// Follows at most [`MAX_REDIRECTS`] redirects, refusing one to a literal internal address
/// (redirects to domain names are checked by the resolver when they connect).
fn public_only_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        if attempt.previous().len() > MAX_REDIRECTS {
            return attempt.error(format!("more than {MAX_REDIRECTS} redirects"));
        }
        match check_literal_host(attempt.url()) {
            Ok(()) => attempt.follow(),
            Err(refusal) => attempt.error(refusal),
        }
    })
}

fn describe(url: &str, error: reqwest::Error) -> ToolError {
    if let Some(refusal) = find_refusal(&error) {
        return ToolError::Failed(format!("GET {url} was refused: {refusal}"));
    }
    let what = if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "could not connect"
    } else if error.is_redirect() {
        "redirected too often"
    } else {
        "failed"
    };
    ToolError::caused(format!("GET {url} {what}"), error)
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

#[cfg(test)]
mod tests {
    use super::*;
    use wiremock::matchers::path;
    use wiremock::{Mock, MockServer, ResponseTemplate};

    /// A guarded tool that reaches the local server as `public.test`: a pinned address skips the
    /// resolver, as a public site's address would pass it, so what is tested is the redirect.
    fn guarded_tool_for(server: &MockServer) -> HttpGetTool {
        let tool = HttpGetTool::new().allow_private_network(false);
        let client = tool
            .client_builder()
            .resolve("public.test", *server.address())
            .build()
            .expect("a client with a pinned address");
        tool.client
            .set(client)
            .expect("the client is not built before the first fetch");
        tool
    }

    #[tokio::test]
    async fn redirects_to_internal_addresses_are_refused() {
        let server = MockServer::start().await;
        let port = server.address().port();
        let redirects = [
            (
                "/to-metadata",
                "http://169.254.169.254/latest/meta-data/".to_string(),
            ),
            ("/to-loopback", format!("http://127.0.0.1:{port}/secret")),
            ("/to-localhost", format!("http://localhost:{port}/secret")),
            ("/to-public", "/page".to_string()),
        ]
        .map(|(hop, target)| {
            (
                hop,
                ResponseTemplate::new(302).insert_header("location", target.as_str()),
            )
        });
        let pages = [("/page", "public page"), ("/secret", "internal")].map(|(page, body)| {
            (
                page,
                ResponseTemplate::new(200).set_body_raw(body, "text/plain"),
            )
        });
        for (route, response) in redirects.into_iter().chain(pages) {
            Mock::given(path(route))
                .respond_with(response)
                .mount(&server)
                .await;
        }
        let tool = guarded_tool_for(&server);
        let ctx = ToolContext::default();
        let base = format!("http://public.test:{port}");
        assert_eq!(
            tool.fetch_text(&format!("{base}/to-public"), &ctx)
                .await
                .unwrap(),
            "public page"
        );
        for (hop, kind) in [
            ("/to-metadata", "link-local"),
            ("/to-loopback", "loopback"),
            ("/to-localhost", "loopback"),
        ] {
            let error = tool
                .fetch_text(&format!("{base}{hop}"), &ctx)
                .await
                .unwrap_err();
            let message = error.to_string();
            assert!(
                message.contains("was refused") && message.contains(kind),
                "{hop}: {message}"
            );
        }
        let secrets = server
            .received_requests()
            .await
            .unwrap()
            .iter()
            .filter(|request| request.url.path() == "/secret")
            .count();
        assert_eq!(secrets, 0, "no redirect reached the internal page");
    }
}
