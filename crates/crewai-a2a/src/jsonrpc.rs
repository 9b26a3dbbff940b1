//! JSON-RPC 2.0 envelopes and the error codes A2A 0.3.0 defines.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The A2A methods of protocol 0.3.0 that this crate speaks.
pub mod method {
    pub const SEND: &str = "message/send";
    pub const STREAM: &str = "message/stream";
    pub const GET_TASK: &str = "tasks/get";
    pub const CANCEL_TASK: &str = "tasks/cancel";
}

/// Error codes: JSON-RPC's own and A2A's (-32001 to -32006).
pub mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
    pub const TASK_NOT_FOUND: i64 = -32001;
    pub const TASK_NOT_CANCELABLE: i64 = -32002;
    pub const PUSH_NOTIFICATION_NOT_SUPPORTED: i64 = -32003;
    pub const UNSUPPORTED_OPERATION: i64 = -32004;
    pub const CONTENT_TYPE_NOT_SUPPORTED: i64 = -32005;
    pub const INVALID_AGENT_RESPONSE: i64 = -32006;
}

/// A request id: text, a number, or null (a notification-like request the server still answers).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    Text(String),
    Number(i64),
    Null,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request<P> {
    pub jsonrpc: Version,
    pub id: RequestId,
    pub method: String,
    pub params: P,
}

/// The `"2.0"` every envelope carries; any other value does not parse.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Version {
    #[default]
    #[serde(rename = "2.0")]
    V2,
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl ErrorObject {
    pub fn new(code: i64, message: impl Into<String>) -> ErrorObject {
        ErrorObject {
            code,
            message: message.into(),
            data: None,
        }
    }
}

/// A response as read by a client: exactly one of `result` and `error`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Response {
    pub jsonrpc: Version,
    #[serde(default)]
    pub id: Option<RequestId>,
    #[serde(default)]
    pub result: Option<Value>,
    #[serde(default)]
    pub error: Option<ErrorObject>,
}

/// The success envelope a server writes.
#[derive(Debug, Clone, Serialize)]
pub struct Success<'a, R: Serialize> {
    pub jsonrpc: Version,
    pub id: &'a RequestId,
    pub result: R,
}

/// The error envelope a server writes.
#[derive(Debug, Clone, Serialize)]
pub struct Failure<'a> {
    pub jsonrpc: Version,
    pub id: &'a RequestId,
    pub error: ErrorObject,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_version_must_be_2_0() {
        let wrong: Result<Response, _> =
            serde_json::from_value(json!({"jsonrpc": "1.0", "id": 1, "result": {}}));
        assert!(wrong.is_err());
        let right: Response = serde_json::from_value(
            json!({"jsonrpc": "2.0", "id": "a", "error": {"code": -32001, "message": "gone"}}),
        )
        .unwrap();
        assert_eq!(right.error.unwrap().code, code::TASK_NOT_FOUND);
    }
}
