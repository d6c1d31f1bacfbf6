/* `HttpGateway` -> a Listener (RDS over ADS) and its RouteConfiguration, both named after
 * the document (plugins/reference/src/gateway.rs and routing.rs). Each part is checked in
 * the order the Rust reference checks it, and written out as it passes. */
#include <stdlib.h>
#include <string.h>

#include "reference.h"

static const char DEFAULT_RETRY_ON[] = "5xx,connect-failure,reset";

static bool read_any_gateway(jctx_t *c, const jval_t *v, void *out) { return read_gateway(c, v, out); }

static void put_duration(jw_t *w, const char *key, dur_t d) {
    sb_t b = {0};
    sb_duration(&b, d);
    jw_key(w, key);
    jw_str(w, sb_view(&b));
    free(b.p);
}

static void put_ads(jw_t *w) {
    jw_obj(w);
    jw_empty_obj(w, "ads");
    jw_key(w, "resource_api_version");
    jw_cstr(w, "V3");
    jw_end_obj(w);
}

/* ---------------------------------------------------------------- header changes */

/* Checks a headers block (`set`, then `add`, each in name order, then `remove`). */
static bool check_headers(tctx_t *t, const headers_spec_t *h, const char *path) {
    if (!h) return true;
    for (int pass = 0; pass < 2; pass++) {
        const header_kv_t *kv = pass ? h->add : h->set;
        size_t n = pass ? h->nadd : h->nset;
        const char *op = pass ? "add" : "set";
        for (size_t i = 0; i < n; i++) {
            if (!at(t, check_header_name(kv[i].name, true), "%s.%s", path, op)) return false;
            if (!at(t, check_header_value(kv[i].value), "%s.%s.%S", path, op, kv[i].name)) return false;
        }
    }
    for (size_t i = 0; i < h->nremove; i++)
        if (!at(t, check_header_name(h->remove[i], true), "%s.remove[%U]", path, (uint64_t)i)) return false;
    return true;
}

static void put_headers(jw_t *w, const headers_spec_t *h, bool request) {
    if (!h) return;
    if (h->nset || h->nadd) {
        jw_key(w, request ? "request_headers_to_add" : "response_headers_to_add");
        jw_arr(w);
        for (int pass = 0; pass < 2; pass++) {
            const header_kv_t *kv = pass ? h->add : h->set;
            size_t n = pass ? h->nadd : h->nset;
            for (size_t i = 0; i < n; i++) {
                jw_obj(w);
                jw_key(w, "header");
                jw_obj(w);
                jw_key(w, "key");
                jw_str(w, kv[i].name);
                jw_key(w, "value");
                jw_str(w, kv[i].value);
                jw_end_obj(w);
                jw_key(w, "append_action");
                jw_cstr(w, pass ? "APPEND_IF_EXISTS_OR_ADD" : "OVERWRITE_IF_EXISTS_OR_ADD");
                jw_end_obj(w);
            }
        }
        jw_end_arr(w);
    }
    if (h->nremove) {
        jw_key(w, request ? "request_headers_to_remove" : "response_headers_to_remove");
        jw_arr(w);
        for (size_t i = 0; i < h->nremove; i++) jw_str(w, h->remove[i]);
        jw_end_arr(w);
    }
}

/* Checks both blocks of a host or route and writes them out. */
static bool headers(tctx_t *t, jw_t *w, const headers_spec_t *req, const headers_spec_t *resp, const char *path) {
    if (!check_headers(t, req, fmt("%s.requestHeaders", path))) return false;
    if (!check_headers(t, resp, fmt("%s.responseHeaders", path))) return false;
    put_headers(w, req, true);
    put_headers(w, resp, false);
    return true;
}

/* ---------------------------------------------------------------- matches */

static void put_regex(jw_t *w, const char *key, str_t re) {
    jw_key(w, key);
    jw_obj(w);
    jw_key(w, "regex");
    jw_str(w, re);
    jw_end_obj(w);
}

static bool header_match(tctx_t *t, jw_t *w, const header_match_spec_t *h, const char *path) {
    if (!at(t, check_header_name(h->name, false), "%s.name", path)) return false;
    int set = h->exact.set + h->prefix.set + h->regex.set + h->present_set;
    if (set != 1) return doc_error(t, path, "set exactly one of exact, prefix, regex or present");
    bool invert = h->invert;
    jw_obj(w);
    jw_key(w, "name");
    jw_str(w, h->name);
    if (h->exact.set || h->prefix.set || h->regex.set) {
        if (h->exact.set && !at(t, check_header_value(h->exact.v), "%s.exact", path)) return false;
        if (h->prefix.set && !at(t, check_header_value(h->prefix.v), "%s.prefix", path)) return false;
        if (h->regex.set && !at(t, check_regex(h->regex.v), "%s.regex", path)) return false;
        jw_key(w, "string_match");
        jw_obj(w);
        if (h->exact.set) {
            jw_key(w, "exact");
            jw_str(w, h->exact.v);
        } else if (h->prefix.set) {
            jw_key(w, "prefix");
            jw_str(w, h->prefix.v);
        } else {
            put_regex(w, "safe_regex", h->regex.v);
        }
        jw_end_obj(w);
    } else {
        /* `present: false` matches requests without the header. */
        invert ^= !h->present;
        jw_key(w, "present_match");
        jw_bool(w, true);
    }
    if (invert) {
        jw_key(w, "invert_match");
        jw_bool(w, true);
    }
    jw_end_obj(w);
    return true;
}

/* A route's `match` (default: pathPrefix /); *is_regex tells whether it matched a regex. */
static bool route_match(tctx_t *t, jw_t *w, const match_spec_t *m, const char *path, bool *is_regex) {
    static const match_spec_t none = {0};
    if (!m) m = &none;
    if (m->path_prefix.set + m->path.set + m->regex.set > 1)
        return doc_error(t, fmt("%s.match", path), "set one of pathPrefix, path or regex, not several");
    *is_regex = false;
    jw_key(w, "match");
    jw_obj(w);
    if (m->path_prefix.set) {
        if (!at(t, check_path(m->path_prefix.v), "%s.match.pathPrefix", path)) return false;
        jw_key(w, "prefix");
        jw_str(w, m->path_prefix.v);
    } else if (m->path.set) {
        if (!at(t, check_path(m->path.v), "%s.match.path", path)) return false;
        jw_key(w, "path");
        jw_str(w, m->path.v);
    } else if (m->regex.set) {
        if (!at(t, check_regex(m->regex.v), "%s.match.regex", path)) return false;
        put_regex(w, "safe_regex", m->regex.v);
        *is_regex = true;
    } else {
        jw_key(w, "prefix");
        jw_cstr(w, "/");
    }
    if (m->nheaders) {
        jw_key(w, "headers");
        jw_arr(w);
        for (size_t i = 0; i < m->nheaders; i++)
            if (!header_match(t, w, &m->headers[i], fmt("%s.match.headers[%U]", path, (uint64_t)i))) return false;
        jw_end_arr(w);
    }
    jw_end_obj(w);
    return true;
}

/* ---------------------------------------------------------------- destinations */

/* Not empty, valid service names listed once, weights at least 1. `path` names the list. */
static bool check_backends(tctx_t *t, const backend_spec_t *b, size_t n, const char *path) {
    if (n == 0) return doc_error(t, path, "list at least one backend service");
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (!at(t, check_name(b[i].service), "%s[%U].service", path, (uint64_t)i)) return false;
        for (size_t k = 0; n > 1 && k < i; k++)
            if (str_same(b[k].service, b[i].service))
                return doc_error(t, fmt("%s[%U].service", path, (uint64_t)i), fmt("%Q is listed twice", b[i].service));
        uint32_t weight = b[i].weight.set ? b[i].weight.v : 1;
        if (!at(t, check_weight(weight), "%s[%U].weight", path, (uint64_t)i)) return false;
        total += weight;
    }
    if (total > UINT32_MAX) return doc_error(t, path, "the weights add up to more than 4294967295");
    return true;
}

/* One backend is a plain cluster, several a weighted split. */
static void put_backends(jw_t *w, const backend_spec_t *b, size_t n) {
    if (n == 1) {
        jw_key(w, "cluster");
        jw_str(w, b[0].service);
        return;
    }
    jw_key(w, "weighted_clusters");
    jw_obj(w);
    jw_key(w, "clusters");
    jw_arr(w);
    for (size_t i = 0; i < n; i++) {
        jw_obj(w);
        jw_key(w, "name");
        jw_str(w, b[i].service);
        jw_key(w, "weight");
        jw_u64(w, b[i].weight.set ? b[i].weight.v : 1);
        jw_end_obj(w);
    }
    jw_end_arr(w);
    jw_end_obj(w);
}

static bool retry_policy(tctx_t *t, jw_t *w, const retries_spec_t *r, const char *path) {
    uint32_t attempts = r->attempts.set ? r->attempts.v : 1;
    if (attempts == 0) return doc_error(t, fmt("%s.attempts", path), "must be at least 1 (leave retries out for none)");
    str_t on;
    if (!at(t, check_retry_on(r->on.set ? r->on.v : STR(DEFAULT_RETRY_ON), HTTP_RETRY_ON, &on), "%s.on", path))
        return false;
    for (size_t i = 0; i < r->nstatus_codes; i++)
        if (r->status_codes[i] < 100 || r->status_codes[i] > 599)
            return doc_error(t, fmt("%s.statusCodes[%U]", path, (uint64_t)i), "must be an HTTP status between 100 and 599");
    if (r->nstatus_codes) {
        bool listed = false;
        for (size_t a = 0, i = 0; i <= on.n; i++) {
            if (i < on.n && on.p[i] != ',') continue;
            if (str_eq((str_t){on.p + a, i - a}, "retriable-status-codes")) listed = true;
            a = i + 1;
        }
        if (!listed) on = str_c(fmt("%S,retriable-status-codes", on));
    }
    if (r->per_try_timeout.set && !at(t, check_positive(r->per_try_timeout.v), "%s.perTryTimeout", path))
        return false;
    jw_key(w, "retry_policy");
    jw_obj(w);
    jw_key(w, "retry_on");
    jw_str(w, on);
    jw_key(w, "num_retries");
    jw_u64(w, attempts);
    if (r->per_try_timeout.set) put_duration(w, "per_try_timeout", r->per_try_timeout.v);
    if (r->nstatus_codes) {
        jw_key(w, "retriable_status_codes");
        jw_arr(w);
        for (size_t i = 0; i < r->nstatus_codes; i++) jw_u64(w, r->status_codes[i]);
        jw_end_arr(w);
    }
    jw_end_obj(w);
    return true;
}

static bool http_route(tctx_t *t, jw_t *w, const route_spec_t *r, const char *path) {
    jw_obj(w);
    bool is_regex;
    if (!route_match(t, w, r->match, path, &is_regex)) return false;
    if (r->name.set) {
        jw_key(w, "name");
        jw_str(w, r->name.v);
    }
    if (r->has_backends && r->direct_response)
        return doc_error(t, fmt("%s.directResponse", path), "set backends or directResponse, not both");
    if (!r->has_backends && !r->direct_response)
        return doc_error(t, fmt("%s.backends", path), "missing: the services to send requests to (or a directResponse)");
    if (r->direct_response) {
        const direct_response_spec_t *d = r->direct_response;
        if (d->status < 200 || d->status > 599)
            return doc_error(t, fmt("%s.directResponse.status", path), "must be an HTTP status between 200 and 599");
        if (r->timeout.set || r->idle_timeout.set || r->retries || r->rewrite.set)
            return doc_error(t, fmt("%s.directResponse", path),
                             "timeout, idleTimeout, retries and rewrite apply to backends, not to a directResponse");
        jw_key(w, "direct_response");
        jw_obj(w);
        jw_key(w, "status");
        jw_u64(w, d->status);
        if (d->body.set) {
            jw_key(w, "body");
            jw_obj(w);
            jw_key(w, "inline_string");
            jw_str(w, d->body.v);
            jw_end_obj(w);
        }
        jw_end_obj(w);
    } else {
        if (!check_backends(t, r->backends, r->nbackends, fmt("%s.backends", path))) return false;
        jw_key(w, "route");
        jw_obj(w);
        put_backends(w, r->backends, r->nbackends);
        if (r->timeout.set) put_duration(w, "timeout", r->timeout.v);
        if (r->idle_timeout.set) put_duration(w, "idle_timeout", r->idle_timeout.v);
        if (r->retries && !retry_policy(t, w, r->retries, fmt("%s.retries", path))) return false;
        if (r->rewrite.set) {
            if (is_regex)
                return doc_error(t, fmt("%s.rewrite.pathPrefix", path), "needs a pathPrefix or path match, not a regex");
            if (!at(t, check_path(r->rewrite.v), "%s.rewrite.pathPrefix", path)) return false;
            jw_key(w, "prefix_rewrite");
            jw_str(w, r->rewrite.v);
        }
        jw_end_obj(w);
    }
    if (!headers(t, w, r->request_headers, r->response_headers, path)) return false;
    jw_end_obj(w);
    return true;
}

/* ---------------------------------------------------------------- the gateway */

static bool listed(const str_t *list, size_t n, str_t s) {
    for (size_t i = 0; i < n; i++)
        if (str_same(list[i], s)) return true;
    return false;
}

static str_t ascii_lower(str_t s) {
    char *p = xmalloc(s.n + 1);
    for (size_t i = 0; i < s.n; i++) p[i] = (char)(s.p[i] >= 'A' && s.p[i] <= 'Z' ? s.p[i] + 32 : s.p[i]);
    return (str_t){p, s.n};
}

static void put_listener(jw_t *w, str_t name, str_t address, uint16_t port) {
    jw_obj(w);
    jw_key(w, "name");
    jw_str(w, name);
    jw_key(w, "address");
    jw_obj(w);
    jw_key(w, "socket_address");
    jw_obj(w);
    jw_key(w, "address");
    jw_str(w, address);
    jw_key(w, "port_value");
    jw_u64(w, port);
    jw_end_obj(w);
    jw_end_obj(w);
    jw_key(w, "filter_chains");
    jw_arr(w);
    jw_obj(w);
    jw_key(w, "filters");
    jw_arr(w);
    jw_obj(w);
    jw_key(w, "name");
    jw_cstr(w, "envoy.filters.network.http_connection_manager");
    jw_key(w, "typed_config");
    jw_obj(w);
    jw_key(w, "@type");
    jw_cstr(w, "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager");
    jw_key(w, "stat_prefix");
    jw_str(w, name);
    jw_key(w, "rds");
    jw_obj(w);
    jw_key(w, "config_source");
    put_ads(w);
    jw_key(w, "route_config_name");
    jw_str(w, name);
    jw_end_obj(w);
    jw_key(w, "http_filters");
    jw_arr(w);
    jw_obj(w);
    jw_key(w, "name");
    jw_cstr(w, "envoy.filters.http.router");
    jw_key(w, "typed_config");
    jw_obj(w);
    jw_key(w, "@type");
    jw_cstr(w, "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router");
    jw_end_obj(w);
    jw_end_obj(w);
    jw_end_arr(w);
    jw_end_obj(w); /* HttpConnectionManager */
    jw_end_obj(w); /* filter */
    jw_end_arr(w);
    jw_end_obj(w); /* filter chain */
    jw_end_arr(w);
    jw_end_obj(w);
}

bool translate_gateway(tctx_t *t) {
    gateway_spec_t g;
    if (!read_spec(t, read_any_gateway, &g)) return false;
    str_t address = g.address.set ? g.address.v : STR("0.0.0.0");
    uint8_t ip[17];
    if (!at(t, check_ip(address, ip), "spec.address")) return false;
    if (g.nhosts == 0) return doc_error(t, "spec.hosts", "list at least one host");

    str_t name = t->doc->name;
    jw_t rc = {0};
    jw_obj(&rc);
    jw_key(&rc, "name");
    jw_str(&rc, name);
    jw_key(&rc, "virtual_hosts");
    jw_arr(&rc);

    size_t ndomains = 0, nnames = 0;
    for (size_t h = 0; h < g.nhosts; h++) ndomains += g.hosts[h].has_hostnames ? g.hosts[h].nhostnames : 1;
    str_t *domains = xmalloc((ndomains + 1) * sizeof *domains), *names = xmalloc(g.nhosts * sizeof *names);
    ndomains = 0;
    for (size_t h = 0; h < g.nhosts; h++) {
        const host_spec_t *host = &g.hosts[h];
        char *path = fmt("spec.hosts[%U]", (uint64_t)h);
        static const str_t any = {"*", 1};
        const str_t *hostnames = host->has_hostnames ? host->hostnames : &any;
        size_t nhostnames = host->has_hostnames ? host->nhostnames : 1;
        if (nhostnames == 0)
            return doc_error(t, fmt("%s.hostnames", path), "list at least one hostname (or leave hostnames out to match any)");
        for (size_t i = 0; i < nhostnames; i++) {
            if (!at(t, check_domain(hostnames[i]), "%s.hostnames[%U]", path, (uint64_t)i)) return false;
            str_t lower = ascii_lower(hostnames[i]);
            if (listed(domains, ndomains, lower))
                return doc_error(t, fmt("%s.hostnames[%U]", path, (uint64_t)i),
                                 fmt("%Q is listed more than once in this gateway", hostnames[i]));
            domains[ndomains++] = lower;
        }
        str_t vname = hostnames[0];
        if (host->name.set) {
            if (!at(t, check_name(host->name.v), "%s.name", path)) return false;
            vname = host->name.v;
        }
        if (listed(names, nnames, vname))
            return doc_error(t, fmt("%s.name", path), fmt("another host is already named %Q", vname));
        names[nnames++] = vname;
        if (host->nroutes == 0) return doc_error(t, fmt("%s.routes", path), "list at least one route");

        jw_obj(&rc);
        jw_key(&rc, "name");
        jw_str(&rc, vname);
        jw_key(&rc, "domains");
        jw_arr(&rc);
        for (size_t i = 0; i < nhostnames; i++) jw_str(&rc, hostnames[i]);
        jw_end_arr(&rc);
        if (!headers(t, &rc, host->request_headers, host->response_headers, path)) return false;
        jw_key(&rc, "routes");
        jw_arr(&rc);
        for (size_t r = 0; r < host->nroutes; r++)
            if (!http_route(t, &rc, &host->routes[r], fmt("%s.routes[%U]", path, (uint64_t)r))) return false;
        jw_end_arr(&rc);
        jw_end_obj(&rc);
    }
    jw_end_arr(&rc);
    jw_end_obj(&rc);

    jw_t listener = {0};
    put_listener(&listener, name, address, g.port);
    add_resource(t, "type.googleapis.com/envoy.config.listener.v3.Listener", name, &listener.b);
    add_resource(t, "type.googleapis.com/envoy.config.route.v3.RouteConfiguration", name, &rc.b);
    return true;
}
