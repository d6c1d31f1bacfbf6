/* The plugin's exports: `describe` and `translate` of the WIT world `plugin`
 * (proto/wit/xdst-plugin-0.1.0/plugin.wit), through the bindings `wit-bindgen c`
 * generates (plugin.h). The translator itself is in reference.c.
 *
 * Ownership: the generated post-return functions free() every string and list this
 * returns, so each is malloc'd for that purpose alone (never a literal or a pointer into
 * the request). The request itself is left alone: the instance is dropped after the call. */
#include <stdlib.h>

#include "plugin.h"
#include "reference.h"

static void set_str(plugin_string_t *out, str_t s) { plugin_string_dup_n(out, s.p, s.n); }

static void set_opt(plugin_option_string_t *out, const char *s) {
    out->is_some = s != NULL;
    if (s) plugin_string_dup(&out->val, s);
}

static str_t view(const plugin_string_t *s) { return (str_t){(const char *)s->ptr, s->len}; }

void exports_plugin_describe(plugin_plugin_info_t *ret) {
    size_t n = 0;
    while (PLUGIN_KINDS[n]) n++;
    plugin_string_dup(&ret->name, PLUGIN_NAME);
    plugin_string_dup(&ret->version, PLUGIN_VERSION);
    ret->kinds.ptr = xmalloc(n * sizeof *ret->kinds.ptr);
    ret->kinds.len = n;
    for (size_t i = 0; i < n; i++) plugin_string_dup(&ret->kinds.ptr[i], PLUGIN_KINDS[i]);
    ret->phase = XDST_PLUGIN_TYPES_PHASE_TRANSLATE;
    ret->granularity = XDST_PLUGIN_TYPES_GRANULARITY_PER_DOCUMENT;
}

bool exports_plugin_translate(plugin_translate_request_t *request, plugin_translate_response_t *ret,
                              plugin_plugin_error_t *err) {
    size_t n = request->documents.len;
    document_t *docs = xmalloc((n ? n : 1) * sizeof *docs);
    for (size_t i = 0; i < n; i++) {
        const xdst_plugin_types_intent_document_t *d = &request->documents.ptr[i];
        docs[i] = (document_t){view(&d->kind), view(&d->name), view(&d->origin), view(&d->json)};
    }
    response_t out = {0};
    plugin_error_t e;
    if (!translate_all(view(&request->config), docs, n, &out, &e)) {
        plugin_string_dup(&err->message, e.message);
        set_opt(&err->document, e.document);
        set_opt(&err->field, e.field);
        return false;
    }

    ret->resources.len = out.nresources;
    ret->resources.ptr = xmalloc((out.nresources ? out.nresources : 1) * sizeof *ret->resources.ptr);
    for (size_t i = 0; i < out.nresources; i++) {
        const resource_t *r = &out.resources[i];
        xdst_plugin_types_xds_resource_t *x = &ret->resources.ptr[i];
        plugin_string_dup(&x->type_url, r->type_url);
        set_str(&x->name, r->name);
        x->body.tag = XDST_PLUGIN_TYPES_BODY_JSON;
        /* The body's buffer was malloc'd for it alone: handed over, not copied. */
        x->body.val.json = (plugin_string_t){(uint8_t *)r->json.p, r->json.n};
        x->document.is_some = true;
        set_str(&x->document.val, r->document);
    }
    ret->diagnostics.len = out.ndiagnostics;
    ret->diagnostics.ptr = xmalloc((out.ndiagnostics ? out.ndiagnostics : 1) * sizeof *ret->diagnostics.ptr);
    for (size_t i = 0; i < out.ndiagnostics; i++) {
        const diagnostic_t *d = &out.diagnostics[i];
        xdst_plugin_types_diagnostic_t *x = &ret->diagnostics.ptr[i];
        x->severity = XDST_PLUGIN_TYPES_SEVERITY_WARNING;
        set_str(&x->message, d->message);
        x->document.is_some = true;
        set_str(&x->document.val, d->document);
        x->field.is_some = true;
        set_str(&x->field.val, d->field);
    }
    return true;
}
