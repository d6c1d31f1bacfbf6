//! `Service` -> an EDS Cluster and its ClusterLoadAssignment, both named after the document.

use std::collections::BTreeSet;
use std::net::IpAddr;

use xdst_guest::build::{CircuitBreakers, EdsCluster, Endpoint, HealthCheck, LbPolicy, LoadAssignment, Locality};
use xdst_guest::envoy::envoy::config::endpoint::v3::ClusterLoadAssignment;
use xdst_guest::{IntentDocument, PluginError, TranslateResponse, resource};

use crate::check;
use crate::routing::At;
use crate::schema::{
    CircuitBreakersSpec, EndpointSpec, HealthCheckSpec, LoadBalancing, LocalitySpec, Protocol, ServiceSpec,
};

pub fn translate(doc: &IntentDocument, out: &mut TranslateResponse) -> Result<(), PluginError> {
    let spec: ServiceSpec = doc.spec()?;
    let http2 = matches!(spec.protocol, Protocol::Http2 | Protocol::Grpc);

    let mut cluster = EdsCluster::new(doc.name.as_str()).lb_policy(match spec.load_balancing {
        LoadBalancing::RoundRobin => LbPolicy::RoundRobin,
        LoadBalancing::LeastRequest => LbPolicy::LeastRequest,
        LoadBalancing::Random => LbPolicy::Random,
        LoadBalancing::RingHash => LbPolicy::RingHash,
        LoadBalancing::Maglev => LbPolicy::Maglev,
    });
    if let Some(timeout) = spec.connect_timeout {
        check::positive(timeout.0).at(doc, || "spec.connectTimeout".into())?;
        cluster = cluster.connect_timeout(timeout.0);
    }
    if http2 {
        cluster = cluster.http2();
    }
    if !spec.localities.is_empty() {
        // Locality weights mean the same to Envoy as to gRPC clients.
        cluster = cluster.locality_weighted();
    }
    if let Some(hc) = spec.health_check {
        cluster = cluster.health_check(health_check(doc, hc, http2)?);
    }
    if let Some(cb) = spec.circuit_breakers {
        cluster = cluster.circuit_breakers(circuit_breakers(cb));
    }

    let endpoints = load_assignment(doc, spec.endpoints, spec.localities, out)?;
    let id = doc.id();
    out.resources.push(resource(&cluster.build(), Some(id.clone())));
    out.resources.push(resource(&endpoints, Some(id)));
    Ok(())
}

fn load_assignment(
    doc: &IntentDocument,
    endpoints: Vec<EndpointSpec>,
    localities: Vec<LocalitySpec>,
    out: &mut TranslateResponse,
) -> Result<ClusterLoadAssignment, PluginError> {
    if !endpoints.is_empty() && !localities.is_empty() {
        return Err(
            doc.error("spec.localities", "put endpoints either in spec.endpoints or in spec.localities, not both")
        );
    }
    let mut seen = BTreeSet::new();
    let mut cla = LoadAssignment::new(doc.name.as_str());
    let mut count = endpoints.len();
    for (i, e) in endpoints.into_iter().enumerate() {
        cla = cla.endpoint(endpoint(doc, e, &mut seen, || format!("spec.endpoints[{i}]"))?);
    }

    let mut priorities = BTreeSet::new();
    let mut places = BTreeSet::new();
    let mut locality_priorities = Vec::with_capacity(localities.len());
    for (l, loc) in localities.into_iter().enumerate() {
        let at = || format!("spec.localities[{l}]");
        if !places.insert((loc.region.clone(), loc.zone.clone(), loc.sub_zone.clone())) {
            return Err(doc.error(at(), "another locality has the same region, zone and subZone"));
        }
        let weight = loc.weight.unwrap_or(1);
        check::weight(weight).at(doc, || format!("{}.weight", at()))?;
        priorities.insert(loc.priority);
        locality_priorities.push(loc.priority);
        count += loc.endpoints.len();
        let mut locality = Locality::new(loc.region, loc.zone, loc.sub_zone).weight(weight).priority(loc.priority);
        for (i, e) in loc.endpoints.into_iter().enumerate() {
            locality = locality.endpoint(endpoint(doc, e, &mut seen, || format!("{}.endpoints[{i}]", at()))?);
        }
        cla = cla.locality(locality);
    }
    // Priorities must run 0, 1, 2, ... without gaps.
    if let Some(gap) = (0..).zip(&priorities).find(|(want, have)| want != *have) {
        let missing = gap.0;
        let l = locality_priorities.iter().position(|&p| p > missing).unwrap_or_default();
        return Err(doc.error(
            format!("spec.localities[{l}].priority"),
            format!("priorities must run 0, 1, 2, ... without gaps, and no locality has priority {missing}"),
        ));
    }
    if count == 0 {
        out.diagnostics
            .push(doc.warning("spec.endpoints", "no endpoints: requests to this service fail until it has some"));
    }
    Ok(cla.build())
}

fn endpoint(
    doc: &IntentDocument,
    e: EndpointSpec,
    seen: &mut BTreeSet<(IpAddr, u16)>,
    at: impl Fn() -> String,
) -> Result<Endpoint, PluginError> {
    let ip = check::ip(&e.address).at(doc, || format!("{}.address", at()))?;
    if !seen.insert((ip, e.port.0)) {
        return Err(doc.error(at(), format!("{}:{} is listed twice", e.address, e.port.0)));
    }
    let mut endpoint = Endpoint::new(e.address, e.port.0);
    if let Some(weight) = e.weight {
        check::weight(weight).at(doc, || format!("{}.weight", at()))?;
        endpoint = endpoint.weight(weight);
    }
    Ok(endpoint)
}

fn health_check(doc: &IntentDocument, spec: HealthCheckSpec, http2: bool) -> Result<HealthCheck, PluginError> {
    let at = "spec.healthCheck";
    let mut check = match (spec.path, spec.grpc) {
        (Some(path), None) => {
            check::path(&path).at(doc, || format!("{at}.path"))?;
            let mut hc = HealthCheck::http(path);
            if http2 {
                hc = hc.http2();
            }
            if let Some(host) = spec.host {
                check::domain(&host).at(doc, || format!("{at}.host"))?;
                hc = hc.host(host);
            }
            hc
        }
        (None, Some(grpc)) => {
            if !http2 {
                return Err(doc.error(format!("{at}.grpc"), "gRPC health checks need protocol http2 or grpc"));
            }
            if spec.host.is_some() {
                return Err(doc.error(format!("{at}.host"), "applies to HTTP checks (path) only"));
            }
            HealthCheck::grpc(grpc.service_name)
        }
        _ => {
            return Err(
                doc.error(at, "set path (an HTTP check) or grpc (the gRPC health checking protocol), one of them")
            );
        }
    };
    if let Some(interval) = spec.interval {
        check::positive(interval.0).at(doc, || format!("{at}.interval"))?;
        check = check.interval(interval.0);
    }
    if let Some(timeout) = spec.timeout {
        check::positive(timeout.0).at(doc, || format!("{at}.timeout"))?;
        check = check.timeout(timeout.0);
    }
    if let Some(n) = spec.healthy_threshold {
        check::at_least_one(n).at(doc, || format!("{at}.healthyThreshold"))?;
        check = check.healthy_threshold(n);
    }
    if let Some(n) = spec.unhealthy_threshold {
        check::at_least_one(n).at(doc, || format!("{at}.unhealthyThreshold"))?;
        check = check.unhealthy_threshold(n);
    }
    Ok(check)
}

fn circuit_breakers(spec: CircuitBreakersSpec) -> CircuitBreakers {
    let mut cb = CircuitBreakers::new();
    if let Some(n) = spec.max_connections {
        cb = cb.max_connections(n);
    }
    if let Some(n) = spec.max_pending_requests {
        cb = cb.max_pending_requests(n);
    }
    if let Some(n) = spec.max_requests {
        cb = cb.max_requests(n);
    }
    if let Some(n) = spec.max_retries {
        cb = cb.max_retries(n);
    }
    cb
}
