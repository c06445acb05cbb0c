//! Reading a model's answer: Server-Sent Events put back together into a [`Reply`] (each
//! provider's events in its own file), or one JSON document from a server that does not stream.

use std::collections::BTreeMap;

use futures_util::StreamExt;
use serde_json::{json, Value};

use super::{Block, ModelError, Provider, Reply};

/// Reads an answer: a stream of events, or one JSON document from a server that does not
/// stream.
pub(super) async fn read(
    provider: Provider,
    response: reqwest::Response,
    on_text: &mut (dyn FnMut(&str) + Send),
) -> Result<Reply, Read> {
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
            Provider::Anthropic => super::anthropic::reply(&answer),
            Provider::Openai => super::openai::reply(&answer),
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
            Provider::Anthropic => super::anthropic::event(&mut answer, &data, on_text)?,
            Provider::Openai => super::openai::chunk(&mut answer, &data, on_text)?,
        }
    }
    answer.finish(provider)
}

/// Why reading an answer stopped.
pub(super) enum Read {
    /// The stream ended early or broke: worth asking again.
    Broken(String),
    Failed(ModelError),
}

/// One block of a streamed answer, as far as it has come.
#[derive(Debug)]
pub(super) enum Part {
    Text(String),
    Tool {
        id: String,
        name: String,
        json: String,
    },
}
/// A streamed answer put back together from its events.
#[derive(Debug, Default)]
pub(super) struct Assembly {
    /// By the block's index in the answer (Anthropic's `index`; for OpenAI the text is 0 and
    /// tool call `i` is `i + 1`).
    pub(super) parts: BTreeMap<u64, Part>,
    pub(super) stop: Option<String>,
    pub(super) input_tokens: u64,
    pub(super) output_tokens: u64,
    pub(super) done: bool,
}
impl Assembly {
    /// The reply, once the stream has ended the way its provider ends one.
    pub(super) fn finish(self, provider: Provider) -> Result<Reply, Read> {
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
