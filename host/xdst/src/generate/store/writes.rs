//! Intent API writes (`PUT`/`DELETE /intent/{kind}/{name}`) when intent lives in a store.
//!
//! A write is checked first (translated with the mirror plus the write, on the generation
//! thread, not published), then committed as a compare-and-swap on the document's mod
//! revision: the `If-Match` header's, else the one the mirror held when it was checked. A
//! write that lost a race answers `409` naming the revision that won; an unreachable store
//! `503`. After the commit the replica waits for its mirror to hold the write and runs the
//! generation that includes it, so a `200` means this replica serves it.
//!
//! A store that answers a write with a revision at or below the one the mirror held went back
//! in time (recreated empty, or restored from an older state): the write is in the new store,
//! but the mirror holds the old one, so waiting for the write's revision would return at once
//! and answer `200` for what is never served (issue 33, item 10). Such a write makes the
//! mirror list the store again and answers once the new listing holds it (`200`, served), or
//! `503` saying that it was written to a store that went back in time and is not served yet.

use std::sync::Arc;
use std::time::Duration;

use http::{HeaderMap, StatusCode};

use super::{Expect, Revision, Store, StoreError, write_key};
use crate::generate::Generating;
use crate::generate::intent::IntentSource;

/// How long a committed write waits for this replica's mirror to hold it.
const SEEN_WITHIN: Duration = Duration::from_secs(10);

/// The outcome of a store write.
pub struct Outcome {
    pub status: StatusCode,
    pub revision: Option<Revision>,
    pub error: Option<String>,
}

impl Outcome {
    fn refused(status: StatusCode, error: String) -> Outcome {
        Outcome { status, revision: None, error: Some(error) }
    }
}

/// The revision an `If-Match` header names (`"42"` or `42`); `Err` for anything else. The
/// error is the text the client is sent (with `400`).
pub fn if_match(headers: &HeaderMap) -> Result<Option<Revision>, String> {
    let Some(v) = headers.get(http::header::IF_MATCH) else { return Ok(None) };
    let text = v.to_str().unwrap_or("").trim().trim_matches('"');
    text.parse::<Revision>()
        .ok()
        .filter(|r| *r >= 0)
        .map(Some)
        .ok_or_else(|| format!("If-Match {text:?}: give the document's revision (its ETag), or 0 for a new one"))
}

/// A document's new text, and whether the platform (the admin token) wrote it: a creation time
/// in it is kept only then (issue 49, item 3).
pub struct Body {
    pub text: String,
    pub platform: bool,
}

pub async fn write<S: Store>(
    generating: &Generating,
    store: Arc<S>,
    source: Arc<IntentSource>,
    headers: &HeaderMap,
    kind: &str,
    name: &str,
    body: Option<Body>,
) -> Outcome {
    let Some(mirror) = source.mirror().cloned() else {
        return Outcome::refused(StatusCode::INTERNAL_SERVER_ERROR, "intent does not come from a store".into());
    };
    let Some(generations) = generating.generations.get() else {
        return Outcome::refused(StatusCode::SERVICE_UNAVAILABLE, "not serving intent yet".into());
    };
    // A team's write goes under its namespace's prefix (its etcd role's), the platform's to
    // the platform's keys: a key says whose document it is (issue 49, item 2).
    let by_team = body.as_ref().is_some_and(|b| !b.platform);
    let key = write_key(kind, name, source.namespace_keys() && by_team, |k| mirror.mod_revision(k).is_some());
    // `metadata.generation`, following what the key holds now.
    let body = match body {
        Some(b) => {
            let previous = mirror.get(&key).and_then(|h| String::from_utf8(h.value.to_vec()).ok());
            match crate::generate::intent::generation::stamp(previous.as_deref(), &b.text, b.platform) {
                Ok(t) => Some(t),
                Err(e) => return Outcome::refused(StatusCode::BAD_REQUEST, e),
            }
        }
        None => None,
    };
    let held = mirror.mod_revision(&key);
    let expect = match if_match(headers) {
        Ok(Some(r)) => Expect::of(Some(r)),
        Ok(None) => Expect::of(held),
        Err(e) => return Outcome::refused(StatusCode::BAD_REQUEST, e),
    };
    if body.is_none() && held.is_none() && expect == Expect::Absent {
        return Outcome::refused(StatusCode::NOT_FOUND, format!("no {kind}/{name} in {}", store.describe()));
    }
    if let Some(r) = mirror.state().rewound.filter(|_| mirror.is_held()) {
        return Outcome::refused(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("{}; nothing was written", held_after_rewind(&*store, &r)),
        );
    }
    if !mirror.state().connected {
        let why = mirror.state().error.unwrap_or_default();
        return Outcome::refused(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "the store {} is unreachable ({why}): nothing was written; retry when it is back",
                store.describe()
            ),
        );
    }
    // Checked on the generation thread, against the plugins serving now.
    let checked = {
        let (c, s, k, b) = (generating.plane.clone(), source.clone(), key.clone(), body.clone());
        generations.run(move || s.check_candidate(&c, (&k, b.as_deref())).map_err(|e| e.message())).await
    };
    match checked {
        Some(Ok(())) => {}
        Some(Err(e)) => return Outcome::refused(StatusCode::UNPROCESSABLE_ENTITY, e),
        None => return Outcome::refused(StatusCode::INTERNAL_SERVER_ERROR, "internal error (see the log)".into()),
    }
    // What the mirror held before the write: the write's revision must be above it.
    let (rewinds, before) = (mirror.state().rewinds, mirror.revision());
    let revision = match store.write(&key, body.map(String::into_bytes), expect).await {
        Ok(r) => r,
        Err(StoreError::Conflict { current, .. }) => {
            let now = match current {
                Some(r) => format!("it is at revision {r}"),
                None => "it does not exist".to_owned(),
            };
            let expected = match expect {
                Expect::Absent => "expected it not to exist".to_owned(),
                Expect::ModRevision(r) => format!("expected revision {r}"),
            };
            return Outcome::refused(
                StatusCode::CONFLICT,
                format!(
                    "{kind}/{name} was changed by another write: {now} (this write {expected}); nothing was written. \
                     Read it again (GET /intent/{kind}/{name}, its ETag is the revision) and retry with If-Match"
                ),
            );
        }
        Err(e @ StoreError::Unreachable { .. }) => {
            return Outcome::refused(StatusCode::SERVICE_UNAVAILABLE, format!("{e}: nothing was written"));
        }
        Err(e) => return Outcome::refused(StatusCode::BAD_GATEWAY, e.to_string()),
    };
    tracing::info!(kind, name, revision, store = %store.describe(), "intent written to the store through the API");
    if revision <= before {
        tracing::error!(
            kind, name, revision, held = before, store = %store.describe(),
            "the store answered a write with a revision at or below the one this replica holds: it went back in time; listing it again"
        );
        mirror.request_relist();
        let found = |m: &super::Mirror| m.is_held() || (m.state().rewinds > rewinds && m.revision() >= revision);
        let answer = |why: String| Outcome {
            status: StatusCode::SERVICE_UNAVAILABLE,
            revision: Some(revision),
            error: Some(format!(
                "{kind}/{name} was written at revision {revision} of {}, below revision {before} that this replica \
                 held, but it is not served: {why}",
                store.describe()
            )),
        };
        if !mirror.wait_until(found, SEEN_WITHIN).await {
            return answer(format!(
                "the store went back in time (recreated, or restored from an older state) and this replica has not \
                 listed it within {SEEN_WITHIN:?}; see /readyz"
            ));
        }
        if let Some(r) = mirror.state().rewound.filter(|_| mirror.is_held()) {
            return answer(held_after_rewind(&*store, &r));
        }
    } else if !mirror.wait_for(revision, SEEN_WITHIN).await {
        return Outcome {
            status: StatusCode::ACCEPTED,
            revision: Some(revision),
            error: Some(format!(
                "written at revision {revision}, but this replica's watch has not delivered it within {SEEN_WITHIN:?}"
            )),
        };
    }
    let (c, s) = (generating.plane.clone(), source.clone());
    let generated = generations.run(move || s.generate(&c).map_err(|e| e.message())).await;
    match generated {
        Some(Ok(())) => Outcome { status: StatusCode::OK, revision: Some(revision), error: None },
        // Committed, but another write that landed with it broke the generation.
        Some(Err(e)) => Outcome {
            status: StatusCode::ACCEPTED,
            revision: Some(revision),
            error: Some(format!("written at revision {revision}; the generation that includes it failed: {e}")),
        },
        None => Outcome {
            status: StatusCode::ACCEPTED,
            revision: Some(revision),
            error: Some("written; the generation that includes it panicked (see the log)".into()),
        },
    }
}

/// Why a replica whose store went back in time takes no writes, and what ends it.
fn held_after_rewind(store: &impl Store, r: &super::mirror::Rewound) -> String {
    format!(
        "the store {} went back in time from revision {} to {} ({}). This replica keeps serving its last good \
         config and takes no writes until an operator restores the store, or takes it as it is now with \
         POST /reload (or SIGHUP) on each replica",
        store.describe(),
        r.from,
        r.to,
        r.why
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn if_match_takes_a_revision_quoted_or_not() {
        let mut h = HeaderMap::new();
        assert_eq!(if_match(&h), Ok(None));
        h.insert(http::header::IF_MATCH, "\"42\"".parse().unwrap());
        assert_eq!(if_match(&h), Ok(Some(42)));
        h.insert(http::header::IF_MATCH, "7".parse().unwrap());
        assert_eq!(if_match(&h), Ok(Some(7)));
        h.insert(http::header::IF_MATCH, "*".parse().unwrap());
        assert!(if_match(&h).unwrap_err().contains("revision"));
    }
}
