//! [`setters!`](crate::setters): the builder methods that take the builder by value, change it
//! and hand it back, written once for every crewai crate (they are all alike, and writing each
//! out made them the largest group of near-duplicates in the workspace).
//!
//! An entry is the method's doc comment and signature without `mut self` and `-> Self`, then
//! what it does. The first form assigns a field (a path such as `config.model` reaches into a
//! nested struct); the second (which may take several arguments) runs an expression on the
//! builder, named by the closure-like `|b|`:
//!
//! ```
//! # #[derive(Default)] struct Options { timeout: Option<f64>, tags: Vec<String> }
//! impl Options {
//!     crewai_llm::setters! {
//!         /// Gives up after this many seconds.
//!         pub fn with_timeout(seconds: f64) => timeout = Some(seconds);
//!         /// Adds one tag.
//!         pub fn tag(tag: impl Into<String>) => |b| b.tags.push(tag.into());
//!     }
//! }
//! let options = Options::default().with_timeout(2.5).tag("a");
//! assert_eq!((options.timeout, options.tags), (Some(2.5), vec!["a".to_string()]));
//! ```
//!
//! Each becomes a method such as `pub fn with_timeout(mut self, seconds: f64) -> Self` that
//! keeps its doc comment, so rustdoc shows it as if written out by hand. Setters that do more
//! than change the builder are written out.

/// See the [module documentation](crate::setters). Not a public API: it serves the builders of
/// the crewai crates.
#[doc(hidden)]
#[macro_export]
macro_rules! setters {
    () => {};
    (
        $(#[$meta:meta])*
        $vis:vis fn $name:ident($($arg:ident: $arg_ty:ty),+ $(,)?) => |$builder:ident| $body:expr;
        $($rest:tt)*
    ) => {
        $(#[$meta])*
        $vis fn $name(mut self, $($arg: $arg_ty),+) -> Self {
            let $builder = &mut self;
            $body;
            self
        }
        $crate::setters! { $($rest)* }
    };
    (
        $(#[$meta:meta])*
        $vis:vis fn $name:ident($arg:ident: $arg_ty:ty) => $($field:ident).+ = $value:expr;
        $($rest:tt)*
    ) => {
        $(#[$meta])*
        $vis fn $name(mut self, $arg: $arg_ty) -> Self {
            self.$($field).+ = $value;
            self
        }
        $crate::setters! { $($rest)* }
    };
}
