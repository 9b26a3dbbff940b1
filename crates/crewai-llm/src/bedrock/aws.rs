//! The AWS side of a Bedrock client, each part done by AWS's own crates: the region, the
//! credentials (found the way the AWS SDK finds them, kept and refreshed before they expire) and
//! the Signature Version 4 of each request.
//!
//! Why aws-config and not a resolution of our own: the sources users rely on (the shared
//! config and credentials files with `credential_process`, `role_arn` assumption through STS and
//! SSO sessions, the ECS/EKS container endpoint, IMDSv2) are each a protocol of their own, and
//! aws-config is AWS's implementation of all of them. Measured on this machine (2 cores, shared;
//! the README's Bedrock section has the commands): it adds 50 crates to crewai-llm's tree (149 to
//! 199) and no duplicate versions (its HTTP client is hyper 1 and rustls on aws-lc-rs, which the
//! crate already builds), a clean debug build of crewai-llm went from 2 m 56 s to 3 m 58 s, and
//! the release `crewai` binary grew by 2.9 MB (the figures are repeated in the README).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use aws_config::BehaviorVersion;
use aws_credential_types::Credentials;
use aws_credential_types::provider::error::CredentialsError;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_runtime::env_config::file::EnvConfigFiles;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;
use aws_types::os_shim_internal::{Env, Fs};
use tokio::sync::{Mutex, OnceCell};

use super::PROVIDER;
use crate::error::{BoxError, LlmError};

/// The SigV4 service name of Bedrock's runtime endpoints.
const SERVICE: &str = "bedrock";
/// The region when neither the environment nor the profile names one (LiteLLM's and the old
/// default of this client).
pub const DEFAULT_REGION: &str = "us-east-1";
/// Temporary credentials are fetched again this long before they expire, so a request signed
/// with them never reaches AWS expired (a retried call is signed again each attempt).
pub const REFRESH_BEFORE_EXPIRY: Duration = Duration::from_secs(5 * 60);
/// The longest wait for a credential source. Each source the SDK tries has its own shorter
/// timeouts (the container endpoint 2 s to connect and 5 s to read, IMDS 1 s per attempt), but a
/// `credential_process` command has none.
pub const CREDENTIALS_TIMEOUT: Duration = Duration::from_secs(30);

/// The region variables read before the profile's `region`: the SDK's two and LiteLLM's.
const REGION_VARIABLES: &[&str] = &["AWS_REGION", "AWS_DEFAULT_REGION", "AWS_REGION_NAME"];

/// The variables aws-config 1.13 reads while it resolves a region and credentials (the names
/// in its sources and aws-runtime's), and those that locate the home folder. aws-config takes
/// an environment as a map, so a build's lookup is asked for these names.
const SDK_VARIABLES: &[&str] = &[
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_ACCOUNT_ID",
    "AWS_PROFILE",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
    "AWS_ROLE_SESSION_NAME",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
    "AWS_EC2_METADATA_DISABLED",
    "AWS_EC2_METADATA_SERVICE_ENDPOINT",
    "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_STS",
    "AWS_ENDPOINT_URL_SSO",
    "AWS_ENDPOINT_URL_SSO_OIDC",
    "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
    "AWS_USE_FIPS_ENDPOINT",
    "AWS_USE_DUALSTACK_ENDPOINT",
    "AWS_MAX_ATTEMPTS",
    "AWS_RETRY_MODE",
    "AWS_SDK_UA_APP_ID",
    "HOME",
    "USERPROFILE",
    "HOMEDRIVE",
    "HOMEPATH",
];

/// What the error of a failed credential search tells the user to set.
const WHERE_TO_PUT_CREDENTIALS: &str = "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, \
     name a profile of ~/.aws/credentials or ~/.aws/config with AWS_PROFILE (keys, \
     credential_process, sso_session or role_arn), run where a container or instance role \
     applies, or set AWS_BEARER_TOKEN_BEDROCK to a Bedrock API key";

/// A build's environment as the AWS SDK reads it: the SDK's variables taken from the build's
/// lookup (the process environment unless the build says otherwise), so a program or a test
/// that hands a build its own variables gets them for AWS too.
#[derive(Clone, Debug)]
pub struct AwsEnvironment(Env);

impl AwsEnvironment {
    /// The SDK's variables as `lookup` answers them.
    pub fn from_lookup(lookup: &dyn Fn(&str) -> Option<String>) -> Self {
        let vars: std::collections::HashMap<String, String> = SDK_VARIABLES
            .iter()
            .filter_map(|name| lookup(name).map(|value| (name.to_string(), value)))
            .collect();
        AwsEnvironment(Env::from(vars))
    }

    fn get(&self, name: &str) -> Option<String> {
        self.0
            .get(name)
            .ok()
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    }
}

/// Where a client's region comes from.
#[derive(Clone, Debug)]
pub enum BedrockRegion {
    /// This region.
    Named(String),
    /// `AWS_REGION`, `AWS_DEFAULT_REGION` or `AWS_REGION_NAME`, else the `region` of the selected
    /// profile (`AWS_PROFILE`, else `default`) in the shared config files, else
    /// [`DEFAULT_REGION`]. Instance metadata is not asked: off EC2 it would cost a timeout.
    FromEnvironment(AwsEnvironment),
}

impl BedrockRegion {
    /// The region's name; reads the shared config files when it has to.
    pub async fn resolve(&self) -> Result<String, LlmError> {
        let env = match self {
            BedrockRegion::Named(name) => return Ok(name.clone()),
            BedrockRegion::FromEnvironment(env) => env,
        };
        if let Some(name) = REGION_VARIABLES.iter().find_map(|name| env.get(name)) {
            return Ok(name);
        }
        let profiles =
            aws_config::profile::load(&Fs::real(), &env.0, &EnvConfigFiles::default(), None)
                .await
                .map_err(|e| {
                    LlmError::invalid_config(
                        "bedrock: the AWS shared config files (~/.aws/config, ~/.aws/credentials, \
                         or AWS_CONFIG_FILE / AWS_SHARED_CREDENTIALS_FILE) cannot be read for the \
                         region; fix them or set AWS_REGION",
                        e,
                    )
                })?;
        Ok(profiles
            .get("region")
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .unwrap_or(DEFAULT_REGION)
            .to_string())
    }
}

/// AWS credentials for signing: fixed keys, any credentials provider of the AWS SDK, or the
/// SDK's default chain (environment, shared files with `credential_process`, SSO and
/// `role_arn`, web identity, the container endpoint, IMDSv2). Cloning shares one cache: the
/// credentials are fetched once and again only when they come within
/// [`REFRESH_BEFORE_EXPIRY`] of their expiry.
#[derive(Clone)]
pub struct AwsCredentials {
    inner: Arc<CredentialsCache>,
}

impl std::fmt::Debug for AwsCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let source = match &self.inner.source {
            Source::Provider(_) => "provider",
            Source::DefaultChain(_) => "default chain",
        };
        f.debug_struct("AwsCredentials")
            .field("source", &source)
            .finish_non_exhaustive()
    }
}

enum Source {
    Provider(SharedCredentialsProvider),
    /// The SDK's default chain over this environment, made at the first signature (it needs
    /// the region, for STS and SSO).
    DefaultChain(AwsEnvironment),
}

struct CredentialsCache {
    source: Source,
    chain: OnceCell<Option<SharedCredentialsProvider>>,
    /// The last credentials fetched; the lock also makes concurrent calls wait for one fetch.
    current: Mutex<Option<Credentials>>,
}

impl AwsCredentials {
    /// An access key pair (with the session token of temporary credentials).
    pub fn fixed(
        access_key_id: impl Into<String>,
        secret_access_key: impl Into<String>,
        session_token: Option<String>,
    ) -> Self {
        let credentials = Credentials::new(
            access_key_id,
            secret_access_key,
            session_token,
            None,
            "crewai-config",
        );
        Self::from_provider(credentials)
    }

    /// Credentials from `provider` (any of aws-config's providers, or your own).
    pub fn from_provider(provider: impl ProvideCredentials + 'static) -> Self {
        Self::with_source(Source::Provider(SharedCredentialsProvider::new(provider)))
    }

    /// The AWS SDK's default credential chain, reading `env`.
    pub fn default_chain(env: AwsEnvironment) -> Self {
        Self::with_source(Source::DefaultChain(env))
    }

    fn with_source(source: Source) -> Self {
        AwsCredentials {
            inner: Arc::new(CredentialsCache {
                source,
                chain: OnceCell::new(),
                current: Mutex::new(None),
            }),
        }
    }

    /// Credentials valid for at least [`REFRESH_BEFORE_EXPIRY`]: the kept ones, or new ones.
    pub async fn get(&self, region: &str) -> Result<Credentials, LlmError> {
        let mut current = self.inner.current.lock().await;
        if let Some(credentials) = current.as_ref().filter(|c| is_fresh(c, SystemTime::now())) {
            return Ok(credentials.clone());
        }
        let provider = self.provider(region).await?;
        let fetched = tokio::time::timeout(CREDENTIALS_TIMEOUT, provider.provide_credentials())
            .await
            .map_err(|_| LlmError::Credentials {
                provider: PROVIDER.into(),
                message: format!(
                    "no credential source answered within {} s (a slow credential_process, \
                     container endpoint or instance metadata service)",
                    CREDENTIALS_TIMEOUT.as_secs()
                ),
                source: None,
            })?
            .map_err(credentials_error)?;
        *current = Some(fetched.clone());
        Ok(fetched)
    }

    async fn provider(&self, region: &str) -> Result<SharedCredentialsProvider, LlmError> {
        let env = match &self.inner.source {
            Source::Provider(provider) => return Ok(provider.clone()),
            Source::DefaultChain(env) => env,
        };
        let chain = self
            .inner
            .chain
            .get_or_init(|| async {
                let config = aws_config::defaults(BehaviorVersion::latest())
                    .env(env.0.clone())
                    .region(aws_config::Region::new(region.to_string()))
                    .load()
                    .await;
                config.credentials_provider()
            })
            .await;
        chain.clone().ok_or_else(|| LlmError::Credentials {
            provider: PROVIDER.into(),
            message: format!("the AWS SDK set up no credential chain; {WHERE_TO_PUT_CREDENTIALS}"),
            source: None,
        })
    }
}

/// Usable for a while yet: no expiry (long-term keys), or more than [`REFRESH_BEFORE_EXPIRY`] away.
fn is_fresh(credentials: &Credentials, now: SystemTime) -> bool {
    credentials
        .expiry()
        .is_none_or(|expiry| expiry > now + REFRESH_BEFORE_EXPIRY)
}

fn credentials_error(error: CredentialsError) -> LlmError {
    let message = match &error {
        CredentialsError::CredentialsNotLoaded(_) => {
            format!("none of the AWS credential sources had any; {WHERE_TO_PUT_CREDENTIALS}")
        }
        CredentialsError::InvalidConfiguration(_) => {
            "the AWS credential configuration is invalid (a profile, credential_process or \
             container endpoint setting); fix it or set AWS_ACCESS_KEY_ID and \
             AWS_SECRET_ACCESS_KEY"
                .to_string()
        }
        _ => "an AWS credential source failed".to_string(),
    };
    LlmError::Credentials {
        provider: PROVIDER.into(),
        message,
        source: Some(error.into()),
    }
}

/// The headers that authorise a POST of `body` to `url` with Signature Version 4, for Bedrock
/// in `region` at `time`: `x-amz-date`, `x-amz-security-token` for temporary credentials, and
/// `authorization`. `headers` are the request's own headers, all signed (`user-agent` and the
/// others the signer leaves out excepted); they must go out unchanged.
pub fn sign_request(
    url: &str,
    headers: &[(String, String)],
    body: &[u8],
    credentials: &Credentials,
    region: &str,
    time: SystemTime,
) -> Result<Vec<(String, String)>, LlmError> {
    let refused = |e: BoxError| {
        LlmError::invalid_config(format!("bedrock: cannot sign a request to {url}"), e)
    };
    let identity = credentials.clone().into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(SERVICE)
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| refused(e.into()))?
        .into();
    let signable = SignableRequest::new(
        "POST",
        url,
        headers.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        SignableBody::Bytes(body),
    )
    .map_err(|e| refused(e.into()))?;
    let (instructions, _signature) = aws_sigv4::http_request::sign(signable, &params)
        .map_err(|e| refused(e.into()))?
        .into_parts();
    let (signed, _query) = instructions.into_parts();
    Ok(signed
        .into_iter()
        .map(|h| (h.name().to_string(), h.value().to_string()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_converse_request_is_signed_as_botocore_signs_it() {
        // AWS's SigV4 test-suite credentials and time; the signature is the one botocore's
        // `SigV4Auth` computes for this request (the model id's `%3A` encoded again, as AWS
        // wants outside S3; the session token signed).
        let credentials = Credentials::new(
            "AKIDEXAMPLE",
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            Some("session-token".into()),
            None,
            "test",
        );
        let time = SystemTime::UNIX_EPOCH + Duration::from_secs(1_440_938_160); // 20150830T123600Z
        let signed = sign_request(
            "https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse",
            &[("content-type".into(), "application/json".into())],
            br#"{"messages":[]}"#,
            &credentials,
            "us-east-1",
            time,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let header = |name: &str| {
            signed
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(header("x-amz-date"), Some("20150830T123600Z"));
        assert_eq!(header("x-amz-security-token"), Some("session-token"));
        assert_eq!(
            header("authorization"),
            Some(
                "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/bedrock/aws4_request, \
                 SignedHeaders=content-type;host;x-amz-date;x-amz-security-token, \
                 Signature=eceec53e2aa65291dd41f10774da52d41a8cbb4396233608afddf28f00ccd273"
            )
        );
    }

    #[test]
    fn expiring_credentials_are_not_fresh() {
        let now = SystemTime::now();
        let with_expiry =
            |after: Duration| Credentials::new("a", "s", None, Some(now + after), "test");
        assert!(is_fresh(
            &Credentials::new("a", "s", None, None, "test"),
            now
        ));
        assert!(is_fresh(&with_expiry(Duration::from_secs(3600)), now));
        assert!(!is_fresh(&with_expiry(Duration::from_secs(60)), now));
    }
}
