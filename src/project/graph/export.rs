//! Writing the whole graph out as JSON, Graphviz dot or a Mermaid flowchart. Output is sorted
//! (nodes by key, edges by source, target, kind), so the same graph always gives the same
//! bytes; every key and label is quoted and escaped, so any file name is safe.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{EdgeOrigin, Node};

/// One edge of an export, by node keys.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct Edge {
    pub src: String,
    pub dst: String,
    pub kind: String,
    pub origin: EdgeOrigin,
}

/// Every node and edge of a project, sorted.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GraphDump {
    pub nodes: Vec<Node>,
    pub edges: Vec<Edge>,
}

/// The formats of `graph export`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ExportFormat {
    Json,
    Dot,
    Mermaid,
}

impl ExportFormat {
    pub fn name(self) -> &'static str {
        match self {
            ExportFormat::Json => "json",
            ExportFormat::Dot => "dot",
            ExportFormat::Mermaid => "mermaid",
        }
    }
}

/// What `graph export` did: the counts and either the file written or the content itself.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Exported {
    pub format: ExportFormat,
    /// How many nodes the graph has.
    pub nodes: usize,
    /// How many edges the graph has.
    pub edges: usize,
    /// The file the graph was written to (absent when it is in `content`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<PathBuf>,
    /// The graph itself when no file was written (absent when it is in `output`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Content>,
}

/// An exported graph: the structure for JSON, the text for dot and Mermaid.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum Content {
    Graph(GraphDump),
    Text(String),
}

/// A dot string literal: `"` and `\` escaped, newlines as `\n`.
fn dot_quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => {}
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A Mermaid quoted label: characters Mermaid reads as syntax become entity codes.
fn mermaid_quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("#quot;"),
            '#' => out.push_str("#35;"),
            '<' => out.push_str("#lt;"),
            '>' => out.push_str("#gt;"),
            '\n' | '\r' => out.push(' '),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

impl GraphDump {
    /// The report of an export written to `output`, or carrying the graph when there is none.
    pub fn exported(self, format: ExportFormat, output: Option<PathBuf>) -> Exported {
        let (nodes, edges) = (self.nodes.len(), self.edges.len());
        let content = match (&output, format) {
            (Some(_), _) => None,
            (None, ExportFormat::Json) => Some(Content::Graph(self)),
            (None, ExportFormat::Dot | ExportFormat::Mermaid) => {
                Some(Content::Text(self.render(format)))
            }
        };
        Exported {
            format,
            nodes,
            edges,
            output,
            content,
        }
    }

    /// The graph in `format`, ending with a newline.
    pub fn render(&self, format: ExportFormat) -> String {
        match format {
            ExportFormat::Json => {
                let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
                text.push('\n');
                text
            }
            ExportFormat::Dot => self.dot(),
            ExportFormat::Mermaid => self.mermaid(),
        }
    }

    /// Files are boxes; other nodes ellipses labelled with their label; manual edges dashed.
    fn dot(&self) -> String {
        let mut out = String::from("digraph car {\n  rankdir=LR;\n  node [shape=box];\n");
        for node in &self.nodes {
            out.push_str("  ");
            out.push_str(&dot_quote(&node.key));
            if node.kind != "file" {
                out.push_str(" [shape=ellipse");
                out.push_str(", label=");
                out.push_str(&dot_quote(&format!(
                    "{}\n({})",
                    node.label.as_deref().unwrap_or(&node.key),
                    node.kind
                )));
                out.push(']');
            }
            out.push_str(";\n");
        }
        for edge in &self.edges {
            out.push_str(&format!(
                "  {} -> {} [label={}{}];\n",
                dot_quote(&edge.src),
                dot_quote(&edge.dst),
                dot_quote(&edge.kind),
                if edge.origin == EdgeOrigin::Manual {
                    ", style=dashed"
                } else {
                    ""
                }
            ));
        }
        out.push_str("}\n");
        out
    }

    /// Nodes get ids n0, n1, … in key order; files are boxes, other nodes rounded; manual edges
    /// dotted.
    fn mermaid(&self) -> String {
        let ids: std::collections::HashMap<&str, usize> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, node)| (node.key.as_str(), i))
            .collect();
        let mut out = String::from("flowchart LR\n");
        for (i, node) in self.nodes.iter().enumerate() {
            if node.kind == "file" {
                out.push_str(&format!("  n{i}[{}]\n", mermaid_quote(&node.key)));
            } else {
                let label = format!(
                    "{} ({})",
                    node.label.as_deref().unwrap_or(&node.key),
                    node.kind
                );
                out.push_str(&format!("  n{i}({})\n", mermaid_quote(&label)));
            }
        }
        for edge in &self.edges {
            let (Some(src), Some(dst)) = (ids.get(edge.src.as_str()), ids.get(edge.dst.as_str()))
            else {
                continue;
            };
            let arrow = if edge.origin == EdgeOrigin::Manual {
                "-.->"
            } else {
                "-->"
            };
            out.push_str(&format!(
                "  n{src} {arrow}|{}| n{dst}\n",
                mermaid_quote(&edge.kind)
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_and_mermaid_escape_quotes_backslashes_and_newlines() {
        assert_eq!(dot_quote("a\"b\\c\nd"), "\"a\\\"b\\\\c\\nd\"");
        assert_eq!(mermaid_quote("a\"b#<c>"), "\"a#quot;b#35;#lt;c#gt;\"");
    }
}
