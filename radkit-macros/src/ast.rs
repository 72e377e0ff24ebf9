//! The skill model built from the user's impl block (`from_syn`), keeping spans for errors.

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{FnArg, ImplItem, ImplItemFn, ItemImpl, Pat, ReturnType, Type};

use crate::attr::StepAttrs;

/// What a step parameter is.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `&StepCtx`.
    Ctx,
    /// The step's payload (a `Content` of a non-resume step is payload too).
    Payload,
    /// The user's reply (`Content` of a `resume_from` step).
    Reply,
}

pub struct Param {
    pub ty: Type,
    pub role: Role,
}

pub struct Step {
    pub ident: syn::Ident,
    pub name: String,
    pub attrs: StepAttrs,
    pub params: Vec<Param>,
    /// Span of the `#[step]` attribute, for errors about the step as a whole.
    pub span: Span,
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
}

pub struct Skill {
    pub self_ty: Type,
    pub ident: syn::Ident,
    pub steps: Vec<Step>,
    pub docs: String,
}

fn last_ident(ty: &Type) -> Option<&syn::Ident> {
    match ty {
        Type::Path(p) => p.path.segments.last().map(|s| &s.ident),
        Type::Reference(r) => last_ident(&r.elem),
        Type::Group(g) => last_ident(&g.elem),
        _ => None,
    }
}

fn is_ctx(ty: &Type) -> bool {
    matches!(ty, Type::Reference(r) if r.mutability.is_none() && last_ident(&r.elem).is_some_and(|i| i == "StepCtx"))
}

fn is_content(ty: &Type) -> bool {
    matches!(ty, Type::Path(_)) && last_ident(ty).is_some_and(|i| i == "Content")
}

/// Doc comments of attributes, joined.
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

fn push(errors: &mut Option<syn::Error>, e: syn::Error) {
    match errors {
        Some(all) => all.combine(e),
        None => *errors = Some(e),
    }
}

/// Build the model from the impl block, removing `#[step]` attributes from it. Errors are collected;
/// the (cleaned) item stays usable for the fallback output.
pub fn from_syn(item: &mut ItemImpl) -> (Skill, Option<syn::Error>) {
    let mut errors = None;
    let ident = last_ident(&item.self_ty)
        .cloned()
        .unwrap_or_else(|| syn::Ident::new("Skill", item.self_ty.span()));
    let mut steps = Vec::new();
    for impl_item in &mut item.items {
        let ImplItem::Fn(method) = impl_item else {
            continue;
        };
        let Some(pos) = method.attrs.iter().position(|a| a.path().is_ident("step")) else {
            continue;
        };
        let attr = method.attrs.remove(pos);
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
        let params = match signature(method, resume) {
            Ok(p) => p,
            Err(e) => {
                push(&mut errors, e);
                Vec::new()
            }
        };
        steps.push(Step {
            name: method.sig.ident.to_string(),
            ident: method.sig.ident.clone(),
            attrs,
            params,
            span,
        });
    }
    let docs = docs(&item.attrs);
    (
        Skill {
            self_ty: (*item.self_ty).clone(),
            ident,
            steps,
            docs,
        },
        errors,
    )
}

/// Check a step's signature and classify its parameters.
fn signature(method: &ImplItemFn, resume: bool) -> syn::Result<Vec<Param>> {
    let sig = &method.sig;
    let mut errors = None;
    if sig.asyncness.is_none() {
        push(
            &mut errors,
            syn::Error::new_spanned(sig.fn_token, "steps must be `async fn`"),
        );
    }
    match sig.inputs.first() {
        Some(FnArg::Receiver(r)) if r.reference.is_some() && r.mutability.is_none() => {}
        Some(FnArg::Receiver(r)) if r.mutability.is_some() => push(
            &mut errors,
            syn::Error::new_spanned(r, "steps take `&self`, not `&mut self`: many tasks of one skill run at once; keep per-task data in the payload"),
        ),
        Some(FnArg::Receiver(r)) => push(&mut errors, syn::Error::new_spanned(r, "steps take `&self`; write `&self`")),
        _ => push(&mut errors, syn::Error::new_spanned(&sig.ident, format!("step `{}` has no `&self` receiver; add `&self` as its first parameter", sig.ident))),
    }
    match &sig.output {
        ReturnType::Type(_, ty) if matches!(&**ty, Type::Path(p) if p.qself.is_none() && p.path.segments.last().is_some_and(|s| s.ident == "StepResult" && s.arguments.is_none())) =>
            {}
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
                format!(
                    "step `{}` returns nothing; steps return `StepResult`",
                    sig.ident
                ),
            ),
        ),
    }
    let mut params = Vec::new();
    let mut content: Option<&Type> = None;
    let mut ctx_seen = false;
    for input in sig.inputs.iter().skip(1) {
        let FnArg::Typed(pt) = input else { continue };
        if !matches!(&*pt.pat, Pat::Ident(_) | Pat::Wild(_)) {
            push(&mut errors, syn::Error::new_spanned(&pt.pat, "step parameters must be plain names (`payload: T`); destructure inside the step"));
        }
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
            if let Some(first) = content {
                push(
                    &mut errors,
                    syn::Error::new_spanned(&pt.ty, format!("two `Content` parameters; a step receives one user message (the first is `{}`)", quote::quote!(#first))),
                );
            }
            content = Some(&pt.ty);
            if resume {
                Role::Reply
            } else {
                Role::Payload
            }
        } else {
            Role::Payload
        };
        params.push(Param { ty, role });
    }
    match errors {
        Some(e) => Err(e),
        None => Ok(params),
    }
}
