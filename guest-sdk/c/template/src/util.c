#include "util.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) __builtin_trap(); /* out of memory: a trap the host reports */
    return p;
}

void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) __builtin_trap();
    return q;
}

str_t str_c(const char *s) { return (str_t){s, strlen(s)}; }

bool str_eq(str_t a, const char *lit) {
    size_t n = strlen(lit);
    return a.n == n && memcmp(a.p, lit, n) == 0;
}

bool str_same(str_t a, str_t b) { return a.n == b.n && (a.n == 0 || memcmp(a.p, b.p, a.n) == 0); }

int str_cmp(str_t a, str_t b) {
    size_t n = a.n < b.n ? a.n : b.n;
    int c = n ? memcmp(a.p, b.p, n) : 0;
    if (c) return c;
    return a.n < b.n ? -1 : a.n > b.n ? 1 : 0;
}

bool str_starts(str_t s, const char *prefix) {
    size_t n = strlen(prefix);
    return s.n >= n && memcmp(s.p, prefix, n) == 0;
}

bool str_ends(str_t s, const char *suffix) {
    size_t n = strlen(suffix);
    return s.n >= n && memcmp(s.p + s.n - n, suffix, n) == 0;
}

char *str_dup(str_t s) {
    char *p = xmalloc(s.n + 1);
    if (s.n) memcpy(p, s.p, s.n);
    p[s.n] = 0;
    return p;
}

static void sb_grow(sb_t *b, size_t extra) {
    if (b->n + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap * 2 : 64;
    while (cap < b->n + extra + 1) cap *= 2;
    b->p = xrealloc(b->p, cap);
    b->cap = cap;
}

void sb_putn(sb_t *b, const char *s, size_t n) {
    sb_grow(b, n);
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
}

void sb_puts(sb_t *b, const char *s) { sb_putn(b, s, strlen(s)); }

void sb_putc(sb_t *b, char c) {
    sb_grow(b, 1);
    b->p[b->n++] = c;
}

void sb_str(sb_t *b, str_t s) { sb_putn(b, s.p, s.n); }

void sb_u64(sb_t *b, uint64_t v) {
    char tmp[24];
    int i = 0;
    do {
        tmp[i++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (i) sb_putc(b, tmp[--i]);
}

void sb_i64(sb_t *b, int64_t v) {
    if (v < 0) {
        sb_putc(b, '-');
        sb_u64(b, (uint64_t)0 - (uint64_t)v);
    } else {
        sb_u64(b, (uint64_t)v);
    }
}

static const char HEX[] = "0123456789abcdef";

void sb_json_str(sb_t *b, str_t s) {
    sb_putc(b, '"');
    for (size_t i = 0; i < s.n; i++) {
        unsigned char c = (unsigned char)s.p[i];
        switch (c) {
        case '"': sb_puts(b, "\\\""); break;
        case '\\': sb_puts(b, "\\\\"); break;
        case '\n': sb_puts(b, "\\n"); break;
        case '\r': sb_puts(b, "\\r"); break;
        case '\t': sb_puts(b, "\\t"); break;
        case '\b': sb_puts(b, "\\b"); break;
        case '\f': sb_puts(b, "\\f"); break;
        default:
            if (c < 0x20) {
                char e[6] = {'\\', 'u', '0', '0', HEX[c >> 4], HEX[c & 15]};
                sb_putn(b, e, 6);
            } else {
                sb_putc(b, (char)c);
            }
        }
    }
    sb_putc(b, '"');
}

void sb_debug_str(sb_t *b, str_t s) {
    sb_putc(b, '"');
    for (size_t i = 0; i < s.n;) {
        size_t len;
        uint32_t c = utf8_at(s, i, &len);
        switch (c) {
        case '"': sb_puts(b, "\\\""); break;
        case '\\': sb_puts(b, "\\\\"); break;
        case '\n': sb_puts(b, "\\n"); break;
        case '\r': sb_puts(b, "\\r"); break;
        case '\t': sb_puts(b, "\\t"); break;
        case 0: sb_puts(b, "\\0"); break;
        default:
            if (uni_is_control(c)) {
                sb_puts(b, "\\u{");
                char tmp[8];
                int k = 0;
                do {
                    tmp[k++] = HEX[c & 15];
                    c >>= 4;
                } while (c);
                while (k) sb_putc(b, tmp[--k]);
                sb_putc(b, '}');
            } else {
                sb_putn(b, s.p + i, len);
            }
        }
        i += len;
    }
    sb_putc(b, '"');
}

char *sb_cstr(sb_t *b) {
    sb_grow(b, 0);
    b->p[b->n] = 0;
    return b->p;
}

str_t sb_view(const sb_t *b) { return (str_t){b->p ? b->p : "", b->n}; }

char *fmt(const char *f, ...) {
    va_list ap;
    va_start(ap, f);
    char *s = vfmt(f, ap);
    va_end(ap);
    return s;
}

char *vfmt(const char *f, va_list ap) {
    sb_t b = {0};
    for (; *f; f++) {
        if (*f != '%') {
            sb_putc(&b, *f);
            continue;
        }
        switch (*++f) {
        case 's': sb_puts(&b, va_arg(ap, const char *)); break;
        case 'S': sb_str(&b, va_arg(ap, str_t)); break;
        case 'Q': sb_debug_str(&b, va_arg(ap, str_t)); break;
        case 'u': sb_u64(&b, va_arg(ap, unsigned)); break;
        case 'U': sb_u64(&b, va_arg(ap, uint64_t)); break;
        case 'd': sb_i64(&b, va_arg(ap, int)); break;
        case '%': sb_putc(&b, '%'); break;
        default: __builtin_trap(); /* a bug in a format string */
        }
    }
    return sb_cstr(&b);
}

uint32_t utf8_at(str_t s, size_t i, size_t *len) {
    const unsigned char *p = (const unsigned char *)s.p + i;
    size_t left = s.n - i;
    if (p[0] < 0x80 || left < 2) {
        *len = 1;
        return p[0];
    }
    if ((p[0] & 0xE0) == 0xC0) {
        *len = 2;
        return ((uint32_t)(p[0] & 0x1F) << 6) | (p[1] & 0x3F);
    }
    if ((p[0] & 0xF0) == 0xE0 && left >= 3) {
        *len = 3;
        return ((uint32_t)(p[0] & 0x0F) << 12) | ((uint32_t)(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
    }
    if (left >= 4) {
        *len = 4;
        return ((uint32_t)(p[0] & 0x07) << 18) | ((uint32_t)(p[1] & 0x3F) << 12) |
               ((uint32_t)(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
    }
    *len = 1;
    return p[0];
}

bool uni_is_whitespace(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

bool uni_is_control(uint32_t c) { return c < 0x20 || (c >= 0x7F && c <= 0x9F); }

str_t str_trim(str_t s) {
    size_t a = 0, z = s.n;
    while (a < z) {
        size_t len;
        uint32_t c = utf8_at(s, a, &len);
        if (!uni_is_whitespace(c)) break;
        a += len;
    }
    while (z > a) {
        /* step back to the start of the last scalar */
        size_t k = z - 1;
        while (k > a && ((unsigned char)s.p[k] & 0xC0) == 0x80) k--;
        size_t len;
        uint32_t c = utf8_at(s, k, &len);
        if (!uni_is_whitespace(c)) break;
        z = k;
    }
    return (str_t){s.p + a, z - a};
}
