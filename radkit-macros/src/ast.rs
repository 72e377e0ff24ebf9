//! Stage 2: the skill model built from the user's impl block (`from_syn`). It keeps the user's tokens
//! and spans (`original`) so that every later error can point at the exact name, key or type.

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{ImplItem, ItemImpl, Type};

use crate::attr::StepAttrs;
use crate::{scan, sig};

/// What a step parameter is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// `&StepCtx`, or `&T` for a `T` that may name it through an alias (`use .. StepCtx as Ctx`):
    /// the expansion checks that one with `rules::StepContext` at the type.
    Ctx,
    /// Part of the step's payload (a `Content` of a non-resume step is payload too).
    Payload,
    /// The user's reply (the `Content` of a `resume_from` step).
    Reply,
}

/// One parameter after `&self`.
pub struct Param {
    /// Its type, as written (with the user's spans).
    pub ty: Type,
    /// What it receives.
    pub role: Role,
    /// Its name (`_` for a pattern).
    pub name: String,
    /// The span of its pattern (`draft` in `draft: String`).
    pub pat_span: Span,
    /// A `&T` whose `T` is not spelled `StepCtx`: the context only if `T` is (checked by the compiler).
    pub alias: bool,
}

/// One `#[step]` method.
pub struct Step {
    /// The method name, with the user's span.
    pub ident: syn::Ident,
    /// The step name (the method name as a string).
    pub name: String,
    /// `#[step(..)]` arguments.
    pub attrs: StepAttrs,
    /// Parameters after `&self`, in order.
    pub params: Vec<Param>,
    /// Span of the `#[step]` attribute, for errors about the step as a whole.
    pub span: Span,
    /// Span of the parameter list `(&self, ..)`.
    pub params_span: Span,
    /// The signature passed `sig::check` (so `params` is complete).
    pub sig_ok: bool,
    /// `goto!` targets in the body, as written.
    pub gotos: Vec<syn::LitStr>,
    /// The `await_input!` paths in the body.
    pub awaits: Vec<Span>,
}

impl Step {
    /// The payload types, in parameter order.
    pub fn payload(&self) -> Vec<&Type> {
        self.params
            .iter()
            .filter(|p| p.role == Role::Payload)
            .map(|p| &p.ty)
            .collect()
    }

    /// True for `#[step(start)]`.
    pub fn is_start(&self) -> bool {
        self.attrs.start.is_some()
    }
}

/// The skill: its type and its steps, in declaration order.
pub struct Skill {
    /// The impl's self type, as written.
    pub self_ty: Type,
    /// The last identifier of the self type (names the hidden enum).
    pub ident: syn::Ident,
    /// The steps.
    pub steps: Vec<Step>,
    /// Doc comments of the impl block (the default description).
    pub docs: String,
    /// The other methods of the impl block (not steps).
    pub methods: Vec<String>,
}

impl Skill {
    /// The step named `name`.
    pub fn step(&self, name: &str) -> Option<&Step> {
        self.steps.iter().find(|s| s.name == name)
    }

    /// The start step (after validation there is exactly one).
    pub fn start(&self) -> Option<&Step> {
        self.steps.iter().find(|s| s.is_start())
    }

    /// The step declared `resume_from = "<name>"`.
    pub fn resume_of(&self, name: &str) -> Option<&Step> {
        self.steps.iter().find(|s| {
            s.attrs
                .resume_from
                .as_ref()
                .is_some_and(|t| t.value() == name)
        })
    }
}

/// The last identifier of a path type (`a::b::C<T>` -> `C`), through references and groups.
pub fn last_ident(ty: &Type) -> Option<&syn::Ident> {
    match ty {
        Type::Path(p) => p.path.segments.last().map(|s| &s.ident),
        Type::Reference(r) => last_ident(&r.elem),
        Type::Group(g) => last_ident(&g.elem),
        Type::Paren(p) => last_ident(&p.elem),
        _ => None,
    }
}

/// Doc comments of attributes, joined into one line.
pub fn docs(attrs: &[syn::Attribute]) -> String {
    let mut lines = Vec::new();
    for attr in attrs.iter().filter(|a| a.path().is_ident("doc")) {
        if let syn::Meta::NameValue(nv) = &attr.meta {
            if let syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) = &nv.value
            {
                lines.push(s.value().trim().to_owned());
            }
        }
    }
    lines.join(" ").trim().to_owned()
}

/// `#[step]`, `#[step(..)]`, `#[radkit::step]`: the last path segment is `step`.
pub fn is_step_attr(attr: &syn::Attribute) -> bool {
    attr.path()
        .segments
        .last()
        .is_some_and(|s| s.ident == "step")
}

/// `#[stpe]`, `#[Step]`, `#[steps(start)]`: an attribute one edit away from `step` (or `step` in
/// another case), which rustc would report as unknown only after our own errors.
pub fn misspelled_step_attr(attr: &syn::Attribute) -> Option<String> {
    let ident = &attr.path().segments.last()?.ident;
    let name = ident.to_string();
    // Attributes rustc knows that are close to `step`; none is, today, but keep the door shut.
    const KNOWN: &[&str] = &["test"];
    if name == "step" || name.len() < 3 || KNOWN.contains(&name.as_str()) {
        return None;
    }
    (name.eq_ignore_ascii_case("step") || crate::valid::distance(&name, "step") <= 1)
        .then_some(name)
}

/// Append `e` to the collected errors.
pub fn push(errors: &mut Option<syn::Error>, e: syn::Error) {
    match errors {
        Some(all) => all.combine(e),
        None => *errors = Some(e),
    }
}

/// Build the model from the impl block, removing the `#[step]` attributes from it (so the item can be
/// emitted as is, also on error). Errors are collected; the model holds every step that parsed.
pub fn from_syn(item: &mut ItemImpl) -> (Skill, Option<syn::Error>) {
    let mut errors = None;
    // The registry builds the skill with `Default::default()` and the state enum names the type:
    // neither works for a generic type.
    if !item.generics.params.is_empty() {
        push(
            &mut errors,
            syn::Error::new_spanned(
                &item.generics.params,
                "a #[flow_skill] impl cannot be generic; write the skill for a concrete type and keep configuration in fields",
            ),
        );
    }
    let ident = last_ident(&item.self_ty)
        .cloned()
        .unwrap_or_else(|| syn::Ident::new("Skill", item.self_ty.span()));
    let mut steps = Vec::new();
    let mut methods = Vec::new();
    for impl_item in &mut item.items {
        let ImplItem::Fn(method) = impl_item else {
            // A stray `#[step]` on a const or a type would otherwise run the standalone `#[step]`,
            // whose message ("add #[flow_skill] to the impl block") would be wrong here.
            let attrs = match impl_item {
                ImplItem::Const(c) => Some(&mut c.attrs),
                ImplItem::Type(t) => Some(&mut t.attrs),
                _ => None,
            };
            if let Some(attrs) = attrs {
                if let Some(pos) = attrs.iter().position(is_step_attr) {
                    let attr = attrs.remove(pos);
                    push(
                        &mut errors,
                        syn::Error::new_spanned(attr, "#[step] goes on an `async fn` method"),
                    );
                }
            }
            continue;
        };
        let attr = match step_attr(&mut method.attrs, &method.sig.ident, &mut errors) {
            Some(attr) => attr,
            None => {
                methods.push(syn::ext::IdentExt::unraw(&method.sig.ident).to_string());
                continue;
            }
        };
        let span = attr.span();
        let mut attrs = match &attr.meta {
            syn::Meta::Path(_) => StepAttrs::default(),
            _ => match attr.parse_args::<StepAttrs>() {
                Ok(a) => a,
                Err(e) => {
                    push(&mut errors, e);
                    StepAttrs::default()
                }
            },
        };
        if let Some(e) = attrs.errors.take() {
            push(&mut errors, e);
        }
        let resume = attrs.resume_from.is_some();
        let (params, sig_ok) = match sig::check(method, resume) {
            Ok(p) => (p, true),
            Err(e) => {
                push(&mut errors, e);
                (Vec::new(), false)
            }
        };
        steps.push(Step {
            // `r#type` is the step `type`: that is the name `goto!` and the journal use.
            name: syn::ext::IdentExt::unraw(&method.sig.ident).to_string(),
            ident: method.sig.ident.clone(),
            attrs,
            params,
            span,
            params_span: method.sig.paren_token.span.join(),
            sig_ok,
            gotos: Vec::new(),
            awaits: Vec::new(),
        });
    }
    let mut skill = Skill {
        self_ty: (*item.self_ty).clone(),
        ident,
        steps,
        docs: docs(&item.attrs),
        methods,
    };
    // What the step bodies do with `goto!`, `await_input!` and other steps, read before anything is
    // rewritten (the rules about it are in `valid`).
    for impl_item in &item.items {
        let ImplItem::Fn(method) = impl_item else {
            continue;
        };
        let Some(index) = skill.steps.iter().position(|s| s.ident == method.sig.ident) else {
            continue;
        };
        if skill.steps[..index]
            .iter()
            .any(|s| s.ident == method.sig.ident)
        {
            continue;
        }
        let scan = scan::scan(&skill, &method.block);
        if let Some(e) = scan.errors {
            push(&mut errors, e);
        }
        skill.steps[index].gotos = scan.gotos;
        skill.steps[index].awaits = scan.awaits;
    }
    (skill, errors)
}

// Input: a method's attributes. Output: its one `#[step]` attribute, removed from the method, or
// `None` for a method that is not a step. Two `#[step]`s and a misspelled one (`#[stpe(start)]`) are
// errors here, before anything else about the skill: the method is taken as the step it was meant to
// be, so no "no start step" or rustc's "cannot find attribute" follows.
fn step_attr(
    attrs: &mut Vec<syn::Attribute>,
    method: &syn::Ident,
    errors: &mut Option<syn::Error>,
) -> Option<syn::Attribute> {
    let mut found: Vec<syn::Attribute> = Vec::new();
    let mut i = 0;
    while i < attrs.len() {
        if is_step_attr(&attrs[i]) {
            found.push(attrs.remove(i));
        } else if let Some(name) = misspelled_step_attr(&attrs[i]) {
            let attr = attrs.remove(i);
            push(
                errors,
                syn::Error::new_spanned(
                    attr.path(),
                    format!("unknown attribute `{name}`; did you mean `step`?"),
                ),
            );
            found.push(attr);
        } else {
            i += 1;
        }
    }
    let mut found = found.into_iter();
    let first = found.next()?;
    for extra in found {
        push(
            errors,
            syn::Error::new_spanned(
                &extra,
                format!("`{method}` has two #[step] attributes; keep one"),
            ),
        );
    }
    Some(first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use syn::parse_quote;

    fn model(mut item: ItemImpl) -> (Skill, Option<syn::Error>) {
        from_syn(&mut item)
    }

    #[test]
    fn payload_is_the_parameters_after_self_and_ctx() {
        let (skill, errors) = model(parse_quote! {
            /// Research.
            impl Research {
                #[step(start)]
                async fn research(&self, ctx: &StepCtx, msg: Content, history: Vec<Cycle>) -> StepResult { todo!() }
                #[step]
                async fn critique(&self, ctx: &StepCtx, payload: (String, Vec<Cycle>)) -> StepResult { todo!() }
                #[step(resume_from = "critique")]
                async fn human_input(&self, payload: (String, Vec<Cycle>), msg: Content) -> StepResult { todo!() }
                fn helper(&self) {}
            }
        });
        assert!(errors.is_none());
        assert_eq!(skill.docs, "Research.");
        assert_eq!(skill.ident, "Research");
        let names: Vec<_> = skill.steps.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["research", "critique", "human_input"]);
        let roles =
            |i: usize| -> Vec<Role> { skill.steps[i].params.iter().map(|p| p.role).collect() };
        // The start step's `Content` is payload; the resume step's `Content` is the reply.
        assert_eq!(roles(0), [Role::Ctx, Role::Payload, Role::Payload]);
        assert_eq!(roles(2), [Role::Payload, Role::Reply]);
        assert_eq!(skill.steps[1].payload().len(), 1);
        assert_eq!(skill.start().map(|s| s.name.as_str()), Some("research"));
        assert_eq!(
            skill.resume_of("critique").map(|s| s.name.as_str()),
            Some("human_input")
        );
    }

    #[test]
    fn step_attributes_are_removed_from_the_item() {
        let mut item: ItemImpl = parse_quote! {
            impl S {
                #[step(start)]
                async fn a(&self) -> StepResult { todo!() }
                #[radkit::step]
                async fn b(&self) -> StepResult { todo!() }
            }
        };
        let (skill, errors) = from_syn(&mut item);
        assert!(errors.is_none());
        assert_eq!(skill.steps.len(), 2);
        let left = quote::quote!(#item).to_string();
        assert!(!left.contains("step"), "{left}");
    }

    #[test]
    fn a_misspelled_or_second_step_attribute_is_the_first_error() {
        let mut item: ItemImpl = parse_quote! {
            impl S {
                #[stpe(start)]
                async fn a(&self, m: Content) -> StepResult { todo!() }
                #[step]
                #[inline]
                #[step(resume_from = "a")]
                async fn b(&self, r: Content) -> StepResult { todo!() }
                #[test]
                fn helper(&self) {}
            }
        };
        let (skill, errors) = from_syn(&mut item);
        let messages: Vec<String> = errors
            .into_iter()
            .flat_map(|e| e.into_iter().map(|e| e.to_string()).collect::<Vec<_>>())
            .collect();
        assert_eq!(
            messages,
            [
                "unknown attribute `stpe`; did you mean `step`?",
                "`b` has two #[step] attributes; keep one",
            ]
        );
        // The misspelled step is still the start step, so nothing else is reported for it.
        assert_eq!(skill.start().map(|s| s.name.as_str()), Some("a"));
        assert_eq!(skill.methods, ["helper"]);
        let left = quote::quote!(#item).to_string();
        assert!(!left.contains("stpe") && !left.contains("step"), "{left}");
        assert!(
            left.contains("# [inline]") && left.contains("# [test]"),
            "{left}"
        );
    }

    #[test]
    fn every_bad_step_is_reported_in_one_build() {
        let (skill, errors) = model(parse_quote! {
            impl<T> S<T> {
                #[step(start, bogus)]
                fn a(&mut self) -> StepResult { todo!() }
                #[step]
                async fn b(&self, x: Content, y: Content) -> Result<(), ()> { todo!() }
            }
        });
        assert_eq!(skill.steps.len(), 2);
        let messages: Vec<String> = errors
            .into_iter()
            .flat_map(|e| e.into_iter().map(|e| e.to_string()).collect::<Vec<_>>())
            .collect();
        assert_eq!(messages.len(), 6, "{messages:#?}");
        assert!(messages[0].contains("cannot be generic"));
        assert!(messages[1].contains("unknown argument `bogus`"));
        assert!(messages[2].contains("`async fn`"));
        assert!(messages[3].contains("`&mut self`"));
        assert!(messages
            .iter()
            .any(|m| m.contains("steps return `StepResult`")));
        assert!(messages
            .iter()
            .any(|m| m.contains("two `Content` parameters") && m.contains("`x`")));
    }
}
