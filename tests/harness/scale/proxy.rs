//! Counting the functions' Kubernetes requests: a plain-HTTP proxy on loopback that the functions'
//! kubeconfig points at, forwarding every request to the API server as the admin
//! (`kube::Client::send`) and counting requests by verb and resource, and the bytes of request and
//! response bodies as they pass — watch streams included, which the API server's own
//! `apiserver_response_sizes` metric leaves out (it records GET and LIST only). Only the functions
//! use it: the rig's own loading and checks go to the API server directly, so nothing else is
//! counted.
//!
//! It runs on a thread and a Tokio runtime of its own, so it neither waits for nor delays the
//! function it serves on the measured runtime. Its buffers are part of the process's RSS. It marks
//! each request in flight on the rig's [`Busy`] clock, until the response body has been passed on.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use anyhow::{Context, Result};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use tokio::sync::oneshot;

use super::busy::{Busy, Source, Waited};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type ProxyBody = UnsyncBoxBody<Bytes, BoxError>;

/// What passed through the proxy since it started.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KubeTally {
    /// Requests by `verb resource[/subresource]`, e.g. `list pods`, `create pods/eviction`,
    /// `watch nodes`, `patch nodes`; non-resource paths as `get /version`.
    pub requests: BTreeMap<String, u64>,
    /// Response body bytes, as the API server sent them.
    pub bytes_read: u64,
    /// Request body bytes.
    pub bytes_written: u64,
    /// When each eviction was asked for, in order, with the [`Busy`] clock's times then.
    pub evictions: Vec<(Instant, Waited)>,
}

impl KubeTally {
    /// What passed after `before`.
    pub fn since(&self, before: &KubeTally) -> KubeTally {
        let mut requests = self.requests.clone();
        for (k, v) in &before.requests {
            if let Some(n) = requests.get_mut(k) {
                *n -= v;
            }
        }
        requests.retain(|_, n| *n > 0);
        KubeTally {
            requests,
            bytes_read: self.bytes_read - before.bytes_read,
            bytes_written: self.bytes_written - before.bytes_written,
            evictions: self.evictions[before.evictions.len()..].to_vec(),
        }
    }

    pub fn total(&self) -> u64 {
        self.requests.values().sum()
    }

    /// Requests of one verb (`list`, `get`, `watch`, …) over every resource.
    pub fn verb(&self, verb: &str) -> u64 {
        self.requests.iter().filter(|(k, _)| k.split(' ').next() == Some(verb)).map(|(_, n)| n).sum()
    }

    /// Requests `verb resource`, e.g. `("list", "pods")`.
    pub fn of(&self, verb: &str, resource: &str) -> u64 {
        self.requests.get(&format!("{verb} {resource}")).copied().unwrap_or(0)
    }
}

/// The running proxy; stopped when dropped.
pub struct Proxy {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    tally: Arc<Mutex<KubeTally>>,
    busy: Busy,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Proxy {
    /// Starts a proxy to the API server `upstream` describes (the admin's client configuration).
    pub fn start(upstream: kube::Config) -> Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").context("binding the counting proxy")?;
        listener.set_nonblocking(true)?;
        let url = format!("http://{}", listener.local_addr()?);
        let tally = Arc::new(Mutex::new(KubeTally::default()));
        let (stop, stopped) = oneshot::channel();
        let busy = Busy::default();
        let (counted, marked) = (tally.clone(), busy.clone());
        let thread = std::thread::Builder::new().name("scale-kube-proxy".into()).spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(runtime) => runtime,
                Err(e) => return tracing::error!(error = %e, "the counting proxy has no runtime"),
            };
            if let Err(e) = runtime.block_on(serve(listener, upstream, counted, marked, stopped)) {
                tracing::error!(error = %e, "the counting proxy stopped");
            }
        })?;
        Ok(Proxy { url, tally, busy, stop: Some(stop), thread: Some(thread) })
    }

    pub fn tally(&self) -> KubeTally {
        self.tally.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The clock the proxy marks its requests on, which the AWS counter shares.
    pub fn busy(&self) -> &Busy {
        &self.busy
    }

    /// A kubeconfig (JSON, which every kubeconfig reader takes) that reaches the cluster through
    /// the proxy, with no credentials of its own.
    pub fn kubeconfig(&self) -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{ "name": "scale", "cluster": { "server": self.url } }],
            "users": [{ "name": "scale", "user": {} }],
            "contexts": [{ "name": "scale", "context": { "cluster": "scale", "user": "scale" } }],
            "current-context": "scale",
        })
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn serve(
    listener: TcpListener,
    upstream: kube::Config,
    tally: Arc<Mutex<KubeTally>>,
    busy: Busy,
    mut stopped: oneshot::Receiver<()>,
) -> Result<()> {
    let client = kube::Client::try_from(upstream).context("the proxy's client to the API server")?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    loop {
        let (stream, _) = tokio::select! {
            _ = &mut stopped => return Ok(()),
            accepted = listener.accept() => accepted?,
        };
        let (client, tally, busy) = (client.clone(), tally.clone(), busy.clone());
        let service =
            hyper::service::service_fn(move |request| forward(client.clone(), tally.clone(), busy.clone(), request));
        tokio::spawn(async move {
            let io = hyper_util::rt::TokioIo::new(stream);
            if let Err(e) = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await {
                tracing::debug!(error = %e, "a proxied connection ended");
            }
        });
    }
}

/// Request headers not forwarded: those of this connection only, and the length, which the
/// client sets again from the body it sends.
fn not_forwarded(name: &http::HeaderName) -> bool {
    use http::header::{CONNECTION, CONTENT_LENGTH, HOST, TRANSFER_ENCODING, UPGRADE};
    [CONNECTION, CONTENT_LENGTH, HOST, TRANSFER_ENCODING, UPGRADE].contains(name) || name.as_str() == "keep-alive"
}

/// Forwards `request`, in flight on `busy` until its response body has been passed on or dropped.
async fn forward(
    client: kube::Client,
    tally: Arc<Mutex<KubeTally>>,
    busy: Busy,
    request: Request<Incoming>,
) -> Result<Response<ProxyBody>, Infallible> {
    let in_flight = busy.guard(Source::Kube);
    let (parts, body) = request.into_parts();
    let key = request_key(parts.method.as_str(), parts.uri.path(), parts.uri.query());
    let body = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => return Ok(failure(StatusCode::BAD_REQUEST, format!("reading the request: {e}"))),
    };
    {
        let mut t = tally.lock().unwrap_or_else(|e| e.into_inner());
        if key == "create pods/eviction" {
            let now = Instant::now();
            t.evictions.push((now, busy.at(now)));
        }
        *t.requests.entry(key).or_default() += 1;
        t.bytes_written += body.len() as u64;
    }
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut upstream = http::Request::builder().method(parts.method.clone()).uri(path);
    for (name, value) in parts.headers.iter().filter(|(name, _)| !not_forwarded(name)) {
        upstream = upstream.header(name, value);
    }
    let upstream = match upstream.body(kube::client::Body::from(body.to_vec())) {
        Ok(request) => request,
        Err(e) => return Ok(failure(StatusCode::BAD_REQUEST, format!("rebuilding the request: {e}"))),
    };
    let response = match client.send(upstream).await {
        Ok(response) => response,
        Err(e) => return Ok(failure(StatusCode::BAD_GATEWAY, format!("the API server: {e}"))),
    };
    let (mut parts, body) = response.into_parts();
    for name in [http::header::CONNECTION, http::header::TRANSFER_ENCODING, http::header::UPGRADE] {
        parts.headers.remove(name);
    }
    parts.headers.remove("keep-alive");
    let body = body
        .map_frame(move |frame| {
            // Named here so the closure owns the guard: the request ends when the body is dropped.
            let _in_flight = &in_flight;
            if let Some(data) = frame.data_ref() {
                tally.lock().unwrap_or_else(|e| e.into_inner()).bytes_read += data.len() as u64;
            }
            frame
        })
        .map_err(|e| Box::new(e) as BoxError)
        .boxed_unsync();
    Ok(Response::from_parts(parts, body))
}

fn failure(status: StatusCode, message: String) -> Response<ProxyBody> {
    let body = Full::new(Bytes::from(message)).map_err(|never| -> BoxError { match never {} }).boxed_unsync();
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response
}

/// `verb resource[/subresource]` of a request, with the API server's verbs: a GET is `watch` when it
/// asks to, `get` when it names an object, `list` otherwise.
pub fn request_key(method: &str, path: &str, query: Option<&str>) -> String {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let rest: &[&str] = match segments.as_slice() {
        ["api", _version, rest @ ..] => rest,
        ["apis", _group, _version, rest @ ..] => rest,
        _ => return format!("{} {path}", method.to_ascii_lowercase()),
    };
    let rest = match rest {
        ["namespaces", _namespace, more @ ..] if !more.is_empty() => more,
        other => other,
    };
    let (resource, named, subresource) = match rest {
        [] => ("", false, None),
        [resource] => (*resource, false, None),
        [resource, _name] => (*resource, true, None),
        [resource, _name, subresource, ..] => (*resource, true, Some(*subresource)),
    };
    let watch = query.is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
    let verb = match method {
        "GET" if watch => "watch",
        "GET" if named => "get",
        "GET" => "list",
        "POST" => "create",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" if named => "delete",
        "DELETE" => "deletecollection",
        other => return format!("{} {path}", other.to_ascii_lowercase()),
    };
    match subresource {
        Some(sub) => format!("{verb} {resource}/{sub}"),
        None => format!("{verb} {resource}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_named_as_the_api_server_names_them() {
        assert_eq!(request_key("GET", "/api/v1/pods", Some("limit=500")), "list pods");
        assert_eq!(request_key("GET", "/api/v1/pods", Some("watch=true&resourceVersion=7")), "watch pods");
        assert_eq!(request_key("GET", "/api/v1/namespaces/ns/pods/web-0", None), "get pods");
        assert_eq!(request_key("POST", "/api/v1/namespaces/ns/pods/web-0/eviction", None), "create pods/eviction");
        assert_eq!(request_key("PATCH", "/api/v1/nodes/ip-10-0-0-1", None), "patch nodes");
        assert_eq!(request_key("GET", "/api/v1/namespaces", None), "list namespaces");
        assert_eq!(request_key("GET", "/api/v1/namespaces/kube-system", None), "get namespaces");
        assert_eq!(request_key("GET", "/apis/dovetail.dev/v1/nodepools", None), "list nodepools");
        assert_eq!(
            request_key("PATCH", "/apis/dovetail.dev/v1/nodepools/default/status", None),
            "patch nodepools/status"
        );
        assert_eq!(request_key("POST", "/apis/events.k8s.io/v1/namespaces/default/events", None), "create events");
        assert_eq!(request_key("GET", "/version", None), "get /version");
    }

    #[test]
    fn a_window_is_the_difference_of_two_tallies() {
        let early = (Instant::now(), Waited::default());
        let before = KubeTally {
            requests: BTreeMap::from([("list pods".into(), 8)]),
            bytes_read: 100,
            bytes_written: 0,
            evictions: vec![early],
        };
        let mut after = before.clone();
        after.requests.insert("list pods".into(), 16);
        after.requests.insert("watch nodes".into(), 1);
        after.bytes_read = 250;
        let late = (Instant::now(), Waited { kube: std::time::Duration::from_millis(3), ..Waited::default() });
        after.evictions.push(late);
        let window = after.since(&before);
        assert_eq!(window.of("list", "pods"), 8);
        assert_eq!(window.verb("watch"), 1);
        assert_eq!((window.total(), window.bytes_read), (9, 150));
        assert_eq!(window.evictions, vec![late], "only the window's evictions");
    }
}
