//! `car graph …`: the project's context graph. The commands are the project capability's
//! (`project::commands::graph`); this face shows a scan's progress and renders the outcome.

use super::{open_project, render_typed, Env, Printed};
use crate::project::commands::graph::{self, command_name, GraphCommand, GraphOutcome};
use crate::project::graph::{
    Added, Content, EdgeOrigin, Exported, Linked, NodeEdges, Progress, ScanReport,
};

/// How a person reads a graph command's outcome.
fn render(done: &GraphOutcome) -> String {
    match done {
        GraphOutcome::Scanned(report) => human_scan(report),
        GraphOutcome::Edges(edges) => human_edges(edges),
        GraphOutcome::Linked(linked) => human_link(linked),
        GraphOutcome::Added(added) => human_add_node(added),
        GraphOutcome::Exported(exported) => human_export(exported),
    }
}

/// Runs a graph command and returns what it prints.
pub(crate) fn execute(env: &Env, command: GraphCommand) -> Printed {
    let name = command_name(&command);
    // A scan's progress on stderr: a bar for a person, JSON Lines under --json.
    let reporter = matches!(command, GraphCommand::Scan { .. })
        .then(|| super::progress::Reporter::new("graph.scan", env.json));
    let progress = |stage: Progress| {
        let Some(reporter) = &reporter else { return };
        match stage {
            Progress::Walked(n) => reporter.update("walk", n as u64, None),
            Progress::Writing(done, total) => {
                reporter.update("write", done as u64, Some(total as u64))
            }
            Progress::Resolving => reporter.update("resolve", 0, None),
        }
    };
    let result =
        open_project(env).and_then(|project| Ok(graph::run(&project, &command, &progress)?));
    if let Some(reporter) = &reporter {
        reporter.finish();
    }
    render_typed(env.json, name, result, render)
}

fn human_scan(report: &ScanReport) -> String {
    let languages = report
        .by_language
        .iter()
        .map(|(lang, n)| format!("{lang} {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut out = format!(
        "Scanned {}: {} files ({} parsed, {} unchanged, {} removed), {} edges (+{} -{}) in {} ms.\n",
        report.root,
        report.files_seen,
        report.parsed,
        report.unchanged,
        report.removed,
        report.edges,
        report.edges_added,
        report.edges_removed,
        report.duration_ms,
    );
    if !languages.is_empty() {
        out.push_str(&format!("  {languages}\n"));
    }
    if report.kept_for_links > 0 {
        out.push_str(&format!(
            "  {} deleted file(s) kept because manual links touch them.\n",
            report.kept_for_links
        ));
    }
    out
}

fn human_edges(edges: &NodeEdges) -> String {
    let node = &edges.node;
    let mut out = format!("{} ({}", node.key, node.kind);
    if let Some(lang) = &node.lang {
        out.push_str(&format!(", {lang}"));
    }
    out.push_str(")\n");
    let mut any = false;
    for (list, arrow) in [(&edges.outgoing, "->"), (&edges.incoming, "<-")] {
        for edge in list.iter().flatten() {
            any = true;
            out.push_str(&format!(
                "  {arrow} {}  {}{}\n",
                edge.key,
                edge.kind,
                if edge.origin == EdgeOrigin::Manual {
                    " (manual)"
                } else {
                    ""
                }
            ));
        }
    }
    if !any {
        out.push_str("  (no edges)\n");
    }
    out
}

fn human_link(linked: &Linked) -> String {
    let line = format!("{} -> {} ({})", linked.src, linked.dst, linked.kind);
    if linked.created {
        format!("Linked {line}.\n")
    } else {
        format!("{line} existed; it is a manual link now.\n")
    }
}

fn human_add_node(added: &Added) -> String {
    let node = &added.node;
    if added.created {
        format!("Added node {} ({}).\n", node.key, node.kind)
    } else {
        format!("Node {} ({}) exists.\n", node.key, node.kind)
    }
}

fn human_export(exported: &Exported) -> String {
    match &exported.content {
        Some(Content::Text(content)) => content.clone(),
        // The structure as its JSON, pretty-printed.
        Some(Content::Graph(dump)) => format!(
            "{}\n",
            serde_json::to_value(dump)
                .and_then(|value| serde_json::to_string_pretty(&value))
                .unwrap_or_default()
        ),
        None => format!(
            "Wrote {} nodes and {} edges as {} to {}.\n",
            exported.nodes,
            exported.edges,
            exported.format.name(),
            exported
                .output
                .as_deref()
                .map(|path| path.display().to_string())
                .unwrap_or_default()
        ),
    }
}
