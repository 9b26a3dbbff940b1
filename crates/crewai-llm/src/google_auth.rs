//! Google credentials for Vertex AI, found where LiteLLM and Google's libraries look, and
//! exchanged for OAuth access tokens:
//!
//! 1. the config's `vertex_credentials`, else `VERTEXAI_CREDENTIALS` or `VERTEX_CREDENTIALS`:
//!    a credentials JSON (as text or, in YAML, a mapping) or the path of a file holding one;
//! 2. `GOOGLE_APPLICATION_CREDENTIALS`: the path of a credentials file;
//! 3. Application Default Credentials' well-known file, which `gcloud auth application-default
//!    login` writes: `$CLOUDSDK_CONFIG/application_default_credentials.json`, else
//!    `~/.config/gcloud/application_default_credentials.json` (`%APPDATA%\gcloud\…` on Windows).
//!
//! A `service_account` key signs a JWT (RS256, `jsonwebtoken`) that its `token_uri` trades for
//! a token (the OAuth 2 JWT-bearer grant); an `authorized_user` file's refresh token is traded
//! at its `token_uri` (Google's by default). Other kinds (`external_account` workload identity
//! federation, `impersonated_service_account`) and the metadata server of a Google Cloud VM are
//! refused by name.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::access_token::{Credential, IssuedToken, TokenEndpoint, TokenExchange};
use crate::config::LlmConfig;
use crate::error::LlmError;
use crate::http::ErrorContext;
use crate::router::{EnvLookup, first_env};

/// Google's OAuth 2 token endpoint (the default `token_uri`).
pub(crate) const GOOGLE_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";
/// The scope Vertex AI's API needs.
const CLOUD_PLATFORM_SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";
/// How long a signed JWT assertion is valid (Google's maximum).
const ASSERTION_LIFETIME_SECS: u64 = 3600;

/// The variables the credentials JSON (or its path) is read from, first set wins.
pub(crate) const CREDENTIALS_ENV: &[&str] = &["VERTEXAI_CREDENTIALS", "VERTEX_CREDENTIALS"];
/// The variable holding the path of a credentials file, as Google's libraries read it.
pub(crate) const APPLICATION_CREDENTIALS_ENV: &str = "GOOGLE_APPLICATION_CREDENTIALS";
const ADC_FILE: &str = "application_default_credentials.json";

/// Credentials found, and where.
pub(crate) struct GoogleCredentials {
    kind: Kind,
    /// Where they came from, as a user would look for it (`GOOGLE_APPLICATION_CREDENTIALS
    /// (/keys/sa.json)`).
    origin: String,
}

impl fmt::Debug for GoogleCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GoogleCredentials")
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

enum Kind {
    ServiceAccount(ServiceAccountKey),
    AuthorizedUser(AuthorizedUser),
}

/// The fields of a service-account key file this needs.
#[derive(Deserialize)]
struct ServiceAccountKey {
    client_email: String,
    private_key: String,
    private_key_id: Option<String>,
    token_uri: Option<String>,
    project_id: Option<String>,
}

/// The fields of an `authorized_user` file (`gcloud auth application-default login`).
#[derive(Deserialize)]
struct AuthorizedUser {
    client_id: String,
    client_secret: String,
    refresh_token: String,
    token_uri: Option<String>,
    quota_project_id: Option<String>,
}

/// Just the kind of a credentials file.
#[derive(Deserialize)]
struct Tagged {
    #[serde(rename = "type")]
    kind: Option<String>,
}

impl GoogleCredentials {
    /// The credentials of the first place in the module's order that has some; `None` when no
    /// place does. A place that is set but unreadable (a missing file, JSON of another shape) is
    /// an error naming it.
    pub(crate) fn discover(
        config: Option<&Value>,
        env: EnvLookup<'_>,
    ) -> Result<Option<Self>, LlmError> {
        if let Some(value) = config {
            return Self::given(value, "vertex_credentials").map(Some);
        }
        for name in CREDENTIALS_ENV {
            if let Some(value) = first_env(env, &[name]) {
                return Self::given(&Value::String(value), name).map(Some);
            }
        }
        if let Some(path) = first_env(env, &[APPLICATION_CREDENTIALS_ENV]) {
            let origin = format!("{APPLICATION_CREDENTIALS_ENV} ({path})");
            return Self::from_file(Path::new(&path), origin).map(Some);
        }
        match well_known_file(env) {
            Some(path) if path.is_file() => {
                let origin = format!(
                    "the application default credentials of gcloud ({})",
                    path.display()
                );
                Self::from_file(&path, origin).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// Credentials given as a value: a JSON object, JSON text, or a path.
    fn given(value: &Value, origin: &str) -> Result<Self, LlmError> {
        match value {
            Value::Object(_) => Self::from_json(value.clone(), origin.to_string()),
            Value::String(text) if text.trim_start().starts_with('{') => {
                let json = serde_json::from_str(text).map_err(|e| {
                    LlmError::invalid_config(format!("{origin} is not valid JSON"), e)
                })?;
                Self::from_json(json, origin.to_string())
            }
            Value::String(path) => {
                let path = path.trim();
                Self::from_file(Path::new(path), format!("{origin} ({path})"))
            }
            _ => Err(LlmError::Config(format!(
                "{origin} must be a service-account key (its JSON) or the path of a credentials file"
            ))),
        }
    }

    fn from_file(path: &Path, origin: String) -> Result<Self, LlmError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            LlmError::invalid_config(format!("cannot read the credentials file of {origin}"), e)
        })?;
        let json = serde_json::from_str(&text)
            .map_err(|e| LlmError::invalid_config(format!("{origin} is not valid JSON"), e))?;
        Self::from_json(json, origin)
    }

    fn from_json(json: Value, origin: String) -> Result<Self, LlmError> {
        let shape = |e: serde_json::Error| {
            LlmError::invalid_config(format!("the credentials of {origin} lack a field"), e)
        };
        let kind = Tagged::deserialize(&json).map_err(shape)?.kind;
        let kind = match kind.as_deref() {
            Some("service_account") => {
                Kind::ServiceAccount(ServiceAccountKey::deserialize(&json).map_err(shape)?)
            }
            Some("authorized_user") => {
                Kind::AuthorizedUser(AuthorizedUser::deserialize(&json).map_err(shape)?)
            }
            other => {
                return Err(LlmError::Unsupported(format!(
                    "the credentials of {origin} are of type '{}'; Vertex AI here takes a \
                     service-account key (`service_account`) or `gcloud auth application-default \
                     login` credentials (`authorized_user`)",
                    other.unwrap_or("none")
                )));
            }
        };
        Ok(GoogleCredentials { kind, origin })
    }

    /// Where the credentials came from.
    pub(crate) fn origin(&self) -> &str {
        &self.origin
    }

    /// The project the credentials belong to: a service account's `project_id`, else an
    /// authorized user's `quota_project_id`.
    pub(crate) fn project(&self) -> Option<&str> {
        match &self.kind {
            Kind::ServiceAccount(key) => key.project_id.as_deref(),
            Kind::AuthorizedUser(user) => user.quota_project_id.as_deref(),
        }
        .filter(|p| !p.trim().is_empty())
    }

    /// The project a user's calls are billed to, which Google wants in `x-goog-user-project`
    /// (service accounts bill their own project).
    pub(crate) fn quota_project(&self) -> Option<&str> {
        match &self.kind {
            Kind::AuthorizedUser(user) => user.quota_project_id.as_deref(),
            Kind::ServiceAccount(_) => None,
        }
    }

    /// The credential a client sends: tokens exchanged at the key's endpoint, cached.
    /// `context` names the provider and model in errors.
    pub(crate) fn into_credential(
        self,
        context: ErrorContext,
        config: &LlmConfig,
    ) -> Result<Credential, LlmError> {
        let context = ErrorContext {
            key_hint: format!("the credentials of {}", self.origin),
            ..context
        };
        let endpoint = |uri: Option<&str>| {
            let uri = uri
                .filter(|u| !u.trim().is_empty())
                .unwrap_or(GOOGLE_TOKEN_URI);
            TokenEndpoint::new(uri, context.clone(), config)
        };
        Ok(match self.kind {
            Kind::ServiceAccount(key) => {
                let signing_key =
                    EncodingKey::from_rsa_pem(key.private_key.as_bytes()).map_err(|e| {
                        LlmError::invalid_config(
                            format!(
                                "the private_key of the service-account key in {} is not an RSA \
                                 key in PEM form",
                                self.origin
                            ),
                            e,
                        )
                    })?;
                Credential::exchanged(SignedAssertion {
                    endpoint: endpoint(key.token_uri.as_deref())?,
                    client_email: key.client_email,
                    key_id: key.private_key_id,
                    signing_key,
                })
            }
            Kind::AuthorizedUser(user) => Credential::exchanged(RefreshGrant {
                endpoint: endpoint(user.token_uri.as_deref())?,
                client_id: user.client_id,
                client_secret: user.client_secret,
                refresh_token: user.refresh_token,
            }),
        })
    }
}

/// Where gcloud writes application default credentials, from the build's environment.
fn well_known_file(env: EnvLookup<'_>) -> Option<PathBuf> {
    let dir = match first_env(env, &["CLOUDSDK_CONFIG"]) {
        Some(dir) => PathBuf::from(dir),
        None if cfg!(windows) => PathBuf::from(first_env(env, &["APPDATA"])?).join("gcloud"),
        None => PathBuf::from(first_env(env, &["HOME"])?)
            .join(".config")
            .join("gcloud"),
    };
    Some(dir.join(ADC_FILE))
}

/// The claims of a service account's token request.
#[derive(Serialize)]
struct AssertionClaims<'a> {
    iss: &'a str,
    scope: &'a str,
    aud: &'a str,
    iat: u64,
    exp: u64,
}

/// A service account's exchange: a JWT signed with its key, traded for a token.
struct SignedAssertion {
    endpoint: TokenEndpoint,
    client_email: String,
    key_id: Option<String>,
    signing_key: EncodingKey,
}

impl fmt::Debug for SignedAssertion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SignedAssertion")
            .field("client_email", &self.client_email)
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl SignedAssertion {
    fn assertion(&self) -> Result<String, LlmError> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let claims = AssertionClaims {
            iss: &self.client_email,
            scope: CLOUD_PLATFORM_SCOPE,
            aud: self.endpoint.url(),
            iat: now,
            exp: now + ASSERTION_LIFETIME_SECS,
        };
        let header = Header {
            kid: self.key_id.clone(),
            ..Header::new(Algorithm::RS256)
        };
        jsonwebtoken::encode(&header, &claims, &self.signing_key).map_err(|e| {
            LlmError::invalid_config(
                format!(
                    "signing the token request of service account {} failed",
                    self.client_email
                ),
                e,
            )
        })
    }
}

#[async_trait]
impl TokenExchange for SignedAssertion {
    async fn exchange(&self) -> Result<IssuedToken, LlmError> {
        let assertion = self.assertion()?;
        let form = [
            ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"),
            ("assertion", assertion.as_str()),
        ];
        self.endpoint.request(&form, &[&assertion]).await
    }
}

/// An authorized user's exchange: the refresh token traded for an access token.
struct RefreshGrant {
    endpoint: TokenEndpoint,
    client_id: String,
    client_secret: String,
    refresh_token: String,
}

impl fmt::Debug for RefreshGrant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RefreshGrant")
            .field("client_id", &self.client_id)
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl TokenExchange for RefreshGrant {
    async fn exchange(&self) -> Result<IssuedToken, LlmError> {
        let form = [
            ("grant_type", "refresh_token"),
            ("client_id", self.client_id.as_str()),
            ("client_secret", self.client_secret.as_str()),
            ("refresh_token", self.refresh_token.as_str()),
        ];
        self.endpoint
            .request(&form, &[&self.client_secret, &self.refresh_token])
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + Send + Sync + use<> {
        let map: std::collections::HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    fn user_json() -> Value {
        json!({"type": "authorized_user", "client_id": "c", "client_secret": "s",
               "refresh_token": "r", "quota_project_id": "billed-here"})
    }

    #[test]
    fn the_config_wins_then_the_variables_then_the_well_known_file() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let gcloud = dir.path().join(".config").join("gcloud");
        std::fs::create_dir_all(&gcloud).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(gcloud.join(ADC_FILE), user_json().to_string())
            .unwrap_or_else(|e| panic!("{e}"));
        let home = dir.path().to_string_lossy().to_string();

        let found = |config: Option<&Value>, pairs: &[(&str, &str)]| {
            let env = env_of(pairs);
            GoogleCredentials::discover(config, &env)
                .unwrap_or_else(|e| panic!("{e}"))
                .map(|c| c.origin().to_string())
        };
        let text = user_json().to_string();
        assert_eq!(
            found(Some(&user_json()), &[("VERTEXAI_CREDENTIALS", &text)]).as_deref(),
            Some("vertex_credentials")
        );
        assert_eq!(
            found(None, &[("VERTEX_CREDENTIALS", &text), ("HOME", &home)]).as_deref(),
            Some("VERTEX_CREDENTIALS")
        );
        let adc = found(None, &[("HOME", &home)]).unwrap_or_default();
        assert!(
            adc.starts_with("the application default credentials of gcloud"),
            "{adc}"
        );
        assert_eq!(found(None, &[("HOME", "/nowhere")]), None);
        assert_eq!(found(None, &[]), None);
    }

    #[test]
    fn a_user_bills_its_quota_project_and_a_service_account_its_own() {
        let user = GoogleCredentials::from_json(user_json(), "test".into())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(user.project(), Some("billed-here"));
        assert_eq!(user.quota_project(), Some("billed-here"));
    }

    #[test]
    fn unusable_credentials_say_where_they_came_from() {
        let env = env_of(&[(APPLICATION_CREDENTIALS_ENV, "/no/such/key.json")]);
        let error = GoogleCredentials::discover(None, &env)
            .err()
            .map(|e| crate::error_chain(&e))
            .unwrap_or_default();
        assert!(
            error.contains("GOOGLE_APPLICATION_CREDENTIALS (/no/such/key.json)"),
            "{error}"
        );

        let federated = json!({"type": "external_account", "audience": "x"});
        let error = GoogleCredentials::given(&federated, "vertex_credentials")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            error.contains("'external_account'") && error.contains("service_account"),
            "{error}"
        );

        let broken = Value::String("{not json".into());
        let error = GoogleCredentials::given(&broken, "VERTEXAI_CREDENTIALS")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            error.contains("VERTEXAI_CREDENTIALS is not valid JSON"),
            "{error}"
        );

        let keyless = json!({"type": "service_account", "client_email": "a@b"});
        let error = GoogleCredentials::given(&keyless, "vertex_credentials")
            .err()
            .map(|e| crate::error_chain(&e))
            .unwrap_or_default();
        assert!(error.contains("private_key"), "{error}");
    }
}
