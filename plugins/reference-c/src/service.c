/* `Service` -> an EDS Cluster and its ClusterLoadAssignment, both named after the document
 * (plugins/reference/src/service.rs). */
#include <stdlib.h>
#include <string.h>

#include "reference.h"

#define ADS_SOURCE(w)                                                                             \
    do {                                                                                          \
        jw_obj(w);                                                                                \
        jw_empty_obj(w, "ads");                                                                   \
        jw_key(w, "resource_api_version");                                                        \
        jw_cstr(w, "V3");                                                                         \
        jw_end_obj(w);                                                                            \
    } while (0)

static bool read_any_service(jctx_t *c, const jval_t *v, void *out) { return read_service(c, v, out); }

static void put_duration(jw_t *w, const char *key, dur_t d) {
    sb_t b = {0};
    sb_duration(&b, d);
    jw_key(w, key);
    jw_str(w, sb_view(&b));
    free(b.p);
}

/* ---------------------------------------------------------------- checks */

static bool check_health(tctx_t *t, health_check_spec_t *hc, bool http2) {
    if (hc->path.set && !hc->grpc) {
        if (!at(t, check_path(hc->path.v), "spec.healthCheck.path")) return false;
        if (hc->host.set && !at(t, check_domain(hc->host.v), "spec.healthCheck.host")) return false;
    } else if (!hc->path.set && hc->grpc) {
        if (!http2) return doc_error(t, "spec.healthCheck.grpc", "gRPC health checks need protocol http2 or grpc");
        if (hc->host.set) return doc_error(t, "spec.healthCheck.host", "applies to HTTP checks (path) only");
    } else {
        return doc_error(t, "spec.healthCheck",
                         "set path (an HTTP check) or grpc (the gRPC health checking protocol), one of them");
    }
    if (hc->interval.set && !at(t, check_positive(hc->interval.v), "spec.healthCheck.interval")) return false;
    if (hc->timeout.set && !at(t, check_positive(hc->timeout.v), "spec.healthCheck.timeout")) return false;
    if (hc->healthy_threshold.set &&
        !at(t, check_at_least_one(hc->healthy_threshold.v), "spec.healthCheck.healthyThreshold"))
        return false;
    if (hc->unhealthy_threshold.set &&
        !at(t, check_at_least_one(hc->unhealthy_threshold.v), "spec.healthCheck.unhealthyThreshold"))
        return false;
    return true;
}

/* Endpoints seen so far in the Service: the same IP and port may appear once. */
typedef struct {
    uint8_t (*ip)[17];
    uint16_t *port;
    size_t n, cap;
} seen_t;

static bool check_endpoint(tctx_t *t, endpoint_spec_t *e, seen_t *seen, const char *path) {
    uint8_t ip[17];
    if (!at(t, check_ip(e->address, ip), "%s.address", path)) return false;
    for (size_t i = 0; i < seen->n; i++)
        if (seen->port[i] == e->port && memcmp(seen->ip[i], ip, sizeof ip) == 0)
            return doc_error(t, fmt("%s", path), fmt("%S:%u is listed twice", e->address, (unsigned)e->port));
    if (seen->n == seen->cap) {
        seen->cap = seen->cap ? 2 * seen->cap : 16;
        seen->ip = xrealloc(seen->ip, seen->cap * sizeof *seen->ip);
        seen->port = xrealloc(seen->port, seen->cap * sizeof *seen->port);
    }
    memcpy(seen->ip[seen->n], ip, sizeof ip);
    seen->port[seen->n++] = e->port;
    if (e->weight.set && !at(t, check_weight(e->weight.v), "%s.weight", path)) return false;
    return true;
}

static bool check_endpoints(tctx_t *t, service_spec_t *s) {
    if (s->endpoints.n && s->nlocalities)
        return doc_error(t, "spec.localities", "put endpoints either in spec.endpoints or in spec.localities, not both");
    seen_t seen = {0};
    size_t count = s->endpoints.n;
    for (size_t i = 0; i < s->endpoints.n; i++)
        if (!check_endpoint(t, &s->endpoints.v[i], &seen, fmt("spec.endpoints[%U]", (uint64_t)i))) return false;

    /* priorities[p] tells whether some locality has priority p (for p below nlocalities:
     * a gap can only be that low). */
    bool *priorities = xmalloc(s->nlocalities + 1);
    memset(priorities, 0, s->nlocalities + 1);
    for (size_t l = 0; l < s->nlocalities; l++) {
        locality_spec_t *loc = &s->localities[l];
        char *path = fmt("spec.localities[%U]", (uint64_t)l);
        for (size_t k = 0; k < l; k++) {
            locality_spec_t *o = &s->localities[k];
            if (str_same(o->region, loc->region) && str_same(o->zone, loc->zone) && str_same(o->sub_zone, loc->sub_zone))
                return doc_error(t, path, "another locality has the same region, zone and subZone");
        }
        uint32_t weight = loc->weight.set ? loc->weight.v : 1;
        if (!at(t, check_weight(weight), "%s.weight", path)) return false;
        if (loc->priority < s->nlocalities) priorities[loc->priority] = true;
        count += loc->endpoints.n;
        for (size_t i = 0; i < loc->endpoints.n; i++)
            if (!check_endpoint(t, &loc->endpoints.v[i], &seen, fmt("%s.endpoints[%U]", path, (uint64_t)i)))
                return false;
    }
    /* Priorities must run 0, 1, 2, ... without gaps: the lowest missing one must be above
     * every priority in use. */
    uint32_t missing = 0;
    while (missing < s->nlocalities && priorities[missing]) missing++;
    for (size_t l = 0; l < s->nlocalities; l++) {
        if (s->localities[l].priority > missing) {
            return doc_error(t, fmt("spec.localities[%U].priority", (uint64_t)l),
                             fmt("priorities must run 0, 1, 2, ... without gaps, and no locality has priority %u", missing));
        }
    }
    if (count == 0) doc_warning(t, "spec.endpoints", "no endpoints: requests to this service fail until it has some");
    return true;
}

/* ---------------------------------------------------------------- output */

static void put_endpoints(jw_t *w, const endpoints_t *eps) {
    jw_key(w, "lb_endpoints");
    jw_arr(w);
    for (size_t i = 0; i < eps->n; i++) {
        const endpoint_spec_t *e = &eps->v[i];
        jw_obj(w);
        jw_key(w, "endpoint");
        jw_obj(w);
        jw_key(w, "address");
        jw_obj(w);
        jw_key(w, "socket_address");
        jw_obj(w);
        jw_key(w, "address");
        jw_str(w, e->address);
        jw_key(w, "port_value");
        jw_u64(w, e->port);
        jw_end_obj(w);
        jw_end_obj(w);
        jw_end_obj(w);
        if (e->weight.set) {
            jw_key(w, "load_balancing_weight");
            jw_u64(w, e->weight.v);
        }
        jw_end_obj(w);
    }
    jw_end_arr(w);
}

static void put_opt_str(jw_t *w, const char *key, str_t s) {
    if (s.n) {
        jw_key(w, key);
        jw_str(w, s);
    }
}

static void put_load_assignment(jw_t *w, str_t name, const service_spec_t *s) {
    jw_obj(w);
    jw_key(w, "cluster_name");
    jw_str(w, name);
    if (s->endpoints.n || s->nlocalities) {
        jw_key(w, "endpoints");
        jw_arr(w);
        if (s->endpoints.n) {
            /* One unnamed locality: its `locality` is set but empty (proxyless gRPC clients
             * refuse a locality group without one). */
            jw_obj(w);
            jw_empty_obj(w, "locality");
            jw_key(w, "load_balancing_weight");
            jw_u64(w, 1);
            put_endpoints(w, &s->endpoints);
            jw_end_obj(w);
        }
        for (size_t l = 0; l < s->nlocalities; l++) {
            const locality_spec_t *loc = &s->localities[l];
            jw_obj(w);
            jw_key(w, "locality");
            jw_obj(w);
            put_opt_str(w, "region", loc->region);
            put_opt_str(w, "zone", loc->zone);
            put_opt_str(w, "sub_zone", loc->sub_zone);
            jw_end_obj(w);
            jw_key(w, "load_balancing_weight");
            jw_u64(w, loc->weight.set ? loc->weight.v : 1);
            if (loc->priority) {
                jw_key(w, "priority");
                jw_u64(w, loc->priority);
            }
            if (loc->endpoints.n) put_endpoints(w, &loc->endpoints);
            jw_end_obj(w);
        }
        jw_end_arr(w);
    }
    jw_end_obj(w);
}

static void put_health_check(jw_t *w, const health_check_spec_t *hc, bool http2) {
    jw_obj(w);
    put_duration(w, "timeout", hc->timeout.set ? hc->timeout.v : (dur_t){1, 0});
    put_duration(w, "interval", hc->interval.set ? hc->interval.v : (dur_t){10, 0});
    jw_key(w, "healthy_threshold");
    jw_u64(w, hc->healthy_threshold.set ? hc->healthy_threshold.v : 1);
    jw_key(w, "unhealthy_threshold");
    jw_u64(w, hc->unhealthy_threshold.set ? hc->unhealthy_threshold.v : 3);
    if (hc->grpc) {
        jw_key(w, "grpc_health_check");
        jw_obj(w);
        put_opt_str(w, "service_name", hc->grpc_service_name);
        jw_end_obj(w);
    } else {
        jw_key(w, "http_health_check");
        jw_obj(w);
        jw_key(w, "path");
        jw_str(w, hc->path.v);
        if (hc->host.set) put_opt_str(w, "host", hc->host.v);
        if (http2) {
            jw_key(w, "codec_client_type");
            jw_cstr(w, "HTTP2");
        }
        jw_end_obj(w);
    }
    jw_end_obj(w);
}

static void put_threshold(jw_t *w, const char *key, opt_u32_t v) {
    if (v.set) {
        jw_key(w, key);
        jw_u64(w, v.v);
    }
}

static void put_cluster(jw_t *w, str_t name, const service_spec_t *s, bool http2) {
    static const char *const POLICIES[] = {"ROUND_ROBIN", "LEAST_REQUEST", "RANDOM", "RING_HASH", "MAGLEV"};
    jw_obj(w);
    jw_key(w, "name");
    jw_str(w, name);
    jw_key(w, "type");
    jw_cstr(w, "EDS");
    jw_key(w, "eds_cluster_config");
    jw_obj(w);
    jw_key(w, "eds_config");
    ADS_SOURCE(w);
    jw_end_obj(w);
    if (s->load_balancing != LB_ROUND_ROBIN) {
        jw_key(w, "lb_policy");
        jw_cstr(w, POLICIES[s->load_balancing]);
    }
    if (s->connect_timeout.set) put_duration(w, "connect_timeout", s->connect_timeout.v);
    if (http2) jw_empty_obj(w, "http2_protocol_options");
    if (s->nlocalities) {
        /* Locality weights mean the same to Envoy as to gRPC clients. */
        jw_key(w, "common_lb_config");
        jw_obj(w);
        jw_empty_obj(w, "locality_weighted_lb_config");
        jw_end_obj(w);
    }
    if (s->health_check) {
        jw_key(w, "health_checks");
        jw_arr(w);
        put_health_check(w, s->health_check, http2);
        jw_end_arr(w);
    }
    if (s->circuit_breakers) {
        const circuit_breakers_spec_t *cb = s->circuit_breakers;
        jw_key(w, "circuit_breakers");
        jw_obj(w);
        jw_key(w, "thresholds");
        jw_arr(w);
        jw_obj(w); /* priority DEFAULT */
        put_threshold(w, "max_connections", cb->max_connections);
        put_threshold(w, "max_pending_requests", cb->max_pending_requests);
        put_threshold(w, "max_requests", cb->max_requests);
        put_threshold(w, "max_retries", cb->max_retries);
        jw_end_obj(w);
        jw_end_arr(w);
        jw_end_obj(w);
    }
    jw_end_obj(w);
}

bool translate_service(tctx_t *t) {
    service_spec_t s;
    if (!read_spec(t, read_any_service, &s)) return false;
    bool http2 = s.protocol == PROTO_HTTP2 || s.protocol == PROTO_GRPC;
    if (s.connect_timeout.set && !at(t, check_positive(s.connect_timeout.v), "spec.connectTimeout")) return false;
    if (s.health_check && !check_health(t, s.health_check, http2)) return false;
    if (!check_endpoints(t, &s)) return false;

    str_t name = t->doc->name;
    jw_t cluster = {0}, cla = {0};
    put_cluster(&cluster, name, &s, http2);
    put_load_assignment(&cla, name, &s);
    add_resource(t, "type.googleapis.com/envoy.config.cluster.v3.Cluster", name, &cluster.b);
    add_resource(t, "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment", name, &cla.b);
    return true;
}
