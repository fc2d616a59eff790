//! The HTTPS server: `POST /admission` (AdmissionReview in, an allowing AdmissionReview out),
//! `GET /healthz` (probes), `GET /metrics` (Prometheus text).
//!
//! Bounded: at most [`MAX_CONNECTIONS`] connections (the API server keeps a small pool per
//! webhook; more wait in the listen backlog), bodies of at most [`MAX_BODY`] (the API server's own
//! request limit, `dovetail_core::ceilings::ADMISSION_REVIEW_BYTES`), at most [`MAX_BODIES`]
//! bodies held at once, and time: a request's headers must arrive within [`HEADER_TIMEOUT`], and
//! its body be read and answered within [`REQUEST_TIMEOUT`] more. A body declared over the limit is
//! answered 413 before any of it is read (one sent without a length, once it passes the limit); a
//! body too slow gets 408; a client too slow with its headers loses the connection; a body that is
//! not an AdmissionReview gets 400. The API server counts each as a webhook error and, under
//! `failurePolicy: Ignore`, admits the request anyway; none of them can hold a body slot or a
//! connection for longer than the time limits.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dovetail_core::ceilings::ADMISSION_REVIEW_BYTES;
use http::{header, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use jiff::Timestamp;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;

use crate::dispatch::Doorbells;
use crate::metrics::{result_of, LogLimiter, Metrics, UNREAD as UNREAD_RESULT};
use crate::review::{self, Outcome};

/// The path the webhook configuration names.
pub const ADMISSION_PATH: &str = "/admission";
pub const MAX_CONNECTIONS: usize = 128;
pub const MAX_BODY: usize = ADMISSION_REVIEW_BYTES.max as usize;
pub const MAX_BODIES: usize = 16;
/// A client that does not finish its TLS handshake, or a request's headers, in this time is
/// dropped.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// A request's body must be read and answered within this time after its headers, or it gets
/// 408. The API server gives up on the webhook after its `timeoutSeconds` (2 s in
/// `infra/k8s/forwarder/webhook.yaml`) anyway; this bounds what a slow or stalled client (not the
/// API server) can hold: a body slot and a connection.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The bounds the server holds requests to: the constants above, smaller in tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_body: usize,
    pub header_timeout: Duration,
    pub request_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { max_body: MAX_BODY, header_timeout: HEADER_TIMEOUT, request_timeout: REQUEST_TIMEOUT }
    }
}

/// What every request handler shares.
pub struct State {
    pub doorbells: Doorbells,
    pub metrics: Arc<Metrics>,
    pub limits: Limits,
    bodies: Semaphore,
}

impl State {
    pub fn new(doorbells: Doorbells, metrics: Arc<Metrics>) -> State {
        State::with_limits(doorbells, metrics, Limits::default())
    }

    pub fn with_limits(doorbells: Doorbells, metrics: Arc<Metrics>, limits: Limits) -> State {
        State { doorbells, metrics, limits, bodies: Semaphore::new(MAX_BODIES) }
    }
}

static ACCEPT_ERRORS: LogLimiter = LogLimiter::new(Duration::from_secs(10));
static UNREAD: LogLimiter = LogLimiter::new(Duration::from_secs(10));
static MALFORMED: LogLimiter = LogLimiter::new(Duration::from_secs(10));
static UNHANDLED: LogLimiter = LogLimiter::new(Duration::from_secs(60));

/// Serves `listener` until `shutdown` completes; connections in progress are left to finish on
/// their own (the process exits soon after).
pub async fn serve(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    state: Arc<State>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let connections = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            () = &mut shutdown => return,
            permit = Arc::clone(&connections).acquire_owned() => permit.expect("the semaphore is never closed"),
        };
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: wait instead of spinning.
                    if let Some(held) = ACCEPT_ERRORS.allow(Instant::now()) {
                        tracing::warn!(%error, errors_since_last_line = held, "accept failed");
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        // Small responses: without this, Nagle's algorithm and delayed ACKs can hold an answer
        // back for tens of milliseconds.
        let _ = stream.set_nodelay(true);
        let (acceptor, state) = (acceptor.clone(), Arc::clone(&state));
        tokio::spawn(async move {
            let tls = match tokio::time::timeout(state.limits.header_timeout, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(error)) => {
                    tracing::debug!(%peer, %error, "TLS handshake failed");
                    return;
                }
                Err(_) => return,
            };
            serve_connection(tls, state, &peer.to_string()).await;
            drop(permit);
        });
    }
}

/// Serves the requests of one connection (TLS already done) until the client closes it or a
/// time limit does.
pub async fn serve_connection<I>(io: I, state: Arc<State>, peer: &str)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let header_timeout = state.limits.header_timeout;
    let service = service_fn(move |request| handle(request, Arc::clone(&state)));
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .serve_connection(TokioIo::new(io), service);
    if let Err(error) = connection.await {
        tracing::debug!(%peer, %error, "connection ended with an error");
    }
}

async fn handle(request: Request<Incoming>, state: Arc<State>) -> Result<Response<Full<Bytes>>, Infallible> {
    let response = match (request.method(), request.uri().path()) {
        (&Method::POST, ADMISSION_PATH) => {
            let started = Instant::now();
            let (response, result) = admission(request, &state).await;
            state.metrics.request_seconds.observe(result, started.elapsed());
            response
        }
        (&Method::GET, "/healthz") => reply(StatusCode::OK, "text/plain", Bytes::from_static(b"ok\n")),
        (&Method::GET, "/metrics") => {
            reply(StatusCode::OK, "text/plain; version=0.0.4", Bytes::from(state.metrics.render()))
        }
        _ => reply(StatusCode::NOT_FOUND, "text/plain", Bytes::from_static(b"not found\n")),
    };
    Ok(response)
}

/// The answer, and its `result` label for the latency histogram.
async fn admission(request: Request<Incoming>, state: &State) -> (Response<Full<Bytes>>, &'static str) {
    let limits = state.limits;
    // Declared too large: refused before a byte of the body is read.
    let declared = request.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limits.max_body as u64) {
        return (unread(state, StatusCode::PAYLOAD_TOO_LARGE, "body larger than the limit".into()), UNREAD_RESULT);
    }
    let read = async {
        let _held = state.bodies.acquire().await.expect("the semaphore is never closed");
        Limited::new(request.into_body(), limits.max_body).collect().await.map(|b| b.to_bytes())
    };
    let body = match tokio::time::timeout(limits.request_timeout, read).await {
        Ok(Ok(body)) => body,
        Ok(Err(error)) => {
            let too_large = error.downcast_ref::<http_body_util::LengthLimitError>().is_some();
            let status = if too_large { StatusCode::PAYLOAD_TOO_LARGE } else { StatusCode::BAD_REQUEST };
            return (unread(state, status, error.to_string()), UNREAD_RESULT);
        }
        Err(_) => {
            return (unread(state, StatusCode::REQUEST_TIMEOUT, "body not received in time".into()), UNREAD_RESULT)
        }
    };
    let reviewed = review::review(&body, Timestamp::now());
    state.metrics.review(&reviewed.outcome);
    let result = result_of(&reviewed.outcome);
    match reviewed.outcome {
        Outcome::Doorbell(doorbell) => {
            tracing::debug!(kind = doorbell.kind(), body = %doorbell.body(), "doorbell");
            state.doorbells.ring(doorbell);
        }
        Outcome::Malformed(reason) => {
            if let Some(held) = MALFORMED.allow(Instant::now()) {
                tracing::warn!(%reason, malformed_since_last_line = held, "malformed AdmissionReview allowed");
            }
        }
        Outcome::Unhandled => {
            if let Some(held) = UNHANDLED.allow(Instant::now()) {
                tracing::warn!(
                    unhandled_since_last_line = held,
                    "AdmissionReview for a resource or operation the forwarder does not handle, allowed without a \
                     doorbell: the ValidatingWebhookConfiguration's rules send more than infra/k8s/forwarder/webhook.yaml"
                );
            }
        }
        Outcome::NotReview(reason) => {
            if let Some(held) = MALFORMED.allow(Instant::now()) {
                tracing::warn!(%reason, malformed_since_last_line = held, "request that is not an AdmissionReview refused");
            }
            return (
                reply(StatusCode::BAD_REQUEST, "text/plain", Bytes::from_static(b"not an AdmissionReview\n")),
                result,
            );
        }
        Outcome::Ignored | Outcome::DryRun => {}
    }
    (reply(StatusCode::OK, "application/json", Bytes::from(reviewed.response)), result)
}

/// A body refused before it was decoded: counted, logged now and then, answered with `status`.
fn unread(state: &State, status: StatusCode, why: String) -> Response<Full<Bytes>> {
    Metrics::add(&state.metrics.reviews_unread, 1);
    if let Some(held) = UNREAD.allow(Instant::now()) {
        tracing::warn!(
            %status,
            why,
            unread_since_last_line = held,
            "AdmissionReview body not read; the API server admits the request (failurePolicy Ignore)"
        );
    }
    let mut response = reply(status, "text/plain", Bytes::from(format!("{why}\n")));
    // The rest of the body is not read: the connection cannot carry another request.
    response.headers_mut().insert(header::CONNECTION, header::HeaderValue::from_static("close"));
    response
}

fn reply(status: StatusCode, content_type: &'static str, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static(content_type));
    response
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    use super::*;
    use crate::dispatch::{queue, Queue};

    const QUICK: Limits = Limits {
        max_body: MAX_BODY,
        header_timeout: Duration::from_millis(300),
        request_timeout: Duration::from_millis(300),
    };

    /// A server over plain TCP (the TLS layer is rustls' and tested there) with `limits`; its
    /// address, state and queue.
    async fn server(limits: Limits) -> (std::net::SocketAddr, Arc<State>, Queue) {
        let metrics = Arc::new(Metrics::default());
        let (doorbells, queue) = queue(16, Arc::clone(&metrics));
        let state = Arc::new(State::with_limits(doorbells, metrics, limits));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let shared = Arc::clone(&state);
        tokio::spawn(async move {
            loop {
                let (stream, peer) = listener.accept().await.unwrap();
                let state = Arc::clone(&shared);
                tokio::spawn(async move { serve_connection(stream, state, &peer.to_string()).await });
            }
        });
        (address, state, queue)
    }

    /// Everything the server sends until it closes the connection (or 5 s pass: a test bound,
    /// far above every limit used here).
    async fn response(stream: &mut TcpStream) -> String {
        let mut out = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut out)).await;
        String::from_utf8_lossy(&out).into_owned()
    }

    fn request(body: &[u8]) -> Vec<u8> {
        let mut r = format!(
            "POST {ADMISSION_PATH} HTTP/1.1\r\nHost: f\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
        r.extend_from_slice(body);
        r
    }

    fn fixture(name: &str) -> Vec<u8> {
        std::fs::read(format!("{}/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"))).unwrap()
    }

    fn counted(counter: &std::sync::atomic::AtomicU64) -> u64 {
        counter.load(std::sync::atomic::Ordering::Relaxed)
    }

    #[tokio::test]
    async fn a_body_declared_over_the_limit_is_refused_before_it_is_read() {
        let (address, state, _queue) = server(Limits { request_timeout: Duration::from_secs(60), ..QUICK }).await;
        let mut stream = TcpStream::connect(address).await.unwrap();
        // 4 MiB announced, none of it sent: the answer cannot have waited for it (the request
        // timeout is a minute).
        let head = format!("POST {ADMISSION_PATH} HTTP/1.1\r\nHost: f\r\nContent-Length: {}\r\n\r\n", 4 << 20);
        stream.write_all(head.as_bytes()).await.unwrap();
        let started = Instant::now();
        let answer = response(&mut stream).await;
        assert!(answer.starts_with("HTTP/1.1 413 "), "{answer}");
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(counted(&state.metrics.reviews_unread), 1);
    }

    #[tokio::test]
    async fn a_body_without_a_length_is_cut_off_at_the_limit() {
        let (address, state, _queue) = server(Limits { request_timeout: Duration::from_secs(60), ..QUICK }).await;
        let stream = TcpStream::connect(address).await.unwrap();
        let (mut read, mut write) = stream.into_split();
        // 4 MiB in 64 KiB chunks; the server stops reading after 3 MiB, so writes may fail then.
        tokio::spawn(async move {
            let head = format!("POST {ADMISSION_PATH} HTTP/1.1\r\nHost: f\r\nTransfer-Encoding: chunked\r\n\r\n");
            write.write_all(head.as_bytes()).await?;
            let chunk = vec![b' '; 64 << 10];
            for _ in 0..64 {
                write.write_all(format!("{:x}\r\n", chunk.len()).as_bytes()).await?;
                write.write_all(&chunk).await?;
                write.write_all(b"\r\n").await?;
            }
            write.write_all(b"0\r\n\r\n").await
        });
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), read.read_to_end(&mut answer)).await;
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 413 "), "{answer}");
        assert_eq!(counted(&state.metrics.reviews_unread), 1);
    }

    #[tokio::test]
    async fn a_slow_body_is_timed_out() {
        let (address, state, _queue) = server(QUICK).await;
        let mut stream = TcpStream::connect(address).await.unwrap();
        let head = format!("POST {ADMISSION_PATH} HTTP/1.1\r\nHost: f\r\nContent-Length: 100\r\n\r\n{{\"apiVer");
        stream.write_all(head.as_bytes()).await.unwrap();
        let started = Instant::now();
        // The rest never comes.
        let answer = response(&mut stream).await;
        assert!(answer.starts_with("HTTP/1.1 408 "), "{answer}");
        assert!(started.elapsed() >= QUICK.request_timeout);
        assert_eq!(counted(&state.metrics.reviews_unread), 1);
    }

    #[tokio::test]
    async fn slow_headers_lose_the_connection() {
        let (address, state, _queue) = server(QUICK).await;
        let mut stream = TcpStream::connect(address).await.unwrap();
        stream.write_all(format!("POST {ADMISSION_PATH} HTTP/1.1\r\nHost: f\r\n").as_bytes()).await.unwrap();
        let started = Instant::now();
        let mut buffer = [0u8; 1024];
        let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buffer)).await;
        assert!(matches!(read, Ok(Ok(_) | Err(_))), "the server closed the connection: {read:?}");
        assert!(started.elapsed() >= QUICK.header_timeout);
        assert_eq!(counted(&state.metrics.reviews_unread), 0, "no request was read");
    }

    #[tokio::test]
    async fn an_unhandled_resource_is_allowed_without_a_doorbell_and_counted() {
        let (address, state, mut queue) = server(QUICK).await;
        let mut body: serde_json::Value = serde_json::from_slice(&fixture("node-create")).unwrap();
        body["request"]["resource"] = serde_json::json!({"group": "", "version": "v1", "resource": "services"});
        let mut stream = TcpStream::connect(address).await.unwrap();
        stream.write_all(&request(&serde_json::to_vec(&body).unwrap())).await.unwrap();
        let answer = response(&mut stream).await;
        assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
        assert!(answer.contains("\"allowed\":true"), "{answer}");
        assert_eq!(counted(&state.metrics.reviews_unhandled), 1);
        assert!(queue.try_recv().is_none(), "no doorbell");

        // The same review for a node rings, as a check that the path above could ring at all.
        let mut stream = TcpStream::connect(address).await.unwrap();
        stream.write_all(&request(&fixture("node-create"))).await.unwrap();
        assert!(response(&mut stream).await.starts_with("HTTP/1.1 200 "));
        assert!(queue.try_recv().is_some());
    }

    #[tokio::test]
    async fn a_body_that_is_not_an_admission_review_gets_400() {
        let (address, state, mut queue) = server(QUICK).await;
        let mut stream = TcpStream::connect(address).await.unwrap();
        stream.write_all(&request(br#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}}"#)).await.unwrap();
        let answer = response(&mut stream).await;
        assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
        assert!(answer.ends_with("not an AdmissionReview\n"), "{answer}");
        assert_eq!(counted(&state.metrics.reviews_not_review), 1);
        assert!(queue.try_recv().is_none());
    }
}
