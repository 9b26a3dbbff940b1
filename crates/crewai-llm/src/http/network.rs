//! The connections under [`super::NetworkTransport`]: TCP that acknowledges promptly, TLS whose
//! root store is read on the first handshake, one pool per connect timeout.
//!
//! Why not reqwest's own connector: reqwest gives no access to the socket of a connection
//! (its `connector_layer` must return reqwest's sealed `Conn`), and the acknowledgement fix below
//! needs the socket. Requests that an `HTTP(S)_PROXY`/`ALL_PROXY` setting routes through a proxy
//! still go through reqwest, which implements proxy tunnels and proxy authentication.

use std::error::Error as StdError;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::client::proxy::matcher::Matcher;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::error::LlmError;

/// How long an idle kept-alive connection stays in the pool (reqwest's and hyper's default).
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// The hyper client of the direct (not proxied) requests.
pub(super) type DirectClient = Client<HttpsConnector<QuickAckConnector>, Full<Bytes>>;

/// Everything the transports with one connect timeout share: the pool of direct connections,
/// the proxy settings of the environment, and (built on first use) reqwest for proxied requests.
pub(super) struct SharedNetwork {
    pub(super) direct: DirectClient,
    proxies: Matcher,
    connect_timeout: Duration,
    proxied: OnceLock<Result<reqwest::Client, Arc<reqwest::Error>>>,
}

impl SharedNetwork {
    fn new(connect_timeout: Duration) -> Result<SharedNetwork, LlmError> {
        let mut tcp = HttpConnector::new();
        // https:// URLs pass through this connector to the TLS layer above it.
        tcp.enforce_http(false);
        tcp.set_nodelay(true);
        tcp.set_connect_timeout(Some(connect_timeout));
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls_config()?)
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .wrap_connector(QuickAckConnector { tcp });
        let direct = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .build(https);
        Ok(SharedNetwork {
            direct,
            proxies: Matcher::from_env(),
            connect_timeout,
            proxied: OnceLock::new(),
        })
    }

    /// The process's network for a connect timeout, built once: one pool means kept-alive
    /// connections are reused across model clients and crews (it holds connections, not run
    /// state).
    pub(super) fn shared(connect_timeout: Duration) -> Result<Arc<SharedNetwork>, LlmError> {
        type Networks = std::sync::Mutex<std::collections::HashMap<Duration, Arc<SharedNetwork>>>;
        static NETWORKS: OnceLock<Networks> = OnceLock::new();
        let mut networks = NETWORKS
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(network) = networks.get(&connect_timeout) {
            return Ok(network.clone());
        }
        let network = Arc::new(SharedNetwork::new(connect_timeout)?);
        networks.insert(connect_timeout, network.clone());
        Ok(network)
    }

    /// Whether the environment's proxy settings send requests to `uri` through a proxy.
    pub(super) fn is_proxied(&self, uri: &http::Uri) -> bool {
        self.proxies.intercept(uri).is_some()
    }

    /// reqwest, for proxied requests; it reads the same proxy settings from the environment.
    pub(super) fn proxied_client(&self) -> Result<&reqwest::Client, LlmError> {
        self.proxied
            .get_or_init(|| {
                reqwest::Client::builder()
                    .connect_timeout(self.connect_timeout)
                    .user_agent(super::USER_AGENT)
                    .build()
                    .map_err(Arc::new)
            })
            .as_ref()
            .map_err(|e| {
                LlmError::invalid_config("could not build the HTTP proxy client", Arc::clone(e))
            })
    }
}

/// TLS as reqwest sets it up (the platform's verifier, TLS 1.2 and 1.3, the process's default
/// crypto provider or aws-lc-rs), except that the root store is read at the first handshake:
/// reading and parsing the system certificates takes milliseconds, and a run that only speaks
/// plain HTTP (a local Ollama, vLLM or test server) never needs them.
fn tls_config() -> Result<rustls::ClientConfig, LlmError> {
    let provider = CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::aws_lc_rs::default_provider()));
    let verifier = LazyPlatformVerifier {
        provider: provider.clone(),
        verifier: OnceLock::new(),
    };
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| {
            LlmError::invalid_config(
                "the installed rustls crypto provider does not support TLS 1.2/1.3",
                e,
            )
        })?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    Ok(config)
}

/// The platform's certificate verifier (`rustls-platform-verifier`, as reqwest uses), created
/// on first use.
#[derive(Debug)]
struct LazyPlatformVerifier {
    provider: Arc<CryptoProvider>,
    verifier: OnceLock<Result<rustls_platform_verifier::Verifier, rustls::Error>>,
}

impl LazyPlatformVerifier {
    fn get(&self) -> Result<&rustls_platform_verifier::Verifier, rustls::Error> {
        self.verifier
            .get_or_init(|| rustls_platform_verifier::Verifier::new(self.provider.clone()))
            .as_ref()
            .map_err(Clone::clone)
    }
}

impl ServerCertVerifier for LazyPlatformVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.get()?
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.get()?.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.get()?.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        // The schemes come from the crypto provider, not the root store: answering from the
        // provider keeps the store unread until a certificate has to be checked.
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// Opens TCP connections through hyper's connector and wraps them in [`QuickAckStream`].
#[derive(Clone)]
pub(super) struct QuickAckConnector {
    tcp: HttpConnector,
}

type BoxError = Box<dyn StdError + Send + Sync>;

impl tower_service::Service<http::Uri> for QuickAckConnector {
    type Response = QuickAckStream;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<QuickAckStream, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.tcp.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let connecting = self.tcp.call(uri);
        Box::pin(async move {
            let stream = connecting.await?.into_inner();
            Ok(QuickAckStream::new(stream))
        })
    }
}

/// A TCP connection that sends the acknowledgement of what it has read right away.
///
/// Linux delays the ACK of received data by up to 40 ms once a connection looks interactive
/// ("pingpong" mode: we sent data soon after receiving some, as every request on a kept-alive
/// connection does), hoping to piggyback it on the next write. A server that writes its status
/// line and headers and then its body in two writes without `TCP_NODELAY` (Python's
/// `http.server`, and so the benchmark's mock server, does) holds the body back under Nagle's
/// algorithm until that ACK arrives: every reply on a reused connection then takes 40 ms more
/// (measured: 44–55 ms per call instead of 0.3 ms). HTTP/1.1 never has a write of ours to carry
/// the ACK while we wait for a response, so delaying it buys nothing. `TCP_QUICKACK` switches
/// the socket out of delayed-ACK mode and sends a pending ACK, but the kernel can switch back
/// after the next exchange, so it is set again after every read that returned data (one
/// `setsockopt`, well under a microsecond). Other platforms have no such switch; there the
/// stream is a plain TCP stream.
pub(super) struct QuickAckStream {
    io: TokioIo<RearmingTcp>,
}

impl QuickAckStream {
    fn new(stream: TcpStream) -> QuickAckStream {
        let tcp = RearmingTcp { stream };
        tcp.acknowledge_promptly();
        QuickAckStream {
            io: TokioIo::new(tcp),
        }
    }

    fn tcp(&self) -> &TcpStream {
        &self.io.inner().stream
    }
}

impl Connection for QuickAckStream {
    fn connected(&self) -> Connected {
        self.tcp().connected()
    }
}

impl Read for QuickAckStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl Write for QuickAckStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// The tokio TCP stream under [`QuickAckStream`], re-arming `TCP_QUICKACK` after each read.
struct RearmingTcp {
    stream: TcpStream,
}

impl RearmingTcp {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn acknowledge_promptly(&self) {
        // Best effort: if the kernel refuses, the connection still works, only slower.
        let _ = socket2::SockRef::from(&self.stream).set_tcp_quickack(true);
    }

    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    fn acknowledge_promptly(&self) {}
}

impl AsyncRead for RearmingTcp {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        ready!(Pin::new(&mut self.stream).poll_read(cx, buf))?;
        if buf.filled().len() > before {
            self.acknowledge_promptly();
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for RearmingTcp {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(all(test, any(target_os = "linux", target_os = "android")))]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// After each read through the stream the socket is out of delayed-ACK mode, even though
    /// answering a reply with a request (as keep-alive does) puts it back in.
    #[tokio::test]
    async fn every_read_rearms_prompt_acknowledgement() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let address = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap_or_else(|e| panic!("{e}"));
            let mut buf = [0u8; 4];
            for _ in 0..3 {
                socket
                    .read_exact(&mut buf)
                    .await
                    .unwrap_or_else(|e| panic!("{e}"));
                socket
                    .write_all(b"pong")
                    .await
                    .unwrap_or_else(|e| panic!("{e}"));
            }
        });
        let stream = TcpStream::connect(address)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let mut tcp = RearmingTcp { stream };
        for _ in 0..3 {
            tcp.write_all(b"ping")
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            let mut reply = [0u8; 4];
            tcp.read_exact(&mut reply)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(&reply, b"pong");
            let quickack = socket2::SockRef::from(&tcp.stream)
                .tcp_quickack()
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(quickack, "TCP_QUICKACK should be on after a read");
        }
        server.await.unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn the_root_store_is_not_read_before_a_handshake() {
        let config = tls_config().unwrap_or_else(|e| panic!("{e}"));
        let verifier = LazyPlatformVerifier {
            provider: config.crypto_provider().clone(),
            verifier: OnceLock::new(),
        };
        assert!(!verifier.supported_verify_schemes().is_empty());
        assert!(
            verifier.verifier.get().is_none(),
            "listing the signature schemes must not load the certificates"
        );
    }
}
