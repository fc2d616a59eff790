//! The HTTPS server: `POST /admission` (AdmissionReview in, an allowing AdmissionReview out),
//! `GET /healthz` (probes), `GET /metrics` (Prometheus text).
//!
//! Bounded: at most [`MAX_CONNECTIONS`] connections (the API server keeps a small pool per
//! webhook; more wait in the listen backlog), bodies of at most [`MAX_BODY`] (two copies of an
//! object at etcd's 1.5 MiB limit, with room to spare), and at most [`MAX_BODIES`] bodies held at
//! once. A body over the limit, or one that cannot be read, gets an error status: the API server
//! counts a webhook error and, under `failurePolicy: Ignore`, admits the request anyway.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{header, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use jiff::Timestamp;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;

use crate::dispatch::Doorbells;
use crate::metrics::{LogLimiter, Metrics};
use crate::review::{self, Outcome};

/// The path the webhook configuration names.
pub const ADMISSION_PATH: &str = "/admission";
pub const MAX_CONNECTIONS: usize = 128;
pub const MAX_BODY: usize = 4 * 1024 * 1024;
pub const MAX_BODIES: usize = 16;
/// A client that does not finish its TLS handshake or request headers in this time is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What every request handler shares.
pub struct State {
    pub doorbells: Doorbells,
    pub metrics: Arc<Metrics>,
    bodies: Semaphore,
}

impl State {
    pub fn new(doorbells: Doorbells, metrics: Arc<Metrics>) -> State {
        State { doorbells, metrics, bodies: Semaphore::new(MAX_BODIES) }
    }
}

static ACCEPT_ERRORS: LogLimiter = LogLimiter::new(Duration::from_secs(10));
static UNREAD: LogLimiter = LogLimiter::new(Duration::from_secs(10));
static MALFORMED: LogLimiter = LogLimiter::new(Duration::from_secs(10));

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
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(error)) => {
                    tracing::debug!(%peer, %error, "TLS handshake failed");
                    return;
                }
                Err(_) => return,
            };
            let service = service_fn(move |request| handle(request, Arc::clone(&state)));
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HANDSHAKE_TIMEOUT)
                .serve_connection(TokioIo::new(tls), service);
            if let Err(error) = connection.await {
                tracing::debug!(%peer, %error, "connection ended with an error");
            }
            drop(permit);
        });
    }
}

async fn handle(request: Request<Incoming>, state: Arc<State>) -> Result<Response<Full<Bytes>>, Infallible> {
    let response = match (request.method(), request.uri().path()) {
        (&Method::POST, ADMISSION_PATH) => admission(request, &state).await,
        (&Method::GET, "/healthz") => reply(StatusCode::OK, "text/plain", Bytes::from_static(b"ok\n")),
        (&Method::GET, "/metrics") => {
            reply(StatusCode::OK, "text/plain; version=0.0.4", Bytes::from(state.metrics.render()))
        }
        _ => reply(StatusCode::NOT_FOUND, "text/plain", Bytes::from_static(b"not found\n")),
    };
    Ok(response)
}

async fn admission(request: Request<Incoming>, state: &State) -> Response<Full<Bytes>> {
    let body = {
        let _held = state.bodies.acquire().await.expect("the semaphore is never closed");
        Limited::new(request.into_body(), MAX_BODY).collect().await.map(|b| b.to_bytes())
    };
    let body = match body {
        Ok(body) => body,
        Err(error) => {
            Metrics::add(&state.metrics.reviews_unread, 1);
            if let Some(held) = UNREAD.allow(Instant::now()) {
                tracing::warn!(%error, unread_since_last_line = held, "AdmissionReview body not read; the API server admits the request (failurePolicy Ignore)");
            }
            let too_large = error.downcast_ref::<http_body_util::LengthLimitError>().is_some();
            let status = if too_large { StatusCode::PAYLOAD_TOO_LARGE } else { StatusCode::BAD_REQUEST };
            return reply(status, "text/plain", Bytes::from_static(b"unreadable body\n"));
        }
    };
    let reviewed = review::review(&body, Timestamp::now());
    state.metrics.review(&reviewed.outcome);
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
        Outcome::Ignored | Outcome::DryRun => {}
    }
    reply(StatusCode::OK, "application/json", Bytes::from(reviewed.response))
}

fn reply(status: StatusCode, content_type: &'static str, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static(content_type));
    response
}
