//! Reducing an HTML page to the text a model can read.

use std::sync::LazyLock;

use regex::Regex;

use crate::macros::static_regexes;

static INVISIBLE: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    ["script", "style", "noscript", "template", "svg", "head"]
        .iter()
        .map(|tag| {
            Regex::new(&format!(r"(?is)<{tag}\b[^>]*>.*?</{tag}\s*>")).expect("static regex")
        })
        .collect()
});
static_regexes! {
    TITLE = r"(?is)<title\b[^>]*>(.*?)</title\s*>";
    COMMENT = r"(?s)<!--.*?-->";
    LIST_ITEM = r"(?i)<li\b[^>]*>";
    BLOCK = r"(?i)</?(p|div|br|hr|h[1-6]|ul|ol|li|dl|dt|dd|table|thead|tbody|tfoot|tr|section|article|header|footer|nav|aside|main|blockquote|pre|figure|figcaption|form|address)\b[^>]*>";
    CELL = r"(?i)</t[dh]\s*>";
    WHITESPACE = r"\s+";
    TAG = r"(?s)<[^>]*>";
    ENTITY = r"&(#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[a-zA-Z]{2,8});";
}

/// The readable text of an HTML document: scripts, styles and markup removed, block elements on
/// their own lines, list items as `- ` lines, entities decoded and whitespace collapsed. The
/// page title, when there is one, comes first.
///
/// ```
/// let text = crewai_tools::builtin::html_to_text(
///     "<html><head><title>Hi</title><style>p{}</style></head>\
///      <body><p>One &amp;  two</p><script>x()</script><ul><li>a</li><li>b</li></ul></body></html>",
/// );
/// assert_eq!(text, "Hi\n\nOne & two\n- a\n- b");
/// ```
pub fn html_to_text(html: &str) -> String {
    let title = TITLE
        .captures(html)
        .map(|captures| collapse_inline(&decode_entities(&TAG.replace_all(&captures[1], ""))));
    let mut text = COMMENT.replace_all(html, "").into_owned();
    for pattern in INVISIBLE.iter() {
        text = pattern.replace_all(&text, " ").into_owned();
    }
    // Line breaks in the source are layout, not text: only block elements start new lines.
    let text = WHITESPACE.replace_all(&text, " ");
    let text = LIST_ITEM.replace_all(&text, "\n- ");
    let text = BLOCK.replace_all(&text, "\n");
    let text = CELL.replace_all(&text, " ");
    let text = TAG.replace_all(&text, "");
    let text = decode_entities(&text);
    let body = collapse_lines(&text);
    match title.filter(|title| !title.is_empty()) {
        Some(title) if !body.starts_with(&title) => format!("{title}\n\n{body}"),
        _ => body,
    }
}

fn decode_entities(text: &str) -> String {
    ENTITY
        .replace_all(text, |captures: &regex::Captures<'_>| {
            let entity = &captures[1];
            let decoded = if let Some(hex) = entity
                .strip_prefix("#x")
                .or_else(|| entity.strip_prefix("#X"))
            {
                u32::from_str_radix(hex, 16).ok().and_then(char::from_u32)
            } else if let Some(decimal) = entity.strip_prefix('#') {
                decimal.parse().ok().and_then(char::from_u32)
            } else {
                named_entity(entity)
            };
            decoded.map_or_else(|| captures[0].to_string(), String::from)
        })
        .into_owned()
}

fn named_entity(name: &str) -> Option<char> {
    Some(match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" => ' ',
        "ndash" => '–',
        "mdash" => '—',
        "hellip" => '…',
        "copy" => '©',
        "reg" => '®',
        "trade" => '™',
        "lsquo" => '‘',
        "rsquo" => '’',
        "ldquo" => '“',
        "rdquo" => '”',
        "laquo" => '«',
        "raquo" => '»',
        "middot" => '·',
        "bull" => '•',
        "euro" => '€',
        "pound" => '£',
        "deg" => '°',
        _ => return None,
    })
}

fn collapse_inline(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn collapse_lines(text: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        let line = collapse_inline(line);
        if line.is_empty() || line == "-" {
            continue;
        }
        out.push(line);
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_invisible_parts_and_markup() {
        let html = r#"<!DOCTYPE html><html><head><meta charset="utf-8"><title>Rust &mdash; Home</title>
            <script>var x = "<p>not text</p>";</script></head>
            <body><!-- hidden --><nav><a href="/">Home</a></nav>
            <h1>Fast   and
            safe</h1><p>Memory&nbsp;safety &lt;without&gt; GC &#8212; &#x263A;</p>
            <table><tr><td>a</td><td>b</td></tr></table><noscript>enable js</noscript>
            <style>.x { color: red }</style></body></html>"#;
        assert_eq!(
            html_to_text(html),
            "Rust — Home\n\nHome\nFast and safe\nMemory safety <without> GC — ☺\na b"
        );
    }

    #[test]
    fn unknown_entities_are_kept() {
        assert_eq!(html_to_text("<p>&bogus; &amp;</p>"), "&bogus; &");
    }

    #[test]
    fn plain_text_survives() {
        assert_eq!(html_to_text("just text"), "just text");
    }
}
