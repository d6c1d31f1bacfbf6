#include "json.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- parsing */

/* A parse allocates from chunks that json_free releases together. */
struct jchunk {
    struct jchunk *next;
    size_t used, cap;
    _Alignas(8) char data[];
};

typedef struct {
    const char *start, *p, *end;
    char *err;
    int depth;
    struct jchunk *chunks;
} parser_t;

static void *arena_alloc(parser_t *ps, size_t n) {
    n = (n + 7) & ~(size_t)7;
    struct jchunk *c = ps->chunks;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > 32768 ? n : 32768;
        c = xmalloc(sizeof *c + cap);
        c->next = ps->chunks;
        c->used = 0;
        c->cap = cap;
        ps->chunks = c;
    }
    void *p = c->data + c->used;
    c->used += n;
    return p;
}

static jval_t *new_val(parser_t *ps, jtype_t t) {
    jval_t *v = arena_alloc(ps, sizeof *v);
    memset(v, 0, sizeof *v);
    v->type = t;
    return v;
}

void json_free(jval_t *root) {
    if (!root) return;
    for (struct jchunk *c = root->chunks, *next; c; c = next) {
        next = c->next;
        free(c);
    }
}

static void skip_ws(parser_t *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static jval_t *fail(parser_t *ps, const char *what) {
    if (!ps->err) ps->err = fmt("%s at byte %U", what, (uint64_t)(ps->p - ps->start));
    return NULL;
}

static jval_t *parse_value(parser_t *ps);

static int hex4(const char *p) {
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= c - '0';
        else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
        else return -1;
    }
    return v;
}

static void put_utf8(sb_t *b, uint32_t c) {
    if (c < 0x80) {
        sb_putc(b, (char)c);
    } else if (c < 0x800) {
        sb_putc(b, (char)(0xC0 | (c >> 6)));
        sb_putc(b, (char)(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
        sb_putc(b, (char)(0xE0 | (c >> 12)));
        sb_putc(b, (char)(0x80 | ((c >> 6) & 0x3F)));
        sb_putc(b, (char)(0x80 | (c & 0x3F)));
    } else {
        sb_putc(b, (char)(0xF0 | (c >> 18)));
        sb_putc(b, (char)(0x80 | ((c >> 12) & 0x3F)));
        sb_putc(b, (char)(0x80 | ((c >> 6) & 0x3F)));
        sb_putc(b, (char)(0x80 | (c & 0x3F)));
    }
}

/* At the opening quote; returns false on error. */
static bool parse_string(parser_t *ps, str_t *out) {
    ps->p++;
    const char *start = ps->p;
    /* Fast path: no escapes, the string points into the input. */
    while (ps->p < ps->end && *ps->p != '"' && *ps->p != '\\' && (unsigned char)*ps->p >= 0x20) ps->p++;
    if (ps->p < ps->end && *ps->p == '"') {
        *out = (str_t){start, (size_t)(ps->p - start)};
        ps->p++;
        return true;
    }
    sb_t b = {0};
    sb_putn(&b, start, (size_t)(ps->p - start));
    while (ps->p < ps->end) {
        unsigned char c = (unsigned char)*ps->p;
        if (c == '"') {
            ps->p++;
            char *copy = arena_alloc(ps, b.n + 1);
            memcpy(copy, b.p, b.n);
            copy[b.n] = 0;
            free(b.p);
            *out = (str_t){copy, b.n};
            return true;
        }
        if (c < 0x20) return fail(ps, "control character in string"), false;
        if (c != '\\') {
            sb_putc(&b, (char)c);
            ps->p++;
            continue;
        }
        if (ps->end - ps->p < 2) break;
        char e = ps->p[1];
        ps->p += 2;
        switch (e) {
        case '"': sb_putc(&b, '"'); break;
        case '\\': sb_putc(&b, '\\'); break;
        case '/': sb_putc(&b, '/'); break;
        case 'b': sb_putc(&b, '\b'); break;
        case 'f': sb_putc(&b, '\f'); break;
        case 'n': sb_putc(&b, '\n'); break;
        case 'r': sb_putc(&b, '\r'); break;
        case 't': sb_putc(&b, '\t'); break;
        case 'u': {
            if (ps->end - ps->p < 4) return fail(ps, "truncated \\u escape"), false;
            int hi = hex4(ps->p);
            if (hi < 0) return fail(ps, "invalid \\u escape"), false;
            ps->p += 4;
            uint32_t cp = (uint32_t)hi;
            if (hi >= 0xD800 && hi < 0xDC00) {
                if (ps->end - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u')
                    return fail(ps, "lone leading surrogate in hex escape"), false;
                int lo = hex4(ps->p + 2);
                if (lo < 0xDC00 || lo >= 0xE000)
                    return fail(ps, "lone leading surrogate in hex escape"), false;
                ps->p += 6;
                cp = 0x10000 + (((uint32_t)hi - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
            } else if (hi >= 0xDC00 && hi < 0xE000) {
                return fail(ps, "lone trailing surrogate in hex escape"), false;
            }
            put_utf8(&b, cp);
            break;
        }
        default: return fail(ps, "invalid escape"), false;
        }
    }
    return fail(ps, "EOF while parsing a string"), false;
}

static jval_t *parse_number(parser_t *ps) {
    const char *start = ps->p;
    bool neg = false, integral = true;
    if (*ps->p == '-') {
        neg = true;
        ps->p++;
    }
    if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') return fail(ps, "invalid number");
    uint64_t mag = 0;
    bool overflow = false;
    if (*ps->p == '0') {
        ps->p++;
    } else {
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
            unsigned d = (unsigned)(*ps->p - '0');
            if (mag > (UINT64_MAX - d) / 10) overflow = true;
            else mag = mag * 10 + d;
            ps->p++;
        }
    }
    if (ps->p < ps->end && *ps->p == '.') {
        integral = false;
        ps->p++;
        if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') return fail(ps, "invalid number");
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') ps->p++;
    }
    if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
        integral = false;
        ps->p++;
        if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-')) ps->p++;
        if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') return fail(ps, "invalid number");
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') ps->p++;
    }
    jval_t *v = new_val(ps, J_NUM);
    v->s = (str_t){start, (size_t)(ps->p - start)};
    if (!integral || overflow) {
        v->num = JN_FLOAT;
    } else if (!neg) {
        v->num = JN_UINT;
        v->u = mag;
    } else if (mag == 0 || mag > (uint64_t)INT64_MAX + 1) {
        v->num = JN_FLOAT; /* serde_json reads -0 and integers below i64 as floats */
    } else {
        v->num = JN_NEG;
        v->i = (int64_t)(0 - mag);
    }
    return v;
}

static bool literal(parser_t *ps, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0) return false;
    ps->p += n;
    return true;
}

static jval_t *parse_container(parser_t *ps, bool object) {
    if (++ps->depth > 128) return fail(ps, "recursion limit exceeded");
    ps->p++;
    jval_t *v = new_val(ps, object ? J_OBJ : J_ARR);
    size_t cap = 0;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == (object ? '}' : ']')) {
        ps->p++;
        ps->depth--;
        return v;
    }
    for (;;) {
        skip_ws(ps);
        str_t key = {0};
        if (object) {
            if (ps->p >= ps->end || *ps->p != '"') return fail(ps, "key must be a string");
            if (!parse_string(ps, &key)) return NULL;
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') return fail(ps, "expected `:`");
            ps->p++;
        }
        jval_t *item = parse_value(ps);
        if (!item) return NULL;
        if (v->n == cap) {
            cap = cap ? cap * 2 : 4;
            size_t size = object ? sizeof *v->members : sizeof *v->items;
            void *grown = arena_alloc(ps, cap * size);
            if (v->n) memcpy(grown, object ? (void *)v->members : (void *)v->items, v->n * size);
            if (object) v->members = grown;
            else v->items = grown;
        }
        if (object) v->members[v->n++] = (jmember_t){key, item};
        else v->items[v->n++] = item;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == (object ? '}' : ']')) {
            ps->p++;
            ps->depth--;
            return v;
        }
        return fail(ps, object ? "expected `,` or `}`" : "expected `,` or `]`");
    }
}

static jval_t *parse_value(parser_t *ps) {
    skip_ws(ps);
    if (ps->p >= ps->end) return fail(ps, "EOF while parsing a value");
    switch (*ps->p) {
    case '{': return parse_container(ps, true);
    case '[': return parse_container(ps, false);
    case '"': {
        jval_t *v = new_val(ps, J_STR);
        return parse_string(ps, &v->s) ? v : NULL;
    }
    case 't':
    case 'f': {
        jval_t *v = new_val(ps, J_BOOL);
        if (literal(ps, "true")) v->b = true;
        else if (!literal(ps, "false")) return fail(ps, "expected value");
        return v;
    }
    case 'n':
        if (!literal(ps, "null")) return fail(ps, "expected value");
        return new_val(ps, J_NULL);
    default:
        if (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9')) return parse_number(ps);
        return fail(ps, "expected value");
    }
}

jval_t *json_parse(str_t text, char **err) {
    parser_t ps = {text.p, text.p, text.p + text.n, NULL, 0, NULL};
    jval_t *v = parse_value(&ps);
    if (v) {
        skip_ws(&ps);
        if (ps.p != ps.end) v = fail(&ps, "trailing characters");
    }
    if (!v) {
        if (err) *err = ps.err;
        for (struct jchunk *c = ps.chunks, *next; c; c = next) {
            next = c->next;
            free(c);
        }
        return NULL;
    }
    v->chunks = ps.chunks;
    return v;
}

const jval_t *json_get(const jval_t *v, const char *key) {
    if (!v || v->type != J_OBJ) return NULL;
    for (size_t i = 0; i < v->n; i++)
        if (str_eq(v->members[i].key, key)) return v->members[i].val;
    return NULL;
}

/* ---------------------------------------------------------------- reading */

size_t jctx_push_field(jctx_t *c, str_t key) {
    size_t mark = c->path.n;
    if (c->path.n) sb_putc(&c->path, '.');
    sb_str(&c->path, key);
    return mark;
}

size_t jctx_push_index(jctx_t *c, size_t i) {
    size_t mark = c->path.n;
    sb_putc(&c->path, '[');
    sb_u64(&c->path, i);
    sb_putc(&c->path, ']');
    return mark;
}

void jctx_pop(jctx_t *c, size_t mark) { c->path.n = mark; }

bool jctx_fail(jctx_t *c, char *message) {
    if (!c->error) {
        c->error = message;
        c->error_field = str_dup(sb_view(&c->path));
    }
    return false;
}

char *json_unexpected(const jval_t *v) {
    switch (v->type) {
    case J_NULL: return fmt("null");
    case J_BOOL: return fmt("boolean `%s`", v->b ? "true" : "false");
    case J_NUM:
        if (v->num == JN_FLOAT) {
            /* serde shows floats with a decimal point */
            bool dot = false;
            for (size_t i = 0; i < v->s.n; i++)
                if (v->s.p[i] == '.' || v->s.p[i] == 'e' || v->s.p[i] == 'E') dot = true;
            return fmt(dot ? "floating point `%S`" : "floating point `%S.0`", v->s);
        }
        return fmt("integer `%S`", v->s);
    case J_STR: return fmt("string %Q", v->s);
    case J_ARR: return fmt("sequence");
    case J_OBJ: return fmt("map");
    }
    return fmt("value");
}

bool jctx_invalid_type(jctx_t *c, const jval_t *v, const char *expected) {
    return jctx_fail(c, fmt("invalid type: %s, expected %s", json_unexpected(v), expected));
}

void json_one_of(sb_t *b, const char *const *names) {
    size_t n = 0;
    while (names[n]) n++;
    if (n == 1) {
        sb_puts(b, "`");
        sb_puts(b, names[0]);
        sb_puts(b, "`");
        return;
    }
    if (n == 2) {
        sb_puts(b, "`");
        sb_puts(b, names[0]);
        sb_puts(b, "` or `");
        sb_puts(b, names[1]);
        sb_puts(b, "`");
        return;
    }
    sb_puts(b, "one of ");
    for (size_t i = 0; i < n; i++) {
        if (i) sb_puts(b, ", ");
        sb_puts(b, "`");
        sb_puts(b, names[i]);
        sb_puts(b, "`");
    }
}

bool jread_str(jctx_t *c, const jval_t *v, str_t *out) {
    if (v->type != J_STR) return jctx_invalid_type(c, v, "a string");
    *out = v->s;
    return true;
}

bool jread_bool(jctx_t *c, const jval_t *v, bool *out) {
    if (v->type != J_BOOL) return jctx_invalid_type(c, v, "a boolean");
    *out = v->b;
    return true;
}

static bool read_uint(jctx_t *c, const jval_t *v, uint64_t max, const char *expected, uint64_t *out) {
    if (v->type != J_NUM || v->num == JN_FLOAT) return jctx_invalid_type(c, v, expected);
    if (v->num == JN_NEG || v->u > max)
        return jctx_fail(c, fmt("invalid value: integer `%S`, expected %s", v->s, expected));
    *out = v->u;
    return true;
}

bool jread_u32(jctx_t *c, const jval_t *v, uint32_t *out) {
    uint64_t u;
    if (!read_uint(c, v, UINT32_MAX, "u32", &u)) return false;
    *out = (uint32_t)u;
    return true;
}

bool jread_u16(jctx_t *c, const jval_t *v, uint16_t *out) {
    uint64_t u;
    if (!read_uint(c, v, UINT16_MAX, "u16", &u)) return false;
    *out = (uint16_t)u;
    return true;
}

bool jread_array(jctx_t *c, const jval_t *v) {
    return v->type == J_ARR || jctx_invalid_type(c, v, "a sequence");
}

bool jread_enum(jctx_t *c, const jval_t *v, const char *what, const char *const *names, int *out) {
    if (v->type != J_STR) return jctx_invalid_type(c, v, what);
    for (int i = 0; names[i]; i++) {
        if (str_eq(v->s, names[i])) {
            *out = i;
            return true;
        }
    }
    sb_t b = {0};
    sb_puts(&b, "unknown variant `");
    sb_str(&b, v->s);
    sb_puts(&b, "`, expected ");
    json_one_of(&b, names);
    return jctx_fail(c, sb_cstr(&b));
}

bool jobj_begin(jctx_t *c, const jval_t *v, const char *what, const char *const *fields, uint32_t defaults,
                jobj_t *o) {
    if (v->type != J_OBJ && v->type != J_ARR) return jctx_invalid_type(c, v, what);
    size_t nfields = 0;
    while (fields[nfields]) nfields++;
    *o = (jobj_t){.obj = v, .fields = fields, .what = what, .nfields = nfields, .defaults = defaults,
                  .seq = v->type == J_ARR};
    return true;
}

/* The array form: element i is field i. */
static int jobj_next_element(jctx_t *c, jobj_t *o, const jval_t **val) {
    size_t i = o->next;
    if (i >= o->obj->n) {
        for (size_t f = i; f < o->nfields; f++) {
            if (!((o->defaults >> f) & 1)) {
                jctx_fail(c, fmt("invalid length %U, expected %s with %U elements", (uint64_t)f, o->what,
                                 (uint64_t)o->nfields));
                return JOBJ_ERROR;
            }
        }
        return JOBJ_END;
    }
    if (i >= o->nfields) {
        jctx_fail(c, fmt("trailing characters"));
        return JOBJ_ERROR;
    }
    o->next++;
    o->seen |= 1u << i;
    o->mark = jctx_push_index(c, i);
    o->in_field = true;
    *val = o->obj->items[i];
    return (int)i;
}

int jobj_next(jctx_t *c, jobj_t *o, const jval_t **val) {
    if (o->in_field) {
        jctx_pop(c, o->mark);
        o->in_field = false;
    }
    if (o->seq) return jobj_next_element(c, o, val);
    if (o->next >= o->obj->n) return JOBJ_END;
    const jmember_t *m = &o->obj->members[o->next++];
    int f = -1;
    for (int i = 0; o->fields[i]; i++) {
        if (str_eq(m->key, o->fields[i])) {
            f = i;
            break;
        }
    }
    if (f < 0) {
        jctx_push_field(c, m->key);
        sb_t b = {0};
        sb_puts(&b, "unknown field `");
        sb_str(&b, m->key);
        if (!o->fields[0]) {
            sb_puts(&b, "`, there are no fields");
        } else {
            sb_puts(&b, "`, expected ");
            json_one_of(&b, o->fields);
        }
        jctx_fail(c, sb_cstr(&b));
        return JOBJ_ERROR;
    }
    if (o->seen & (1u << f)) {
        jctx_fail(c, fmt("duplicate field `%s`", o->fields[f]));
        return JOBJ_ERROR;
    }
    o->seen |= 1u << f;
    o->mark = jctx_push_field(c, m->key);
    o->in_field = true;
    *val = m->val;
    return f;
}

bool jobj_has(const jobj_t *o, int field) { return (o->seen >> field) & 1; }

bool jobj_missing(jctx_t *c, const jobj_t *o, int field) {
    return jctx_fail(c, fmt("missing field `%s`", o->fields[field]));
}

/* ---------------------------------------------------------------- writing */

static void jw_value(jw_t *w) {
    if (w->after_key) {
        w->after_key = false;
        return;
    }
    if (w->depth > 0) {
        if (!w->first[w->depth]) sb_putc(&w->b, ',');
        w->first[w->depth] = false;
    }
}

static void jw_open(jw_t *w, char c) {
    jw_value(w);
    sb_putc(&w->b, c);
    if (++w->depth >= 64) __builtin_trap();
    w->first[w->depth] = true;
}

void jw_obj(jw_t *w) { jw_open(w, '{'); }
void jw_arr(jw_t *w) { jw_open(w, '['); }

void jw_end_obj(jw_t *w) {
    w->depth--;
    sb_putc(&w->b, '}');
}

void jw_end_arr(jw_t *w) {
    w->depth--;
    sb_putc(&w->b, ']');
}

void jw_key(jw_t *w, const char *key) {
    jw_value(w);
    sb_json_str(&w->b, str_c(key));
    sb_putc(&w->b, ':');
    w->after_key = true;
}

void jw_str(jw_t *w, str_t s) {
    jw_value(w);
    sb_json_str(&w->b, s);
}

void jw_cstr(jw_t *w, const char *s) { jw_str(w, str_c(s)); }

void jw_u64(jw_t *w, uint64_t v) {
    jw_value(w);
    sb_u64(&w->b, v);
}

void jw_bool(jw_t *w, bool v) {
    jw_value(w);
    sb_puts(&w->b, v ? "true" : "false");
}

void jw_null(jw_t *w) {
    jw_value(w);
    sb_puts(&w->b, "null");
}

void jw_empty_obj(jw_t *w, const char *key) {
    jw_key(w, key);
    jw_obj(w);
    jw_end_obj(w);
}
