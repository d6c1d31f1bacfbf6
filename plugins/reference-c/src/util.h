/* Strings, a growable buffer and a small formatter: what the plugin needs from a C
 * library without stdio (the module must import nothing from WASI). Memory is never
 * freed: the host gives every call a fresh instance and drops it afterwards. */
#ifndef REF_UTIL_H
#define REF_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A byte string that is not necessarily NUL-terminated (JSON strings may hold \u0000). */
typedef struct {
    const char *p;
    size_t n;
} str_t;

#define STR(lit) ((str_t){(lit), sizeof(lit) - 1})

str_t str_c(const char *s);
bool str_eq(str_t a, const char *lit);
bool str_same(str_t a, str_t b);
int str_cmp(str_t a, str_t b); /* byte order, as Rust's String */
bool str_starts(str_t s, const char *prefix);
bool str_ends(str_t s, const char *suffix);
char *str_dup(str_t s); /* NUL-terminated copy */

/* Growable byte buffer. */
typedef struct {
    char *p;
    size_t n, cap;
} sb_t;

void *xmalloc(size_t n);
void *xrealloc(void *p, size_t n);
void sb_putn(sb_t *b, const char *s, size_t n);
void sb_puts(sb_t *b, const char *s);
void sb_putc(sb_t *b, char c);
void sb_str(sb_t *b, str_t s);
void sb_u64(sb_t *b, uint64_t v);
void sb_i64(sb_t *b, int64_t v);
/* `"…"` with JSON escapes. */
void sb_json_str(sb_t *b, str_t s);
/* `"…"` as Rust's `{:?}` shows a string. */
void sb_debug_str(sb_t *b, str_t s);
char *sb_cstr(sb_t *b); /* NUL-terminates, returns the buffer */
str_t sb_view(const sb_t *b);

/* A tiny printf: %s (const char *), %S (str_t), %Q (str_t, quoted as Rust's {:?}),
 * %u (unsigned), %U (uint64_t), %d (int), %% . Returns a fresh NUL-terminated string. */
char *fmt(const char *f, ...);
#include <stdarg.h>
char *vfmt(const char *f, va_list ap);

/* UTF-8: decodes one scalar at s[i] (input is valid UTF-8), sets *len. */
uint32_t utf8_at(str_t s, size_t i, size_t *len);
/* Unicode White_Space, as Rust's char::is_whitespace. */
bool uni_is_whitespace(uint32_t c);
/* General category Cc, as Rust's char::is_control. */
bool uni_is_control(uint32_t c);
/* Trims Unicode whitespace at both ends (Rust's str::trim). */
str_t str_trim(str_t s);

#endif
