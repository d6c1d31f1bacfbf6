/* Value checks the schema cannot express, as in plugins/reference/src/check.rs: each
 * returns NULL when the value is fine, or what is wrong with it (for the caller to attach
 * to a document and field). */
#ifndef REF_CHECK_H
#define REF_CHECK_H

#include "util.h"

/* A duration, as protobuf carries it. */
typedef struct {
    uint64_t secs;
    uint32_t nanos;
} dur_t;

/* `250ms`, `1s`, `1.5s`, `1m30s`, `2h` (units h, m, s, ms, us, ns). */
char *duration_parse(str_t s, dur_t *out);
/* Appends the proto3 JSON form (`0.250s`), clamped to protobuf's maximum. */
void sb_duration(sb_t *b, dur_t d);

/* An IP address as Rust's std parses it; `out` (17 bytes) gets the family (4 or 6) and the
 * 16 bytes of the address, for comparing two addresses. */
char *check_ip(str_t address, uint8_t out[17]);
char *check_name(str_t name);
char *check_weight(uint32_t weight);
char *check_domain(str_t domain);
char *check_header_name(str_t name, bool mutation);
char *check_at_least_one(uint32_t n);
char *check_header_value(str_t value);
char *check_path(str_t path);
char *check_regex(str_t re);
/* Normalises a comma-separated retry_on list (items trimmed) into *out, checking each
 * condition against `allowed` (NULL-terminated). */
char *check_retry_on(str_t on, const char *const *allowed, str_t *out);
char *check_positive(dur_t d);

extern const char *const HTTP_RETRY_ON[];

/* The regex syntax check on its own: NULL, or the parser's complaint
 * (`unclosed group`). */
const char *regex_syntax_error(str_t re);

#endif
