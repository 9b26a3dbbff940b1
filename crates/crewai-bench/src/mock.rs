//! The two control calls to the mock server: `POST /stats/reset` and `GET /stats`.

use std::time::Duration;

use serde_json::Value;

use crate::error::{BenchError, BoxError};

/// Counters the mock server keeps since its last reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MockStats {
    pub chat_completions: u64,
    pub max_in_flight: u64,
}

impl MockStats {
    fn from_json(body: &Value) -> Option<MockStats> {
        Some(MockStats {
            chat_completions: body.get("chat_completions")?.as_u64()?,
            max_in_flight: body.get("max_in_flight")?.as_u64()?,
        })
    }
}

/// A small HTTP client for the server's control endpoints, with short timeouts.
pub struct StatsClient {
    http: reqwest::Client,
    port: u16,
}

impl StatsClient {
    pub fn new(port: u16) -> Result<StatsClient, BenchError> {
        // A fresh connection per call, as the CrewAI side's urllib does: a kept-alive one would
        // wait out the mock's Nagle + delayed-ACK stall (~40 ms) on every call. The server is
        // plain HTTP on 127.0.0.1: no proxy, and an empty root store, so building this client
        // does not read the system's certificates (milliseconds of a cold run otherwise).
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .no_proxy()
            .tls_certs_only(Vec::new())
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| BenchError::Mock {
                port,
                what: "(client setup)",
                source: e.into(),
            })?;
        Ok(StatsClient { http, port })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn failure(&self, what: &'static str, error: impl Into<BoxError>) -> BenchError {
        BenchError::Mock {
            port: self.port,
            what,
            source: error.into(),
        }
    }

    pub async fn reset(&self) -> Result<(), BenchError> {
        const WHAT: &str = "POST /stats/reset";
        self.http
            .post(self.url("/stats/reset"))
            .body("{}")
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|e| self.failure(WHAT, e))?;
        Ok(())
    }

    pub async fn stats(&self) -> Result<MockStats, BenchError> {
        const WHAT: &str = "GET /stats";
        let body: Value = self
            .http
            .get(self.url("/stats"))
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|e| self.failure(WHAT, e))?
            .json()
            .await
            .map_err(|e| self.failure(WHAT, e))?;
        MockStats::from_json(&body).ok_or_else(|| {
            self.failure(WHAT, format!("no chat_completions/max_in_flight in {body}"))
        })
    }
}

impl StatsClient {
    /// `GET /stats` once the mock has counted `expected` chat completions, or after half a
    /// second. The mock bumps its counters only after it has sent the answer, so a fast client
    /// can ask for the stats before the last answer is counted.
    pub async fn settled(&self, expected: u64) -> Result<MockStats, BenchError> {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(500);
        loop {
            let stats = self.stats().await?;
            if stats.chat_completions >= expected || tokio::time::Instant::now() >= deadline {
                return Ok(stats);
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_counters_the_mock_reports() {
        let body =
            serde_json::json!({"chat_completions": 8, "max_in_flight": 2, "by_kind": {"text": 6}});
        assert_eq!(
            MockStats::from_json(&body),
            Some(MockStats {
                chat_completions: 8,
                max_in_flight: 2
            })
        );
        assert_eq!(
            MockStats::from_json(&serde_json::json!({"chat_completions": 8})),
            None
        );
    }
}
