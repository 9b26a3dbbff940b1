//! Project files as text, parsed into JSON values, with the line of any key on demand.
//!
//! Values carry no positions, so a line is found only when an error needs one: the source is
//! parsed again with a visitor that fails on purpose at the wanted key, and the parser's own
//! error location is read back. That keeps the line exact for every YAML and JSON construct the
//! real parsers accept (quoted keys, flow mappings, anchors, block scalars) without a second parser.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use crate::error::{Diagnostic, ProjectError};

/// The syntax a project file is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// YAML, read by the same libyaml rules PyYAML uses.
    Yaml,
    /// JSON with `//` and `/* */` comments and trailing commas allowed.
    Jsonc,
    /// Python (`crew.py`, `main.py`), read by crewai-pysource: its values are not parsed from
    /// the text here, and their lines are the ones the reader recorded
    /// ([`SourceFile::python`]).
    Python,
}

/// One step of a path into a document: a mapping key or a sequence index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    Key(String),
    Index(usize),
}

impl From<&str> for Seg {
    fn from(key: &str) -> Self {
        Seg::Key(key.to_string())
    }
}

impl From<String> for Seg {
    fn from(key: String) -> Self {
        Seg::Key(key)
    }
}

impl From<usize> for Seg {
    fn from(index: usize) -> Self {
        Seg::Index(index)
    }
}

/// A path into a document, such as `tasks` / `report` / `agent`.
pub type DocPath = Vec<Seg>;

/// A project file: where it is, how it is shown in messages, and its text.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// The file on disk.
    pub path: PathBuf,
    /// The path shown in messages, relative to the project (`config/tasks.yaml`).
    pub display: String,
    pub format: Format,
    /// The text as written (comments included, for JSONC).
    pub text: String,
    /// For Python files: the line of each path the reader recorded.
    recorded_lines: Vec<(DocPath, usize)>,
}

const LOCATE_MARKER: &str = "\u{0}crewai-locate\u{0}";

impl SourceFile {
    /// Reads a file, naming it in messages by its path relative to `root`.
    pub fn read(path: &Path, root: &Path, format: Format) -> Result<Self, ProjectError> {
        let text = std::fs::read_to_string(path).map_err(|source| ProjectError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(Self::from_text(path, root, format, text))
    }

    /// A file whose text is already in memory.
    pub fn from_text(path: &Path, root: &Path, format: Format, text: String) -> Self {
        let display = path
            .strip_prefix(root)
            .unwrap_or(path)
            .to_string_lossy()
            .replace('\\', "/");
        SourceFile {
            path: path.to_path_buf(),
            display,
            format,
            text,
            recorded_lines: Vec::new(),
        }
    }

    /// A Python file whose values were read by crewai-pysource, with the line of each path
    /// values are placed at (`agents` / `researcher` / `llm` → 33). A deeper path (`tools[2]`)
    /// takes the line of its nearest recorded ancestor unless it has its own.
    pub fn python(path: &Path, root: &Path, lines: Vec<(DocPath, usize)>) -> Self {
        SourceFile {
            recorded_lines: lines,
            ..Self::from_text(path, root, Format::Python, String::new())
        }
    }

    /// Records the line of `path` in a Python file.
    pub(crate) fn record_line(&mut self, path: DocPath, line: usize) {
        self.recorded_lines.push((path, line));
    }

    /// A document known only by name (values built in memory): messages name it, without
    /// lines.
    pub fn without_text(display: impl Into<String>) -> Self {
        let display = display.into();
        SourceFile {
            path: PathBuf::from(&display),
            display,
            format: Format::Yaml,
            text: String::new(),
            recorded_lines: Vec::new(),
        }
    }

    /// Parses the whole document into a JSON value (an empty YAML file is `null`).
    pub fn parse(&self) -> Result<Value, Diagnostic> {
        match self.format {
            Format::Yaml => yaml_serde::from_str::<Value>(&self.text).map_err(|err| {
                let line = err.location().map(|l| l.line());
                Diagnostic::new(
                    self,
                    line,
                    format!("invalid YAML: {}", strip_location(&err.to_string())),
                )
                .with_hint(yaml_hint(&err.to_string()))
            }),
            Format::Jsonc => {
                let clean = strip_jsonc(&self.text);
                serde_json::from_str::<Value>(&clean).map_err(|err| {
                    let line = (err.line() > 0).then_some(err.line());
                    Diagnostic::new(
                        self,
                        line,
                        format!("invalid JSON: {}", strip_location(&err.to_string())),
                    )
                })
            }
            Format::Python => Err(Diagnostic::new(
                self,
                None,
                "Python files are read by crewai-pysource, not parsed as data",
            )),
        }
    }

    /// The 1-based line where the key (or sequence item) at `path` is written, if it exists.
    pub fn line_of(&self, path: &[Seg]) -> Option<usize> {
        if self.format == Format::Python {
            return self
                .recorded_lines
                .iter()
                .filter(|(recorded, _)| path.starts_with(recorded))
                .max_by_key(|(recorded, _)| recorded.len())
                .map(|(_, line)| *line);
        }
        if path.is_empty() || self.text.is_empty() {
            return None;
        }
        let seed = Locate { path };
        match self.format {
            Format::Yaml => {
                let de = yaml_serde::Deserializer::from_str(&self.text);
                match seed.deserialize(de) {
                    Err(err) if err.to_string().contains(LOCATE_MARKER) => {
                        err.location().map(|l| l.line())
                    }
                    _ => None,
                }
            }
            Format::Jsonc => {
                let clean = strip_jsonc(&self.text);
                let mut de = serde_json::Deserializer::from_str(&clean);
                match seed.deserialize(&mut de) {
                    Err(err) if err.to_string().contains(LOCATE_MARKER) => Some(err.line()),
                    _ => None,
                }
            }
            Format::Python => None,
        }
    }
}

/// Removes the " at line L column C" suffix the parsers add; our messages put the line in front.
fn strip_location(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(pos) => message[..pos].to_string(),
        None => message.to_string(),
    }
}

fn yaml_hint(message: &str) -> Option<String> {
    if message.contains("mapping values are not allowed") {
        Some("a value containing ': ' must be quoted or written as a block (`key: >`)".to_string())
    } else if message.contains("found character that cannot start any token")
        && message.contains('\t')
    {
        Some("YAML indentation must use spaces, not tabs".to_string())
    } else if message.contains("did not find expected key") || message.contains("block mapping") {
        Some("check the indentation of this entry and the one before it".to_string())
    } else {
        None
    }
}

/// A seed that walks to `path` and fails there, so the parser reports where that node is.
struct Locate<'p> {
    path: &'p [Seg],
}

impl<'de> DeserializeSeed<'de> for Locate<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Locate<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Some((Seg::Key(target), rest)) = self.path.split_first() else {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            return Ok(());
        };
        while let Some(found) = map.next_key_seed(KeyMatch {
            target,
            fail_on_match: rest.is_empty(),
        })? {
            if found {
                return map.next_value_seed(Locate { path: rest });
            }
            map.next_value::<IgnoredAny>()?;
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Some((Seg::Index(target), rest)) = self.path.split_first() else {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            return Ok(());
        };
        let mut index = 0;
        loop {
            if index == *target {
                return match rest.is_empty() {
                    true => seq.next_element_seed(FailHere).map(|_| ()),
                    false => seq.next_element_seed(Locate { path: rest }).map(|_| ()),
                };
            }
            if seq.next_element::<IgnoredAny>()?.is_none() {
                return Ok(());
            }
            index += 1;
        }
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
}

/// Compares a mapping key with the wanted one; fails on it when it is the last step.
struct KeyMatch<'t> {
    target: &'t str,
    fail_on_match: bool,
}

impl KeyMatch<'_> {
    fn check<E: de::Error>(&self, key: &str) -> Result<bool, E> {
        if key != self.target {
            return Ok(false);
        }
        if self.fail_on_match {
            Err(E::custom(LOCATE_MARKER))
        } else {
            Ok(true)
        }
    }
}

impl<'de> DeserializeSeed<'de> for KeyMatch<'_> {
    type Value = bool;
    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for KeyMatch<'_> {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a mapping key")
    }
    fn visit_str<E: de::Error>(self, key: &str) -> Result<bool, E> {
        self.check(key)
    }
    fn visit_i64<E: de::Error>(self, key: i64) -> Result<bool, E> {
        self.check(&key.to_string())
    }
    fn visit_u64<E: de::Error>(self, key: u64) -> Result<bool, E> {
        self.check(&key.to_string())
    }
    fn visit_f64<E: de::Error>(self, key: f64) -> Result<bool, E> {
        self.check(&key.to_string())
    }
    fn visit_bool<E: de::Error>(self, key: bool) -> Result<bool, E> {
        self.check(&key.to_string())
    }
    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        self.check("null")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(false)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(false)
    }
}

/// Fails on whatever node comes next, so its own position is reported.
struct FailHere;

impl<'de> DeserializeSeed<'de> for FailHere {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for FailHere {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any value")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Err(E::custom(LOCATE_MARKER))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Err(E::custom(LOCATE_MARKER))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Err(E::custom(LOCATE_MARKER))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Err(E::custom(LOCATE_MARKER))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Err(E::custom(LOCATE_MARKER))
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Err(E::custom(LOCATE_MARKER))
    }
    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        Err(de::Error::custom(LOCATE_MARKER))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        Err(de::Error::custom(LOCATE_MARKER))
    }
}

/// Turns JSONC into JSON: comments and trailing commas become spaces, so every byte that stays
/// keeps its line and column.
pub fn strip_jsonc(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(bytes.len());
    let mut i = 0;
    let mut in_string = false;
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            out.push(b);
            if b == b'\\' && i + 1 < bytes.len() {
                out.push(bytes[i + 1]);
                i += 2;
                continue;
            }
            if b == b'"' {
                in_string = false;
            }
            i += 1;
            continue;
        }
        match b {
            b'"' => {
                in_string = true;
                out.push(b);
                i += 1;
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    out.push(b' ');
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                out.extend_from_slice(b"  ");
                i += 2;
                while i < bytes.len() && !(bytes[i] == b'*' && bytes.get(i + 1) == Some(&b'/')) {
                    out.push(if bytes[i] == b'\n' { b'\n' } else { b' ' });
                    i += 1;
                }
                if i < bytes.len() {
                    out.extend_from_slice(b"  ");
                    i += 2;
                }
            }
            b',' => {
                let mut j = i + 1;
                // Look past whitespace and comments for a closing bracket.
                loop {
                    match bytes.get(j) {
                        Some(c) if c.is_ascii_whitespace() => j += 1,
                        Some(b'/') if bytes.get(j + 1) == Some(&b'/') => {
                            while j < bytes.len() && bytes[j] != b'\n' {
                                j += 1;
                            }
                        }
                        Some(b'/') if bytes.get(j + 1) == Some(&b'*') => {
                            j += 2;
                            while j < bytes.len()
                                && !(bytes[j] == b'*' && bytes.get(j + 1) == Some(&b'/'))
                            {
                                j += 1;
                            }
                            j = (j + 2).min(bytes.len());
                        }
                        _ => break,
                    }
                }
                let trailing = matches!(bytes.get(j), Some(b'}') | Some(b']'));
                out.push(if trailing { b' ' } else { b',' });
                i += 1;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    // Only ASCII bytes were replaced by ASCII spaces, and string contents were copied whole, so
    // the result is still valid UTF-8.
    String::from_utf8(out)
        .unwrap_or_else(|err| String::from_utf8_lossy(err.as_bytes()).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml(text: &str) -> SourceFile {
        SourceFile::from_text(
            Path::new("/p/config/tasks.yaml"),
            Path::new("/p"),
            Format::Yaml,
            text.to_string(),
        )
    }

    #[test]
    fn display_path_is_relative_to_the_project() {
        assert_eq!(yaml("").display, "config/tasks.yaml");
    }

    #[test]
    fn finds_lines_of_nested_keys_past_block_scalars_and_comments() {
        let src = yaml(
            "# header\nresearch:\n  description: >\n    agent: not a key\n    more\n\n  agent: researcher\n'report':\n  context: [research, other]\n  agent: \"writer\"\n",
        );
        assert_eq!(src.line_of(&["research".into()]), Some(2));
        assert_eq!(src.line_of(&["research".into(), "agent".into()]), Some(7));
        assert_eq!(src.line_of(&["report".into(), "agent".into()]), Some(10));
        assert_eq!(
            src.line_of(&["report".into(), "context".into(), 1.into()]),
            Some(9)
        );
        assert_eq!(src.line_of(&["missing".into()]), None);
    }

    #[test]
    fn finds_sequence_items_on_their_own_lines() {
        let src = yaml("a:\n  tools:\n    - one\n    - two\n    - {name: three}\n");
        assert_eq!(
            src.line_of(&["a".into(), "tools".into(), 1.into()]),
            Some(4)
        );
        assert_eq!(
            src.line_of(&["a".into(), "tools".into(), 2.into()]),
            Some(5)
        );
    }

    #[test]
    fn strips_jsonc_comments_and_trailing_commas_keeping_lines() {
        let text = "{\n  // c\n  \"a\": \"//not a comment\", /* x\n y */\n  \"b\": [1, 2,],\n}\n";
        let clean = strip_jsonc(text);
        assert_eq!(clean.lines().count(), text.lines().count());
        let value: Value = serde_json::from_str(&clean).unwrap();
        assert_eq!(value["a"], "//not a comment");
        assert_eq!(value["b"], serde_json::json!([1, 2]));
        let src = SourceFile::from_text(
            Path::new("/p/crew.jsonc"),
            Path::new("/p"),
            Format::Jsonc,
            text.to_string(),
        );
        assert_eq!(src.line_of(&["b".into()]), Some(5));
        assert_eq!(src.line_of(&["b".into(), 1.into()]), Some(5));
    }

    #[test]
    fn yaml_syntax_errors_carry_the_line() {
        let err = yaml("a:\n  b: c\n d: e: f\n").parse().unwrap_err();
        assert_eq!(err.line, Some(3), "{err}");
        assert!(
            err.to_string()
                .starts_with("config/tasks.yaml:3: invalid YAML"),
            "{err}"
        );
    }
}
