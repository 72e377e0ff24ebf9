//! Stage 4 (metadata): the skill's metadata as a value, from `#[flow_skill(..)]` arguments on the impl
//! block or on the struct, and the expansion of the struct form (the struct, its `SkillMeta`, and the
//! probe that an impl block of it has `#[flow_skill]` too).

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::ItemStruct;

use crate::ast;
use crate::attr::SkillAttrs;
use crate::fallback;
use crate::probe::{self, Probe};

/// The path to radkit: `::radkit`, or the `crate = ".."` override.
pub fn krate(attrs: &SkillAttrs) -> TokenStream {
    match &attrs.krate {
        Some(path) => quote!(#path),
        None => quote!(::radkit),
    }
}

fn lits(v: &[syn::LitStr]) -> TokenStream {
    quote!(&[#(#v),*])
}

// Input: the arguments of `#[flow_skill(id = "x", name = "X", ..)]` and the doc comments.
// Output: the value `Meta { id: "x", .. }`.
pub fn meta_value(attrs: &SkillAttrs, docs: &str, krate: &TokenStream) -> syn::Result<TokenStream> {
    // An id names the skill in the agent card, in every task and in the registry: it cannot be made up.
    let id = attrs.id.as_ref().ok_or_else(|| {
        syn::Error::new(
            Span::call_site(),
            "missing `id` in #[flow_skill(..)]; add `id = \"my_skill\"`",
        )
    });
    let name = attrs.name.as_ref().ok_or_else(|| {
        syn::Error::new(
            Span::call_site(),
            "missing `name` in #[flow_skill(..)]; add `name = \"My Skill\"`",
        )
    });
    let (id, name) = match (id, name) {
        (Ok(id), Ok(name)) => (id, name),
        (Err(mut a), Err(b)) => {
            a.combine(b);
            return Err(a);
        }
        (Err(e), _) | (_, Err(e)) => return Err(e),
    };
    let description = attrs
        .description
        .as_ref()
        .map(|d| d.value())
        .unwrap_or_else(|| docs.to_owned());
    let version = match &attrs.version {
        Some(v) => quote!(::core::option::Option::Some(#v)),
        None => quote!(::core::option::Option::None),
    };
    let (tags, examples, input_modes, output_modes) = (
        lits(&attrs.tags),
        lits(&attrs.examples),
        lits(&attrs.input_modes),
        lits(&attrs.output_modes),
    );
    let while_working = match attrs
        .while_working
        .as_ref()
        .map(syn::LitStr::value)
        .as_deref()
    {
        Some("queue") => quote!(#krate::flow::WhileWorking::Queue),
        _ => quote!(#krate::flow::WhileWorking::Refuse),
    };
    let answers_with_message =
        attrs.answer.as_ref().map(syn::LitStr::value).as_deref() == Some("message");
    Ok(quote! {
        #krate::flow::rules::Meta {
            id: #id,
            name: #name,
            description: #description,
            version: #version,
            tags: #tags,
            examples: #examples,
            input_modes: #input_modes,
            output_modes: #output_modes,
            while_working: #while_working,
            answers_with_message: #answers_with_message,
        }
    })
}

// Input: `#[flow_skill(id = "..", name = "..")] struct S;`
// Output: the struct, `impl SkillMeta for S`, and a probe that an impl block of `S` carries
// `#[flow_skill]` too (a struct attribute cannot see the impl).
pub fn expand_struct(args: TokenStream, item: ItemStruct) -> TokenStream {
    let attrs = SkillAttrs::from_tokens(args);
    let krate = attrs
        .as_ref()
        .map(krate)
        .unwrap_or_else(|_| quote!(::radkit));
    let result = attrs.and_then(|attrs| {
        if !item.generics.params.is_empty() {
            return Err(syn::Error::new_spanned(
                &item.generics.params,
                "a #[flow_skill] struct cannot be generic; keep configuration in fields",
            ));
        }
        meta_value(&attrs, &ast::docs(&item.attrs), &krate)
    });
    let meta = match result {
        Ok(m) => m,
        Err(e) => return fallback::skill_struct(e, &item, &krate),
    };
    let ident = &item.ident;
    let check = probe::expand(
        &Probe::NoImplBlock {
            ident: ident.clone(),
        },
        ident,
        &krate,
    );
    quote! {
        #item

        #[automatically_derived]
        #[allow(unused_qualifications)]
        #[diagnostic::do_not_recommend]
        impl #krate::flow::rules::SkillMeta for #ident {
            const META: #krate::flow::rules::Meta = #meta;
        }

        #check
    }
}
