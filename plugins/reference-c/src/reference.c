#include "reference.h"

#include <string.h>

const char *const PLUGIN_NAME = "reference-c";
const char *const PLUGIN_VERSION = "0.1.0";
const char *const PLUGIN_KINDS[] = {"Service", "HttpGateway", NULL};

bool doc_error(tctx_t *t, const char *field, const char *message) {
    t->err->message = message;
    t->err->document = t->id;
    t->err->field = field;
    return false;
}

bool at(tctx_t *t, const char *message, const char *field, ...) {
    if (!message) return true;
    va_list ap;
    va_start(ap, field);
    char *path = vfmt(field, ap);
    va_end(ap);
    return doc_error(t, path, message);
}

void doc_warning(tctx_t *t, const char *field, const char *message) {
    response_t *r = t->out;
    if (r->ndiagnostics == r->capdiagnostics) {
        r->capdiagnostics = r->capdiagnostics ? 2 * r->capdiagnostics : 4;
        r->diagnostics = xrealloc(r->diagnostics, r->capdiagnostics * sizeof *r->diagnostics);
    }
    /* The host shows diagnostics as they are: they carry the document's origin. */
    char *text = t->doc->origin.n ? fmt("%s (%S)", message, t->doc->origin) : fmt("%s", message);
    r->diagnostics[r->ndiagnostics++] = (diagnostic_t){str_c(text), str_c(t->id), str_c(field)};
}

void add_resource(tctx_t *t, const char *type_url, str_t name, sb_t *json) {
    response_t *r = t->out;
    if (r->nresources == r->capresources) {
        r->capresources = r->capresources ? 2 * r->capresources : 8;
        r->resources = xrealloc(r->resources, r->capresources * sizeof *r->resources);
    }
    r->resources[r->nresources++] = (resource_t){type_url, name, sb_view(json), str_c(t->id)};
}

bool read_spec(tctx_t *t, bool (*read)(jctx_t *, const jval_t *, void *), void *spec) {
    char *perr = NULL;
    jval_t *doc = json_parse(t->doc->json, &perr);
    if (!doc) return doc_error(t, NULL, perr);
    t->tree = doc;
    jctx_t c = {0};
    if (read(&c, doc, spec)) return true;
    return doc_error(t, c.error_field[0] ? c.error_field : NULL, c.error);
}

/* The plugin takes no configuration yet: `null` or `{}`. */
static bool check_config(str_t config, plugin_error_t *err) {
    config = str_trim(config);
    if (config.n == 0 || str_eq(config, "null")) return true;
    char *perr = NULL;
    jval_t *v = json_parse(config, &perr);
    jctx_t c = {0};
    if (v && read_config(&c, v)) return true;
    err->message = fmt("plugin configuration: %s (the reference plugin takes none)", v ? c.error : perr);
    return false;
}

bool translate_all(str_t config, const document_t *docs, size_t n, response_t *out, plugin_error_t *err) {
    memset(err, 0, sizeof *err);
    if (!check_config(config, err)) return false;
    for (size_t i = 0; i < n; i++) {
        const document_t *d = &docs[i];
        tctx_t t = {d, fmt("%S/%S", d->kind, d->name), out, err, NULL};
        bool ok;
        if (str_eq(d->kind, "Service")) {
            ok = translate_service(&t);
        } else if (str_eq(d->kind, "HttpGateway")) {
            ok = translate_gateway(&t);
        } else {
            ok = doc_error(&t, NULL, fmt("the reference plugin does not translate kind %Q (it translates Service, HttpGateway)", d->kind));
        }
        if (!ok) return false;
        json_free(t.tree); /* what the resources need was copied out of it */
    }
    return true;
}
