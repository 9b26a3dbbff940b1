//! OpenTelemetry export: an [`EventBus`] listener that turns a run's events into spans (crew
//! kickoff → task → agent → LLM call / tool call / delegation) named and attributed after the
//! GenAI semantic conventions, and ships them over OTLP/HTTP (protobuf or JSON).
//!
//! Export is off unless configured: [`OtelConfig::from_env`] reads the standard variables
//! (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`,
//! `OTEL_EXPORTER_OTLP_PROTOCOL`, `OTEL_SERVICE_NAME`, `OTEL_SDK_DISABLED`). Prompts, replies and
//! tool arguments are recorded only when `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`
//! (or [`OtelConfig::with_content`]). Nothing is ever sent anywhere else.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use crewai_core::events::{EventBus, ListenerId};
use crewai_llm::ProviderRegistry;
use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind as OtelSpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanExporter, SpanLinks};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::spans::{SpanAssembler, SpanKind, SpanRecord};

/// The default service name when `OTEL_SERVICE_NAME` is not set.
pub const DEFAULT_SERVICE_NAME: &str = "crewai";
/// Spans sent in one export request at most.
const MAX_BATCH: usize = 256;
/// How long one export request may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

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
    #[error("cannot create the OTLP exporter for {endpoint}: {message}")]
    Exporter { endpoint: String, message: String },
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

/// A running export: subscribed to one bus, shipping spans from a background task.
/// Call [`OtelExport::shutdown`] at the end of the run so the last spans are sent.
pub struct OtelExport {
    bus: EventBus,
    listener: ListenerId,
    sender: Arc<Mutex<Option<mpsc::UnboundedSender<SpanData>>>>,
    assembler: Arc<Mutex<SpanAssembler>>,
    shape: Arc<SpanShape>,
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
            .map_err(|e| OtelError::Exporter {
                endpoint: config.traces_endpoint.clone(),
                message: e.to_string(),
            })?;
        exporter.set_resource(
            &Resource::builder_empty()
                .with_service_name(config.service_name.clone())
                .build(),
        );

        let (sender, receiver) = mpsc::unbounded_channel();
        let worker = runtime.spawn(export_loop(
            exporter,
            receiver,
            config.traces_endpoint.clone(),
        ));
        let sender = Arc::new(Mutex::new(Some(sender)));
        let assembler = Arc::new(Mutex::new(SpanAssembler::new()));
        let shape = Arc::new(SpanShape {
            record_content: config.record_content,
            providers,
        });
        let listener = {
            let (sender, assembler, shape) = (sender.clone(), assembler.clone(), shape.clone());
            bus.subscribe(move |event| {
                let finished = lock(&assembler).push(&event.to_json());
                if let Some(record) = finished {
                    send(&sender, shape.span_data(&record));
                }
            })
        };
        Ok(OtelExport {
            bus: bus.clone(),
            listener,
            sender,
            assembler,
            shape,
            worker,
        })
    }

    /// Stops listening, closes the spans still open, and waits (at most `timeout`) until every
    /// span was sent.
    pub async fn shutdown(self, timeout: Duration) {
        self.bus.unsubscribe(self.listener);
        let unfinished = lock(&self.assembler).finish();
        for record in unfinished {
            send(&self.sender, self.shape.span_data(&record));
        }
        lock(&self.sender).take();
        if tokio::time::timeout(timeout, self.worker).await.is_err() {
            tracing::warn!(
                "OpenTelemetry export did not finish within {}s; some spans may be lost",
                timeout.as_secs_f64()
            );
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

fn send(sender: &Mutex<Option<mpsc::UnboundedSender<SpanData>>>, span: SpanData) {
    if let Some(sender) = lock(sender).as_ref() {
        // A closed channel means the export was shut down; late spans are dropped.
        let _ = sender.send(span);
    }
}

async fn export_loop(
    exporter: opentelemetry_otlp::SpanExporter,
    mut receiver: mpsc::UnboundedReceiver<SpanData>,
    endpoint: String,
) {
    let mut reported = false;
    while let Some(first) = receiver.recv().await {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH
            && let Ok(more) = receiver.try_recv()
        {
            batch.push(more);
        }
        let count = batch.len();
        if let Err(error) = exporter.export(batch).await
            && !std::mem::replace(&mut reported, true)
        {
            // Once: a collector that is down should not flood the run's output.
            tracing::warn!(%endpoint, %error, count, "OpenTelemetry export failed; spans are dropped");
        }
    }
    let _ = exporter.shutdown();
}

/// How span records become OpenTelemetry spans.
struct SpanShape {
    record_content: bool,
    /// Names a model's provider (`gen_ai.provider.name`) from its prefix or family.
    providers: ProviderRegistry,
}

fn span_id_of(id: Uuid) -> SpanId {
    let bytes = id.as_bytes();
    let mut eight = [0u8; 8];
    eight.copy_from_slice(&bytes[8..]);
    if eight == [0; 8] {
        eight[7] = 1;
    }
    SpanId::from_bytes(eight)
}

fn system_time(at: chrono::DateTime<chrono::Utc>) -> SystemTime {
    SystemTime::from(at)
}

fn json_text(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

impl SpanShape {
    fn span_data(&self, record: &SpanRecord) -> SpanData {
        let opened = &record.opened;
        let closed = record.closed.as_ref();
        let field = |name: &str| opened.get(name).and_then(Value::as_str).map(str::to_string);
        let mut attributes = vec![KeyValue::new(
            "crewai.span.kind",
            span_kind_name(record.kind),
        )];
        let mut add = |key: &'static str, value: Option<String>| {
            if let Some(value) = value.filter(|v| !v.is_empty()) {
                attributes.push(KeyValue::new(key, value));
            }
        };
        add("gen_ai.agent.name", field("agent_role"));
        add("crewai.task.name", field("task_name"));
        let (name, kind) = match record.kind {
            SpanKind::Crew => {
                add("crewai.crew.name", field("crew_name"));
                add("crewai.crew.id", field("crew_id"));
                (
                    format!("crew_kickoff {}", record.label),
                    OtelSpanKind::Internal,
                )
            }
            SpanKind::Task => {
                add("crewai.task.id", field("task_id"));
                (format!("task {}", record.label), OtelSpanKind::Internal)
            }
            SpanKind::Agent => {
                add("gen_ai.operation.name", Some("invoke_agent".into()));
                add("gen_ai.agent.id", field("agent_id"));
                if self.record_content {
                    add("crewai.task.prompt", field("task_prompt"));
                    add(
                        "crewai.agent.output",
                        closed
                            .and_then(|c| c.get("output"))
                            .map(|v| json_text(Some(v))),
                    );
                }
                (
                    format!("invoke_agent {}", record.label),
                    OtelSpanKind::Internal,
                )
            }
            SpanKind::LlmCall => {
                let model = record.label.clone();
                add("gen_ai.operation.name", Some("chat".into()));
                add(
                    "gen_ai.provider.name",
                    Some(self.providers.gen_ai_system(&model).into()),
                );
                add("gen_ai.request.model", Some(model.clone()));
                if let Some(usage) = record.usage() {
                    attributes.push(KeyValue::new(
                        "gen_ai.usage.input_tokens",
                        usage.prompt_tokens as i64,
                    ));
                    attributes.push(KeyValue::new(
                        "gen_ai.usage.output_tokens",
                        usage.completion_tokens as i64,
                    ));
                    attributes.push(KeyValue::new(
                        "gen_ai.usage.cache_read.input_tokens",
                        usage.cached_prompt_tokens as i64,
                    ));
                    attributes.push(KeyValue::new(
                        "gen_ai.usage.reasoning.output_tokens",
                        usage.reasoning_tokens as i64,
                    ));
                    attributes.push(KeyValue::new("crewai.usage.cost_usd", usage.cost_usd));
                }
                if self.record_content {
                    attributes.push(KeyValue::new(
                        "gen_ai.input.messages",
                        json_text(opened.get("messages")),
                    ));
                    if let Some(response) = closed.and_then(|c| c.get("response")) {
                        attributes.push(KeyValue::new(
                            "gen_ai.output.messages",
                            json_text(Some(response)),
                        ));
                    }
                }
                (format!("chat {model}"), OtelSpanKind::Client)
            }
            SpanKind::ToolCall => {
                add("gen_ai.operation.name", Some("execute_tool".into()));
                add("gen_ai.tool.name", Some(record.label.clone()));
                add("gen_ai.tool.type", Some("function".into()));
                if self.record_content {
                    add(
                        "gen_ai.tool.call.arguments",
                        Some(json_text(opened.get("tool_args"))),
                    );
                    add(
                        "gen_ai.tool.call.result",
                        closed
                            .and_then(|c| c.get("output"))
                            .map(|v| json_text(Some(v))),
                    );
                }
                if let Some(from_cache) = closed
                    .and_then(|c| c.get("from_cache"))
                    .and_then(Value::as_bool)
                {
                    attributes.push(KeyValue::new("crewai.tool.from_cache", from_cache));
                }
                (
                    format!("execute_tool {}", record.label),
                    OtelSpanKind::Internal,
                )
            }
            SpanKind::Delegation => {
                add("crewai.delegation.from_agent", field("from_agent"));
                add("crewai.delegation.to_agent", field("to_agent"));
                add("crewai.delegation.kind", field("kind"));
                if self.record_content {
                    add("crewai.delegation.task", field("task"));
                }
                (format!("delegate {}", record.label), OtelSpanKind::Internal)
            }
            SpanKind::Guardrail => (
                format!("guardrail {}", record.label),
                OtelSpanKind::Internal,
            ),
            SpanKind::Flow => {
                add("crewai.flow.name", field("flow_name"));
                (format!("flow {}", record.label), OtelSpanKind::Internal)
            }
            SpanKind::Method => {
                add("crewai.flow.method", field("method_name"));
                (
                    format!("flow_method {}", record.label),
                    OtelSpanKind::Internal,
                )
            }
        };
        let status = match &record.error {
            Some(message) => Status::error(message.clone()),
            None => Status::Ok,
        };
        if record.error.is_some() {
            attributes.push(KeyValue::new("error.type", "crewai_error"));
        }
        SpanData {
            span_context: SpanContext::new(
                TraceId::from_bytes(*record.root.as_bytes()),
                span_id_of(record.id),
                TraceFlags::SAMPLED,
                false,
                TraceState::default(),
            ),
            parent_span_id: record.parent.map(span_id_of).unwrap_or(SpanId::INVALID),
            parent_span_is_remote: false,
            span_kind: kind,
            name: Cow::Owned(name),
            start_time: system_time(record.start),
            end_time: system_time(record.end),
            attributes,
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status,
            instrumentation_scope: InstrumentationScope::builder("crewai-rs")
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
        }
    }
}

fn span_kind_name(kind: SpanKind) -> &'static str {
    match kind {
        SpanKind::Crew => "crew",
        SpanKind::Task => "task",
        SpanKind::Agent => "agent",
        SpanKind::LlmCall => "llm_call",
        SpanKind::ToolCall => "tool_call",
        SpanKind::Delegation => "delegation",
        SpanKind::Guardrail => "guardrail",
        SpanKind::Flow => "flow",
        SpanKind::Method => "method",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            opened: serde_json::json!({"model": model}),
            closed: None,
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
}
