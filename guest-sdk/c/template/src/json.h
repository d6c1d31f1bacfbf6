/* A small JSON reader and writer.
 *
 * Reading: json_parse() builds a tree (object members keep their order). The jctx_t
 * helpers read it the way serde does in the Rust reference plugin: typed values, objects
 * whose unknown fields are errors, and every error tagged with its field path
 * (`spec.hosts[0].routes[1].backends`).
 *
 * Writing: jw_t emits JSON text, placing commas itself. */
#ifndef REF_JSON_H
#define REF_JSON_H

#include "util.h"

typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } jtype_t;

/* How a number was written: a non-negative integer that fits u64, a negative integer that
 * fits i64, or anything else (fraction, exponent, out of range): a float, as serde_json. */
typedef enum { JN_UINT, JN_NEG, JN_FLOAT } jnum_t;

typedef struct jval jval_t;
typedef struct {
    str_t key;
    jval_t *val;
} jmember_t;

struct jval {
    jtype_t type;
    bool b;           /* J_BOOL */
    jnum_t num;       /* J_NUM */
    uint64_t u;       /* J_NUM, JN_UINT */
    int64_t i;        /* J_NUM, JN_NEG */
    str_t s;          /* J_STR: the decoded string; J_NUM: the number as written */
    size_t n;         /* J_ARR: items; J_OBJ: members */
    jval_t **items;   /* J_ARR */
    jmember_t *members; /* J_OBJ */
    struct jchunk *chunks; /* the root of a parse: the memory json_free releases */
};

/* Parses UTF-8 JSON text. NULL on error, with *err set to a message. Strings without
 * escapes point into `text`, which must outlive the tree. */
jval_t *json_parse(str_t text, char **err);
/* Releases a tree json_parse returned (all of it at once). */
void json_free(jval_t *root);
/* The first member named `key` of an object, or NULL (also when v is not an object). */
const jval_t *json_get(const jval_t *v, const char *key);

/* ---- reading with field paths ---- */

typedef struct {
    sb_t path;         /* where the reader is: `spec.hosts[0]` */
    char *error;       /* the first error's message; NULL while all is well */
    char *error_field; /* its field path */
} jctx_t;

/* Path segments: push returns a mark to pop back to. */
size_t jctx_push_field(jctx_t *c, str_t key);
size_t jctx_push_index(jctx_t *c, size_t i);
void jctx_pop(jctx_t *c, size_t mark);
/* Records `message` at the current path; returns false, for `return jctx_fail(...)`. */
bool jctx_fail(jctx_t *c, char *message);
/* `invalid type: string "x", expected u32` */
bool jctx_invalid_type(jctx_t *c, const jval_t *v, const char *expected);
/* How serde names an unexpected value: `integer `5``, `string "x"`, `null`, ... */
char *json_unexpected(const jval_t *v);
/* `one of `a`, `b``: serde's list of what was expected. */
void json_one_of(sb_t *b, const char *const *names);

bool jread_str(jctx_t *c, const jval_t *v, str_t *out);
bool jread_bool(jctx_t *c, const jval_t *v, bool *out);
bool jread_u32(jctx_t *c, const jval_t *v, uint32_t *out);
bool jread_u16(jctx_t *c, const jval_t *v, uint16_t *out);
/* Checks that v is an array (`a sequence`). */
bool jread_array(jctx_t *c, const jval_t *v);
/* One of `names` (a NULL-terminated list); *out is its index. `what` names the enum. */
bool jread_enum(jctx_t *c, const jval_t *v, const char *what, const char *const *names, int *out);

/* Walking an object's fields: unknown fields and fields given twice are errors.
 *
 *   jobj_t o;
 *   if (!jobj_begin(c, v, "struct Spec", FIELDS, 0, &o)) return false;
 *   const jval_t *fv;
 *   int f;
 *   while ((f = jobj_next(c, &o, &fv)) >= 0) { ...read fv, return false on error... }
 *   if (f == JOBJ_ERROR) return false;
 *   if (!jobj_has(&o, 0)) return jobj_missing(c, &o, 0);
 *
 * While the loop body runs, the path names the field. Like serde, an array is read as the
 * fields in order (`[address, port]`); `defaults` has a bit set for each field such an
 * array may leave out at its end (fields with a default, as opposed to optional ones). */
#define JOBJ_END (-1)
#define JOBJ_ERROR (-2)
typedef struct {
    const jval_t *obj;
    const char *const *fields; /* NULL-terminated, at most 32 */
    const char *what;
    size_t nfields;
    size_t next;
    uint32_t seen, defaults;
    size_t mark;
    bool in_field, seq;
} jobj_t;
bool jobj_begin(jctx_t *c, const jval_t *v, const char *what, const char *const *fields, uint32_t defaults,
                jobj_t *o);
int jobj_next(jctx_t *c, jobj_t *o, const jval_t **val);
bool jobj_has(const jobj_t *o, int field);
bool jobj_missing(jctx_t *c, const jobj_t *o, int field);

/* ---- writing ---- */

typedef struct {
    sb_t b;
    int depth;
    bool first[64];
    bool after_key;
} jw_t;

void jw_obj(jw_t *w);
void jw_end_obj(jw_t *w);
void jw_arr(jw_t *w);
void jw_end_arr(jw_t *w);
void jw_key(jw_t *w, const char *key);
void jw_str(jw_t *w, str_t s);
void jw_cstr(jw_t *w, const char *s);
void jw_u64(jw_t *w, uint64_t v);
void jw_bool(jw_t *w, bool v);
void jw_null(jw_t *w);
/* `"key": {}` */
void jw_empty_obj(jw_t *w, const char *key);

#endif
