//! [`ToolCache`]: tool results shared by a crew's agents, opt-in as in current CrewAI.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Map, Value};

use crate::handle::ToolHandle;
use crate::tool::ToolOutput;

/// Tool results keyed by tool name and canonical arguments (object keys sorted, so
/// `{"a":1,"b":2}` and `{"b":2,"a":1}` hit the same entry). Clones share the entries.
///
/// The cache is bounded, so a long-running process (flows, `kickoff_for_each` over many
/// inputs) does not grow without limit: it holds at most [`ToolCache::max_entries`] results
/// totalling at most [`ToolCache::max_bytes`] bytes of output text, and evicts the least
/// recently used results (a hit counts as a use) to make room. A single result larger than the
/// byte limit is not cached at all.
///
/// ```
/// use crewai_tools::{ToolCache, ToolOutput};
/// use serde_json::json;
/// let cache = ToolCache::new();
/// cache.put("multiplier", &json!({"a": 2, "b": 3}), ToolOutput::Text("6".into()));
/// assert_eq!(cache.get("multiplier", &json!({"b": 3, "a": 2})), Some(ToolOutput::Text("6".into())));
/// assert_eq!(cache.get("multiplier", &json!({"a": 3, "b": 3})), None);
///
/// let small = ToolCache::with_limits(2, 1024);
/// small.put("t", &json!(1), "one".into());
/// small.put("t", &json!(2), "two".into());
/// small.get("t", &json!(1));
/// small.put("t", &json!(3), "three".into());
/// assert!(small.get("t", &json!(2)).is_none(), "the least recently used result was evicted");
/// assert!(small.get("t", &json!(1)).is_some());
/// ```
#[derive(Debug, Clone)]
pub struct ToolCache {
    entries: Arc<Mutex<Entries>>,
}

type CacheKey = (String, String);

/// The entries with their recency: `by_recency` maps each entry's last-use tick to its key, so
/// the first element is the least recently used.
#[derive(Debug)]
struct Entries {
    max_entries: usize,
    max_bytes: usize,
    total_bytes: usize,
    next_tick: u64,
    by_key: HashMap<CacheKey, Entry>,
    by_recency: BTreeMap<u64, CacheKey>,
}

#[derive(Debug)]
struct Entry {
    output: ToolOutput,
    bytes: usize,
    last_used: u64,
}

impl Entries {
    fn tick(&mut self) -> u64 {
        self.next_tick += 1;
        self.next_tick
    }

    fn get(&mut self, key: &CacheKey) -> Option<ToolOutput> {
        let tick = self.tick();
        let entry = self.by_key.get_mut(key)?;
        self.by_recency.remove(&entry.last_used);
        entry.last_used = tick;
        self.by_recency.insert(tick, key.clone());
        Some(entry.output.clone())
    }

    fn remove(&mut self, key: &CacheKey) {
        if let Some(entry) = self.by_key.remove(key) {
            self.by_recency.remove(&entry.last_used);
            self.total_bytes -= entry.bytes;
        }
    }

    /// Stores `output`, evicting least recently used entries until it fits; returns whether it
    /// was stored (a result that alone exceeds a limit is not).
    fn put(&mut self, key: CacheKey, output: ToolOutput) -> bool {
        self.remove(&key);
        let bytes = output_bytes(&output);
        if bytes > self.max_bytes || self.max_entries == 0 {
            return false;
        }
        while self.by_key.len() >= self.max_entries || self.total_bytes + bytes > self.max_bytes {
            let Some((_, oldest)) = self.by_recency.pop_first() else {
                break;
            };
            if let Some(entry) = self.by_key.remove(&oldest) {
                self.total_bytes -= entry.bytes;
            }
        }
        let tick = self.tick();
        self.by_recency.insert(tick, key.clone());
        self.by_key.insert(
            key,
            Entry {
                output,
                bytes,
                last_used: tick,
            },
        );
        self.total_bytes += bytes;
        true
    }
}

/// The size a result is charged: the length of the text the model would see.
fn output_bytes(output: &ToolOutput) -> usize {
    match output {
        ToolOutput::Text(text) => text.len(),
        ToolOutput::Json(Value::String(text)) => text.len(),
        ToolOutput::Json(value) => value.to_string().len(),
    }
}

impl Default for ToolCache {
    fn default() -> Self {
        ToolCache::with_limits(Self::DEFAULT_MAX_ENTRIES, Self::DEFAULT_MAX_BYTES)
    }
}

impl ToolCache {
    /// How many results a cache built with [`ToolCache::new`] holds at most.
    pub const DEFAULT_MAX_ENTRIES: usize = 1024;
    /// How many bytes of output a cache built with [`ToolCache::new`] holds at most (16 MiB).
    pub const DEFAULT_MAX_BYTES: usize = 16 * 1024 * 1024;

    /// A cache with the default limits ([`ToolCache::DEFAULT_MAX_ENTRIES`] results,
    /// [`ToolCache::DEFAULT_MAX_BYTES`] bytes).
    pub fn new() -> Self {
        ToolCache::default()
    }

    /// A cache holding at most `max_entries` results totalling at most `max_bytes` bytes of
    /// output. A limit of `0` disables caching.
    pub fn with_limits(max_entries: usize, max_bytes: usize) -> Self {
        ToolCache {
            entries: Arc::new(Mutex::new(Entries {
                max_entries,
                max_bytes,
                total_bytes: 0,
                next_tick: 0,
                by_key: HashMap::new(),
                by_recency: BTreeMap::new(),
            })),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The cached result of this call, if any; a hit makes it the most recently used.
    pub fn get(&self, tool_name: &str, args: &Value) -> Option<ToolOutput> {
        let key = (tool_name.to_string(), canonical_json(args));
        self.lock().get(&key)
    }

    /// Stores a result, evicting the least recently used ones if a limit would be exceeded. A
    /// result larger than [`ToolCache::max_bytes`] is not stored.
    pub fn put(&self, tool_name: &str, args: &Value, output: ToolOutput) {
        self.store(tool_name, args, output);
    }

    fn store(&self, tool_name: &str, args: &Value, output: ToolOutput) -> bool {
        let key = (tool_name.to_string(), canonical_json(args));
        self.lock().put(key, output)
    }

    /// Stores a result if the tool's cache decision allows it and it fits within the byte
    /// limit; returns whether it was stored.
    pub fn put_for(&self, tool: &ToolHandle, args: &Value, output: &ToolOutput) -> bool {
        tool.should_cache(args, output) && self.store(tool.name(), args, output.clone())
    }

    /// The cached result of this call to `tool`, if any.
    pub fn get_for(&self, tool: &ToolHandle, args: &Value) -> Option<ToolOutput> {
        self.get(tool.name(), args)
    }

    pub fn len(&self) -> usize {
        self.lock().by_key.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes of output currently held.
    pub fn total_bytes(&self) -> usize {
        self.lock().total_bytes
    }

    /// The most results held at once.
    pub fn max_entries(&self) -> usize {
        self.lock().max_entries
    }

    /// The most bytes of output held at once.
    pub fn max_bytes(&self) -> usize {
        self.lock().max_bytes
    }

    pub fn clear(&self) {
        let mut entries = self.lock();
        entries.by_key.clear();
        entries.by_recency.clear();
        entries.total_bytes = 0;
    }
}

/// JSON with object keys sorted at every level, so equal arguments give equal text.
pub fn canonical_json(value: &Value) -> String {
    sorted(value).to_string()
}

fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(object) => {
            let mut entries: Vec<(&String, &Value)> = object.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let map: Map<String, Value> = entries
                .into_iter()
                .map(|(key, value)| (key.clone(), sorted(value)))
                .collect();
            Value::Object(map)
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DynamicTool;
    use serde_json::json;

    #[test]
    fn keys_are_tool_and_canonical_arguments() {
        let cache = ToolCache::new();
        cache.put(
            "a",
            &json!({"x": {"b": 1, "a": [2, {"d": 1, "c": 0}]}}),
            ToolOutput::Text("hit".into()),
        );
        assert_eq!(
            cache.get("a", &json!({"x": {"a": [2, {"c": 0, "d": 1}], "b": 1}})),
            Some(ToolOutput::Text("hit".into()))
        );
        assert_eq!(
            cache.get("b", &json!({"x": {"b": 1, "a": [2, {"d": 1, "c": 0}]}})),
            None
        );
        assert_eq!(canonical_json(&json!({"b": 1, "a": 2})), r#"{"a":2,"b":1}"#);
    }

    #[test]
    fn clones_share_entries() {
        let cache = ToolCache::new();
        let clone = cache.clone();
        clone.put("t", &json!({}), ToolOutput::Json(json!([1])));
        assert_eq!(cache.len(), 1);
        cache.clear();
        assert!(clone.is_empty());
    }

    #[test]
    fn the_least_recently_used_entry_is_evicted_first() {
        let cache = ToolCache::with_limits(3, 1024);
        for n in 1..=3 {
            cache.put("t", &json!(n), ToolOutput::Text(format!("r{n}")));
        }
        // Using 1 and then 2 leaves 3 as the least recently used.
        assert!(cache.get("t", &json!(1)).is_some());
        assert!(cache.get("t", &json!(2)).is_some());
        cache.put("t", &json!(4), "r4".into());
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get("t", &json!(3)), None);
        // Now 1 is the oldest use; overwriting 2 counts as a use of it.
        cache.put("t", &json!(2), "r2 again".into());
        cache.put("t", &json!(5), "r5".into());
        assert_eq!(cache.get("t", &json!(1)), None);
        assert_eq!(cache.get("t", &json!(2)), Some("r2 again".into()));
        assert!(cache.get("t", &json!(4)).is_some());
        assert!(cache.get("t", &json!(5)).is_some());
    }

    #[test]
    fn the_byte_limit_evicts_until_a_result_fits_and_refuses_oversized_ones() {
        let cache = ToolCache::with_limits(100, 10);
        cache.put("t", &json!("a"), "aaaa".into());
        cache.put("t", &json!("b"), "bbbb".into());
        assert_eq!(cache.total_bytes(), 8);
        // 8 + 6 > 10: "a" (the oldest) goes, and then 4 + 6 fits.
        cache.put("t", &json!("c"), "cccccc".into());
        assert_eq!(cache.get("t", &json!("a")), None);
        assert_eq!(cache.get("t", &json!("b")), Some("bbbb".into()));
        assert_eq!(cache.total_bytes(), 10);
        // JSON is charged by its text.
        cache.put("t", &json!("j"), ToolOutput::Json(json!([1, 2])));
        assert_eq!(cache.total_bytes(), 9);
        assert_eq!(cache.len(), 2);

        let handle = DynamicTool::new("big", "b", json!({"type": "object"}), |_a, _c| async {
            Ok(ToolOutput::Text(String::new()))
        })
        .into_handle();
        assert!(!cache.put_for(&handle, &json!({}), &"x".repeat(11).into()));
        assert_eq!(cache.get_for(&handle, &json!({})), None);
        assert_eq!(cache.len(), 2, "an oversized result evicts nothing");
        cache.clear();
        assert_eq!(cache.total_bytes(), 0);
    }

    #[test]
    fn defaults_and_zero_limits() {
        let cache = ToolCache::new();
        assert_eq!(cache.max_entries(), ToolCache::DEFAULT_MAX_ENTRIES);
        assert_eq!(cache.max_bytes(), 16 * 1024 * 1024);
        let disabled = ToolCache::with_limits(0, 1024);
        disabled.put("t", &json!({}), "x".into());
        assert!(disabled.is_empty());
    }

    #[test]
    fn put_for_honours_the_cache_function() {
        let handle = DynamicTool::new(
            "multiplier",
            "m",
            json!({"type": "object"}),
            |_a, _c| async { Ok(ToolOutput::Text(String::new())) },
        )
        .into_handle()
        .with_cache_function(|args, _| args["first_number"].as_i64().is_some_and(|n| n % 2 == 0));
        let cache = ToolCache::new();
        assert!(cache.put_for(
            &handle,
            &json!({"first_number": 2}),
            &ToolOutput::Text("4".into())
        ));
        assert!(!cache.put_for(
            &handle,
            &json!({"first_number": 3}),
            &ToolOutput::Text("6".into())
        ));
        assert_eq!(
            cache.get_for(&handle, &json!({"first_number": 2})),
            Some(ToolOutput::Text("4".into()))
        );
        assert_eq!(cache.get_for(&handle, &json!({"first_number": 3})), None);
    }
}
