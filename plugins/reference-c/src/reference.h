/* The reference translator, independent of the bindings: documents in, Envoy resources
 * (canonical proto3 JSON) or one error out. main.c adapts it to the WIT world. */
#ifndef REF_REFERENCE_H
#define REF_REFERENCE_H

#include "schema.h"

typedef struct {
    str_t kind, name, origin, json;
} document_t;

typedef struct {
    const char *type_url;
    str_t name, json, document;
} resource_t;

typedef struct {
    str_t message, document, field;
} diagnostic_t;

typedef struct {
    resource_t *resources;
    size_t nresources, capresources;
    diagnostic_t *diagnostics;
    size_t ndiagnostics, capdiagnostics;
} response_t;

/* A plugin error; document and field may be NULL. */
typedef struct {
    const char *message, *document, *field;
} plugin_error_t;

/* What a document's translation needs: the document, where errors and warnings go. */
typedef struct {
    const document_t *doc;
    char *id; /* Kind/name */
    response_t *out;
    plugin_error_t *err;
    jval_t *tree; /* the parsed document, released after its translation */
} tctx_t;

/* Fails the translation with `message` about `field` (NULL: the whole document);
 * returns false. */
bool doc_error(tctx_t *t, const char *field, const char *message);
/* Attaches a check's verdict to a field: true when `message` is NULL. The field is
 * formatted (as fmt does) only on failure. */
bool at(tctx_t *t, const char *message, const char *field, ...);
void doc_warning(tctx_t *t, const char *field, const char *message);
void add_resource(tctx_t *t, const char *type_url, str_t name, sb_t *json);
/* Reads a document's JSON into a spec with the reader given; errors go to t. */
bool read_spec(tctx_t *t, bool (*read)(jctx_t *, const jval_t *, void *), void *spec);

bool translate_service(tctx_t *t);
bool translate_gateway(tctx_t *t);

/* The plugin's name, version and kinds. */
extern const char *const PLUGIN_NAME, *const PLUGIN_VERSION;
extern const char *const PLUGIN_KINDS[];

/* Translates every document in order; false with *err set on the first failure. */
bool translate_all(str_t config, const document_t *docs, size_t n, response_t *out, plugin_error_t *err);

#endif
