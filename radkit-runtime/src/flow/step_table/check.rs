//! The rules a step table must follow, checked once by `StepTable::new`: the macro form's rules
//! (`radkit-macros/src/valid.rs`), written with the builder methods instead of the attributes, plus the
//! rules on declared `goes_to` edges. This module only reads rows; it never builds or runs a skill.

use super::Step;

/// One rule a step table breaks. The messages follow the macro form's (`radkit-macros/src/valid.rs`),
/// written with the builder methods instead of the attributes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TableProblem {
    /// The table has no rows: the first user message has nowhere to go.
    NoSteps,
    /// Two rows share a name; step names are state names in the journal.
    DuplicateStep {
        /// The name.
        step: String,
    },
    /// A row is named `__start`, the name of the state before the first message.
    ReservedName,
    /// No row is marked `.start()`.
    NoStartStep {
        /// Every step, in table order.
        steps: Vec<String>,
    },
    /// A second row is marked `.start()`.
    MultipleStartSteps {
        /// The first start step.
        first: String,
        /// The extra one.
        step: String,
    },
    /// A row is both the start step and a resume step.
    StartAndResume {
        /// The row.
        step: String,
    },
    /// A row resumes from itself, so nothing could ever enter it.
    ResumeFromItself {
        /// The row.
        step: String,
    },
    /// A `.resume_from(..)` names no step of the table.
    UnknownResumeTarget {
        /// The row.
        step: String,
        /// The name it gives.
        target: String,
        /// Every step, in table order.
        steps: Vec<String>,
    },
    /// Two rows resume from one step: a reply must have exactly one destination.
    TwoResumeSteps {
        /// The step both resume from.
        target: String,
        /// The row that resumes from it first.
        first: String,
        /// The other row.
        step: String,
    },
    /// A `.goes_to(..)` names no step of the table.
    UnknownGotoTarget {
        /// The row.
        step: String,
        /// The name it gives.
        target: String,
        /// Every step, in table order.
        steps: Vec<String>,
    },
    /// A second row is marked `.interrupt()`: a message that interrupts the task must have exactly
    /// one destination.
    MultipleInterruptSteps {
        /// The first interrupt step.
        first: String,
        /// The extra one.
        step: String,
    },
    /// A `.goes_to(..)` names a resume step, which only the user's reply can enter.
    GotoResumeStep {
        /// The row.
        step: String,
        /// The resume step it names.
        target: String,
        /// The step `target` resumes from.
        from: String,
    },
}

impl std::fmt::Display for TableProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TableProblem::NoSteps => f.write_str(
                "the table has no steps; add at least `Step::new(\"..\", f).start()`",
            ),
            TableProblem::DuplicateStep { step } => write!(
                f,
                "duplicate step `{step}`; rename one of the two rows (step names are state names in the journal)"
            ),
            TableProblem::ReservedName => f.write_str(
                "`__start` is reserved for the state before the first message; rename the step",
            ),
            TableProblem::NoStartStep { steps } => write!(
                f,
                "no start step; mark the step that receives the first message with `.start()` (steps are {})",
                step_list(steps)
            ),
            TableProblem::MultipleStartSteps { first, step } => write!(
                f,
                "multiple start steps; `{first}` is already the start step, so remove `.start()` from `{step}`"
            ),
            TableProblem::MultipleInterruptSteps { first, step } => write!(
                f,
                "multiple interrupt steps; `{first}` already receives the messages that interrupt a task, so remove `.interrupt()` from `{step}`"
            ),
            TableProblem::StartAndResume { step } => write!(
                f,
                "`{step}` cannot be both the start step and a resume step; remove `.start()` or `.resume_from(..)`"
            ),
            TableProblem::ResumeFromItself { step } => write!(
                f,
                "`{step}` cannot resume from itself; name the step whose `await_input` it answers"
            ),
            TableProblem::UnknownResumeTarget {
                step,
                target,
                steps,
            } => write!(
                f,
                "`.resume_from(\"{target}\")` on `{step}`: {}",
                unknown_step(steps, target)
            ),
            TableProblem::TwoResumeSteps {
                target,
                first,
                step,
            } => write!(
                f,
                "two steps resume from `{target}`; `{first}` already does, so remove `.resume_from(\"{target}\")` from `{step}`"
            ),
            TableProblem::UnknownGotoTarget {
                step,
                target,
                steps,
            } => write!(
                f,
                "`.goes_to(..)` on `{step}` names `{target}`: {}",
                unknown_step(steps, target)
            ),
            TableProblem::GotoResumeStep { step, target, from } => write!(
                f,
                "`.goes_to(..)` on `{step}` names `{target}`, which runs on the user's reply to `{from}`; go to a step that runs now, or `await_input` in `{from}`"
            ),
        }
    }
}

impl std::error::Error for TableProblem {}

/// Why [`StepTable::new`](super::StepTable::new) refused a table: every problem it found, in table
/// order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepTableError {
    /// The skill id from its `SkillInfo`.
    pub skill: String,
    /// What is wrong, at least one.
    pub problems: Vec<TableProblem>,
}

impl std::fmt::Display for StepTableError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid step table of skill `{}`", self.skill)?;
        match self.problems.as_slice() {
            [one] => write!(f, ": {one}"),
            many => {
                write!(f, " ({} problems)", many.len())?;
                for problem in many {
                    write!(f, "\n  - {problem}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for StepTableError {}

/// "`a`, `b`, `c`" for messages.
pub(super) fn step_list(steps: &[String]) -> String {
    steps
        .iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// "no step named `x` in this table; steps are `a`, `b`; did you mean `a`?"
fn unknown_step(steps: &[String], name: &str) -> String {
    let hint = nearest(steps, name)
        .map(|n| format!("; did you mean `{n}`?"))
        .unwrap_or_default();
    format!(
        "no step named `{name}` in this table; steps are {}{hint}",
        step_list(steps)
    )
}

/// The known step name closest to `name` (for "did you mean"), by the macro form's measure.
fn nearest<'a>(steps: &'a [String], name: &str) -> Option<&'a str> {
    steps
        .iter()
        .map(|s| (distance(s, name), s.as_str()))
        .filter(|(d, s)| *d <= (s.len().max(name.len()) / 2).max(1))
        .min()
        .map(|(_, s)| s)
}

/// Edit distance counting a swap of two neighbours as one edit (optimal string alignment), so the
/// common `aks` for `ask` is one edit away. A copy of the macro crate's: a proc-macro crate cannot
/// export it.
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

/// Every rule a table breaks, in table order (empty: the table is valid). Each rule is the macro form's,
/// for the same reason (see `radkit-macros/src/valid.rs`).
pub(super) fn problems<S: 'static>(steps: &[Step<S>]) -> Vec<TableProblem> {
    let mut problems = Vec::new();
    // A skill without steps cannot start: the first user message has nowhere to go.
    if steps.is_empty() {
        return vec![TableProblem::NoSteps];
    }
    // Step names are state names in the journal: two rows with one name could not be told apart, and
    // every rule below looks rows up by name.
    for (i, step) in steps.iter().enumerate() {
        // Each duplicated name once, at its second row.
        if steps[..i].iter().filter(|s| s.name == step.name).count() == 1 {
            problems.push(TableProblem::DuplicateStep {
                step: step.name.to_owned(),
            });
        }
    }
    if !problems.is_empty() {
        return problems;
    }
    let names: Vec<String> = steps.iter().map(|s| s.name.to_owned()).collect();
    let find = |name: &str| steps.iter().find(|s| s.name == name);
    // `__start` names the state before the first message in the journal.
    if find("__start").is_some() {
        problems.push(TableProblem::ReservedName);
    }
    // Exactly one start step: the first user message must have exactly one destination.
    let mut first_start: Option<&str> = None;
    for step in steps.iter().filter(|s| s.start) {
        match first_start {
            None => first_start = Some(step.name),
            Some(first) => problems.push(TableProblem::MultipleStartSteps {
                first: first.to_owned(),
                step: step.name.to_owned(),
            }),
        }
    }
    if first_start.is_none() {
        problems.push(TableProblem::NoStartStep {
            steps: names.clone(),
        });
    }
    // At most one interrupt step: a message that interrupts the task has one destination.
    let mut interrupts = steps.iter().filter(|s| s.interrupt);
    if let Some(first) = interrupts.next() {
        for step in interrupts {
            problems.push(TableProblem::MultipleInterruptSteps {
                first: first.name.to_owned(),
                step: step.name.to_owned(),
            });
        }
    }
    for (i, step) in steps.iter().enumerate() {
        let Some(target) = step.resume_from else {
            continue;
        };
        // A start step runs on the first message, a resume step on a reply: one row cannot be both.
        if step.start {
            problems.push(TableProblem::StartAndResume {
                step: step.name.to_owned(),
            });
        }
        // The target must exist, and not be the row itself: a resume step is only entered by a reply
        // to its target, so resuming from itself it could never be entered at all.
        if target == step.name {
            problems.push(TableProblem::ResumeFromItself {
                step: step.name.to_owned(),
            });
        } else if find(target).is_none() {
            problems.push(TableProblem::UnknownResumeTarget {
                step: step.name.to_owned(),
                target: target.to_owned(),
                steps: names.clone(),
            });
        }
        // One resume step per asking step: a reply must have exactly one destination.
        if let Some(other) = steps[..i].iter().find(|s| s.resume_from == Some(target)) {
            problems.push(TableProblem::TwoResumeSteps {
                target: target.to_owned(),
                first: other.name.to_owned(),
                step: step.name.to_owned(),
            });
        }
    }
    for step in steps {
        for &target in step.goes_to {
            match find(target) {
                // An edge must end at a step, or the graph would draw (and a task take) a dead end.
                None => problems.push(TableProblem::UnknownGotoTarget {
                    step: step.name.to_owned(),
                    target: target.to_owned(),
                    steps: names.clone(),
                }),
                // A resume step runs on the user's reply, with the reply: going to it directly would
                // run it without one (the macro form's `goto!` rule).
                Some(to) => {
                    if let Some(from) = to.resume_from {
                        problems.push(TableProblem::GotoResumeStep {
                            step: step.name.to_owned(),
                            target: target.to_owned(),
                            from: from.to_owned(),
                        });
                    }
                }
            }
        }
    }
    problems
}
