//! Typed migrations: `#[migrate(from = 1, step = "confirm")] fn f(old: Old) -> Result<New, E>` on a
//! plain function of a `#[flow_skill]` impl block maps the payload a task carried into step
//! `confirm` under version 1 to the payload `confirm` takes in this version. Read here (the
//! attribute removed from the item), checked against the steps (the step exists and takes a
//! payload; one migration per version and step; the function's shape), and expanded into the
//! skill's `FlowSkill::migrate`. The compiler checks the rest: the input type deserializes, and the
//! output is the step's payload type (errors at the user's types).

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, ImplItem, ItemImpl, Lit, LitStr, Token};

use crate::ast::{push, Skill};
use crate::rewrite::variant;

/// One `#[migrate(..)]` function.
pub struct Migration {
    /// The version it migrates from, as text.
    pub from: LitStr,
    /// The step of this version the task rests before.
    pub step: LitStr,
    /// The function.
    pub ident: syn::Ident,
    /// Its return type (where a wrong output type is reported).
    pub output: Span,
    /// Its parameter's type (where an input that does not deserialize is reported).
    pub input: syn::Type,
}

fn is_migrate_attr(attr: &syn::Attribute) -> bool {
    attr.path().is_ident("migrate")
}

// Input: the impl block. Output: its `#[migrate]` functions (the attributes removed), and the
// errors of those that are not written as a migration must be.
pub fn collect(item: &mut ItemImpl, errors: &mut Option<syn::Error>) -> Vec<Migration> {
    let mut out = Vec::new();
    for impl_item in &mut item.items {
        let ImplItem::Fn(method) = impl_item else {
            continue;
        };
        let Some(pos) = method.attrs.iter().position(is_migrate_attr) else {
            continue;
        };
        let attr = method.attrs.remove(pos);
        match parse(&attr, &method.sig) {
            Ok(m) => out.push(m),
            Err(e) => push(errors, e),
        }
    }
    out
}

fn parse(attr: &syn::Attribute, sig: &syn::Signature) -> syn::Result<Migration> {
    let mut from = None;
    let mut step = None;
    let args = attr.parse_args_with(
        syn::punctuated::Punctuated::<syn::MetaNameValue, Token![,]>::parse_terminated,
    )?;
    for arg in args {
        let key = arg.path.get_ident().map(ToString::to_string);
        match (key.as_deref(), &arg.value) {
            (
                Some("from"),
                Expr::Lit(ExprLit {
                    lit: Lit::Int(n), ..
                }),
            ) => from = Some(LitStr::new(n.base10_digits(), n.span())),
            (
                Some("from"),
                Expr::Lit(ExprLit {
                    lit: Lit::Str(s), ..
                }),
            ) => from = Some(s.clone()),
            (
                Some("step"),
                Expr::Lit(ExprLit {
                    lit: Lit::Str(s), ..
                }),
            ) => step = Some(s.clone()),
            (Some("from"), other) => {
                return Err(syn::Error::new_spanned(
                    other,
                    "expected the version migrated from: `from = 1` or `from = \"2024-06\"`",
                ))
            }
            (Some("step"), other) => {
                return Err(syn::Error::new_spanned(
                    other,
                    "expected the step's name as a string: `step = \"confirm\"`",
                ))
            }
            _ => {
                return Err(syn::Error::new_spanned(
                    &arg.path,
                    "unknown argument; #[migrate] takes `from` (the old version) and `step` (the step the task rests before)",
                ))
            }
        }
    }
    let (Some(from), Some(step)) = (from, step) else {
        return Err(syn::Error::new_spanned(
            attr,
            "write #[migrate(from = 1, step = \"confirm\")]: the version migrated from and the step the task rests before",
        ));
    };
    let shape = "a migration is a plain function of the old payload: `fn from_v1(old: OldPayload) -> Result<NewPayload, String>`";
    if let Some(a) = &sig.asyncness {
        return Err(syn::Error::new_spanned(
            a,
            format!("a migration is not async; {shape}"),
        ));
    }
    let inputs: Vec<_> = sig.inputs.iter().collect();
    let input = match inputs.as_slice() {
        [syn::FnArg::Typed(t)] => (*t.ty).clone(),
        [syn::FnArg::Receiver(r), ..] => {
            return Err(syn::Error::new_spanned(
                r,
                format!("a migration takes no `self`; {shape}"),
            ))
        }
        _ => {
            return Err(syn::Error::new(
                sig.paren_token.span.join(),
                format!("a migration takes exactly one parameter; {shape}"),
            ))
        }
    };
    let syn::ReturnType::Type(_, output) = &sig.output else {
        return Err(syn::Error::new_spanned(
            &sig.ident,
            format!("a migration returns a `Result`; {shape}"),
        ));
    };
    Ok(Migration {
        from,
        step,
        ident: sig.ident.clone(),
        output: output.span(),
        input,
    })
}

// Input: the migrations and the skill. Output: errors for a step that does not exist or takes
// nothing a task carries, and for two migrations of one version and step.
pub fn check(migrations: &[Migration], skill: &Skill, errors: &mut Option<syn::Error>) {
    for (i, m) in migrations.iter().enumerate() {
        let name = m.step.value();
        match skill.step(&name) {
            None => {
                let steps: Vec<String> = skill.steps.iter().map(|s| format!("`{}`", s.name)).collect();
                push(
                    errors,
                    syn::Error::new_spanned(
                        &m.step,
                        format!(
                            "no step `{name}` in this skill; a migration maps the payload a task carries into one of its steps: {}",
                            steps.join(", ")
                        ),
                    ),
                );
            }
            Some(step) if step.is_start() && step.attrs.resume_from.is_none() => push(
                errors,
                syn::Error::new_spanned(
                    &m.step,
                    format!("`{name}` is the start step: a task never rests before it carrying a payload; migrate the step it waits before"),
                ),
            ),
            Some(_) => {}
        }
        if migrations[..i]
            .iter()
            .any(|o| o.from.value() == m.from.value() && o.step.value() == name)
        {
            push(
                errors,
                syn::Error::new_spanned(
                    &m.step,
                    format!(
                        "a second migration from version {} into step `{name}`; keep one",
                        m.from.value()
                    ),
                ),
            );
        }
    }
}

// Input: the migrations, each step's payload type, the state enum's path and the radkit path.
// Output: `fn migrate` of `impl FlowSkill` (nothing without migrations: the trait's default).
pub fn expand(
    migrations: &[Migration],
    payloads: &[(String, TokenStream)],
    state: &syn::Ident,
    krate: &TokenStream,
) -> TokenStream {
    if migrations.is_empty() {
        return TokenStream::new();
    }
    let from = syn::Ident::new("__radkit_from", Span::mixed_site());
    let step = syn::Ident::new("__radkit_step", Span::mixed_site());
    let payload = syn::Ident::new("__radkit_payload", Span::mixed_site());
    let arms = migrations.iter().map(|m| {
        let (version, name, ident, input) = (&m.from, &m.step, &m.ident, &m.input);
        let v = variant(&name.value());
        let payload_ty = payloads
            .iter()
            .find(|(step, _)| *step == name.value())
            .map(|(_, ty)| ty.clone())
            .unwrap_or_else(|| quote!(()));
        // Spanned at the user's types: an input that does not deserialize is reported at the
        // parameter, an output that is not the step's payload at the return type.
        let decode = quote_spanned!(input.span()=>
            <#input as #krate::flow::rules::MigrationInput>::DECODE
        );
        let migration = quote_spanned!(m.output=> Self::#ident);
        quote! {
            (#version, #name) => ::core::option::Option::Some(
                #krate::flow::rules::migrate::<_, #payload_ty, _>(
                    #version, #name, #payload, #decode, #migration,
                )
                .map(#state::#v)
            ),
        }
    });
    quote! {
        fn migrate(
            &self,
            #from: &str,
            #step: &str,
            #payload: #krate::__private::MigrationPayload,
        ) -> ::core::option::Option<::core::result::Result<#state, ::std::string::String>> {
            match (#from, #step) {
                #(#arms)*
                _ => ::core::option::Option::None,
            }
        }
    }
}
