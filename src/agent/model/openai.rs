//! The OpenAI-compatible chat completions API (OpenAI, Ollama, vLLM, llama.cpp's server, LM
//! Studio, OpenRouter): the request, a whole answer, and the chunks of a streamed one.

use serde_json::{json, Value};

use super::stream::{Assembly, Part, Read};
use super::{Block, Message, ModelConfig, ModelError, Reply, Role, ToolDef};

pub(super) fn request(
    config: &ModelConfig,
    system: &str,
    messages: &[Message],
    tools: &[ToolDef],
) -> Value {
    let mut out = vec![json!({"role": "system", "content": system})];
    for m in messages {
        let text: Vec<&str> = m
            .blocks
            .iter()
            .filter_map(|b| match b {
                Block::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        let calls: Vec<Value> = m
            .blocks
            .iter()
            .filter_map(|b| match b {
                Block::ToolUse { id, name, input } => Some(json!({"id": id, "type": "function",
                    "function": {"name": name, "arguments": input.to_string()}})),
                _ => None,
            })
            .collect();
        let results = m.blocks.iter().filter_map(|b| match b {
            Block::ToolResult { id, content, .. } => {
                Some(json!({"role": "tool", "tool_call_id": id, "content": content}))
            }
            _ => None,
        });
        match m.role {
            Role::Assistant => {
                let mut message = json!({"role": "assistant", "content": text.join("\n")});
                if !calls.is_empty() {
                    message["tool_calls"] = Value::Array(calls);
                }
                out.push(message);
            }
            Role::User => {
                out.extend(results);
                if !text.is_empty() {
                    out.push(json!({"role": "user", "content": text.join("\n")}));
                }
            }
        }
    }
    let tools: Vec<Value> = tools
        .iter()
        .map(|t| {
            json!({"type": "function", "function": {"name": t.name,
                        "description": t.description, "parameters": t.input_schema}})
        })
        .collect();
    let mut body = json!({"model": config.model, "max_tokens": config.max_tokens, "messages": out});
    if !tools.is_empty() {
        body["tools"] = Value::Array(tools);
    }
    body
}

pub(super) fn reply(answer: &Value) -> Result<Reply, ModelError> {
    let message = &answer["choices"][0]["message"];
    if !message.is_object() {
        return Err(ModelError::Malformed {
            provider: "openai",
            message: "no choices[0].message".into(),
        });
    }
    let mut blocks = Vec::new();
    if let Some(text) = message["content"].as_str().filter(|t| !t.is_empty()) {
        blocks.push(Block::Text(text.to_string()));
    }
    for call in message["tool_calls"].as_array().into_iter().flatten() {
        let arguments = call["function"]["arguments"].as_str().unwrap_or("{}");
        blocks.push(Block::ToolUse {
            id: call["id"].as_str().unwrap_or("").to_string(),
            name: call["function"]["name"].as_str().unwrap_or("").to_string(),
            // A model that sends arguments that are not JSON gets them back as an error.
            input: serde_json::from_str(arguments)
                .unwrap_or_else(|_| json!({"__unparsed_arguments": arguments})),
        });
    }
    Ok(Reply {
        blocks,
        truncated: answer["choices"][0]["finish_reason"] == "length",
        input_tokens: answer["usage"]["prompt_tokens"].as_u64().unwrap_or(0),
        output_tokens: answer["usage"]["completion_tokens"].as_u64().unwrap_or(0),
    })
}

/// One chunk of an OpenAI-compatible chat completion stream.
pub(super) fn chunk(
    answer: &mut Assembly,
    chunk: &Value,
    on_text: &mut (dyn FnMut(&str) + Send),
) -> Result<(), Read> {
    if chunk["error"].is_object() {
        return Err(Read::Failed(ModelError::Refused {
            status: 200,
            body: chunk["error"].to_string().chars().take(500).collect(),
        }));
    }
    if let Some(usage) = chunk["usage"].as_object() {
        answer.input_tokens = usage
            .get("prompt_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        answer.output_tokens = usage
            .get("completion_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0);
    }
    let Some(choice) = chunk["choices"].get(0) else {
        return Ok(());
    };
    let delta = &choice["delta"];
    if let Some(more) = delta["content"].as_str().filter(|t| !t.is_empty()) {
        on_text(more);
        match answer
            .parts
            .entry(0)
            .or_insert_with(|| Part::Text(String::new()))
        {
            Part::Text(text) => text.push_str(more),
            Part::Tool { .. } => {}
        }
    }
    for call in delta["tool_calls"].as_array().into_iter().flatten() {
        let given_id = call["id"].as_str().filter(|i| !i.is_empty());
        let last_tool = answer
            .parts
            .iter()
            .rev()
            .find(|(_, p)| matches!(p, Part::Tool { .. }))
            .map(|(k, _)| *k);
        // Servers differ: OpenAI numbers each call with `index`; some send index 0 for every
        // call (a new id tells them apart), some no index at all (a piece without an id goes
        // on with the last call).
        let mut key = match (call["index"].as_u64(), last_tool) {
            (Some(index), _) => index + 1,
            (None, Some(last)) if given_id.is_none() => last,
            (None, last) => last.map_or(1, |k| k + 1),
        };
        if let (Some(given), Some(Part::Tool { id, .. })) = (given_id, answer.parts.get(&key)) {
            if !id.is_empty() && id != given {
                key = answer.parts.keys().max().map_or(1, |k| k + 1);
            }
        }
        let part = answer.parts.entry(key).or_insert_with(|| Part::Tool {
            id: String::new(),
            name: String::new(),
            json: String::new(),
        });
        if let Part::Tool { id, name, json } = part {
            if let Some(given) = given_id {
                *id = given.to_string();
            }
            if name.is_empty() {
                *name = call["function"]["name"].as_str().unwrap_or("").to_string();
            }
            json.push_str(call["function"]["arguments"].as_str().unwrap_or(""));
        }
    }
    if let Some(finish) = choice["finish_reason"].as_str() {
        answer.stop = Some(finish.to_string());
    }
    Ok(())
}
