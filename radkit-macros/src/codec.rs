//! Stage 4b: the serde of the hidden state enum, and its constructors (one per step, for `goto!`).
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
