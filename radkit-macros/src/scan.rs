//! Stage 2c: what step bodies do, read before anything is rewritten: the `goto!` targets and the
//! `await_input!`s of each step (whose rules are in `valid`), and two mistakes that compile but
//! misbehave, reported here: a transition written as a statement, and a direct call of another step.

use proc_macro2::{Delimiter, Span, TokenStream, TokenTree};
use quote::quote;
use syn::spanned::Spanned;
use syn::visit_mut::{self, VisitMut};
use syn::{Expr, LitStr, Macro, Stmt};

use crate::ast::Skill;
use crate::rewrite::{is_ours, GotoArgs};

/// What a step body does with `goto!`, `await_input!` and the other steps, read before anything is
/// rewritten; `valid` holds the rules about the targets.
#[derive(Default)]
pub struct Scan {
    /// `goto!` targets, as written.
    pub gotos: Vec<LitStr>,
    /// The `await_input!` paths.
    pub awaits: Vec<Span>,
    /// Transitions written as statements, and direct calls of other steps.
    pub errors: Option<syn::Error>,
}

// Input: a step body.
// Output: its `goto!` targets and `await_input!`s (also inside other macros), and an error for each
// of two mistakes that compile but misbehave: `goto!(..);` as a statement, which builds a transition
// and drops it, and `self.other_step(..)`, which runs another step without a transition, so the
// journal and the step graph never see the move.
pub fn scan(skill: &Skill, block: &syn::Block) -> Scan {
    let mut scanner = Scanner {
        skill,
        scan: Scan::default(),
    };
    scanner.visit_block_mut(&mut block.clone());
    scanner.scan
}

struct Scanner<'a> {
    skill: &'a Skill,
    scan: Scan,
}

impl Scanner<'_> {
    fn error(&mut self, e: syn::Error) {
        crate::ast::push(&mut self.scan.errors, e);
    }

    fn record(&mut self, mac: &Macro) {
        match is_ours(mac) {
            Some("goto") => {
                if let Ok(args) = mac.parse_body::<GotoArgs>() {
                    self.scan.gotos.push(args.target);
                }
            }
            Some(_) => self.scan.awaits.push(mac.path.span()),
            None => self.tokens(mac.tokens.clone()),
        }
    }

    // `goto!("b", x);`: the transition is built and dropped, the step goes on.
    fn statement(&mut self, mac: &Macro) {
        let message = match is_ours(mac) {
            Some("goto") => {
                let target = mac
                    .parse_body::<GotoArgs>()
                    .map(|a| a.target.value())
                    .unwrap_or_else(|_| "..".to_owned());
                format!("`goto!` does not jump by itself; write `return goto!(\"{target}\", ..);`, or end the step with it (no `;`)")
            }
            _ => "`await_input!` does not wait by itself; write `return await_input!(..);`, or end the step with it (no `;`)".to_owned(),
        };
        let (path, bang) = (&mac.path, mac.bang_token);
        self.error(syn::Error::new_spanned(quote!(#path #bang), message));
    }

    fn call(&mut self, method: &syn::Ident) {
        let name = syn::ext::IdentExt::unraw(method).to_string();
        let Some(step) = self.skill.step(&name) else {
            return;
        };
        let fix = match &step.attrs.resume_from {
            Some(from) => format!(
                "it runs on the user's reply to `{from}`, so end `{from}` with `await_input!(..)`",
                from = from.value()
            ),
            None => format!("write `return goto!(\"{name}\", ..)`"),
        };
        self.error(syn::Error::new(
            method.span(),
            format!("calling step `{name}` directly skips the journal's transition and the step graph; {fix}"),
        ));
    }

    // The same inside another macro's tokens: `goto ! (..)`, `await_input ! (..)`, `self . step (`.
    fn tokens(&mut self, tokens: TokenStream) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        for (i, tt) in tokens.iter().enumerate() {
            match tt {
                TokenTree::Group(g) => self.tokens(g.stream()),
                TokenTree::Ident(ident) => {
                    let next = |k: usize| tokens.get(i + k);
                    let bang = matches!(next(1), Some(TokenTree::Punct(p)) if p.as_char() == '!');
                    if bang && (ident == "goto" || ident == "await_input") {
                        if let Some(TokenTree::Group(body)) = next(2) {
                            let mac: Option<Macro> = syn::parse2(quote!(#ident ! #body)).ok();
                            if let Some(mac) = mac {
                                self.record(&mac);
                            }
                        }
                    }
                    let dot = matches!(next(1), Some(TokenTree::Punct(p)) if p.as_char() == '.');
                    if ident == "self" && dot {
                        if let (Some(TokenTree::Ident(method)), Some(TokenTree::Group(g))) =
                            (next(2), next(3))
                        {
                            if g.delimiter() == Delimiter::Parenthesis {
                                self.call(method);
                            }
                        }
                    }
                }
                TokenTree::Punct(_) | TokenTree::Literal(_) => {}
            }
        }
    }
}

fn is_self(expr: &Expr) -> bool {
    matches!(expr, Expr::Path(p) if p.qself.is_none() && p.path.is_ident("self"))
}

impl VisitMut for Scanner<'_> {
    fn visit_stmt_mut(&mut self, stmt: &mut Stmt) {
        let statement = match stmt {
            Stmt::Macro(m) if m.semi_token.is_some() => Some(m.mac.clone()),
            Stmt::Expr(Expr::Macro(m), Some(_)) => Some(m.mac.clone()),
            _ => None,
        };
        if let Some(mac) = statement.filter(|m| is_ours(m).is_some()) {
            self.statement(&mac);
        }
        visit_mut::visit_stmt_mut(self, stmt);
    }

    fn visit_macro_mut(&mut self, mac: &mut Macro) {
        self.record(mac);
    }

    fn visit_expr_method_call_mut(&mut self, call: &mut syn::ExprMethodCall) {
        if is_self(&call.receiver) {
            self.call(&call.method);
        }
        visit_mut::visit_expr_method_call_mut(self, call);
    }

    fn visit_expr_call_mut(&mut self, call: &mut syn::ExprCall) {
        // `Self::step(self, ..)` and `Skill::step(self, ..)`.
        if let Expr::Path(p) = &*call.func {
            let segments = &p.path.segments;
            if p.qself.is_none()
                && segments.len() == 2
                && (segments[0].ident == "Self" || segments[0].ident == self.skill.ident)
            {
                self.call(&segments[1].ident);
            }
        }
        visit_mut::visit_expr_call_mut(self, call);
    }

    // An item declared inside the step (a nested `fn`, an `impl`) has its own `self` and its own
    // return value, so a transition in it can never be the step's: it is an error there (rustc would
    // say "can't use `Self` from outer item" and suggest code that does not compile). A
    // `macro_rules!` is not such an item: its body is rewritten where the step expands it.
    fn visit_item_mut(&mut self, item: &mut syn::Item) {
        if matches!(item, syn::Item::Macro(_)) {
            return;
        }
        let (place, helper) = nested_place(item);
        let mut nested = Nested::default();
        nested.visit_item_mut(item);
        for mac in nested.found {
            // Still the step's intent: its targets are checked and its question counts as asked, so
            // that this error is the only one.
            self.record(&mac);
            let which = is_ours(&mac).unwrap_or("goto");
            let fix = match which {
                "goto" => format!(
                    "return the payload from {helper} and write `goto!(\"{}\", ..)` in the step",
                    mac.parse_body::<GotoArgs>()
                        .map(|a| a.target.value())
                        .unwrap_or_else(|_| "..".to_owned())
                ),
                _ => format!(
                    "return the carry from {helper} and write `await_input!(..)` in the step"
                ),
            };
            let (path, bang) = (&mac.path, mac.bang_token);
            self.error(syn::Error::new_spanned(
                quote!(#path #bang),
                format!("`{which}!` cannot be used inside {place}: a transition must be the step's own return value; {fix}"),
            ));
        }
    }
}

/// How a message names a nested item, and the thing to return a value from.
fn nested_place(item: &syn::Item) -> (String, String) {
    match item {
        syn::Item::Fn(f) => (
            format!("the nested fn `{}`", f.sig.ident),
            format!("`{}`", f.sig.ident),
        ),
        syn::Item::Impl(_) => ("a nested impl block".to_owned(), "its method".to_owned()),
        syn::Item::Trait(t) => (
            format!("the nested trait `{}`", t.ident),
            "its method".to_owned(),
        ),
        syn::Item::Mod(m) => (
            format!("the nested module `{}`", m.ident),
            "its function".to_owned(),
        ),
        _ => ("a nested item".to_owned(), "it".to_owned()),
    }
}

/// The `goto!`s and `await_input!`s inside a nested item, also inside other macros' bodies.
#[derive(Default)]
struct Nested {
    found: Vec<Macro>,
}

impl Nested {
    fn tokens(&mut self, tokens: TokenStream) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        for (i, tt) in tokens.iter().enumerate() {
            match tt {
                TokenTree::Group(g) => self.tokens(g.stream()),
                TokenTree::Ident(ident) if ident == "goto" || ident == "await_input" => {
                    if let (Some(TokenTree::Punct(bang)), Some(TokenTree::Group(body))) =
                        (tokens.get(i + 1), tokens.get(i + 2))
                    {
                        if bang.as_char() == '!' {
                            if let Ok(mac) = syn::parse2::<Macro>(quote!(#ident #bang #body)) {
                                self.record(&mac);
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn record(&mut self, mac: &Macro) {
        if is_ours(mac).is_some() {
            self.found.push(mac.clone());
        } else {
            self.tokens(mac.tokens.clone());
        }
    }
}

impl VisitMut for Nested {
    fn visit_macro_mut(&mut self, mac: &mut Macro) {
        self.record(mac);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ast::from_syn;
    use syn::parse_quote;

    fn skill() -> Skill {
        let mut item: syn::ItemImpl = parse_quote! {
            impl S {
                #[step(start)] async fn research(&self, msg: Content) -> StepResult { todo!() }
                #[step] async fn critique(&self, draft: String) -> StepResult { todo!() }
                #[step(resume_from = "critique")] async fn human_input(&self, d: String, r: Content) -> StepResult { todo!() }
            }
        };
        from_syn(&mut item).0
    }

    fn scanned(block: syn::Block) -> (Vec<String>, Vec<String>) {
        let skill = skill();
        let scan = scan(&skill, &block);
        let gotos = scan.gotos.iter().map(|g| g.value()).collect();
        let errors = scan
            .errors
            .map(|e| e.into_iter().map(|e| e.to_string()).collect())
            .unwrap_or_default();
        (gotos, errors)
    }

    #[test]
    fn scan_finds_targets_also_inside_other_macros() {
        let (gotos, errors) = scanned(parse_quote!({
            if a {
                return goto!("critique", x);
            }
            tokio::select! { _ = b => goto!("research", y), }
        }));
        assert_eq!(gotos, ["critique", "research"]);
        assert!(errors.is_empty(), "{errors:?}");
    }

    #[test]
    fn transitions_inside_nested_items_are_errors_at_the_macro() {
        let (gotos, errors) = scanned(parse_quote!({
            fn later(n: u32) -> StepResult {
                goto!("critique", n)
            }
            impl Helper {
                fn ask(&self) -> StepResult {
                    tokio::select! { _ = x => await_input!(slot = "s", message = "m"), }
                }
            }
            // Rewritten where it expands, like a closure.
            macro_rules! again {
                () => {
                    goto!("research", y)
                };
            }
            let f = |n| goto!("critique", n);
            later(1)
        }));
        assert_eq!(gotos, ["critique", "critique"]);
        assert_eq!(
            errors,
            [
                "`goto!` cannot be used inside the nested fn `later`: a transition must be the step's own return value; return the payload from `later` and write `goto!(\"critique\", ..)` in the step",
                "`await_input!` cannot be used inside a nested impl block: a transition must be the step's own return value; return the carry from its method and write `await_input!(..)` in the step",
            ]
        );
    }

    #[test]
    fn scan_reports_statements_and_direct_calls() {
        let (_, errors) = scanned(parse_quote!({
            goto!("critique", x);
            let _ = self.critique(x).await;
            Self::human_input(self, d, r).await;
            tokio::select! { _ = b => self.research(m).await, }
            self.helper();
            goto!("critique", x)
        }));
        assert_eq!(
            errors,
            [
                "`goto!` does not jump by itself; write `return goto!(\"critique\", ..);`, or end the step with it (no `;`)",
                "calling step `critique` directly skips the journal's transition and the step graph; write `return goto!(\"critique\", ..)`",
                "calling step `human_input` directly skips the journal's transition and the step graph; it runs on the user's reply to `critique`, so end `critique` with `await_input!(..)`",
                "calling step `research` directly skips the journal's transition and the step graph; write `return goto!(\"research\", ..)`",
            ]
        );
    }
}
