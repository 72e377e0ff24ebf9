//! Stage 3: rules across steps (one start step that receives the message, known and unique
//! `resume_from` and `goto!` targets, unique names). Each rule says why it exists. Rules inside one
//! signature live in `sig`; a rule whose answer depends on another item (another impl block of the
//! type) becomes a `probe` the compiler finishes.

use crate::ast::{push, Skill};
use crate::probe::Probe;
use crate::sig::is_content;

/// "`a`, `b`, `c`" for messages.
pub fn step_list(skill: &Skill) -> String {
    skill
        .steps
        .iter()
        .map(|s| format!("`{}`", s.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Check the skill; `call_site` is where "missing …" errors point. Returns the errors and the probes.
pub fn validate(skill: &Skill, call_site: proc_macro2::Span) -> (Option<syn::Error>, Vec<Probe>) {
    let mut errors = None;
    let mut probes = Vec::new();
    // A skill without steps cannot start: the first user message has nowhere to go.
    if skill.steps.is_empty() {
        push(
            &mut errors,
            syn::Error::new(
                call_site,
                "this #[flow_skill] impl has no #[step] methods; add at least `#[step(start)]`",
            ),
        );
        return (errors, probes);
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
            return (errors, probes);
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
    // Exactly one start step: the first user message must have exactly one destination. None here
    // may mean the start step is in another impl block of the type: a probe tells.
    let starts: Vec<_> = skill
        .steps
        .iter()
        .filter(|s| s.attrs.start.is_some())
        .collect();
    match starts.as_slice() {
        [] => probes.push(Probe::NoStart {
            span: call_site,
            steps: step_list(skill),
            alone: format!("no #[step(start)] method; mark the step that receives the first message (steps are {})", step_list(skill)),
        }),
        [start] => {
            // The first message is the task's request: a start step that cannot receive it would run
            // as if the user had said nothing. `_: Content` says so on purpose.
            if start.sig_ok && !start.params.iter().any(|p| is_content(&p.ty)) {
                push(
                    &mut errors,
                    syn::Error::new(
                        start.ident.span(),
                        format!("start step `{}` has no `Content` parameter, so the first message would be dropped; add `msg: Content`, or `_: Content` to ignore it", start.name),
                    ),
                );
            }
        }
        [first, rest @ ..] => {
            for extra in rest {
                let span = extra.attrs.start.unwrap_or(extra.span);
                push(&mut errors, syn::Error::new(span, format!("multiple #[step(start)] methods; `{}` is already the start step", first.name)));
            }
        }
    }
    // The interrupt step receives a message sent while the task works: one destination, which must
    // take the message (as a start step does) and is entered from any state, never as a reply.
    let interrupts: Vec<_> = skill
        .steps
        .iter()
        .filter(|s| s.attrs.interrupt.is_some())
        .collect();
    if let [first, rest @ ..] = interrupts.as_slice() {
        for extra in rest {
            let span = extra.attrs.interrupt.unwrap_or(extra.span);
            push(&mut errors, syn::Error::new(span, format!("multiple #[step(interrupt)] methods; `{}` already receives the messages that interrupt a task", first.name)));
        }
        for step in &interrupts {
            let span = step.attrs.interrupt.unwrap_or(step.span);
            if step.attrs.resume_from.is_some() {
                push(&mut errors, syn::Error::new(span, format!("`{}` cannot be both the interrupt step and a resume step; remove `interrupt` or `resume_from`", step.name)));
            } else if step.sig_ok && !step.params.iter().any(|p| is_content(&p.ty)) {
                push(&mut errors, syn::Error::new(step.ident.span(), format!("interrupt step `{}` has no `Content` parameter, so the message that interrupts the task would be dropped; add `msg: Content`, or `_: Content` to ignore it", step.name)));
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
        } else if let Some(asker) = skill.step(&name) {
            // A resume step runs on a reply to its target's question: a target that never asks
            // leaves it unreachable (and the graph would draw an edge that cannot happen).
            if asker.awaits.is_empty() {
                push(
                    &mut errors,
                    syn::Error::new_spanned(
                        target,
                        format!(
                            "`{name}` never asks for input (it has no `await_input!`), so `{step}` could never run; end `{name}` with `await_input!(..)`, or remove `resume_from`",
                            step = step.name
                        ),
                    ),
                );
            }
        } else {
            unknown_target(skill, target, &mut errors, &mut probes);
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
    for step in &skill.steps {
        for target in &step.gotos {
            let name = target.value();
            match skill.step(&name) {
                None => unknown_target(skill, target, &mut errors, &mut probes),
                // A resume step runs on a reply, with the reply: entering it now would have none.
                Some(t) => {
                    if let Some(from) = &t.attrs.resume_from {
                        push(
                            &mut errors,
                            syn::Error::new_spanned(
                                target,
                                format!(
                                    "`{name}` runs on the user's reply to `{from}`; `goto!` a step that runs now, or `await_input!` in `{from}`",
                                    from = from.value()
                                ),
                            ),
                        );
                    }
                }
            }
        }
        // A reply is routed to the step that resumes from the one that asked: without it, the
        // reply would have nowhere to go.
        if skill.resume_of(&step.name).is_none() {
            for span in &step.awaits {
                probes.push(Probe::NoResume {
                    span: *span,
                    step: step.name.clone(),
                    alone: format!(
                        "`await_input!` in step `{name}`, but no step resumes from it; add a step with #[step(resume_from = \"{name}\")]",
                        name = step.name
                    ),
                });
            }
        }
    }
    (errors, probes)
}

// A `goto!` or `resume_from` target that is no step here: a method of this block that lacks
// `#[step]` is an error now; anything else may be a step of another impl block of the type.
fn unknown_target(
    skill: &Skill,
    target: &syn::LitStr,
    errors: &mut Option<syn::Error>,
    probes: &mut Vec<Probe>,
) {
    let name = target.value();
    if skill.methods.contains(&name) {
        push(
            errors,
            syn::Error::new_spanned(
                target,
                format!("`{name}` is a method of this impl but not a step; mark it #[step]"),
            ),
        );
    } else {
        probes.push(Probe::UnknownStep {
            span: target.span(),
            name: name.clone(),
            alone: unknown_step(skill, &name),
            quiet: skill.start().is_none(),
        });
    }
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
pub fn distance(a: &str, b: &str) -> usize {
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
        let (errors, probes) = validate(&skill, proc_macro2::Span::call_site());
        let mut all: Vec<String> = errors
            .map(|e| e.into_iter().map(|e| e.to_string()).collect())
            .unwrap_or_default();
        all.extend(probes.iter().filter_map(|p| match p {
            Probe::NoStart { alone, .. }
            | Probe::UnknownStep { alone, .. }
            | Probe::NoResume { alone, .. } => Some(alone.clone()),
            _ => None,
        }));
        all
    }

    #[test]
    fn one_start_step_and_known_unique_resume_targets() {
        let ok = messages(parse_quote! {
            impl S {
                #[step(start)] async fn a(&self, m: Content) -> StepResult { await_input!(slot = "x", message = "?") }
                #[step(resume_from = "a")] async fn b(&self, r: Content) -> StepResult { todo!() }
            }
        });
        assert!(ok.is_empty(), "{ok:?}");
        let bad = messages(parse_quote! {
            impl S {
                #[step(start)] async fn ask(&self, m: Content) -> StepResult { todo!() }
                #[step(start)] async fn other(&self) -> StepResult { todo!() }
                #[step(resume_from = "aks")] async fn b(&self, r: Content) -> StepResult { todo!() }
                #[step(resume_from = "c")] async fn c(&self, r: Content) -> StepResult { todo!() }
            }
        });
        assert_eq!(
            bad,
            [
                "multiple #[step(start)] methods; `ask` is already the start step",
                "`c` cannot resume from itself; name the step whose `await_input!` it answers",
                // A probe: `aks` might be a step of another impl block of `S`.
                "no step named `aks` in this impl; steps are `ask`, `other`, `b`, `c`; did you mean `ask`?",
            ]
        );
    }

    /// A resume step runs on a reply to its target's question: a target without `await_input!`
    /// leaves it unreachable.
    #[test]
    fn a_resume_target_must_ask_for_input() {
        let bad = messages(parse_quote! {
            impl S {
                #[step(start)] async fn a(&self, m: Content) -> StepResult { todo!() }
                #[step(resume_from = "a")] async fn b(&self, r: Content) -> StepResult { todo!() }
            }
        });
        assert_eq!(
            bad,
            ["`a` never asks for input (it has no `await_input!`), so `b` could never run; end `a` with `await_input!(..)`, or remove `resume_from`"]
        );
    }

    #[test]
    fn reserved_and_raw_names() {
        let bad = messages(parse_quote! {
            impl S {
                #[step(start)] async fn r#type(&self, _: Content) -> StepResult { await_input!(slot = "x", message = "?") }
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
    fn start_step_receives_the_message() {
        let bad = messages(parse_quote! {
            impl S {
                #[step(start)] async fn ask(&self, ctx: &StepCtx) -> StepResult { todo!() }
            }
        });
        assert_eq!(
            bad,
            ["start step `ask` has no `Content` parameter, so the first message would be dropped; add `msg: Content`, or `_: Content` to ignore it"]
        );
        let ok = messages(parse_quote! {
            impl S {
                #[step(start)] async fn ask(&self, _: radkit::model::Content) -> StepResult { todo!() }
            }
        });
        assert!(ok.is_empty(), "{ok:?}");
    }

    #[test]
    fn goto_targets_are_steps_of_this_block() {
        let bad = messages(parse_quote! {
            impl S {
                #[step(start)]
                async fn a(&self, m: Content) -> StepResult {
                    if x { return goto!("helper"); }
                    if y { return goto!("b", 1); }
                    if z { return await_input!(slot = "x", message = "?"); }
                    goto!("elsewhere")
                }
                #[step(resume_from = "a")] async fn b(&self, r: Content) -> StepResult { todo!() }
                fn helper(&self) {}
            }
        });
        assert_eq!(
            bad,
            [
                "`helper` is a method of this impl but not a step; mark it #[step]",
                "`b` runs on the user's reply to `a`; `goto!` a step that runs now, or `await_input!` in `a`",
                "no step named `elsewhere` in this impl; steps are `a`, `b`",
            ]
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
