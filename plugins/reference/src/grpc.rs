//! `GrpcService` -> what a proxyless gRPC client dialing `xds:///<name>` reads: an
//! `api_listener` Listener and a RouteConfiguration, both named after the document.

use xdst_guest::build::{ApiListener, RetryPolicy, Route, RouteConfig, VirtualHost};
use xdst_guest::{IntentDocument, PluginError, TranslateResponse, resource};

use crate::check;
use crate::duration::Dur;
use crate::routing::{At, check_backends, route_match, to_backends, to_shared_backends};
use crate::schema::{GrpcRetriesSpec, GrpcServiceSpec};

const DEFAULT_RETRY_ON: &str = "unavailable";

pub fn translate(doc: &IntentDocument, out: &mut TranslateResponse) -> Result<(), PluginError> {
    let spec: GrpcServiceSpec = doc.spec()?;
    let GrpcServiceSpec { backends, routes, timeout, retries } = spec;
    // The service-wide retry policy, checked once whether or not a route uses it.
    let default_retries = match &retries {
        Some(r) => Some(grpc_retries(doc, r, "spec.retries")?),
        None => None,
    };

    let mut vhost = VirtualHost::new(doc.name.as_str(), ["*"]);
    match routes {
        None => {
            let route = to_backends(doc, Route::prefix("/"), backends, "spec.backends")?;
            vhost = vhost.route(finish(route, timeout, default_retries));
        }
        Some(routes) => {
            if routes.is_empty() {
                return Err(doc.error(
                    "spec.routes",
                    "list at least one route (or leave routes out to send everything to spec.backends)",
                ));
            }
            // Routes without backends of their own share the service's.
            if !backends.is_empty() {
                check_backends(doc, &backends, "spec.backends")?;
            }
            for (r, route) in routes.into_iter().enumerate() {
                let at = format!("spec.routes[{r}]");
                let (mut built, _) = route_match(doc, route.matches, &at)?;
                if let Some(name) = route.name {
                    built = built.name(name);
                }
                built = match route.backends {
                    Some(own) => to_backends(doc, built, own, &format!("{at}.backends"))?,
                    None if backends.is_empty() => {
                        return Err(doc.error(
                            format!("{at}.backends"),
                            "missing: list this route's backends, or spec.backends for every route",
                        ));
                    }
                    None => to_shared_backends(built, &backends),
                };
                let retries = match &route.retries {
                    Some(r) => Some(grpc_retries(doc, r, &format!("{at}.retries"))?),
                    None => default_retries.clone(),
                };
                vhost = vhost.route(finish(built, route.timeout.or(timeout), retries));
            }
        }
    }

    let listener = ApiListener::new(doc.name.as_str()).build();
    let routes = RouteConfig::new(doc.name.as_str()).virtual_host(vhost).build();
    let id = doc.id();
    out.resources.push(resource(&listener, Some(id.clone())));
    out.resources.push(resource(&routes, Some(id)));
    Ok(())
}

/// gRPC clients honour `max_stream_duration`, not `timeout`.
fn finish(route: Route, timeout: Option<Dur>, retries: Option<RetryPolicy>) -> Route {
    let route = match timeout {
        Some(t) => route.max_stream_duration(t.0),
        None => route,
    };
    match retries {
        Some(r) => route.retry_policy(r),
        None => route,
    }
}

fn grpc_retries(doc: &IntentDocument, spec: &GrpcRetriesSpec, at: &str) -> Result<RetryPolicy, PluginError> {
    let attempts = spec.attempts.unwrap_or(1);
    if attempts == 0 {
        return Err(doc.error(format!("{at}.attempts"), "must be at least 1 (leave retries out for none)"));
    }
    let on = check::retry_on(spec.on.as_deref().unwrap_or(DEFAULT_RETRY_ON), check::GRPC_RETRY_ON)
        .at(doc, || format!("{at}.on"))?;
    let mut policy = RetryPolicy::new(on).num_retries(attempts);
    if let Some(backoff) = &spec.backoff {
        check::positive(backoff.base.0).at(doc, || format!("{at}.backoff.base"))?;
        // Envoy's and gRPC's default ceiling: ten times the base.
        let max = backoff.max.map_or(backoff.base.0 * 10, |m| m.0);
        if max < backoff.base.0 {
            return Err(doc.error(format!("{at}.backoff.max"), "must not be shorter than backoff.base"));
        }
        policy = policy.back_off(backoff.base.0, max);
    }
    Ok(policy)
}
