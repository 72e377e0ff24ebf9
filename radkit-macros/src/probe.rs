//! Stage 3b: the rules that span more than the item the macro sees. A `#[flow_skill]` impl block is
//! expanded alone, so whether its type has another `#[flow_skill]` impl block (steps split over two
//! blocks), metadata on its struct (metadata written twice) or a parameter type that is `StepCtx`
//! under another name cannot be known here. The expansion asks the compiler instead: each block marks
//! its type (`FlowSkill` or `StepsBlock`, `HasStep<hash of the name>`, ..), and a probe is a `const` item that reads
//! those marks through `__private::Probe` and panics with our message, so the mistake reads as one
//! error in words about both items, at the user's token, never as a trait conflict.

use proc_macro2::{Literal, Span, TokenStream};
use quote::{quote, quote_spanned};

use crate::ast::Skill;

/// A check the compiler finishes.
pub enum Probe {
    /// An impl block without a `#[step(start)]` method: the start step is in another `#[flow_skill]`
    /// impl block of the type (split), or there is none.
    NoStart {
        /// The self type.
        span: Span,
        /// "`a`, `b`".
        steps: String,
        /// The message when there is no other block.
        alone: String,
    },
    /// A `goto!` or `resume_from` target that is not a step of this block.
    UnknownStep {
        /// The target literal.
        span: Span,
        /// The target.
        name: String,
        /// The message when no other block has it.
        alone: String,
        /// This block has no start step: if another block has the target, this block's `NoStart`
        /// probe already says the steps are split, so this one says nothing more.
        quiet: bool,
    },
    /// `await_input!` in a step that no step of this block resumes from.
    NoResume {
        /// The `await_input` path.
        span: Span,
        /// The step.
        step: String,
        /// The message when no other block has the resume step.
        alone: String,
    },
    /// Metadata arguments on an impl block (an error if the struct has metadata too).
    MetaTwice {
        /// The first argument.
        span: Span,
    },
    /// A by-value parameter whose type may be `StepCtx` under another name (an error if it is).
    CtxByValue {
        /// The parameter's type.
        ty: syn::Type,
        /// The parameter's name.
        name: String,
    },
    /// Metadata on a struct (an error if no impl block of it has `#[flow_skill]`).
    NoImplBlock {
        /// The struct's name.
        ident: syn::Ident,
    },
}

impl Probe {
    /// True if the probe fails whatever the compiler answers (it only chooses the message).
    pub fn always_fails(&self) -> bool {
        matches!(
            self,
            Probe::NoStart { .. } | Probe::UnknownStep { .. } | Probe::NoResume { .. }
        )
    }
}

/// FNV-1a (128 bits) of a step name: the const parameter of `HasStep` and `ResumesFrom`.
pub fn hash(name: &str) -> Literal {
    let mut h: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    for byte in name.bytes() {
        h ^= u128::from(byte);
        h = h.wrapping_mul(0x0000_0000_0100_0000_0000_0000_0000_013b);
    }
    Literal::u128_unsuffixed(h)
}

const ONE_BLOCK: &str = "all steps of a skill must be in one #[flow_skill] impl block";

// Input: a probe, the type it asks about and the path to radkit.
// Output: `const _: () = { if <Probe<S, H>>::FLAG { panic!("..") } else { panic!("..") } };`, every
// token at the user's token, so the compiler's "evaluation panicked: <our message>" points there.
pub fn expand(probe: &Probe, self_ty: &dyn quote::ToTokens, krate: &TokenStream) -> TokenStream {
    let ty = quote!(#self_ty);
    let (span, question, yes, no) = match probe {
        Probe::NoStart { span, steps, alone } => (
            *span,
            flag(krate, &ty, None, "START_BLOCK"),
            Some(format!(
                "the steps of `{ty}` are split over more than one #[flow_skill] impl block; move {steps} into the impl block with the #[step(start)] method ({ONE_BLOCK})",
                ty = type_name(&ty)
            )),
            Some(alone.clone()),
        ),
        Probe::UnknownStep {
            span,
            name,
            alone,
            quiet,
        } => (
            *span,
            flag(krate, &ty, Some(name), "HAS_STEP"),
            (!quiet).then(|| format!(
                "step `{name}` is in another #[flow_skill] impl block of `{ty}`; move it into this one ({ONE_BLOCK})",
                ty = type_name(&ty)
            )),
            Some(alone.clone()),
        ),
        Probe::NoResume { span, step, alone } => (
            *span,
            flag(krate, &ty, Some(step), "RESUMES_FROM"),
            Some(format!(
                "the step that resumes from `{step}` is in another #[flow_skill] impl block of `{ty}`; move it into this one ({ONE_BLOCK})",
                ty = type_name(&ty)
            )),
            Some(alone.clone()),
        ),
        Probe::MetaTwice { span } => (
            *span,
            flag(krate, &ty, None, "STRUCT_META"),
            Some(format!(
                "the metadata of `{ty}` is written twice, here and in #[flow_skill(..)] on its struct; keep one: remove these arguments (a bare `#[flow_skill]` takes the struct's), or the struct's",
                ty = type_name(&ty)
            )),
            None,
        ),
        Probe::CtxByValue { ty: param, name } => {
            let span = syn::spanned::Spanned::span(param);
            (
                span,
                flag(krate, &quote!(#param), None, "IS_STEP_CTX"),
                Some(format!(
                    "`{name}` takes the step context by value, but a step only borrows it; write `{name}: &{}`",
                    type_name(&quote!(#param))
                )),
                None,
            )
        }
        Probe::NoImplBlock { ident } => {
            let start = flag(krate, &ty, None, "START_BLOCK");
            let steps = flag(krate, &ty, None, "STEPS_BLOCK");
            (
                ident.span(),
                quote!(#start || #steps),
                None,
                Some(format!(
                    "`{ident}` has #[flow_skill] on its struct but no #[flow_skill] impl block; add a bare `#[flow_skill]` to the `impl {ident}` block that holds the #[step] methods"
                )),
            )
        }
    };
    let fail = |message: Option<String>| match message {
        Some(m) => quote_spanned!(span=> ::core::panic!("{}", #m)),
        None => TokenStream::new(),
    };
    let test = match (yes, no) {
        (Some(yes), Some(no)) => {
            let (yes, no) = (fail(Some(yes)), fail(Some(no)));
            quote_spanned!(span=> if #question { #yes } else { #no })
        }
        (Some(yes), None) => {
            let yes = fail(Some(yes));
            quote_spanned!(span=> if #question { #yes })
        }
        (None, no) => {
            let no = fail(no);
            quote_spanned!(span=> if !(#question) { #no })
        }
    };
    quote_spanned! {span=>
        const _: () = {
            #[allow(unused_imports)]
            use #krate::__private::Otherwise as _;
            #test
        };
    }
}

fn flag(krate: &TokenStream, ty: &TokenStream, name: Option<&str>, flag: &str) -> TokenStream {
    let flag = syn::Ident::new(flag, Span::call_site());
    match name {
        Some(name) => {
            let h = hash(name);
            quote!(<#krate::__private::Probe<#ty, #h>>::#flag)
        }
        None => quote!(<#krate::__private::Probe<#ty>>::#flag),
    }
}

/// `a :: b :: C` -> `a::b::C` for messages.
fn type_name(ty: &TokenStream) -> String {
    crate::codec::canonical(ty.clone())
}

// Input: a concrete impl block's skill model.
// Output: the marks its probes and other blocks' probes read: `StepsBlock` for a block without the
// start step (the one with it implements `FlowSkill`), and
// `HasStep<H>` / `ResumesFrom<H>` for its steps and their `resume_from` targets.
pub fn markers(skill: &Skill, krate: &TokenStream) -> TokenStream {
    let self_ty = &skill.self_ty;
    // The block with the start step implements `FlowSkill` (or its stand-in): that is its mark.
    let block = if skill.start().is_some() {
        TokenStream::new()
    } else {
        quote! {
            #[automatically_derived]
            impl #krate::flow::rules::StepsBlock for #self_ty {}
        }
    };
    let mut names: Vec<&str> = Vec::new();
    let mut resumes: Vec<String> = Vec::new();
    for step in &skill.steps {
        if !names.contains(&step.name.as_str()) {
            names.push(&step.name);
        }
        if let Some(target) = &step.attrs.resume_from {
            if !resumes.contains(&target.value()) {
                resumes.push(target.value());
            }
        }
    }
    let names = names.into_iter().map(hash);
    let resumes = resumes.iter().map(|r| hash(r));
    quote! {
        const _: () = {
            #block
            #(
                #[automatically_derived]
                impl #krate::flow::rules::HasStep<#names> for #self_ty {}
            )*
            #(
                #[automatically_derived]
                impl #krate::flow::rules::ResumesFrom<#resumes> for #self_ty {}
            )*
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_hash_apart_and_stably() {
        assert_ne!(hash("a").to_string(), hash("b").to_string());
        assert_eq!(hash("a").to_string(), hash("a").to_string());
        // FNV-1a 128 of the empty string is its offset basis.
        assert_eq!(
            hash("").to_string(),
            0x6c62_272e_07bb_0142_62b8_2175_6295_c58d_u128.to_string()
        );
    }
}
