/* The intent schema: what `spec` holds for each kind (plugins/reference/README.md
 * documents it; plugins/reference/src/schema.rs is the original). Field names are
 * camelCase; unknown fields are errors. Optional values have a `set` flag; optional
 * blocks are pointers (NULL when absent or null). */
#ifndef REF_SCHEMA_H
#define REF_SCHEMA_H

#include "check.h"
#include "json.h"

typedef struct {
    bool set;
    uint32_t v;
} opt_u32_t;

typedef struct {
    bool set;
    str_t v;
} opt_str_t;

typedef struct {
    bool set;
    dur_t v;
} opt_dur_t;

/* ---- Service ---- */

enum { PROTO_HTTP1, PROTO_HTTP2, PROTO_GRPC };
enum { LB_ROUND_ROBIN, LB_LEAST_REQUEST, LB_RANDOM, LB_RING_HASH, LB_MAGLEV };

typedef struct {
    str_t address;
    uint16_t port;
    opt_u32_t weight;
} endpoint_spec_t;

typedef struct {
    endpoint_spec_t *v;
    size_t n;
} endpoints_t;

typedef struct {
    str_t region, zone, sub_zone;
    opt_u32_t weight;
    uint32_t priority;
    endpoints_t endpoints;
} locality_spec_t;

typedef struct {
    opt_str_t path, host;
    bool grpc; /* grpc: {...} given */
    str_t grpc_service_name;
    opt_dur_t interval, timeout;
    opt_u32_t healthy_threshold, unhealthy_threshold;
} health_check_spec_t;

typedef struct {
    opt_u32_t max_connections, max_pending_requests, max_requests, max_retries;
} circuit_breakers_spec_t;

typedef struct {
    int protocol, load_balancing;
    opt_dur_t connect_timeout;
    endpoints_t endpoints;
    locality_spec_t *localities;
    size_t nlocalities;
    health_check_spec_t *health_check;
    circuit_breakers_spec_t *circuit_breakers;
} service_spec_t;

/* ---- HttpGateway ---- */

typedef struct {
    str_t name, value;
} header_kv_t;

typedef struct {
    header_kv_t *set, *add; /* in name order */
    size_t nset, nadd;
    str_t *remove;
    size_t nremove;
} headers_spec_t;

typedef struct {
    str_t name;
    opt_str_t exact, prefix, regex;
    bool present_set, present;
    bool invert;
} header_match_spec_t;

typedef struct {
    opt_str_t path_prefix, path, regex;
    header_match_spec_t *headers;
    size_t nheaders;
} match_spec_t;

typedef struct {
    str_t service;
    opt_u32_t weight;
} backend_spec_t;

typedef struct {
    uint16_t status;
    opt_str_t body;
} direct_response_spec_t;

typedef struct {
    opt_u32_t attempts;
    opt_str_t on;
    opt_dur_t per_try_timeout;
    uint16_t *status_codes;
    size_t nstatus_codes;
} retries_spec_t;

typedef struct {
    opt_str_t name;
    match_spec_t *match;
    bool has_backends;
    backend_spec_t *backends;
    size_t nbackends;
    direct_response_spec_t *direct_response;
    opt_dur_t timeout, idle_timeout;
    retries_spec_t *retries;
    headers_spec_t *request_headers, *response_headers;
    opt_str_t rewrite; /* rewrite.pathPrefix */
} route_spec_t;

typedef struct {
    opt_str_t name;
    bool has_hostnames;
    str_t *hostnames;
    size_t nhostnames;
    route_spec_t *routes;
    size_t nroutes;
    headers_spec_t *request_headers, *response_headers;
} host_spec_t;

typedef struct {
    opt_str_t address;
    uint16_t port;
    host_spec_t *hosts;
    size_t nhosts;
} gateway_spec_t;

/* Reads a document's `spec` (absent or null reads as `{}`). On error, c->error and
 * c->error_field say what and where (an empty field: the document as a whole). */
bool read_service(jctx_t *c, const jval_t *doc, service_spec_t *out);
bool read_gateway(jctx_t *c, const jval_t *doc, gateway_spec_t *out);
/* The plugin's configuration: none, so `null` or `{}`. */
bool read_config(jctx_t *c, const jval_t *config);

#endif
