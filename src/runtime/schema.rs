//! Pieces of JSON Schema that tool declarations share, in the portable spelling every client
//! maps (a single `type` per schema, a validation keyword on every schema): the MCP Inspector's
//! `--strict` check reports nothing on CAR's tools, and a test runs it.

use serde_json::{json, Value};

/// `T` or null, as `anyOf` branches with one `type` each (not `type: [T, "null"]`).
pub(crate) fn nullable(kind: &str) -> Value {
    json!({"anyOf": [{"type": kind}, {"type": "null"}]})
}

/// [`nullable`] with a description.
pub(crate) fn nullable_described(kind: &str, description: &str) -> Value {
    let mut schema = nullable(kind);
    schema["description"] = json!(description);
    schema
}

/// Any JSON value, spelled as its six types (a bare `{}` constrains nothing and is refused by
/// strict clients).
pub(crate) fn any_value(description: &str) -> Value {
    json!({
        "description": description,
        "anyOf": [
            {"type": "string"}, {"type": "number"}, {"type": "boolean"},
            {"type": "object"}, {"type": "array"}, {"type": "null"}
        ]
    })
}
