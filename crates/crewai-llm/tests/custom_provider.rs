//! The worked example of ARCHITECTURE.md's "Adding a provider": a new OpenAI-compatible
//! provider is one module (its descriptor) and one registration line, and then routes, reads its
//! own key and endpoint variables and calls its server like a built-in one. Also the routing
//! rules for names with slashes, end to end against the scripted server.

use std::time::Duration;

use crewai_llm::router::BuildOptions;
use crewai_llm::{LlmConfig, LlmError, LlmRequest, Message, RetryPolicy, build_llm_with};
use crewai_testkit::scripted::{Reply, ScriptedServer};

/// The whole provider: a descriptor over OpenAI's chat-completions wire format.
mod myprov {
    use crewai_llm::providers::{
        KeyRequirement, Provider, ProviderCapabilities, ProviderDescriptor,
    };

    pub fn provider() -> Provider {
        Provider::openai_compatible(
            ProviderDescriptor::new("myprov")
                .alias("my_provider")
                .key_env(["MYPROV_API_KEY"])
                .base_url_env(["MYPROV_API_BASE"])
                .default_base_url("https://api.myprov.example/api/v2")
                .capabilities(ProviderCapabilities {
                    api_key: KeyRequirement::Required,
                    server_stop_words: true,
                })
                .otel_system("myprov")
                .context_windows([("some-model", 32_768)])
                .infer_prefixes(["myprov-"]),
        )
    }
}

fn options(vars: &[(&str, &str)]) -> BuildOptions {
    let vars: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    BuildOptions::new()
        .with_env_vars(vars)
        .with_retry_policy(RetryPolicy::none())
        // The registration line.
        .register(myprov::provider())
}

/// The provider's default endpoint moved onto the scripted server (`http://127.0.0.1:PORT/api/v2`).
fn base_at(server: &ScriptedServer) -> String {
    myprov::provider()
        .descriptor()
        .base_url_at(&server.root_url())
}

async fn ask(llm: &dyn crewai_llm::Llm) -> Result<String, LlmError> {
    let reply = tokio::time::timeout(
        Duration::from_secs(10),
        llm.call(LlmRequest::new(vec![Message::user("hello")])),
    )
    .await
    .map_err(|_| LlmError::Config("the scripted server did not answer in 10 s".into()))??;
    Ok(reply.content.unwrap_or_default())
}

#[tokio::test]
async fn a_registered_provider_routes_and_calls_its_server_with_its_key() {
    let server = ScriptedServer::start().await;
    server.push_text("hi from myprov");
    let base = base_at(&server);
    assert!(base.ends_with("/api/v2"), "{base}");
    let options = options(&[("MYPROV_API_KEY", "sk-myprov"), ("MYPROV_API_BASE", &base)]);

    let llm = build_llm_with(&LlmConfig::new("myprov/some-model"), &options)
        .unwrap_or_else(|e| panic!("build: {e}"));
    assert_eq!((llm.provider(), llm.model()), ("myprov", "some-model"));
    assert_eq!(
        llm.capabilities().context_window,
        32_768,
        "the declared window"
    );
    assert_eq!(
        ask(llm.as_ref()).await.unwrap_or_else(|e| panic!("{e}")),
        "hi from myprov"
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(
        (request.method.as_str(), request.path.as_str()),
        ("POST", "/api/v2/chat/completions")
    );
    assert_eq!(request.header("authorization"), Some("Bearer sk-myprov"));
    assert_eq!(request.body["model"], "some-model");
}

#[tokio::test]
async fn aliases_bare_names_and_the_config_reach_the_same_provider() {
    let server = ScriptedServer::start().await;
    server.push_all([Reply::text("one"), Reply::text("two"), Reply::text("three")]);
    let base = base_at(&server);
    let options = options(&[("MYPROV_API_KEY", "sk-env")]);
    let configs = [
        LlmConfig::new("my_provider/some-model").with_base_url(&base),
        LlmConfig::new("myprov-large").with_base_url(&base),
        LlmConfig::new("org/some-model")
            .with_provider("myprov")
            .with_base_url(&base)
            .with_api_key("sk-config"),
    ];
    for config in &configs {
        let llm = build_llm_with(config, &options).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(llm.provider(), "myprov", "{}", config.model);
        ask(llm.as_ref()).await.unwrap_or_else(|e| panic!("{e}"));
    }
    let requests = server.requests();
    let sent: Vec<(&str, Option<&str>)> = requests
        .iter()
        .map(|r| {
            (
                r.body["model"].as_str().unwrap_or(""),
                r.header("authorization"),
            )
        })
        .collect();
    assert_eq!(
        sent,
        [
            ("some-model", Some("Bearer sk-env")),
            ("myprov-large", Some("Bearer sk-env")),
            ("org/some-model", Some("Bearer sk-config")),
        ]
    );
}

#[test]
fn a_required_key_that_is_missing_names_the_providers_variable() {
    match build_llm_with(&LlmConfig::new("myprov/some-model"), &options(&[])) {
        Err(LlmError::MissingApiKey { provider, env_var }) => {
            assert_eq!(
                (provider.as_str(), env_var.as_str()),
                ("myprov", "MYPROV_API_KEY")
            );
        }
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("built without a key"),
    }
}

#[tokio::test]
async fn a_slashed_name_with_a_base_url_is_passed_whole_to_the_server() {
    let server = ScriptedServer::start().await;
    server.push_text("from vllm");
    let config = LlmConfig::new("meta-llama/Llama-3-8B").with_base_url(server.base_url());
    let llm = build_llm_with(&config, &options(&[])).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(llm.provider(), "openai");
    assert_eq!(
        ask(llm.as_ref()).await.unwrap_or_else(|e| panic!("{e}")),
        "from vllm"
    );
    let request = &server.requests()[0];
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(request.body["model"], "meta-llama/Llama-3-8B");
    assert_eq!(
        request.header("authorization"),
        None,
        "a local server needs no key"
    );
}

#[test]
fn a_slashed_name_with_an_unknown_prefix_and_no_base_url_is_refused() {
    let options = options(&[("OPENAI_API_KEY", "sk-openai")]);
    match build_llm_with(&LlmConfig::new("meta-llama/Llama-3-8B"), &options) {
        Err(error @ LlmError::UnknownProvider { .. }) => {
            let message = error.to_string();
            assert!(message.contains("'meta-llama'"), "{message}");
            assert!(
                message.contains("myprov"),
                "the registered provider is listed: {message}"
            );
        }
        Err(other) => panic!("{other}"),
        Ok(llm) => panic!("sent to {}", llm.provider()),
    }
}

#[tokio::test]
async fn a_known_prefix_keeps_the_slashes_of_the_rest() {
    let server = ScriptedServer::start().await;
    server.push_text("routed");
    let config =
        LlmConfig::new("openrouter/meta-llama/llama-3-70b").with_base_url(server.base_url());
    let llm = build_llm_with(&config, &options(&[("OPENROUTER_API_KEY", "sk-or")]))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(llm.provider(), "openrouter");
    ask(llm.as_ref()).await.unwrap_or_else(|e| panic!("{e}"));
    let request = &server.requests()[0];
    assert_eq!(request.body["model"], "meta-llama/llama-3-70b");
    assert_eq!(request.header("authorization"), Some("Bearer sk-or"));
}

/// Each hosted OpenAI-compatible service: its prefix routes to it, its key variable (LiteLLM's
/// name) is sent as the bearer token, its endpoint variable moves it, and the model goes without
/// the prefix.
#[tokio::test]
async fn every_hosted_openai_compatible_provider_routes_with_its_own_variables() {
    for (model, provider, key_env, base_env, sent_model) in [
        (
            "mistral/mistral-small-latest",
            "mistral",
            "MISTRAL_API_KEY",
            "MISTRAL_API_BASE",
            "mistral-small-latest",
        ),
        (
            "together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo",
            "together_ai",
            "TOGETHERAI_API_KEY",
            "TOGETHERAI_API_BASE",
            "meta-llama/Llama-3.3-70B-Instruct-Turbo",
        ),
        (
            "fireworks_ai/accounts/fireworks/models/llama-v3p1-8b-instruct",
            "fireworks_ai",
            "FIREWORKS_AI_API_KEY",
            "FIREWORKS_AI_API_BASE",
            "accounts/fireworks/models/llama-v3p1-8b-instruct",
        ),
        (
            "cerebras/llama3.1-8b",
            "cerebras",
            "CEREBRAS_API_KEY",
            "CEREBRAS_API_BASE",
            "llama3.1-8b",
        ),
        (
            "xai/grok-3-mini",
            "xai",
            "XAI_API_KEY",
            "XAI_API_BASE",
            "grok-3-mini",
        ),
        (
            "perplexity/sonar",
            "perplexity",
            "PERPLEXITYAI_API_KEY",
            "PERPLEXITY_API_BASE",
            "sonar",
        ),
        (
            "nvidia_nim/meta/llama3-8b-instruct",
            "nvidia_nim",
            "NVIDIA_NIM_API_KEY",
            "NVIDIA_NIM_API_BASE",
            "meta/llama3-8b-instruct",
        ),
        (
            "sambanova/Meta-Llama-3.1-8B-Instruct",
            "sambanova",
            "SAMBANOVA_API_KEY",
            "SAMBANOVA_API_BASE",
            "Meta-Llama-3.1-8B-Instruct",
        ),
        (
            "dashscope/qwen-turbo",
            "dashscope",
            "DASHSCOPE_API_KEY",
            "DASHSCOPE_API_BASE",
            "qwen-turbo",
        ),
        (
            "huggingface/meta-llama/Llama-3.1-8B-Instruct",
            "huggingface",
            "HF_TOKEN",
            "HUGGINGFACE_API_BASE",
            "meta-llama/Llama-3.1-8B-Instruct",
        ),
        (
            "deepinfra/meta-llama/Meta-Llama-3.1-8B-Instruct",
            "deepinfra",
            "DEEPINFRA_API_KEY",
            "DEEPINFRA_API_BASE",
            "meta-llama/Meta-Llama-3.1-8B-Instruct",
        ),
        (
            "cohere/command-r",
            "cohere",
            "COHERE_API_KEY",
            "COHERE_API_BASE",
            "command-r",
        ),
        (
            "together/x/y",
            "together_ai",
            "TOGETHER_API_KEY",
            "TOGETHER_API_BASE",
            "x/y",
        ),
    ] {
        let server = ScriptedServer::start().await;
        server.push_text("hosted");
        let base = format!("{}/v9", server.root_url());
        let options = options(&[(key_env, "sk-hosted"), (base_env, base.as_str())]);
        let llm = build_llm_with(&LlmConfig::new(model), &options)
            .unwrap_or_else(|e| panic!("{model}: {e}"));
        assert_eq!(llm.provider(), provider, "{model}");
        assert_eq!(
            ask(llm.as_ref())
                .await
                .unwrap_or_else(|e| panic!("{model}: {e}")),
            "hosted"
        );
        let request = &server.requests()[0];
        assert_eq!(request.path, "/v9/chat/completions", "{model}");
        assert_eq!(request.body["model"], sent_model, "{model}");
        assert_eq!(
            request.header("authorization"),
            Some("Bearer sk-hosted"),
            "{model}"
        );
    }
}

#[test]
fn a_hosted_provider_without_its_key_names_the_variables_to_set() {
    match build_llm_with(&LlmConfig::new("together_ai/some-model"), &options(&[])) {
        Err(error) => {
            let message = error.to_string();
            assert!(message.contains("TOGETHERAI_API_KEY"), "{message}");
        }
        Ok(llm) => panic!("built {} without a key", llm.provider()),
    }
}
