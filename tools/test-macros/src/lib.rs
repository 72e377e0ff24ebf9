//! `#[test]` for radkit's own integration-test binaries (`tests/it`, `radkit-runtime/tests/it`).
//!
//! Each crate's suite is one binary run by a `libtest-mimic` harness (`support::harness`), so that a
//! test whose outside service (PostgreSQL, the official Python SDKs) cannot be reached is reported
//! *ignored* at run time, never passed. The attribute keeps the test where it is written and
//! registers it with `inventory`; the harness collects every registration, names it by its module
//! path (`a2a_errors::a_bad_id_is_refused`) and runs it the way its attribute says:
//!
//! ```text
//! use crate::support::test;
//!
//! #[test]                                  // sync, needs nothing
//! fn parses() {}
//!
//! #[test]                                  // async: a current-thread runtime
//! async fn answers() {}
//!
//! #[test(multi_thread, needs = Postgres)]  // two workers; ignored when PostgreSQL is down
//! async fn claims() {}
//!
//! #[test]
//! #[ignore = "the child half of a kill -9 test"]
//! fn child() {}
//! ```
//!
//! A test returns `()` or a `Result` whose `Err` fails it. The expansion refers to
//! `crate::support::harness`, which each suite provides.

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as Tokens};
use quote::{quote, quote_spanned};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Attribute, Ident, ItemFn, Meta, Token};

/// Register a test with the suite's harness; see the crate docs.
#[proc_macro_attribute]
pub fn test(args: TokenStream, item: TokenStream) -> TokenStream {
    let args = syn::parse_macro_input!(args as Args);
    let func = syn::parse_macro_input!(item as ItemFn);
    expand(args, func)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// What the attribute says.
struct Args {
    multi_thread: bool,
    needs: Ident,
}

impl Parse for Args {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut args = Args {
            multi_thread: false,
            needs: Ident::new("Nothing", Span::call_site()),
        };
        let metas = Punctuated::<Meta, Token![,]>::parse_terminated(input)?;
        for meta in metas {
            match &meta {
                Meta::Path(path) if path.is_ident("multi_thread") => args.multi_thread = true,
                Meta::NameValue(nv) if nv.path.is_ident("needs") => match &nv.value {
                    syn::Expr::Path(p) if p.path.get_ident().is_some() => {
                        args.needs = p.path.get_ident().cloned().expect("checked");
                    }
                    other => {
                        return Err(syn::Error::new(
                            other.span(),
                            "`needs` takes a service: Postgres, Python, Python1, PythonServer, Python1Server, Restate, PythonMcp or Browser",
                        ))
                    }
                },
                other => {
                    return Err(syn::Error::new(
                        other.span(),
                        "unknown argument; `#[test]` takes `multi_thread` and `needs = <service>`",
                    ))
                }
            }
        }
        Ok(args)
    }
}

fn expand(args: Args, mut func: ItemFn) -> syn::Result<Tokens> {
    let sig = &func.sig;
    if !sig.inputs.is_empty() {
        return Err(syn::Error::new(
            sig.inputs.span(),
            "a test takes no arguments",
        ));
    }
    if !sig.generics.params.is_empty() {
        return Err(syn::Error::new(
            sig.generics.span(),
            "a test is not generic",
        ));
    }
    let is_async = sig.asyncness.is_some();
    if args.multi_thread && !is_async {
        return Err(syn::Error::new(
            sig.fn_token.span(),
            "`multi_thread` is for an `async fn` test",
        ));
    }
    let ignored = take_ignore(&mut func.attrs)?;
    let name = &func.sig.ident;
    let name_text = name.to_string();
    let needs = &args.needs;
    let span = name.span();
    let run = if is_async {
        let flavor = if args.multi_thread {
            quote!(MultiThread)
        } else {
            quote!(CurrentThread)
        };
        quote_spanned! {span=>
            crate::support::harness::Run::#flavor(|| ::std::boxed::Box::pin(async {
                crate::support::harness::Outcome::check(#name().await)
            }))
        }
    } else {
        quote_spanned! {span=>
            crate::support::harness::Run::Sync(|| crate::support::harness::Outcome::check(#name()))
        }
    };
    Ok(quote! {
        #func

        ::inventory::submit! {
            crate::support::harness::Case {
                module: ::core::module_path!(),
                file: ::core::file!(),
                name: #name_text,
                needs: crate::support::harness::Needs::#needs,
                ignored: #ignored,
                run: #run,
            }
        }
    })
}

/// Remove `#[ignore]` / `#[ignore = "why"]` from `attrs` and say whether there was one.
fn take_ignore(attrs: &mut Vec<Attribute>) -> syn::Result<bool> {
    let mut ignored = false;
    let mut kept = Vec::with_capacity(attrs.len());
    for attr in attrs.drain(..) {
        if attr.path().is_ident("should_panic") {
            return Err(syn::Error::new(
                attr.span(),
                "the suite's harness does not run `#[should_panic]` tests; catch the panic in the test (`std::panic::catch_unwind`) and assert on it",
            ));
        }
        if attr.path().is_ident("ignore") {
            match &attr.meta {
                Meta::Path(_) | Meta::NameValue(_) => ignored = true,
                Meta::List(list) => {
                    return Err(syn::Error::new(
                        list.span(),
                        "write `#[ignore]` or `#[ignore = \"why\"]`",
                    ))
                }
            }
        } else {
            kept.push(attr);
        }
    }
    *attrs = kept;
    Ok(ignored)
}
