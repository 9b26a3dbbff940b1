//! OpenTelemetry export: an [`EventBus`] listener that turns a run's events into spans (crew
//! kickoff → task → agent → LLM call / tool call / delegation) named and attributed after the
//! GenAI semantic conventions, and ships them over OTLP/HTTP (protobuf or JSON).
//!
//! Export is off unless configured: [`OtelConfig::from_env`] reads the standard variables
//! (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`,
//! `OTEL_EXPORTER_OTLP_PROTOCOL`, `OTEL_SERVICE_NAME`, `OTEL_SDK_DISABLED`). Prompts, replies and
//! tool arguments are recorded only when `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`
//! (or [`OtelConfig::with_content`]). Nothing is ever sent anywhere else.

use std::time::Duration;

use crewai_core::events::{DroppedEvents, Event, EventBus, EventChannel, EventKind, ListenerGuard};
use crewai_llm::ProviderRegistry;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use tokio::task::JoinHandle;

use crate::spans::SpanAssembler;

mod shape;

use shape::SpanShape;

/// The default service name when `OTEL_SERVICE_NAME` is not set.
pub const DEFAULT_SERVICE_NAME: &str = "crewai";
/// Spans sent in one export request at most.
const MAX_BATCH: usize = 256;
/// How long one export request may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// Events queued between the bus and the export task. An export request that hangs for its
/// whole timeout lets a busy run queue this many events before the bus starts dropping (and
/// counting) them.
const EVENT_QUEUE: usize = 4096;

/// The OTLP/HTTP encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtlpProtocol {
    /// `http/protobuf` (the default).
    HttpProtobuf,
    /// `http/json`.
    HttpJson,
}

/// Setting up export failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OtelError {
    #[error(
        "OTEL_EXPORTER_OTLP_PROTOCOL is '{0}', but only 'http/protobuf' and 'http/json' are supported (gRPC is not built in)"
    )]
    UnsupportedProtocol(String),
    #[error("cannot create the OTLP exporter for {endpoint}")]
    Exporter {
        endpoint: String,
        #[source]
        source: opentelemetry_otlp::ExporterBuildError,
    },
    #[error("OpenTelemetry export needs a tokio runtime to run in")]
    NoRuntime,
}

/// Where and how spans are exported.
#[derive(Debug, Clone, PartialEq)]
pub struct OtelConfig {
    /// The full URL spans are POSTed to (`<OTEL_EXPORTER_OTLP_ENDPOINT>/v1/traces`).
    pub traces_endpoint: String,
    pub protocol: OtlpProtocol,
    pub service_name: String,
    /// Record prompts, replies, tool arguments and results on the spans.
    pub record_content: bool,
}

impl OtelConfig {
    /// Export to `base_endpoint` (`/v1/traces` is appended, as the OTLP spec says for the
    /// general endpoint) with protobuf, service `crewai`, and no contents.
    pub fn new(base_endpoint: &str) -> Self {
        OtelConfig {
            traces_endpoint: format!("{}/v1/traces", base_endpoint.trim_end_matches('/')),
            protocol: OtlpProtocol::HttpProtobuf,
            service_name: DEFAULT_SERVICE_NAME.to_string(),
            record_content: false,
        }
    }

    pub fn with_protocol(mut self, protocol: OtlpProtocol) -> Self {
        self.protocol = protocol;
        self
    }

    pub fn with_service_name(mut self, name: impl Into<String>) -> Self {
        self.service_name = name.into();
        self
    }

    /// Records prompts, replies and tool input/output on the spans.
    pub fn with_content(mut self, record: bool) -> Self {
        self.record_content = record;
        self
    }

    /// The configuration the standard environment variables ask for; `Ok(None)` when no
    /// endpoint is set (or `OTEL_SDK_DISABLED=true`): export is off.
    pub fn from_env() -> Result<Option<Self>, OtelError> {
        Self::from_lookup(|name| std::env::var(name).ok().filter(|v| !v.trim().is_empty()))
    }

    /// [`OtelConfig::from_env`] with the variables read through `var`.
    pub fn from_lookup(var: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, OtelError> {
        if var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        let mut config = match (
            var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
            var("OTEL_EXPORTER_OTLP_ENDPOINT"),
        ) {
            // The signal-specific endpoint is used as written.
            (Some(traces), _) => OtelConfig {
                traces_endpoint: traces,
                ..OtelConfig::new("")
            },
            (None, Some(base)) => OtelConfig::new(&base),
            (None, None) => return Ok(None),
        };
        let protocol = var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            .or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL"));
        config.protocol = match protocol.as_deref().map(str::trim) {
            None | Some("http/protobuf") => OtlpProtocol::HttpProtobuf,
            Some("http/json") => OtlpProtocol::HttpJson,
            Some(other) => return Err(OtelError::UnsupportedProtocol(other.to_string())),
        };
        if let Some(name) = var("OTEL_SERVICE_NAME") {
            config.service_name = name;
        }
        config.record_content = var("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        Ok(Some(config))
    }
}

/// A running export: subscribed to one bus through a channel ([`EventBus::subscribe_channel`]);
/// a background task turns the events into spans and ships them, so neither span assembly nor
/// the network runs inside the agent loop. Should the queue fill (a collector slower than the
/// run), the bus drops events rather than wait; [`OtelExport::shutdown`] reports how many.
/// Call [`OtelExport::shutdown`] at the end of the run so the last spans are sent.
///
/// Dropped without a shutdown, it detaches from the bus; the task still sends what was queued,
/// unless the runtime ends first.
pub struct OtelExport {
    /// Dropped first thing in [`OtelExport::shutdown`] (and with the export): ends the channel.
    attached: ListenerGuard,
    dropped: DroppedEvents,
    worker: JoinHandle<()>,
}

impl OtelExport {
    /// Subscribes to `bus` and starts exporting (on the current tokio runtime); providers are
    /// named after crewai-llm's built-in registry.
    pub fn start(bus: &EventBus, config: &OtelConfig) -> Result<Self, OtelError> {
        Self::start_with_providers(bus, config, ProviderRegistry::builtin())
    }

    /// [`OtelExport::start`], naming the provider of each model call after `providers` (the
    /// registry the run's models were built with, when it has providers of its own).
    pub fn start_with_providers(
        bus: &EventBus,
        config: &OtelConfig,
        providers: ProviderRegistry,
    ) -> Result<Self, OtelError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| OtelError::NoRuntime)?;
        let protocol = match config.protocol {
            OtlpProtocol::HttpProtobuf => Protocol::HttpBinary,
            OtlpProtocol::HttpJson => Protocol::HttpJson,
        };
        let mut exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_endpoint(config.traces_endpoint.clone())
            .with_protocol(protocol)
            .with_timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|source| OtelError::Exporter {
                endpoint: config.traces_endpoint.clone(),
                source,
            })?;
        exporter.set_resource(
            &Resource::builder_empty()
                .with_service_name(config.service_name.clone())
                .build(),
        );

        // Stream chunks open no span and are never anyone's parent: not worth a queue slot.
        let channel = bus.subscribe_channel_filtered(EVENT_QUEUE, |event| {
            !matches!(event.kind, EventKind::LlmStreamChunk { .. })
        });
        let listener = channel.listener_id();
        let dropped = channel.dropped();
        let shape = SpanShape {
            record_content: config.record_content,
            providers,
        };
        let worker = runtime.spawn(export_loop(
            exporter,
            channel,
            shape,
            config.traces_endpoint.clone(),
        ));
        Ok(OtelExport {
            attached: ListenerGuard::new(bus, listener),
            dropped,
            worker,
        })
    }

    /// Stops listening and waits (at most `timeout`) until every event queued so far became a
    /// span and was sent; spans still open are closed as unfinished.
    pub async fn shutdown(self, timeout: Duration) {
        // Ends the channel: the task drains it, closes what is open, exports and stops.
        drop(self.attached);
        if tokio::time::timeout(timeout, self.worker).await.is_err() {
            tracing::warn!(
                "OpenTelemetry export did not finish within {}s; some spans may be lost",
                timeout.as_secs_f64()
            );
        }
        let dropped = self.dropped.count();
        if dropped > 0 {
            tracing::warn!(
                dropped,
                "OpenTelemetry export fell behind the run: {dropped} event(s) were dropped, so \
                 some spans are missing or marked unfinished"
            );
        }
    }
}

/// The export task: events in, spans out, in batches of what is ready.
async fn export_loop(
    exporter: opentelemetry_otlp::SpanExporter,
    mut channel: EventChannel,
    shape: SpanShape,
    endpoint: String,
) {
    let mut assembler = SpanAssembler::new();
    let mut batch: Vec<SpanData> = Vec::new();
    let mut reported = false;
    let mut take = |event: &Event, batch: &mut Vec<SpanData>| {
        if let Some(record) = assembler.push(event) {
            batch.push(shape.span_data(&record));
        }
    };
    while let Some(event) = channel.recv().await {
        take(&event, &mut batch);
        while batch.len() < MAX_BATCH
            && let Some(event) = channel.try_recv()
        {
            take(&event, &mut batch);
        }
        if !batch.is_empty() {
            export(
                &exporter,
                std::mem::take(&mut batch),
                &endpoint,
                &mut reported,
            )
            .await;
        }
    }
    let unfinished: Vec<SpanData> = assembler
        .finish()
        .iter()
        .map(|record| shape.span_data(record))
        .collect();
    for chunk in unfinished.chunks(MAX_BATCH) {
        export(&exporter, chunk.to_vec(), &endpoint, &mut reported).await;
    }
    let _ = exporter.shutdown();
}

async fn export(
    exporter: &opentelemetry_otlp::SpanExporter,
    batch: Vec<SpanData>,
    endpoint: &str,
    reported: &mut bool,
) {
    let count = batch.len();
    if let Err(error) = exporter.export(batch).await
        && !std::mem::replace(reported, true)
    {
        // Once: a collector that is down should not flood the run's output.
        tracing::warn!(%endpoint, %error, count, "OpenTelemetry export failed; spans are dropped");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spans::{SpanKind, SpanRecord};
    use opentelemetry::Value as OtelValue;
    use serde_json::Value;
    use uuid::Uuid;

    fn lookup<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn export_is_off_without_an_endpoint() {
        assert_eq!(
            OtelConfig::from_lookup(lookup(&[("OTEL_SERVICE_NAME", "x")])).unwrap(),
            None
        );
        assert_eq!(
            OtelConfig::from_lookup(lookup(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318"),
                ("OTEL_SDK_DISABLED", "true")
            ]))
            .unwrap(),
            None
        );
    }

    #[test]
    fn reads_the_standard_variables() {
        let config = OtelConfig::from_lookup(lookup(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ("OTEL_SERVICE_NAME", "research-crew"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(config.traces_endpoint, "http://collector:4318/v1/traces");
        assert_eq!(config.protocol, OtlpProtocol::HttpJson);
        assert_eq!(config.service_name, "research-crew");
        assert!(!config.record_content, "contents are opt-in");
        let traces = OtelConfig::from_lookup(lookup(&[
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c/custom"),
            ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(
            (
                traces.traces_endpoint.as_str(),
                traces.protocol,
                traces.record_content
            ),
            ("http://c/custom", OtlpProtocol::HttpProtobuf, true)
        );
        let grpc = OtelConfig::from_lookup(lookup(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ]));
        assert!(matches!(grpc, Err(OtelError::UnsupportedProtocol(_))));
    }

    /// The `gen_ai.provider.name` a span of an LLM call on `model` gets.
    fn provider_attribute(shape: &SpanShape, model: &str) -> Option<String> {
        let now = chrono::Utc::now();
        let record = SpanRecord {
            id: Uuid::new_v4(),
            parent: None,
            root: Uuid::new_v4(),
            kind: SpanKind::LlmCall,
            label: model.to_string(),
            start: now,
            end: now,
            error: None,
            opened: Event {
                event_id: Uuid::new_v4(),
                parent_event_id: None,
                emission_sequence: 1,
                timestamp: now,
                kind: EventKind::LlmCallStarted {
                    call_id: "k".into(),
                    model: model.to_string(),
                    agent_role: None,
                    task_name: None,
                    messages: Value::Null,
                    tools: vec![],
                },
            },
            closed: None,
            marks: vec![],
        };
        shape
            .span_data(&record)
            .attributes
            .iter()
            .find(|kv| kv.key.as_str() == "gen_ai.provider.name")
            .map(|kv| kv.value.as_str().into_owned())
    }

    #[test]
    fn providers_are_named_after_the_registry() {
        let builtin = SpanShape {
            record_content: false,
            providers: ProviderRegistry::builtin(),
        };
        for (model, system) in [
            ("gpt-4o-mini", "openai"),
            ("anthropic/claude-sonnet-4-5", "anthropic"),
            ("gemini-2.5-flash", "gcp.gemini"),
            ("bedrock/anthropic.claude-3", "aws.bedrock"),
        ] {
            assert_eq!(
                provider_attribute(&builtin, model).as_deref(),
                Some(system),
                "{model}"
            );
        }
        let custom = SpanShape {
            record_content: false,
            providers: ProviderRegistry::builtin().with(crewai_llm::Provider::openai_compatible(
                crewai_llm::ProviderDescriptor::new("myprov").otel_system("my.provider"),
            )),
        };
        assert_eq!(
            provider_attribute(&custom, "myprov/x").as_deref(),
            Some("my.provider")
        );
    }

    #[test]
    fn marks_become_events_on_their_span() {
        let shape = SpanShape {
            record_content: false,
            providers: ProviderRegistry::builtin(),
        };
        let now = chrono::Utc::now();
        let event = |kind: EventKind| Event {
            event_id: Uuid::new_v4(),
            parent_event_id: None,
            emission_sequence: 1,
            timestamp: now,
            kind,
        };
        let record = SpanRecord {
            id: Uuid::new_v4(),
            parent: None,
            root: Uuid::new_v4(),
            kind: SpanKind::Agent,
            label: "Writer".into(),
            start: now,
            end: now,
            error: None,
            opened: event(EventKind::AgentExecutionStarted {
                agent_role: "Writer".into(),
                agent_id: "a1".into(),
                task_name: Some("write".into()),
                task_prompt: "secret prompt".into(),
                tools: vec![],
            }),
            closed: None,
            marks: vec![
                event(EventKind::RateLimitWaitStarted {
                    agent_role: "Writer".into(),
                    task_name: None,
                    max_rpm: Some(2),
                    wait_ms: 1500,
                }),
                event(EventKind::PanicCaught {
                    site: crewai_core::events::PanicSite::Tool,
                    name: "t".into(),
                    message: "boom".into(),
                    agent_role: None,
                    task_name: None,
                }),
            ],
        };
        let span = shape.span_data(&record);
        assert_eq!(span.name, "invoke_agent Writer");
        let names: Vec<&str> = span.events.iter().map(|e| e.name.as_ref()).collect();
        assert_eq!(names, vec!["rate_limit_wait_started", "panic_caught"]);
        let wait = &span.events.events[0].attributes;
        assert!(
            wait.iter()
                .any(|kv| kv.key.as_str() == "crewai.rate_limit.wait_ms"
                    && kv.value == OtelValue::I64(1500))
        );
        let panic = &span.events.events[1].attributes;
        assert!(
            panic
                .iter()
                .all(|kv| kv.key.as_str() != "crewai.panic.message"),
            "panic texts are contents: opt-in"
        );
        assert!(
            span.attributes
                .iter()
                .all(|kv| kv.key.as_str() != "crewai.task.prompt"),
            "prompts are contents: opt-in"
        );
        assert!(
            span.attributes
                .iter()
                .any(|kv| kv.key.as_str() == "gen_ai.agent.id")
        );
    }
}
