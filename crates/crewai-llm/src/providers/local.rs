//! The embedded model (`local/<name>`), which runs inside the process. Its client lives in
//! crewai-local, so this crate stays free of candle: the prefix is known here, and a program
//! registers the factory (`BuildOptions::with_provider("local", Arc::new(crewai_local::build))`,
//! which the CLI does with its `local` feature).

use super::{KeyRequirement, Provider, ProviderCapabilities, ProviderDescriptor};

pub const NAME: &str = "local";

pub fn descriptor() -> ProviderDescriptor {
    ProviderDescriptor::new(NAME)
        .capabilities(ProviderCapabilities {
            api_key: KeyRequirement::None,
            server_stop_words: false,
        })
        .otel_system("local")
}

/// Unavailable until crewai-local's factory is registered.
pub fn provider() -> Provider {
    Provider::unavailable(
        descriptor(),
        "runs inside the process and needs the `local` feature of crewai-cli (on by default), \
         or a program that registers `crewai_local::build` with `BuildOptions::with_provider(\"local\", ..)`",
    )
}
