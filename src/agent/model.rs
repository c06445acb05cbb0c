//! The model behind `car do`: one trait over two wire shapes — Anthropic's Messages API and the
//! OpenAI-compatible chat completions API (OpenAI, Ollama, vLLM, llama.cpp's server, LM Studio,
//! OpenRouter) — streamed (Server-Sent Events, the text handed on as it arrives; a server that
//! answers with one JSON document instead is read as such), with retries and backoff on 429, 5xx
//! and a stream that breaks, and token usage for the run's budget.

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::StreamExt;
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
            Provider::Anthropic => crate::home::env::ANTHROPIC_API_KEY,
            Provider::Openai => crate::home::env::OPENAI_API_KEY,
        }
    }

    fn base_env(self) -> &'static str {
        match self {
            Provider::Anthropic => crate::home::env::ANTHROPIC_BASE_URL,
            Provider::Openai => crate::home::env::OPENAI_BASE_URL,
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

/// How many times a turn is retried on 429, 5xx or a broken stream, and the first wait.
const RETRIES: u32 = 4;
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest silence inside an answer before it counts as broken.
const READ_TIMEOUT: Duration = Duration::from_secs(300);

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
        // No bound on a whole answer (a long one streams for minutes), but on connecting and on
        // each silence within it.
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .read_timeout(READ_TIMEOUT)
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

    /// One turn: the conversation so far in, the model's blocks out; `on_text` gets the answer's
    /// text as it streams in (again from the start when a broken stream is retried).
    pub async fn turn(
        &self,
        system: &str,
        messages: &[Message],
        tools: &[ToolDef],
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Result<Reply, ModelError> {
        let (url, mut body) = match self.config.provider {
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
                // The usage comes as a last chunk only when asked for.
                body["stream_options"] = json!({"include_usage": true});
                (format!("{}/chat/completions", self.base), body)
            }
        };
        body["stream"] = json!(true);
        let mut backoff = Backoff::default();
        loop {
            let response = match self.post(&url, &body, &mut backoff).await {
                // A server that streams but knows no stream_options (older vLLM, Azure's older
                // API versions) is asked again without; the tokens are then estimated.
                Err(ModelError::Refused {
                    status: 400,
                    body: refusal,
                }) if refusal.contains("stream_options")
                    && body
                        .as_object_mut()
                        .and_then(|b| b.remove("stream_options"))
                        .is_some() =>
                {
                    continue
                }
                other => other?,
            };
            match self.read(response, on_text).await {
                Ok(mut reply) => {
                    // A server that sends no usage still spends tokens: about four bytes each.
                    if reply.input_tokens == 0 && reply.output_tokens == 0 {
                        reply.input_tokens = body.to_string().len() as u64 / 4;
                        reply.output_tokens = reply.blocks.iter().map(block_bytes).sum::<u64>() / 4;
                    }
                    return Ok(reply);
                }
                Err(Read::Broken(message)) if backoff.again(None).await => {
                    tracing::debug!("the model's answer broke off ({message}); asking again");
                    // What was shown of the broken answer comes again from its start.
                    on_text("\n[the answer broke off; asking again]\n");
                }
                Err(Read::Broken(message)) => return Err(ModelError::Unreachable { url, message }),
                Err(Read::Failed(e)) => return Err(e),
            }
        }
    }

    /// Reads an answer: a stream of events, or one JSON document from a server that does not
    /// stream.
    async fn read(
        &self,
        response: reqwest::Response,
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Result<Reply, Read> {
        let provider = self.config.provider;
        let streamed = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !streamed {
            let answer: Value = response.json().await.map_err(|e| {
                Read::Failed(ModelError::Malformed {
                    provider: provider.as_str(),
                    message: e.to_string(),
                })
            })?;
            let reply = match provider {
                Provider::Anthropic => anthropic_reply(&answer),
                Provider::Openai => openai_reply(&answer),
            }
            .map_err(Read::Failed)?;
            for block in &reply.blocks {
                if let Block::Text(text) = block {
                    on_text(text);
                }
            }
            return Ok(reply);
        }
        let mut events = sse_stream::SseStream::from_bytes_stream(response.bytes_stream());
        let mut answer = Assembly::default();
        while let Some(event) = events.next().await {
            let event = event.map_err(|e| Read::Broken(e.to_string()))?;
            let Some(data) = event.data.filter(|d| !d.trim().is_empty()) else {
                continue;
            };
            if data.trim() == "[DONE]" {
                answer.done = true;
                break;
            }
            let data: Value = serde_json::from_str(&data).map_err(|e| {
                Read::Failed(ModelError::Malformed {
                    provider: provider.as_str(),
                    message: format!("an event of the stream is not JSON: {e}"),
                })
            })?;
            match provider {
                Provider::Anthropic => answer.anthropic(&data, on_text)?,
                Provider::Openai => answer.openai(&data, on_text)?,
            }
        }
        answer.finish(provider)
    }

    /// Sends the request until it is answered with success, waiting between tries on a refused
    /// connection, 429 and 5xx (honouring `Retry-After`).
    async fn post(
        &self,
        url: &str,
        body: &Value,
        backoff: &mut Backoff,
    ) -> Result<reqwest::Response, ModelError> {
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
            let response = match request.send().await {
                Ok(response) => response,
                Err(e) if (e.is_connect() || e.is_timeout()) && backoff.again(None).await => {
                    continue
                }
                Err(e) => {
                    return Err(ModelError::Unreachable {
                        url: url.to_string(),
                        message: e.to_string(),
                    })
                }
            };
            let status = response.status();
            if status.is_success() {
                return Ok(response);
            }
            let retry_after = response
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok())
                .map(Duration::from_secs);
            let text = response.text().await.unwrap_or_default();
            if (status.as_u16() == 429 || status.is_server_error())
                && backoff.again(retry_after).await
            {
                continue;
            }
            return Err(ModelError::Refused {
                status: status.as_u16(),
                body: text.chars().take(500).collect(),
            });
        }
    }
}

/// The tries left for one turn and the next wait.
struct Backoff {
    attempt: u32,
    wait: Duration,
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff {
            attempt: 0,
            wait: FIRST_BACKOFF,
        }
    }
}

impl Backoff {
    /// Waits before another try (`hint` is the server's `Retry-After`, at most 30 s); false
    /// when the tries are spent.
    async fn again(&mut self, hint: Option<Duration>) -> bool {
        if self.attempt >= RETRIES {
            return false;
        }
        self.attempt += 1;
        tokio::time::sleep(hint.unwrap_or(self.wait).min(Duration::from_secs(30))).await;
        self.wait *= 2;
        true
    }
}

/// Why reading an answer stopped.
enum Read {
    /// The stream ended early or broke: worth asking again.
    Broken(String),
    Failed(ModelError),
}

/// One block of a streamed answer, as far as it has come.
#[derive(Debug)]
enum Part {
    Text(String),
    Tool {
        id: String,
        name: String,
        json: String,
    },
}

/// A streamed answer put back together from its events.
#[derive(Debug, Default)]
struct Assembly {
    /// By the block's index in the answer (Anthropic's `index`; for OpenAI the text is 0 and
    /// tool call `i` is `i + 1`).
    parts: BTreeMap<u64, Part>,
    stop: Option<String>,
    input_tokens: u64,
    output_tokens: u64,
    done: bool,
}

impl Assembly {
    /// One event of the Messages API's stream.
    fn anthropic(
        &mut self,
        event: &Value,
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Result<(), Read> {
        let index = event["index"].as_u64().unwrap_or(0);
        match event["type"].as_str().unwrap_or("") {
            "message_start" => {
                let usage = &event["message"]["usage"];
                self.input_tokens = usage["input_tokens"].as_u64().unwrap_or(0)
                    + usage["cache_read_input_tokens"].as_u64().unwrap_or(0)
                    + usage["cache_creation_input_tokens"].as_u64().unwrap_or(0);
                self.output_tokens = usage["output_tokens"].as_u64().unwrap_or(0);
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
                self.parts.insert(index, part);
            }
            "content_block_delta" => {
                let delta = &event["delta"];
                match (self.parts.get_mut(&index), delta["type"].as_str()) {
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
                    self.stop = Some(stop.to_string());
                }
                if let Some(output) = event["usage"]["output_tokens"].as_u64() {
                    self.output_tokens = output;
                }
            }
            "message_stop" => self.done = true,
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

    /// One chunk of an OpenAI-compatible chat completion stream.
    fn openai(
        &mut self,
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
            self.input_tokens = usage
                .get("prompt_tokens")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            self.output_tokens = usage
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
            match self
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
            let last_tool = self
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
            if let (Some(given), Some(Part::Tool { id, .. })) = (given_id, self.parts.get(&key)) {
                if !id.is_empty() && id != given {
                    key = self.parts.keys().max().map_or(1, |k| k + 1);
                }
            }
            let part = self.parts.entry(key).or_insert_with(|| Part::Tool {
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
            self.stop = Some(finish.to_string());
        }
        Ok(())
    }

    /// The reply, once the stream has ended the way its provider ends one.
    fn finish(self, provider: Provider) -> Result<Reply, Read> {
        // Anthropic ends with message_stop; OpenAI-compatible servers with [DONE], though some
        // close after the chunk with finish_reason.
        let complete = self.done || (provider == Provider::Openai && self.stop.is_some());
        if !complete {
            return Err(Read::Broken(
                "the answer stream ended before the answer did".into(),
            ));
        }
        let blocks = self
            .parts
            .into_values()
            .map(|part| match part {
                Part::Text(text) => Block::Text(text),
                Part::Tool { id, name, json } => Block::ToolUse {
                    id,
                    name,
                    input: if json.trim().is_empty() {
                        json!({})
                    } else {
                        // A model that sends arguments that are not JSON gets them back as an
                        // error.
                        serde_json::from_str(&json)
                            .unwrap_or_else(|_| json!({"__unparsed_arguments": json}))
                    },
                },
            })
            .collect();
        let truncated = matches!(self.stop.as_deref(), Some("max_tokens" | "length"));
        Ok(Reply {
            blocks,
            truncated,
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
        })
    }
}

/// The bytes of a block the model wrote.
fn block_bytes(block: &Block) -> u64 {
    match block {
        Block::Text(text) => text.len() as u64,
        Block::ToolUse { name, input, .. } => (name.len() + input.to_string().len()) as u64,
        Block::ToolResult { content, .. } => content.len() as u64,
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

    fn feed(provider: Provider, events: &[Value]) -> (Result<Reply, Read>, String) {
        let mut shown = String::new();
        let mut answer = Assembly::default();
        for event in events {
            let mut on_text = |piece: &str| shown.push_str(piece);
            let fed = match provider {
                Provider::Anthropic => answer.anthropic(event, &mut on_text),
                Provider::Openai => answer.openai(event, &mut on_text),
            };
            if let Err(e) = fed {
                return (Err(e), shown);
            }
        }
        (answer.finish(provider), shown)
    }

    #[test]
    fn a_streamed_anthropic_answer_is_put_back_together() {
        let events = [
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 120, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Let me "}}),
            json!({"type": "ping"}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "look."}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "t1", "name": "Read", "input": {}}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"file_pa"}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "th\": \"a.rs\"}"}}),
            json!({"type": "content_block_stop", "index": 1}),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 31}}),
            json!({"type": "message_stop"}),
        ];
        let (reply, shown) = feed(Provider::Anthropic, &events);
        let reply = reply.map_err(|_| "broken").unwrap();
        assert_eq!(shown, "Let me look.");
        assert_eq!(
            reply.blocks,
            vec![
                Block::Text("Let me look.".into()),
                Block::ToolUse {
                    id: "t1".into(),
                    name: "Read".into(),
                    input: json!({"file_path": "a.rs"})
                }
            ]
        );
        assert_eq!((reply.input_tokens, reply.output_tokens), (120, 31));
        assert!(!reply.truncated);

        // Without message_stop the answer is not whole: asked again.
        let (cut, _) = feed(Provider::Anthropic, &events[..9]);
        assert!(matches!(cut, Err(Read::Broken(_))));
        // An overloaded server mid-stream is asked again; a bad request is not.
        let overloaded =
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "busy"}});
        assert!(matches!(
            feed(Provider::Anthropic, &[overloaded]).0,
            Err(Read::Broken(_))
        ));
        let invalid =
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": "no"}});
        assert!(matches!(
            feed(Provider::Anthropic, &[invalid]).0,
            Err(Read::Failed(_))
        ));
    }

    #[test]
    fn a_streamed_openai_answer_is_put_back_together() {
        let chunk = |delta: Value, finish: Value| json!({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        let events = [
            chunk(json!({"role": "assistant", "content": ""}), Value::Null),
            chunk(json!({"content": "Running "}), Value::Null),
            chunk(json!({"content": "it."}), Value::Null),
            chunk(
                json!({"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "Bash", "arguments": ""}}]}),
                Value::Null,
            ),
            chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"command\": "}}]}),
                Value::Null,
            ),
            chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"ls\"}"}}]}),
                Value::Null,
            ),
            chunk(
                json!({"tool_calls": [{"index": 1, "id": "c2", "function": {"name": "Read", "arguments": "{\"file_path\":\"x\"}"}}]}),
                Value::Null,
            ),
            chunk(json!({}), json!("tool_calls")),
            json!({"choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": 7}}),
        ];
        let (reply, shown) = feed(Provider::Openai, &events);
        let reply = reply.map_err(|_| "broken").unwrap();
        assert_eq!(shown, "Running it.");
        assert_eq!(
            reply.blocks,
            vec![
                Block::Text("Running it.".into()),
                Block::ToolUse {
                    id: "c1".into(),
                    name: "Bash".into(),
                    input: json!({"command": "ls"})
                },
                Block::ToolUse {
                    id: "c2".into(),
                    name: "Read".into(),
                    input: json!({"file_path": "x"})
                }
            ]
        );
        assert_eq!((reply.input_tokens, reply.output_tokens), (50, 7));
        let (cut, _) = feed(
            Provider::Openai,
            &[chunk(json!({"content": "The fix"}), json!("length"))],
        );
        assert!(cut.map_err(|_| "broken").unwrap().truncated);
        let (broken, _) = feed(Provider::Openai, &events[..3]);
        assert!(
            matches!(broken, Err(Read::Broken(_))),
            "no finish_reason, no [DONE]"
        );

        // Index 0 for every call (told apart by their ids), and no index at all.
        let two_calls = |with_index: bool| {
            let piece = |id: Option<&str>, name: &str, args: &str| {
                let mut call = json!({"function": {"name": name, "arguments": args}});
                if let Some(id) = id {
                    call["id"] = json!(id);
                }
                if with_index {
                    call["index"] = json!(0);
                }
                chunk(json!({"tool_calls": [call]}), Value::Null)
            };
            vec![
                piece(Some("a"), "Bash", "{\"command\":"),
                piece(None, "", "\"ls\"}"),
                piece(Some("b"), "Read", "{\"file_path\":\"x\"}"),
                chunk(json!({}), json!("tool_calls")),
            ]
        };
        for with_index in [true, false] {
            let (reply, _) = feed(Provider::Openai, &two_calls(with_index));
            let calls: Vec<(String, Value)> = reply
                .map_err(|_| "broken")
                .unwrap()
                .blocks
                .into_iter()
                .filter_map(|b| match b {
                    Block::ToolUse { name, input, .. } => Some((name, input)),
                    _ => None,
                })
                .collect();
            assert_eq!(
                calls,
                vec![
                    ("Bash".to_string(), json!({"command": "ls"})),
                    ("Read".to_string(), json!({"file_path": "x"}))
                ],
                "with index: {with_index}"
            );
        }
    }
}
