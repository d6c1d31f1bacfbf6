//! Who may read what the admin port and CSDS show, and who may write through the admin port:
//! bearer tokens compared in constant time, and client certificate identities.

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
