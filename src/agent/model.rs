//! The model behind `car do`: one trait over two wire shapes — Anthropic's Messages API and the
//! OpenAI-compatible chat completions API (OpenAI, Ollama, vLLM, llama.cpp's server, LM Studio,
//! OpenRouter) — with retries and backoff on 429 and 5xx, and token usage for the run's budget.

use std::time::Duration;

use serde_json::{json, Value};

/// Which wire shape a model speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    Anthropic,
    Openai,
}

impl Provider {
    /// The provider a model name implies: `claude-*` is Anthropic's, anything else is spoken to
    /// over the OpenAI-compatible API.
    pub fn infer(model: &str) -> Provider {
        if model.starts_with("claude") {
            Provider::Anthropic
        } else {
            Provider::Openai
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Anthropic => "anthropic",
            Provider::Openai => "openai",
        }
    }

    fn default_base(self) -> &'static str {
        match self {
            Provider::Anthropic => "https://api.anthropic.com",
            Provider::Openai => "https://api.openai.com/v1",
        }
    }

    /// The environment variables of its key and its base URL.
    pub fn key_env(self) -> &'static str {
        match self {
            Provider::Anthropic => "ANTHROPIC_API_KEY",
            Provider::Openai => "OPENAI_API_KEY",
        }
    }

    fn base_env(self) -> &'static str {
        match self {
            Provider::Anthropic => "ANTHROPIC_BASE_URL",
            Provider::Openai => "OPENAI_BASE_URL",
        }
    }
}

/// Who speaks a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
}

/// One piece of a message.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "type", content = "value", rename_all = "snake_case")]
pub enum Block {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    ToolResult {
        id: String,
        content: String,
        is_error: bool,
    },
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Message {
    pub role: Role,
    pub blocks: Vec<Block>,
}

/// A tool the model may call.
#[derive(Debug, Clone)]
pub struct ToolDef {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

/// The model's answer to one turn.
#[derive(Debug, Clone)]
pub struct Reply {
    pub blocks: Vec<Block>,
    /// The answer stopped at the output limit (`max_tokens` / `length`), not by choice.
    pub truncated: bool,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// Why a turn failed.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("no API key for {provider}: set {env}, or store one with `car keys set {provider}`")]
    NoKey {
        provider: &'static str,
        env: &'static str,
    },
    #[error("cannot reach the model at {url}: {message}")]
    Unreachable { url: String, message: String },
    #[error("the model API answered {status}: {body}")]
    Refused { status: u16, body: String },
    #[error("the model's answer is not what {provider} sends: {message}")]
    Malformed {
        provider: &'static str,
        message: String,
    },
}

/// How to reach a model.
#[derive(Debug, Clone)]
pub struct ModelConfig {
    pub provider: Provider,
    pub model: String,
    pub base_url: Option<String>,
    /// Output tokens per turn.
    pub max_tokens: u32,
    /// The API key (else the provider's environment variable).
    pub api_key: Option<String>,
}

/// A model endpoint, ready to answer turns.
pub struct Model {
    config: ModelConfig,
    base: String,
    key: Option<String>,
    http: reqwest::Client,
}

/// How many times a turn is retried on 429 or 5xx, and the first wait.
const RETRIES: u32 = 4;
const FIRST_BACKOFF: Duration = Duration::from_millis(250);

impl Model {
    /// Reads the key from the environment (none is needed for a local OpenAI-compatible server:
    /// a base URL on loopback).
    pub fn new(config: ModelConfig) -> Result<Model, ModelError> {
        let provider = config.provider;
        let base = config
            .base_url
            .clone()
            .or_else(|| std::env::var(provider.base_env()).ok())
            .filter(|b| !b.trim().is_empty())
            .unwrap_or_else(|| provider.default_base().to_string());
        let base = base.trim_end_matches('/').to_string();
        let key = config
            .api_key
            .clone()
            .filter(|k| !k.trim().is_empty())
            .or_else(|| {
                std::env::var(provider.key_env())
                    .ok()
                    .filter(|k| !k.trim().is_empty())
            });
        let local = ["://127.0.0.1", "://localhost", "://[::1]"]
            .iter()
            .any(|h| base.contains(h));
        if key.is_none() && !local {
            return Err(ModelError::NoKey {
                provider: provider.as_str(),
                env: provider.key_env(),
            });
        }
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(600))
            .build()
            .map_err(|e| ModelError::Unreachable {
                url: base.clone(),
                message: e.to_string(),
            })?;
        Ok(Model {
            config,
            base,
            key,
            http,
        })
    }

    pub fn name(&self) -> &str {
        &self.config.model
    }

    pub fn provider(&self) -> Provider {
        self.config.provider
    }

    /// One turn: the conversation so far in, the model's blocks out.
    pub async fn turn(
        &self,
        system: &str,
        messages: &[Message],
        tools: &[ToolDef],
    ) -> Result<Reply, ModelError> {
        let (url, body) = match self.config.provider {
            Provider::Anthropic => (
                format!("{}/v1/messages", self.base),
                anthropic_request(&self.config, system, messages, tools),
            ),
            Provider::Openai => {
                let mut body = openai_request(&self.config, system, messages, tools);
                // OpenAI's own API takes max_completion_tokens (its newer models refuse
                // max_tokens); compatible servers take max_tokens.
                if self.base.contains("api.openai.com") {
                    if let Some(limit) = body.as_object_mut().and_then(|b| b.remove("max_tokens")) {
                        body["max_completion_tokens"] = limit;
                    }
                }
                (format!("{}/chat/completions", self.base), body)
            }
        };
        let answer = self.post(&url, &body).await?;
        match self.config.provider {
            Provider::Anthropic => anthropic_reply(&answer),
            Provider::Openai => openai_reply(&answer),
        }
    }

    async fn post(&self, url: &str, body: &Value) -> Result<Value, ModelError> {
        let mut wait = FIRST_BACKOFF;
        let mut attempt = 0;
        loop {
            let mut request = self.http.post(url).json(body);
            request = match (self.config.provider, &self.key) {
                (Provider::Anthropic, Some(key)) => request
                    .header("x-api-key", key)
                    .header("anthropic-version", "2023-06-01"),
                (Provider::Anthropic, None) => request.header("anthropic-version", "2023-06-01"),
                (Provider::Openai, Some(key)) => request.bearer_auth(key),
                (Provider::Openai, None) => request,
            };
            let unreachable = |e: reqwest::Error| ModelError::Unreachable {
                url: url.to_string(),
                message: e.to_string(),
            };
            let response = match request.send().await {
                Ok(response) => response,
                Err(e) if attempt < RETRIES && (e.is_connect() || e.is_timeout()) => {
                    attempt += 1;
                    tokio::time::sleep(wait).await;
                    wait *= 2;
                    continue;
                }
                Err(e) => return Err(unreachable(e)),
            };
            let status = response.status();
            if status.is_success() {
                return response.json().await.map_err(|e| ModelError::Malformed {
                    provider: self.config.provider.as_str(),
                    message: e.to_string(),
                });
            }
            let retry_after = response
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok())
                .map(Duration::from_secs);
            let text = response.text().await.unwrap_or_default();
            if attempt < RETRIES && (status.as_u16() == 429 || status.is_server_error()) {
                attempt += 1;
                tokio::time::sleep(retry_after.unwrap_or(wait).min(Duration::from_secs(30))).await;
                wait *= 2;
                continue;
            }
            return Err(ModelError::Refused {
                status: status.as_u16(),
                body: text.chars().take(500).collect(),
            });
        }
    }
}

fn anthropic_request(
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

fn anthropic_reply(answer: &Value) -> Result<Reply, ModelError> {
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

fn openai_request(
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

fn openai_reply(answer: &Value) -> Result<Reply, ModelError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_round_trip_has_each_shape() {
        let config = ModelConfig {
            provider: Provider::Openai,
            model: "qwen".into(),
            base_url: None,
            max_tokens: 100,
            api_key: None,
        };
        let messages = vec![
            Message {
                role: Role::User,
                blocks: vec![Block::Text("list files".into())],
            },
            Message {
                role: Role::Assistant,
                blocks: vec![Block::ToolUse {
                    id: "c1".into(),
                    name: "Bash".into(),
                    input: json!({"command": "ls"}),
                }],
            },
            Message {
                role: Role::User,
                blocks: vec![Block::ToolResult {
                    id: "c1".into(),
                    content: "a.txt".into(),
                    is_error: false,
                }],
            },
        ];
        let body = openai_request(&config, "sys", &messages, &[]);
        assert_eq!(
            body["messages"][2]["tool_calls"][0]["function"]["arguments"],
            "{\"command\":\"ls\"}"
        );
        assert_eq!(
            body["messages"][3],
            json!({"role": "tool", "tool_call_id": "c1", "content": "a.txt"})
        );
        let body = anthropic_request(&config, "sys", &messages, &[]);
        assert_eq!(body["messages"][2]["content"][0]["tool_use_id"], "c1");
        let reply = openai_reply(&json!({"choices": [{"message": {"content": null, "tool_calls": [
            {"id": "c2", "type": "function", "function": {"name": "Read", "arguments": "{\"file_path\":\"a\"}"}}]}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2}}))
        .unwrap();
        assert_eq!(
            reply.blocks,
            vec![Block::ToolUse {
                id: "c2".into(),
                name: "Read".into(),
                input: json!({"file_path": "a"})
            }]
        );
        assert_eq!((reply.input_tokens, reply.output_tokens), (5, 2));
        assert!(!reply.truncated);
        let cut = anthropic_reply(&json!({"content": [{"type": "text", "text": "The fix is"}],
                                          "stop_reason": "max_tokens", "usage": {}}))
        .unwrap();
        assert!(
            cut.truncated,
            "an answer stopped at the output limit is marked"
        );
        assert_eq!(Provider::infer("claude-sonnet-4"), Provider::Anthropic);
        assert_eq!(Provider::infer("llama3.1"), Provider::Openai);
    }
}
