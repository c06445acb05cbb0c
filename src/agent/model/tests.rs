use super::stream::{Assembly, Read};
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
    let body = openai::request(&config, "sys", &messages, &[]);
    assert_eq!(
        body["messages"][2]["tool_calls"][0]["function"]["arguments"],
        "{\"command\":\"ls\"}"
    );
    assert_eq!(
        body["messages"][3],
        json!({"role": "tool", "tool_call_id": "c1", "content": "a.txt"})
    );
    let body = anthropic::request(&config, "sys", &messages, &[]);
    assert_eq!(body["messages"][2]["content"][0]["tool_use_id"], "c1");
    let reply = openai::reply(&json!({"choices": [{"message": {"content": null, "tool_calls": [
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
    let cut = anthropic::reply(&json!({"content": [{"type": "text", "text": "The fix is"}],
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
            Provider::Anthropic => anthropic::event(&mut answer, event, &mut on_text),
            Provider::Openai => openai::chunk(&mut answer, event, &mut on_text),
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
