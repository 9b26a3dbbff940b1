//! # crewai-macros
//!
//! `#[tool]`: turns a plain function into a crewai tool.
//!
//! ```
//! use crewai_tools::tool;
//!
//! /// Multiplies two integers.
//! ///
//! /// # Arguments
//! /// * `first_number` - The first factor.
//! /// * `second_number` - The second factor.
//! #[tool(name = "Multiplier", max_usage_count = 3)]
//! async fn multiply(first_number: i64, second_number: i64) -> Result<i64, String> {
//!     first_number.checked_mul(second_number).ok_or_else(|| "the product overflows".to_string())
//! }
//!
//! let handle = multiply_tool();
//! assert_eq!(handle.name(), "multiplier");
//! assert_eq!(handle.max_usage_count(), Some(3));
//! ```
//!
//! ## What it generates
//!
//! For `fn word_counter(..)`, next to the unchanged function:
//! - a unit struct `WordCounter` (the function name in CamelCase, same visibility) that implements
//!   `crewai_tools::Tool`;
//! - a function `word_counter_tool() -> crewai_tools::ToolHandle`.
//!
//! ## Rules
//! - **Description**: the doc comment up to a `# Arguments` heading; a function without a doc
//!   comment is a compile error (as in CrewAI, where `@tool` requires a docstring).
//! - **Argument descriptions**: the rustdoc convention, a list under `# Arguments` in the doc
//!   comment: `` * `text` - The text to count. `` (`-` or `:` after the name). A listed name that
//!   is not a parameter is a compile error.
//! - **Parameters**: owned types implementing `serde::Deserialize` and `schemars::JsonSchema`
//!   (`Option<T>` is an optional argument). One parameter may be `&ToolContext` (any path ending in
//!   `ToolContext`); it receives the calling context and is not part of the schema.
//! - **Return type**: anything `serde::Serialize` (strings are passed as text, other values as
//!   JSON), or `Result<T, E>` with `E: Display`, whose `Err` becomes `ToolError::Failed`.
//!   An `async fn` is awaited. A sync fn runs on tokio's blocking pool (so it may block, and a
//!   panic in it becomes a tool failure); its parameters and result must therefore be `Send`.
//! - **Options**: `name = "..."` (default: the function name), `result_as_answer = true`,
//!   `max_usage_count = N`, `crate = "path"` (the path to `crewai_tools`, default `::crewai_tools`).
//!   The facade crate re-exports [`crewai_tool`] as `crewai::tool`, which defaults the path to
//!   `::crewai::tools`.

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{format_ident, quote};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Expr, FnArg, Ident, ItemFn, Lit, Meta, Pat, ReturnType, Token, Type};

/// Turns a function into a tool; see the crate docs.
#[proc_macro_attribute]
pub fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand(attr.into(), item.into(), "::crewai_tools")
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// `#[tool]` for users of the `crewai` facade: the generated code refers to `::crewai::tools`.
#[proc_macro_attribute]
pub fn crewai_tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand(attr.into(), item.into(), "::crewai::tools")
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

mod flow;

/// `#[flow]` on an impl block: its `#[start]`, `#[listen(..)]` and `#[router(..)]` async methods
/// become a crewai flow definition (`flow_builder(self)` / `into_flow(self)`); see `src/flow.rs`
/// for the attribute syntax. Re-exported as `crewai_flow::flow`.
#[proc_macro_attribute]
pub fn flow(attr: TokenStream, item: TokenStream) -> TokenStream {
    flow::expand_flow(attr.into(), item.into(), "::crewai_flow")
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

struct Options {
    name: Option<String>,
    result_as_answer: bool,
    max_usage_count: Option<u32>,
    crate_path: syn::Path,
}

fn parse_options(attr: TokenStream2, default_crate: &str) -> syn::Result<Options> {
    let mut options = Options {
        name: None,
        result_as_answer: false,
        max_usage_count: None,
        crate_path: syn::parse_str(default_crate)?,
    };
    let metas = Punctuated::<Meta, Token![,]>::parse_terminated.parse2(attr)?;
    for meta in metas {
        let Meta::NameValue(pair) = &meta else {
            return Err(syn::Error::new(
                meta.span(),
                "expected `key = value` (name, result_as_answer, max_usage_count, crate)",
            ));
        };
        let key = pair
            .path
            .get_ident()
            .map(Ident::to_string)
            .unwrap_or_default();
        let Expr::Lit(literal) = &pair.value else {
            return Err(syn::Error::new(
                pair.value.span(),
                "expected a literal value",
            ));
        };
        match (key.as_str(), &literal.lit) {
            ("name", Lit::Str(name)) => {
                if name.value().trim().is_empty() {
                    return Err(syn::Error::new(
                        name.span(),
                        "the tool name must not be empty",
                    ));
                }
                options.name = Some(name.value());
            }
            ("result_as_answer", Lit::Bool(flag)) => options.result_as_answer = flag.value,
            ("max_usage_count", Lit::Int(count)) => {
                let count: u32 = count.base10_parse()?;
                if count == 0 {
                    return Err(syn::Error::new(
                        literal.span(),
                        "max_usage_count must be greater than 0",
                    ));
                }
                options.max_usage_count = Some(count);
            }
            ("crate", Lit::Str(path)) => options.crate_path = path.parse()?,
            ("name" | "crate", _) => {
                return Err(syn::Error::new(
                    literal.span(),
                    format!("`{key}` takes a string"),
                ));
            }
            ("result_as_answer", _) => {
                return Err(syn::Error::new(
                    literal.span(),
                    "`result_as_answer` takes true or false",
                ));
            }
            ("max_usage_count", _) => {
                return Err(syn::Error::new(
                    literal.span(),
                    "`max_usage_count` takes an integer",
                ));
            }
            _ => {
                return Err(syn::Error::new(
                    pair.path.span(),
                    format!(
                        "unknown #[tool] option `{key}`: use name, result_as_answer, max_usage_count or crate"
                    ),
                ));
            }
        }
    }
    Ok(options)
}

/// The doc comment split into the description and the `# Arguments` entries.
struct Docs {
    description: String,
    arguments: Vec<(String, String, Span)>,
}

fn parse_docs(function: &ItemFn) -> syn::Result<Docs> {
    let mut lines = Vec::new();
    let mut span = function.sig.ident.span();
    for attribute in &function.attrs {
        if !attribute.path().is_ident("doc") {
            continue;
        }
        if let Meta::NameValue(pair) = &attribute.meta
            && let Expr::Lit(syn::ExprLit {
                lit: Lit::Str(text),
                ..
            }) = &pair.value
        {
            span = text.span();
            let value = text.value();
            // `///` comments keep the space after the slashes.
            lines.extend(
                value
                    .lines()
                    .map(|line| line.strip_prefix(' ').unwrap_or(line).to_string()),
            );
        }
    }
    let mut description = Vec::new();
    let mut arguments: Vec<(String, String, Span)> = Vec::new();
    let mut in_arguments = false;
    for line in lines {
        let trimmed = line.trim();
        if let Some(heading) = trimmed.strip_prefix('#') {
            in_arguments = heading
                .trim_start_matches('#')
                .trim()
                .eq_ignore_ascii_case("arguments");
            if in_arguments {
                continue;
            }
        }
        if !in_arguments {
            description.push(line);
            continue;
        }
        if let Some(entry) = trimmed
            .strip_prefix("* ")
            .or_else(|| trimmed.strip_prefix("- "))
        {
            let (name, text) = parse_argument_entry(entry).ok_or_else(|| {
                syn::Error::new(
                    span,
                    format!(
                        "cannot read `# Arguments` entry `{trimmed}`: write * `name` - description"
                    ),
                )
            })?;
            arguments.push((name, text, span));
        } else if let Some(last) = arguments.last_mut().filter(|_| !trimmed.is_empty()) {
            // A wrapped continuation line of the previous entry.
            last.1.push(' ');
            last.1.push_str(trimmed);
        }
    }
    let description = description.join("\n").trim().to_string();
    if description.is_empty() {
        return Err(syn::Error::new(
            function.sig.ident.span(),
            "#[tool] needs a doc comment: it becomes the tool's description, which tells the model what the tool does",
        ));
    }
    Ok(Docs {
        description,
        arguments,
    })
}

/// `` `name` - text ``, `` `name`: text `` or `name - text`.
fn parse_argument_entry(entry: &str) -> Option<(String, String)> {
    let entry = entry.trim();
    let (name, rest) = match entry.strip_prefix('`') {
        Some(quoted) => {
            let end = quoted.find('`')?;
            (&quoted[..end], &quoted[end + 1..])
        }
        None => {
            let end = entry.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
            (&entry[..end], &entry[end..])
        }
    };
    let rest = rest.trim_start();
    let text = rest
        .strip_prefix('-')
        .or_else(|| rest.strip_prefix(':'))
        .or_else(|| rest.strip_prefix('—'))?;
    let name = name.trim();
    (!name.is_empty()).then(|| (name.to_string(), text.trim().to_string()))
}

enum Param {
    Arg { ident: Ident, ty: Box<Type> },
    Context,
}

fn is_context_type(ty: &Type) -> bool {
    let Type::Reference(reference) = ty else {
        return false;
    };
    let Type::Path(path) = reference.elem.as_ref() else {
        return false;
    };
    path.path
        .segments
        .last()
        .is_some_and(|segment| segment.ident == "ToolContext")
}

fn parse_params(function: &ItemFn) -> syn::Result<Vec<Param>> {
    let mut params = Vec::new();
    let mut has_context = false;
    for input in &function.sig.inputs {
        let FnArg::Typed(typed) = input else {
            return Err(syn::Error::new(
                input.span(),
                "#[tool] works on free functions, not methods",
            ));
        };
        if is_context_type(&typed.ty) {
            if has_context {
                return Err(syn::Error::new(
                    typed.span(),
                    "only one `&ToolContext` parameter is allowed",
                ));
            }
            has_context = true;
            params.push(Param::Context);
            continue;
        }
        let Pat::Ident(pattern) = typed.pat.as_ref() else {
            return Err(syn::Error::new(
                typed.pat.span(),
                "#[tool] parameters must be plain names: they become argument names",
            ));
        };
        if let Type::Reference(_) = typed.ty.as_ref() {
            return Err(syn::Error::new(
                typed.ty.span(),
                "#[tool] parameters must be owned types (String, not &str): they are deserialised from the model's JSON",
            ));
        }
        params.push(Param::Arg {
            ident: pattern.ident.clone(),
            ty: typed.ty.clone(),
        });
    }
    Ok(params)
}

/// Whether the return type is written as `Result<..>` (any path ending in `Result`).
fn returns_result(output: &ReturnType) -> bool {
    let ReturnType::Type(_, ty) = output else {
        return false;
    };
    let Type::Path(path) = ty.as_ref() else {
        return false;
    };
    path.path
        .segments
        .last()
        .is_some_and(|segment| segment.ident == "Result")
}

fn camel_case(snake: &str) -> String {
    heck::ToUpperCamelCase::to_upper_camel_case(snake)
}

fn expand(
    attr: TokenStream2,
    item: TokenStream2,
    default_crate: &str,
) -> syn::Result<TokenStream2> {
    let options = parse_options(attr, default_crate)?;
    let function: ItemFn = syn::parse2(item)?;
    if !function.sig.generics.params.is_empty() {
        return Err(syn::Error::new(
            function.sig.generics.span(),
            "#[tool] functions cannot be generic",
        ));
    }
    let docs = parse_docs(&function)?;
    let params = parse_params(&function)?;
    for (name, _, span) in &docs.arguments {
        let known = params
            .iter()
            .any(|param| matches!(param, Param::Arg { ident, .. } if ident == name));
        if !known {
            return Err(syn::Error::new(
                *span,
                format!(
                    "`# Arguments` describes `{name}`, which is not a parameter of this function"
                ),
            ));
        }
    }

    let krate = &options.crate_path;
    let private = quote!(#krate::__private);
    let fn_ident = &function.sig.ident;
    let fn_name = fn_ident.to_string();
    let visibility = &function.vis;
    let struct_ident = Ident::new(
        &camel_case(fn_name.trim_start_matches("r#")),
        fn_ident.span(),
    );
    let handle_fn = format_ident!("{}_tool", fn_ident);
    let tool_name = options
        .name
        .clone()
        .unwrap_or_else(|| fn_name.trim_start_matches("r#").to_string());
    let description = &docs.description;

    let fields = params.iter().filter_map(|param| match param {
        Param::Arg { ident, ty } => {
            let doc = docs
                .arguments
                .iter()
                .find(|(name, _, _)| ident == name)
                .map(|(_, text, _)| quote!(#[doc = #text]));
            Some(quote!(#doc #ident: #ty,))
        }
        Param::Context => None,
    });
    let call_args = params.iter().map(|param| match param {
        Param::Arg { ident, .. } => quote!(__args.#ident),
        Param::Context => quote!(__ctx),
    });
    let call = if function.sig.asyncness.is_some() {
        quote!(#fn_ident(#(#call_args),*).await)
    } else {
        // The blocking pool needs owned data, so the context is cloned when the function wants it.
        let takes_context = params.iter().any(|param| matches!(param, Param::Context));
        let (own_context, borrow_context) = if takes_context {
            (
                quote!(let __ctx = ::core::clone::Clone::clone(__ctx);),
                quote!(let __ctx = &__ctx;),
            )
        } else {
            (quote!(), quote!())
        };
        quote! {{
            #own_context
            #private::run_blocking(#tool_name, move || {
                #borrow_context
                #fn_ident(#(#call_args),*)
            })
            .await?
        }}
    };
    let convert = if returns_result(&function.sig.output) {
        quote! {
            match #call {
                ::core::result::Result::Ok(__value) => #private::serialize_output(&__value),
                ::core::result::Result::Err(__error) => ::core::result::Result::Err(#krate::ToolError::Failed(__error.to_string())),
            }
        }
    } else {
        quote!(#private::serialize_output(&#call))
    };
    let result_as_answer = options.result_as_answer;
    let max_usage_count = match options.max_usage_count {
        Some(count) => quote!(::core::option::Option::Some(#count)),
        None => quote!(::core::option::Option::None),
    };
    let struct_doc = format!("The `{tool_name}` tool, generated by `#[tool]` from [`{fn_name}`].");
    let handle_doc = format!("The `{tool_name}` tool as a handle for an agent.");
    let args_ident = format_ident!("__{}Args", struct_ident);
    // serde and schemars take their crate paths as strings.
    let private_serde_str = format!("{private}::serde");
    let private_schemars_str = format!("{private}::schemars");

    Ok(quote! {
        #function

        #[doc = #struct_doc]
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        #visibility struct #struct_ident;

        const _: () = {
            #[derive(#private::serde::Deserialize, #private::schemars::JsonSchema)]
            #[serde(crate = #private_serde_str)]
            #[schemars(crate = #private_schemars_str)]
            struct #args_ident {
                #(#fields)*
            }

            #[#private::async_trait]
            impl #krate::Tool for #struct_ident {
                fn name(&self) -> &str {
                    #tool_name
                }

                fn description(&self) -> &str {
                    #description
                }

                fn parameters(&self) -> #private::serde_json::Value {
                    #krate::schema_for::<#args_ident>()
                }

                async fn run(
                    &self,
                    __raw: #private::serde_json::Value,
                    __ctx: &#krate::ToolContext,
                ) -> ::core::result::Result<#krate::ToolOutput, #krate::ToolError> {
                    let __args: #args_ident = #private::parse_typed_arguments(#tool_name, __raw)?;
                    #convert
                }

                fn result_as_answer(&self) -> bool {
                    #result_as_answer
                }

                fn max_usage_count(&self) -> ::core::option::Option<u32> {
                    #max_usage_count
                }
            }
        };

        #[doc = #handle_doc]
        #visibility fn #handle_fn() -> #krate::ToolHandle {
            #krate::ToolHandle::new(::std::sync::Arc::new(#struct_ident))
        }
    })
}

/// The message of an expansion that must fail (for the tests of both macros).
#[cfg(test)]
fn expansion_error(expansion: syn::Result<TokenStream2>) -> String {
    match expansion {
        Ok(tokens) => panic!("expected an error, got {tokens}"),
        Err(error) => error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_of(attr: TokenStream2, item: TokenStream2) -> String {
        expansion_error(expand(attr, item, "::crewai_tools"))
    }

    #[test]
    fn a_doc_comment_is_required() {
        let message = error_of(
            quote!(),
            quote!(
                fn undocumented(text: String) -> String {
                    text
                }
            ),
        );
        assert!(message.contains("needs a doc comment"), "{message}");
        let only_arguments = quote! {
            /// # Arguments
            /// * `text` - The text.
            fn undocumented(text: String) -> String { text }
        };
        assert!(error_of(quote!(), only_arguments).contains("needs a doc comment"));
    }

    #[test]
    fn bad_options_are_rejected() {
        let item = quote! {
            /// Does things.
            fn thing() -> String { String::new() }
        };
        assert!(
            error_of(quote!(colour = "red"), item.clone())
                .contains("unknown #[tool] option `colour`")
        );
        assert!(error_of(quote!(max_usage_count = 0), item.clone()).contains("greater than 0"));
        assert!(error_of(quote!(result_as_answer = "yes"), item.clone()).contains("true or false"));
        assert!(error_of(quote!(name = ""), item.clone()).contains("must not be empty"));
        assert!(error_of(quote!(verbose), item).contains("key = value"));
    }

    #[test]
    fn unsupported_signatures_are_rejected() {
        let borrowed = quote! {
            /// Borrows.
            fn borrowed(text: &str) -> usize { text.len() }
        };
        assert!(error_of(quote!(), borrowed).contains("owned types"));
        let generic = quote! {
            /// Generic.
            fn generic<T>(value: T) -> usize { 0 }
        };
        assert!(error_of(quote!(), generic).contains("cannot be generic"));
        let method = quote! {
            /// A method.
            fn method(&self) -> usize { 0 }
        };
        assert!(error_of(quote!(), method).contains("free functions"));
        let pattern = quote! {
            /// Destructures.
            fn pattern((a, b): (u8, u8)) -> u8 { a + b }
        };
        assert!(error_of(quote!(), pattern).contains("plain names"));
    }

    #[test]
    fn argument_docs_must_name_parameters() {
        let item = quote! {
            /// Does things.
            ///
            /// # Arguments
            /// * `missing` - Not a parameter.
            fn thing(text: String) -> String { text }
        };
        assert!(error_of(quote!(), item).contains("`missing`, which is not a parameter"));
    }

    #[test]
    fn argument_entries_are_parsed() {
        assert_eq!(
            parse_argument_entry("`text` - The text."),
            Some(("text".into(), "The text.".into()))
        );
        assert_eq!(
            parse_argument_entry("`text`: The text."),
            Some(("text".into(), "The text.".into()))
        );
        assert_eq!(
            parse_argument_entry("text - The text."),
            Some(("text".into(), "The text.".into()))
        );
        assert_eq!(parse_argument_entry("no separator"), None);
    }

    #[test]
    fn struct_names_are_camel_case() {
        assert_eq!(camel_case("word_counter"), "WordCounter");
        assert_eq!(camel_case("get__final_answer_"), "GetFinalAnswer");
        assert_eq!(camel_case("x"), "X");
    }
}
