//! A skill's step graph as a Mermaid flowchart, drawn from its [`SkillInfo`] (what `radkit graph`
//! prints). It reads descriptions only; it never builds or runs a skill.

use crate::flow::SkillInfo;

/// The step graph as a Mermaid flowchart: the first message into the start step, `goto` edges, and
/// dotted `await_input` edges from a step to the step its reply resumes.
///
/// What is drawn depends on the authoring surface, and the chart says so in `%%` comment lines where it
/// is not the checked graph:
/// * macros and step tables: their `steps`, checked (the macros read `goto!` at compile time; a step
///   table declares `goes_to` edges and a step leaving them fails its task), so the chart is complete;
/// * an explicit reducer that describes itself ([`SkillInfo::declared_steps`]): those steps, with a note
///   that the skill declares them and nothing checks `on_event` against them;
/// * an explicit reducer without steps: one node for the skill, with a note that its transitions are
///   code in `on_event` and cannot be drawn, and how to get a graph.
pub fn mermaid(info: &SkillInfo) -> String {
    let mut out = String::from("flowchart TD\n");
    if info.steps.is_empty() {
        out.push_str(&format!(
            "    %% `{}` is an explicit reducer: its transitions are code in `FlowSkill::on_event`, so they cannot be drawn\n",
            comment(&info.id)
        ));
        out.push_str("    %% for a graph, write it as a step table (each `Step` declaring its edges with `.goes_to(..)`) or with #[flow_skill] and #[step],\n");
        out.push_str("    %% or describe its states with `SkillInfo::declared_steps`\n");
        out.push_str("    __start([first message])\n");
        out.push_str(&format!(
            "    __skill[\"{} (explicit reducer: transitions in on_event, not drawn)\"]\n",
            label(&info.id)
        ));
        out.push_str("    __start --> __skill\n");
        return out;
    }
    if info.steps_declared {
        out.push_str(&format!(
            "    %% `{}` is an explicit reducer; these steps are declared by the skill in `SkillInfo::declared_steps`,\n",
            comment(&info.id)
        ));
        out.push_str("    %% and nothing checks that `FlowSkill::on_event` follows them\n");
    }
    out.push_str("    __start([first message])\n");
    let ids = node_ids(info);
    let id = |name: &str| {
        ids.iter()
            .find(|(step, _)| step == name)
            .map(|(_, id)| id.clone())
            .unwrap_or_else(|| safe_id(name))
    };
    for step in &info.steps {
        out.push_str(&format!(
            "    {}[\"{}\"]\n",
            id(&step.name),
            label(&step.name)
        ));
    }
    for step in &info.steps {
        let from = id(&step.name);
        if step.start {
            out.push_str(&format!("    __start --> {from}\n"));
        }
        for target in &step.gotos {
            out.push_str(&format!("    {from} -->|goto| {}\n", id(target)));
        }
        if let Some(asker) = &step.resume_from {
            out.push_str(&format!(
                "    {} -.->|await_input / reply| {from}\n",
                id(asker)
            ));
        }
    }
    out
}

/// A Mermaid node id per step: the step's name when it is a safe id, else a safe form of it, made
/// unique with the step's position.
fn node_ids(info: &SkillInfo) -> Vec<(String, String)> {
    let mut ids: Vec<(String, String)> = Vec::new();
    for (i, step) in info.steps.iter().enumerate() {
        let mut id = safe_id(&step.name);
        if ids.iter().any(|(_, taken)| *taken == id) {
            id = format!("{id}_{i}");
        }
        ids.push((step.name.clone(), id));
    }
    ids
}

/// A Mermaid node id for a step name: the name, unless it is a word Mermaid reserves (`end` would close
/// the chart), holds characters an id cannot, or could clash with the chart's own `__` nodes.
fn safe_id(step: &str) -> String {
    const RESERVED: &[&str] = &[
        "end",
        "graph",
        "subgraph",
        "flowchart",
        "style",
        "class",
        "classDef",
        "click",
        "linkStyle",
        "direction",
        "default",
    ];
    let plain = !step.is_empty()
        && step.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !step.starts_with("__");
    if plain && !RESERVED.iter().any(|r| r.eq_ignore_ascii_case(step)) {
        return step.to_owned();
    }
    let cleaned: String = step
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("{}_step", cleaned.trim_start_matches('_'))
}

/// Text for a quoted Mermaid label: `"` would end it, and a line break would split the node.
fn label(text: &str) -> String {
    text.replace('"', "#quot;").replace(['\n', '\r'], " ")
}

/// Text for a `%%` comment line: a line break would end it, and `%%{` would start a directive.
fn comment(text: &str) -> String {
    text.replace(['\n', '\r'], " ").replace(['{', '}'], "")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::StepInfo;

    #[test]
    fn reserved_step_names_get_safe_node_ids() {
        let step = |name: &str, start: bool, gotos: &[&str]| StepInfo {
            name: name.to_owned(),
            start,
            resume_from: None,
            gotos: gotos.iter().map(|g| (*g).to_owned()).collect(),
            payload: "()".to_owned(),
        };
        let mut info = SkillInfo::new("s", "S");
        info.steps = vec![step("begin", true, &["end"]), step("end", false, &[])];
        let chart = mermaid(&info);
        assert!(chart.contains("    end_step[\"end\"]\n"), "{chart}");
        assert!(chart.contains("    begin -->|goto| end_step\n"), "{chart}");
        assert!(!chart.contains(" end\n"), "{chart}");
    }

    struct Table;

    fn run<'a>(
        _: &'a Table,
        _: &'a crate::flow::StepCtx,
        _: crate::flow::step_table::StepInput,
    ) -> futures::future::BoxFuture<'a, crate::flow::StepResult> {
        Box::pin(async { crate::flow::step_table::goto("a", ()) })
    }

    #[test]
    fn a_step_tables_chart_draws_its_declared_edges() {
        use crate::flow::step_table::{Step, StepTable};
        use crate::flow::FlowSkill;
        static STEPS: &[Step<Table>] = &[
            Step::new("a", run)
                .start()
                .takes_user_message()
                .goes_to(&["b"]),
            Step::new("b", run).goes_to(&["a", "b"]),
            Step::new("c", run).resume_from("b").goes_to(&["a"]),
        ];
        let table = StepTable::new(SkillInfo::new("t", "T"), Table, STEPS).unwrap();
        let chart = mermaid(&table.info());
        for line in [
            "    __start --> a\n",
            "    a -->|goto| b\n",
            "    b -->|goto| a\n",
            "    b -->|goto| b\n",
            "    c -->|goto| a\n",
            "    b -.->|await_input / reply| c\n",
        ] {
            assert!(chart.contains(line), "{line:?} missing from\n{chart}");
        }
        assert!(
            !chart.contains("%%"),
            "a checked graph needs no note:\n{chart}"
        );
    }

    #[test]
    fn a_reducers_chart_says_its_transitions_cannot_be_drawn() {
        let chart = mermaid(&SkillInfo::new("research_reducer", "Research (reducer)"));
        assert_eq!(
            chart,
            "flowchart TD\n\
             \x20   %% `research_reducer` is an explicit reducer: its transitions are code in `FlowSkill::on_event`, so they cannot be drawn\n\
             \x20   %% for a graph, write it as a step table (each `Step` declaring its edges with `.goes_to(..)`) or with #[flow_skill] and #[step],\n\
             \x20   %% or describe its states with `SkillInfo::declared_steps`\n\
             \x20   __start([first message])\n\
             \x20   __skill[\"research_reducer (explicit reducer: transitions in on_event, not drawn)\"]\n\
             \x20   __start --> __skill\n"
        );
    }

    #[test]
    fn a_reducers_declared_steps_are_drawn_and_marked_as_declared() {
        let step = |name: &str, start: bool, gotos: &[&str]| StepInfo {
            name: name.to_owned(),
            start,
            resume_from: None,
            gotos: gotos.iter().map(|g| (*g).to_owned()).collect(),
            payload: String::new(),
        };
        let info = SkillInfo::new("r", "R").declared_steps(vec![
            step("Draft", true, &["Critique"]),
            step("Critique", false, &["Draft"]),
        ]);
        let chart = mermaid(&info);
        assert!(
            chart.contains("these steps are declared by the skill"),
            "{chart}"
        );
        assert!(chart.contains("    Draft -->|goto| Critique\n"), "{chart}");
        assert!(chart.contains("    Critique -->|goto| Draft\n"), "{chart}");
    }

    #[test]
    fn step_names_that_are_not_mermaid_ids_get_unique_safe_ids() {
        let step = |name: &str, gotos: &[&str]| StepInfo {
            name: name.to_owned(),
            start: false,
            resume_from: None,
            gotos: gotos.iter().map(|g| (*g).to_owned()).collect(),
            payload: String::new(),
        };
        let mut info = SkillInfo::new("s", "S");
        info.steps = vec![
            step("human-input", &["human input"]),
            step("human input", &["say \"hi\""]),
            step("say \"hi\"", &[]),
        ];
        let chart = mermaid(&info);
        assert!(
            chart.contains("    human_input_step[\"human-input\"]\n"),
            "{chart}"
        );
        assert!(
            chart.contains("    human_input_step_1[\"human input\"]\n"),
            "{chart}"
        );
        assert!(
            chart.contains("    say__hi__step[\"say #quot;hi#quot;\"]\n"),
            "{chart}"
        );
        assert!(
            chart.contains("    human_input_step -->|goto| human_input_step_1\n"),
            "{chart}"
        );
        assert!(
            chart.contains("    human_input_step_1 -->|goto| say__hi__step\n"),
            "{chart}"
        );
    }
}
