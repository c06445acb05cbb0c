//! The JSON envelope every `--json` output uses, and the human rendering of the same data.

use serde_json::{json, Value};

/// The envelope version; bumped only on an incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// `{"schema_version":1,"command":…,"success":true,"data":…}`.
pub fn success(command: &str, data: Value) -> Value {
    json!({"schema_version": SCHEMA_VERSION, "command": command, "success": true, "data": data})
}

/// `{"schema_version":1,"command":…,"success":false,"error":{"code":…,"message":…}}`.
pub fn failure(command: &str, code: &str, message: &str) -> Value {
    json!({"schema_version": SCHEMA_VERSION, "command": command, "success": false,
           "error": {"code": code, "message": message}})
}

/// Renders a tool's structured result for a person: scalars as `key: value` lines,
/// arrays of objects as aligned tables, nested objects indented.
pub fn render_human(value: &Value) -> String {
    let mut out = String::new();
    render_into(&mut out, value, 0);
    out
}

fn render_into(out: &mut String, value: &Value, indent: usize) {
    let pad = "  ".repeat(indent);
    match value {
        Value::Object(map) => {
            for (key, item) in map {
                match item {
                    Value::Object(inner) if !inner.is_empty() => {
                        out.push_str(&format!("{pad}{key}:\n"));
                        render_into(out, item, indent + 1);
                    }
                    Value::Array(items) if items.iter().any(Value::is_object) => {
                        out.push_str(&format!("{pad}{key}: ({} items)\n", items.len()));
                        render_table(out, items, indent + 1);
                    }
                    _ => out.push_str(&format!("{pad}{key}: {}\n", scalar(item))),
                }
            }
        }
        Value::Array(items) if items.iter().any(Value::is_object) => {
            render_table(out, items, indent)
        }
        other => out.push_str(&format!("{pad}{}\n", scalar(other))),
    }
}

fn render_table(out: &mut String, rows: &[Value], indent: usize) {
    let pad = "  ".repeat(indent);
    let mut columns: Vec<String> = Vec::new();
    for row in rows {
        if let Value::Object(map) = row {
            for key in map.keys() {
                if !columns.contains(key) {
                    columns.push(key.clone());
                }
            }
        }
    }
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            columns
                .iter()
                .map(|c| truncate(&scalar(row.get(c).unwrap_or(&Value::Null)), 72))
                .collect()
        })
        .collect();
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            cells
                .iter()
                .map(|r| r[i].chars().count())
                .chain([c.len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |items: Vec<&str>| {
        let parts: Vec<String> = items
            .iter()
            .zip(&widths)
            .map(|(s, w)| format!("{s:<w$}"))
            .collect();
        format!("{pad}{}\n", parts.join("  ").trim_end())
    };
    out.push_str(&line(
        columns
            .iter()
            .map(|c| c.to_uppercase())
            .collect::<Vec<_>>()
            .iter()
            .map(String::as_str)
            .collect(),
    ));
    for row in &cells {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
}

fn scalar(value: &Value) -> String {
    match value {
        Value::Null => "-".to_string(),
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(scalar).collect::<Vec<_>>().join(", "),
        other => other.to_string(),
    }
}

fn truncate(text: &str, max: usize) -> String {
    let flat = text.replace('\n', " ");
    if flat.chars().count() <= max {
        return flat;
    }
    let cut: String = flat.chars().take(max - 1).collect();
    format!("{cut}…")
}

/// A plain-text table: a header row, then one row each, columns padded to their widest cell
/// (counted in characters); the last column is not padded.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| -> String {
        let last = cells.len().saturating_sub(1);
        let mut out = String::new();
        for (i, cell) in cells.into_iter().enumerate() {
            out.push_str(cell);
            if i < last {
                let pad = widths[i] - cell.chars().count() + 2;
                out.push_str(&" ".repeat(pad));
            }
        }
        out.trim_end().to_string() + "\n"
    };
    let mut out = line(headers.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}
