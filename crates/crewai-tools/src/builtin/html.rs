//! Reducing an HTML page to the text a model can read, with html2text (html5ever's parser, the
//! browsers' parsing rules, every named entity).

use crate::macros::static_regexes;

/// The columns html2text lays text out in: wide enough that no paragraph is wrapped (a model
/// reads lines, not a screen).
const LINE_WIDTH: usize = 100_000;

static_regexes! {
    TITLE = r"(?is)<title\b[^>]*>(.*?)</title\s*>";
}

/// The readable text of an HTML document: scripts, styles and markup removed, each block on
/// its own line (headings as `# `, list items as `* `, links as `[text]`), entities decoded,
/// blank lines and trailing spaces dropped. The page title, when there is one, comes first.
///
/// ```
/// let text = crewai_tools::builtin::html_to_text(
///     "<html><head><title>Hi</title><style>p{}</style></head>\
///      <body><p>One &amp;  two</p><script>x()</script><ul><li>a</li><li>b</li></ul></body></html>",
/// );
/// assert_eq!(text, "Hi\n\nOne & two\n* a\n* b");
/// ```
pub fn html_to_text(html: &str) -> String {
    let body = render(html);
    // html2text leaves out `<head>`, title included; the title names the page, so it is taken
    // on its own and rendered the same way.
    let title = TITLE
        .captures(html)
        .map(|captures| render(&format!("<p>{}</p>", &captures[1])))
        .filter(|title| !title.is_empty() && !heads_with(&body, title));
    match title {
        Some(title) => format!("{title}\n\n{body}"),
        None => body,
    }
}

/// Whether the first line of `body` is `title` already (as text or as a heading).
fn heads_with(body: &str, title: &str) -> bool {
    body.lines()
        .next()
        .is_some_and(|first| first.trim_start_matches('#').trim() == title)
}

/// html2text's plain rendering, without its blank lines and trailing spaces, and with no-break
/// spaces as plain ones (a model reads them alike, a tokenizer does not). A page it cannot
/// lay out (it fails only on widths too narrow for a table, which [`LINE_WIDTH`] rules out)
/// reads as empty.
fn render(html: &str) -> String {
    let text = html2text::config::plain_no_decorate()
        .raw_mode(true)
        .no_link_wrapping()
        .string_from_read(html.as_bytes(), LINE_WIDTH)
        .unwrap_or_default();
    text.replace('\u{a0}', " ")
        .lines()
        .map(str::trim_end)
        .filter(|line| !line.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n")
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
            "Rust — Home\n\n[Home]\n# Fast and safe\nMemory safety <without> GC — ☺\na\nb\nenable js"
        );
    }

    #[test]
    fn a_title_the_page_opens_with_is_not_repeated() {
        let html =
            "<html><head><title>Notes</title></head><body><h1>Notes</h1><p>One.</p></body></html>";
        assert_eq!(html_to_text(html), "# Notes\nOne.");
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
