//! Screening of incoming JSON-RPC lines before rmcp sees them.
//!
//! rmcp drops a line that is not JSON without a word, and answers other
//! malformed messages with an error that has no `id` member at all, so a
//! client waiting on that id hangs. JSON-RPC 2.0 wants every request
//! answered: a parse error with -32700 and `"id": null`, an invalid request
//! with -32600 and its id (or `null` when the id itself is unusable), bad
//! parameters of a known method with -32602. This module decides, for one
//! line, whether to pass it on to rmcp or what to answer instead. It is
//! pure: no I/O.

use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage};
use serde_json::{Value, json};

/// JSON-RPC: the text is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: the JSON is not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC: the parameters do not fit the method.
pub const INVALID_PARAMS: i64 = -32602;

/// Request methods a client may send in the MCP specification; a request
/// for one of these that rmcp can only read as a custom request has
/// parameters of the wrong shape.
const STANDARD_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "resources/unsubscribe",
    "completion/complete",
    "logging/setLevel",
];

/// What to do with one incoming line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Screened {
    /// A well-formed message: hand the line to rmcp unchanged.
    Forward,
    /// Answer with this JSON text (one line, no newline) and do not forward.
    Reply(String),
    /// Nothing to do (a blank line, or a malformed notification or
    /// response, which JSON-RPC never answers).
    Ignore,
}

/// Screens one line (without its newline).
pub fn screen(line: &[u8]) -> Screened {
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Screened::Ignore;
    }
    let value: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(_) => {
            return reply(
                Value::Null,
                PARSE_ERROR,
                "Parse error: the line is not JSON",
            );
        }
    };
    match value {
        Value::Array(items) => batch(&items),
        Value::Object(_) => match check(&value) {
            Check::Ok => Screened::Forward,
            Check::Error(id, code, msg) => reply(id, code, &msg),
            Check::Silent => Screened::Ignore,
        },
        _ => reply(
            Value::Null,
            INVALID_REQUEST,
            "Invalid request: a message must be a JSON object",
        ),
    }
}

/// An error response line.
pub fn error_line(id: Value, code: i64, message: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).to_string()
}

fn reply(id: Value, code: i64, message: &str) -> Screened {
    Screened::Reply(error_line(id, code, message))
}

/// MCP does not take JSON-RPC batches (removed from the protocol in
/// 2025-06-18): each request in one gets its own error, in one array.
fn batch(items: &[Value]) -> Screened {
    if items.is_empty() {
        return reply(Value::Null, INVALID_REQUEST, "Invalid request: empty batch");
    }
    let answers: Vec<Value> = items
        .iter()
        .filter_map(|item| {
            let id = usable_id(item.get("id")?)?;
            Some(json!({"jsonrpc": "2.0", "id": id, "error": {
                "code": INVALID_REQUEST,
                "message": "Invalid request: batches are not supported; send one message per line",
            }}))
        })
        .collect();
    if answers.is_empty() {
        // Only notifications (or messages without a usable id): nothing
        // can be matched to an answer, so one answer for the whole line.
        return reply(
            Value::Null,
            INVALID_REQUEST,
            "Invalid request: batches are not supported; send one message per line",
        );
    }
    Screened::Reply(Value::Array(answers).to_string())
}

enum Check {
    Ok,
    Error(Value, i64, String),
    Silent,
}

/// A request id as JSON-RPC allows it here: a string or an integer.
fn usable_id(v: &Value) -> Option<Value> {
    match v {
        Value::String(_) => Some(v.clone()),
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(v.clone()),
        _ => None,
    }
}

fn check(msg: &Value) -> Check {
    let raw_id = msg.get("id");
    let id = raw_id.and_then(usable_id);
    let id_or_null = id.clone().unwrap_or(Value::Null);
    let invalid = |why: &str| Check::Error(id_or_null.clone(), INVALID_REQUEST, why.to_owned());
    if msg.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid("Invalid request: \"jsonrpc\" must be \"2.0\"");
    }
    if raw_id.is_some() && id.is_none() {
        return invalid("Invalid request: \"id\" must be a string or an integer");
    }
    let Some(method) = msg.get("method") else {
        // A response to a request this server sent.
        if id.is_none() || (msg.get("result").is_none() && msg.get("error").is_none()) {
            return invalid("Invalid request: no \"method\", \"result\" or \"error\"");
        }
        return match serde_json::from_value::<ClientJsonRpcMessage>(msg.clone()) {
            Ok(_) => Check::Ok,
            Err(e) => {
                tracing::debug!(error = %e, "ignoring a malformed response from the client");
                Check::Silent
            }
        };
    };
    let Some(method) = method.as_str() else {
        return invalid("Invalid request: \"method\" must be a string");
    };
    let params_ok = matches!(msg.get("params"), None | Some(Value::Object(_)));
    if id.is_none() {
        // A notification is never answered, even a malformed one.
        if !params_ok {
            tracing::debug!(
                method,
                "ignoring a notification whose params are not an object"
            );
            return Check::Silent;
        }
        return Check::Ok;
    }
    if !params_ok {
        return invalid("Invalid request: \"params\" must be an object");
    }
    let standard = STANDARD_METHODS.contains(&method);
    let bad_params = || {
        Check::Error(
            id_or_null.clone(),
            INVALID_PARAMS,
            format!("Invalid params for {method}"),
        )
    };
    match serde_json::from_value::<ClientJsonRpcMessage>(msg.clone()) {
        Ok(JsonRpcMessage::Request(r))
            if standard && matches!(r.request, ClientRequest::CustomRequest(_)) =>
        {
            bad_params()
        }
        Ok(_) => Check::Ok,
        Err(_) if standard => bad_params(),
        Err(_) => invalid("Invalid request"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(line: &str) -> Value {
        match screen(line.as_bytes()) {
            Screened::Reply(s) => serde_json::from_str(&s).expect("reply is JSON"),
            other => panic!("{line}: expected a reply, got {other:?}"),
        }
    }

    fn code_and_id(v: &Value) -> (i64, Value) {
        assert_eq!(v["jsonrpc"], "2.0", "{v}");
        assert!(v.get("id").is_some(), "a response must carry an id: {v}");
        (
            v["error"]["code"].as_i64().expect("error code"),
            v["id"].clone(),
        )
    }

    #[test]
    fn malformed_lines_get_the_error_the_specification_names() {
        let cases: &[(&str, i64, Value)] = &[
            ("not json at all", PARSE_ERROR, Value::Null),
            ("{\"jsonrpc\":\"2.0\",\"id\":1,", PARSE_ERROR, Value::Null),
            ("42", INVALID_REQUEST, Value::Null),
            ("\"text\"", INVALID_REQUEST, Value::Null),
            ("null", INVALID_REQUEST, Value::Null),
            ("{\"foo\":\"bar\"}", INVALID_REQUEST, Value::Null),
            ("[]", INVALID_REQUEST, Value::Null),
            (
                r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":[]}"#,
                INVALID_REQUEST,
                json!(2),
            ),
            (
                r#"{"jsonrpc":"2.0","id":"s3","method":"tools/call","params":[1,2]}"#,
                INVALID_REQUEST,
                json!("s3"),
            ),
            (
                r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":"x"}"#,
                INVALID_REQUEST,
                json!(4),
            ),
            (
                r#"{"jsonrpc":"1.0","id":5,"method":"tools/list"}"#,
                INVALID_REQUEST,
                json!(5),
            ),
            (
                r#"{"id":6,"method":"tools/list"}"#,
                INVALID_REQUEST,
                json!(6),
            ),
            (
                r#"{"jsonrpc":"2.0","id":null,"method":"tools/list"}"#,
                INVALID_REQUEST,
                Value::Null,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}"#,
                INVALID_REQUEST,
                Value::Null,
            ),
            (
                r#"{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}"#,
                INVALID_REQUEST,
                Value::Null,
            ),
            (
                r#"{"jsonrpc":"2.0","id":8,"method":7}"#,
                INVALID_REQUEST,
                json!(8),
            ),
            (r#"{"jsonrpc":"2.0","id":9}"#, INVALID_REQUEST, json!(9)),
            (
                r#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"nome":"x"}}"#,
                INVALID_PARAMS,
                json!(10),
            ),
            (
                r#"{"jsonrpc":"2.0","id":11,"method":"initialize","params":{"protocolVersion":5}}"#,
                INVALID_PARAMS,
                json!(11),
            ),
        ];
        for (line, code, id) in cases {
            let v = answer(line);
            assert_eq!(code_and_id(&v), (*code, id.clone()), "{line} -> {v}");
            assert!(!v["error"]["message"].as_str().unwrap_or("").is_empty());
        }
    }

    #[test]
    fn a_batch_answers_each_request_in_it() {
        let v = answer(
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":"b","method":"tools/list"}]"#,
        );
        let items = v.as_array().expect("array");
        let got: Vec<(i64, Value)> = items.iter().map(code_and_id).collect();
        assert_eq!(
            got,
            [(INVALID_REQUEST, json!(1)), (INVALID_REQUEST, json!("b"))]
        );
        let v = answer(r#"[{"jsonrpc":"2.0","method":"notifications/initialized"}]"#);
        assert_eq!(code_and_id(&v), (INVALID_REQUEST, Value::Null));
    }

    #[test]
    fn well_formed_messages_are_forwarded() {
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"0"}}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"search","arguments":{"query":"q"}}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#,
            // Unknown methods go through: rmcp answers them with -32601.
            r#"{"jsonrpc":"2.0","id":4,"method":"no/such"}"#,
            "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}\r",
        ] {
            assert_eq!(screen(line.as_bytes()), Screened::Forward, "{line}");
        }
    }

    #[test]
    fn blank_lines_and_malformed_notifications_are_not_answered() {
        for line in [
            "",
            "   ",
            "\r",
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":[1]}"#,
        ] {
            assert_eq!(screen(line.as_bytes()), Screened::Ignore, "{line:?}");
        }
    }

    #[test]
    fn invalid_utf8_is_a_parse_error() {
        let v = match screen(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}") {
            Screened::Reply(s) => serde_json::from_str::<Value>(&s).expect("json"),
            other => panic!("{other:?}"),
        };
        assert_eq!(code_and_id(&v), (PARSE_ERROR, Value::Null));
    }
}
