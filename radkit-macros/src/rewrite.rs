//! Rewrites `goto!("step", payload)` and `await_input!(slot = .., message = .., carry = ..)` inside a
//! step into typed transitions of the hidden state enum (async-trait style `visit_mut`). A wrong target
//! becomes a `compile_error!` at the target's span; a wrong payload type is a type error at the payload.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::visit_mut::{self, VisitMut};
use syn::{Expr, LitStr, Macro, Stmt, Token};

use crate::ast::{Skill, Step};
use crate::valid::{nearest, step_list};

/// The enum variant of a step: `human_input` -> `HumanInput`.
pub fn variant(name: &str) -> syn::Ident {
    let mut out = String::new();
    let mut upper = true;
    for c in name.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    syn::Ident::new(&format!("Step{out}"), Span::call_site())
}

struct GotoArgs {
    target: LitStr,
    payload: Option<Expr>,
}

impl Parse for GotoArgs {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let target: LitStr = input.parse()?;
        let payload = if input.parse::<Option<Token![,]>>()?.is_some() && !input.is_empty() {
            Some(input.parse()?)
        } else {
            None
        };
        let _ = input.parse::<Option<Token![,]>>()?;
        Ok(GotoArgs { target, payload })
    }
}

struct KeyValue {
    key: syn::Ident,
    value: Expr,
}

impl Parse for KeyValue {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let key = input.parse()?;
        input.parse::<Token![=]>()?;
        Ok(KeyValue {
            key,
            value: input.parse()?,
        })
    }
}

/// How a step's macros are rewritten.
pub enum Mode<'a> {
    /// Into transitions of `state` (the enum), through `krate`.
    Typed {
        skill: &'a Skill,
        step: &'a Step,
        state: &'a syn::Ident,
        krate: &'a TokenStream,
    },
    /// Into `unreachable!()`: the skill has other errors; keep the item compiling without cascades.
    Neutral,
}

pub struct Rewriter<'a> {
    pub mode: Mode<'a>,
    /// `goto!` targets seen (for the step graph).
    pub gotos: Vec<String>,
}

fn error(span: Span, message: String) -> Expr {
    syn::parse_quote_spanned! {span=> ::core::compile_error!(#message) }
}

impl Rewriter<'_> {
    /// Re-invoke the user's own macro path with the typed expression (so their `use` of the macro
    /// stays used); the runtime's `macro_rules!` passes `@__radkit_typed` expressions through.
    fn rewrite(&mut self, mac: &Macro) -> Option<Expr> {
        let typed = self.typed(mac)?;
        let path = &mac.path;
        Some(syn::parse_quote!(#path!(@__radkit_typed #typed)))
    }

    fn typed(&mut self, mac: &Macro) -> Option<Expr> {
        let name = mac.path.segments.last()?.ident.to_string();
        if name != "goto" && name != "await_input" {
            return None;
        }
        let Mode::Typed {
            skill,
            step,
            state,
            krate,
        } = &self.mode
        else {
            return Some(syn::parse_quote! { ::core::unreachable!() });
        };
        let span = mac.path.span();
        if name == "goto" {
            let args: GotoArgs = match mac.parse_body() {
                Ok(a) => a,
                Err(e) => {
                    return Some(error(
                        e.span(),
                        format!("{e}; write `goto!(\"step\", payload)`"),
                    ))
                }
            };
            let target_name = args.target.value();
            let Some(target) = skill.steps.iter().find(|s| s.name == target_name) else {
                let hint = nearest(skill, &target_name)
                    .map(|n| format!("; did you mean `{n}`?"))
                    .unwrap_or_default();
                return Some(error(
                    args.target.span(),
                    format!(
                        "no step named `{target_name}` in this impl; steps are {}{hint}",
                        step_list(skill)
                    ),
                ));
            };
            if let Some(from) = &target.attrs.resume_from {
                return Some(error(
                    args.target.span(),
                    format!("`{target_name}` runs on the user's reply to `{}`; `goto!` a step that runs now, or `await_input!` in `{}`", from.value(), from.value()),
                ));
            }
            self.gotos.push(target_name.clone());
            let v = variant(&target_name);
            let payload = args
                .payload
                .map(|p| quote!(#p))
                .unwrap_or_else(|| quote_spanned!(span=> ()));
            let pspan = payload.span();
            let ctor = quote_spanned!(pspan=> #state::#v(#payload));
            return Some(syn::parse_quote! {
                ::core::result::Result::Ok(#krate::__private::Transition::goto(#ctor))
            });
        }
        let pairs = match mac.parse_body_with(Punctuated::<KeyValue, Token![,]>::parse_terminated) {
            Ok(p) => p,
            Err(e) => {
                return Some(error(
                    e.span(),
                    format!(
                    "{e}; write `await_input!(slot = \"..\", message = \"..\", carry = payload)`"
                ),
                ))
            }
        };
        let (mut slot, mut message, mut carry) = (None, None, None);
        for kv in pairs {
            match kv.key.to_string().as_str() {
                "slot" => slot = Some(kv.value),
                "message" => message = Some(kv.value),
                "carry" => carry = Some(kv.value),
                other => return Some(error(kv.key.span(), format!("unknown argument `{other}` in `await_input!`; expected `slot`, `message` or `carry`"))),
            }
        }
        let Some(slot) = slot else {
            return Some(error(
                span,
                "`await_input!` needs `slot = \"..\"`".to_owned(),
            ));
        };
        let Some(message) = message else {
            return Some(error(
                span,
                "`await_input!` needs `message = \"..\"`".to_owned(),
            ));
        };
        let Some(resume) = skill.steps.iter().find(|s| {
            s.attrs
                .resume_from
                .as_ref()
                .is_some_and(|t| t.value() == step.name)
        }) else {
            return Some(error(
                span,
                format!("`await_input!` in step `{}`, but no step resumes from it; add a step with #[step(resume_from = \"{}\")]", step.name, step.name),
            ));
        };
        let v = variant(&resume.name);
        let carry = carry
            .map(|c| quote!(#c))
            .unwrap_or_else(|| quote_spanned!(span=> ()));
        let cspan = carry.span();
        let ctor = quote_spanned!(cspan=> #state::#v(#carry));
        Some(syn::parse_quote! {
            ::core::result::Result::Ok(#krate::__private::Transition::await_input(#ctor, #slot, #message))
        })
    }
}

impl VisitMut for Rewriter<'_> {
    fn visit_expr_mut(&mut self, expr: &mut Expr) {
        if let Expr::Macro(m) = expr {
            if let Some(new) = self.rewrite(&m.mac) {
                *expr = new;
                return;
            }
        }
        visit_mut::visit_expr_mut(self, expr);
    }

    fn visit_stmt_mut(&mut self, stmt: &mut Stmt) {
        if let Stmt::Macro(m) = stmt {
            if let Some(new) = self.rewrite(&m.mac) {
                *stmt = Stmt::Expr(new, m.semi_token);
                return;
            }
        }
        visit_mut::visit_stmt_mut(self, stmt);
    }
}
