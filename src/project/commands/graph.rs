//! `graph …`: the project's context graph — scan files and their imports into nodes and
//! edges, list a node's edges, link and add nodes by hand, export the whole graph — as the
//! command line the CLI and the `graph_explorer` tool both parse, and what each command does.

use std::path::{Path, PathBuf};

use clap::{Subcommand, ValueEnum};
use serde::Serialize;

use crate::project::graph::{
    self, Added, Direction, ExportFormat, Exported, Linked, NodeEdges, Progress, ScanReport,
};
use crate::project::{Project, ProjectError};

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
        /// out: what it imports; in: what imports it; both.
        #[arg(long, value_enum, default_value_t = DirectionArg::Both)]
        direction: DirectionArg,
    },
    /// Link two existing nodes by hand; manual links survive every rescan.
    #[command(
        after_help = "Examples:\n  car graph link src/payout.rs ADR-0007 --kind decided-by\n  car graph link web/api.ts server/routes.go --kind calls"
    )]
    Link {
        /// The node the edge starts at.
        from: String,
        /// The node it points to.
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
        /// The node's key: a name unique in the graph (ADR-0007, payments-service).
        key: String,
        /// The node kind: letters, digits, '_', '-' or '.'.
        #[arg(long)]
        kind: String,
        /// A readable name shown in exports.
        #[arg(long)]
        label: Option<String>,
    },
    /// Write the whole graph, sorted: JSON, Graphviz dot or a Mermaid flowchart.
    #[command(
        after_help = "Examples:\n  car graph export --format dot -o graph.dot && dot -Tsvg graph.dot > graph.svg\n  car graph export --format mermaid\n  car --json graph export --format dot   # data.content holds the text"
    )]
    Export {
        /// json (the nodes and edges), dot (Graphviz) or mermaid (a flowchart).
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

/// The envelope's name of a graph command (`graph.scan`).
pub fn command_name(command: &GraphCommand) -> &'static str {
    match command {
        GraphCommand::Scan { .. } => "graph.scan",
        GraphCommand::Edges { .. } => "graph.edges",
        GraphCommand::Link { .. } => "graph.link",
        GraphCommand::AddNode { .. } => "graph.add-node",
        GraphCommand::Export { .. } => "graph.export",
    }
}

/// What a graph command did, each by its own type (serialized as that type alone).
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum GraphOutcome {
    Scanned(ScanReport),
    Edges(NodeEdges),
    Linked(Linked),
    Added(Added),
    Exported(Exported),
}

/// Runs one graph command; `progress` hears how a scan goes.
pub fn run(
    project: &Project,
    command: &GraphCommand,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<GraphOutcome, ProjectError> {
    let key = |text: &str| graph::node_key(&project.root, text);
    Ok(match command {
        GraphCommand::Scan { path } => GraphOutcome::Scanned(graph::scan(
            project,
            path.as_deref().unwrap_or(Path::new(".")),
            progress,
        )?),
        GraphCommand::Edges { node, direction } => {
            let direction = match direction {
                DirectionArg::Out => Direction::Out,
                DirectionArg::In => Direction::In,
                DirectionArg::Both => Direction::Both,
            };
            GraphOutcome::Edges(project.graph_edges(&key(node)?, direction)?)
        }
        GraphCommand::Link { from, to, kind } => {
            GraphOutcome::Linked(project.graph_link(&key(from)?, &key(to)?, kind)?)
        }
        GraphCommand::AddNode {
            key: node,
            kind,
            label,
        } => GraphOutcome::Added(project.graph_add_node(&key(node)?, kind, label.as_deref())?),
        GraphCommand::Export { format, output } => {
            GraphOutcome::Exported(export(project, *format, output.as_deref())?)
        }
    })
}

/// `graph export`: to a file when `output` names one (not `-`), else in the result.
fn export(
    project: &Project,
    format: FormatArg,
    output: Option<&Path>,
) -> Result<Exported, ProjectError> {
    let format = match format {
        FormatArg::Json => ExportFormat::Json,
        FormatArg::Dot => ExportFormat::Dot,
        FormatArg::Mermaid => ExportFormat::Mermaid,
    };
    let dump = project.graph_dump()?;
    let written = match output {
        Some(path) if path.as_os_str() != "-" => {
            let path = std::path::absolute(path).map_err(|e| {
                ProjectError::Invalid(format!("bad output path {}: {e}", path.display()))
            })?;
            std::fs::write(&path, dump.render(format)).map_err(|e| ProjectError::Io {
                path: path.display().to_string(),
                message: format!("cannot write it: {e}"),
            })?;
            Some(path)
        }
        Some(_) | None => None,
    };
    Ok(dump.exported(format, written))
}
