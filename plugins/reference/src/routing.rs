//! What HttpGateway and GrpcService routes share: matches, backends, header mutation.

use std::collections::BTreeSet;

use xdst_guest::build::{HeaderMatch, Route, VirtualHost};
use xdst_guest::{IntentDocument, PluginError};

use crate::check;
use crate::schema::{BackendSpec, HeaderMatchSpec, HeadersSpec, MatchSpec};

/// Attaches a check's message to a document and a field path built only on failure.
pub trait At<T> {
    fn at(self, doc: &IntentDocument, field: impl FnOnce() -> String) -> Result<T, PluginError>;
}

impl<T> At<T> for Result<T, String> {
    fn at(self, doc: &IntentDocument, field: impl FnOnce() -> String) -> Result<T, PluginError> {
        self.map_err(|message| doc.error(field(), message))
    }
}

/// A route's match: one of `pathPrefix`, `path` or `regex` (default: `pathPrefix: /`), and
/// header matchers. `at` is the route's field path. Returns whether it matched a regex.
pub fn route_match(doc: &IntentDocument, m: Option<MatchSpec>, at: &str) -> Result<(Route, bool), PluginError> {
    let m = m.unwrap_or_default();
    let set = [&m.path_prefix, &m.path, &m.regex].iter().filter(|o| o.is_some()).count();
    if set > 1 {
        return Err(doc.error(format!("{at}.match"), "set one of pathPrefix, path or regex, not several"));
    }
    let (mut route, is_regex) = if let Some(prefix) = m.path_prefix {
        check::path(&prefix).at(doc, || format!("{at}.match.pathPrefix"))?;
        (Route::prefix(prefix), false)
    } else if let Some(path) = m.path {
        check::path(&path).at(doc, || format!("{at}.match.path"))?;
        (Route::path(path), false)
    } else if let Some(re) = m.regex {
        check::regex(&re).at(doc, || format!("{at}.match.regex"))?;
        (Route::regex(re), true)
    } else {
        (Route::prefix("/"), false)
    };
    for (i, h) in m.headers.into_iter().enumerate() {
        route = route.header(header_match(doc, h, || format!("{at}.match.headers[{i}]"))?);
    }
    Ok((route, is_regex))
}

fn header_match(doc: &IntentDocument, h: HeaderMatchSpec, at: impl Fn() -> String) -> Result<HeaderMatch, PluginError> {
    check::header_name(&h.name, false).at(doc, || format!("{}.name", at()))?;
    let set =
        [h.exact.is_some(), h.prefix.is_some(), h.regex.is_some(), h.present.is_some()].iter().filter(|&&b| b).count();
    if set != 1 {
        return Err(doc.error(at(), "set exactly one of exact, prefix, regex or present"));
    }
    let mut invert = h.invert;
    let m = if let Some(v) = h.exact {
        check::header_value(&v).at(doc, || format!("{}.exact", at()))?;
        HeaderMatch::exact(h.name, v)
    } else if let Some(p) = h.prefix {
        check::header_value(&p).at(doc, || format!("{}.prefix", at()))?;
        HeaderMatch::prefix(h.name, p)
    } else if let Some(re) = h.regex {
        check::regex(&re).at(doc, || format!("{}.regex", at()))?;
        HeaderMatch::regex(h.name, re)
    } else {
        // `present: false` matches requests without the header.
        invert ^= h.present == Some(false);
        HeaderMatch::present(h.name)
    };
    Ok(if invert { m.invert() } else { m })
}

/// Checks a backends list: not empty, valid service names listed once, weights at least 1.
/// `at` is the path of the list.
pub fn check_backends(doc: &IntentDocument, backends: &[BackendSpec], at: &str) -> Result<(), PluginError> {
    if backends.is_empty() {
        return Err(doc.error(at, "list at least one backend service"));
    }
    let mut total: u64 = 0;
    let mut seen = BTreeSet::new();
    for (i, b) in backends.iter().enumerate() {
        check::name(&b.service).at(doc, || format!("{at}[{i}].service"))?;
        if backends.len() > 1 && !seen.insert(b.service.as_str()) {
            return Err(doc.error(format!("{at}[{i}].service"), format!("{:?} is listed twice", b.service)));
        }
        let weight = b.weight.unwrap_or(1);
        check::weight(weight).at(doc, || format!("{at}[{i}].weight"))?;
        total += u64::from(weight);
    }
    if total > u64::from(u32::MAX) {
        return Err(doc.error(at, "the weights add up to more than 4294967295"));
    }
    Ok(())
}

/// Checks `backends` and sends the route to them: one backend is a plain cluster, several a
/// weighted split. `at` is the path of the list.
pub fn to_backends(
    doc: &IntentDocument,
    route: Route,
    mut backends: Vec<BackendSpec>,
    at: &str,
) -> Result<Route, PluginError> {
    check_backends(doc, &backends, at)?;
    Ok(if backends.len() == 1 {
        route.to_cluster(backends.pop().map(|b| b.service).unwrap_or_default())
    } else {
        route.to_weighted_clusters(backends.into_iter().map(|b| (b.service, b.weight.unwrap_or(1))))
    })
}

/// Sends the route to backends already checked by [`check_backends`] and shared by routes.
pub fn to_shared_backends(route: Route, backends: &[BackendSpec]) -> Route {
    if let [one] = backends {
        route.to_cluster(one.service.as_str())
    } else {
        route.to_weighted_clusters(backends.iter().map(|b| (b.service.as_str(), b.weight.unwrap_or(1))))
    }
}

/// Builders that carry request and response header mutations.
pub trait Mutable: Sized {
    fn set(self, request: bool, name: String, value: String) -> Self;
    fn add(self, request: bool, name: String, value: String) -> Self;
    fn remove(self, request: bool, name: String) -> Self;
}

macro_rules! mutable {
    ($t:ty) => {
        impl Mutable for $t {
            fn set(self, request: bool, name: String, value: String) -> Self {
                if request { self.set_request_header(name, value) } else { self.set_response_header(name, value) }
            }
            fn add(self, request: bool, name: String, value: String) -> Self {
                if request { self.add_request_header(name, value) } else { self.add_response_header(name, value) }
            }
            fn remove(self, request: bool, name: String) -> Self {
                if request { self.remove_request_header(name) } else { self.remove_response_header(name) }
            }
        }
    };
}
mutable!(Route);
mutable!(VirtualHost);

/// Applies `requestHeaders` (`request`) or `responseHeaders`: `set`, then `add` (each in name
/// order), then `remove`. `at` is the path of the headers block.
pub fn mutate<T: Mutable>(
    doc: &IntentDocument,
    mut target: T,
    spec: Option<HeadersSpec>,
    request: bool,
    at: impl Fn() -> String,
) -> Result<T, PluginError> {
    let Some(spec) = spec else {
        return Ok(target);
    };
    for (name, value) in spec.set {
        check::header_name(&name, true).at(doc, || format!("{}.set", at()))?;
        check::header_value(&value).at(doc, || format!("{}.set.{name}", at()))?;
        target = target.set(request, name, value);
    }
    for (name, value) in spec.add {
        check::header_name(&name, true).at(doc, || format!("{}.add", at()))?;
        check::header_value(&value).at(doc, || format!("{}.add.{name}", at()))?;
        target = target.add(request, name, value);
    }
    for (i, name) in spec.remove.into_iter().enumerate() {
        check::header_name(&name, true).at(doc, || format!("{}.remove[{i}]", at()))?;
        target = target.remove(request, name);
    }
    Ok(target)
}
