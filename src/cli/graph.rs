//! `car graph …`: the project's context graph — scan files and their imports into nodes and
//! edges, list a node's edges, link and add nodes by hand, export the whole graph. `execute`
//! returns what it would print, so an MCP tool can run the same command in-process.

use std::path::{Path, PathBuf};

use clap::{Subcommand, ValueEnum};
use serde::Serialize;

use super::{open_project, render_typed, Env, Failure, Printed};
use crate::project::graph::{
    self, Added, Content, Direction, ExportFormat, Exported, Linked, NodeEdges, Progress,
    ScanReport,
};
use crate::project::Project;

#[derive(Debug, Subcommand)]
pub enum GraphCommand {
    /// Walk the project (honouring .gitignore) and make file nodes and edges from Rust mod/use, Python and JS/TS and Go imports, C includes. A rescan reads only changed files.
    #[command(
        after_help = "Examples:\n  car graph scan\n  car graph scan src          # only nodes under src/\n  car --json graph scan       # the report: files_seen, parsed, unchanged, removed, edges, by_language\n\nFiles are keyed by their path relative to the project root. Hidden files and directories (.git) are skipped."
    )]
    Scan {
        /// The directory to scan: relative to the project root, or absolute inside it. Default: the project root.
        path: Option<PathBuf>,
    },
    /// The edges of a node, sorted: what it imports (out) and what imports it (in).
    #[command(
        after_help = "Examples:\n  car graph edges src/lib.rs\n  car graph edges src/lib.rs --direction in"
    )]
    Edges {
        /// The node: a path relative to the project root (or absolute inside it), or a key from add-node.
        node: String,
        #[arg(long, value_enum, default_value_t = DirectionArg::Both)]
        direction: DirectionArg,
    },
    /// Link two existing nodes by hand; manual links survive every rescan.
    #[command(
        after_help = "Examples:\n  car graph link src/payout.rs ADR-0007 --kind decided-by\n  car graph link web/api.ts server/routes.go --kind calls"
    )]
    Link {
        from: String,
        to: String,
        /// The edge kind: letters, digits, '_', '-' or '.'.
        #[arg(long)]
        kind: String,
    },
    /// Add a node that is not a file: a decision, a concept, a service.
    #[command(
        after_help = "Example:\n  car graph add-node ADR-0007 --kind decision --label \"Payouts run hourly\""
    )]
    AddNode {
        key: String,
        /// The node kind: letters, digits, '_', '-' or '.'.
        #[arg(long)]
        kind: String,
        #[arg(long)]
        label: Option<String>,
    },
    /// Write the whole graph, sorted: JSON, Graphviz dot or a Mermaid flowchart.
    #[command(
        after_help = "Examples:\n  car graph export --format dot -o graph.dot && dot -Tsvg graph.dot > graph.svg\n  car graph export --format mermaid\n  car --json graph export --format dot   # data.content holds the text"
    )]
    Export {
        #[arg(long, value_enum, default_value_t = FormatArg::Json)]
        format: FormatArg,
        /// Write to FILE instead of stdout.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum DirectionArg {
    Out,
    In,
    Both,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum FormatArg {
    Json,
    Dot,
    Mermaid,
}

fn command_name(command: &GraphCommand) -> &'static str {
    match command {
        GraphCommand::Scan { .. } => "graph.scan",
        GraphCommand::Edges { .. } => "graph.edges",
        GraphCommand::Link { .. } => "graph.link",
        GraphCommand::AddNode { .. } => "graph.add-node",
        GraphCommand::Export { .. } => "graph.export",
    }
}

/// What a graph command did, each by its own type (serialized as that type alone).
#[derive(Serialize)]
#[serde(untagged)]
enum Done {
    Scanned(ScanReport),
    Edges(NodeEdges),
    Linked(Linked),
    Added(Added),
    Exported(Exported),
}

impl Done {
    fn render(&self) -> String {
        match self {
            Done::Scanned(report) => human_scan(report),
            Done::Edges(edges) => human_edges(edges),
            Done::Linked(linked) => human_link(linked),
            Done::Added(added) => human_add_node(added),
            Done::Exported(exported) => human_export(exported),
        }
    }
}

/// Runs a graph command and returns what it prints.
pub(crate) fn execute(env: &Env, command: GraphCommand) -> Printed {
    let name = command_name(&command);
    let result = open_project(env).and_then(|project| run(&project, &command, env));
    render_typed(env.json, name, result, Done::render)
}

fn run(project: &Project, command: &GraphCommand, env: &Env) -> Result<Done, Failure> {
    let key = |text: &str| graph::node_key(&project.root, text);
    Ok(match command {
        GraphCommand::Scan { path } => Done::Scanned(scan(project, path.as_deref(), env)?),
        GraphCommand::Edges { node, direction } => {
            let direction = match direction {
                DirectionArg::Out => Direction::Out,
                DirectionArg::In => Direction::In,
                DirectionArg::Both => Direction::Both,
            };
            Done::Edges(project.graph_edges(&key(node)?, direction)?)
        }
        GraphCommand::Link { from, to, kind } => {
            Done::Linked(project.graph_link(&key(from)?, &key(to)?, kind)?)
        }
        GraphCommand::AddNode {
            key: node,
            kind,
            label,
        } => Done::Added(project.graph_add_node(&key(node)?, kind, label.as_deref())?),
        GraphCommand::Export { format, output } => {
            Done::Exported(export(project, *format, output.as_deref())?)
        }
    })
}

/// `graph scan`, its progress on stderr (a bar for a person, JSON Lines under `--json`).
fn scan(project: &Project, path: Option<&Path>, env: &Env) -> Result<ScanReport, Failure> {
    let path = path.unwrap_or(Path::new("."));
    let reporter = super::progress::Reporter::new("graph.scan", env.json);
    let progress = |stage: Progress| match stage {
        Progress::Walked(n) => reporter.update("walk", n as u64, None),
        Progress::Writing(done, total) => reporter.update("write", done as u64, Some(total as u64)),
        Progress::Resolving => reporter.update("resolve", 0, None),
    };
    let report = graph::scan(project, path, &progress);
    reporter.finish();
    Ok(report?)
}

/// `graph export`: to a file when `output` names one (not `-`), else in the result.
fn export(
    project: &Project,
    format: FormatArg,
    output: Option<&Path>,
) -> Result<Exported, Failure> {
    let format = match format {
        FormatArg::Json => ExportFormat::Json,
        FormatArg::Dot => ExportFormat::Dot,
        FormatArg::Mermaid => ExportFormat::Mermaid,
    };
    let dump = project.graph_dump()?;
    let written = match output {
        Some(path) if path.as_os_str() != "-" => {
            let path = std::path::absolute(path)
                .map_err(|e| Failure::usage(format!("bad output path {}: {e}", path.display())))?;
            std::fs::write(&path, dump.render(format))
                .map_err(|e| Failure::new("io", format!("cannot write {}: {e}", path.display())))?;
            Some(path)
        }
        Some(_) | None => None,
    };
    Ok(dump.exported(format, written))
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
                if edge.origin == "manual" {
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
