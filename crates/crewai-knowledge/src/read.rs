//! The file readers: a document's bytes to its text. Blocking work, run on tokio's blocking
//! pool by the caller.
//!
//! What each gives: text and Markdown as written; a PDF's text (pdf-extract); CSV rows with
//! their fields joined by spaces, one row a line (as CrewAI's CSV source); every sheet of a
//! workbook as CSV under a `Sheet: <name>` line; JSON as indented `key: value` lines; a DOCX
//! document's paragraphs, one a line; an XML document's text nodes, one a line.

use std::io::Read;
use std::path::Path;

use calamine::Reader as _;
use quick_xml::events::Event;
use serde_json::Value;

use crate::error::{DocxError, KnowledgeError};
use crate::source::Reader;

/// The text of the file at `path` (whose bytes are `bytes`), read as `reader` says.
pub(crate) fn read_text(
    reader: Reader,
    path: &Path,
    bytes: Vec<u8>,
) -> Result<String, KnowledgeError> {
    let utf8 = |bytes: Vec<u8>| {
        String::from_utf8(bytes).map_err(|source| KnowledgeError::NotUtf8 {
            path: path.to_path_buf(),
            source,
        })
    };
    match reader {
        Reader::Text | Reader::Markdown => utf8(bytes),
        Reader::Pdf => pdf_text(path, &bytes),
        Reader::Csv => csv_text(path, &bytes),
        Reader::Excel => workbook_text(path),
        Reader::Json => {
            let value: Value =
                serde_json::from_slice(&bytes).map_err(|source| KnowledgeError::Json {
                    path: path.to_path_buf(),
                    source,
                })?;
            let mut text = String::new();
            json_text(&value, 0, &mut text);
            Ok(text)
        }
        Reader::Docx => docx_text(&bytes).map_err(|source| KnowledgeError::Docx {
            path: path.to_path_buf(),
            source,
        }),
        Reader::Xml => xml_text(&utf8(bytes)?).map_err(|source| KnowledgeError::Xml {
            path: path.to_path_buf(),
            source,
        }),
        // Callers resolve these before reading a file.
        Reader::Auto | Reader::Web => Err(KnowledgeError::InvalidSource(format!(
            "{} is not read as a file by the {} reader",
            path.display(),
            reader.name()
        ))),
    }
}

/// A PDF's text. pdf-extract panics on some malformed files instead of failing; that is caught
/// here and reported as the file's error.
fn pdf_text(path: &Path, bytes: &[u8]) -> Result<String, KnowledgeError> {
    let extracted = std::panic::catch_unwind(|| pdf_extract::extract_text_from_mem(bytes));
    let failure: Box<dyn std::error::Error + Send + Sync> = match extracted {
        Ok(Ok(text)) => return Ok(text),
        Ok(Err(error)) => Box::new(error),
        Err(panic) => crewai_tools::panic_message(panic.as_ref()).into(),
    };
    Err(KnowledgeError::Pdf {
        path: path.to_path_buf(),
        source: failure,
    })
}

fn csv_text(path: &Path, bytes: &[u8]) -> Result<String, KnowledgeError> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(bytes);
    let mut text = String::new();
    for record in reader.records() {
        let record = record.map_err(|source| KnowledgeError::Csv {
            path: path.to_path_buf(),
            source,
        })?;
        let fields: Vec<&str> = record.iter().collect();
        text.push_str(&fields.join(" "));
        text.push('\n');
    }
    Ok(text)
}

fn workbook_text(path: &Path) -> Result<String, KnowledgeError> {
    let failed = |source| KnowledgeError::Spreadsheet {
        path: path.to_path_buf(),
        source,
    };
    let mut workbook = calamine::open_workbook_auto(path).map_err(failed)?;
    let mut text = String::new();
    for name in workbook.sheet_names() {
        let range = workbook.worksheet_range(&name).map_err(failed)?;
        text.push_str(&format!("Sheet: {name}\n"));
        let mut writer = csv::Writer::from_writer(Vec::new());
        for row in range.rows() {
            let cells: Vec<String> = row.iter().map(ToString::to_string).collect();
            writer
                .write_record(&cells)
                .map_err(|source| KnowledgeError::Csv {
                    path: path.to_path_buf(),
                    source,
                })?;
        }
        let written = writer.into_inner().map_err(|error| KnowledgeError::Read {
            path: path.to_path_buf(),
            source: error.into_error(),
        })?;
        text.push_str(&String::from_utf8_lossy(&written));
        text.push('\n');
    }
    Ok(text)
}

/// JSON as indented lines: `key: value` for scalars, `key:` followed by the nested lines for
/// objects and lists, `- item` for list items.
fn json_text(value: &Value, depth: usize, out: &mut String) {
    let indent = "  ".repeat(depth);
    let scalar = |value: &Value| match value {
        Value::String(s) => Some(s.clone()),
        Value::Object(_) | Value::Array(_) => None,
        other => Some(other.to_string()),
    };
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                match scalar(value) {
                    Some(text) => out.push_str(&format!("{indent}{key}: {text}\n")),
                    None => {
                        out.push_str(&format!("{indent}{key}:\n"));
                        json_text(value, depth + 1, out);
                    }
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                match scalar(item) {
                    Some(text) => out.push_str(&format!("{indent}- {text}\n")),
                    None => {
                        out.push_str(&format!("{indent}-\n"));
                        json_text(item, depth + 1, out);
                    }
                }
            }
        }
        other => {
            if let Some(text) = scalar(other) {
                out.push_str(&format!("{indent}{text}\n"));
            }
        }
    }
}

/// The paragraphs of a DOCX file's `word/document.xml`: the text runs (`w:t`) of each
/// paragraph (`w:p`) on one line, tabs and breaks kept.
fn docx_text(bytes: &[u8]) -> Result<String, DocxError> {
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(bytes)).map_err(DocxError::Zip)?;
    let mut xml = String::new();
    archive
        .by_name("word/document.xml")
        .map_err(DocxError::Zip)?
        .read_to_string(&mut xml)
        .map_err(DocxError::Io)?;
    let mut reader = quick_xml::Reader::from_str(&xml);
    let mut text = String::new();
    let mut in_run_text = false;
    loop {
        match reader.read_event().map_err(DocxError::Xml)? {
            Event::Start(tag) if tag.local_name().as_ref() == "t" => in_run_text = true,
            Event::End(tag) => match tag.local_name().as_ref() {
                "t" => in_run_text = false,
                "p" => text.push('\n'),
                _ => {}
            },
            Event::Empty(tag) => match tag.local_name().as_ref() {
                "tab" => text.push('\t'),
                "br" | "cr" => text.push('\n'),
                _ => {}
            },
            Event::Text(run) if in_run_text => text.push_str(&run.xml10_content()),
            Event::CData(run) if in_run_text => text.push_str(&run.into_inner()),
            Event::GeneralRef(reference) if in_run_text => {
                text.extend(resolve_reference(&reference).map_err(DocxError::Xml)?);
            }
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(text)
}

/// The character an entity or character reference stands for (`None` for an entity XML does
/// not define, which is left out).
fn resolve_reference(
    reference: &quick_xml::events::BytesRef<'_>,
) -> Result<Option<char>, quick_xml::Error> {
    Ok(match reference.resolve_char_ref()? {
        Some(c) => Some(c),
        None => match reference.xml10_content().as_ref() {
            "lt" => Some('<'),
            "gt" => Some('>'),
            "amp" => Some('&'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            _ => None,
        },
    })
}

/// An XML document's text: each element's text (references resolved, CDATA kept) on a line of
/// its own, blank runs between elements left out.
fn xml_text(xml: &str) -> Result<String, quick_xml::Error> {
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut text = String::new();
    let mut line = String::new();
    let end_line = |line: &mut String, text: &mut String| {
        let trimmed = line.trim();
        if !trimmed.is_empty() {
            text.push_str(trimmed);
            text.push('\n');
        }
        line.clear();
    };
    loop {
        match reader.read_event()? {
            Event::Start(_) | Event::End(_) | Event::Empty(_) => end_line(&mut line, &mut text),
            Event::Text(run) => line.push_str(&run.xml10_content()),
            Event::CData(run) => line.push_str(&run.into_inner()),
            Event::GeneralRef(reference) => line.extend(resolve_reference(&reference)?),
            Event::Eof => break,
            _ => {}
        }
    }
    end_line(&mut line, &mut text);
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_reads_as_indented_lines() {
        let value = serde_json::json!({"name": "Ada", "tags": ["math", {"k": 1}], "ok": true});
        let mut text = String::new();
        json_text(&value, 0, &mut text);
        assert_eq!(
            text,
            "name: Ada\ntags:\n  - math\n  -\n    k: 1\nok: true\n"
        );
    }

    #[test]
    fn xml_reads_as_its_text_nodes() {
        let text = xml_text(
            "<?xml version=\"1.0\"?><shop><item id=\"1\">Green tea &amp; mint</item>\n  <item><![CDATA[Oolong <aged>]]></item><empty/></shop>",
        )
        .unwrap();
        assert_eq!(text, "Green tea & mint\nOolong <aged>\n");
        assert!(xml_text("<a><b></a>").is_err());
    }

    #[test]
    fn csv_rows_become_lines() {
        let text = csv_text(Path::new("a.csv"), b"id,city\n1,\"Lisbon, PT\"\n2,Porto\n").unwrap();
        assert_eq!(text, "id city\n1 Lisbon, PT\n2 Porto\n");
    }
}
