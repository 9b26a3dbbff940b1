//! [`KnowledgeSource`]: what a crew or an agent knows, as CrewAI's knowledge source classes and
//! the project files' `knowledge_sources:` describe it.
//!
//! The project-file form (also what crew.py's `XKnowledgeSource(...)` calls are read into):
//!
//! ```yaml
//! knowledge_sources:
//!   - handbook.pdf                        # a file in knowledge/: its extension picks the reader
//!   - https://example.com/pricing         # a web page
//!   - content: "Refunds take 5 days."     # text given inline (StringKnowledgeSource)
//!   - type: csv                           # a reader named (or CrewAI's class name)
//!     file_paths: [orders.csv]
//!     chunk_size: 2000
//!     chunk_overlap: 100
//!     metadata: {team: sales}
//!     collection_name: sales              # its own collection, searched with the owner's
//! ```

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use crate::chunk::{ChunkSettings, DEFAULT_CHUNK_OVERLAP, DEFAULT_CHUNK_SIZE};
use crate::error::KnowledgeError;

/// How a document is read into text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reader {
    /// By the file's extension; an `http(s)` address is a web page.
    Auto,
    Text,
    Markdown,
    Pdf,
    Csv,
    /// xlsx, xlsm, xls, xlsb and ods workbooks: every sheet.
    Excel,
    Json,
    Docx,
    Xml,
    Web,
}

impl Reader {
    /// The reader a `type:` names: ours (`pdf`) or CrewAI's class name (`PDFKnowledgeSource`).
    /// `None` for the string source, which has no reader.
    fn from_type(name: &str) -> Result<Option<Reader>, String> {
        Ok(Some(match name {
            "string" | "StringKnowledgeSource" => return Ok(None),
            "text" | "text_file" | "TextFileKnowledgeSource" => Reader::Text,
            "markdown" | "md" | "mdx" => Reader::Markdown,
            "pdf" | "PDFKnowledgeSource" => Reader::Pdf,
            "csv" | "CSVKnowledgeSource" => Reader::Csv,
            "excel" | "xlsx" | "ExcelKnowledgeSource" => Reader::Excel,
            "json" | "JSONKnowledgeSource" => Reader::Json,
            "docx" => Reader::Docx,
            "xml" => Reader::Xml,
            "web" | "url" => Reader::Web,
            // Docling reads whatever it is given, by its extension or address.
            "auto" | "CrewDoclingSource" => Reader::Auto,
            other => {
                return Err(format!(
                    "unknown knowledge source type {other:?}; use string, text, markdown, pdf, csv, excel, json, docx, xml, web or auto (or CrewAI's class names such as PDFKnowledgeSource)"
                ));
            }
        }))
    }

    /// The reader for `path` by its extension (`None` when no reader has it).
    pub fn for_extension(path: &Path) -> Option<Reader> {
        let extension = path.extension()?.to_str()?.to_ascii_lowercase();
        Some(match extension.as_str() {
            "txt" | "text" | "log" => Reader::Text,
            "md" | "mdx" | "markdown" => Reader::Markdown,
            "pdf" => Reader::Pdf,
            "csv" => Reader::Csv,
            "xlsx" | "xlsm" | "xls" | "xlsb" | "ods" => Reader::Excel,
            "json" => Reader::Json,
            "docx" => Reader::Docx,
            "xml" => Reader::Xml,
            _ => return None,
        })
    }

    /// The reader's name, as `type:` writes it.
    pub fn name(self) -> &'static str {
        match self {
            Reader::Auto => "auto",
            Reader::Text => "text",
            Reader::Markdown => "markdown",
            Reader::Pdf => "pdf",
            Reader::Csv => "csv",
            Reader::Excel => "excel",
            Reader::Json => "json",
            Reader::Docx => "docx",
            Reader::Xml => "xml",
            Reader::Web => "web",
        }
    }
}

/// What a source holds.
#[derive(Debug, Clone, PartialEq)]
pub enum SourceContent {
    /// Text given as it is (CrewAI's `StringKnowledgeSource(content=...)`).
    Text(String),
    /// Files in the knowledge folder (paths relative to it) or web pages (`http(s)` addresses),
    /// read by `reader`.
    Documents {
        reader: Reader,
        locations: Vec<String>,
    },
}

/// One knowledge source: its content, how it is chunked, the metadata every chunk carries, and
/// optionally a collection of its own (searched together with its owner's).
#[derive(Debug, Clone, PartialEq)]
pub struct KnowledgeSource {
    pub content: SourceContent,
    pub chunking: ChunkSettings,
    pub metadata: Map<String, Value>,
    pub collection_name: Option<String>,
}

impl KnowledgeSource {
    /// Text given inline.
    pub fn text(content: impl Into<String>) -> Self {
        Self::of(SourceContent::Text(content.into()))
    }

    /// Files of the knowledge folder, each read by its extension.
    pub fn files<S: Into<String>>(paths: impl IntoIterator<Item = S>) -> Self {
        Self::documents(Reader::Auto, paths)
    }

    /// Documents read by `reader` (files of the knowledge folder, or addresses for
    /// [`Reader::Web`] and [`Reader::Auto`]).
    pub fn documents<S: Into<String>>(
        reader: Reader,
        locations: impl IntoIterator<Item = S>,
    ) -> Self {
        Self::of(SourceContent::Documents {
            reader,
            locations: locations.into_iter().map(Into::into).collect(),
        })
    }

    /// Web pages.
    pub fn urls<S: Into<String>>(urls: impl IntoIterator<Item = S>) -> Self {
        Self::documents(Reader::Web, urls)
    }

    fn of(content: SourceContent) -> Self {
        KnowledgeSource {
            content,
            chunking: ChunkSettings::default(),
            metadata: Map::new(),
            collection_name: None,
        }
    }

    crewai_llm::setters! {
        pub fn chunking(chunking: ChunkSettings) => chunking = chunking;
        pub fn metadata(key: impl Into<String>, value: Value) => |b| {
            b.metadata.insert(key.into(), value);
        };
        pub fn collection_name(name: impl Into<String>) => collection_name = Some(name.into());
    }

    /// Reads the project-file form (see the module documentation).
    pub fn from_value(value: &Value) -> Result<Self, String> {
        match value {
            Value::String(location) => Ok(Self::documents(Reader::Auto, [location.clone()])),
            Value::Object(_) => {
                let raw: RawSource =
                    serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
                raw.into_source()
            }
            _ => Err(
                "a knowledge source is a file name, an address, or a mapping such as {type: pdf, file_paths: [...]} or {content: \"...\"}"
                    .to_string(),
            ),
        }
    }

    /// Reads a `knowledge_sources:` list (or one source); each problem names its item.
    pub fn list_from_value(value: &Value) -> Result<Vec<Self>, Vec<(Option<usize>, String)>> {
        let items: Vec<(Option<usize>, &Value)> = match value {
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, v)| (Some(i), v))
                .collect(),
            single => vec![(None, single)],
        };
        let mut sources = Vec::new();
        let mut problems = Vec::new();
        for (index, item) in items {
            match Self::from_value(item) {
                Ok(source) => sources.push(source),
                Err(problem) => problems.push((index, problem)),
            }
        }
        if problems.is_empty() {
            Ok(sources)
        } else {
            Err(problems)
        }
    }

    /// The source's documents: each with the key its chunks are stored under and where it is.
    pub(crate) fn documents_in(
        &self,
        index: usize,
        folder: &Path,
    ) -> Result<Vec<Document>, KnowledgeError> {
        match &self.content {
            SourceContent::Text(text) => Ok(vec![Document {
                key: format!("string:{index}"),
                location: Location::Inline(text.clone()),
            }]),
            SourceContent::Documents { reader, locations } => {
                if locations.is_empty() {
                    return Err(KnowledgeError::InvalidSource(
                        "a source lists no files or addresses".into(),
                    ));
                }
                locations
                    .iter()
                    .map(|location| document(*reader, location, folder))
                    .collect()
            }
        }
    }
}

/// One document of a source, ready to be read.
#[derive(Debug, Clone)]
pub(crate) struct Document {
    /// What its chunks are stored under: the path as written, the address, or `string:<n>`.
    pub key: String,
    pub location: Location,
}

#[derive(Debug, Clone)]
pub(crate) enum Location {
    Inline(String),
    File { path: PathBuf, reader: Reader },
    Web(String),
}

fn is_address(location: &str) -> bool {
    let lower = location.trim().to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://")
}

fn document(reader: Reader, location: &str, folder: &Path) -> Result<Document, KnowledgeError> {
    let key = location.trim().to_string();
    if reader == Reader::Web || (reader == Reader::Auto && is_address(location)) {
        return Ok(Document {
            location: Location::Web(key.clone()),
            key,
        });
    }
    let relative = Path::new(&key);
    let escapes = relative
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir));
    if escapes || key.is_empty() {
        return Err(KnowledgeError::OutsideFolder {
            path: key,
            folder: folder.to_path_buf(),
        });
    }
    let path = folder.join(relative);
    let reader = match reader {
        Reader::Auto => Reader::for_extension(relative)
            .ok_or_else(|| KnowledgeError::UnknownExtension { path: path.clone() })?,
        chosen => chosen,
    };
    Ok(Document {
        key,
        location: Location::File { path, reader },
    })
}

/// `file_paths` (and `urls`) take one path or a list, as CrewAI's sources do.
fn one_or_many<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Vec<String>>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(
        Option::<OneOrMany>::deserialize(deserializer)?.map(|v| match v {
            OneOrMany::One(one) => vec![one],
            OneOrMany::Many(many) => many,
        }),
    )
}

/// The mapping form as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSource {
    #[serde(rename = "type")]
    kind: Option<String>,
    content: Option<String>,
    #[serde(default, deserialize_with = "one_or_many")]
    file_paths: Option<Vec<String>>,
    #[serde(default, deserialize_with = "one_or_many")]
    urls: Option<Vec<String>>,
    chunk_size: Option<usize>,
    chunk_overlap: Option<usize>,
    metadata: Option<Map<String, Value>>,
    collection_name: Option<String>,
}

impl RawSource {
    fn into_source(self) -> Result<KnowledgeSource, String> {
        let reader = match &self.kind {
            Some(kind) => Reader::from_type(kind)?,
            None if self.content.is_some() => None,
            None if self.urls.is_some() => Some(Reader::Web),
            None => Some(Reader::Auto),
        };
        let content = match (reader, self.content, self.file_paths, self.urls) {
            (None, Some(text), None, None) => SourceContent::Text(text),
            (None, None, _, _) => {
                return Err("a string source needs `content:` (the text)".into());
            }
            (None, Some(_), _, _) => {
                return Err(
                    "a string source takes `content:` only, not `file_paths` or `urls`".into(),
                );
            }
            (Some(_), Some(_), _, _) => {
                return Err(
                    "`content:` is for string sources; a file source takes `file_paths:`".into(),
                );
            }
            (Some(reader), None, Some(paths), None) => SourceContent::Documents {
                reader,
                locations: paths,
            },
            (Some(reader @ (Reader::Web | Reader::Auto)), None, None, Some(urls)) => {
                SourceContent::Documents {
                    reader,
                    locations: urls,
                }
            }
            (Some(_), None, Some(_), Some(_)) => {
                return Err("give `file_paths:` or `urls:`, not both".into());
            }
            (Some(reader), None, None, Some(_)) => {
                return Err(format!(
                    "a {} source takes `file_paths:`; `urls:` is for web sources",
                    reader.name()
                ));
            }
            (Some(reader), None, None, None) => {
                return Err(format!(
                    "a {} source needs `{}:`",
                    reader.name(),
                    if reader == Reader::Web {
                        "urls"
                    } else {
                        "file_paths"
                    }
                ));
            }
        };
        let chunking = ChunkSettings::new(
            self.chunk_size.unwrap_or(DEFAULT_CHUNK_SIZE),
            self.chunk_overlap.unwrap_or(DEFAULT_CHUNK_OVERLAP),
        )
        .map_err(|e| match e {
            KnowledgeError::InvalidSource(reason) => reason,
            other => other.to_string(),
        })?;
        Ok(KnowledgeSource {
            content,
            chunking,
            metadata: self.metadata.unwrap_or_default(),
            collection_name: self.collection_name,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_bare_string_is_a_file_or_an_address() {
        let file = KnowledgeSource::from_value(&json!("guide.pdf")).unwrap();
        assert_eq!(
            file.content,
            SourceContent::Documents {
                reader: Reader::Auto,
                locations: vec!["guide.pdf".into()]
            }
        );
        let docs = file.documents_in(0, Path::new("/p/knowledge")).unwrap();
        assert!(
            matches!(&docs[0].location, Location::File { path, reader: Reader::Pdf } if path == Path::new("/p/knowledge/guide.pdf"))
        );
        let page = KnowledgeSource::from_value(&json!("https://example.com/a")).unwrap();
        let docs = page.documents_in(0, Path::new("k")).unwrap();
        assert!(matches!(&docs[0].location, Location::Web(url) if url == "https://example.com/a"));
    }

    #[test]
    fn mappings_take_crewai_class_names_and_arguments() {
        let source = KnowledgeSource::from_value(&json!({
            "type": "CSVKnowledgeSource", "file_paths": "orders.csv",
            "chunk_size": 100, "chunk_overlap": 10, "metadata": {"team": "sales"},
            "collection_name": "sales"
        }))
        .unwrap();
        assert_eq!(source.chunking, ChunkSettings::new(100, 10).unwrap());
        assert_eq!(source.metadata["team"], "sales");
        assert_eq!(source.collection_name.as_deref(), Some("sales"));
        let text =
            KnowledgeSource::from_value(&json!({"content": "Refunds take 5 days."})).unwrap();
        assert_eq!(
            text.content,
            SourceContent::Text("Refunds take 5 days.".into())
        );
    }

    #[test]
    fn mistakes_are_explained() {
        for (value, says) in [
            (json!({"type": "pdf"}), "needs `file_paths:`"),
            (
                json!({"type": "pdf", "content": "x"}),
                "`content:` is for string sources",
            ),
            (
                json!({"type": "nope", "file_paths": ["a"]}),
                "unknown knowledge source type",
            ),
            (
                json!({"file_paths": ["a"], "chunk_overlap": 5000}),
                "chunk_overlap (5000)",
            ),
            (
                json!({"file_paths": ["a"], "colection_name": "x"}),
                "unknown field",
            ),
            (json!(3), "a knowledge source is"),
        ] {
            let error = KnowledgeSource::from_value(&value).unwrap_err();
            assert!(error.contains(says), "{value}: {error}");
        }
    }

    #[test]
    fn paths_stay_inside_the_knowledge_folder() {
        for bad in ["../secret.txt", "/etc/passwd", "a/../../b.txt"] {
            let source = KnowledgeSource::files([bad]);
            assert!(
                matches!(
                    source.documents_in(0, Path::new("k")),
                    Err(KnowledgeError::OutsideFolder { .. })
                ),
                "{bad}"
            );
        }
        let unknown = KnowledgeSource::files(["data.bin"]);
        assert!(matches!(
            unknown.documents_in(0, Path::new("k")),
            Err(KnowledgeError::UnknownExtension { .. })
        ));
    }
}
