//! A minimal OTLP/HTTP collector for the tests of the CLI's trace export.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

/// A minimal OTLP/HTTP collector on 127.0.0.1: answers 200 to every POST and keeps each whole
/// request (head and body), so tests can check paths and content types, or search everything
/// an exporter sent.
pub struct Collector {
    /// `http://127.0.0.1:PORT`, what `OTEL_EXPORTER_OTLP_ENDPOINT` takes.
    pub url: String,
    requests: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Collector {
    pub fn start() -> Collector {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let requests: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
        let keep = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                if let Some(request) = read_request(&mut stream) {
                    keep.lock().unwrap().push(request);
                }
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                );
            }
        });
        Collector {
            url: format!("http://{address}"),
            requests,
        }
    }

    /// Every request received so far, head and body, in arrival order.
    pub fn requests(&self) -> Vec<Vec<u8>> {
        self.requests.lock().unwrap().clone()
    }

    /// The (path, content type) of every request received so far.
    pub fn paths_and_content_types(&self) -> Vec<(String, String)> {
        self.requests()
            .iter()
            .map(|request| {
                let head = String::from_utf8_lossy(request).to_ascii_lowercase();
                let head = head
                    .split("\r\n\r\n")
                    .next()
                    .unwrap_or_default()
                    .to_string();
                let path = head
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or_default()
                    .to_string();
                let content_type = header(&head, "content-type").unwrap_or_default();
                (path, content_type)
            })
            .collect()
    }
}

/// Reads one request: the head, then as many body bytes as `content-length` says.
fn read_request(stream: &mut impl Read) -> Option<Vec<u8>> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    while let Ok(n) = stream.read(&mut chunk) {
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
        let Some(head_end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&buffer[..head_end]).to_ascii_lowercase();
        let length = header(&head, "content-length")
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(0);
        if buffer.len() >= head_end + 4 + length {
            return Some(buffer);
        }
    }
    None
}

/// A header's value from a lower-cased request head.
fn header(head: &str, name: &str) -> Option<String> {
    head.lines()
        .find_map(|line| line.strip_prefix(&format!("{name}:")))
        .map(|value| value.trim().to_string())
}
