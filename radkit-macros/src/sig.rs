//! Stage 2b: the rules for one step's signature, and the classification of its parameters.
//!
//! Allowed: `async fn name(&self, [ctx: &StepCtx,] params…) -> StepResult`. Type rules that need the
//! compiler (payloads are serde, start parameters are `Default`) are checked by generated code at the
//! user's types (see `expand`).

use syn::{FnArg, ImplItemFn, Pat, ReturnType, Type};

use crate::ast::{last_ident, push, Param, Role};

fn is_ctx(ty: &Type) -> bool {
    matches!(ty, Type::Reference(r) if r.mutability.is_none() && last_ident(&r.elem).is_some_and(|i| i == "StepCtx"))
}

/// `Content`, `radkit::model::Content`: the user's message.
pub fn is_content(ty: &Type) -> bool {
    matches!(ty, Type::Path(p) if p.qself.is_none()
        && p.path.segments.last().is_some_and(|s| s.ident == "Content" && s.arguments.is_none()))
}

/// `StepResult`, `radkit::StepResult`, `radkit::flow::StepResult` (without arguments).
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
        let role = if is_ctx(&ty) {
            if ctx_seen {
                push(
                    &mut errors,
                    syn::Error::new_spanned(&pt.ty, "a step takes at most one `&StepCtx`"),
                );
            }
            ctx_seen = true;
            Role::Ctx
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
            // Payloads are journaled and outlive the step: they must be owned values.
            match &ty {
                Type::Reference(r) => push(
                    &mut errors,
                    syn::Error::new_spanned(
                        r.and_token,
                        "step payloads are journaled and must be owned; take the value, not a reference",
                    ),
                ),
                Type::ImplTrait(t) => push(
                    &mut errors,
                    syn::Error::new_spanned(
                        t,
                        "step payloads need a concrete type; `impl Trait` cannot be journaled",
                    ),
                ),
                _ => {}
            }
            Role::Payload
        };
        params.push(Param { ty, role });
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
                    ctx: &radkit::StepCtx,
                    msg: Content,
                    n: u32,
                ) -> radkit::StepResult {
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
