//! The stored values: [`ScopePath`], [`MemoryRecord`] and the [`RecordFilter`] every read and
//! delete goes through.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::MemoryError;

/// The longest segment a scope path may have, in bytes.
const MAX_SEGMENT_BYTES: usize = 200;
/// The deepest a scope path may be.
const MAX_DEPTH: usize = 32;

/// A place in memory's `/`-separated hierarchy (`/crew/research/agent/writer`).
///
/// A path is a list of segments; it is written with a leading `/` and no trailing one, and `/`
/// alone is the root. Parsing refuses `.` and `..` segments and control characters, so a path
/// built from user input can never name a place outside the scope it is joined onto. A scope
/// holds its own records and those of every path below it, segment by segment: `/tenant/1`
/// does not hold `/tenant/10`.
///
/// ```
/// use crewai_memory::ScopePath;
/// let tenant = ScopePath::parse("/tenant/1").unwrap();
/// assert!(ScopePath::parse("/tenant/1/user/7").unwrap().is_within(&tenant));
/// assert!(!ScopePath::parse("/tenant/10").unwrap().is_within(&tenant));
/// assert!(ScopePath::parse("/tenant/../admin").is_err());
/// assert_eq!(tenant.join(&ScopePath::parse("notes").unwrap()).to_string(), "/tenant/1/notes");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ScopePath {
    segments: Vec<String>,
}

impl ScopePath {
    /// The root, `/`, which holds every record.
    pub fn root() -> Self {
        ScopePath::default()
    }

    /// Reads `/a/b` (or `a/b`: a scope is always relative to the memory's root). Empty segments
    /// (`//`, a trailing `/`) are dropped; `.`, `..`, control characters, segments over 200
    /// bytes and paths over 32 segments are refused.
    pub fn parse(text: &str) -> Result<Self, MemoryError> {
        let invalid = |reason| MemoryError::InvalidScope {
            path: text.to_string(),
            reason,
        };
        let mut segments = Vec::new();
        for segment in text.split('/').filter(|s| !s.is_empty()) {
            if segment == "." || segment == ".." {
                return Err(invalid("`.` and `..` segments are not allowed"));
            }
            if segment.chars().any(char::is_control) {
                return Err(invalid("control characters are not allowed"));
            }
            if segment.trim().is_empty() {
                return Err(invalid("a segment cannot be only spaces"));
            }
            if segment.len() > MAX_SEGMENT_BYTES {
                return Err(invalid("a segment is longer than 200 bytes"));
            }
            segments.push(segment.to_string());
        }
        if segments.len() > MAX_DEPTH {
            return Err(invalid("deeper than 32 segments"));
        }
        Ok(ScopePath { segments })
    }

    /// A path of one segment made from any name (a crew's, an agent's role): lower-cased, with
    /// every run of characters other than letters, digits and `-` turned into one `_`.
    ///
    /// ```
    /// use crewai_memory::ScopePath;
    /// assert_eq!(ScopePath::segment_from_name("Senior Researcher / EU").to_string(), "/senior_researcher_eu");
    /// ```
    pub fn segment_from_name(name: &str) -> Self {
        let mut segment = String::new();
        for c in name.trim().chars() {
            if c.is_alphanumeric() || c == '-' {
                segment.extend(c.to_lowercase());
            } else if !segment.ends_with('_') {
                segment.push('_');
            }
        }
        let segment = segment.trim_matches('_');
        let mut segment: String = segment.chars().take(MAX_SEGMENT_BYTES / 4).collect();
        if segment.is_empty() {
            segment.push_str("unnamed");
        }
        ScopePath {
            segments: vec![segment],
        }
    }

    /// `self` followed by `child`'s segments.
    pub fn join(&self, child: &ScopePath) -> ScopePath {
        let mut segments = self.segments.clone();
        segments.extend(child.segments.iter().cloned());
        ScopePath { segments }
    }

    /// Whether `self` is `ancestor` or below it (whole segments compared).
    pub fn is_within(&self, ancestor: &ScopePath) -> bool {
        self.segments.starts_with(&ancestor.segments)
    }

    /// `self` with `ancestor`'s segments taken off the front, when it is within it.
    pub fn relative_to(&self, ancestor: &ScopePath) -> Option<ScopePath> {
        self.segments
            .strip_prefix(ancestor.segments.as_slice())
            .map(|rest| ScopePath {
                segments: rest.to_vec(),
            })
    }

    /// The segments, outermost first.
    pub fn segments(&self) -> &[String] {
        &self.segments
    }

    pub fn is_root(&self) -> bool {
        self.segments.is_empty()
    }

    /// The path one level up (the root's parent is the root).
    pub fn parent(&self) -> ScopePath {
        let mut segments = self.segments.clone();
        segments.pop();
        ScopePath { segments }
    }
}

impl fmt::Display for ScopePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.segments.is_empty() {
            return f.write_str("/");
        }
        for segment in &self.segments {
            write!(f, "/{segment}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for ScopePath {
    type Err = MemoryError;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        ScopePath::parse(text)
    }
}

impl Serialize for ScopePath {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ScopePath {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        ScopePath::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// One remembered statement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryRecord {
    pub id: String,
    pub content: String,
    /// Where it lives, from the store's root (not from a [`Memory`](crate::Memory) view's root).
    pub scope: ScopePath,
    pub categories: Vec<String>,
    pub metadata: Map<String, Value>,
    /// 0.0 to 1.0.
    pub importance: f64,
    pub created_at: DateTime<Utc>,
    pub last_accessed: DateTime<Utc>,
    /// Who saved it (an agent's role, a user id); private records are visible to it.
    pub source: Option<String>,
    /// Hidden from recalls that neither ask for private records nor come from its source.
    pub private: bool,
    /// The content's vector (empty in listings that do not need it).
    #[serde(skip)]
    pub embedding: Vec<f32>,
}

/// Which records a read or a delete is about. Every store call takes one, so a scope is
/// enforced by the storage itself, never by filtering afterwards.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RecordFilter {
    /// The subtree (the scope and everything below it).
    pub scope: ScopePath,
    /// When not empty, records with at least one of these categories.
    pub categories: Vec<String>,
    /// When set, records saved by this source only.
    pub source: Option<String>,
    /// Whether private records are included whatever their source. Without it, a private record
    /// is included only when `source` is its source.
    pub include_private: bool,
    /// Records created at or after this time only.
    pub created_after: Option<DateTime<Utc>>,
}

impl RecordFilter {
    /// Every record in `scope`'s subtree that is not private.
    pub fn scope(scope: ScopePath) -> Self {
        RecordFilter {
            scope,
            ..RecordFilter::default()
        }
    }

    /// Every record in `scope`'s subtree, private ones included (for deletes and admin listings).
    pub fn everything_in(scope: ScopePath) -> Self {
        RecordFilter {
            scope,
            include_private: true,
            ..RecordFilter::default()
        }
    }

    /// Whether `record` passes this filter (the same rule the store applies in SQL).
    pub fn admits(&self, record: &MemoryRecord) -> bool {
        let visible = !record.private
            || self.include_private
            || (self.source.is_some() && self.source == record.source);
        record.scope.is_within(&self.scope)
            && visible
            && (self.categories.is_empty()
                || record
                    .categories
                    .iter()
                    .any(|c| self.categories.contains(c)))
            && self
                .source
                .as_ref()
                .is_none_or(|source| record.source.as_ref() == Some(source))
            && self
                .created_after
                .is_none_or(|after| record.created_at >= after)
    }
}

/// What a collection was created with: its embedding model and vector size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CollectionInfo {
    pub name: String,
    pub model: String,
    pub dimensions: usize,
}

impl CollectionInfo {
    /// Whether `records` may be written to `collection`, whose stored info is `info`: it was
    /// opened, and every record's vector has its size.
    pub(crate) fn check_records(
        info: Option<&CollectionInfo>,
        collection: &str,
        records: &[MemoryRecord],
    ) -> Result<(), crate::error::MemoryError> {
        let Some(info) = info else {
            return Err(crate::error::MemoryError::InvalidInput {
                field: "collection",
                reason: format!("{collection:?} was never opened (call open_collection first)"),
            });
        };
        match records
            .iter()
            .find(|record| record.embedding.len() != info.dimensions)
        {
            Some(record) => Err(crate::error::MemoryError::DimensionMismatch {
                collection: collection.to_string(),
                stored: info.dimensions,
                stored_model: info.model.clone(),
                found: record.embedding.len(),
                model: "(this record's vector)".to_string(),
            }),
            None => Ok(()),
        }
    }
}

/// A scope that holds records, with how many (its own, not its children's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScopeCount {
    pub scope: ScopePath,
    pub records: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_canonically() {
        assert_eq!(ScopePath::parse("").unwrap(), ScopePath::root());
        assert_eq!(ScopePath::parse("/").unwrap().to_string(), "/");
        assert_eq!(ScopePath::parse("a//b/").unwrap().to_string(), "/a/b");
        assert_eq!(ScopePath::parse("/a/b").unwrap().segments(), ["a", "b"]);
    }

    #[test]
    fn refuses_paths_that_could_escape() {
        for bad in [
            "..",
            "/a/../b",
            "./a",
            "/a/.",
            "/a/\u{0}b",
            "/a/\nb",
            "/ /x",
        ] {
            assert!(ScopePath::parse(bad).is_err(), "{bad:?} was accepted");
        }
        let deep = "/x".repeat(33);
        assert!(ScopePath::parse(&deep).is_err());
        assert!(ScopePath::parse(&format!("/{}", "y".repeat(201))).is_err());
    }

    #[test]
    fn containment_is_by_whole_segments() {
        let one = ScopePath::parse("/tenant/1").unwrap();
        assert!(one.is_within(&one));
        assert!(one.is_within(&ScopePath::root()));
        assert!(!ScopePath::parse("/tenant/10").unwrap().is_within(&one));
        assert!(!ScopePath::parse("/tenant").unwrap().is_within(&one));
        assert_eq!(
            ScopePath::parse("/tenant/1/x")
                .unwrap()
                .relative_to(&one)
                .unwrap()
                .to_string(),
            "/x"
        );
    }

    #[test]
    fn names_become_single_safe_segments() {
        assert_eq!(
            ScopePath::segment_from_name("../../etc").to_string(),
            "/etc"
        );
        assert_eq!(ScopePath::segment_from_name("  ").to_string(), "/unnamed");
        assert_eq!(ScopePath::segment_from_name("a%_b").to_string(), "/a_b");
    }
}
