//! The routing rules of the module docs, one test per branch, and the registry's other readers.

use super::*;

fn routed(config: LlmConfig) -> Result<(String, String), LlmError> {
    ProviderRegistry::builtin()
        .route(&config)
        .map(|r| (r.provider().name.clone(), r.model().to_string()))
}

fn pair(provider: &str, model: &str) -> (String, String) {
    (provider.to_string(), model.to_string())
}

#[test]
fn an_explicit_provider_wins_and_strips_only_its_own_prefix() {
    let cases = [
        ("openai/gpt-4o", "azure", pair("azure", "openai/gpt-4o")),
        ("azure/prod", "azure", pair("azure", "prod")),
        (
            "claude/claude-3-haiku",
            "anthropic",
            pair("anthropic", "claude-3-haiku"),
        ),
        (
            "meta-llama/Llama-3-8B",
            "vllm",
            pair("openai_compatible", "meta-llama/Llama-3-8B"),
        ),
        ("tiny", "LOCAL", pair("local", "tiny")),
    ];
    for (model, provider, expected) in cases {
        let config = LlmConfig::new(model).with_provider(provider);
        assert_eq!(routed(config).unwrap(), expected, "{model} with {provider}");
    }
    match routed(LlmConfig::new("x").with_provider("nope")) {
        Err(LlmError::UnknownProvider { name, model, known }) => {
            assert_eq!((name.as_str(), model), ("nope", None));
            assert!(known.iter().any(|k| k == "openai_compatible"), "{known:?}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_known_prefix_routes_with_the_rest_of_the_name() {
    let cases = [
        ("openai/gpt-4o", pair("openai", "gpt-4o")),
        (
            "anthropic/claude-sonnet-4-5",
            pair("anthropic", "claude-sonnet-4-5"),
        ),
        (
            "claude/claude-sonnet-4-5",
            pair("anthropic", "claude-sonnet-4-5"),
        ),
        ("gemini/gemini-2.5-pro", pair("gemini", "gemini-2.5-pro")),
        ("google/gemini-2.5-pro", pair("gemini", "gemini-2.5-pro")),
        ("azure/my-deployment", pair("azure", "my-deployment")),
        ("ollama/llama3.1:8b", pair("ollama", "llama3.1:8b")),
        ("ollama_chat/qwen3", pair("ollama", "qwen3")),
        (
            "openrouter/meta-llama/llama-3-70b",
            pair("openrouter", "meta-llama/llama-3-70b"),
        ),
        ("deepseek/deepseek-chat", pair("deepseek", "deepseek-chat")),
        (
            "groq/llama-3.3-70b-versatile",
            pair("groq", "llama-3.3-70b-versatile"),
        ),
        (
            "bedrock/anthropic.claude-3",
            pair("bedrock", "anthropic.claude-3"),
        ),
        (
            "hosted_vllm/org/model",
            pair("openai_compatible", "org/model"),
        ),
        ("local/smollm2-135m", pair("local", "smollm2-135m")),
        (
            "vertex_ai/gemini-2.5-flash",
            pair("vertex_ai", "gemini-2.5-flash"),
        ),
        (
            "vertex_ai_beta/gemini-2.5-pro",
            pair("vertex_ai", "gemini-2.5-pro"),
        ),
        (
            "watsonx/ibm/granite-3-8b-instruct",
            pair("watsonx", "ibm/granite-3-8b-instruct"),
        ),
        (
            "watsonx/deployment/my-dep",
            pair("watsonx", "deployment/my-dep"),
        ),
        // `openai/` before a slashed name: "this server speaks OpenAI's API".
        (
            "openai/meta-llama/Llama-3-8B",
            pair("openai", "meta-llama/Llama-3-8B"),
        ),
    ];
    for (model, expected) in cases {
        assert_eq!(routed(LlmConfig::new(model)).unwrap(), expected, "{model}");
    }
    // A known prefix routes even with a base_url (a proxy in front of that provider).
    let proxied = LlmConfig::new("anthropic/claude-3-haiku").with_base_url("http://127.0.0.1:4000");
    assert_eq!(
        routed(proxied).unwrap(),
        pair("anthropic", "claude-3-haiku")
    );
}

#[test]
fn an_unknown_prefix_with_a_base_url_passes_the_whole_name_to_openai() {
    let config =
        LlmConfig::new("meta-llama/Llama-3.1-8B").with_base_url("http://localhost:8000/v1");
    assert_eq!(
        routed(config).unwrap(),
        pair("openai", "meta-llama/Llama-3.1-8B")
    );
    // A blank base_url is no base_url.
    assert!(routed(LlmConfig::new("meta-llama/Llama-3.1-8B").with_base_url(" ")).is_err());
}

#[test]
fn an_unknown_prefix_without_a_base_url_is_an_error_listing_the_prefixes() {
    let error = routed(LlmConfig::new("antropic/claude-3")).unwrap_err();
    match &error {
        LlmError::UnknownProvider { name, model, known } => {
            assert_eq!(name, "antropic");
            assert_eq!(model.as_deref(), Some("antropic/claude-3"));
            for expected in [
                "anthropic",
                "claude",
                "gemini",
                "ollama",
                "openai",
                "openrouter",
            ] {
                assert!(
                    known.iter().any(|k| k == expected),
                    "{expected} in {known:?}"
                );
            }
            let mut sorted = known.clone();
            sorted.sort();
            assert_eq!(&sorted, known);
        }
        other => panic!("{other:?}"),
    }
    let message = error.to_string();
    assert!(message.contains("known prefixes: anthropic, "), "{message}");
    assert!(message.contains("openai/antropic/claude-3"), "{message}");
}

#[test]
fn bare_names_go_to_the_provider_claiming_them_else_openai() {
    let cases = [
        ("gpt-4.1-mini", "openai"),
        ("chatgpt-4o-latest", "openai"),
        ("o1", "openai"),
        ("o3-mini", "openai"),
        ("o4-mini", "openai"),
        ("gpt-5", "openai"),
        ("claude-3-5-haiku-latest", "anthropic"),
        ("gemini-2.5-flash", "gemini"),
        ("gemma-3-27b-it", "gemini"),
        // Nobody claims these: OpenAI, as CrewAI does.
        ("o30b", "openai"),
        ("my-finetune", "openai"),
        ("codex-mini-latest", "openai"),
    ];
    for (model, provider) in cases {
        assert_eq!(
            routed(LlmConfig::new(model)).unwrap(),
            pair(provider, model),
            "{model}"
        );
    }
    // A base_url does not change where a claimed bare name goes.
    let proxied = LlmConfig::new("claude-3-haiku").with_base_url("http://127.0.0.1:4000");
    assert_eq!(
        routed(proxied).unwrap(),
        pair("anthropic", "claude-3-haiku")
    );
}

#[test]
fn registered_providers_route_and_later_ones_win_shared_names() {
    let registry = ProviderRegistry::builtin().with(Provider::openai_compatible(
        ProviderDescriptor::new("myprov")
            .alias("vllm")
            .infer_prefixes(["mine-"]),
    ));
    let name = |model: &str| {
        registry
            .route(&LlmConfig::new(model))
            .map(|r| r.provider().name.clone())
            .unwrap_or_default()
    };
    assert_eq!(name("myprov/x"), "myprov");
    assert_eq!(
        name("vllm/x"),
        "myprov",
        "the later registration wins an alias"
    );
    assert_eq!(name("mine-7b"), "myprov");
    assert_eq!(name("gpt-4o"), "openai");
    // Registering under an existing name replaces it in place.
    let replaced = registry.clone().with(Provider::unavailable(
        ProviderDescriptor::new("openai"),
        "is switched off here",
    ));
    assert_eq!(
        replaced.descriptors().count(),
        registry.descriptors().count()
    );
    assert!(!replaced.is_available("openai"));
    assert_eq!(
        replaced.descriptors().next().map(|d| d.name.as_str()),
        Some("openai")
    );
}

#[test]
fn an_empty_registry_routes_nothing() {
    let error = ProviderRegistry::empty()
        .route(&LlmConfig::new("gpt-4o"))
        .map(|r| r.model().to_string())
        .unwrap_err();
    assert!(matches!(error, LlmError::UnknownProvider { .. }), "{error}");
}

#[test]
fn telemetry_names_follow_the_genai_conventions() {
    let registry = ProviderRegistry::builtin();
    let cases = [
        ("gpt-4o-mini", "openai"),
        ("anthropic/claude-sonnet-4-5", "anthropic"),
        ("claude-3-haiku", "anthropic"),
        ("gemini-2.5-flash", "gcp.gemini"),
        ("google/gemini-2.5-flash", "gcp.gemini"),
        ("azure/prod", "azure.ai.openai"),
        ("bedrock/anthropic.claude-3", "aws.bedrock"),
        ("ollama/llama3", "ollama"),
        ("groq/llama-3.1-8b", "groq"),
        ("deepseek/deepseek-chat", "deepseek"),
        ("openrouter/x/y", "openrouter"),
        ("vertex_ai/gemini-2.5-flash", "gcp.vertex_ai"),
        ("watsonx/ibm/granite-4-h-small", "ibm.watsonx.ai"),
        ("some-unclaimed-model", "openai"),
        ("unknown/prefix", "openai"),
    ];
    for (model, system) in cases {
        assert_eq!(registry.gen_ai_system(model), system, "{model}");
    }
}

#[test]
fn every_builtin_provider_is_declared_once_with_its_default_models_in_order() {
    let registry = ProviderRegistry::builtin();
    let names: Vec<&str> = registry.descriptors().map(|d| d.name.as_str()).collect();
    let mut unique = names.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "{names:?}");
    let prefixes = registry.prefixes();
    let mut all: Vec<String> = registry
        .descriptors()
        .flat_map(|d| d.prefixes().map(str::to_string))
        .collect();
    all.sort();
    assert_eq!(all, prefixes, "no two providers share a name or alias");
    let defaults: Vec<&str> = registry
        .descriptors()
        .filter(|d| d.default_model.is_some())
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(
        defaults,
        [
            "openai",
            "anthropic",
            "gemini",
            "azure",
            "vertex_ai",
            "watsonx"
        ]
    );
    assert!(
        !registry.is_available("local"),
        "local waits for crewai-local"
    );
    assert!(
        registry.is_available("bedrock"),
        "bedrock is in the default build"
    );
}
