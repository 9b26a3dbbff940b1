//! [`static_regexes!`], for the patterns compiled once. (Builder setters come from
//! `crewai_llm::setters!`, shared by every crewai crate.)

/// Declares `static` regular expressions, each compiled on first use from a pattern the crate
/// writes itself (so a pattern that does not compile is a bug caught by the tests):
///
/// ```ignore
/// static_regexes! {
///     /// Any run of whitespace.
///     WHITESPACE = r"\s+";
/// }
/// ```
///
/// is `static WHITESPACE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\s+").expect(...));`.
macro_rules! static_regexes {
    ($($(#[$doc:meta])* $name:ident = $pattern:expr;)*) => {
        $(
            $(#[$doc])*
            static $name: ::std::sync::LazyLock<::regex::Regex> = ::std::sync::LazyLock::new(|| {
                ::regex::Regex::new($pattern).expect("a pattern written in the crate compiles")
            });
        )*
    };
}

pub(crate) use static_regexes;
