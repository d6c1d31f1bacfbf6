/* Reading `spec` the way serde reads it in the Rust reference: fields in the order written,
 * the first error wins, unknown and repeated fields are errors, a missing required field
 * is reported at its object, and `null` means absent for optional fields only. */
#include "schema.h"

#include <string.h>

typedef bool (*reader_t)(jctx_t *c, const jval_t *v, void *out);

static void *zalloc(size_t n) {
    void *p = xmalloc(n);
    memset(p, 0, n);
    return p;
}

/* A list: each item read by `read` into an array of `size`-byte elements. */
static bool r_list(jctx_t *c, const jval_t *v, size_t size, reader_t read, void **out, size_t *n) {
    if (!jread_array(c, v)) return false;
    char *arr = zalloc(v->n * size);
    for (size_t i = 0; i < v->n; i++) {
        size_t mark = jctx_push_index(c, i);
        if (!read(c, v->items[i], arr + i * size)) return false;
        jctx_pop(c, mark);
    }
    *out = arr;
    *n = v->n;
    return true;
}

static bool r_str(jctx_t *c, const jval_t *v, void *out) { return jread_str(c, v, out); }

static bool r_u16(jctx_t *c, const jval_t *v, void *out) { return jread_u16(c, v, out); }

static bool r_opt_str(jctx_t *c, const jval_t *v, opt_str_t *o) {
    o->set = v->type != J_NULL;
    return !o->set || jread_str(c, v, &o->v);
}

static bool r_opt_u32(jctx_t *c, const jval_t *v, opt_u32_t *o) {
    o->set = v->type != J_NULL;
    return !o->set || jread_u32(c, v, &o->v);
}

static bool r_dur(jctx_t *c, const jval_t *v, dur_t *d) {
    if (v->type != J_STR) return jctx_invalid_type(c, v, "a duration string such as 250ms, 1s or 1m30s");
    char *e = duration_parse(v->s, d);
    return e ? jctx_fail(c, e) : true;
}

static bool r_opt_dur(jctx_t *c, const jval_t *v, opt_dur_t *o) {
    o->set = v->type != J_NULL;
    return !o->set || r_dur(c, v, &o->v);
}

static bool r_port(jctx_t *c, const jval_t *v, uint16_t *out) {
    const char *expected = "a port number from 1 to 65535";
    if (v->type != J_NUM || v->num == JN_FLOAT) return jctx_invalid_type(c, v, expected);
    if (v->num == JN_NEG || v->u == 0 || v->u > 65535)
        return jctx_fail(c, fmt("invalid value: integer `%S`, expected %s", v->s, expected));
    *out = (uint16_t)v->u;
    return true;
}

/* A unit-only enum, as serde_json reads one: `"name"`, or `{"name": null}`. */
static bool r_enum(jctx_t *c, const jval_t *v, const char *what, const char *const *names, int *out) {
    if (v->type == J_STR) return jread_enum(c, v, what, names, out);
    if (v->type == J_OBJ && v->n == 1) {
        jval_t key = {.type = J_STR, .s = v->members[0].key};
        if (!jread_enum(c, &key, what, names, out)) return false;
        const jval_t *unit = v->members[0].val;
        if (unit->type != J_NULL) return jctx_invalid_type(c, unit, "unit variant");
        return true;
    }
    return jctx_fail(c, fmt("expected value"));
}

/* A map of strings, in name order; a name given twice keeps its last value. */
static bool r_string_map(jctx_t *c, const jval_t *v, header_kv_t **out, size_t *n) {
    if (v->type != J_OBJ) return jctx_invalid_type(c, v, "a map");
    header_kv_t *kv = zalloc(v->n * sizeof *kv);
    size_t count = 0;
    for (size_t i = 0; i < v->n; i++) {
        size_t mark = jctx_push_field(c, v->members[i].key);
        str_t value;
        if (!jread_str(c, v->members[i].val, &value)) return false;
        jctx_pop(c, mark);
        /* insertion sort: maps are small */
        str_t key = v->members[i].key;
        size_t at = 0;
        while (at < count && str_cmp(kv[at].name, key) < 0) at++;
        if (at < count && str_same(kv[at].name, key)) {
            kv[at].value = value;
            continue;
        }
        memmove(&kv[at + 1], &kv[at], (count - at) * sizeof *kv);
        kv[at] = (header_kv_t){key, value};
        count++;
    }
    *out = kv;
    *n = count;
    return true;
}

/* ---------------------------------------------------------------- Service */

static bool r_endpoint(jctx_t *c, const jval_t *v, void *out) {
    static const char *const F[] = {"address", "port", "weight", NULL};
    endpoint_spec_t *e = out;
    jobj_t o;
    if (!jobj_begin(c, v, "struct EndpointSpec", F, 0, &o)) return false;
    const jval_t *fv;
    int f;
    while ((f = jobj_next(c, &o, &fv)) >= 0) {
        bool ok = f == 0   ? jread_str(c, fv, &e->address)
                  : f == 1 ? r_port(c, fv, &e->port)
                           : r_opt_u32(c, fv, &e->weight);
        if (!ok) return false;
    }
    if (f == JOBJ_ERROR) return false;
    for (int k = 0; k < 2; k++)
        if (!jobj_has(&o, k)) return jobj_missing(c, &o, k);
    return true;
}

static bool r_endpoints(jctx_t *c, const jval_t *v, endpoints_t *out) {
    return r_list(c, v, sizeof(endpoint_spec_t), r_endpoint, (void **)&out->v, &out->n);
}

static bool r_locality(jctx_t *c, const jval_t *v, void *out) {
    static const char *const F[] = {"region", "zone", "subZone", "weight", "priority", "endpoints", NULL};
    locality_spec_t *l = out;
    jobj_t o;
    if (!jobj_begin(c, v, "struct LocalitySpec", F, 0x37, &o)) return false;
    const jval_t *fv;
    int f;
    while ((f = jobj_next(c, &o, &fv)) >= 0) {
        bool ok;
        switch (f) {
        case 0: ok = jread_str(c, fv, &l->region); break;
        case 1: ok = jread_str(c, fv, &l->zone); break;
        case 2: ok = jread_str(c, fv, &l->sub_zone); break;
        case 3: ok = r_opt_u32(c, fv, &l->weight); break;
        case 4: ok = jread_u32(c, fv, &l->priority); break;
        default: ok = r_endpoints(c, fv, &l->endpoints);
        }
        if (!ok) return false;
    }
    return f != JOBJ_ERROR;
}

static bool r_grpc_health_check(jctx_t *c, const jval_t *v, health_check_spec_t *hc) {
    static const char *const F[] = {"serviceName", NULL};
    jobj_t o;
    if (!jobj_begin(c, v, "struct GrpcHealthCheckSpec", F, 0x1, &o)) return false;
    const jval_t *fv;
    int f;
    while ((f = jobj_next(c, &o, &fv)) >= 0)
        if (!jread_str(c, fv, &hc->grpc_service_name)) return false;
    return f != JOBJ_ERROR;
}

static bool r_health_check(jctx_t *c, const jval_t *v, health_check_spec_t *hc) {
    static const char *const F[] = {"path", "host", "grpc", "interval", "timeout",
                                    "healthyThreshold", "unhealthyThreshold", NULL};
    jobj_t o;
    if (!jobj_begin(c, v, "struct HealthCheckSpec", F, 0, &o)) return false;
    const jval_t *fv;
    int f;
    while ((f = jobj_next(c, &o, &fv)) >= 0) {
        bool ok;
        switch (f) {
        case 0: ok = r_opt_str(c, fv, &hc->path); break;
        case 1: ok = r_opt_str(c, fv, &hc->host); break;
        case 2:
            hc->grpc = fv->type != J_NULL;
            ok = !hc->grpc || r_grpc_health_check(c, fv, hc);
            break;
        case 3: ok = r_opt_dur(c, fv, &hc->interval); break;
        case 4: ok = r_opt_dur(c, fv, &hc->timeout); break;
        case 5: ok = r_opt_u32(c, fv, &hc->healthy_threshold); break;
        default: ok = r_opt_u32(c, fv, &hc->unhealthy_threshold);
        }
        if (!ok) return false;
    }
    return f != JOBJ_ERROR;
}

static bool r_circuit_breakers(jctx_t *c, const jval_t *v, circuit_breakers_spec_t *cb) {
    static const char *const F[] = {"maxConnections", "maxPendingRequests", "maxRequests", "maxRetries", NULL};
    jobj_t o;
    if (!jobj_begin(c, v, "struct CircuitBreakersSpec", F, 0, &o)) return false;
    opt_u32_t *slots[] = {&cb->max_connections, &cb->max_pending_requests, &cb->max_requests, &cb->max_retries};
    const jval_t *fv;
    int f;
    while ((f = jobj_next(c, &o, &fv)) >= 0)
        if (!r_opt_u32(c, fv, slots[f])) return false;
    return f != JOBJ_ERROR;
}

static bool r_service_spec(jctx_t *c, const jval_t *v, service_spec_t *s) {
    static const char *const F[] = {"protocol", "loadBalancing", "connectTimeout", "endpoints",
                                    "localities", "healthCheck", "circuitBreakers", NULL};
    static const char *const PROTOCOLS[] = {"http1", "http2", "grpc", NULL};
    static const char *const POLICIES[] = {"roundRobin", "leastRequest", "random", "ringHash", "maglev", NULL};
    jobj_t o;
    if (!jobj_begin(c, v, "struct ServiceSpec", F, 0x1B, &o)) return false;
    const jval_t *fv;
    int f;
    while ((f = jobj_next(c, &o, &fv)) >= 0) {
        bool ok;
        switch (f) {
        case 0: ok = r_enum(c, fv, "enum Protocol", PROTOCOLS, &s->protocol); break;
        case 1: ok = r_enum(c, fv, "enum LoadBalancing", POLICIES, &s->load_balancing); break;
        case 2: ok = r_opt_dur(c, fv, &s->connect_timeout); break;
        case 3: ok = r_endpoints(c, fv, &s->endpoints); break;
        case 4:
            ok = r_list(c, fv, sizeof(locality_spec_t), r_locality, (void **)&s->localities, &s->nlocalities);
            break;
        case 5:
            s->health_check = fv->type == J_NULL ? NULL : zalloc(sizeof *s->health_check);
            ok = !s->health_check || r_health_check(c, fv, s->health_check);
            break;
        default:
            s->circuit_breakers = fv->type == J_NULL ? NULL : zalloc(sizeof *s->circuit_breakers);
            ok = !s->circuit_breakers || r_circuit_breakers(c, fv, s->circuit_breakers);
        }
        if (!ok) return false;
    }
    return f != JOBJ_ERROR;
}

/* ---------------------------------------------------------------- HttpGateway */

static bool r_headers(jctx_t *c, const jval_t *v, headers_spec_t *h) {
    static const char *const F[] = {"set", "add", "remove", NULL};
    jobj_t o;
    if (!jobj_begin(c, v, "struct HeadersSpec", F, 0x7, &o)) return false;
    const jval_t *fv;
    int f;
    while ((f = jobj_next(c, &o, &fv)) >= 0) {
        bool ok = f == 0   ? r_string_map(c, fv, &h->set, &h->nset)
                  : f == 1 ? r_string_map(c, fv, &h->add, &h->nadd)
                           : r_list(c, fv, sizeof(str_t), r_str, (void **)&h->remove, &h->nremove);
        if (!ok) return false;
    }
    return f != JOBJ_ERROR;
}

static bool r_opt_headers(jctx_t *c, const jval_t *v, headers_spec_t **out) {
    *out = v->type == J_NULL ? NULL : zalloc(sizeof **out);
    return !*out || r_headers(c, v, *out);
}

static bool r_header_match(jctx_t *c, const jval_t *v, void *out) {
    static const char *const F[] = {"name", "exact", "prefix", "regex", "present", "invert", NULL};
    header_match_spec_t *h = out;
    jobj_t o;
    if (!jobj_begin(c, v, "struct HeaderMatchSpec", F, 0x20, &o)) return false;
    const jval_t *fv;
    int f;
    while ((f = jobj_next(c, &o, &fv)) >= 0) {
        bool ok;
        switch (f) {
        case 0: ok = jread_str(c, fv, &h->name); break;
        case 1: ok = r_opt_str(c, fv, &h->exact); break;
        case 2: ok = r_opt_str(c, fv, &h->prefix); break;
        case 3: ok = r_opt_str(c, fv, &h->regex); break;
        case 4:
            h->present_set = fv->type != J_NULL;
            ok = !h->present_set || jread_bool(c, fv, &h->present);
            break;
        default: ok = jread_bool(c, fv, &h->invert);
        }
        if (!ok) return false;
    }
    if (f == JOBJ_ERROR) return false;
    if (!jobj_has(&o, 0)) return jobj_missing(c, &o, 0);
    return true;
}

static bool r_match(jctx_t *c, const jval_t *v, match_spec_t *m) {
    static const char *const F[] = {"pathPrefix", "path", "regex", "headers", NULL};
    jobj_t o;
    if (!jobj_begin(c, v, "struct MatchSpec", F, 0x8, &o)) return false;
    const jval_t *fv;
    int f;
    while ((f = jobj_next(c, &o, &fv)) >= 0) {
        bool ok = f == 0   ? r_opt_str(c, fv, &m->path_prefix)
                  : f == 1 ? r_opt_str(c, fv, &m->path)
                  : f == 2 ? r_opt_str(c, fv, &m->regex)
                           : r_list(c, fv, sizeof(header_match_spec_t), r_header_match,
                                    (void **)&m->headers, &m->nheaders);
        if (!ok) return false;
    }
    return f != JOBJ_ERROR;
}

static bool r_backend(jctx_t *c, const jval_t *v, void *out) {
    static const char *const F[] = {"service", "weight", NULL};
    backend_spec_t *b = out;
    jobj_t o;
    if (!jobj_begin(c, v, "struct BackendSpec", F, 0, &o)) return false;
    const jval_t *fv;
    int f;
    while ((f = jobj_next(c, &o, &fv)) >= 0) {
        bool ok = f == 0 ? jread_str(c, fv, &b->service) : r_opt_u32(c, fv, &b->weight);
        if (!ok) return false;
    }
    if (f == JOBJ_ERROR) return false;
    if (!jobj_has(&o, 0)) return jobj_missing(c, &o, 0);
    return true;
}

static bool r_direct_response(jctx_t *c, const jval_t *v, direct_response_spec_t *d) {
    static const char *const F[] = {"status", "body", NULL};
    jobj_t o;
    if (!jobj_begin(c, v, "struct DirectResponseSpec", F, 0, &o)) return false;
    const jval_t *fv;
    int f;
    while ((f = jobj_next(c, &o, &fv)) >= 0) {
        bool ok = f == 0 ? jread_u16(c, fv, &d->status) : r_opt_str(c, fv, &d->body);
        if (!ok) return false;
    }
    if (f == JOBJ_ERROR) return false;
    if (!jobj_has(&o, 0)) return jobj_missing(c, &o, 0);
    return true;
}

static bool r_retries(jctx_t *c, const jval_t *v, retries_spec_t *r) {
    static const char *const F[] = {"attempts", "on", "perTryTimeout", "statusCodes", NULL};
    jobj_t o;
    if (!jobj_begin(c, v, "struct RetriesSpec", F, 0x8, &o)) return false;
    const jval_t *fv;
    int f;
    while ((f = jobj_next(c, &o, &fv)) >= 0) {
        bool ok = f == 0   ? r_opt_u32(c, fv, &r->attempts)
                  : f == 1 ? r_opt_str(c, fv, &r->on)
                  : f == 2 ? r_opt_dur(c, fv, &r->per_try_timeout)
                           : r_list(c, fv, sizeof(uint16_t), r_u16, (void **)&r->status_codes, &r->nstatus_codes);
        if (!ok) return false;
    }
    return f != JOBJ_ERROR;
}

static bool r_rewrite(jctx_t *c, const jval_t *v, opt_str_t *out) {
    static const char *const F[] = {"pathPrefix", NULL};
    jobj_t o;
    if (!jobj_begin(c, v, "struct RewriteSpec", F, 0, &o)) return false;
    const jval_t *fv;
    int f;
    while ((f = jobj_next(c, &o, &fv)) >= 0)
        if (!jread_str(c, fv, &out->v)) return false;
    if (f == JOBJ_ERROR) return false;
    if (!jobj_has(&o, 0)) return jobj_missing(c, &o, 0);
    out->set = true;
    return true;
}

static bool r_route(jctx_t *c, const jval_t *v, void *out) {
    static const char *const F[] = {"name", "match", "backends", "directResponse", "timeout", "idleTimeout",
                                    "retries", "requestHeaders", "responseHeaders", "rewrite", NULL};
    route_spec_t *r = out;
    jobj_t o;
    if (!jobj_begin(c, v, "struct HttpRouteSpec", F, 0, &o)) return false;
    const jval_t *fv;
    int f;
    while ((f = jobj_next(c, &o, &fv)) >= 0) {
        bool ok, null = fv->type == J_NULL;
        switch (f) {
        case 0: ok = r_opt_str(c, fv, &r->name); break;
        case 1:
            r->match = null ? NULL : zalloc(sizeof *r->match);
            ok = null || r_match(c, fv, r->match);
            break;
        case 2:
            r->has_backends = !null;
            ok = null || r_list(c, fv, sizeof(backend_spec_t), r_backend, (void **)&r->backends, &r->nbackends);
            break;
        case 3:
            r->direct_response = null ? NULL : zalloc(sizeof *r->direct_response);
            ok = null || r_direct_response(c, fv, r->direct_response);
            break;
        case 4: ok = r_opt_dur(c, fv, &r->timeout); break;
        case 5: ok = r_opt_dur(c, fv, &r->idle_timeout); break;
        case 6:
            r->retries = null ? NULL : zalloc(sizeof *r->retries);
            ok = null || r_retries(c, fv, r->retries);
            break;
        case 7: ok = r_opt_headers(c, fv, &r->request_headers); break;
        case 8: ok = r_opt_headers(c, fv, &r->response_headers); break;
        default:
            r->rewrite.set = false;
            ok = null || r_rewrite(c, fv, &r->rewrite);
        }
        if (!ok) return false;
    }
    return f != JOBJ_ERROR;
}

static bool r_host(jctx_t *c, const jval_t *v, void *out) {
    static const char *const F[] = {"name", "hostnames", "routes", "requestHeaders", "responseHeaders", NULL};
    host_spec_t *h = out;
    jobj_t o;
    if (!jobj_begin(c, v, "struct HostSpec", F, 0, &o)) return false;
    const jval_t *fv;
    int f;
    while ((f = jobj_next(c, &o, &fv)) >= 0) {
        bool ok;
        switch (f) {
        case 0: ok = r_opt_str(c, fv, &h->name); break;
        case 1:
            h->has_hostnames = fv->type != J_NULL;
            ok = !h->has_hostnames || r_list(c, fv, sizeof(str_t), r_str, (void **)&h->hostnames, &h->nhostnames);
            break;
        case 2: ok = r_list(c, fv, sizeof(route_spec_t), r_route, (void **)&h->routes, &h->nroutes); break;
        case 3: ok = r_opt_headers(c, fv, &h->request_headers); break;
        default: ok = r_opt_headers(c, fv, &h->response_headers);
        }
        if (!ok) return false;
    }
    if (f == JOBJ_ERROR) return false;
    if (!jobj_has(&o, 2)) return jobj_missing(c, &o, 2);
    return true;
}

static bool r_gateway_spec(jctx_t *c, const jval_t *v, gateway_spec_t *g) {
    static const char *const F[] = {"address", "port", "hosts", NULL};
    jobj_t o;
    if (!jobj_begin(c, v, "struct GatewaySpec", F, 0, &o)) return false;
    const jval_t *fv;
    int f;
    while ((f = jobj_next(c, &o, &fv)) >= 0) {
        bool ok = f == 0   ? r_opt_str(c, fv, &g->address)
                  : f == 1 ? r_port(c, fv, &g->port)
                           : r_list(c, fv, sizeof(host_spec_t), r_host, (void **)&g->hosts, &g->nhosts);
        if (!ok) return false;
    }
    if (f == JOBJ_ERROR) return false;
    for (int k = 1; k < 3; k++)
        if (!jobj_has(&o, k)) return jobj_missing(c, &o, k);
    return true;
}

/* ---------------------------------------------------------------- documents */

/* The document's `spec`, or an empty object when it is absent or null; NULL when the
 * document is not an object (an error at the document). */
static const jval_t *spec_of(jctx_t *c, const jval_t *doc) {
    static jval_t empty = {.type = J_OBJ};
    if (doc->type != J_OBJ) {
        jctx_invalid_type(c, doc, "struct Envelope");
        return NULL;
    }
    const jval_t *spec = NULL;
    for (size_t i = 0; i < doc->n; i++) {
        if (!str_eq(doc->members[i].key, "spec")) continue;
        if (spec) {
            jctx_fail(c, fmt("duplicate field `spec`"));
            return NULL;
        }
        spec = doc->members[i].val;
    }
    jctx_push_field(c, STR("spec"));
    return spec && spec->type != J_NULL ? spec : &empty;
}

bool read_service(jctx_t *c, const jval_t *doc, service_spec_t *out) {
    memset(out, 0, sizeof *out);
    const jval_t *spec = spec_of(c, doc);
    return spec && r_service_spec(c, spec, out);
}

bool read_gateway(jctx_t *c, const jval_t *doc, gateway_spec_t *out) {
    memset(out, 0, sizeof *out);
    const jval_t *spec = spec_of(c, doc);
    return spec && r_gateway_spec(c, spec, out);
}

bool read_config(jctx_t *c, const jval_t *config) {
    static const char *const NONE[] = {NULL};
    if (config->type == J_NULL) return true;
    jobj_t o;
    if (!jobj_begin(c, config, "struct Config", NONE, 0, &o)) return false;
    const jval_t *fv;
    return jobj_next(c, &o, &fv) == JOBJ_END;
}
