//! kube-rs errors sorted into the core's [`PortError`] by what the caller should do.

use dovetail_core::reconcile::ports::PortError;
use kube::core::Status;

/// HTTP status of an API answer, when the error is one.
pub(crate) fn status_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

pub(crate) fn is_not_found(e: &kube::Error) -> bool {
    status_code(e) == Some(404)
}

pub(crate) fn is_conflict(e: &kube::Error) -> bool {
    status_code(e) == Some(409)
}

/// `what` (the call, e.g. `patch node ip-10-0-1-7`) failed with `e`:
///
/// * 409 — another writer won (a precondition or an existing name): [`PortError::Conflict`],
///   re-read and decide again;
/// * 429 (API Priority and Fairness throttling; evictions map their 429 before coming here),
///   408, 5xx, and anything on the way (connection refused or reset, TLS handshake, timeouts):
///   [`PortError::Unavailable`], the message is retried;
/// * 401: the bearer token expired or was minted with a skewed clock; the retry runs with a client
///   built on a fresh token, so it is [`PortError::Unavailable`] too;
/// * any other 4xx (403 RBAC, 400/422 invalid, 404 where the object had to exist):
///   [`PortError::Rejected`];
/// * a request that cannot be built or an answer that cannot be decoded: [`PortError::Rejected`],
///   since the same request would fail the same way.
pub(crate) fn port_error(what: &str, e: kube::Error) -> PortError {
    match &e {
        kube::Error::Api(s) => api_error(what, s),
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) | kube::Error::Auth(_) => {
            PortError::Unavailable(format!("{what}: {e}"))
        }
        _ => PortError::Rejected(format!("{what}: {e}")),
    }
}

fn api_error(what: &str, s: &Status) -> PortError {
    let reason = if s.reason.is_empty() { String::new() } else { format!(" {}", s.reason) };
    let text = format!("{what}: HTTP {}{reason}: {}", s.code, s.message);
    match s.code {
        409 => PortError::Conflict(text),
        401 | 408 | 429 | 500..=599 => PortError::Unavailable(text),
        // 0: a Status without a code; treat it like an unexplained server failure.
        0 => PortError::Unavailable(text),
        _ => PortError::Rejected(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16, reason: &str) -> kube::Error {
        let mut s = Status::failure("the message", reason);
        s.code = code;
        kube::Error::Api(s.boxed())
    }

    #[test]
    fn http_statuses() {
        let kind = |code| match port_error("get node a", api(code, "Whatever")) {
            PortError::Conflict(_) => "conflict",
            PortError::Unavailable(_) => "unavailable",
            PortError::Rejected(_) => "rejected",
        };
        assert_eq!(kind(409), "conflict");
        for code in [401, 408, 429, 500, 502, 503, 504] {
            assert_eq!(kind(code), "unavailable", "{code}");
        }
        for code in [400, 403, 404, 405, 410, 422] {
            assert_eq!(kind(code), "rejected", "{code}");
        }
        assert!(is_not_found(&api(404, "NotFound")));
        assert!(is_conflict(&api(409, "AlreadyExists")));
        assert!(!is_not_found(&api(409, "AlreadyExists")));
    }

    #[test]
    fn messages_name_the_call_and_the_answer() {
        let e = port_error("patch node n1", api(403, "Forbidden"));
        assert_eq!(e, PortError::Rejected("patch node n1: HTTP 403 Forbidden: the message".into()));
    }

    #[test]
    fn transport_and_local_failures() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset by peer");
        let e = port_error("list pods", kube::Error::Service(Box::new(io)));
        assert!(matches!(&e, PortError::Unavailable(m) if m.contains("reset by peer")), "{e}");
        let bad_json = serde_json::from_str::<u8>("{").unwrap_err();
        let e = port_error("list pods", kube::Error::SerdeError(bad_json));
        assert!(matches!(e, PortError::Rejected(_)), "{e}");
    }
}
