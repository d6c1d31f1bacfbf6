/* The regex syntax check: the same verdicts as the parser the Rust reference uses
 * (regex-syntax's AST parser, which follows RE2's syntax), written from its documented
 * behaviour. It parses without building a tree: it only tracks, for the nesting limit, the
 * height each finished sub-expression would have in that parser's tree.
 *
 * One approximation: capture group names accept any non-ASCII character other than
 * whitespace and controls where regex-syntax asks for Unicode letters and digits. */
#include "check.h"

#include <string.h>

#define NEST_LIMIT 250

/* A finished item of a concatenation: its height, and whether it is a flags-only group
 * (`(?i)`), which a repetition operator cannot apply to. */
typedef struct {
    int height;
    bool flags;
} item_t;

typedef struct {
    item_t *v;
    size_t n, cap;
} concat_t;

/* The items of a character class union: how many, and the tallest. */
typedef struct {
    size_t n;
    int max;
} cunion_t;

typedef struct {
    bool alternation;
    concat_t concat;   /* a group: the concatenation it interrupts */
    bool ignore_space; /* a group: the `x` flag outside it */
    int alt_max;       /* an alternation: the tallest branch so far */
} gstate_t;

typedef struct {
    bool op;         /* a binary operation (`&&`, `--`, `~~`) awaiting its right side */
    cunion_t parent; /* an open bracket: the union it sits in */
    int lhs;         /* an operation: the height of its left side */
} cstate_t;

typedef struct {
    str_t pat;
    size_t pos;
    bool ignore_space;
    const char *err;
    str_t *names;
    size_t nnames;
    gstate_t *g;
    size_t gn, gcap;
    cstate_t *c;
    size_t cn, ccap;
} rp_t;

static bool fail_with(rp_t *p, const char *message) {
    if (!p->err) p->err = message;
    return false;
}

static bool eof(rp_t *p) { return p->pos >= p->pat.n; }

static uint32_t ch(rp_t *p) {
    size_t len;
    return utf8_at(p->pat, p->pos, &len);
}

static bool bump(rp_t *p) {
    if (eof(p)) return false;
    size_t len;
    utf8_at(p->pat, p->pos, &len);
    p->pos += len;
    return !eof(p);
}

static bool bump_if(rp_t *p, const char *prefix) {
    size_t n = strlen(prefix);
    if (p->pat.n - p->pos >= n && memcmp(p->pat.p + p->pos, prefix, n) == 0) {
        p->pos += n;
        return true;
    }
    return false;
}

static void bump_space(rp_t *p) {
    if (!p->ignore_space) return;
    while (!eof(p)) {
        uint32_t c = ch(p);
        if (uni_is_whitespace(c)) {
            bump(p);
        } else if (c == '#') {
            bump(p);
            while (!eof(p)) {
                uint32_t k = ch(p);
                bump(p);
                if (k == '\n') break;
            }
        } else {
            break;
        }
    }
}

static bool bump_and_bump_space(rp_t *p) {
    if (!bump(p)) return false;
    bump_space(p);
    return !eof(p);
}

/* The character after the current one, or -1. */
static int64_t peek(rp_t *p) {
    if (eof(p)) return -1;
    size_t len;
    utf8_at(p->pat, p->pos, &len);
    if (p->pos + len >= p->pat.n) return -1;
    return utf8_at(p->pat, p->pos + len, &len);
}

/* As peek, skipping whitespace (and, in the quirky way of the original, comments) in `x`
 * mode. */
static int64_t peek_space(rp_t *p) {
    if (!p->ignore_space) return peek(p);
    if (eof(p)) return -1;
    size_t len;
    utf8_at(p->pat, p->pos, &len);
    size_t start = p->pos + len;
    bool in_comment = false;
    for (size_t i = start; i < p->pat.n; i += len) {
        uint32_t c = utf8_at(p->pat, i, &len);
        if (uni_is_whitespace(c)) continue;
        if (!in_comment && c == '#') {
            in_comment = true;
        } else if (in_comment && c == '\n') {
            in_comment = false;
        } else {
            start = i;
            break;
        }
    }
    if (start >= p->pat.n) return -1;
    return utf8_at(p->pat, start, &len);
}

static void concat_push(concat_t *c, int height, bool flags) {
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 8;
        c->v = xrealloc(c->v, c->cap * sizeof *c->v);
    }
    c->v[c->n++] = (item_t){height, flags};
}

/* The height of a concatenation as an expression: empty, its one item, or a Concat. */
static int concat_height(const concat_t *c) {
    if (c->n == 0) return 0;
    if (c->n == 1) return c->v[0].height;
    int max = 0;
    for (size_t i = 0; i < c->n; i++)
        if (c->v[i].height > max) max = c->v[i].height;
    return 1 + max;
}

static void union_push(cunion_t *u, int height) {
    u->n++;
    if (height > u->max) u->max = height;
}

static int union_height(cunion_t u) { return u.n == 0 ? 0 : u.n == 1 ? u.max : 1 + u.max; }

static int max_int(int a, int b) { return a > b ? a : b; }

static void gpush(rp_t *p, gstate_t s) {
    if (p->gn == p->gcap) {
        p->gcap = p->gcap ? p->gcap * 2 : 8;
        p->g = xrealloc(p->g, p->gcap * sizeof *p->g);
    }
    p->g[p->gn++] = s;
}

static void cpush(rp_t *p, cstate_t s) {
    if (p->cn == p->ccap) {
        p->ccap = p->ccap ? p->ccap * 2 : 8;
        p->c = xrealloc(p->c, p->ccap * sizeof *p->c);
    }
    p->c[p->cn++] = s;
}

/* ---------------------------------------------------------------- primitives */

typedef enum { P_LITERAL, P_ASSERTION, P_DOT, P_PERL, P_UNICODE } prim_kind_t;
typedef struct {
    prim_kind_t kind;
    uint32_t c; /* P_LITERAL */
} prim_t;

static bool is_hex(uint32_t c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static unsigned hex_value(uint32_t c) {
    return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}

static bool valid_scalar(uint64_t v) { return v <= 0x10FFFF && !(v >= 0xD800 && v <= 0xDFFF); }

static bool parse_hex(rp_t *p, uint32_t *out) {
    uint32_t kind = ch(p);
    int digits = kind == 'x' ? 2 : kind == 'u' ? 4 : 8;
    if (!bump_and_bump_space(p)) return fail_with(p, "incomplete escape sequence, reached end of pattern prematurely");
    uint64_t v = 0;
    if (ch(p) == '{') {
        size_t count = 0;
        bool overflow = false;
        while (bump_and_bump_space(p) && ch(p) != '}') {
            if (!is_hex(ch(p))) return fail_with(p, "invalid hexadecimal digit");
            v = v * 16 + hex_value(ch(p));
            if (v > UINT32_MAX) overflow = true, v = UINT32_MAX + 1ull;
            count++;
        }
        if (eof(p)) return fail_with(p, "incomplete escape sequence, reached end of pattern prematurely");
        bump_and_bump_space(p);
        if (count == 0) return fail_with(p, "hexadecimal literal empty");
        if (overflow || !valid_scalar(v)) return fail_with(p, "hexadecimal literal is not a Unicode scalar value");
    } else {
        for (int i = 0; i < digits; i++) {
            if (i > 0 && !bump_and_bump_space(p))
                return fail_with(p, "incomplete escape sequence, reached end of pattern prematurely");
            if (!is_hex(ch(p))) return fail_with(p, "invalid hexadecimal digit");
            v = v * 16 + hex_value(ch(p));
        }
        bump_and_bump_space(p);
        if (!valid_scalar(v)) return fail_with(p, "hexadecimal literal is not a Unicode scalar value");
    }
    *out = (uint32_t)v;
    return true;
}

static bool parse_unicode_class(rp_t *p) {
    if (!bump_and_bump_space(p)) return fail_with(p, "incomplete escape sequence, reached end of pattern prematurely");
    if (ch(p) == '{') {
        while (bump_and_bump_space(p) && ch(p) != '}') {
        }
        if (eof(p)) return fail_with(p, "incomplete escape sequence, reached end of pattern prematurely");
        bump(p);
    } else {
        if (ch(p) == '\\') return fail_with(p, "invalid Unicode character class");
        bump_and_bump_space(p);
    }
    return true;
}

/* After `\b`, at `{`: `\b{start}` and friends. Backs up to the `{` when it is not one
 * (`\b{5}` is a counted repetition). */
static bool maybe_special_word_boundary(rp_t *p) {
    size_t start = p->pos;
    if (!bump_and_bump_space(p))
        return fail_with(p, "found either the beginning of a special word boundary or a bounded repetition on a \\b with an opening brace, but no closing brace");
#define WB_CHAR(c) (((c) >= 'A' && (c) <= 'Z') || ((c) >= 'a' && (c) <= 'z') || (c) == '-')
    if (!WB_CHAR(ch(p))) {
        p->pos = start;
        return true;
    }
    sb_t name = {0};
    while (!eof(p) && WB_CHAR(ch(p))) {
        sb_putc(&name, (char)ch(p));
        bump_and_bump_space(p);
    }
#undef WB_CHAR
    if (eof(p) || ch(p) != '}')
        return fail_with(p, "special word boundary assertion is either unclosed or contains an invalid character");
    bump(p);
    str_t n = sb_view(&name);
    if (!str_eq(n, "start") && !str_eq(n, "end") && !str_eq(n, "start-half") && !str_eq(n, "end-half"))
        return fail_with(p, "unrecognized special word boundary assertion, valid choices are: start, end, start-half or end-half");
    return true;
}

static bool is_meta(uint32_t c) {
    return c < 0x80 && c && strchr("\\.+*?()|[]{}^$#&-~", (int)c);
}

static bool is_escapeable(uint32_t c) {
    if (is_meta(c)) return true;
    if (c >= 0x80) return false;
    if ((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')) return false;
    return c != '<' && c != '>';
}

static bool parse_escape(rp_t *p, prim_t *out) {
    if (!bump(p)) return fail_with(p, "incomplete escape sequence, reached end of pattern prematurely");
    uint32_t c = ch(p);
    if (c >= '0' && c <= '9') return fail_with(p, "backreferences are not supported");
    if (c == 'x' || c == 'u' || c == 'U') {
        out->kind = P_LITERAL;
        return parse_hex(p, &out->c);
    }
    if (c == 'p' || c == 'P') {
        out->kind = P_UNICODE;
        return parse_unicode_class(p);
    }
    if (c == 'd' || c == 's' || c == 'w' || c == 'D' || c == 'S' || c == 'W') {
        bump(p);
        out->kind = P_PERL;
        return true;
    }
    bump(p);
    out->kind = P_LITERAL;
    out->c = c;
    if (is_meta(c) || is_escapeable(c)) return true;
    switch (c) {
    case 'a': out->c = 0x07; return true;
    case 'f': out->c = 0x0C; return true;
    case 't': out->c = '\t'; return true;
    case 'n': out->c = '\n'; return true;
    case 'r': out->c = '\r'; return true;
    case 'v': out->c = 0x0B; return true;
    case 'A':
    case 'z':
    case 'B':
    case '<':
    case '>': out->kind = P_ASSERTION; return true;
    case 'b':
        out->kind = P_ASSERTION;
        if (!eof(p) && ch(p) == '{') return maybe_special_word_boundary(p);
        return true;
    default: return fail_with(p, "unrecognized escape sequence");
    }
}

static bool parse_primitive(rp_t *p, prim_t *out) {
    uint32_t c = ch(p);
    if (c == '\\') return parse_escape(p, out);
    out->kind = c == '.' ? P_DOT : (c == '^' || c == '$') ? P_ASSERTION : P_LITERAL;
    out->c = c;
    bump(p);
    return true;
}

/* ---------------------------------------------------------------- repetitions */

static bool pop_repeatable(rp_t *p, concat_t *concat, item_t *out) {
    if (concat->n == 0 || concat->v[concat->n - 1].flags)
        return fail_with(p, "repetition operator missing expression");
    *out = concat->v[--concat->n];
    return true;
}

static bool parse_uncounted_repetition(rp_t *p, concat_t *concat) {
    item_t it;
    if (!pop_repeatable(p, concat, &it)) return false;
    if (bump(p) && ch(p) == '?') bump(p);
    concat_push(concat, it.height + 1, false);
    return true;
}

typedef enum { DEC_OK, DEC_EMPTY, DEC_INVALID } dec_t;

static dec_t parse_decimal(rp_t *p, uint32_t *out) {
    while (!eof(p) && uni_is_whitespace(ch(p))) bump(p);
    uint64_t v = 0;
    size_t digits = 0;
    bool overflow = false;
    while (!eof(p) && ch(p) >= '0' && ch(p) <= '9') {
        v = v * 10 + (ch(p) - '0');
        if (v > UINT32_MAX) overflow = true, v = UINT32_MAX + 1ull;
        digits++;
        bump_and_bump_space(p);
    }
    while (!eof(p) && uni_is_whitespace(ch(p))) bump_and_bump_space(p);
    if (digits == 0) return DEC_EMPTY;
    if (overflow) return DEC_INVALID;
    *out = (uint32_t)v;
    return DEC_OK;
}

static bool decimal_error(rp_t *p, dec_t d) {
    return fail_with(p, d == DEC_EMPTY ? "repetition quantifier expects a valid decimal" : "decimal literal invalid");
}

static bool parse_counted_repetition(rp_t *p, concat_t *concat) {
    const char *unclosed = "unclosed counted repetition";
    item_t it;
    if (!pop_repeatable(p, concat, &it)) return false;
    if (!bump_and_bump_space(p)) return fail_with(p, unclosed);
    uint32_t lo = 0, hi = 0;
    dec_t lo_ok = parse_decimal(p, &lo);
    if (eof(p)) return fail_with(p, unclosed);
    bool bounded = false;
    if (ch(p) == ',') {
        if (!bump_and_bump_space(p)) return fail_with(p, unclosed);
        if (ch(p) != '}') {
            if (lo_ok != DEC_OK) return decimal_error(p, lo_ok);
            dec_t hi_ok = parse_decimal(p, &hi);
            if (hi_ok != DEC_OK) return decimal_error(p, hi_ok);
            bounded = true;
        } else if (lo_ok != DEC_OK) {
            return decimal_error(p, lo_ok);
        }
    } else if (lo_ok != DEC_OK) {
        return decimal_error(p, lo_ok);
    }
    if (eof(p) || ch(p) != '}') return fail_with(p, unclosed);
    if (bump_and_bump_space(p) && ch(p) == '?') bump(p);
    if (bounded && lo > hi) return fail_with(p, "invalid repetition count range, the start must be <= the end");
    concat_push(concat, it.height + 1, false);
    return true;
}

/* ---------------------------------------------------------------- groups */

static bool is_capture_char(uint32_t c, bool first) {
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                 (c >= 0x80 && !uni_is_whitespace(c) && !uni_is_control(c));
    if (first) return c == '_' || alpha;
    return c == '_' || c == '.' || c == '[' || c == ']' || alpha || (c >= '0' && c <= '9');
}

static bool parse_capture_name(rp_t *p) {
    if (eof(p)) return fail_with(p, "unclosed capture group name");
    size_t start = p->pos;
    for (;;) {
        if (ch(p) == '>') break;
        if (!is_capture_char(ch(p), p->pos == start)) return fail_with(p, "invalid capture group character");
        if (!bump(p)) break;
    }
    size_t end = p->pos;
    if (eof(p)) return fail_with(p, "unclosed capture group name");
    bump(p);
    if (end == start) return fail_with(p, "empty capture group name");
    str_t name = {p->pat.p + start, end - start};
    for (size_t i = 0; i < p->nnames; i++)
        if (str_same(p->names[i], name)) return fail_with(p, "duplicate capture group name");
    p->names = xrealloc(p->names, (p->nnames + 1) * sizeof *p->names);
    p->names[p->nnames++] = name;
    return true;
}

/* Flags up to `:` or `)`; *x gets the state of the `x` flag they set (-1: untouched). */
static bool parse_flags(rp_t *p, size_t *count, int *x) {
    char seen[16];
    size_t n = 0;
    bool last_was_negation = false, negated = false;
    *x = -1;
    while (ch(p) != ':' && ch(p) != ')') {
        uint32_t c = ch(p);
        if (c == '-') {
            last_was_negation = true;
            if (memchr(seen, '-', n)) return fail_with(p, "flag negation operator repeated");
            seen[n++] = '-';
            negated = true;
        } else {
            last_was_negation = false;
            if (c >= 0x80 || !strchr("imsUuRx", (int)c) || c == 0) return fail_with(p, "unrecognized flag");
            if (memchr(seen, (int)c, n)) return fail_with(p, "duplicate flag");
            seen[n++] = (char)c;
            if (c == 'x') *x = negated ? 0 : 1;
        }
        if (!bump(p)) return fail_with(p, "expected flag but got end of regex");
    }
    if (last_was_negation) return fail_with(p, "dangling flag negation operator");
    *count = n;
    return true;
}

static bool push_group(rp_t *p, concat_t *concat) {
    bump(p);
    bump_space(p);
    if (bump_if(p, "?=") || bump_if(p, "?!") || bump_if(p, "?<=") || bump_if(p, "?<!"))
        return fail_with(p, "look-around, including look-ahead and look-behind, is not supported");
    int x = -1;
    if (bump_if(p, "?P<") || bump_if(p, "?<")) {
        if (!parse_capture_name(p)) return false;
    } else if (bump_if(p, "?")) {
        if (eof(p)) return fail_with(p, "unclosed group");
        size_t count;
        if (!parse_flags(p, &count, &x)) return false;
        uint32_t end = ch(p);
        bump(p);
        if (end == ')') {
            if (count == 0) return fail_with(p, "repetition operator missing expression");
            if (x >= 0) p->ignore_space = x;
            concat_push(concat, 0, true);
            return true;
        }
    }
    gpush(p, (gstate_t){.concat = *concat, .ignore_space = p->ignore_space});
    if (x >= 0) p->ignore_space = x;
    *concat = (concat_t){0};
    return true;
}

static bool pop_group(rp_t *p, concat_t *concat) {
    bool alt = false;
    int alt_max = 0;
    if (p->gn && p->g[p->gn - 1].alternation) {
        alt = true;
        alt_max = p->g[--p->gn].alt_max;
    }
    if (p->gn == 0 || p->g[p->gn - 1].alternation) return fail_with(p, "unopened group");
    gstate_t g = p->g[--p->gn];
    p->ignore_space = g.ignore_space;
    bump(p);
    int inner = concat_height(concat);
    if (alt) inner = 1 + max_int(alt_max, inner);
    *concat = g.concat;
    concat_push(concat, 1 + inner, false);
    return true;
}

static void push_alternate(rp_t *p, concat_t *concat) {
    int h = concat_height(concat);
    if (p->gn && p->g[p->gn - 1].alternation) {
        gstate_t *a = &p->g[p->gn - 1];
        a->alt_max = max_int(a->alt_max, h);
    } else {
        gpush(p, (gstate_t){.alternation = true, .alt_max = h});
    }
    bump(p);
    *concat = (concat_t){0};
}

/* ---------------------------------------------------------------- classes */

static bool unclosed_class(rp_t *p) { return fail_with(p, "unclosed character class"); }

static bool parse_set_class_item(rp_t *p, prim_t *out) {
    if (ch(p) == '\\') return parse_escape(p, out);
    out->kind = P_LITERAL;
    out->c = ch(p);
    bump(p);
    return true;
}

static bool parse_set_class_range(rp_t *p) {
    prim_t a, b;
    if (!parse_set_class_item(p, &a)) return false;
    bump_space(p);
    if (eof(p)) return unclosed_class(p);
    if (ch(p) != '-' || peek_space(p) == ']' || peek_space(p) == '-') {
        if (a.kind == P_ASSERTION || a.kind == P_DOT)
            return fail_with(p, "invalid escape sequence found in character class");
        return true;
    }
    if (!bump_and_bump_space(p)) return unclosed_class(p);
    if (!parse_set_class_item(p, &b)) return false;
    if (a.kind != P_LITERAL || b.kind != P_LITERAL) return fail_with(p, "invalid range boundary, must be a literal");
    if (a.c > b.c) return fail_with(p, "invalid character class range, the start must be <= the end");
    return true;
}

/* At `[` inside a class: `[:alpha:]` and friends, or back up and return false. */
static bool maybe_ascii_class(rp_t *p) {
    static const char *const names[] = {"alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph",
                                        "lower", "print", "punct", "space", "upper", "word", "xdigit", NULL};
    size_t start = p->pos;
    if (!bump(p) || ch(p) != ':') goto no;
    if (!bump(p)) goto no;
    if (ch(p) == '^' && !bump(p)) goto no;
    size_t name_start = p->pos;
    while (ch(p) != ':' && bump(p)) {
    }
    if (eof(p)) goto no;
    str_t name = {p->pat.p + name_start, p->pos - name_start};
    if (!bump_if(p, ":]")) goto no;
    for (int i = 0; names[i]; i++)
        if (str_eq(name, names[i])) return true;
no:
    p->pos = start;
    return false;
}

/* Pops a pending operation, making `rhs` its right side; returns the resulting height. */
static int pop_class_op(rp_t *p, int rhs) {
    if (p->cn && p->c[p->cn - 1].op) {
        int lhs = p->c[--p->cn].lhs;
        return 1 + max_int(lhs, rhs);
    }
    return rhs;
}

static bool push_class_open(rp_t *p, cunion_t *u) {
    if (!bump_and_bump_space(p)) return unclosed_class(p);
    if (ch(p) == '^' && !bump_and_bump_space(p)) return unclosed_class(p);
    cunion_t nested = {0};
    while (ch(p) == '-') {
        union_push(&nested, 0);
        if (!bump_and_bump_space(p)) return unclosed_class(p);
    }
    if (nested.n == 0 && ch(p) == ']') {
        union_push(&nested, 0);
        if (!bump_and_bump_space(p)) return unclosed_class(p);
    }
    cpush(p, (cstate_t){.parent = *u});
    *u = nested;
    return true;
}

/* Parses a bracketed class; *height gets its height. */
static bool parse_set_class(rp_t *p, int *height) {
    cunion_t u = {0};
    for (;;) {
        bump_space(p);
        if (eof(p)) return unclosed_class(p);
        uint32_t c = ch(p);
        if (c == '[') {
            if (p->cn && maybe_ascii_class(p)) {
                union_push(&u, 0);
                continue;
            }
            if (!push_class_open(p, &u)) return false;
        } else if (c == ']') {
            int set = pop_class_op(p, union_height(u));
            cstate_t open = p->c[--p->cn]; /* always an open bracket */
            bump(p);
            if (p->cn == 0) {
                *height = 1 + set;
                return true;
            }
            u = open.parent;
            union_push(&u, 1 + set);
        } else if ((c == '&' || c == '-' || c == '~') && peek(p) == (int64_t)c) {
            bump(p);
            bump(p);
            int lhs = pop_class_op(p, union_height(u));
            cpush(p, (cstate_t){.op = true, .lhs = lhs});
            u = (cunion_t){0};
        } else {
            if (!parse_set_class_range(p)) return false;
            union_push(&u, 0);
        }
    }
}

/* ---------------------------------------------------------------- the whole */

const char *regex_syntax_error(str_t re) {
    rp_t p = {.pat = re};
    concat_t concat = {0};
    for (;;) {
        bump_space(&p);
        if (eof(&p)) break;
        bool ok = true;
        int h;
        prim_t prim;
        switch (ch(&p)) {
        case '(': ok = push_group(&p, &concat); break;
        case ')': ok = pop_group(&p, &concat); break;
        case '|': push_alternate(&p, &concat); break;
        case '[':
            ok = parse_set_class(&p, &h);
            if (ok) concat_push(&concat, h, false);
            break;
        case '?':
        case '*':
        case '+': ok = parse_uncounted_repetition(&p, &concat); break;
        case '{': ok = parse_counted_repetition(&p, &concat); break;
        default:
            ok = parse_primitive(&p, &prim);
            if (ok) concat_push(&concat, 0, false);
        }
        if (!ok) return p.err;
    }
    int height = concat_height(&concat);
    if (p.gn) {
        gstate_t top = p.g[--p.gn];
        if (!top.alternation) return "unclosed group";
        height = 1 + max_int(top.alt_max, height);
        if (p.gn) return "unclosed group";
    }
    /* The parser counts nesting from 1 at the root. */
    if (height > NEST_LIMIT) return "exceed the maximum number of nested parentheses/brackets (250)";
    return NULL;
}
