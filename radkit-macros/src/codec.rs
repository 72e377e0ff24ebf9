//! Stage 4b: the hidden state enum: its name, its serde, and its constructors (one per step, for `goto!`).
//! Each payload parameter goes to and from JSON through its own hidden codec function, built at the user's type: a type that is not serde is one error at
//! that type, and the enum's `Serialize`/`Deserialize` impls stay valid whatever the payloads are.
//! Also the payload type's canonical string, which feeds the skill version.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;

use crate::ast::{Role, Skill, Step};
use crate::rewrite::variant;

/// A type's tokens as a string that does not depend on how proc-macro2 prints spaces (it feeds the
/// skill version: a toolchain update must not make every waiting task look incompatible). A space
/// only separates two words: `(Content,Vec<Cycle>)`, `&'static str`.
pub fn canonical(tokens: TokenStream) -> String {
    fn walk(tokens: TokenStream, out: &mut String, word_before: &mut bool) {
        for tt in tokens {
            match tt {
                proc_macro2::TokenTree::Group(g) => {
                    let (open, close) = match g.delimiter() {
                        proc_macro2::Delimiter::Parenthesis => ("(", ")"),
                        proc_macro2::Delimiter::Bracket => ("[", "]"),
                        proc_macro2::Delimiter::Brace => ("{", "}"),
                        proc_macro2::Delimiter::None => ("", ""),
                    };
                    out.push_str(open);
                    *word_before = false;
                    walk(g.stream(), out, word_before);
                    out.push_str(close);
                    *word_before = false;
                }
                proc_macro2::TokenTree::Punct(p) => {
                    out.push(p.as_char());
                    *word_before = false;
                }
                word => {
                    if *word_before {
                        out.push(' ');
                    }
                    out.push_str(&word.to_string());
                    *word_before = true;
                }
            }
        }
    }
    let mut out = String::new();
    walk(tokens, &mut out, &mut false);
    out
}

/// The hidden function that builds the codec of parameter `i` of step `s`.
fn codec_fn(s: usize, i: usize) -> syn::Ident {
    format_ident!("__radkit_codec_{}_{}", s, i)
}

// Input: step `index` with payload parameters `T0, T1`.
// Output: one codec function per parameter, spanned at the user's type (the only place that requires
// `T: Payload`, read as `<T as Payload>::CODEC`), plus the expressions that encode and decode the step's payload with them.
pub fn codecs(
    krate: &TokenStream,
    index: usize,
    step: &Step,
    payload: &syn::Ident,
    value: &syn::Ident,
) -> (TokenStream, TokenStream, TokenStream) {
    let types = step.payload();
    let fns: Vec<syn::Ident> = (0..types.len()).map(|i| codec_fn(index, i)).collect();
    let defs = types.iter().zip(&fns).map(|(ty, f)| {
        let build = quote_spanned!(ty.span()=> <#ty as #krate::flow::rules::Payload>::CODEC);
        quote! {
            #[doc(hidden)]
            #[inline]
            fn #f() -> #krate::flow::rules::Codec<#ty> {
                #build
            }
        }
    });
    let (encode, decode) = match fns.as_slice() {
        [] => (
            quote!(#krate::__private::json_null()),
            quote!(#krate::__private::json_unit(#value)),
        ),
        [one] => (
            quote!(#one().to_json(#payload)),
            quote!(#one().from_json(#value)),
        ),
        many => {
            let n = many.len();
            let indexes = (0..n).map(syn::Index::from);
            let names: Vec<syn::Ident> = (0..n)
                .map(|i| syn::Ident::new(&format!("__radkit_{i}"), Span::mixed_site()))
                .collect();
            (
                quote!(#krate::__private::json_tuple([#(#many().to_json(&#payload.#indexes)),*])),
                quote! {
                    #krate::__private::json_untuple::<#n>(#value).and_then(|[#(#names),*]| {
                        ::core::result::Result::Ok((#(#many().from_json(#names)?,)*))
                    })
                },
            )
        }
    };
    (quote!(#(#defs)*), encode, decode)
}

// Input: the skill `ResearchLoop` and its impl block.
// Output: the state enum's name, `ResearchLoopState`: rustc prints it where a message names the state
// (a step returning another type's transition, a payload that is not `Send`), so it says whose
// state it is. The enum is declared in the `const _` block next to the payload types, where it would
// shadow a type of the same name: if the impl block names `ResearchLoopState` anywhere, the enum
// takes the first free name of `ResearchLoopFlowState`, `ResearchLoopState2`, ...
pub fn state_ident(skill: &Skill, item: &syn::ItemImpl) -> syn::Ident {
    fn idents(tokens: TokenStream, out: &mut Vec<String>) {
        for tt in tokens {
            match tt {
                proc_macro2::TokenTree::Ident(i) => out.push(i.to_string()),
                proc_macro2::TokenTree::Group(g) => idents(g.stream(), out),
                _ => {}
            }
        }
    }
    let mut taken = Vec::new();
    idents(item.to_token_stream(), &mut taken);
    let base = syn::ext::IdentExt::unraw(&skill.ident).to_string();
    let name = [format!("{base}State"), format!("{base}FlowState")]
        .into_iter()
        .chain((2u32..).map(|n| format!("{base}State{n}")))
        .find(|candidate| !taken.contains(candidate))
        .unwrap_or_default();
    syn::Ident::new(&name, Span::call_site())
}

/// `tokens` with every token (at any depth) at `span`.
pub fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|tt| match tt {
            proc_macro2::TokenTree::Group(g) => {
                let mut group = proc_macro2::Group::new(g.delimiter(), respan(g.stream(), span));
                group.set_span(span);
                proc_macro2::TokenTree::Group(group)
            }
            mut other => {
                other.set_span(span);
                other
            }
        })
        .collect()
}

// Input: the state enum and the steps.
// Output: `impl State { fn critique(draft: String) -> Self { State::StepCritique(draft) } .. }`: one
// constructor per step, named like the step, whose parameter spans the step's payload parameters as
// the user wrote them. `goto!`/`await_input!` call it, so a payload of the wrong type is rustc's
// "arguments to this function are incorrect" at the payload, with a note showing the step's name and
// parameter list (not the hidden enum).
pub fn constructors(state: &syn::Ident, skill: &Skill) -> TokenStream {
    let fns = skill.steps.iter().map(|s| {
        let f = &s.ident;
        let v = variant(&s.name);
        let payload: Vec<_> = s
            .params
            .iter()
            .filter(|p| p.role == Role::Payload)
            .collect();
        let (arg, ty) = match payload.as_slice() {
            [] => (
                syn::Ident::new("__radkit_payload", s.params_span),
                quote_spanned!(s.params_span=> ()),
            ),
            [one] => {
                let ty = &one.ty;
                (
                    syn::Ident::new("__radkit_payload", one.pat_span),
                    quote!(#ty),
                )
            }
            [first, .., last] => {
                // The tuple's parentheses carry the last type's span, so the parameter runs from
                // the first name to the last type.
                let types = payload.iter().map(|p| &p.ty);
                let mut group = proc_macro2::Group::new(
                    proc_macro2::Delimiter::Parenthesis,
                    quote!(#(#types),*),
                );
                group.set_span(last.ty.span());
                (
                    syn::Ident::new("__radkit_payload", first.pat_span),
                    group.into_token_stream(),
                )
            }
        };
        quote! {
            fn #f(#arg: #ty) -> Self {
                #state::#v(#arg)
            }
        }
    });
    quote! {
        #[automatically_derived]
        #[allow(non_snake_case, clippy::missing_const_for_fn)]
        impl #state {
            #(#fns)*
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_enum_is_named_after_the_skill_and_shadows_none_of_its_types() {
        let name = |item: syn::ItemImpl| {
            let (skill, _) = crate::ast::from_syn(&mut item.clone());
            state_ident(&skill, &item).to_string()
        };
        assert_eq!(
            name(syn::parse_quote! {
                impl Fetch { #[step(start)] async fn a(&self, m: Content) -> StepResult { todo!() } }
            }),
            "FetchState"
        );
        // A payload type of that name would resolve to the enum inside the `const _` block.
        assert_eq!(
            name(syn::parse_quote! {
                impl Fetch {
                    #[step(start)] async fn a(&self, m: Content) -> StepResult { todo!() }
                    #[step] async fn b(&self, s: FetchState, t: Vec<FetchFlowState>) -> StepResult { todo!() }
                }
            }),
            "FetchState2"
        );
    }

    #[test]
    fn payload_strings_do_not_depend_on_token_spacing() {
        let cases: [(TokenStream, &str); 4] = [
            (quote!((Content, Vec<Cycle>)), "(Content,Vec<Cycle>)"),
            (quote!(&'static str), "&'static str"),
            (
                quote!(std::collections::HashMap<String, [u8; 4]>),
                "std::collections::HashMap<String,[u8;4]>",
            ),
            (quote!(()), "()"),
        ];
        for (tokens, expected) in cases {
            assert_eq!(canonical(tokens), expected);
        }
    }
}
