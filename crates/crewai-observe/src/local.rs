//! Local traces: every run's events as JSON lines in `.crewai/traces/<run id>.jsonl`, and the
//! views `crewai traces` shows: a list of runs, one run as a tree (agents, tasks, calls,
//! durations, tokens, cost) and a self-contained HTML timeline.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use crewai_core::events::{Event, EventBus, EventKind, EventLogError, EventType, JsonLinesWriter};
use crewai_llm::Usage;
use serde_json::Value;
use uuid::Uuid;

use crate::spans::{SpanKind, SpanRecord, spans_of};

/// The traces folder of a project.
pub fn traces_dir(project_root: &Path) -> PathBuf {
    project_root.join(".crewai").join("traces")
}

/// Reading or writing a trace failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TraceError {
    #[error("cannot write the trace {}", .path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read {}", .path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} line {line} is not a trace event", .path.display())]
    Corrupt {
        path: PathBuf,
        line: usize,
        #[source]
        source: serde_json::Error,
    },
    /// The writer fell behind the run and the bus dropped events rather than wait for it.
    #[error("the trace {} misses {dropped} event(s): its writer fell behind the run", .path.display())]
    Incomplete { path: PathBuf, dropped: u64 },
    #[error("the writer of the trace {} panicked: {message}", .path.display())]
    WriterPanicked { path: PathBuf, message: String },
    #[error("no trace '{id}' in {}; `crewai traces` lists the runs", .dir.display())]
    NotFound { id: String, dir: PathBuf },
    #[error("'{id}' matches several traces ({}); give more of the id", .matches.join(", "))]
    Ambiguous { id: String, matches: Vec<String> },
}

/// Appends every event of a bus to a trace file, one JSON object per line (stream chunks are
/// left out: the completed call carries the whole reply). The file is written by a thread of its
/// own ([`JsonLinesWriter`]): the bus only queues each event, so the run never waits for the
/// disk; should the queue ever fill, events are dropped, counted, and
/// [`TraceWriter::finish`] says the trace is incomplete. Detach with [`TraceWriter::finish`],
/// which returns once every queued event is in the file.
pub struct TraceWriter {
    path: PathBuf,
    writer: JsonLinesWriter,
}

impl TraceWriter {
    /// Creates `<dir>/<run_id>.jsonl` (and `dir`) and starts writing `bus`'s events to it.
    pub fn attach(bus: &EventBus, dir: &Path, run_id: &str) -> Result<Self, TraceError> {
        let path = dir.join(format!("{run_id}.jsonl"));
        let write_error = |source| TraceError::Write {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(write_error)?;
        let file = File::create(&path).map_err(write_error)?;
        let writer = JsonLinesWriter::attach(bus, file).map_err(|e| log_error(&path, e))?;
        Ok(TraceWriter { path, writer })
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops writing, waits until every event queued so far is in the file, and reports the
    /// first write error, or that events were dropped, if either happened.
    pub fn finish(self) -> Result<PathBuf, TraceError> {
        match self.writer.finish() {
            Ok(report) if report.dropped == 0 => Ok(self.path),
            Ok(report) => Err(TraceError::Incomplete {
                path: self.path,
                dropped: report.dropped,
            }),
            Err(error) => Err(log_error(&self.path, error)),
        }
    }
}

fn log_error(path: &Path, error: EventLogError) -> TraceError {
    let path = path.to_path_buf();
    match error {
        EventLogError::Panicked(message) => TraceError::WriterPanicked { path, message },
        EventLogError::Spawn(source) | EventLogError::Write(source) => {
            TraceError::Write { path, source }
        }
        // EventLogError is non_exhaustive; a kind this crate does not know is still a failed write.
        other => TraceError::Write {
            path,
            source: std::io::Error::other(other),
        },
    }
}

/// One recorded run.
#[derive(Debug, Clone)]
pub struct RunTrace {
    pub id: String,
    pub events: Vec<Event>,
    pub spans: Vec<SpanRecord>,
    /// Lines of the file whose `type` this version does not know (a trace written by a newer
    /// one), counted by type: skipped, and said so in the tree.
    pub unknown_types: BTreeMap<String, usize>,
}

/// A line of the run list.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RunSummary {
    pub id: String,
    /// The crew (or flow, or agent) of the outermost span.
    pub name: String,
    pub started: Option<DateTime<Utc>>,
    pub duration_ms: i64,
    pub usage: Usage,
    /// `ok`, `failed` or `unfinished`.
    pub status: &'static str,
}

impl RunTrace {
    /// Reads a trace file.
    pub fn read(path: &Path) -> Result<Self, TraceError> {
        let read_error = |source| TraceError::Read {
            path: path.to_path_buf(),
            source,
        };
        let reader = BufReader::new(File::open(path).map_err(read_error)?);
        let mut events = Vec::new();
        let mut unknown_types: BTreeMap<String, usize> = BTreeMap::new();
        for (index, line) in reader.lines().enumerate() {
            let line = line.map_err(read_error)?;
            if line.trim().is_empty() {
                continue;
            }
            let error = match serde_json::from_str::<Event>(&line) {
                Ok(event) => {
                    events.push(event);
                    continue;
                }
                Err(error) => error,
            };
            // A well-formed line of a type this version does not know is skipped (and counted);
            // anything else that does not read is a corrupt trace.
            if let Some(unknown) = unknown_type(&line) {
                *unknown_types.entry(unknown).or_default() += 1;
                continue;
            }
            return Err(TraceError::Corrupt {
                path: path.to_path_buf(),
                line: index + 1,
                source: error,
            });
        }
        let id = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut trace = Self::from_events(id, events);
        trace.unknown_types = unknown_types;
        Ok(trace)
    }

    /// A trace from events already in memory.
    pub fn from_events(id: impl Into<String>, events: Vec<Event>) -> Self {
        let spans = spans_of(&events);
        RunTrace {
            id: id.into(),
            events,
            spans,
            unknown_types: BTreeMap::new(),
        }
    }

    /// Finds a run in `dir` by its id or the start of it.
    pub fn find(dir: &Path, id: &str) -> Result<Self, TraceError> {
        let matches: Vec<PathBuf> = trace_files(dir)?
            .into_iter()
            .filter(|p| file_id(p).starts_with(id))
            .collect();
        match matches.as_slice() {
            [one] => Self::read(one),
            [] => Err(TraceError::NotFound {
                id: id.to_string(),
                dir: dir.to_path_buf(),
            }),
            many => {
                if let Some(exact) = many.iter().find(|p| file_id(p) == id) {
                    return Self::read(exact);
                }
                Err(TraceError::Ambiguous {
                    id: id.to_string(),
                    matches: many.iter().map(|p| file_id(p)).collect(),
                })
            }
        }
    }

    /// The LLM usage of the whole run (each call once).
    pub fn usage(&self) -> Usage {
        let mut total = Usage::default();
        for span in self.spans.iter().filter(|s| s.kind == SpanKind::LlmCall) {
            if let Some(usage) = span.usage() {
                total.add(&usage);
            }
        }
        total
    }

    fn roots(&self) -> Vec<&SpanRecord> {
        let mut roots: Vec<&SpanRecord> =
            self.spans.iter().filter(|s| s.parent.is_none()).collect();
        roots.sort_by_key(|s| (s.start, s.id));
        roots
    }

    fn children(&self, parent: Uuid) -> Vec<&SpanRecord> {
        let mut children: Vec<&SpanRecord> = self
            .spans
            .iter()
            .filter(|s| s.parent == Some(parent))
            .collect();
        children.sort_by_key(|s| (s.start, s.id));
        children
    }

    /// The usage of a span's LLM calls, its own and its descendants'.
    fn usage_under(&self, span: &SpanRecord) -> Usage {
        let mut total = span.usage().unwrap_or_default();
        for child in self.children(span.id) {
            total.add(&self.usage_under(child));
        }
        total
    }

    /// The run's line in the list.
    pub fn summary(&self) -> RunSummary {
        let roots = self.roots();
        let first = roots.first();
        let started = self.spans.iter().map(|s| s.start).min();
        let ended = self.spans.iter().map(|s| s.end).max();
        let status = if roots
            .iter()
            .any(|r| r.error.as_deref() == Some("did not finish"))
        {
            "unfinished"
        } else if roots.iter().any(|r| r.error.is_some()) {
            "failed"
        } else {
            "ok"
        };
        RunSummary {
            id: self.id.clone(),
            name: first.map(|r| r.label.clone()).unwrap_or_default(),
            started,
            duration_ms: started
                .zip(ended)
                .map(|(s, e)| (e - s).num_milliseconds())
                .unwrap_or(0),
            usage: self.usage(),
            status,
        }
    }

    /// The run as a text tree.
    pub fn render_tree(&self) -> String {
        let mut out = String::new();
        let summary = self.summary();
        let _ = writeln!(
            out,
            "run {} · {} · {} · {}",
            self.id,
            format_ms(summary.duration_ms),
            format_usage(&summary.usage),
            summary.status
        );
        if !self.unknown_types.is_empty() {
            let types: Vec<String> = self
                .unknown_types
                .iter()
                .map(|(name, count)| format!("{name} ×{count}"))
                .collect();
            let _ = writeln!(
                out,
                "(skipped events of types this version does not know: {})",
                types.join(", ")
            );
        }
        let roots = self.roots();
        for (index, root) in roots.iter().enumerate() {
            self.render_node(&mut out, root, "", index + 1 == roots.len());
        }
        out
    }

    fn render_node(&self, out: &mut String, span: &SpanRecord, prefix: &str, last: bool) {
        let branch = if last { "└─ " } else { "├─ " };
        let _ = writeln!(out, "{prefix}{branch}{}", self.describe(span));
        // Child spans and the span's marks, in the order they happened.
        let mut items: Vec<(DateTime<Utc>, TreeItem<'_>)> = self
            .children(span.id)
            .into_iter()
            .map(|child| (child.start, TreeItem::Span(child)))
            .chain(span.marks.iter().map(|m| (m.timestamp, TreeItem::Mark(m))))
            .collect();
        items.sort_by_key(|(at, _)| *at);
        let deeper = format!("{prefix}{}", if last { "   " } else { "│  " });
        let count = items.len();
        for (index, (_, item)) in items.into_iter().enumerate() {
            let last = index + 1 == count;
            match item {
                TreeItem::Span(child) => self.render_node(out, child, &deeper, last),
                TreeItem::Mark(mark) => {
                    let branch = if last { "└─ " } else { "├─ " };
                    let _ = writeln!(out, "{deeper}{branch}{}", describe_mark(mark));
                }
            }
        }
    }

    fn describe(&self, span: &SpanRecord) -> String {
        let mut line = format!(
            "{} {} · {}",
            kind_label(span.kind),
            span.label,
            format_ms(span.duration().num_milliseconds())
        );
        let usage = self.usage_under(span);
        if usage.successful_requests > 0 {
            let _ = write!(line, " · {}", format_usage(&usage));
        }
        if let Some(error) = &span.error {
            let _ = write!(line, " · error: {}", one_line(error, 120));
        }
        line
    }

    /// The run as a self-contained HTML page with a timeline (no scripts, no external files).
    pub fn render_html(&self) -> String {
        let summary = self.summary();
        let start = summary.started.unwrap_or_else(Utc::now);
        let total_ms = summary.duration_ms.max(1) as f64;
        let mut rows = String::new();
        let mut stack: Vec<(&SpanRecord, usize)> =
            self.roots().into_iter().rev().map(|r| (r, 0)).collect();
        while let Some((span, depth)) = stack.pop() {
            let offset = (span.start - start).num_milliseconds() as f64 / total_ms * 100.0;
            let width = (span.duration().num_milliseconds() as f64 / total_ms * 100.0).max(0.3);
            let usage = self.usage_under(span);
            let detail = if usage.successful_requests > 0 {
                format_usage(&usage)
            } else {
                String::new()
            };
            let class = if span.error.is_some() {
                format!("{} failed", kind_class(span.kind))
            } else {
                kind_class(span.kind).to_string()
            };
            let title = match &span.error {
                Some(error) => format!("{} {} — {}", kind_label(span.kind), span.label, error),
                None => format!("{} {}", kind_label(span.kind), span.label),
            };
            let _ = writeln!(
                rows,
                "<tr><td class=\"name\" style=\"padding-left:{indent:.1}em\">{kind} <b>{label}</b></td><td class=\"num\">{duration}</td><td class=\"num\">{detail}</td>\
                 <td class=\"lane\"><div class=\"bar {class}\" style=\"left:{offset:.2}%;width:{width:.2}%\" title=\"{title}\"></div></td></tr>",
                indent = depth as f64 * 1.2 + 0.4,
                kind = kind_label(span.kind),
                label = escape(&span.label),
                duration = format_ms(span.duration().num_milliseconds()),
                detail = escape(&detail),
                title = escape(&title),
            );
            for child in self.children(span.id).into_iter().rev() {
                stack.push((child, depth + 1));
            }
        }
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>crewai trace {id}</title>\n<style>{STYLE}</style></head>\n<body>\n\
             <h1>{name} <small>run {id}</small></h1>\n<p>{started} · {duration} · {usage} · {status}</p>\n\
             <table><thead><tr><th>span</th><th>duration</th><th>tokens · cost</th><th>timeline</th></tr></thead>\n<tbody>\n{rows}</tbody></table>\n</body></html>\n",
            id = escape(&self.id),
            name = escape(&summary.name),
            started = summary.started.map(|s| s.to_rfc3339()).unwrap_or_default(),
            duration = format_ms(summary.duration_ms),
            usage = escape(&format_usage(&summary.usage)),
            status = summary.status,
        )
    }
}

/// A line under a span in the tree.
enum TreeItem<'a> {
    Span(&'a SpanRecord),
    Mark(&'a Event),
}

/// The tree line of a mark ([`SpanRecord::marks`]).
fn describe_mark(mark: &Event) -> String {
    match &mark.kind {
        EventKind::PanicCaught {
            site,
            name,
            message,
            ..
        } => format!(
            "! {site} '{name}' panicked (caught): {}",
            one_line(message, 120)
        ),
        EventKind::RateLimitWaitStarted {
            max_rpm, wait_ms, ..
        } => {
            let limit = max_rpm
                .map(|rpm| format!(" ({rpm} per minute)"))
                .unwrap_or_default();
            let wait = i64::try_from(*wait_ms).unwrap_or(i64::MAX);
            format!("rate limit · waited {}{limit}", format_ms(wait))
        }
        EventKind::SkillDiscoveryStarted { search_path, .. } => {
            format!("skills · searching {}", one_line(search_path, 120))
        }
        EventKind::SkillDiscoveryCompleted { skill_names, .. } => {
            format!("skills · found {}", one_line(&skill_names.join(", "), 120))
        }
        EventKind::SkillLoaded {
            skill_name,
            disclosure_level,
            ..
        } => format!("skill '{skill_name}' loaded (level {disclosure_level})"),
        EventKind::SkillActivated { skill_name, .. } => format!("skill '{skill_name}' activated"),
        EventKind::SkillUsed { skill_name, .. } => format!("skill '{skill_name}' used"),
        EventKind::SkillLoadFailed {
            skill_name, error, ..
        } => format!(
            "! skill '{skill_name}' could not be loaded: {}",
            one_line(error, 120)
        ),
        EventKind::MemorySaveCompleted { scope, saved, .. } => {
            format!("memory · saved {saved} under {scope}")
        }
        EventKind::MemoryQueryCompleted { query, results, .. } => {
            format!("memory · {results} recalled for '{}'", one_line(query, 80))
        }
        EventKind::MemorySaveFailed { scope, error, .. } => format!(
            "! memory could not save under {scope}: {}",
            one_line(error, 120)
        ),
        EventKind::MemoryQueryFailed { scope, error, .. } => format!(
            "! memory could not be searched under {scope}: {}",
            one_line(error, 120)
        ),
        // Marks are the kinds spans::role_of marks; another kind still shows by its name.
        other => other.type_name().to_string(),
    }
}

const STYLE: &str = "body{font:14px system-ui,sans-serif;margin:2em;color:#222}h1 small{color:#888;font-weight:normal;font-size:60%}\
table{border-collapse:collapse;width:100%}th,td{padding:3px 8px;border-bottom:1px solid #eee;text-align:left;white-space:nowrap}\
td.num{text-align:right;color:#555;font-variant-numeric:tabular-nums}td.lane{width:45%;position:relative}\
.bar{position:absolute;top:5px;height:12px;border-radius:3px;background:#8aa}.crew{background:#555}.task{background:#4a7fb5}\
.agent{background:#6aa84f}.llm{background:#e69138}.tool{background:#8e7cc3}.delegation{background:#c27ba0}.failed{background:#cc0000!important}";

/// The trace files of `dir`, oldest first (none when the folder does not exist).
pub fn trace_files(dir: &Path) -> Result<Vec<PathBuf>, TraceError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(TraceError::Read {
                path: dir.to_path_buf(),
                source,
            });
        }
    };
    let mut files: Vec<(std::time::SystemTime, PathBuf)> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .map(|p| {
            (
                p.metadata()
                    .and_then(|m| m.modified())
                    .unwrap_or(std::time::UNIX_EPOCH),
                p,
            )
        })
        .collect();
    files.sort();
    Ok(files.into_iter().map(|(_, p)| p).collect())
}

/// Every run in `dir`, oldest first.
pub fn list_runs(dir: &Path) -> Result<Vec<RunSummary>, TraceError> {
    trace_files(dir)?
        .iter()
        .map(|p| RunTrace::read(p).map(|t| t.summary()))
        .collect()
}

/// The run list as a text table.
pub fn render_run_list(runs: &[RunSummary]) -> String {
    if runs.is_empty() {
        return "no traces yet: `crewai run` records one per kickoff\n".to_string();
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<36}  {:<20}  {:<24}  {:>9}  {:>8}  {:>11}  status",
        "run", "name", "started", "duration", "tokens", "cost"
    );
    for run in runs {
        let _ = writeln!(
            out,
            "{:<36}  {:<20}  {:<24}  {:>9}  {:>8}  {:>11}  {}",
            run.id,
            one_line(&run.name, 20),
            run.started
                .map(|s| s.format("%Y-%m-%d %H:%M:%S UTC").to_string())
                .unwrap_or_default(),
            format_ms(run.duration_ms),
            run.usage.total_tokens,
            format_cost(run.usage.cost_usd),
            run.status
        );
    }
    out
}

/// The `type` of a JSON line, when it is a well-formed object whose type this version does not
/// know.
fn unknown_type(line: &str) -> Option<String> {
    let value: Value = serde_json::from_str(line).ok()?;
    let name = value.get("type")?.as_str()?;
    EventType::from_name(name)
        .is_none()
        .then(|| name.to_string())
}

fn file_id(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn kind_label(kind: SpanKind) -> &'static str {
    match kind {
        SpanKind::Crew => "crew",
        SpanKind::Task => "task",
        SpanKind::Agent => "agent",
        SpanKind::LlmCall => "llm",
        SpanKind::ToolCall => "tool",
        SpanKind::Delegation => "delegate to",
        SpanKind::Guardrail => "guardrail",
        SpanKind::Flow => "flow",
        SpanKind::Method => "method",
        SpanKind::McpConnection => "mcp connect",
        SpanKind::McpToolCall => "mcp tool",
        SpanKind::A2aDelegation => "a2a delegate to",
        SpanKind::CodeExecution => "code in",
        SpanKind::PlanStep => "step",
    }
}

fn kind_class(kind: SpanKind) -> &'static str {
    match kind {
        SpanKind::Crew | SpanKind::Flow => "crew",
        SpanKind::Task | SpanKind::Method => "task",
        SpanKind::Agent | SpanKind::PlanStep => "agent",
        SpanKind::LlmCall | SpanKind::Guardrail => "llm",
        SpanKind::ToolCall
        | SpanKind::McpConnection
        | SpanKind::McpToolCall
        | SpanKind::CodeExecution => "tool",
        SpanKind::Delegation | SpanKind::A2aDelegation => "delegation",
    }
}

/// `1.23s`, or `45ms` under a second.
pub fn format_ms(ms: i64) -> String {
    if ms < 1000 {
        format!("{ms}ms")
    } else {
        format!("{:.2}s", ms as f64 / 1000.0)
    }
}

/// `$0.000123` (six decimals: single calls of small models cost fractions of a cent).
pub fn format_cost(usd: f64) -> String {
    format!("${usd:.6}")
}

/// `1200 in / 80 out tokens · $0.000228`.
pub fn format_usage(usage: &Usage) -> String {
    let cached = if usage.cached_prompt_tokens > 0 {
        format!(" ({} cached)", usage.cached_prompt_tokens)
    } else {
        String::new()
    };
    format!(
        "{} in{cached} / {} out tokens · {}",
        usage.prompt_tokens,
        usage.completion_tokens,
        format_cost(usage.cost_usd)
    )
}

fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        format!("{}…", flat.chars().take(max).collect::<String>())
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
