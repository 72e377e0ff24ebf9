//! Stage 2b: the rules for one step's signature, and the classification of its parameters.
//!
//! Allowed: `async fn name(&self, [ctx: &StepCtx,] params…) -> StepResult`. Type rules that need the
//! compiler (payloads are serde, start parameters are `Default`) are checked by generated code at the
//! user's types (see `expand`).

use syn::spanned::Spanned;
use syn::{FnArg, ImplItemFn, Pat, ReturnType, Type};

use crate::ast::{last_ident, push, Param, Role};

/// `StepCtx`, `radkit::flow::StepCtx` (any form: by value, `&`, `&mut`).
fn names_ctx(ty: &Type) -> bool {
    last_ident(ty).is_some_and(|i| i == "StepCtx")
}

/// A type that may be `StepCtx` under another name (`use radkit::flow::StepCtx as Ctx;`, a `type`
/// alias): a plain path without generic arguments, other than the primitives and the owned types a
/// payload usually is. A macro cannot resolve names; for these the expansion asks the compiler.
pub fn may_be_ctx_alias(ty: &Type) -> bool {
    const NOT_CTX: &[&str] = &[
        "str", "bool", "char", "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32",
        "i64", "i128", "isize", "f32", "f64", "String", "Content", "Value", "Self",
    ];
    match ty {
        Type::Path(p) => {
            p.qself.is_none()
                && p.path.segments.iter().all(|s| s.arguments.is_none())
                && p.path
                    .segments
                    .last()
                    .is_some_and(|s| s.ident != "StepCtx" && !NOT_CTX.iter().any(|n| s.ident == n))
        }
        Type::Group(g) => may_be_ctx_alias(&g.elem),
        Type::Paren(p) => may_be_ctx_alias(&p.elem),
        _ => false,
    }
}

/// `Content`, `radkit::model::Content`: the user's message.
pub fn is_content(ty: &Type) -> bool {
    matches!(ty, Type::Path(p) if p.qself.is_none()
        && p.path.segments.last().is_some_and(|s| s.ident == "Content" && s.arguments.is_none()))
}

/// `StepResult` or `radkit::flow::StepResult` (without arguments).
fn is_step_result(ty: &Type) -> bool {
    matches!(ty, Type::Path(p) if p.qself.is_none()
        && p.path.segments.last().is_some_and(|s| s.ident == "StepResult" && s.arguments.is_none()))
}

/// Check a step's signature and classify its parameters. All problems of one step are reported.
pub fn check(method: &ImplItemFn, resume: bool) -> syn::Result<Vec<Param>> {
    let sig = &method.sig;
    let mut errors = None;
    // The engine awaits every step; a plain `fn` could not issue journaled commands.
    if sig.asyncness.is_none() {
        push(
            &mut errors,
            syn::Error::new_spanned(sig.fn_token, "steps must be `async fn`"),
        );
    }
    // A step is called with its payload only: there is nothing to fill a generic parameter with.
    if !sig.generics.params.is_empty() {
        push(
            &mut errors,
            syn::Error::new_spanned(
                &sig.generics.params,
                "steps cannot be generic; use concrete payload types",
            ),
        );
    }
    // One skill value serves every task at once, so steps only borrow it.
    match sig.inputs.first() {
        Some(FnArg::Receiver(r)) if r.reference.is_some() && r.mutability.is_none() => {}
        Some(FnArg::Receiver(r)) if r.mutability.is_some() => push(
            &mut errors,
            syn::Error::new_spanned(
                r,
                "steps take `&self`, not `&mut self`; many tasks of one skill run at once, so keep per-task data in the payload",
            ),
        ),
        Some(FnArg::Receiver(r)) => push(
            &mut errors,
            syn::Error::new_spanned(r, "steps take `&self`; write `&self`"),
        ),
        _ => push(
            &mut errors,
            syn::Error::new_spanned(
                &sig.ident,
                format!(
                    "step `{}` has no `&self` receiver; add `&self` as its first parameter",
                    sig.ident
                ),
            ),
        ),
    }
    // The return type is rewritten to the skill's own `StepResult<State>`; only the alias can be.
    match &sig.output {
        ReturnType::Type(_, ty) if is_step_result(ty) => {}
        ReturnType::Type(_, ty) => push(
            &mut errors,
            syn::Error::new_spanned(
                ty,
                "steps return `StepResult`; change the return type to `StepResult`",
            ),
        ),
        ReturnType::Default => push(
            &mut errors,
            syn::Error::new_spanned(
                &sig.ident,
                format!("step `{}` returns nothing; add `-> StepResult`", sig.ident),
            ),
        ),
    }
    let mut params = Vec::new();
    let mut content: Option<String> = None;
    let mut ctx_seen = false;
    for input in sig.inputs.iter().skip(1) {
        let FnArg::Typed(pt) = input else { continue };
        let name = match &*pt.pat {
            Pat::Ident(p) => p.ident.to_string(),
            Pat::Wild(_) => "_".to_owned(),
            other => {
                // The payload is rebuilt from the journal and passed by position.
                push(
                    &mut errors,
                    syn::Error::new_spanned(
                        other,
                        "step parameters must be plain names (`payload: T`); destructure inside the step",
                    ),
                );
                "_".to_owned()
            }
        };
        let ty = (*pt.ty).clone();
        let mut alias = false;
        let role = if names_ctx(&ty) {
            if ctx_seen {
                push(
                    &mut errors,
                    syn::Error::new_spanned(&pt.ty, "a step takes at most one `&StepCtx`"),
                );
            }
            ctx_seen = true;
            // The context is lent to the step for one visit; only a shared borrow of it is a
            // parameter. Any other form is still the context, not a payload, so no other step's
            // `goto!` is reported for it.
            let how = match &ty {
                Type::Reference(r) if r.mutability.is_some() => {
                    Some("borrows the step context mutably, but steps share it")
                }
                Type::Reference(_) => None,
                _ => Some("takes the step context by value, but a step only borrows it"),
            };
            if let Some(how) = how {
                push(
                    &mut errors,
                    syn::Error::new_spanned(
                        &pt.ty,
                        format!("`{name}` {how}; write `{name}: &StepCtx`"),
                    ),
                );
            }
            Role::Ctx
        } else if let Type::Reference(r) = &ty {
            if let Some(m) = r.mutability {
                let (and, elem) = (r.and_token, &r.elem);
                let owned = crate::codec::canonical(quote::quote!(#elem));
                push(
                    &mut errors,
                    syn::Error::new_spanned(
                        quote::quote!(#and #m),
                        format!("step parameters cannot be `&mut`; take the payload by value (`{name}: {owned}`), or the step context as `ctx: &StepCtx`"),
                    ),
                );
                Role::Payload
            } else if may_be_ctx_alias(&r.elem) {
                // Either the context under another name or a reference payload: the compiler tells,
                // through `rules::StepContext` at the type (whose message is the payload rule's).
                alias = true;
                Role::Ctx
            } else {
                // Payloads are journaled and outlive the step: they must be owned values.
                push(
                    &mut errors,
                    syn::Error::new_spanned(
                        r.and_token,
                        "step payloads are journaled and must be owned; take the value, not a reference",
                    ),
                );
                Role::Payload
            }
        } else if is_content(&ty) {
            // One message arrives per event: a second `Content` would have nothing to receive.
            if let Some(first) = &content {
                push(
                    &mut errors,
                    syn::Error::new_spanned(
                        &pt.ty,
                        format!("two `Content` parameters; a step receives one user message, in `{first}`"),
                    ),
                );
            }
            content = Some(name.clone());
            if resume {
                Role::Reply
            } else {
                Role::Payload
            }
        } else {
            if let Type::ImplTrait(t) = &ty {
                push(
                    &mut errors,
                    syn::Error::new_spanned(
                        t,
                        "step payloads need a concrete type; `impl Trait` cannot be journaled",
                    ),
                );
            }
            Role::Payload
        };
        params.push(Param {
            ty,
            role,
            name,
            pat_span: pt.pat.span(),
            alias,
        });
    }
    match errors {
        Some(e) => Err(e),
        None => Ok(params),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use syn::parse_quote;

    fn messages(method: ImplItemFn, resume: bool) -> Vec<String> {
        match check(&method, resume) {
            Ok(_) => Vec::new(),
            Err(e) => e.into_iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn allowed_signatures_pass() {
        for method in [
            parse_quote!(
                async fn a(&self) -> StepResult {
                    todo!()
                }
            ),
            parse_quote!(
                async fn a(&self, ctx: &StepCtx) -> StepResult {
                    todo!()
                }
            ),
            parse_quote!(
                async fn a(
                    &self,
                    ctx: &radkit::flow::StepCtx,
                    msg: Content,
                    n: u32,
                ) -> radkit::flow::StepResult {
                    todo!()
                }
            ),
            parse_quote!(
                async fn a(
                    &self,
                    mut history: Vec<String>,
                    _: Content,
                    ctx: &StepCtx,
                ) -> radkit::flow::StepResult {
                    todo!()
                }
            ),
        ] {
            assert_eq!(messages(method, false), Vec::<String>::new());
        }
    }

    #[test]
    fn resume_content_is_the_reply() {
        let params = check(
            &parse_quote!(
                async fn a(&self, carry: (String, u8), reply: Content) -> StepResult {
                    todo!()
                }
            ),
            true,
        )
        .unwrap_or_default();
        let roles: Vec<Role> = params.iter().map(|p| p.role).collect();
        assert_eq!(roles, [Role::Payload, Role::Reply]);
    }

    #[test]
    fn the_context_is_recognised_in_any_form() {
        let roles = |method: ImplItemFn| -> (Vec<(Role, bool)>, Vec<String>) {
            match check(&method, false) {
                Ok(params) => (
                    params.iter().map(|p| (p.role, p.alias)).collect(),
                    Vec::new(),
                ),
                Err(e) => (Vec::new(), e.into_iter().map(|e| e.to_string()).collect()),
            }
        };
        // Another name for the context is taken as the context, checked by the compiler.
        let (ok, _) = roles(parse_quote!(
            async fn a(&self, ctx: &Ctx, text: String) -> StepResult {
                todo!()
            }
        ));
        assert_eq!(ok, [(Role::Ctx, true), (Role::Payload, false)]);
        for (method, expected) in [
            (
                parse_quote!(
                    async fn a(&self, ctx: StepCtx) -> StepResult {
                        todo!()
                    }
                ),
                "write `ctx: &StepCtx`",
            ),
            (
                parse_quote!(
                    async fn a(&self, c: &mut radkit::flow::StepCtx) -> StepResult {
                        todo!()
                    }
                ),
                "write `c: &StepCtx`",
            ),
            (
                parse_quote!(
                    async fn a(&self, ctx: &mut Ctx) -> StepResult {
                        todo!()
                    }
                ),
                "cannot be `&mut`",
            ),
        ] {
            let (_, errors) = roles(method);
            assert!(
                errors.len() == 1 && errors[0].contains(expected),
                "{expected}: {errors:?}"
            );
        }
    }

    #[test]
    fn wrong_signatures_say_the_fix() {
        let cases: [(ImplItemFn, &str); 8] = [
            (
                parse_quote!(
                    fn a(&self) -> StepResult {
                        todo!()
                    }
                ),
                "steps must be `async fn`",
            ),
            (
                parse_quote!(
                    async fn a(&mut self) -> StepResult {
                        todo!()
                    }
                ),
                "not `&mut self`",
            ),
            (
                parse_quote!(
                    async fn a(self) -> StepResult {
                        todo!()
                    }
                ),
                "write `&self`",
            ),
            (
                parse_quote!(
                    async fn a(ctx: &StepCtx) -> StepResult {
                        todo!()
                    }
                ),
                "add `&self`",
            ),
            (
                parse_quote!(
                    async fn a(&self) {}
                ),
                "add `-> StepResult`",
            ),
            (
                parse_quote!(
                    async fn a(&self) -> Result<(), ()> {
                        todo!()
                    }
                ),
                "change the return type",
            ),
            (
                parse_quote!(
                    async fn a(&self, text: &str) -> StepResult {
                        todo!()
                    }
                ),
                "must be owned",
            ),
            (
                parse_quote!(
                    async fn a<T>(&self, t: T) -> StepResult {
                        todo!()
                    }
                ),
                "cannot be generic",
            ),
        ];
        for (method, expected) in cases {
            let got = messages(method, false);
            assert!(
                got.len() == 1 && got[0].contains(expected),
                "{expected}: {got:?}"
            );
        }
    }
}
