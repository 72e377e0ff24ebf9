//! Stage 4: code generation. Input: the user's item and arguments. Output: the item with steps retyped
//! and macros rewritten, the hidden state enum and its serde impls, `impl FlowSkill`, and the skill's
//! registration. Errors of earlier stages go to `fallback`.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::visit_mut::VisitMut;
use syn::{ImplItem, Item, ItemImpl};

use crate::ast::{self, push, Role, Skill, Step};
use crate::attr::SkillAttrs;
use crate::codec::{canonical, codecs, constructors, respan, state_ident};
use crate::meta::{krate, meta_value};
use crate::probe::{self, Probe};
use crate::rewrite::{variant, Mode, Rewriter};
use crate::{fallback, imports, meta, sig, valid};

// Input: `#[flow_skill(..)]` on an impl block or a struct.
// Output: see `expand_impl` and `expand_struct`; anything else is an error next to the item.
pub fn flow_skill(args: TokenStream, input: TokenStream) -> TokenStream {
    match syn::parse2::<Item>(input.clone()) {
        Ok(Item::Impl(item)) => expand_impl(args, item),
        Ok(Item::Struct(item)) => meta::expand_struct(args, item),
        Ok(_) => {
            let e = syn::Error::new(
                Span::call_site(),
                "#[flow_skill] goes on the impl block that holds the #[step] methods (or on the skill struct)",
            )
            .to_compile_error();
            quote!(#e #input)
        }
        Err(e) => {
            let e = e.to_compile_error();
            quote!(#e #input)
        }
    }
}

// Input: `#[flow_skill(..)] impl S { #[step(start)] async fn a(&self, ..) -> StepResult { .. } .. }`
// Output: the impl with `#[step]` removed, step return types set to `StepResult<<S as
// FlowSkill>::State>` and `goto!`/`await_input!` rewritten; in a `const _` block, `enum
// SState { __Start, StepA(payload), .. }` with serde impls and one constructor per step,
// `impl FlowSkill for S` and the inventory registration; the marks and probes of `probe`.
fn expand_impl(args: TokenStream, mut item: ItemImpl) -> TokenStream {
    // Steps are inherent methods; in a trait impl every other rule would only add noise.
    if let Some((_, path, _)) = &item.trait_ {
        let e = syn::Error::new_spanned(
            path,
            "#[flow_skill] goes on an inherent impl block (`impl Skill { .. }`), not on a trait impl",
        )
        .to_compile_error();
        for impl_item in &mut item.items {
            if let ImplItem::Fn(f) = impl_item {
                f.attrs.retain(|a| !ast::is_step_attr(a));
            }
        }
        return quote!(#e #item);
    }
    let mut errors: Option<syn::Error> = None;
    let attrs = match SkillAttrs::from_tokens(args) {
        Ok(a) => Some(a),
        Err(e) => {
            push(&mut errors, e);
            None
        }
    };
    let krate = attrs
        .as_ref()
        .map(krate)
        .unwrap_or_else(|| quote!(::radkit));
    // Before `from_syn` removes the `#[step]`s: which names the user left to be found in scope.
    let imports = imports::BareNames::scan(&item).expand(&krate);
    let (skill, e) = ast::from_syn(&mut item);
    if let Some(e) = e {
        push(&mut errors, e);
    }
    let migrations = crate::migrate::collect(&mut item, &mut errors);
    crate::migrate::check(&migrations, &skill, &mut errors);
    let (e, mut probes) = valid::validate(&skill, item.self_ty.span());
    if let Some(e) = e {
        push(&mut errors, e);
    }
    // A parameter taken by value whose type may be `StepCtx` under another name.
    for step in &skill.steps {
        for param in &step.params {
            if param.role == Role::Payload && sig::may_be_ctx_alias(&param.ty) {
                probes.push(Probe::CtxByValue {
                    ty: param.ty.clone(),
                    name: param.name.clone(),
                });
            }
        }
    }
    // The metadata: this block's arguments (then the struct must have none), or a bare
    // `#[flow_skill]` reads the struct's.
    let meta = match &attrs {
        Some(attrs) if attrs.any => match meta_value(attrs, &skill.docs, &krate) {
            Ok(m) => {
                probes.push(Probe::MetaTwice {
                    span: attrs.first_span.unwrap_or_else(Span::call_site),
                });
                Some(m)
            }
            Err(e) => {
                push(&mut errors, e);
                None
            }
        },
        _ => None,
    };
    let concrete = item.generics.params.is_empty();
    let mut checks = TokenStream::new();
    if concrete {
        checks.extend(probe::markers(&skill, &krate));
        for p in &probes {
            checks.extend(probe::expand(p, &skill.self_ty, &krate));
        }
    }
    if errors.is_some() || probes.iter().any(Probe::always_fails) {
        let item = fallback::impl_block(errors, item, &skill, &krate);
        return quote!(#imports #item #checks);
    }
    let register = attrs
        .as_ref()
        .and_then(|a| a.register.as_ref())
        .is_none_or(|b| b.value);
    let item = generate(&krate, item, &skill, meta, register, &migrations);
    quote!(#imports #item #checks)
}

fn payload_type(types: &[&syn::Type]) -> TokenStream {
    match types {
        [] => quote!(()),
        [one] => quote!(#one),
        many => quote!((#(#many),*)),
    }
}

/// Names the expansion gives its own locals; `Span::mixed_site()` keeps them out of the user's reach.
struct Locals {
    state: syn::Ident,
    event: syn::Ident,
    ctx: syn::Ident,
    payload: syn::Ident,
    message: syn::Ident,
}

impl Locals {
    fn new() -> Self {
        let local = |name: &str| syn::Ident::new(name, Span::mixed_site());
        Locals {
            state: local("__radkit_state"),
            event: local("__radkit_event"),
            ctx: local("__radkit_ctx"),
            payload: local("__radkit_payload"),
            message: local("__radkit_message"),
        }
    }
}

// Input: a step and whether it runs on the first message (seeded).
// Output: `self.step(arg, ..).await` with its arguments in declaration order, built from the payload,
// the ctx and the reply; seeded start parameters come from `Seed::seed()` at the user's type.
fn call(krate: &TokenStream, step: &Step, seeded: bool, l: &Locals) -> TokenStream {
    let ident = &step.ident;
    let n = step.payload().len();
    let mut i = 0usize;
    let (payload, ctx, message) = (&l.payload, &l.ctx, &l.message);
    let args: Vec<TokenStream> = step
        .params
        .iter()
        .map(|p| match p.role {
            // `&Ctx` for a `Ctx` not spelled `StepCtx`: the context if `Ctx` is it, else the payload
            // rule's error at the type.
            Role::Ctx if p.alias => {
                let ty = match &p.ty {
                    syn::Type::Reference(r) => &*r.elem,
                    other => other,
                };
                quote_spanned!(ty.span()=> <#ty as #krate::flow::rules::StepContext>::lend(#ctx))
            }
            Role::Ctx => quote!(#ctx),
            Role::Reply => quote!(#krate::__private::Content::from(#message)),
            Role::Payload if seeded && sig::is_content(&p.ty) => {
                quote!(#krate::__private::Content::from(#message))
            }
            Role::Payload if seeded => {
                let ty = &p.ty;
                quote_spanned!(ty.span()=> <#ty as #krate::flow::rules::Seed>::seed())
            }
            Role::Payload => {
                let index = syn::Index::from(i);
                i += 1;
                if n == 1 {
                    quote!(#payload)
                } else {
                    quote!(#payload.#index)
                }
            }
        })
        .collect();
    // The call is spanned at the step's name: a step future that is not `Send` is reported there.
    let future = quote_spanned!(ident.span()=> self.#ident(#(#args),*));
    let send = quote_spanned!(ident.span()=> #krate::flow::rules::step_future_must_be_send);
    quote!(#send(#future).await)
}

fn generate(
    krate: &TokenStream,
    mut item: ItemImpl,
    skill: &Skill,
    meta: Option<TokenStream>,
    register: bool,
    migrations: &[crate::migrate::Migration],
) -> TokenStream {
    let self_ty = &skill.self_ty;
    let state = state_ident(skill, &item);
    let state_path = quote!(<Self as #krate::__private::FlowSkill>::State);
    let l = Locals::new();

    // Rewrite step bodies and return types; collect the `goto!` edges for the graph.
    let mut gotos: Vec<Vec<String>> = Vec::new();
    for step in &skill.steps {
        let method = item.items.iter_mut().find_map(|i| match i {
            ImplItem::Fn(f) if f.sig.ident == step.ident => Some(f),
            _ => None,
        });
        let Some(method) = method else {
            gotos.push(Vec::new());
            continue;
        };
        let mut rewriter = Rewriter {
            mode: Mode::Typed {
                skill,
                step,
                state: &state_path,
                krate,
            },
            gotos: Vec::new(),
        };
        rewriter.visit_block_mut(&mut method.block);
        let mut edges = rewriter.gotos;
        edges.dedup();
        gotos.push(edges);
        // Keep the user's own path to `StepResult` (their import stays used) and fill in the state,
        // named through the skill (`<S as FlowSkill>::State`): that is how rustc prints it.
        // The filled-in tokens carry the span of the user's return type, so that rustc's "expected
        // .. because of return type" points at `StepResult`, not at the attribute.
        if let syn::ReturnType::Type(_, ty) = &mut method.sig.output {
            let span = ty.span();
            if let syn::Type::Path(tp) = &mut **ty {
                if let Some(last) = tp.path.segments.last_mut() {
                    let args = respan(
                        quote!(<<Self as #krate::__private::FlowSkill>::State>),
                        span,
                    );
                    last.arguments = syn::PathArguments::AngleBracketed(syn::parse_quote!(#args));
                }
            }
        }
    }

    let start = skill.start().map(|s| s.name.clone()).unwrap_or_default();
    let variants = skill.steps.iter().map(|s| {
        let v = variant(&s.name);
        let ty = payload_type(&s.payload());
        quote!(#v(#ty))
    });
    let constructors = constructors(&state, skill);
    let names = skill.steps.iter().map(|s| {
        let v = variant(&s.name);
        let name = &s.name;
        quote!(#state::#v(_) => #name)
    });

    // Serde of the state enum: `{"step": payload}`, each payload through its parameters' codecs.
    let value = syn::Ident::new("__radkit_value", Span::mixed_site());
    let mut codec_defs = Vec::new();
    let mut ser_arms = Vec::new();
    let mut de_arms = Vec::new();
    for (index, s) in skill.steps.iter().enumerate() {
        let v = variant(&s.name);
        let name = &s.name;
        let (defs, encode, decode) = codecs(krate, index, s, &l.payload, &value);
        codec_defs.push(defs);
        let payload = if s.payload().is_empty() {
            quote!(_)
        } else {
            l.payload.to_token_stream()
        };
        ser_arms.push(quote! {
            #state::#v(#payload) => #krate::__private::ser_variant(__serializer, #name, #encode)
        });
        de_arms.push(quote! {
            #name => #krate::__private::de_payload(#name, #decode).map(#state::#v)
        });
    }
    let step_names: Vec<&str> = skill.steps.iter().map(|s| s.name.as_str()).collect();
    let payloads: Vec<(String, TokenStream)> = skill
        .steps
        .iter()
        .map(|s| (s.name.clone(), payload_type(&s.payload())))
        .collect();
    let migrate_fn = crate::migrate::expand(migrations, &payloads, &state, krate);

    // Routing: the first message runs the start step (seeded), `Enter` runs a step entered by `goto!`,
    // a message in a resume step's waiting state runs the resume step with the carry and the reply.
    let (st, ev, payload, message, ctx) = (&l.state, &l.event, &l.payload, &l.message, &l.ctx);
    let mut arms = Vec::new();
    for step in &skill.steps {
        let v = variant(&step.name);
        // Bind only what the call uses: no unused bindings under `#![deny(warnings)]`.
        let has_payload = !step.payload().is_empty();
        let has_content = step.params.iter().any(|p| sig::is_content(&p.ty));
        let bind = |used: bool, name: &syn::Ident| {
            if used {
                name.to_token_stream()
            } else {
                quote!(_)
            }
        };
        let (bind_payload, bind_message) = (bind(has_payload, payload), bind(has_content, message));
        if step.is_start() {
            let seeded = call(krate, step, true, &l);
            arms.push(quote! {
                (#state::__Start, #krate::__private::Event::UserMessage { message: #bind_message }) => { #seeded }
            });
        }
        if step.attrs.interrupt.is_some() && step.attrs.resume_from.is_none() {
            // A message sent while the task works, whatever state it was in: seeded like a start.
            let seeded = call(krate, step, true, &l);
            arms.push(quote! {
                (_, #krate::__private::Event::Interrupted { message: #bind_message }) => { #seeded }
            });
        }
        let run = call(krate, step, false, &l);
        if step.attrs.resume_from.is_some() {
            arms.push(quote! {
                (#state::#v(#bind_payload), #krate::__private::Event::UserMessage { message: #bind_message }) => { #run }
            });
        } else {
            arms.push(quote! {
                (#state::#v(#bind_payload), #krate::__private::Event::Enter) => { #run }
            });
        }
    }

    // A skill with an interrupt step is interrupted by messages sent while a task works.
    let interrupts = if skill.steps.iter().any(|s| s.attrs.interrupt.is_some()) {
        quote!(.while_working(#krate::flow::WhileWorking::Interrupt))
    } else {
        TokenStream::new()
    };
    let step_infos = skill.steps.iter().zip(gotos.iter()).map(|(s, g)| {
        let name = &s.name;
        let start = s.is_start();
        let resume = match &s.attrs.resume_from {
            Some(t) => quote!(::core::option::Option::Some(::std::string::String::from(#t))),
            None => quote!(::core::option::Option::None),
        };
        let payload = canonical(payload_type(&s.payload()));
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

    // The metadata is read once: this block's arguments, or, at the self type, the struct's (a bare
    // `#[flow_skill]` without metadata on the struct is one error there).
    let meta_const = match meta {
        Some(meta) => quote! {
            const __RADKIT_META: #krate::flow::rules::Meta = #meta;
        },
        None => quote_spanned! {self_ty.span()=>
            const __RADKIT_META: #krate::flow::rules::Meta =
                <#self_ty as #krate::flow::rules::SkillMeta>::META;
        },
    };
    let registration = if register {
        let build =
            quote_spanned!(self_ty.span()=> <#self_ty as #krate::flow::rules::Registrable>::build);
        quote! {
            #[doc(hidden)]
            fn __radkit_build() -> ::std::sync::Arc<dyn #krate::__private::ErasedSkill> {
                #build()
            }

            #krate::__private::inventory::submit! {
                #krate::__private::SkillRegistration::new(
                    __RADKIT_META.id,
                    ::core::file!(),
                    ::core::line!(),
                    __radkit_build,
                )
            }
        }
    } else {
        TokenStream::new()
    };
    // The enum lives in the `const _` block: nothing outside can name it (steps name it as
    // `<Self as FlowSkill>::State`), and a second impl block of the type cannot collide with it.
    // Its impls are `do_not_recommend`: rustc's "the following other types implement `Serialize`"
    // lists the user's types, not the expansion's.
    quote! {
        #item

        const _: () = {
            #[doc(hidden)]
            #[allow(non_camel_case_types, dead_code, private_interfaces, clippy::enum_variant_names)]
            pub enum #state {
                __Start,
                #(#variants,)*
            }

            #meta_const

            #constructors

            #(#codec_defs)*

            #[automatically_derived]
            #[diagnostic::do_not_recommend]
            impl #krate::__private::serde::Serialize for #state {
                fn serialize<__S: #krate::__private::serde::Serializer>(
                    &self,
                    __serializer: __S,
                ) -> ::core::result::Result<__S::Ok, __S::Error> {
                    match self {
                        #state::__Start => #krate::__private::ser_variant(
                            __serializer,
                            "__start",
                            #krate::__private::json_null(),
                        ),
                        #(#ser_arms,)*
                    }
                }
            }

            // Debug through the JSON form: it needs no bound on the payload types.
            #[automatically_derived]
            #[diagnostic::do_not_recommend]
            impl ::core::fmt::Debug for #state {
                fn fmt(&self, __f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                    #krate::__private::debug_state(self, __f)
                }
            }

            #[automatically_derived]
            #[diagnostic::do_not_recommend]
            impl<'de> #krate::__private::serde::Deserialize<'de> for #state {
                fn deserialize<__D: #krate::__private::serde::Deserializer<'de>>(
                    __deserializer: __D,
                ) -> ::core::result::Result<Self, __D::Error> {
                    const STEPS: &[&str] = &["__start", #(#step_names),*];
                    let (__name, #value) = #krate::__private::de_variant(__deserializer)?;
                    match __name.as_str() {
                        "__start" => ::core::result::Result::Ok(#state::__Start),
                        #(#de_arms,)*
                        __other => ::core::result::Result::Err(
                            #krate::__private::unknown_variant(__other, STEPS),
                        ),
                    }
                }
            }

            #[automatically_derived]
            #[allow(unused_qualifications)]
            impl #krate::__private::FlowSkill for #self_ty {
                type State = #state;

                fn info(&self) -> #krate::__private::SkillInfo {
                    #krate::__private::skill_info(&__RADKIT_META, ::std::vec![#(#step_infos),*])#interrupts
                }

                fn initial_state(&self) -> #state {
                    #state::__Start
                }

                #migrate_fn

                fn step_name(&self, state: &#state) -> ::std::string::String {
                    ::std::string::String::from(match state {
                        #state::__Start => #start,
                        #(#names,)*
                    })
                }

                // `FlowSkill` is an `#[async_trait]` trait; this is that desugaring written out with
                // absolute paths (async-trait's own output names `Box` and `Send` unqualified).
                #[allow(clippy::type_complexity, clippy::type_repetition_in_bounds)]
                fn on_event<'__radkit_a, '__radkit_b, '__radkit_f>(
                    &'__radkit_a self,
                    #st: #state,
                    #ev: #krate::__private::Event,
                    #ctx: &'__radkit_b #krate::__private::StepCtx,
                ) -> ::core::pin::Pin<::std::boxed::Box<
                    dyn ::core::future::Future<
                        Output = ::core::result::Result<
                            #krate::__private::Transition<#state>,
                            #krate::__private::StepError,
                        >,
                    > + ::core::marker::Send + '__radkit_f,
                >>
                where
                    '__radkit_a: '__radkit_f,
                    '__radkit_b: '__radkit_f,
                    Self: '__radkit_f,
                { ::std::boxed::Box::pin(async move {
                    let _ = &#ctx;
                    match (#st, #ev) {
                        #(#arms)*
                        _ => ::core::result::Result::Ok(#krate::__private::Transition::ignore()),
                    }
                }) }
            }

            #registration
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skill_without_errors_expands_to_enum_impl_and_registration() {
        let out = flow_skill(
            quote!(id = "x", name = "X"),
            quote! {
                impl S {
                    #[step(start)]
                    async fn a(&self, ctx: &StepCtx, msg: Content) -> StepResult { goto!("b", 1u8) }
                    #[step]
                    async fn b(&self, ctx: &StepCtx, n: u8) -> StepResult { ctx.complete("", vec![]) }
                }
            },
        )
        .to_string();
        assert!(!out.contains("compile_error"), "{out}");
        for needle in [
            "const _ : () = { # [doc (hidden)] # [allow (non_camel_case_types , dead_code , private_interfaces , clippy :: enum_variant_names)] pub enum SState",
            "StepA (Content)",
            "StepB (u8)",
            "-> StepResult < < Self as :: radkit :: __private :: FlowSkill > :: State >",
            "impl :: radkit :: __private :: FlowSkill for S",
            // One constructor per step, named like it, for `goto!`.
            "fn b (__radkit_payload : u8) -> Self { SState :: StepB (__radkit_payload) }",
            "Transition :: goto (< Self as :: radkit :: __private :: FlowSkill > :: State :: b (1u8))",
            // The marks other impl blocks' probes read (`FlowSkill` marks the start block).
            "impl :: radkit :: flow :: rules :: HasStep <",
            "inventory :: submit !",
            // The bare `goto!` and `#[step]` resolve without an import.
            "# [allow (unused_imports)] use :: radkit :: __private :: macros :: * ;",
            "# [step (@ __radkit_used)] struct __RadkitStepImport ;",
        ] {
            assert!(out.contains(needle), "{needle} in {out}");
        }
    }

    #[test]
    fn skill_with_errors_keeps_the_item_and_registers_nothing() {
        let out = flow_skill(
            quote!(id = "x", name = "X"),
            quote! {
                impl S {
                    #[step]
                    async fn a(&self, ctx: &StepCtx) -> StepResult { goto!("a") }
                }
            },
        )
        .to_string();
        // No start step here may mean the start step is in another impl block: the compiler
        // finishes that check, and this block implements nothing another block would.
        assert!(
            out.contains("no #[step(start)] method; mark the step")
                && out.contains("Probe < S >> :: START_BLOCK"),
            "{out}"
        );
        assert!(!out.contains("FlowSkill for S"), "{out}");
        assert!(
            out.contains("async fn a (& self , ctx : & StepCtx) -> StepResult"),
            "{out}"
        );
        assert!(
            !out.contains("#[step]") && !out.contains("inventory"),
            "{out}"
        );
    }
}
