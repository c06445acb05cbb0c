//! Anthropic's Messages API: the request, a whole answer, and the events of a streamed one.

use serde_json::{json, Value};

use super::stream::{Assembly, Part, Read};
use super::{Block, Message, ModelConfig, ModelError, Reply, Role, ToolDef};

pub(super) fn request(
    config: &ModelConfig,
    system: &str,
    messages: &[Message],
    tools: &[ToolDef],
) -> Value {
    let messages: Vec<Value> = messages
        .iter()
        .map(|m| {
            let content: Vec<Value> = m
                .blocks
                .iter()
                .map(|b| match b {
                    Block::Text(text) => json!({"type": "text", "text": text}),
                    Block::ToolUse { id, name, input } => {
                        json!({"type": "tool_use", "id": id, "name": name, "input": input})
                    }
                    Block::ToolResult {
                        id,
                        content,
                        is_error,
                    } => json!({"type": "tool_result", "tool_use_id": id,
                                "content": content, "is_error": is_error}),
                })
                .collect();
            json!({"role": role_name(m.role), "content": content})
        })
        .collect();
    let tools: Vec<Value> = tools
        .iter()
        .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
        .collect();
    let mut body = json!({"model": config.model, "max_tokens": config.max_tokens,
                          "system": system, "messages": messages});
    if !tools.is_empty() {
        body["tools"] = Value::Array(tools);
    }
    body
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::User => "user",
        Role::Assistant => "assistant",
    }
}

pub(super) fn reply(answer: &Value) -> Result<Reply, ModelError> {
    let malformed = |message: &str| ModelError::Malformed {
        provider: "anthropic",
        message: message.to_string(),
    };
    let content = answer["content"]
        .as_array()
        .ok_or_else(|| malformed("no content array"))?;
    let blocks = content
        .iter()
        .filter_map(|b| match b["type"].as_str() {
            Some("text") => Some(Block::Text(b["text"].as_str().unwrap_or("").to_string())),
            Some("tool_use") => Some(Block::ToolUse {
                id: b["id"].as_str().unwrap_or("").to_string(),
                name: b["name"].as_str().unwrap_or("").to_string(),
                input: b["input"].clone(),
            }),
            _ => None,
        })
        .collect();
    Ok(Reply {
        blocks,
        truncated: answer["stop_reason"] == "max_tokens",
        input_tokens: answer["usage"]["input_tokens"].as_u64().unwrap_or(0),
        output_tokens: answer["usage"]["output_tokens"].as_u64().unwrap_or(0),
    })
}

/// One event of the Messages API's stream.
pub(super) fn event(
    answer: &mut Assembly,
    event: &Value,
    on_text: &mut (dyn FnMut(&str) + Send),
) -> Result<(), Read> {
    let index = event["index"].as_u64().unwrap_or(0);
    match event["type"].as_str().unwrap_or("") {
        "message_start" => {
            let usage = &event["message"]["usage"];
            answer.input_tokens = usage["input_tokens"].as_u64().unwrap_or(0)
                + usage["cache_read_input_tokens"].as_u64().unwrap_or(0)
                + usage["cache_creation_input_tokens"].as_u64().unwrap_or(0);
            answer.output_tokens = usage["output_tokens"].as_u64().unwrap_or(0);
        }
        "content_block_start" => {
            let block = &event["content_block"];
            let part = match block["type"].as_str() {
                Some("text") => {
                    let text = block["text"].as_str().unwrap_or("");
                    if !text.is_empty() {
                        on_text(text);
                    }
                    Part::Text(text.to_string())
                }
                Some("tool_use") => Part::Tool {
                    id: block["id"].as_str().unwrap_or("").to_string(),
                    name: block["name"].as_str().unwrap_or("").to_string(),
                    json: String::new(),
                },
                // Thinking and other blocks are not sent back.
                _ => return Ok(()),
            };
            answer.parts.insert(index, part);
        }
        "content_block_delta" => {
            let delta = &event["delta"];
            match (answer.parts.get_mut(&index), delta["type"].as_str()) {
                (Some(Part::Text(text)), Some("text_delta")) => {
                    let more = delta["text"].as_str().unwrap_or("");
                    on_text(more);
                    text.push_str(more);
                }
                (Some(Part::Tool { json, .. }), Some("input_json_delta")) => {
                    json.push_str(delta["partial_json"].as_str().unwrap_or(""));
                }
                _ => {}
            }
        }
        "message_delta" => {
            if let Some(stop) = event["delta"]["stop_reason"].as_str() {
                answer.stop = Some(stop.to_string());
            }
            if let Some(output) = event["usage"]["output_tokens"].as_u64() {
                answer.output_tokens = output;
            }
        }
        "message_stop" => answer.done = true,
        "error" => {
            let kind = event["error"]["type"].as_str().unwrap_or("error");
            let message = format!(
                "{kind}: {}",
                event["error"]["message"].as_str().unwrap_or("")
            );
            return Err(match kind {
                "overloaded_error" | "api_error" | "rate_limit_error" => Read::Broken(message),
                _ => Read::Failed(ModelError::Refused {
                    status: 200,
                    body: message,
                }),
            });
        }
        _ => {}
    }
    Ok(())
}
