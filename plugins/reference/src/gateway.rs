//! `HttpGateway` -> a Listener (RDS over ADS) and its RouteConfiguration, both named after the
//! document.

use std::collections::BTreeSet;

use xdst_guest::build::{HttpListener, RetryPolicy, Route, RouteConfig, VirtualHost};
use xdst_guest::{IntentDocument, PluginError, TranslateResponse, resource};

use crate::check;
use crate::routing::{At, mutate, route_match, to_backends};
use crate::schema::{GatewaySpec, HttpRouteSpec, RetriesSpec};

const DEFAULT_RETRY_ON: &str = "5xx,connect-failure,reset";

pub fn translate(doc: &IntentDocument, out: &mut TranslateResponse) -> Result<(), PluginError> {
    let spec: GatewaySpec = doc.spec()?;
    let address = spec.address.unwrap_or_else(|| "0.0.0.0".to_owned());
    check::ip(&address).at(doc, || "spec.address".into())?;
    if spec.hosts.is_empty() {
        return Err(doc.error("spec.hosts", "list at least one host"));
    }

    let mut domains = BTreeSet::new();
    let mut names = BTreeSet::new();
    let mut routes = RouteConfig::new(doc.name.as_str());
    for (h, host) in spec.hosts.into_iter().enumerate() {
        let at = format!("spec.hosts[{h}]");
        let hostnames = host.hostnames.unwrap_or_else(|| vec!["*".to_owned()]);
        if hostnames.is_empty() {
            return Err(doc
                .error(format!("{at}.hostnames"), "list at least one hostname (or leave hostnames out to match any)"));
        }
        for (i, d) in hostnames.iter().enumerate() {
            check::domain(d).at(doc, || format!("{at}.hostnames[{i}]"))?;
            if !domains.insert(d.to_ascii_lowercase()) {
                return Err(doc
                    .error(format!("{at}.hostnames[{i}]"), format!("{d:?} is listed more than once in this gateway")));
            }
        }
        let name = match host.name {
            Some(name) => {
                check::name(&name).at(doc, || format!("{at}.name"))?;
                name
            }
            None => hostnames[0].clone(),
        };
        if !names.insert(name.clone()) {
            return Err(doc.error(format!("{at}.name"), format!("another host is already named {name:?}")));
        }
        if host.routes.is_empty() {
            return Err(doc.error(format!("{at}.routes"), "list at least one route"));
        }
        let mut vhost = VirtualHost::new(name, hostnames);
        vhost = mutate(doc, vhost, host.request_headers, true, || format!("{at}.requestHeaders"))?;
        vhost = mutate(doc, vhost, host.response_headers, false, || format!("{at}.responseHeaders"))?;
        for (r, route) in host.routes.into_iter().enumerate() {
            vhost = vhost.route(http_route(doc, route, &format!("{at}.routes[{r}]"))?);
        }
        routes = routes.virtual_host(vhost);
    }

    let listener = HttpListener::new(doc.name.as_str(), spec.port.0).address(address).build();
    let id = doc.id();
    out.resources.push(resource(&listener, Some(id.clone())));
    out.resources.push(resource(&routes.build(), Some(id)));
    Ok(())
}

fn http_route(doc: &IntentDocument, spec: HttpRouteSpec, at: &str) -> Result<Route, PluginError> {
    let (mut route, is_regex) = route_match(doc, spec.matches, at)?;
    if let Some(name) = spec.name {
        route = route.name(name);
    }
    route = match (spec.backends, spec.direct_response) {
        (Some(_), Some(_)) => {
            return Err(doc.error(format!("{at}.directResponse"), "set backends or directResponse, not both"));
        }
        (None, None) => {
            return Err(
                doc.error(format!("{at}.backends"), "missing: the services to send requests to (or a directResponse)")
            );
        }
        (Some(backends), None) => to_backends(doc, route, backends, &format!("{at}.backends"))?,
        (None, Some(direct)) => {
            if !(200..=599).contains(&direct.status) {
                return Err(
                    doc.error(format!("{at}.directResponse.status"), "must be an HTTP status between 200 and 599")
                );
            }
            if spec.timeout.is_some() || spec.idle_timeout.is_some() || spec.retries.is_some() || spec.rewrite.is_some()
            {
                return Err(doc.error(
                    format!("{at}.directResponse"),
                    "timeout, idleTimeout, retries and rewrite apply to backends, not to a directResponse",
                ));
            }
            route.direct_response(direct.status.into(), direct.body)
        }
    };
    if let Some(timeout) = spec.timeout {
        route = route.timeout(timeout.0);
    }
    if let Some(timeout) = spec.idle_timeout {
        route = route.idle_timeout(timeout.0);
    }
    if let Some(retries) = spec.retries {
        route = route.retry_policy(http_retries(doc, retries, &format!("{at}.retries"))?);
    }
    if let Some(rewrite) = spec.rewrite {
        if is_regex {
            return Err(doc.error(format!("{at}.rewrite.pathPrefix"), "needs a pathPrefix or path match, not a regex"));
        }
        check::path(&rewrite.path_prefix).at(doc, || format!("{at}.rewrite.pathPrefix"))?;
        route = route.prefix_rewrite(rewrite.path_prefix);
    }
    route = mutate(doc, route, spec.request_headers, true, || format!("{at}.requestHeaders"))?;
    mutate(doc, route, spec.response_headers, false, || format!("{at}.responseHeaders"))
}

fn http_retries(doc: &IntentDocument, spec: RetriesSpec, at: &str) -> Result<RetryPolicy, PluginError> {
    let attempts = spec.attempts.unwrap_or(1);
    if attempts == 0 {
        return Err(doc.error(format!("{at}.attempts"), "must be at least 1 (leave retries out for none)"));
    }
    let mut on = check::retry_on(spec.on.as_deref().unwrap_or(DEFAULT_RETRY_ON), check::HTTP_RETRY_ON)
        .at(doc, || format!("{at}.on"))?;
    for (i, &code) in spec.status_codes.iter().enumerate() {
        if !(100..=599).contains(&code) {
            return Err(doc.error(format!("{at}.statusCodes[{i}]"), "must be an HTTP status between 100 and 599"));
        }
    }
    if !spec.status_codes.is_empty() && !on.split(',').any(|c| c == "retriable-status-codes") {
        on.push_str(",retriable-status-codes");
    }
    let mut policy = RetryPolicy::new(on).num_retries(attempts);
    if let Some(per_try) = spec.per_try_timeout {
        check::positive(per_try.0).at(doc, || format!("{at}.perTryTimeout"))?;
        policy = policy.per_try_timeout(per_try.0);
    }
    if !spec.status_codes.is_empty() {
        policy = policy.retriable_status_codes(spec.status_codes.into_iter().map(u32::from));
    }
    Ok(policy)
}
