//! The output on error: the user's item (with `#[step]` removed) next to `compile_error!`s, plus stand-in
//! impls so the rest of the crate sees no follow-on errors (tokio, thiserror). Nothing here decides
//! whether there is an error; it only keeps one mistake from turning into many messages.

use proc_macro2::TokenStream;
use quote::quote;
use syn::visit_mut::VisitMut;
use syn::{ImplItem, ItemImpl, ItemStruct};

use crate::ast::Skill;
use crate::rewrite::{Mode, Rewriter};

// Input: an impl block whose skill has errors.
// Output: `compile_error!`s (if any: a probe may be the only error); the impl with
// `goto!`/`await_input!` neutralised and duplicate steps dropped (rustc would report them again); a
// stand-in `FlowSkill` impl for code that uses the skill (the engine builder), but only from the block
// with the start step: a block without one may be the second impl block of a skill, whose first block
// implements `FlowSkill` already (the probes report that split).
pub fn impl_block(
    errors: Option<syn::Error>,
    mut item: ItemImpl,
    skill: &Skill,
    krate: &TokenStream,
) -> TokenStream {
    let mut seen: Vec<String> = Vec::new();
    item.items.retain(|impl_item| {
        let ImplItem::Fn(f) = impl_item else {
            return true;
        };
        let name = f.sig.ident.to_string();
        let is_step = skill.steps.iter().any(|s| s.name == name);
        if is_step && seen.contains(&name) {
            return false;
        }
        seen.push(name);
        true
    });
    for impl_item in &mut item.items {
        if let ImplItem::Fn(f) = impl_item {
            Rewriter {
                mode: Mode::Neutral { krate },
                gotos: Vec::new(),
            }
            .visit_block_mut(&mut f.block);
        }
    }
    let errors = errors.map(|e| e.to_compile_error());
    // Stand-ins only make sense for a plain, concrete self type (generic or trait impls are errors).
    let stand_ins =
        if item.trait_.is_none() && item.generics.params.is_empty() && skill.start().is_some() {
            stand_in_skill(&item.self_ty, krate)
        } else {
            TokenStream::new()
        };
    quote!(#errors #item #stand_ins)
}

fn stand_in_skill(self_ty: &syn::Type, krate: &TokenStream) -> TokenStream {
    quote! {
        const _: () = {
            #[automatically_derived]
            #[allow(unused_qualifications)]
            impl #krate::__private::FlowSkill for #self_ty {
                type State = ();

                fn info(&self) -> #krate::__private::SkillInfo {
                    ::core::unreachable!()
                }

                fn initial_state(&self) {}

                #[allow(clippy::type_complexity)]
                fn on_event<'__radkit_a, '__radkit_b, '__radkit_f>(
                    &'__radkit_a self,
                    _: (),
                    _: #krate::__private::Event,
                    _: &'__radkit_b #krate::__private::StepCtx,
                ) -> ::core::pin::Pin<::std::boxed::Box<
                    dyn ::core::future::Future<
                        Output = ::core::result::Result<
                            #krate::__private::Transition<()>,
                            #krate::__private::StepError,
                        >,
                    > + ::core::marker::Send + '__radkit_f,
                >>
                where
                    '__radkit_a: '__radkit_f,
                    '__radkit_b: '__radkit_f,
                    Self: '__radkit_f,
                {
                    ::core::unreachable!()
                }
            }

        };
    }
}

// Input: a struct whose `#[flow_skill(..)]` arguments have errors.
// Output: `compile_error!`s, the struct, and placeholder metadata so that the bare `#[flow_skill]` on
// its impl block does not also report "no skill metadata".
pub fn skill_struct(errors: syn::Error, item: &ItemStruct, krate: &TokenStream) -> TokenStream {
    let errors = errors.to_compile_error();
    let ident = &item.ident;
    if !item.generics.params.is_empty() {
        return quote!(#errors #item);
    }
    quote! {
        #errors
        #item
        #[automatically_derived]
        #[diagnostic::do_not_recommend]
        impl #krate::flow::rules::SkillMeta for #ident {
            const META: #krate::flow::rules::Meta = #krate::flow::rules::Meta::PLACEHOLDER;
        }
    }
}
