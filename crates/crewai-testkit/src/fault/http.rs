//! Just enough HTTP/1.1 to read a request off a kept-alive connection and write a response head.

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use crate::scripted::RenderedReply;

/// One parsed HTTP request.
pub(super) struct HttpRequest {
    pub(super) method: String,
    pub(super) path: String,
    pub(super) headers: Vec<(String, String)>,
    pub(super) body: Vec<u8>,
}

/// Requests larger than this are refused (a test bug, not a workload).
const MAX_REQUEST_BYTES: usize = 16 * 1024 * 1024;

/// Reads one request; `None` when the connection ends or the request cannot be parsed.
pub(super) async fn read_request(
    stream: &mut TcpStream,
    buffer: &mut Vec<u8>,
) -> Option<HttpRequest> {
    let header_end = loop {
        if let Some(end) = find(buffer, b"\r\n\r\n") {
            break end;
        }
        if buffer.len() > MAX_REQUEST_BYTES || !read_more(stream, buffer).await {
            return None;
        }
    };
    let head = String::from_utf8_lossy(&buffer[..header_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split_whitespace();
    let method = request_line.next()?.to_string();
    let target = request_line.next()?;
    let path = target.split('?').next().unwrap_or(target).to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or(0);
    let body_start = header_end + 4;
    if length > MAX_REQUEST_BYTES {
        return None;
    }
    while buffer.len() < body_start + length {
        if !read_more(stream, buffer).await {
            return None;
        }
    }
    let body = buffer[body_start..body_start + length].to_vec();
    buffer.drain(..body_start + length);
    Some(HttpRequest {
        method,
        path,
        headers,
        body,
    })
}

async fn read_more(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> bool {
    let mut chunk = [0u8; 8192];
    match stream.read(&mut chunk).await {
        Ok(0) | Err(_) => false,
        Ok(read) => {
            buffer.extend_from_slice(&chunk[..read]);
            true
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// The status line and headers of a response whose body has `length` bytes.
pub(super) fn response_head(rendered: &RenderedReply, length: usize) -> String {
    let reason = http::StatusCode::from_u16(rendered.status)
        .ok()
        .and_then(|status| status.canonical_reason())
        .unwrap_or("Unknown");
    let mut head = format!(
        "HTTP/1.1 {} {reason}\r\ncontent-type: {}\r\ncontent-length: {length}\r\nconnection: keep-alive\r\n",
        rendered.status, rendered.content_type
    );
    for (name, value) in &rendered.headers {
        if !name.contains(['\r', '\n']) && !value.contains(['\r', '\n']) {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    head.push_str("\r\n");
    head
}
