//! Stage 4c: the imports a skill may leave out. Inside a `#[flow_skill]` impl, `goto!`,
//! `await_input!` and `#[step]` work without `use radkit::{goto, await_input, step}`, and a user who
//! does write the import must not get an "unused import" warning for it.
//!
//! The rewritten macros keep the path the user wrote (`goto!(@__radkit_typed ..)`), so an explicit
//! import stays used. When that path is the bare name, the expansion adds a glob import of the same
//! macros next to the impl block: an explicit import of the same name shadows a glob (no conflict),
//! and without one the glob resolves the name. The glob is emitted only when a bare name occurs, so
//! a module whose skill spells `radkit::goto!` in full gains no names.

use proc_macro2::{TokenStream, TokenTree};
use quote::{quote, quote_spanned};
use syn::{ImplItem, ItemImpl};

/// What the impl block names by its bare name (`goto!`, not `radkit::goto!`).
#[derive(Default)]
pub struct BareNames {
    /// `goto!` or `await_input!` occurs somewhere in the impl block.
    pub transitions: bool,
    /// The first `#[step]` attribute written as a bare name (its `step` identifier).
    pub step: Option<syn::Ident>,
}

impl BareNames {
    /// Scan the impl block as the user wrote it (before `#[step]` is removed).
    pub fn scan(item: &ItemImpl) -> Self {
        let mut names = BareNames::default();
        for impl_item in &item.items {
            let attrs = match impl_item {
                ImplItem::Fn(f) => &f.attrs,
                ImplItem::Const(c) => &c.attrs,
                ImplItem::Type(t) => &t.attrs,
                _ => continue,
            };
            if names.step.is_none() {
                names.step = attrs
                    .iter()
                    .find_map(|a| a.path().get_ident().filter(|i| *i == "step").cloned());
            }
        }
        names.transitions = bare_transition(quote!(#item));
        names
    }

    // Input: the names found and the path to radkit (`::radkit`, or the `crate = ".."` override).
    // Output: `#[allow(unused_imports)] use ::radkit::__private::macros::*;` when any bare name
    // occurs, and `const _: () = { #[step(@__radkit_used)] struct S; };` when a bare `#[step]` does:
    // `#[flow_skill]` consumes the real `#[step]`s before rustc resolves them, so this stand-in is
    // what marks the user's `use radkit::step` used (or, without one, resolves through the glob);
    // the `step` attribute macro drops it.
    pub fn expand(&self, krate: &TokenStream) -> TokenStream {
        if !self.transitions && self.step.is_none() {
            return TokenStream::new();
        }
        let glob = quote! {
            #[allow(unused_imports)]
            use #krate::__private::macros::*;
        };
        let step = match &self.step {
            Some(step) => quote_spanned! {step.span()=>
                const _: () = {
                    #[#step(@__radkit_used)]
                    struct __RadkitStepImport;
                };
            },
            None => TokenStream::new(),
        };
        quote!(#glob #step)
    }
}

/// True if `goto!` or `await_input!` occurs with a bare name (not after `::`), at any depth,
/// including inside other macros' bodies.
fn bare_transition(tokens: TokenStream) -> bool {
    let mut after_colons = false;
    let mut prev_colon = false;
    let mut iter = tokens.into_iter().peekable();
    while let Some(tt) = iter.next() {
        let found = match &tt {
            TokenTree::Ident(ident) if ident == "goto" || ident == "await_input" => {
                !after_colons
                    && matches!(iter.peek(), Some(TokenTree::Punct(p)) if p.as_char() == '!')
            }
            TokenTree::Group(g) => bare_transition(g.stream()),
            _ => false,
        };
        if found {
            return true;
        }
        // `a::goto`: the ident after a `::` pair is a path segment, not a bare name.
        let colon = matches!(&tt, TokenTree::Punct(p) if p.as_char() == ':');
        after_colons = colon && prev_colon;
        prev_colon = colon && !after_colons;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use syn::parse_quote;

    fn scan(item: ItemImpl) -> BareNames {
        BareNames::scan(&item)
    }

    #[test]
    fn bare_macros_and_step_are_found() {
        let names = scan(parse_quote! {
            impl S {
                #[step(start)]
                async fn a(&self) -> StepResult { goto!("b") }
            }
        });
        assert!(names.transitions);
        assert_eq!(names.step.map(|s| s.to_string()).as_deref(), Some("step"));
    }

    #[test]
    fn full_paths_need_no_glob() {
        let names = scan(parse_quote! {
            impl S {
                #[radkit::step(start)]
                async fn a(&self) -> StepResult {
                    tokio::select! { _ = x => ::radkit::goto!("b"), }
                    radkit::await_input!(slot = "s", message = "m")
                }
            }
        });
        assert!(!names.transitions);
        assert!(names.step.is_none());
        assert!(names.expand(&quote!(::radkit)).is_empty());
    }

    #[test]
    fn bare_macro_inside_another_macro_is_found() {
        let names = scan(parse_quote! {
            impl S {
                async fn a(&self) -> StepResult {
                    tokio::select! { _ = x => await_input!(slot = "s", message = "m"), }
                }
            }
        });
        assert!(names.transitions);
    }

    #[test]
    fn the_glob_follows_the_crate_override() {
        let names = scan(parse_quote! {
            impl S { async fn a(&self) -> StepResult { goto!("b") } }
        });
        let out = names.expand(&quote!(crate::reexport::rk)).to_string();
        assert!(
            out.contains("use crate :: reexport :: rk :: __private :: macros :: * ;"),
            "{out}"
        );
        assert!(!out.contains("__RadkitStepImport"), "{out}");
    }
}
