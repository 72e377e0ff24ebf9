//! Stage 3: rules across steps (one start step, known and unique `resume_from` targets, unique
//! names). Each rule says why it exists. Rules inside one signature live in `sig`.

use crate::ast::{push, Skill};

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
                    format!("duplicate step `{}`; rename one of the two methods (step names are state names in the journal)", step.name),
                ),
            );
            return errors;
        }
    }
    // `__start` names the state before the first message in the journal.
    if let Some(step) = skill.steps.iter().find(|s| s.name == "__start") {
        push(
            &mut errors,
            syn::Error::new(
                step.ident.span(),
                "`__start` is reserved for the state before the first message; rename the step",
            ),
        );
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
        if name == step.name {
            // A resume step is only entered by a reply to its target; resuming from itself, it could
            // never be entered at all.
            push(
                &mut errors,
                syn::Error::new_spanned(
                    target,
                    format!("`{name}` cannot resume from itself; name the step whose `await_input!` it answers"),
                ),
            );
        } else if !skill.steps.iter().any(|s| s.name == name) {
            push(
                &mut errors,
                syn::Error::new_spanned(target, unknown_step(skill, &name)),
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

/// "no step named `x` in this impl; steps are `a`, `b`; did you mean `a`?"
pub fn unknown_step(skill: &Skill, name: &str) -> String {
    let hint = nearest(skill, name)
        .map(|n| format!("; did you mean `{n}`?"))
        .unwrap_or_default();
    format!(
        "no step named `{name}` in this impl; steps are {}{hint}",
        step_list(skill)
    )
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

/// Edit distance counting a swap of two neighbours as one edit (optimal string alignment), so the
/// common `aks` for `ask` is one edit away.
fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ast::from_syn;
    use syn::parse_quote;

    fn messages(mut item: syn::ItemImpl) -> Vec<String> {
        let (skill, errors) = from_syn(&mut item);
        assert!(errors.is_none());
        validate(&skill, proc_macro2::Span::call_site())
            .map(|e| e.into_iter().map(|e| e.to_string()).collect())
            .unwrap_or_default()
    }

    #[test]
    fn one_start_step_and_known_unique_resume_targets() {
        let ok = messages(parse_quote! {
            impl S {
                #[step(start)] async fn a(&self) -> StepResult { todo!() }
                #[step(resume_from = "a")] async fn b(&self, r: Content) -> StepResult { todo!() }
            }
        });
        assert!(ok.is_empty(), "{ok:?}");
        let bad = messages(parse_quote! {
            impl S {
                #[step(start)] async fn ask(&self) -> StepResult { todo!() }
                #[step(start)] async fn other(&self) -> StepResult { todo!() }
                #[step(resume_from = "aks")] async fn b(&self, r: Content) -> StepResult { todo!() }
                #[step(resume_from = "c")] async fn c(&self, r: Content) -> StepResult { todo!() }
            }
        });
        assert_eq!(
            bad,
            [
                "multiple #[step(start)] methods; `ask` is already the start step",
                "no step named `aks` in this impl; steps are `ask`, `other`, `b`, `c`; did you mean `ask`?",
                "`c` cannot resume from itself; name the step whose `await_input!` it answers",
            ]
        );
    }

    #[test]
    fn reserved_and_raw_names() {
        let bad = messages(parse_quote! {
            impl S {
                #[step(start)] async fn r#type(&self) -> StepResult { todo!() }
                #[step(resume_from = "type")] async fn __start(&self) -> StepResult { todo!() }
            }
        });
        assert_eq!(
            bad,
            ["`__start` is reserved for the state before the first message; rename the step"]
        );
    }

    #[test]
    fn missing_start_lists_the_steps() {
        let bad = messages(parse_quote! {
            impl S {
                #[step] async fn a(&self) -> StepResult { todo!() }
                #[step] async fn b(&self) -> StepResult { todo!() }
            }
        });
        assert_eq!(
            bad,
            ["no #[step(start)] method; mark the step that receives the first message (steps are `a`, `b`)"]
        );
    }

    #[test]
    fn nearest_name_is_suggested_only_when_close() {
        let mut item: syn::ItemImpl = parse_quote! {
            impl S {
                #[step(start)] async fn research(&self) -> StepResult { todo!() }
                #[step] async fn critique(&self) -> StepResult { todo!() }
            }
        };
        let (skill, _) = from_syn(&mut item);
        assert_eq!(nearest(&skill, "critque"), Some("critique"));
        assert_eq!(nearest(&skill, "reserch"), Some("research"));
        assert_eq!(nearest(&skill, "zzz"), None);
    }
}
