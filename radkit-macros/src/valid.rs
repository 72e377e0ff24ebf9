//! Rules across steps. Each rule says why it exists.

use crate::ast::Skill;

fn push(errors: &mut Option<syn::Error>, e: syn::Error) {
    match errors {
        Some(all) => all.combine(e),
        None => *errors = Some(e),
    }
}

/// "`a`, `b`, `c`" for messages.
pub fn step_list(skill: &Skill) -> String {
    skill
        .steps
        .iter()
        .map(|s| format!("`{}`", s.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Check the skill; `call_site` is where "missing …" errors point.
pub fn validate(skill: &Skill, call_site: proc_macro2::Span) -> Option<syn::Error> {
    let mut errors = None;
    // A skill without steps cannot start: the first user message has nowhere to go.
    if skill.steps.is_empty() {
        push(
            &mut errors,
            syn::Error::new(
                call_site,
                "this #[flow_skill] impl has no #[step] methods; add at least `#[step(start)]`",
            ),
        );
        return errors;
    }
    // Step names are state names in the journal: two steps with one name could not be told apart.
    for (i, step) in skill.steps.iter().enumerate() {
        if skill.steps[..i].iter().any(|s| s.name == step.name) {
            push(
                &mut errors,
                syn::Error::new(
                    step.ident.span(),
                    format!("duplicate step `{}`; step names must be unique", step.name),
                ),
            );
            return errors;
        }
    }
    // Exactly one start step: the first user message must have exactly one destination.
    let starts: Vec<_> = skill
        .steps
        .iter()
        .filter(|s| s.attrs.start.is_some())
        .collect();
    match starts.as_slice() {
        [] => push(
            &mut errors,
            syn::Error::new(call_site, format!("no #[step(start)] method; mark the step that receives the first message (steps are {})", step_list(skill))),
        ),
        [_] => {}
        [first, rest @ ..] => {
            for extra in rest {
                let span = extra.attrs.start.unwrap_or(extra.span);
                push(&mut errors, syn::Error::new(span, format!("multiple #[step(start)] methods; `{}` is already the start step", first.name)));
            }
        }
    }
    for (i, step) in skill.steps.iter().enumerate() {
        let Some(target) = &step.attrs.resume_from else {
            continue;
        };
        // A start step runs on the first message, a resume step on a reply: one step cannot be both.
        if let Some(start) = step.attrs.start {
            push(&mut errors, syn::Error::new(start, format!("`{}` cannot be both the start step and a resume step; remove `start` or `resume_from`", step.name)));
        }
        // The target must exist: a reply is routed by the step that asked.
        let name = target.value();
        if !skill.steps.iter().any(|s| s.name == name) {
            push(
                &mut errors,
                syn::Error::new_spanned(
                    target,
                    format!(
                        "`resume_from` names no step of this impl: `{name}`; steps are {}",
                        step_list(skill)
                    ),
                ),
            );
        }
        // One resume step per asking step: a reply must have exactly one destination.
        if let Some(other) = skill.steps[..i].iter().find(|s| {
            s.attrs
                .resume_from
                .as_ref()
                .is_some_and(|t| t.value() == name)
        }) {
            push(
                &mut errors,
                syn::Error::new_spanned(
                    target,
                    format!(
                        "two steps resume from `{name}`; `{}` already does",
                        other.name
                    ),
                ),
            );
        }
    }
    errors
}

/// The known step name closest to `name` (for "did you mean").
pub fn nearest<'a>(skill: &'a Skill, name: &str) -> Option<&'a str> {
    skill
        .steps
        .iter()
        .map(|s| (distance(&s.name, name), s.name.as_str()))
        .filter(|(d, s)| *d <= (s.len().max(name.len()) / 2).max(1))
        .min()
        .map(|(_, s)| s)
}

fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            cur.push(
                (prev[j] + usize::from(ca != *cb))
                    .min(prev[j + 1] + 1)
                    .min(cur[j] + 1),
            );
        }
        prev = cur;
    }
    prev[b.len()]
}
