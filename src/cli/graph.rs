//! `car graph …`: the project's context graph — scan files and their imports into nodes and
//! edges, list a node's edges, link and add nodes by hand, export the whole graph. `execute`
//! returns what it would print, so an MCP tool can run the same command in-process.

use std::path::PathBuf;

use clap::{Subcommand, ValueEnum};
use serde_json::{json, Value};

use super::{open_project, render, Env, Failure, Printed};
use crate::project::graph::{self, Direction, ExportFormat, Progress};
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

fn to_value(value: impl serde::Serialize) -> Result<Value, Failure> {
    serde_json::to_value(value).map_err(|e| Failure::new("failed", e.to_string()))
}

/// Runs a graph command and returns what it prints.
pub(crate) fn execute(env: &Env, command: GraphCommand) -> Printed {
    let name = command_name(&command);
    let result = open_project(env).and_then(|project| data(&project, &command, env.json));
    render(env.json, name, result, |data| human(&command, data))
}

fn data(project: &Project, command: &GraphCommand, json: bool) -> Result<Value, Failure> {
    let key = |text: &str| graph::node_key(&project.root, text);
    match command {
        GraphCommand::Scan { path } => {
            let path = path.clone().unwrap_or_else(|| PathBuf::from("."));
            let reporter = super::progress::Reporter::new("graph.scan", json);
            let progress = |stage: Progress| match stage {
                Progress::Walked(n) => reporter.update("walk", n as u64, None),
                Progress::Writing(done, total) => {
                    reporter.update("write", done as u64, Some(total as u64))
                }
                Progress::Resolving => reporter.update("resolve", 0, None),
            };
            let report = graph::scan(project, &path, &progress);
            reporter.finish();
            to_value(report?)
        }
        GraphCommand::Edges { node, direction } => {
            let direction = match direction {
                DirectionArg::Out => Direction::Out,
                DirectionArg::In => Direction::In,
                DirectionArg::Both => Direction::Both,
            };
            to_value(project.graph_edges(&key(node)?, direction)?)
        }
        GraphCommand::Link { from, to, kind } => {
            to_value(project.graph_link(&key(from)?, &key(to)?, kind)?)
        }
        GraphCommand::AddNode {
            key: node,
            kind,
            label,
        } => to_value(project.graph_add_node(&key(node)?, kind, label.as_deref())?),
        GraphCommand::Export { format, output } => {
            let format = match format {
                FormatArg::Json => ExportFormat::Json,
                FormatArg::Dot => ExportFormat::Dot,
                FormatArg::Mermaid => ExportFormat::Mermaid,
            };
            let dump = project.graph_dump()?;
            let mut data = json!({
                "format": format.name(),
                "nodes": dump.nodes.len(),
                "edges": dump.edges.len(),
            });
            match output {
                Some(path) if path.as_os_str() != "-" => {
                    let path = std::path::absolute(path).map_err(|e| {
                        Failure::usage(format!("bad output path {}: {e}", path.display()))
                    })?;
                    std::fs::write(&path, dump.render(format)).map_err(|e| {
                        Failure::new("io", format!("cannot write {}: {e}", path.display()))
                    })?;
                    data["output"] = json!(path);
                }
                Some(_) | None => {
                    data["content"] = match format {
                        ExportFormat::Json => to_value(&dump)?,
                        ExportFormat::Dot | ExportFormat::Mermaid => json!(dump.render(format)),
                    };
                }
            }
            Ok(data)
        }
    }
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

fn human(command: &GraphCommand, data: &Value) -> String {
    match command {
        GraphCommand::Scan { .. } => {
            let languages = data["by_language"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(lang, n)| format!("{lang} {n}"))
                .collect::<Vec<_>>()
                .join(", ");
            let mut out = format!(
                "Scanned {}: {} files ({} parsed, {} unchanged, {} removed), {} edges (+{} -{}) in {} ms.\n",
                text(&data["root"]),
                data["files_seen"],
                data["parsed"],
                data["unchanged"],
                data["removed"],
                data["edges"],
                data["edges_added"],
                data["edges_removed"],
                data["duration_ms"],
            );
            if !languages.is_empty() {
                out.push_str(&format!("  {languages}\n"));
            }
            if data["kept_for_links"].as_u64().unwrap_or(0) > 0 {
                out.push_str(&format!(
                    "  {} deleted file(s) kept because manual links touch them.\n",
                    data["kept_for_links"]
                ));
            }
            out
        }
        GraphCommand::Edges { .. } => {
            let node = &data["node"];
            let mut out = format!("{} ({}", text(&node["key"]), text(&node["kind"]));
            if let Some(lang) = node["lang"].as_str() {
                out.push_str(&format!(", {lang}"));
            }
            out.push_str(")\n");
            let mut any = false;
            for (field, arrow) in [("out", "->"), ("in", "<-")] {
                for edge in data[field].as_array().into_iter().flatten() {
                    any = true;
                    out.push_str(&format!(
                        "  {arrow} {}  {}{}\n",
                        text(&edge["key"]),
                        text(&edge["kind"]),
                        if edge["origin"] == "manual" {
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
        GraphCommand::Link { .. } => {
            let line = format!(
                "{} -> {} ({})",
                text(&data["src"]),
                text(&data["dst"]),
                text(&data["kind"])
            );
            if data["created"] == true {
                format!("Linked {line}.\n")
            } else {
                format!("{line} existed; it is a manual link now.\n")
            }
        }
        GraphCommand::AddNode { .. } => {
            let node = &data["node"];
            if data["created"] == true {
                format!(
                    "Added node {} ({}).\n",
                    text(&node["key"]),
                    text(&node["kind"])
                )
            } else {
                format!(
                    "Node {} ({}) exists.\n",
                    text(&node["key"]),
                    text(&node["kind"])
                )
            }
        }
        GraphCommand::Export { .. } => match &data["content"] {
            Value::String(content) => content.clone(),
            Value::Null => format!(
                "Wrote {} nodes and {} edges as {} to {}.\n",
                data["nodes"],
                data["edges"],
                text(&data["format"]),
                text(&data["output"])
            ),
            structure => format!(
                "{}\n",
                serde_json::to_string_pretty(structure).unwrap_or_default()
            ),
        },
    }
}
