//! Stage 4a: rewrites `goto!("step", payload)` and `await_input!(slot = .., message = .., carry = ..)`
//! inside a step into typed transitions of the hidden state enum (async-trait style `visit_mut`, plus
//! a token walk into the bodies of other macros such as `tokio::select!`). A wrong target becomes a
//! `compile_error!` at the target's span; a wrong payload type is a type error at the payload.

use proc_macro2::{Delimiter, Span, TokenStream, TokenTree};
use quote::{quote, quote_spanned, ToTokens};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::visit_mut::{self, VisitMut};
use syn::{Expr, LitStr, Macro, Stmt, Token};

use crate::ast::{Skill, Step};
use crate::valid::unknown_step;

/// The enum variant of a step: `human_input` -> `HumanInput` (`r#type` -> `Type`).
pub fn variant(name: &str) -> syn::Ident {
    let mut out = String::new();
    let mut upper = true;
    for c in name.trim_start_matches("r#").chars() {
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

/// `goto!("step", payload)`'s arguments.
pub struct GotoArgs {
    /// The target step.
    pub target: LitStr,
    /// The payload, if any.
    pub payload: Option<Expr>,
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
        if !input.is_empty() {
            // A step with several parameters takes them as one tuple.
            return Err(syn::Error::new(
                input.span(),
                format!(
                    "`goto!` takes one payload; write several values as a tuple: `goto!(\"{}\", (a, b))`",
                    target.value()
                ),
            ));
        }
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

struct AwaitArgs {
    slot: Expr,
    message: Expr,
    carry: Option<Expr>,
}

/// Parse `slot = .., message = .., carry = ..` (any order; `carry` may be left out for `()`).
fn await_args(mac: &Macro) -> syn::Result<AwaitArgs> {
    let pairs = mac
        .parse_body_with(Punctuated::<KeyValue, Token![,]>::parse_terminated)
        .map_err(|e| {
            syn::Error::new(
                e.span(),
                format!(
                    "{e}; write `await_input!(slot = \"..\", message = \"..\", carry = payload)`"
                ),
            )
        })?;
    let (mut slot, mut message, mut carry) = (None, None, None);
    for kv in pairs {
        let place = match kv.key.to_string().as_str() {
            "slot" => &mut slot,
            "message" => &mut message,
            "carry" => &mut carry,
            other => {
                return Err(syn::Error::new(
                    kv.key.span(),
                    format!("unknown argument `{other}` in `await_input!`; expected `slot`, `message` or `carry`"),
                ))
            }
        };
        if place.is_some() {
            return Err(syn::Error::new(
                kv.key.span(),
                format!("`{}` is given twice in `await_input!`; keep one", kv.key),
            ));
        }
        *place = Some(kv.value);
    }
    let span = mac.path.span();
    let slot = slot.ok_or_else(|| {
        syn::Error::new(
            span,
            "`await_input!` needs `slot = \"..\"` (the name of the awaited answer)",
        )
    })?;
    let message = message.ok_or_else(|| {
        syn::Error::new(
            span,
            "`await_input!` needs `message = \"..\"` (what to ask the user)",
        )
    })?;
    Ok(AwaitArgs {
        slot,
        message,
        carry,
    })
}

/// How a step's macros are rewritten.
pub enum Mode<'a> {
    /// Into transitions of `state` (the enum), through `krate`.
    Typed {
        skill: &'a Skill,
        step: &'a Step,
        state: &'a TokenStream,
        krate: &'a TokenStream,
    },
    /// The skill has errors elsewhere: keep the item compiling without follow-on errors or warnings.
    /// The arguments stay used (no "unused variable"), the result type is inferred (no type errors).
    Neutral { krate: &'a TokenStream },
}

/// Rewrites one step body (or, in neutral mode, any method body).
pub struct Rewriter<'a> {
    /// Typed or neutral.
    pub mode: Mode<'a>,
    /// `goto!` targets seen (for the step graph).
    pub gotos: Vec<String>,
}

// Input: the path to the state enum (`<Self as FlowSkill>::State`), a step and a payload expression.
// Output: `<Self as FlowSkill>::State::x(payload)`, spanned at the payload: `x` is the step's
// constructor (see `codec::constructors`), declared with the step's name and parameter list, so a
// payload of the wrong type is one error at the payload whose note shows step `x` and its parameters.
fn constructor(state: &TokenStream, step: &Step, payload: TokenStream) -> TokenStream {
    let span = payload.span();
    let mut f = step.ident.clone();
    f.set_span(span);
    // The first and the last token carry the payload's span, so the call's span is the payload's.
    let state: TokenStream = state
        .clone()
        .into_iter()
        .map(|mut tt| {
            tt.set_span(span);
            tt
        })
        .collect();
    quote_spanned!(span=> #state::#f(#payload))
}

fn error(span: Span, message: String) -> Expr {
    syn::parse_quote_spanned! {span=> ::core::compile_error!(#message) }
}

/// `"goto"` or `"await_input"` for our macros (by the last path segment), else `None`.
pub fn is_ours(mac: &Macro) -> Option<&'static str> {
    let last = mac.path.segments.last()?;
    if last.ident == "goto" {
        Some("goto")
    } else if last.ident == "await_input" {
        Some("await_input")
    } else {
        None
    }
}

impl Rewriter<'_> {
    // Input: `goto!("critique", (draft, history))` as the user wrote it (any path to the macro).
    // Output: `goto!(@__radkit_typed Ok(Transition::goto(State::StepCritique((draft, history)))))`:
    // the user's own macro path is invoked again, so their `use radkit::goto` stays used; the
    // runtime's `macro_rules!` passes `@__radkit_typed` expressions through.
    fn rewrite(&mut self, mac: &Macro) -> Option<Expr> {
        let which = is_ours(mac)?;
        let typed = match which {
            "goto" => self.goto(mac),
            _ => self.await_input(mac),
        };
        let path = &mac.path;
        Some(syn::parse_quote!(#path!(@__radkit_typed #typed)))
    }

    fn neutral(krate: &TokenStream, args: Vec<Expr>) -> Expr {
        syn::parse_quote!(#krate::__private::neutral((#(#args,)*)))
    }

    // A `goto!(..);` statement (an error reported by `scan`): as a statement the neutral stand-in
    // would have no type to infer, so it gets `()`.
    fn neutral_statement(&mut self, mac: &Macro) -> Option<Expr> {
        let Mode::Neutral { krate } = &self.mode else {
            return None;
        };
        is_ours(mac)?;
        let path = &mac.path;
        Some(syn::parse_quote!(#path!(@__radkit_typed #krate::__private::neutral::<_, ()>(()))))
    }

    fn goto(&mut self, mac: &Macro) -> Expr {
        let args: GotoArgs = match mac.parse_body() {
            Ok(a) => a,
            // `GotoArgs`' own messages already say the fix (`<problem>; <fix>`); syn's do not.
            Err(e) if e.to_string().contains("; ") => return error(e.span(), e.to_string()),
            Err(e) => return error(e.span(), format!("{e}; write `goto!(\"step\", payload)`")),
        };
        let (skill, state, krate) = match &self.mode {
            Mode::Neutral { krate } => {
                return Self::neutral(krate, args.payload.into_iter().collect())
            }
            Mode::Typed {
                skill,
                state,
                krate,
                ..
            } => (*skill, *state, *krate),
        };
        let target_name = args.target.value();
        let Some(target) = skill.step(&target_name) else {
            return error(args.target.span(), unknown_step(skill, &target_name));
        };
        if let Some(from) = &target.attrs.resume_from {
            return error(
                args.target.span(),
                format!(
                    "`{target_name}` runs on the user's reply to `{from}`; `goto!` a step that runs now, or `await_input!` in `{from}`",
                    from = from.value()
                ),
            );
        }
        self.gotos.push(target_name.clone());
        // The payload's own span goes on the constructor, so a type mismatch points at the payload.
        let payload = match &args.payload {
            Some(p) => p.to_token_stream(),
            None => quote_spanned!(args.target.span()=> ()),
        };
        let ctor = constructor(state, target, payload);
        syn::parse_quote! {
            ::core::result::Result::<_, #krate::__private::StepError>::Ok(
                #krate::__private::Transition::goto(#ctor)
            )
        }
    }

    fn await_input(&mut self, mac: &Macro) -> Expr {
        let args = match await_args(mac) {
            Ok(a) => a,
            Err(e) => return error(e.span(), e.to_string()),
        };
        let (skill, step, state, krate) = match &self.mode {
            Mode::Neutral { krate } => {
                let mut used = vec![args.slot, args.message];
                used.extend(args.carry);
                return Self::neutral(krate, used);
            }
            Mode::Typed {
                skill,
                step,
                state,
                krate,
            } => (*skill, *step, *state, *krate),
        };
        let Some(resume) = skill.resume_of(&step.name) else {
            return error(
                mac.path.span(),
                format!(
                    "`await_input!` in step `{name}`, but no step resumes from it; add a step with #[step(resume_from = \"{name}\")]",
                    name = step.name
                ),
            );
        };
        let carry = match &args.carry {
            Some(c) => c.to_token_stream(),
            None => quote_spanned!(mac.path.span()=> ()),
        };
        let ctor = constructor(state, resume, carry);
        let (slot, message) = (&args.slot, &args.message);
        syn::parse_quote! {
            ::core::result::Result::<_, #krate::__private::StepError>::Ok(
                #krate::__private::Transition::await_input(#ctor, #slot, #message)
            )
        }
    }

    // Input: the tokens of another macro's body, e.g. `tokio::select! { _ = a => goto!("x", p) }`.
    // Output: the same tokens with every `goto!(..)` / `await_input!(..)` (with its path) rewritten.
    fn rewrite_tokens(&mut self, tokens: TokenStream) -> TokenStream {
        let mut out: Vec<TokenTree> = Vec::new();
        let mut iter = tokens.into_iter().peekable();
        while let Some(tt) = iter.next() {
            match tt {
                TokenTree::Ident(ident) if ident == "goto" || ident == "await_input" => {
                    let bang =
                        matches!(iter.peek(), Some(TokenTree::Punct(p)) if p.as_char() == '!');
                    if !bang {
                        out.push(TokenTree::Ident(ident));
                        continue;
                    }
                    let Some(bang) = iter.next() else { break };
                    let Some(TokenTree::Group(body)) = iter.next_if(
                        |t| matches!(t, TokenTree::Group(g) if g.delimiter() != Delimiter::None),
                    ) else {
                        out.push(TokenTree::Ident(ident));
                        out.push(bang);
                        continue;
                    };
                    // Take a leading path (`radkit::`, `::radkit::`) back out of the output.
                    let mut path: Vec<TokenTree> = Vec::new();
                    while let [.., TokenTree::Punct(a), TokenTree::Punct(b)] = out.as_slice() {
                        if a.as_char() != ':' || b.as_char() != ':' {
                            break;
                        }
                        let b = out.pop();
                        let a = out.pop();
                        path.splice(0..0, a.into_iter().chain(b));
                        match out.last() {
                            Some(TokenTree::Ident(_)) => {
                                let seg = out.pop();
                                path.splice(0..0, seg);
                            }
                            _ => break,
                        }
                    }
                    path.push(TokenTree::Ident(ident));
                    let path: TokenStream = path.into_iter().collect();
                    let mac: Option<Macro> = syn::parse2(quote!(#path #bang #body)).ok();
                    match mac.and_then(|m| self.rewrite(&m)) {
                        Some(expr) => out.extend(expr.into_token_stream()),
                        None => out.extend(quote!(#path #bang #body)),
                    }
                }
                TokenTree::Group(g) => {
                    let mut group =
                        proc_macro2::Group::new(g.delimiter(), self.rewrite_tokens(g.stream()));
                    group.set_span(g.span());
                    out.push(TokenTree::Group(group));
                }
                other => out.push(other),
            }
        }
        out.into_iter().collect()
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
            if m.semi_token.is_some() {
                if let Some(new) = self.neutral_statement(&m.mac) {
                    *stmt = Stmt::Expr(new, m.semi_token);
                    return;
                }
            }
            if let Some(new) = self.rewrite(&m.mac) {
                *stmt = Stmt::Expr(new, m.semi_token);
                return;
            }
        }
        visit_mut::visit_stmt_mut(self, stmt);
    }

    fn visit_macro_mut(&mut self, mac: &mut Macro) {
        if is_ours(mac).is_none() {
            mac.tokens = self.rewrite_tokens(std::mem::take(&mut mac.tokens));
        }
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

    fn typed(step: usize, mut block: syn::Block) -> (String, Vec<String>) {
        let skill = skill();
        let state = quote!(State);
        let krate = quote!(::radkit);
        let mut r = Rewriter {
            mode: Mode::Typed {
                skill: &skill,
                step: &skill.steps[step],
                state: &state,
                krate: &krate,
            },
            gotos: Vec::new(),
        };
        r.visit_block_mut(&mut block);
        (block.into_token_stream().to_string(), r.gotos)
    }

    #[test]
    fn goto_becomes_a_typed_transition() {
        let (out, gotos) = typed(0, parse_quote!({ goto!("critique", draft) }));
        assert_eq!(gotos, ["critique"]);
        assert!(
            out.contains("goto ! (@ __radkit_typed :: core :: result :: Result :: < _ , :: radkit :: __private :: StepError > :: Ok (:: radkit :: __private :: Transition :: goto (State :: critique (draft))))"),
            "{out}"
        );
    }

    #[test]
    fn await_input_goes_to_the_resume_step() {
        let (out, _) = typed(
            1,
            parse_quote!({ radkit::await_input!(slot = "note", message = "?", carry = d) }),
        );
        assert!(
            out.contains("radkit :: await_input ! (@ __radkit_typed"),
            "{out}"
        );
        assert!(
            out.contains("Transition :: await_input (State :: human_input (d) , \"note\" , \"?\")"),
            "{out}"
        );
    }

    #[test]
    fn macros_inside_other_macros_are_rewritten() {
        let (out, gotos) = typed(
            0,
            parse_quote!({
                tokio::select! { _ = a => ::radkit::goto!("critique", x), }
            }),
        );
        assert_eq!(gotos, ["critique"]);
        assert!(
            out.contains(":: radkit :: goto ! (@ __radkit_typed"),
            "{out}"
        );
    }

    #[test]
    fn unknown_target_is_an_error_at_the_literal() {
        let (out, _) = typed(0, parse_quote!({ goto!("critque", x) }));
        assert!(out.contains("compile_error ! (\"no step named `critque` in this impl; steps are `research`, `critique`, `human_input`; did you mean `critique`?\")"), "{out}");
    }

    #[test]
    fn neutral_mode_keeps_arguments_used() {
        let krate = quote!(::radkit);
        let mut r = Rewriter {
            mode: Mode::Neutral { krate: &krate },
            gotos: Vec::new(),
        };
        let mut block: syn::Block = parse_quote!({ goto!("nowhere", (a, b)) });
        r.visit_block_mut(&mut block);
        let out = block.into_token_stream().to_string();
        assert!(
            out.contains(
                "goto ! (@ __radkit_typed :: radkit :: __private :: neutral (((a , b) ,)))"
            ),
            "{out}"
        );
    }
}
