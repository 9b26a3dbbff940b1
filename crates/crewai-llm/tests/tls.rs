//! HTTPS through the network transport, against a local TLS server that only speaks HTTP/2:
//! the platform verifier rejects a certificate nobody vouches for, and accepts it once the
//! root store (read at the first handshake) holds its authority, with HTTP/2 chosen by ALPN.
//!
//! One test in its own binary: it sets `SSL_CERT_FILE` for the process.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use crewai_llm::LlmError;
use crewai_llm::http::{ErrorContext, HttpRequest, NetworkTransport, Transport};
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A test certificate authority, and a server certificate it signed for `localhost` and
/// 127.0.0.1 (P-256, valid for 100 years).
const CA: &str = "-----BEGIN CERTIFICATE-----\nMIIBnzCCAUWgAwIBAgIUTBWL60C+/VkcPzLLrGTduqAqeccwCgYIKoZIzj0EAwIw\nHDEaMBgGA1UEAwwRY3Jld2FpLXJzIHRlc3QgQ0EwIBcNMjYxMjAxMTE1MTQ5WhgP\nMjEyNjExMDcxMTUxNDlaMBwxGjAYBgNVBAMMEWNyZXdhaS1ycyB0ZXN0IENBMFkw\nEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEw3dmEOfXpkHH1dYEWJrNXZCGgSK8AEFX\naqzsyZmVCffakbZCr/Ej/XkyJjvZEq7SZAoITJS4+XHPY5TxMw/QlaNjMGEwHQYD\nVR0OBBYEFCFu/Cuniu+piWjmsUKFaZZl3emPMB8GA1UdIwQYMBaAFCFu/Cuniu+p\niWjmsUKFaZZl3emPMA8GA1UdEwEB/wQFMAMBAf8wDgYDVR0PAQH/BAQDAgIEMAoG\nCCqGSM49BAMCA0gAMEUCIQCzWgbRIG8lb6Dfpx3iwgS1evWPmAvMQHgUVH4xPetK\nxAIgZPJyxx/hC/ujRMBGKomdq9hMqpW5vmohxuAkA6UfKeA=\n-----END CERTIFICATE-----";
const CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIByDCCAW2gAwIBAgIUMaeeoMvYhVHOqFog8y+Y5z2PGeowCgYIKoZIzj0EAwIw\nHDEaMBgGA1UEAwwRY3Jld2FpLXJzIHRlc3QgQ0EwIBcNMjYxMjAxMTE1MTQ5WhgP\nMjEyNjExMDcxMTUxNDlaMBQxEjAQBgNVBAMMCWxvY2FsaG9zdDBZMBMGByqGSM49\nAgEGCCqGSM49AwEHA0IABJlUH/pAvYNbPNPvNFspQjoQIK7BRdFmpljcZSencPgR\nukjYzq30Hki9umBdApzcsvDQofyJgHly3EuPiuli3FOjgZIwgY8wGgYDVR0RBBMw\nEYIJbG9jYWxob3N0hwR/AAABMAwGA1UdEwEB/wQCMAAwDgYDVR0PAQH/BAQDAgeA\nMBMGA1UdJQQMMAoGCCsGAQUFBwMBMB0GA1UdDgQWBBQk/iNngFF+JvIE6lDEcjbB\nlOwXIDAfBgNVHSMEGDAWgBQhbvwrp4rvqYlo5rFChWmWZd3pjzAKBggqhkjOPQQD\nAgNJADBGAiEAmoW/qFjlYJ5cvBSBXIwt+wJUun0NU0N1/Qbe/3Nwr4oCIQCAmGhK\nVmn/+DuhA0Z7JTUTrAcN4DI26f+5+QrngVSSNQ==\n-----END CERTIFICATE-----";
const KEY: &str = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgZ+JK8P8dxzgklZdf\nzyQpHJ51rhQtJ+TKhF4M9xyATsGhRANCAASZVB/6QL2DWzzT7zRbKUI6ECCuwUXR\nZqZY3GUnp3D4EbpI2M6t9B5IvbpgXQKc3LLw0KH8iYB5ctxLj4rpYtxT\n-----END PRIVATE KEY-----";

/// Serves HTTP/2 over TLS on 127.0.0.1; every reply names the HTTP version it was asked in.
async fn h2_tls_server() -> u16 {
    let cert = CertificateDer::from_pem_slice(CERT.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    let key = PrivateKeyDer::from_pem_slice(KEY.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap_or_else(|e| panic!("{e}"))
    .with_no_client_auth()
    .with_single_cert(vec![cert], key)
    .unwrap_or_else(|e| panic!("{e}"));
    config.alpn_protocols = vec![b"h2".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let port = listener
        .local_addr()
        .unwrap_or_else(|e| panic!("{e}"))
        .port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                // A client that rejects the certificate ends the handshake here.
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = service_fn(
                    |request: hyper::Request<hyper::body::Incoming>| async move {
                        let version = format!("{:?}", request.version());
                        Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from(version))))
                    },
                );
                let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    port
}

fn request(port: u16) -> HttpRequest {
    HttpRequest {
        method: "POST".into(),
        url: format!("https://localhost:{port}/v1/chat/completions"),
        headers: vec![("content-type".into(), "application/json".into())],
        body: Bytes::from_static(b"{}"),
        streaming: false,
    }
}

#[tokio::test]
async fn https_is_verified_against_the_platform_roots_and_speaks_http2() {
    let port = h2_tls_server().await;
    let context = ErrorContext::new("test", "test-model", "TEST_API_KEY");

    // The system roots do not hold the test certificate.
    let untrusting = NetworkTransport::new(Duration::from_millis(3_001), Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("{e}"));
    match untrusting.send(request(port), &context).await {
        Err(error @ LlmError::Connection { .. }) => {
            let text = crewai_llm::error_chain(&error);
            assert!(text.to_lowercase().contains("certificate"), "{text}");
        }
        other => panic!("an unknown issuer must be refused, got {other:?}"),
    }

    // A root store of just the test authority, read by a fresh pool at its first handshake.
    let file = std::env::temp_dir().join(format!("crewai-llm-tls-{}.pem", std::process::id()));
    std::fs::write(&file, CA).unwrap_or_else(|e| panic!("{e}"));
    // SAFETY: the only test in this binary, and no other thread reads the environment now.
    unsafe { std::env::set_var("SSL_CERT_FILE", &file) };
    let trusting = NetworkTransport::new(Duration::from_millis(3_002), Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("{e}"));
    for _ in 0..2 {
        let response = trusting
            .send(request(port), &context)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(response.status, 200);
        let body = response
            .body
            .into_bytes()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(body, "HTTP/2.0");
    }
    let _ = std::fs::remove_file(&file);
}
