//! Parse `#[flow_skill(..)]` and `#[step(..)]` arguments into typed structs that keep their spans.

use proc_macro2::Span;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Expr, ExprArray, ExprLit, Lit, LitStr, Meta, Path, Token};

/// `#[flow_skill(..)]` arguments.
#[derive(Default)]
pub struct SkillAttrs {
    pub id: Option<LitStr>,
    pub name: Option<LitStr>,
    pub description: Option<LitStr>,
    pub version: Option<LitStr>,
    pub tags: Vec<LitStr>,
    pub examples: Vec<LitStr>,
    pub input_modes: Vec<LitStr>,
    pub output_modes: Vec<LitStr>,
    pub krate: Option<Path>,
    /// `register = false`: no inventory registration (the skill is served explicitly).
    pub register: Option<syn::LitBool>,
    /// `while_working = "refuse" | "queue"`: what a message sent while a task works does (an
    /// interrupting skill marks its `#[step(interrupt)]` instead).
    pub while_working: Option<LitStr>,
    /// `answer = "message" | "task"`: a task this skill runs answers its client with its completion
    /// message (A2A's direct message answer) or, the default, with the task.
    pub answer: Option<LitStr>,
    /// True when any argument was given (a bare `#[flow_skill]` takes the struct's metadata).
    pub any: bool,
    /// The first argument's key, for errors about the arguments as a whole.
    pub first_span: Option<Span>,
}

const SKILL_KEYS: &str = "`id`, `name`, `description`, `version`, `tags`, `examples`, `input_modes`, `output_modes`, `while_working`, `answer`, `register` or `crate`";

fn string(expr: &Expr) -> syn::Result<LitStr> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => Ok(s.clone()),
        other => Err(syn::Error::new_spanned(
            other,
            "expected a string literal; put the value in quotes: `\"..\"`",
        )),
    }
}

// A version: a number (`version = 2`: versions of one skill served side by side are ordered by
// it) or a string (`version = "2024-06"`), recorded with every task as its text.
fn version(expr: &Expr) -> syn::Result<LitStr> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Int(n), ..
        }) => match n.base10_parse::<u64>() {
            Ok(v) if n.suffix().is_empty() => Ok(LitStr::new(&v.to_string(), n.span())),
            _ => Err(syn::Error::new_spanned(
                n,
                "expected a version number without a suffix, such as `version = 2`",
            )),
        },
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => Ok(s.clone()),
        other => Err(syn::Error::new_spanned(
            other,
            "expected a version number (`version = 2`) or a string literal (`version = \"2024-06\"`)",
        )),
    }
}

fn strings(expr: &Expr) -> syn::Result<Vec<LitStr>> {
    match expr {
        Expr::Array(ExprArray { elems, .. }) => elems.iter().map(string).collect(),
        other => Err(syn::Error::new_spanned(
            other,
            "expected a list of string literals: `[\"a\", \"b\"]`",
        )),
    }
}

// An id names the skill in task records, the agent card and `skillId` metadata: an empty one names
// nothing and one with whitespace cannot be written there unquoted. The engine applies the same rule
// (`registry::id_problem`) to ids that do not come from a literal.
fn id_error(lit: &LitStr) -> syn::Result<()> {
    let id = lit.value();
    if id.is_empty() {
        return Err(syn::Error::new_spanned(
            lit,
            "skill id must not be empty; write `id = \"my_skill\"`",
        ));
    }
    if id.chars().any(char::is_whitespace) {
        let suggestion = id.split_whitespace().collect::<Vec<_>>().join("_");
        return Err(syn::Error::new_spanned(
            lit,
            format!(
                "skill id `{id}` contains whitespace; write it as one word, such as `{suggestion}`"
            ),
        ));
    }
    Ok(())
}

impl SkillAttrs {
    pub fn from_tokens(tokens: proc_macro2::TokenStream) -> syn::Result<Self> {
        let metas =
            syn::parse::Parser::parse2(Punctuated::<Meta, Token![,]>::parse_terminated, tokens)?;
        let mut attrs = SkillAttrs::default();
        let mut errors: Option<syn::Error> = None;
        for meta in metas {
            attrs.any = true;
            if attrs.first_span.is_none() {
                attrs.first_span = Some(syn::spanned::Spanned::span(meta.path()));
            }
            let result = (|| -> syn::Result<()> {
                let nv = match &meta {
                    Meta::NameValue(nv) => nv,
                    other => {
                        return Err(syn::Error::new_spanned(
                            other,
                            format!(
                            "expected `key = value` in #[flow_skill(..)]; keys are {SKILL_KEYS}"
                        ),
                        ))
                    }
                };
                let key = nv
                    .path
                    .get_ident()
                    .map(ToString::to_string)
                    .unwrap_or_default();
                match key.as_str() {
                    "id" => {
                        let lit = string(&nv.value)?;
                        let problem = id_error(&lit);
                        attrs.id = Some(lit);
                        problem?;
                    }
                    "name" => attrs.name = Some(string(&nv.value)?),
                    "description" => attrs.description = Some(string(&nv.value)?),
                    "version" => attrs.version = Some(version(&nv.value)?),
                    "tags" => attrs.tags = strings(&nv.value)?,
                    "examples" => attrs.examples = strings(&nv.value)?,
                    "input_modes" => attrs.input_modes = strings(&nv.value)?,
                    "output_modes" => attrs.output_modes = strings(&nv.value)?,
                    "register" => match &nv.value {
                        Expr::Lit(ExprLit {
                            lit: Lit::Bool(b), ..
                        }) => attrs.register = Some(b.clone()),
                        other => {
                            return Err(syn::Error::new_spanned(
                                other,
                                "expected `true` or `false`; write `register = false`",
                            ))
                        }
                    },
                    "crate" => {
                        let lit = string(&nv.value)?;
                        attrs.krate = Some(lit.parse()?);
                    }
                    "answer" => {
                        let lit = string(&nv.value)?;
                        match lit.value().as_str() {
                            "message" | "task" => attrs.answer = Some(lit),
                            _ => return Err(syn::Error::new_spanned(
                                &lit,
                                "unknown `answer`; expected `\"message\"` (a task answers its client with its completion message) or `\"task\"` (the default)",
                            )),
                        }
                    }
                    "while_working" => {
                        let lit = string(&nv.value)?;
                        match lit.value().as_str() {
                            "refuse" | "queue" => attrs.while_working = Some(lit),
                            "interrupt" => return Err(syn::Error::new_spanned(
                                &lit,
                                "a skill is interrupted by messages sent while a task works when one of its steps is marked #[step(interrupt)]; mark that step instead",
                            )),
                            _ => return Err(syn::Error::new_spanned(
                                &lit,
                                "unknown `while_working` choice; expected `\"refuse\"` or `\"queue\"` (or mark a step #[step(interrupt)])",
                            )),
                        }
                    }
                    _ => {
                        return Err(syn::Error::new_spanned(
                            &nv.path,
                            format!(
                            "unknown argument `{key}` in #[flow_skill(..)]; expected {SKILL_KEYS}"
                        ),
                        ))
                    }
                }
                Ok(())
            })();
            if let Err(e) = result {
                match &mut errors {
                    Some(all) => all.combine(e),
                    None => errors = Some(e),
                }
            }
        }
        match errors {
            Some(e) => Err(e),
            None => Ok(attrs),
        }
    }
}

/// `#[step(..)]` arguments.
#[derive(Default)]
pub struct StepAttrs {
    pub start: Option<Span>,
    /// `interrupt`: the step a message sent while the task works runs.
    pub interrupt: Option<Span>,
    pub resume_from: Option<LitStr>,
    /// Errors in the arguments; the valid ones above are still recorded so that one bad key does not
    /// also report "no start step".
    pub errors: Option<syn::Error>,
}

impl Parse for StepAttrs {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut attrs = StepAttrs::default();
        let metas = Punctuated::<Meta, Token![,]>::parse_terminated(input)?;
        for meta in metas {
            let error = match &meta {
                Meta::Path(p) if p.is_ident("start") => {
                    attrs.start = Some(syn::spanned::Spanned::span(p));
                    None
                }
                Meta::Path(p) if p.is_ident("interrupt") => {
                    attrs.interrupt = Some(syn::spanned::Spanned::span(p));
                    None
                }
                Meta::NameValue(nv) if nv.path.is_ident("resume_from") => match string(&nv.value) {
                    Ok(s) => {
                        attrs.resume_from = Some(s);
                        None
                    }
                    Err(e) => Some(e),
                },
                other => {
                    let key = match other {
                        Meta::Path(p) => p.clone(),
                        Meta::List(l) => l.path.clone(),
                        Meta::NameValue(nv) => nv.path.clone(),
                    };
                    let name = key
                        .get_ident()
                        .map(ToString::to_string)
                        .unwrap_or_else(|| "..".to_owned());
                    Some(syn::Error::new_spanned(key, format!("unknown argument `{name}` in #[step(..)]; expected `start`, `interrupt` or `resume_from = \"..\"`")))
                }
            };
            if let Some(e) = error {
                match &mut attrs.errors {
                    Some(all) => all.combine(e),
                    None => attrs.errors = Some(e),
                }
            }
        }
        Ok(attrs)
    }
}
