//! `#[flow]`: an impl block of async methods as a crewai flow definition.
//!
//! The methods keep their code; their attributes say how they are triggered:
//! - `#[start]` (run at kickoff) or `#[start(trigger)]` (a conditional start);
//! - `#[listen(trigger)]`;
//! - `#[router(trigger, emits = [label, ...])]`;
//! - `#[persist]` (save the state after this method);
//! - `#[human_feedback(message = "...", emit = [label, ...], default = "label")]`.
//!
//! A trigger is a method name or label (`fetch`, `"needs review"`), or `or(..)` / `and(..)` of
//! triggers. Methods are `async fn name(&self, ctx: FlowContext<State>) -> MethodResult<T>` (the
//! context parameter may be left out; `&self` too). The macro adds `flow_builder(self)` (a
//! `FlowBuilder` with every method, in declaration order, for more settings) and `into_flow(self)`.
//!
//! Options: `#[flow(state = Type, name = "...", persist, crate = "path")]`; `state` defaults to the
//! unstructured JSON map, `name` to the type's name, `crate` to `::crewai_flow`.

use proc_macro2::TokenStream as TokenStream2;
use quote::quote;
use syn::parse::{Parse, ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Attribute, Expr, FnArg, ImplItem, ImplItemFn, ItemImpl, Lit, LitStr, Token, Type};

struct FlowOptions {
    state: Option<Type>,
    name: Option<LitStr>,
    persist: bool,
    krate: syn::Path,
}

impl FlowOptions {
    fn parse(attr: TokenStream2, default_crate: &str) -> syn::Result<FlowOptions> {
        let krate = syn::parse_str(default_crate)?;
        let mut options = FlowOptions {
            krate,
            state: None,
            name: None,
            persist: false,
        };
        let parser = |input: ParseStream<'_>| -> syn::Result<()> {
            while !input.is_empty() {
                let key: syn::Ident = if input.peek(Token![crate]) {
                    let token: Token![crate] = input.parse()?;
                    syn::Ident::new("crate", token.span)
                } else {
                    input.parse()?
                };
                match key.to_string().as_str() {
                    "persist" => options.persist = true,
                    "state" => {
                        input.parse::<Token![=]>()?;
                        options.state = Some(input.parse()?);
                    }
                    "name" => {
                        input.parse::<Token![=]>()?;
                        options.name = Some(input.parse()?);
                    }
                    "crate" => {
                        input.parse::<Token![=]>()?;
                        let path: LitStr = input.parse()?;
                        options.krate = path.parse()?;
                    }
                    other => {
                        return Err(syn::Error::new(
                            key.span(),
                            format!(
                                "unknown #[flow] option `{other}`; expected `state = Type`, `name = \"...\"`, `persist` or `crate = \"path\"`"
                            ),
                        ));
                    }
                }
                if !input.is_empty() {
                    input.parse::<Token![,]>()?;
                }
            }
            Ok(())
        };
        parser.parse2(attr)?;
        Ok(options)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Start,
    Listen,
    Router,
}

struct Feedback {
    message: LitStr,
    emit: Vec<String>,
    default: Option<LitStr>,
}

struct Method {
    ident: syn::Ident,
    kind: Kind,
    trigger: Option<Expr>,
    emits: Vec<String>,
    persist: bool,
    feedback: Option<Feedback>,
    has_receiver: bool,
    takes_context: bool,
}

/// Arguments of `#[listen(..)]` / `#[router(..)]` / `#[human_feedback(..)]`: comma-separated expressions.
struct ExprList(Vec<Expr>);

impl Parse for ExprList {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        Ok(ExprList(
            Punctuated::<Expr, Token![,]>::parse_terminated(input)?
                .into_iter()
                .collect(),
        ))
    }
}

fn name_of(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Path(path) => path.path.get_ident().map(|i| i.to_string()),
        Expr::Lit(syn::ExprLit {
            lit: Lit::Str(text),
            ..
        }) => Some(text.value()),
        _ => None,
    }
}

fn labels(expr: &Expr, what: &str) -> syn::Result<Vec<String>> {
    let Expr::Array(array) = expr else {
        return Err(syn::Error::new(
            expr.span(),
            format!("`{what}` takes a list of labels: `{what} = [approved, rejected]`"),
        ));
    };
    array
        .elems
        .iter()
        .map(|e| {
            name_of(e)
                .ok_or_else(|| syn::Error::new(e.span(), "a label is a name or a string literal"))
        })
        .collect()
}

fn assignment(expr: &Expr) -> syn::Result<(String, &Expr)> {
    match expr {
        Expr::Assign(assign) => match &*assign.left {
            Expr::Path(path) if path.path.get_ident().is_some() => Ok((
                path.path
                    .get_ident()
                    .map(|i| i.to_string())
                    .unwrap_or_default(),
                &assign.right,
            )),
            other => Err(syn::Error::new(other.span(), "expected `name = value`")),
        },
        other => Err(syn::Error::new(other.span(), "expected `name = value`")),
    }
}

fn string(expr: &Expr, what: &str) -> syn::Result<LitStr> {
    match expr {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Str(text),
            ..
        }) => Ok(text.clone()),
        other => Err(syn::Error::new(
            other.span(),
            format!("`{what}` takes a string literal"),
        )),
    }
}

/// Validates a trigger expression and turns it into code building a `Trigger`.
fn trigger_code(expr: &Expr, krate: &syn::Path) -> syn::Result<TokenStream2> {
    if let Some(name) = name_of(expr) {
        return Ok(quote!(#krate::on(#name)));
    }
    if let Expr::Call(call) = expr
        && let Expr::Path(function) = &*call.func
        && let Some(combinator) = function.path.get_ident().map(|i| i.to_string())
        && (combinator == "or" || combinator == "and")
    {
        if call.args.is_empty() {
            return Err(syn::Error::new(
                call.span(),
                format!("`{combinator}()` needs at least one trigger"),
            ));
        }
        let parts = call
            .args
            .iter()
            .map(|part| trigger_code(part, krate))
            .collect::<syn::Result<Vec<_>>>()?;
        let combinator = syn::Ident::new(&combinator, function.span());
        return Ok(quote!(#krate::#combinator([#(#parts),*])));
    }
    Err(syn::Error::new(
        expr.span(),
        "a trigger is a method name, a label (\"text\"), `or(..)` or `and(..)`",
    ))
}

fn is_flow_attribute(attr: &Attribute) -> bool {
    ["start", "listen", "router", "persist", "human_feedback"]
        .iter()
        .any(|name| attr.path().is_ident(name))
}

fn parse_method(function: &ImplItemFn) -> syn::Result<Option<Method>> {
    let mut kind = None;
    let mut trigger = None;
    let mut emits = Vec::new();
    let mut persist = false;
    let mut feedback = None;
    for attr in function.attrs.iter().filter(|a| is_flow_attribute(a)) {
        let name = attr
            .path()
            .get_ident()
            .map(|i| i.to_string())
            .unwrap_or_default();
        let arguments = match &attr.meta {
            syn::Meta::Path(_) => Vec::new(),
            syn::Meta::List(list) => syn::parse2::<ExprList>(list.tokens.clone())?.0,
            syn::Meta::NameValue(nv) => {
                return Err(syn::Error::new(nv.span(), format!("write `#[{name}(..)]`")));
            }
        };
        let mut set_kind = |new: Kind| {
            if kind.replace(new).is_some() {
                return Err(syn::Error::new(
                    attr.span(),
                    "a method has one of #[start], #[listen] or #[router]",
                ));
            }
            Ok(())
        };
        match name.as_str() {
            "start" => {
                set_kind(Kind::Start)?;
                match arguments.as_slice() {
                    [] => {}
                    [condition] => trigger = Some(condition.clone()),
                    _ => {
                        return Err(syn::Error::new(
                            attr.span(),
                            "#[start] takes at most one trigger; combine several with or(..)",
                        ));
                    }
                }
            }
            "listen" => {
                set_kind(Kind::Listen)?;
                let [condition] = arguments.as_slice() else {
                    return Err(syn::Error::new(
                        attr.span(),
                        "#[listen] takes one trigger: #[listen(method)], #[listen(or(a, b))]",
                    ));
                };
                trigger = Some(condition.clone());
            }
            "router" => {
                set_kind(Kind::Router)?;
                let Some((condition, rest)) = arguments.split_first() else {
                    return Err(syn::Error::new(
                        attr.span(),
                        "#[router] takes a trigger and its labels: #[router(method, emits = [a, b])]",
                    ));
                };
                trigger = Some(condition.clone());
                for option in rest {
                    match assignment(option)? {
                        (key, value) if key == "emits" || key == "emit" => {
                            emits = labels(value, &key)?
                        }
                        (key, _) => {
                            return Err(syn::Error::new(
                                option.span(),
                                format!(
                                    "unknown #[router] option `{key}`; expected `emits = [..]`"
                                ),
                            ));
                        }
                    }
                }
                if emits.is_empty() {
                    return Err(syn::Error::new(
                        attr.span(),
                        "a router declares the labels it may return: #[router(method, emits = [a, b])]",
                    ));
                }
            }
            "persist" => {
                if !arguments.is_empty() {
                    return Err(syn::Error::new(
                        attr.span(),
                        "#[persist] takes no arguments on a method",
                    ));
                }
                persist = true;
            }
            _ => {
                let mut message = None;
                let mut emit = Vec::new();
                let mut default = None;
                for option in &arguments {
                    match assignment(option)? {
                        (key, value) if key == "message" => {
                            message = Some(string(value, "message")?)
                        }
                        (key, value) if key == "emit" || key == "emits" => {
                            emit = labels(value, &key)?
                        }
                        (key, value) if key == "default" || key == "default_outcome" => {
                            default = Some(string(value, &key)?)
                        }
                        (key, _) => {
                            return Err(syn::Error::new(
                                option.span(),
                                format!(
                                    "unknown #[human_feedback] option `{key}`; expected message, emit, default"
                                ),
                            ));
                        }
                    }
                }
                let message = message.ok_or_else(|| {
                    syn::Error::new(attr.span(), "#[human_feedback] needs `message = \"...\"`")
                })?;
                feedback = Some(Feedback {
                    message,
                    emit,
                    default,
                });
            }
        }
    }
    let Some(kind) = kind else {
        if persist || feedback.is_some() {
            return Err(syn::Error::new(
                function.sig.span(),
                "#[persist] and #[human_feedback] go with #[start], #[listen] or #[router]",
            ));
        }
        return Ok(None);
    };
    if function.sig.asyncness.is_none() {
        return Err(syn::Error::new(
            function.sig.fn_token.span(),
            "flow methods are `async fn`",
        ));
    }
    let mut has_receiver = false;
    let mut typed = 0;
    for input in &function.sig.inputs {
        match input {
            FnArg::Receiver(receiver) => {
                if receiver.reference.is_none() || receiver.mutability.is_some() {
                    return Err(syn::Error::new(
                        receiver.span(),
                        "flow methods take `&self` (methods may run concurrently)",
                    ));
                }
                has_receiver = true;
            }
            FnArg::Typed(_) => typed += 1,
        }
    }
    if typed > 1 {
        return Err(syn::Error::new(
            function.sig.inputs.span(),
            "a flow method takes at most one parameter, its `FlowContext`",
        ));
    }
    Ok(Some(Method {
        ident: function.sig.ident.clone(),
        kind,
        trigger,
        emits,
        persist,
        feedback,
        has_receiver,
        takes_context: typed == 1,
    }))
}

pub(crate) fn expand_flow(
    attr: TokenStream2,
    item: TokenStream2,
    default_crate: &str,
) -> syn::Result<TokenStream2> {
    let options = FlowOptions::parse(attr, default_crate)?;
    let mut block: ItemImpl = syn::parse2(item)?;
    if !block.generics.params.is_empty() {
        return Err(syn::Error::new(
            block.generics.span(),
            "#[flow] works on the impl of a non-generic type",
        ));
    }
    if let Some((_, path, _)) = &block.trait_ {
        return Err(syn::Error::new(
            path.span(),
            "#[flow] goes on an inherent impl block, not a trait impl",
        ));
    }
    let mut methods = Vec::new();
    for item in &mut block.items {
        if let ImplItem::Fn(function) = item {
            if let Some(method) = parse_method(function)? {
                methods.push(method);
            }
            function.attrs.retain(|a| !is_flow_attribute(a));
        }
    }
    if !methods
        .iter()
        .any(|m| m.kind == Kind::Start && m.trigger.is_none())
    {
        return Err(syn::Error::new(
            block.self_ty.span(),
            "a flow needs at least one #[start] method",
        ));
    }

    let krate = &options.krate;
    let self_ty = &block.self_ty;
    let state = options
        .state
        .as_ref()
        .map(|s| quote!(#s))
        .unwrap_or_else(|| quote!(#krate::UnstructuredState));
    let name = match &options.name {
        Some(name) => quote!(#name),
        None => {
            let shown = quote!(#self_ty).to_string().replace(' ', "");
            quote!(#shown)
        }
    };
    let mut steps = Vec::new();
    for method in &methods {
        let ident = &method.ident;
        let method_name = ident.to_string();
        let (parameter, argument) = if method.takes_context {
            (quote!(ctx), quote!(ctx))
        } else {
            (quote!(_ctx), quote!())
        };
        let function = if method.has_receiver {
            quote! {{
                let this = ::std::sync::Arc::clone(&this);
                move |#parameter: #krate::FlowContext<#state>| {
                    let this = ::std::sync::Arc::clone(&this);
                    async move { this.#ident(#argument).await }
                }
            }}
        } else {
            quote!(|#parameter: #krate::FlowContext<#state>| async move { <#self_ty>::#ident(#argument).await })
        };
        let trigger = method
            .trigger
            .as_ref()
            .map(|t| trigger_code(t, krate))
            .transpose()?;
        steps.push(match (method.kind, trigger) {
            (Kind::Start, None) => quote!(.start(#method_name, #function)),
            (Kind::Start, Some(trigger)) => quote!(.start_on(#method_name, #trigger, #function)),
            (Kind::Listen, Some(trigger)) => quote!(.listen(#method_name, #trigger, #function)),
            (Kind::Router, Some(trigger)) => {
                let emits = &method.emits;
                quote!(.router(#method_name, #trigger, #function).emits([#(#emits),*]))
            }
            (_, None) => return Err(syn::Error::new(ident.span(), "this method needs a trigger")),
        });
        if method.persist {
            steps.push(quote!(.persist_method()));
        }
        if let Some(feedback) = &method.feedback {
            let message = &feedback.message;
            let emit = &feedback.emit;
            let emit = (!emit.is_empty()).then(|| quote!(.emit([#(#emit),*])));
            let default = feedback
                .default
                .as_ref()
                .map(|d| quote!(.default_outcome(#d)));
            steps
                .push(quote!(.human_feedback(#krate::HumanFeedback::new(#message) #emit #default)));
        }
    }
    let persist = options.persist.then(|| quote!(.persist()));
    let keep_self = if methods.iter().any(|m| m.has_receiver) {
        quote!(let this = ::std::sync::Arc::new(self);)
    } else {
        quote!(let _unused_self = self;)
    };
    Ok(quote! {
        #block

        impl #self_ty {
            /// The flow definition of this type's `#[start]`, `#[listen]` and `#[router]` methods
            /// (generated by `#[flow]`), ready for more settings before `build()`.
            pub fn flow_builder(self) -> #krate::FlowBuilder<#state> {
                #keep_self
                #krate::FlowBuilder::<#state>::new().name(#name) #persist #(#steps)*
            }

            /// The built flow (generated by `#[flow]`).
            pub fn into_flow(self) -> ::std::result::Result<#krate::Flow<#state>, #krate::FlowBuildError> {
                self.flow_builder().build()
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_of(attr: TokenStream2, item: TokenStream2) -> String {
        crate::expansion_error(expand_flow(attr, item, "::crewai_flow"))
    }

    #[test]
    fn expands_methods_in_order_with_triggers() {
        let tokens = expand_flow(
            quote!(state = MyState),
            quote! {
                impl MyFlow {
                    #[start] async fn a(&self, ctx: FlowContext<MyState>) -> MethodResult { todo() }
                    #[router(or(a, "b c"), emits = [yes, "no way"])] async fn r(&self) -> MethodResult<&'static str> { todo() }
                }
            },
            "::crewai_flow",
        )
        .unwrap()
        .to_string();
        assert!(tokens.contains(". start (\"a\""), "{tokens}");
        assert!(tokens.contains(":: crewai_flow :: or ([:: crewai_flow :: on (\"a\") , :: crewai_flow :: on (\"b c\")])"), "{tokens}");
        assert!(
            tokens.contains(". emits ([\"yes\" , \"no way\"])"),
            "{tokens}"
        );
        assert!(
            !tokens.contains("# [start]"),
            "flow attributes are removed: {tokens}"
        );
    }

    #[test]
    fn rejects_what_cannot_run() {
        assert!(
            error_of(
                quote!(),
                quote!(impl F { #[listen(a)] async fn b(&self) {} })
            )
            .contains("at least one #[start]")
        );
        assert!(
            error_of(quote!(), quote!(impl F { #[start] fn a(&self) {} })).contains("async fn")
        );
        assert!(
            error_of(
                quote!(),
                quote!(impl F { #[start] async fn a(&mut self) {} })
            )
            .contains("&self")
        );
        assert!(
            error_of(
                quote!(),
                quote!(impl F { #[start] async fn a(&self) {} #[router(a)] async fn r(&self) {} })
            )
            .contains("declares the labels")
        );
        assert!(error_of(quote!(), quote!(impl F { #[start] async fn a(&self) {} #[listen(a + b)] async fn l(&self) {} })).contains("a trigger is"));
        assert!(
            error_of(
                quote!(),
                quote!(impl F { #[start] #[listen(a)] async fn a(&self) {} })
            )
            .contains("one of #[start]")
        );
        assert!(
            error_of(
                quote!(colour = 1),
                quote!(impl F { #[start] async fn a(&self) {} })
            )
            .contains("unknown #[flow] option `colour`")
        );
        assert!(
            error_of(
                quote!(),
                quote!(impl F { #[start] async fn a(&self, x: u32, y: u32) {} })
            )
            .contains("at most one parameter")
        );
        assert!(
            error_of(
                quote!(),
                quote!(impl F { #[start] #[human_feedback(emit = [a])] async fn a(&self) {} })
            )
            .contains("needs `message")
        );
    }
}
