//! `crewai models pull|list`, and which model a project gets when its files name none.
//!
//! The order: `--llm` or `MODEL`; a configured provider key; a reachable Ollama server; else the
//! embedded model (feature `local`), pulled on first use. `crewai run` says on stderr which one
//! it picked and why.

use anyhow::anyhow;
use crewai_llm::providers::ollama;
use crewai_llm::{LlmConfig, ProviderRegistry};
use crewai_project::{BuildOptions, Project};

use crate::outcome::{Failure, print_out};

/// The model strings the embedded fallback uses.
pub const EMBEDDED_MODEL: &str = "local/smollm2-135m";

/// The variables CrewAI reads the default model from, first set wins.
const MODEL_ENV: &[&str] = &["MODEL", "MODEL_NAME", "OPENAI_MODEL_NAME"];

/// The variables CrewAI reads the default model's endpoint from, first set wins.
const BASE_URL_ENV: &[&str] = &["BASE_URL", "API_BASE"];

/// The model chosen for agents that name none, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// `--llm` (it replaces every agent's model).
    Flag(String),
    /// The `MODEL` variable.
    EnvModel(String),
    /// A provider whose API key is set.
    ProviderKey { env_var: String, model: String },
    /// A running Ollama server and its first installed model.
    Ollama { host: String, model: String },
    /// The model that runs inside the process.
    Embedded,
}

impl Choice {
    pub fn model(&self) -> String {
        match self {
            Choice::Flag(model) | Choice::EnvModel(model) => model.clone(),
            Choice::ProviderKey { model, .. } | Choice::Ollama { model, .. } => model.clone(),
            Choice::Embedded => EMBEDDED_MODEL.to_string(),
        }
    }

    /// One line for stderr: the model and why it was picked.
    pub fn explain(&self) -> String {
        let model = self.model();
        match self {
            Choice::Flag(_) => format!("model: {model} (from --llm, for every agent)"),
            Choice::EnvModel(_) => {
                format!(
                    "model: {model} (from {}, for agents that name no llm)",
                    MODEL_ENV.join("/")
                )
            }
            Choice::ProviderKey { env_var, .. } => {
                format!("model: {model} ({env_var} is set; agents that name no llm use it)")
            }
            Choice::Ollama { host, .. } => format!(
                "model: {model} (Ollama is running at {host}; agents that name no llm use it)"
            ),
            Choice::Embedded => format!(
                "model: {model} (no provider is configured, so the small embedded model runs in this process; it is for trying \
                 crewai, not for good answers: set OPENAI_API_KEY, ANTHROPIC_API_KEY or GEMINI_API_KEY, start Ollama, or pass --llm)"
            ),
        }
    }
}

/// Picks the model in the documented order. The providers' keys are tried in the registry's
/// order, each giving the default model its descriptor declares; `ollama_model` asks a server
/// (by base URL) for its first installed model.
pub fn choose(
    flag: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
    ollama_model: &dyn Fn(&str) -> Option<String>,
    providers: &ProviderRegistry,
) -> Choice {
    let set = |name: &str| {
        env(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    if let Some(model) = flag.map(str::trim).filter(|m| !m.is_empty()) {
        return Choice::Flag(model.to_string());
    }
    // CrewAI's names for the default model, newest first.
    if let Some(model) = MODEL_ENV.iter().find_map(|name| set(name)) {
        return Choice::EnvModel(model);
    }
    for descriptor in providers.descriptors() {
        let Some(default) = &descriptor.default_model else {
            continue;
        };
        if let Some(env_var) = descriptor.key_env.iter().find(|name| set(name).is_some()) {
            let model = default
                .model_env
                .as_deref()
                .and_then(set)
                .map(|name| format!("{}/{name}", descriptor.name))
                .unwrap_or_else(|| default.model.clone());
            return Choice::ProviderKey {
                env_var: env_var.clone(),
                model,
            };
        }
    }
    let host = ollama::host(env);
    if let Some(model) = ollama_model(&host) {
        return Choice::Ollama {
            host,
            model: format!("{}/{model}", ollama::NAME),
        };
    }
    Choice::Embedded
}

/// True when some agent (or the manager of a hierarchical crew) names no model.
fn needs_default(project: &Project) -> bool {
    let unnamed = |config: Option<&LlmConfig>| {
        config.is_none_or(|c| c.model.trim().is_empty() && c.provider.is_none())
    };
    project
        .agents
        .iter()
        .any(|agent| unnamed(agent.spec.llm.as_ref()))
        || (project.crew.process == Some(crewai_project::ProcessSpec::Hierarchical)
            && project.crew.manager_agent.is_none()
            && unnamed(project.crew.manager_llm.as_ref()))
        || (project.crew.planning == Some(true) && unnamed(project.crew.planning_llm.as_ref()))
}

/// Model-building options with every provider this binary has (with `local`: the embedded chat
/// model, and the offline embedder for `embedder: {provider: local}`, which
/// `crewai_llm::embeddings::build_embedder_from` builds with these options).
pub fn llm_build_options() -> crewai_llm::BuildOptions {
    let options = crewai_llm::BuildOptions::new();
    #[cfg(feature = "local")]
    let options = options
        .with_provider(
            crewai_llm::LOCAL_PROVIDER,
            std::sync::Arc::new(crewai_local::build),
        )
        .with_embedder_provider(
            crewai_llm::embeddings::LOCAL_EMBEDDER_PROVIDER,
            std::sync::Arc::new(crewai_local::build_embedder),
        );
    options
}

/// Adds the model choice to a project's build options: registers the providers, picks the
/// default model when some agent needs one, says which on stderr, and pulls the embedded model
/// when it is the one that will run.
pub async fn configure(
    project: &Project,
    options: BuildOptions,
    flag: Option<&str>,
) -> Result<BuildOptions, Failure> {
    let options = options.with_llm_build(llm_build_options());
    if flag.is_none() && !needs_default(project) {
        return Ok(options);
    }
    with_chosen_default(options, flag).await
}

/// Picks the model for agents that name none (`--llm`, `MODEL`, a provider key, Ollama, the
/// embedded model), says which on stderr, pulls the embedded model when it is the one, and sets
/// it on `options`; `--llm` also overrides every agent's own model.
pub async fn with_chosen_default(
    options: BuildOptions,
    flag: Option<&str>,
) -> Result<BuildOptions, Failure> {
    let owned_flag = flag.map(str::to_string);
    let providers = options.llm_build.providers().clone();
    let runtime = tokio::runtime::Handle::current();
    // Off the async workers: `choose` asks the Ollama server only when no key decides, and
    // waits for its answer there.
    let choice = tokio::task::spawn_blocking(move || {
        choose(
            owned_flag.as_deref(),
            &|name| std::env::var(name).ok(),
            &|host| runtime.block_on(ollama::first_installed_model(host)),
            &providers,
        )
    })
    .await
    .map_err(|e| Failure::run(anyhow::Error::new(e).context("choosing a model failed")))?;
    eprintln!("{}", choice.explain());
    ensure_pulled(&choice.model()).await?;
    Ok(match choice {
        Choice::Flag(model) => options.with_llm(LlmConfig::new(model)),
        Choice::EnvModel(model) => {
            options.with_default_llm(env_model_config(model, &|name| std::env::var(name).ok()))
        }
        other => options.with_default_llm(LlmConfig::new(other.model())),
    })
}

/// The default model named by `MODEL` (or `MODEL_NAME`, `OPENAI_MODEL_NAME`), at the endpoint
/// `BASE_URL` (or `API_BASE`) names when one does, as CrewAI's default `LLM` reads them.
fn env_model_config(model: String, env: &dyn Fn(&str) -> Option<String>) -> LlmConfig {
    let config = LlmConfig::new(model);
    match BASE_URL_ENV.iter().find_map(|name| {
        env(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    }) {
        Some(base_url) => config.with_base_url(base_url),
        None => config,
    }
}

/// Downloads a known local model named by `model` (`local/<name>`) if it is not there yet.
#[cfg(feature = "local")]
async fn ensure_pulled(model: &str) -> Result<(), Failure> {
    let Some(spec) = model.trim().strip_prefix("local/") else {
        return Ok(());
    };
    let dir = crewai_local::models_dir();
    let Ok(crewai_local::ModelSource::Known { model: known, path }) =
        crewai_local::cache::resolve(spec, &dir)
    else {
        return Ok(());
    };
    if path.is_file() {
        return Ok(());
    }
    eprintln!(
        "The embedded model {} is not downloaded yet; fetching it once into {}.",
        known.name,
        dir.display()
    );
    pull_known(known).await
}

#[cfg(not(feature = "local"))]
async fn ensure_pulled(_model: &str) -> Result<(), Failure> {
    Ok(())
}

#[cfg(feature = "local")]
async fn pull_known(known: &'static crewai_local::KnownModel) -> Result<(), Failure> {
    let dir = crewai_local::models_dir();
    tokio::task::spawn_blocking(move || {
        crewai_local::pull(known, &dir, &mut |step| eprintln!("  {step}"))
    })
    .await
    .map_err(|e| Failure::run(anyhow::Error::new(e).context("the download stopped")))?
    .map(|_| ())
    .map_err(|e| Failure::run(anyhow!(e)))
}

/// `crewai models pull [NAME]`.
#[cfg(feature = "local")]
pub async fn pull(name: Option<&str>) -> Result<(), Failure> {
    let name = name.unwrap_or(crewai_local::DEFAULT_LOCAL_MODEL);
    let name = name.strip_prefix("local/").unwrap_or(name);
    let known = crewai_local::cache::known_model(name).ok_or_else(|| {
        let names: Vec<String> = crewai_local::KNOWN_MODELS
            .iter()
            .map(|m| match m.aliases.first() {
                Some(alias) => format!("{} ({alias})", m.name),
                None => m.name.to_string(),
            })
            .collect();
        Failure::config(anyhow!(
            "unknown model '{name}'; crewai can pull: {}",
            names.join(", ")
        ))
    })?;
    pull_known(known).await
}

/// How a known model is named where it is used: `local/<name>` for a chat model's `llm:`, the
/// bare name for an embedder's `model`.
#[cfg(feature = "local")]
fn usage_name(known: &crewai_local::KnownModel) -> String {
    match known.kind {
        crewai_local::ModelKind::Chat => format!("local/{}", known.name),
        crewai_local::ModelKind::Embedding | crewai_local::ModelKind::Interpreter => {
            known.name.to_string()
        }
    }
}

/// The name `crewai models pull` is shortest given for a known model.
#[cfg(feature = "local")]
fn pull_name(known: &crewai_local::KnownModel) -> &'static str {
    known.aliases.first().copied().unwrap_or(known.name)
}

/// `crewai models list`.
#[cfg(feature = "local")]
pub fn list(json: bool) -> Result<(), Failure> {
    use crewai_local::ModelKind;
    let dir = crewai_local::models_dir();
    let cached = crewai_local::cache::list(&dir);
    let others = cached.iter().filter(|m| m.known.is_none());
    if json {
        let known: Vec<_> = crewai_local::KNOWN_MODELS
            .iter()
            .map(|known| {
                let mut entry = serde_json::json!({
                    "model": usage_name(known),
                    "kind": match known.kind {
                        ModelKind::Chat => "chat",
                        ModelKind::Embedding => "embedding",
                        ModelKind::Interpreter => "interpreter",
                    },
                    "description": known.description,
                    "downloaded": known.is_pulled(&dir),
                    "pull": format!("crewai models pull {}", pull_name(known)),
                });
                if known.kind == ModelKind::Embedding {
                    entry["embedder"] = serde_json::json!({
                        "provider": crewai_llm::embeddings::LOCAL_EMBEDDER_PROVIDER,
                        "config": {"model": known.name},
                    });
                }
                entry
            })
            .collect();
        let others: Vec<_> = others
            .map(|other| {
                serde_json::json!({
                    "model": format!("local/{}", other.path.display()),
                    "size_bytes": other.size_bytes,
                })
            })
            .collect();
        return print_out(
            &serde_json::json!({"models_dir": dir, "known": known, "other_files": others})
                .to_string(),
        );
    }
    let mut lines = vec![format!(
        "models folder: {} (set CREWAI_MODELS_DIR to move it)",
        dir.display()
    )];
    for known in crewai_local::KNOWN_MODELS {
        let state = if known.is_pulled(&dir) {
            "downloaded".to_string()
        } else {
            format!("not downloaded: `crewai models pull {}`", pull_name(known))
        };
        let label = match known.kind {
            ModelKind::Chat => format!("llm: {}", usage_name(known)),
            ModelKind::Embedding => format!("embedder: local {}", usage_name(known)),
            ModelKind::Interpreter => format!("code sandbox: {}", usage_name(known)),
        };
        lines.push(format!("{label:<32} {state}  {}", known.description));
    }
    for other in others {
        lines.push(format!(
            "llm: local/{}  {} MB",
            other.path.display(),
            other.size_bytes / 1_000_000
        ));
    }
    print_out(&lines.join("\n"))
}

#[cfg(not(feature = "local"))]
pub async fn pull(_name: Option<&str>) -> Result<(), Failure> {
    Err(Failure::not_supported(
        "`crewai models pull` (this build has no `local` feature)",
    ))
}

#[cfg(not(feature = "local"))]
pub fn list(_json: bool) -> Result<(), Failure> {
    Err(Failure::not_supported(
        "`crewai models list` (this build has no `local` feature)",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pick(flag: Option<&str>, vars: &[(&str, &str)], ollama: Option<&str>) -> Choice {
        let env = |name: &str| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        };
        let ollama = |_: &str| ollama.map(str::to_string);
        choose(flag, &env, &ollama, llm_build_options().providers())
    }

    #[test]
    fn crewai_s_other_model_variables_and_base_url_are_read() {
        assert_eq!(
            pick(
                None,
                &[("MODEL_NAME", "groq/a"), ("OPENAI_MODEL_NAME", "b")],
                None
            ),
            Choice::EnvModel("groq/a".into())
        );
        assert_eq!(
            pick(
                None,
                &[("OPENAI_MODEL_NAME", "gpt-4o"), ("OPENAI_API_KEY", "k")],
                None
            ),
            Choice::EnvModel("gpt-4o".into())
        );
        let env = |name: &str| (name == "API_BASE").then(|| "http://127.0.0.1:9/v1".to_string());
        let config = env_model_config("my-model".into(), &env);
        assert_eq!(config.model, "my-model");
        assert_eq!(config.base_url.as_deref(), Some("http://127.0.0.1:9/v1"));
        assert_eq!(env_model_config("m".into(), &|_| None).base_url, None);
    }

    #[test]
    fn the_flag_wins_then_model_then_keys_then_ollama_then_embedded() {
        let everything = [
            ("MODEL", "groq/llama"),
            ("OPENAI_API_KEY", "k"),
            ("ANTHROPIC_API_KEY", "k"),
        ];
        assert_eq!(
            pick(Some("openai/gpt-4o"), &everything, Some("llama3")),
            Choice::Flag("openai/gpt-4o".into())
        );
        assert_eq!(
            pick(None, &everything, Some("llama3")),
            Choice::EnvModel("groq/llama".into())
        );
        assert_eq!(
            pick(None, &everything[1..], Some("llama3")).model(),
            "gpt-4.1-mini"
        );
        assert_eq!(
            pick(None, &everything[2..], None).model(),
            "anthropic/claude-sonnet-4-5"
        );
        assert_eq!(
            pick(None, &[("GOOGLE_API_KEY", "k")], None).model(),
            "gemini/gemini-2.5-flash"
        );
        assert_eq!(
            pick(
                None,
                &[("AZURE_API_KEY", "k"), ("AZURE_DEPLOYMENT_NAME", "prod")],
                None
            )
            .model(),
            "azure/prod"
        );
        assert_eq!(
            pick(None, &[], Some("llama3.1:8b")).model(),
            "ollama/llama3.1:8b"
        );
        assert_eq!(pick(None, &[], None), Choice::Embedded);
        // Blank values count as unset.
        assert_eq!(
            pick(Some(" "), &[("MODEL", ""), ("OPENAI_API_KEY", " ")], None),
            Choice::Embedded
        );
    }

    #[test]
    fn the_explanation_names_the_model_and_the_reason() {
        assert!(Choice::Embedded.explain().contains("local/smollm2-135m"));
        assert!(Choice::Embedded.explain().contains("not for good answers"));
        let key = Choice::ProviderKey {
            env_var: "OPENAI_API_KEY".into(),
            model: "gpt-4.1-mini".into(),
        };
        assert!(key.explain().contains("OPENAI_API_KEY is set"));
    }

    #[test]
    fn the_ollama_server_is_asked_where_ollama_host_says() {
        let asked = std::sync::Mutex::new(Vec::new());
        let ollama = |host: &str| {
            asked.lock().map(|mut a| a.push(host.to_string())).ok();
            None
        };
        let env = |name: &str| (name == "OLLAMA_HOST").then(|| "0.0.0.0:11434".to_string());
        let providers = ProviderRegistry::builtin();
        assert_eq!(choose(None, &env, &ollama, &providers), Choice::Embedded);
        assert_eq!(
            choose(None, &|_| None, &ollama, &providers),
            Choice::Embedded
        );
        assert_eq!(
            asked.lock().map(|a| a.clone()).unwrap_or_default(),
            ["http://0.0.0.0:11434", "http://localhost:11434"]
        );
    }

    #[test]
    fn a_registered_provider_with_a_default_model_is_picked_by_its_key() {
        let providers = ProviderRegistry::builtin().with(crewai_llm::Provider::openai_compatible(
            crewai_llm::ProviderDescriptor::new("myprov")
                .key_env(["MYPROV_API_KEY"])
                .default_model("myprov/some-model"),
        ));
        let env = |name: &str| (name == "MYPROV_API_KEY").then(|| "k".to_string());
        assert_eq!(
            choose(None, &env, &|_| None, &providers),
            Choice::ProviderKey {
                env_var: "MYPROV_API_KEY".into(),
                model: "myprov/some-model".into()
            }
        );
    }
}
