//! `radkit graph` draws every skill the binary serves: macro skills from their generated graph, step
//! tables from their declared edges, and for a reducer a statement of what cannot be drawn.

use std::process::{Command, Output};

fn graph(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_radkit"))
        .arg("graph")
        .args(args)
        .output()
        .unwrap()
}

fn chart(skill: &str) -> String {
    let out = graph(&[skill]);
    assert!(
        out.status.success(),
        "graph {skill}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("flowchart TD\n"), "{text}");
    text
}

#[test]
fn graph_list_names_the_six_demo_skills() {
    let out = graph(&["--list"]);
    assert!(out.status.success());
    let listed: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split('\t').next().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        listed,
        [
            "research_loop_v2",
            "ticker",
            "research_table",
            "research_reducer",
            "report",
            "conformance"
        ]
    );
}

#[test]
fn the_macro_and_step_table_forms_draw_the_same_edges() {
    let edges = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.contains("-->") || l.contains("-.->"))
            .map(str::to_owned)
            .collect()
    };
    let macros = chart("research_loop_v2");
    let table = chart("research_table");
    for edge in [
        "research -->|goto| critique",
        "critique -->|goto| research",
        "human_input -->|goto| research",
        "critique -.->|await_input / reply| human_input",
    ] {
        assert!(macros.contains(edge), "{macros}");
    }
    assert_eq!(edges(&macros), edges(&table));
}

#[test]
fn registered_and_added_demo_skills_are_drawn() {
    assert!(chart("ticker").contains("tick -->|goto| tick"));
    assert!(chart("report").contains("__start --> write"));
    assert!(chart("conformance").contains("start -.->|await_input / reply| reply"));
}

#[test]
fn a_reducer_chart_says_what_cannot_be_drawn() {
    let text = chart("research_reducer");
    assert!(
        text.contains("%% `research_reducer` is an explicit reducer: its transitions are code in `FlowSkill::on_event`, so they cannot be drawn"),
        "{text}"
    );
}

#[test]
fn an_unknown_skill_lists_the_served_ones() {
    let out = graph(&["nope"]);
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.starts_with("error: this program serves no skill `nope`; it serves research_loop_v2, ticker, research_table, research_reducer, report, conformance"),
        "{err}"
    );
}
