//! OAuth 2.0 client credentials for an HTTP MCP server, on rmcp's authorization manager: the
//! authorization server is found from the MCP server's protected-resource metadata (RFC 9728)
//! and its own metadata (RFC 8414), then a token is asked for with the client's id and secret,
//! the scopes and the resource (RFC 8707). Loopback and private discovery are allowed only as
//! rmcp allows them (a loopback server may name a loopback authorization server).

use rmcp::transport::auth::{AuthError, AuthorizationManager, ClientCredentialsConfig};

use crate::config::{McpOAuth, McpRemoteServer};
use crate::error::McpError;

/// A fresh access token for `server`.
pub(crate) async fn access_token(
    server: &McpRemoteServer,
    oauth: &McpOAuth,
) -> Result<String, McpError> {
    let failed = |error: AuthError| McpError::OAuth {
        server: server.name.clone(),
        url: server.url.clone(),
        detail: crewai_llm::error_chain(&error),
    };
    let credentials = ClientCredentialsConfig::ClientSecret {
        client_id: oauth.client_id.clone(),
        client_secret: oauth.client_secret.clone(),
        scopes: oauth.scopes.clone(),
        resource: Some(oauth.resource.clone().unwrap_or_else(|| server.url.clone())),
    };
    let mut manager = AuthorizationManager::new(server.url.as_str())
        .await
        .map_err(failed)?;
    let resolution = manager.resolve_metadata().await.map_err(failed)?;
    manager.set_metadata(resolution.metadata);
    manager
        .validate_client_credentials_metadata(&credentials)
        .map_err(failed)?;
    manager
        .configure_client_credentials(&credentials)
        .map_err(failed)?;
    manager
        .exchange_client_credentials(&credentials)
        .await
        .map_err(failed)?;
    manager.get_access_token().await.map_err(failed)
}
