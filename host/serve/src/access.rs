//! Who may read what the admin port and CSDS show, and who may write through the admin port:
//! bearer tokens compared in constant time, and client certificate identities; and, on a port
//! listening on loopback, which hosts a request may name ([`refuse_foreign_host`]).

use crate::identity::{IdentityPattern, PeerIdentity};

/// Admin reads (`/debug/*`, `GET /intent`, `/metrics`, CSDS) and writes (`POST /reload`, the
/// intent API's `PUT` and `DELETE`). Reads are open when neither a read token nor identities
/// are set; writes are refused without a write token.
#[derive(Debug, Default, Clone)]
pub struct Access {
    /// The bearer token writes must carry (it is accepted for reads too).
    pub write_token: Option<String>,
    /// The bearer token reads must carry.
    pub read_token: Option<String>,
    /// Client certificate identities that may read without a token.
    pub read_identities: Vec<IdentityPattern>,
    /// `/metrics` is open whatever the above says.
    pub open_metrics: bool,
    /// Namespaces as write boundaries: (namespace, token) pairs, each token writing documents
    /// of its namespace only through the intent API (`--namespace-token`).
    pub namespace_tokens: Vec<(String, String)>,
}

/// Who an intent API write comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Writer {
    /// The admin write token: any document.
    Admin,
    /// A namespace token: documents of this namespace only.
    Namespace(String),
}

/// Why a write was refused: the status and the text the client is sent.
pub type WriteRefusal = (http::StatusCode, &'static str);

impl Access {
    /// Reads need nothing.
    pub fn reads_are_open(&self) -> bool {
        self.read_token.is_none() && self.read_identities.is_empty()
    }

    /// Whether the read or write token in `headers`, or the client certificate `identity`,
    /// may read.
    pub fn may_read(&self, headers: &http::HeaderMap, identity: Option<&PeerIdentity>) -> bool {
        if let Some(given) = bearer(headers) {
            let ok = |t: &Option<String>| t.as_ref().is_some_and(|t| constant_time_eq(given.as_bytes(), t.as_bytes()));
            if ok(&self.read_token) || ok(&self.write_token) {
                return true;
            }
        }
        identity.is_some_and(|id| self.read_identities.iter().any(|p| p.matches(id)))
    }

    /// Whether `headers` carry the write token; the refusal to send back if not.
    pub fn authorize_write(&self, headers: &http::HeaderMap) -> Result<(), WriteRefusal> {
        let Some(token) = &self.write_token else {
            return Err((
                http::StatusCode::FORBIDDEN,
                "admin writes are disabled: start xdst with --admin-token-file FILE (or XDST_ADMIN_TOKEN)\n",
            ));
        };
        match bearer(headers) {
            Some(g) if constant_time_eq(g.as_bytes(), token.as_bytes()) => Ok(()),
            Some(_) => Err((http::StatusCode::UNAUTHORIZED, "wrong bearer token\n")),
            None => Err((http::StatusCode::UNAUTHORIZED, "missing Authorization: Bearer <token>\n")),
        }
    }
}

impl Access {
    /// Who may write through the intent API with the token in `headers`: the admin token, or a
    /// namespace token; the refusal to send back if neither.
    pub fn authorize_intent_write(&self, headers: &http::HeaderMap) -> Result<Writer, WriteRefusal> {
        if self.namespace_tokens.is_empty() {
            return self.authorize_write(headers).map(|()| Writer::Admin);
        }
        let Some(given) = bearer(headers) else {
            return Err((http::StatusCode::UNAUTHORIZED, "missing Authorization: Bearer <token>\n"));
        };
        if self.write_token.as_ref().is_some_and(|t| constant_time_eq(given.as_bytes(), t.as_bytes())) {
            return Ok(Writer::Admin);
        }
        // Every token is compared, so the time taken does not tell which one nearly matched.
        let mut found = None;
        for (namespace, token) in &self.namespace_tokens {
            if constant_time_eq(given.as_bytes(), token.as_bytes()) && found.is_none() {
                found = Some(namespace.clone());
            }
        }
        found.map(Writer::Namespace).ok_or((http::StatusCode::UNAUTHORIZED, "wrong bearer token\n"))
    }
}

/// The token of an `Authorization: Bearer` header.
pub fn bearer(headers: &http::HeaderMap) -> Option<&str> {
    headers.get(http::header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "))
}

/// Compares without stopping at the first difference, so the time taken does not tell how
/// much of a guessed token was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// DNS rebinding (issue 33, item 3; issue 49, item 7): a port listening on a loopback address
/// answers only requests that name a loopback host, in `Host` or the request target's
/// authority: `localhost`, `*.localhost`, `127.0.0.0/8` or `[::1]`, with any port, or none at
/// all. A browser sends the name it resolved, so a web page that rebinds its own name to
/// 127.0.0.1 is told apart from an operator's `curl localhost:19000` or a client that dials
/// 127.0.0.1. The one check of both ports: the admin port makes it on every request, the xDS
/// port on its HTTP/1 REST paths (see [`crate::rest`]).
///
/// `None` when `req` may be answered; else the answer to send, `421 Misdirected Request`
/// naming `port` (`"admin"`, `"xDS"`), its address and why, the refusal counted in
/// `xdst_refusals_total{reason}` and logged at most once a minute per client.
pub fn refuse_foreign_host<B>(
    serving: &crate::Serving,
    port: &'static str,
    listening: std::net::SocketAddr,
    reason: &'static str,
    req: &http::Request<B>,
) -> Option<axum::response::Response> {
    use axum::response::IntoResponse;
    if !listening.ip().is_loopback() {
        return None;
    }
    let foreign = foreign_host(req.uri(), req.headers())?;
    let shown = xdst_core::limits::clip(foreign, 256, xdst_core::limits::Limit::ClientText);
    let client = crate::server::client_of(req.extensions());
    if serving.refused(reason, &client) {
        tracing::warn!(
            host = %shown,
            %listening,
            client,
            "{port} request for another host refused (a DNS-rebinding page sends its own name; logged once a minute per client)"
        );
    }
    let why = format!(
        "the {port} port listens on {listening} and answers requests for localhost, 127.0.0.1 or [::1] only, not \
         {shown:?} (a DNS-rebinding page would send its own name)\n"
    );
    Some((http::StatusCode::MISDIRECTED_REQUEST, why).into_response())
}

/// The first host `uri` or `headers` name that is not a loopback one.
fn foreign_host<'a>(uri: &'a http::Uri, headers: &'a http::HeaderMap) -> Option<&'a str> {
    let authority = uri.authority().map(|a| a.as_str());
    let host = headers.get(http::header::HOST).map(|h| h.to_str().unwrap_or("\u{fffd}"));
    authority.into_iter().chain(host).find(|h| !is_loopback_host(h))
}

/// Whether `host` (`name[:port]`, `[v6]:port`) is a loopback name or address.
fn is_loopback_host(host: &str) -> bool {
    let digits = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    let name = match host.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((ip, "")) => ip,
            Some((ip, port)) if port.strip_prefix(':').is_some_and(digits) => ip,
            _ => return false,
        },
        None => match host.rsplit_once(':') {
            Some((name, port)) if digits(port) => name,
            Some(_) => return false,
            None => host,
        },
    };
    let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
    name == "localhost"
        || name.ends_with(".localhost")
        || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod host_tests {
    use super::*;

    /// Issue 33, item 3: the names a loopback-bound port answers, and some it refuses (issue
    /// 49, item 7: Envoy's REST client sends its xDS cluster's name, `xds_cluster`).
    #[test]
    fn loopback_hosts() {
        for h in [
            "localhost",
            "localhost:19000",
            "LocalHost.:1",
            "a.b.localhost:8",
            "127.0.0.1",
            "127.0.0.1:19000",
            "127.8.9.10:1",
            "[::1]",
            "[::1]:19000",
        ] {
            assert!(is_loopback_host(h), "{h}");
        }
        for h in [
            "evil.example",
            "evil.example:19000",
            "localhost.evil.example",
            "evillocalhost",
            "10.0.0.1:19000",
            "0.0.0.0",
            "::1",
            "[::1]x",
            "[::2]:1",
            "[::ffff:127.0.0.1]",
            "127.0.0.1:19000:1",
            "127.1",
            "localhost:x",
            "xds_cluster",
            "",
        ] {
            assert!(!is_loopback_host(h), "{h}");
        }
    }

    #[test]
    fn the_target_authority_counts_as_well_as_host() {
        let mut headers = http::HeaderMap::new();
        headers.insert(http::header::HOST, "localhost".parse().unwrap());
        assert_eq!(foreign_host(&"/v3/discovery:clusters".parse().unwrap(), &headers), None);
        let absolute: http::Uri = "http://evil.example/v3/discovery:clusters".parse().unwrap();
        assert_eq!(foreign_host(&absolute, &headers), Some("evil.example"));
        headers.insert(http::header::HOST, "evil.example".parse().unwrap());
        assert_eq!(foreign_host(&"/".parse().unwrap(), &headers), Some("evil.example"));
        assert_eq!(foreign_host(&"/".parse().unwrap(), &http::HeaderMap::new()), None, "no host at all");
    }
}
