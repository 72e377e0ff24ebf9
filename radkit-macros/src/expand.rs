//! Code generation. Input: the user's item and arguments. Output: the item with steps retyped and
//! macros rewritten, the hidden state enum, `impl FlowSkill`, and the skill's registration.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::visit_mut::VisitMut;
use syn::{ImplItem, Item, ItemImpl, ItemStruct};

use crate::ast::{self, Role, Skill};
use crate::attr::SkillAttrs;
use crate::rewrite::{variant, Mode, Rewriter};
use crate::valid;

// Input: `#[flow_skill(..)]` on an impl block or a struct.
// Output: see `expand_impl` and `expand_struct`.
pub fn flow_skill(args: TokenStream, input: TokenStream) -> TokenStream {
    match syn::parse2::<Item>(input.clone()) {
        Ok(Item::Impl(item)) => expand_impl(args, item),
        Ok(Item::Struct(item)) => expand_struct(args, item),
        Ok(other) => {
            let e = syn::Error::new(other.span(), "#[flow_skill] goes on the impl block that holds the #[step] methods (or on the skill struct)");
            let e = e.to_compile_error();
            quote!(#e #input)
        }
        Err(e) => {
            let e = e.to_compile_error();
            quote!(#e #input)
        }
    }
}

fn krate(attrs: &SkillAttrs) -> TokenStream {
    match &attrs.krate {
        Some(path) => quote!(#path),
        None => quote!(::radkit),
    }
}

fn lits(v: &[syn::LitStr]) -> TokenStream {
    quote!(&[#(#v),*])
}

/// `impl SkillMeta for T` from arguments (shared by the struct and impl placements).
fn meta_impl(
    attrs: &SkillAttrs,
    self_ty: &dyn ToTokens,
    docs: &str,
    krate: &TokenStream,
) -> syn::Result<TokenStream> {
    let id = attrs.id.as_ref().ok_or_else(|| {
        syn::Error::new(
            Span::call_site(),
            "missing `id` in #[flow_skill(..)]; add `id = \"my_skill\"`",
        )
    })?;
    let name = attrs.name.as_ref().ok_or_else(|| {
        syn::Error::new(
            Span::call_site(),
            "missing `name` in #[flow_skill(..)]; add `name = \"My Skill\"`",
        )
    })?;
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
    Ok(quote! {
        #[automatically_derived]
        #[allow(unused_qualifications)]
        impl #krate::__private::SkillMeta for #self_ty {
            const ID: &'static str = #id;
            const NAME: &'static str = #name;
            const DESCRIPTION: &'static str = #description;
            const VERSION: ::core::option::Option<&'static str> = #version;
            const TAGS: &'static [&'static str] = #tags;
            const EXAMPLES: &'static [&'static str] = #examples;
            const INPUT_MODES: &'static [&'static str] = #input_modes;
            const OUTPUT_MODES: &'static [&'static str] = #output_modes;
        }
    })
}

// Input: `#[flow_skill(id = "..", name = "..")] struct S;`
// Output: the struct, `impl SkillMeta for S`, and a check that an impl block of `S` carries
// `#[flow_skill]` too (a struct attribute cannot see the impl).
fn expand_struct(args: TokenStream, item: ItemStruct) -> TokenStream {
    let attrs = match SkillAttrs::from_tokens(args) {
        Ok(a) => a,
        Err(e) => {
            let e = e.to_compile_error();
            return quote!(#e #item);
        }
    };
    let krate = krate(&attrs);
    let ident = &item.ident;
    let docs = ast::docs(&item.attrs);
    let meta = match meta_impl(&attrs, ident, &docs, &krate) {
        Ok(m) => m,
        Err(e) => {
            let e = e.to_compile_error();
            return quote!(#e #item);
        }
    };
    let check = quote_spanned! {ident.span()=>
        const _: () = {
            fn __radkit_assert_steps<T: #krate::__private::FlowSkillImpl>() {}
            fn __radkit_check() {
                __radkit_assert_steps::<#ident>();
            }
        };
    };
    quote!(#item #meta #check)
}

// Input: `#[flow_skill(..)] impl S { #[step(start)] async fn a(&self, ..) -> StepResult { .. } .. }`
// Output: the impl with `#[step]` removed, step return types set to `StepResult<State>` and
// `goto!`/`await_input!` rewritten; `enum __RadkitStateS { __Start, StepA(payload), .. }`;
// `impl FlowSkill for S`; `impl FlowSkillImpl for S`; the inventory registration.
fn expand_impl(args: TokenStream, mut item: ItemImpl) -> TokenStream {
    let mut errors: Option<syn::Error> = None;
    let mut push = |e: syn::Error| match &mut errors {
        Some(all) => all.combine(e),
        None => errors = Some(e),
    };
    let (attrs, attrs_ok) = match SkillAttrs::from_tokens(args) {
        Ok(a) => (a, true),
        Err(e) => {
            push(e);
            (SkillAttrs::default(), false)
        }
    };
    let krate = krate(&attrs);
    let (skill, e) = ast::from_syn(&mut item);
    if let Some(e) = e {
        push(e);
    }
    if let Some(e) = valid::validate(&skill, item.self_ty.span()) {
        push(e);
    }
    let meta = if attrs.any && attrs_ok {
        match meta_impl(&attrs, &item.self_ty, &skill.docs, &krate) {
            Ok(m) => m,
            Err(e) => {
                push(e);
                TokenStream::new()
            }
        }
    } else {
        TokenStream::new()
    };
    if let Some(errors) = errors {
        // Keep the user's item compiling: neutralise the macros so no misleading errors follow.
        for impl_item in &mut item.items {
            if let ImplItem::Fn(f) = impl_item {
                Rewriter {
                    mode: Mode::Neutral,
                    gotos: Vec::new(),
                }
                .visit_block_mut(&mut f.block);
            }
        }
        let e = errors.to_compile_error();
        return quote!(#e #item);
    }
    let register = attrs.register.as_ref().is_none_or(|b| b.value);
    generate(&krate, item, &skill, meta, register)
}

fn payload_type(types: &[&syn::Type]) -> TokenStream {
    match types {
        [] => quote!(()),
        [one] => quote!(#one),
        many => quote!((#(#many),*)),
    }
}

fn generate(
    krate: &TokenStream,
    mut item: ItemImpl,
    skill: &Skill,
    meta: TokenStream,
    register: bool,
) -> TokenStream {
    let self_ty = &skill.self_ty;
    let state = format_ident!("__RadkitState{}", skill.ident);
    let mut gotos: Vec<Vec<String>> = Vec::new();
    for step in &skill.steps {
        let method = item.items.iter_mut().find_map(|i| match i {
            ImplItem::Fn(f) if f.sig.ident == step.ident => Some(f),
            _ => None,
        });
        let Some(method) = method else { continue };
        let mut rewriter = Rewriter {
            mode: Mode::Typed {
                skill,
                step,
                state: &state,
                krate,
            },
            gotos: Vec::new(),
        };
        rewriter.visit_block_mut(&mut method.block);
        gotos.push(rewriter.gotos);
        // Keep the user's own path to `StepResult` (their import stays used) and fill in the state.
        if let syn::ReturnType::Type(_, ty) = &mut method.sig.output {
            if let syn::Type::Path(tp) = &mut **ty {
                if let Some(last) = tp.path.segments.last_mut() {
                    last.arguments =
                        syn::PathArguments::AngleBracketed(syn::parse_quote!(<#state>));
                }
            }
        }
    }

    let variants = skill.steps.iter().map(|s| {
        let v = variant(&s.name);
        let ty = payload_type(&s.payload());
        quote!(#v(#ty))
    });
    let names = skill.steps.iter().map(|s| {
        let v = variant(&s.name);
        let name = &s.name;
        quote!(#state::#v(_) => #name)
    });
    let start = skill
        .steps
        .iter()
        .find(|s| s.attrs.start.is_some())
        .map(|s| s.name.clone())
        .unwrap_or_default();

    // Calls: a step's arguments in declaration order, built from the payload, the ctx and the reply.
    let call = |step: &ast::Step, seeded: bool| {
        let ident = &step.ident;
        let n = step.payload().len();
        let mut i = 0usize;
        let args = step.params.iter().map(|p| match p.role {
            Role::Ctx => quote!(__radkit_ctx),
            Role::Reply => quote!(#krate::__private::Content::from(__radkit_message)),
            Role::Payload if seeded => {
                let ty = &p.ty;
                if matches!(ty, syn::Type::Path(tp) if tp.path.segments.last().is_some_and(|s| s.ident == "Content")) {
                    quote!(#krate::__private::Content::from(__radkit_message))
                } else {
                    quote_spanned!(ty.span()=> #krate::__private::seed::<#ty>())
                }
            }
            Role::Payload => {
                let index = syn::Index::from(i);
                i += 1;
                if n == 1 {
                    quote!(__radkit_payload)
                } else {
                    quote!(__radkit_payload.#index)
                }
            }
        });
        let args: Vec<TokenStream> = args.collect();
        quote!(self.#ident(#(#args),*).await)
    };
    let mut arms = Vec::new();
    for step in &skill.steps {
        let v = variant(&step.name);
        if step.attrs.start.is_some() {
            let seeded = call(step, true);
            arms.push(quote! {
                (#state::__Start, #krate::__private::Event::UserMessage { message: __radkit_message }) => { #seeded }
            });
        }
        let run = call(step, false);
        if step.attrs.resume_from.is_some() {
            arms.push(quote! {
                (#state::#v(__radkit_payload), #krate::__private::Event::UserMessage { message: __radkit_message }) => { #run }
            });
        } else {
            arms.push(quote! {
                (#state::#v(__radkit_payload), #krate::__private::Event::Enter) => { #run }
            });
        }
    }

    let step_infos = skill.steps.iter().zip(gotos.iter()).map(|(s, g)| {
        let name = &s.name;
        let start = s.attrs.start.is_some();
        let resume = match &s.attrs.resume_from {
            Some(t) => quote!(::core::option::Option::Some(::std::string::String::from(#t))),
            None => quote!(::core::option::Option::None),
        };
        let payload = payload_type(&s.payload()).to_string();
        quote! {
            #krate::__private::StepInfo {
                name: ::std::string::String::from(#name),
                start: #start,
                resume_from: #resume,
                gotos: ::std::vec![#(::std::string::String::from(#g)),*],
                payload: ::std::string::String::from(#payload),
            }
        }
    });

    let variant_names: Vec<String> = skill
        .steps
        .iter()
        .map(|s| variant(&s.name).to_string())
        .collect();
    let ser_arms = skill.steps.iter().map(|s| {
        let v = variant(&s.name);
        let name = v.to_string();
        let ty = payload_type(&s.payload());
        let tspan = ty.span();
        let call = quote_spanned!(tspan=> #krate::__private::ser_variant::<#ty, __S>);
        quote!(#state::#v(__payload) => #call(__serializer, #name, __payload))
    });
    let de_arms = skill.steps.iter().map(|s| {
        let v = variant(&s.name);
        let name = v.to_string();
        let ty = payload_type(&s.payload());
        let tspan = ty.span();
        let call = quote_spanned!(tspan=> #krate::__private::de_payload::<#ty, __D::Error>);
        quote!(#name => ::core::result::Result::Ok(#state::#v(#call(__value)?)))
    });
    let ident = &skill.ident;
    let build_fn = format_ident!("__radkit_build_{}", ident.to_string().to_lowercase());
    let registration = if register {
        quote! {
            #[doc(hidden)]
            fn #build_fn() -> ::std::sync::Arc<dyn #krate::__private::ErasedSkill> {
                #krate::__private::build_default::<#self_ty>()
            }

            #krate::__private::inventory::submit! {
                #krate::__private::SkillRegistration::new(
                    <#self_ty as #krate::__private::SkillMeta>::ID,
                    ::core::file!(),
                    ::core::line!(),
                    #build_fn,
                )
            }
        }
    } else {
        TokenStream::new()
    };
    quote! {
        #item

        #meta

        #[doc(hidden)]
        #[allow(non_camel_case_types, dead_code, private_interfaces, clippy::enum_variant_names)]
        pub enum #state {
            __Start,
            #(#variants,)*
        }

        const _: () = {
            #[automatically_derived]
            impl #krate::__private::serde::Serialize for #state {
                fn serialize<__S: #krate::__private::serde::Serializer>(&self, __serializer: __S) -> ::core::result::Result<__S::Ok, __S::Error> {
                    match self {
                        #state::__Start => #krate::__private::ser_variant::<(), __S>(__serializer, "__Start", &()),
                        #(#ser_arms,)*
                    }
                }
            }

            #[automatically_derived]
            impl<'de> #krate::__private::serde::Deserialize<'de> for #state {
                fn deserialize<__D: #krate::__private::serde::Deserializer<'de>>(__deserializer: __D) -> ::core::result::Result<Self, __D::Error> {
                    const VARIANTS: &[&str] = &["__Start", #(#variant_names),*];
                    let (__name, __value) = #krate::__private::de_variant(__deserializer)?;
                    match __name.as_str() {
                        "__Start" => ::core::result::Result::Ok(#state::__Start),
                        #(#de_arms,)*
                        __other => ::core::result::Result::Err(#krate::__private::unknown_variant(__other, VARIANTS)),
                    }
                }
            }

            #[automatically_derived]
            #[allow(unused_qualifications)]
            #[#krate::__private::async_trait]
            impl #krate::__private::FlowSkill for #self_ty {
                type State = #state;

                fn info(&self) -> #krate::__private::SkillInfo {
                    #krate::__private::skill_info::<Self>(::std::vec![#(#step_infos),*])
                }

                fn initial_state(&self) -> #state {
                    #state::__Start
                }

                fn step_name(&self, state: &#state) -> ::std::string::String {
                    ::std::string::String::from(match state {
                        #state::__Start => #start,
                        #(#names,)*
                    })
                }

                async fn on_event(
                    &self,
                    __radkit_state: #state,
                    __radkit_event: #krate::__private::Event,
                    __radkit_ctx: &#krate::__private::StepCtx,
                ) -> ::core::result::Result<#krate::__private::Transition<#state>, #krate::__private::StepError> {
                    let _ = &__radkit_ctx;
                    match (__radkit_state, __radkit_event) {
                        #(#arms)*
                        _ => ::core::result::Result::Ok(#krate::__private::Transition::ignore()),
                    }
                }
            }

            #[automatically_derived]
            #[diagnostic::do_not_recommend]
            impl #krate::__private::FlowSkillImpl for #self_ty {}



            #registration
        };
    }
}
