//! The model behind `car do`: one trait over two wire shapes — Anthropic's Messages API and the
//! OpenAI-compatible chat completions API (OpenAI, Ollama, vLLM, llama.cpp's server, LM Studio,
//! OpenRouter) — streamed (Server-Sent Events, the text handed on as it arrives; a server that
//! answers with one JSON document instead is read as such), with retries and backoff on 429, 5xx
//! and a stream that breaks, and token usage for the run's budget.

use std::time::Duration;

use serde_json::{json, Value};

mod anthropic;
mod openai;
mod stream;

use stream::Read;

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
                anthropic::request(&self.config, system, messages, tools),
            ),
            Provider::Openai => {
                let mut body = openai::request(&self.config, system, messages, tools);
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
            match stream::read(self.config.provider, response, on_text).await {
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

/// The bytes of a block the model wrote.
fn block_bytes(block: &Block) -> u64 {
    match block {
        Block::Text(text) => text.len() as u64,
        Block::ToolUse { name, input, .. } => (name.len() + input.to_string().len()) as u64,
        Block::ToolResult { content, .. } => content.len() as u64,
    }
}

#[cfg(test)]
mod tests;
