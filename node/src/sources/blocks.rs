//! Turning the message shapes most agents share into records: Anthropic-
//! style content blocks (`text`, `tool_use`, `tool_result`, `thinking`),
//! OpenAI-style `tool_calls`, and a one-line description of a tool call.

use serde_json::Value;

use super::common::{TEXT_CAP, TOOL_OUTPUT_CAP, cap_text};
use crate::record::{Record, Role};

/// Builds a record for a role and text, with the message's session, time,
/// project and offset filled in by the caller.
pub type Make<'a> = &'a dyn Fn(Role, String) -> Record;

/// A compact, searchable line for a tool call, plus the files it names.
pub fn tool_call(name: &str, args: &Value) -> (String, Vec<String>) {
    // Arguments are sometimes a JSON string (OpenAI `function.arguments`).
    let parsed;
    let args = match args {
        Value::String(s) => {
            parsed = serde_json::from_str::<Value>(s).unwrap_or_else(|_| Value::String(s.clone()));
            &parsed
        }
        other => other,
    };
    let s = |k: &str| {
        args.get(k)
            .and_then(Value::as_str)
            .filter(|v| !v.trim().is_empty())
    };
    let files: Vec<String> = ["path", "file_path", "filePath", "file", "target_file"]
        .iter()
        .find_map(|k| s(k))
        .map(str::to_owned)
        .into_iter()
        .collect();
    let text = if let Some(cmd) = s("command").or(s("cmd")) {
        format!("{name}: {cmd}")
    } else if let Some(f) = files.first() {
        format!("{name} {f}")
    } else {
        match args {
            Value::Object(o) if !o.is_empty() => format!("{name} {args}"),
            Value::String(s) if !s.is_empty() => format!("{name} {s}"),
            _ => name.to_owned(),
        }
    };
    (cap_text(&text, TEXT_CAP), files)
}

/// The text of a tool result's content: a string, or text blocks.
pub fn result_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .filter_map(|i| match i {
                Value::String(s) => Some(s.as_str()),
                Value::Object(o) => o.get("text").and_then(Value::as_str),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Object(o) => ["output", "text", "content", "result"]
            .iter()
            .find_map(|k| o.get(*k))
            .map(result_text)
            .unwrap_or_default(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Pushes a tool output record (capped) unless it is empty.
pub fn push_output(text: &str, mk: Make<'_>, out: &mut Vec<Record>) {
    if !text.trim().is_empty() {
        out.push(mk(Role::ToolOutput, cap_text(text, TOOL_OUTPUT_CAP)));
    }
}

/// Pushes a conversation record (capped) unless it is empty.
pub fn push_text(role: Role, text: &str, mk: Make<'_>, out: &mut Vec<Record>) {
    let t = text.trim();
    if !t.is_empty() {
        out.push(mk(role, cap_text(t, TEXT_CAP)));
    }
}

/// Pushes a tool call record.
pub fn push_call(name: &str, args: &Value, mk: Make<'_>, out: &mut Vec<Record>) {
    let (text, files) = tool_call(name, args);
    let mut r = mk(Role::ToolCall, text);
    r.files = files;
    out.push(r);
}

/// Records from one message's content: a plain string, or an array of
/// blocks. `text` blocks become one record of `role`; `tool_use` blocks tool
/// calls; `tool_result` blocks tool outputs; thinking, images and unknown
/// blocks are skipped.
pub fn content(role: Role, content: &Value, mk: Make<'_>, out: &mut Vec<Record>) {
    match content {
        Value::String(s) => push_text(role, s, mk, out),
        Value::Array(items) => {
            let mut text = String::new();
            for b in items {
                let kind = b.get("type").and_then(Value::as_str).unwrap_or("text");
                match kind {
                    "text" | "input_text" | "output_text" => {
                        if let Some(t) = b.get("text").and_then(Value::as_str)
                            && !t.trim().is_empty()
                        {
                            if !text.is_empty() {
                                text.push_str("\n\n");
                            }
                            text.push_str(t);
                        }
                    }
                    "tool_use" | "toolCall" | "tool_call" => {
                        let name = b.get("name").and_then(Value::as_str).unwrap_or("tool");
                        let args = b
                            .get("input")
                            .or_else(|| b.get("arguments"))
                            .or_else(|| b.get("args"))
                            .unwrap_or(&Value::Null);
                        push_call(name, args, mk, out);
                    }
                    "tool_result" | "toolResult" => {
                        let c = b.get("content").or_else(|| b.get("output"));
                        push_output(&result_text(c.unwrap_or(&Value::Null)), mk, out);
                    }
                    _ => {}
                }
            }
            push_text(role, &text, mk, out);
        }
        _ => {}
    }
}

/// OpenAI-style `tool_calls: [{id, function: {name, arguments}}]`.
pub fn openai_tool_calls(calls: &Value, mk: Make<'_>, out: &mut Vec<Record>) {
    for c in calls.as_array().into_iter().flatten() {
        let f = c.get("function").unwrap_or(c);
        let name = f.get("name").and_then(Value::as_str).unwrap_or("tool");
        let args = f.get("arguments").unwrap_or(&Value::Null);
        push_call(name, args, mk, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn blocks_become_text_calls_and_outputs() {
        let mk = |role, text: String| Record::new("t", "s", role, text);
        let mut out = Vec::new();
        content(
            Role::Assistant,
            &json!([
                {"type":"thinking","thinking":"no"},
                {"type":"text","text":"hello"},
                {"type":"tool_use","name":"bash","input":{"command":"ls -la"}},
                {"type":"tool_result","content":[{"type":"text","text":"a.txt"}]},
                {"type":"text","text":"world"}
            ]),
            &mk,
            &mut out,
        );
        let got: Vec<(Role, &str)> = out.iter().map(|r| (r.role, r.text.as_str())).collect();
        assert_eq!(
            got,
            vec![
                (Role::ToolCall, "bash: ls -la"),
                (Role::ToolOutput, "a.txt"),
                (Role::Assistant, "hello\n\nworld"),
            ]
        );
        let (t, files) = tool_call("edit", &json!("{\"path\":\"/a/b.rs\"}"));
        assert_eq!(
            (t.as_str(), files),
            ("edit /a/b.rs", vec!["/a/b.rs".to_owned()])
        );
    }
}
