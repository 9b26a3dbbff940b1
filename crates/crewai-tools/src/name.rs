//! Tool names as models see them, and the fuzzy matching used to find a tool a model misspelled.

use sha2::{Digest, Sha256};
use unicode_normalization::UnicodeNormalization;

use crate::macros::static_regexes;

/// The longest name providers accept for a function.
pub const MAX_TOOL_NAME_LEN: usize = 64;

static_regexes! {
    LOWER_THEN_UPPER = r"([a-z0-9])([A-Z])";
    ACRONYM_THEN_WORD = r"([A-Z]+)([A-Z][a-z])";
    NOT_ALPHANUMERIC = r"[^a-z0-9]+";
}

/// Turns any tool name into the `snake_case` form CrewAI sends to providers.
///
/// The rules are CrewAI's: Unicode is decomposed and reduced to ASCII, camelCase words are split
/// with `_`, everything is lowercased, quotes are dropped, every other run of characters that are
/// not letters or digits becomes one `_`, and leading/trailing `_` are removed. A name longer than
/// 64 characters is cut and suffixed with `_` and 8 hex digits of its SHA-256, so distinct long
/// names stay distinct.
///
/// ```
/// use crewai_tools::sanitize_tool_name;
/// assert_eq!(sanitize_tool_name("Delegate work to coworker"), "delegate_work_to_coworker");
/// assert_eq!(sanitize_tool_name("SerperDevTool"), "serper_dev_tool");
/// assert_eq!(sanitize_tool_name("Café's  search!"), "cafes_search");
/// ```
pub fn sanitize_tool_name(name: &str) -> String {
    let ascii: String = name.nfkd().filter(char::is_ascii).collect();
    let split = LOWER_THEN_UPPER.replace_all(&ascii, "${1}_${2}");
    let split = ACRONYM_THEN_WORD.replace_all(&split, "${1}_${2}");
    let lowered: String = split
        .to_lowercase()
        .chars()
        .filter(|c| *c != '\'' && *c != '"')
        .collect();
    let underscored = NOT_ALPHANUMERIC.replace_all(&lowered, "_");
    let trimmed = underscored.trim_matches('_').to_string();
    if trimmed.len() <= MAX_TOOL_NAME_LEN {
        return trimmed;
    }
    let digest = hex::encode(Sha256::digest(trimmed.as_bytes()));
    // The sanitised name is pure ASCII, so byte slicing is safe.
    format!("{}_{}", &trimmed[..MAX_TOOL_NAME_LEN - 9], &digest[..8])
}

/// The key used for the tolerant second lookup pass: lowercase, without spaces, `_` or `-`.
pub(crate) fn loose_key(name: &str) -> String {
    name.chars()
        .filter(|c| !matches!(c, ' ' | '_' | '-') && !c.is_whitespace())
        .flat_map(char::to_lowercase)
        .collect()
}

/// Python's `str.title()` followed by replacing `_` with a space: how pydantic titles a field.
///
/// ```
/// use crewai_tools::field_title;
/// assert_eq!(field_title("first_number"), "First Number");
/// assert_eq!(field_title("query"), "Query");
/// ```
pub fn field_title(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut previous_is_letter = false;
    for c in field.chars() {
        if c.is_alphabetic() {
            if previous_is_letter {
                out.extend(c.to_lowercase());
            } else {
                out.extend(c.to_uppercase());
            }
            previous_is_letter = true;
        } else {
            out.push(if c == '_' { ' ' } else { c });
            previous_is_letter = false;
        }
    }
    out
}

/// The similarity ratio of Python's `difflib.SequenceMatcher` (Ratcliff/Obershelp): twice the
/// number of matching characters divided by the total length, in `0.0..=1.0`.
pub fn similarity_ratio(a: &str, b: &str) -> f64 {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let total = a.len() + b.len();
    if total == 0 {
        return 1.0;
    }
    2.0 * matching_characters(&a, &b) as f64 / total as f64
}

fn matching_characters(a: &[char], b: &[char]) -> usize {
    let (start_a, start_b, len) = longest_common_block(a, b);
    if len == 0 {
        return 0;
    }
    len + matching_characters(&a[..start_a], &b[..start_b])
        + matching_characters(&a[start_a + len..], &b[start_b + len..])
}

/// The longest common contiguous block, earliest in `a` (then in `b`) on ties, as difflib picks.
fn longest_common_block(a: &[char], b: &[char]) -> (usize, usize, usize) {
    let mut best = (0, 0, 0);
    let mut previous = vec![0usize; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        let mut current = vec![0usize; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            if ca == cb {
                let run = previous[j] + 1;
                current[j + 1] = run;
                if run > best.2 {
                    best = (i + 1 - run, j + 1 - run, run);
                }
            }
        }
        previous = current;
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitises_like_crewai() {
        for (name, sanitised) in [
            ("Delegate work to coworker", "delegate_work_to_coworker"),
            ("Ask question to coworker", "ask_question_to_coworker"),
            ("dummy_tool", "dummy_tool"),
            ("myTool", "my_tool"),
            ("HTTPServerTool", "http_server_tool"),
            ("  --Hello,   World!!--  ", "hello_world"),
            ("it's \"quoted\"", "its_quoted"),
            ("naïve résumé", "naive_resume"),
            ("a__b", "a_b"),
            ("工具", ""),
        ] {
            assert_eq!(sanitize_tool_name(name), sanitised, "{name}");
        }
    }

    #[test]
    fn long_names_are_truncated_with_a_hash() {
        let long = "word ".repeat(30);
        let name = sanitize_tool_name(&long);
        assert_eq!(name.len(), MAX_TOOL_NAME_LEN);
        let (head, hash) = name.split_at(MAX_TOOL_NAME_LEN - 9);
        assert!(head.starts_with("word_word_"));
        assert_eq!(&hash[..1], "_");
        assert!(hash[1..].chars().all(|c| c.is_ascii_hexdigit()));
        let other = sanitize_tool_name(&format!("{long} different"));
        assert_ne!(name, other, "distinct long names stay distinct");
        let exactly_64 = "a".repeat(64);
        assert_eq!(sanitize_tool_name(&exactly_64), exactly_64);
    }

    #[test]
    fn titles_fields_like_pydantic() {
        for (field, title) in [
            ("first_number", "First Number"),
            ("a", "A"),
            ("file_path2x", "File Path2X"),
            ("URL", "Url"),
        ] {
            assert_eq!(field_title(field), title);
        }
    }

    #[test]
    fn ratio_matches_difflib() {
        assert_eq!(similarity_ratio("abcd", "abcd"), 1.0);
        assert_eq!(similarity_ratio("", ""), 1.0);
        assert_eq!(similarity_ratio("abc", "xyz"), 0.0);
        // difflib.SequenceMatcher(None, "multiplier", "multiplyer").ratio() == 0.9
        assert!((similarity_ratio("multiplier", "multiplyer") - 0.9).abs() < 1e-9);
        // difflib.SequenceMatcher(None, "search_web", "web_search").ratio() == 0.6
        assert!((similarity_ratio("search_web", "web_search") - 0.6).abs() < 1e-9);
    }

    #[test]
    fn loose_key_ignores_case_and_separators() {
        assert_eq!(loose_key("Web-Search Tool_x"), "websearchtoolx");
    }
}
