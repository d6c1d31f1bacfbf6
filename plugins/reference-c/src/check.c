#include "check.h"

#include <string.h>

/* The largest duration protobuf can carry (10,000 years). */
#define MAX_SECONDS 315576000000ull

const char *const HTTP_RETRY_ON[] = {
    "5xx", "gateway-error", "reset", "reset-before-request", "connect-failure",
    "envoy-ratelimited", "retriable-4xx", "refused-stream", "retriable-status-codes",
    "retriable-headers", "http3-post-connect-failure", "cancelled", "deadline-exceeded",
    "internal", "resource-exhausted", "unavailable", NULL,
};

/* ---------------------------------------------------------------- durations */

static char *bad_duration(str_t s, const char *why) {
    return fmt("invalid duration %Q: %s; write for example 250ms, 1s or 1m30s", s, why);
}

static bool is_num_char(char c) { return (c >= '0' && c <= '9') || c == '.'; }

char *duration_parse(str_t s, dur_t *out) {
    typedef unsigned __int128 u128;
    const u128 limit = (u128)(MAX_SECONDS + 1) * 1000000000u; /* exclusive */
    if (s.n == 0) return bad_duration(s, "empty");
    if (s.p[0] == '-') return bad_duration(s, "must not be negative");
    u128 total = 0; /* nanoseconds */
    size_t i = 0;
    while (i < s.n) {
        size_t num_start = i;
        while (i < s.n && is_num_char(s.p[i])) i++;
        if (i == num_start) return bad_duration(s, "expected a number");
        str_t number = {s.p + num_start, i - num_start};
        size_t unit_start = i;
        while (i < s.n && !is_num_char(s.p[i])) i++;
        str_t unit = {s.p + unit_start, i - unit_start};
        u128 per_unit;
        if (str_eq(unit, "h")) per_unit = 3600000000000ull;
        else if (str_eq(unit, "m")) per_unit = 60000000000ull;
        else if (str_eq(unit, "s")) per_unit = 1000000000ull;
        else if (str_eq(unit, "ms")) per_unit = 1000000ull;
        else if (str_eq(unit, "us") || str_eq(unit, "\xC2\xB5s")) per_unit = 1000ull;
        else if (str_eq(unit, "ns")) per_unit = 1;
        else if (unit.n == 0) return bad_duration(s, "missing unit (h, m, s, ms, us or ns)");
        else return bad_duration(s, "unknown unit (use h, m, s, ms, us or ns)");

        const char *dot = memchr(number.p, '.', number.n);
        str_t whole = number, fraction = {number.p + number.n, 0};
        if (dot) {
            whole.n = (size_t)(dot - number.p);
            fraction = (str_t){dot + 1, number.n - whole.n - 1};
        }
        if ((whole.n == 0 && fraction.n == 0) || memchr(fraction.p, '.', fraction.n))
            return bad_duration(s, "malformed number");
        /* Totals must stay below `limit`; a whole part at or past it is too large
         * whatever follows (and keeps the arithmetic below far from overflowing). */
        u128 w = 0;
        bool too_large = false;
        for (size_t k = 0; k < whole.n; k++) {
            if (w >= limit) too_large = true;
            else w = w * 10 + (unsigned)(whole.p[k] - '0');
        }
        if (too_large || w >= limit) return bad_duration(s, "too large");
        u128 term = w * per_unit;
        /* Digits of the fraction past nanosecond precision are dropped. */
        u128 scale = per_unit;
        for (size_t k = 0; k < fraction.n; k++) {
            scale /= 10;
            term += (u128)(fraction.p[k] - '0') * scale;
        }
        total += term;
        if (total >= limit) return bad_duration(s, "too large");
    }
    out->secs = (uint64_t)(total / 1000000000u);
    out->nanos = (uint32_t)(total % 1000000000u);
    return NULL;
}

void sb_duration(sb_t *b, dur_t d) {
    uint64_t secs = d.secs;
    uint32_t nanos = d.nanos;
    if (secs > MAX_SECONDS) {
        secs = MAX_SECONDS;
        nanos = 0;
    }
    sb_u64(b, secs);
    if (nanos) {
        int digits = 9;
        uint32_t n = nanos;
        if (n % 1000000 == 0) {
            n /= 1000000;
            digits = 3;
        } else if (n % 1000 == 0) {
            n /= 1000;
            digits = 6;
        }
        char tmp[10];
        for (int k = digits - 1; k >= 0; k--) {
            tmp[k] = (char)('0' + n % 10);
            n /= 10;
        }
        sb_putc(b, '.');
        sb_putn(b, tmp, (size_t)digits);
    }
    sb_putc(b, 's');
}

char *check_positive(dur_t d) {
    if (d.secs == 0 && d.nanos == 0) return fmt("must be longer than 0s");
    return NULL;
}

/* ---------------------------------------------------------------- IP addresses */

/* A cursor over the text, with the all-or-nothing steps of Rust's address parser. */
typedef struct {
    const char *p, *end;
} cur_t;

/* Up to max_digits digits in radix; a leading zero only where allowed. */
static bool read_number(cur_t *c, unsigned radix, int max_digits, bool allow_zero_prefix,
                        uint32_t max, uint32_t *out) {
    cur_t save = *c;
    uint32_t v = 0;
    int digits = 0;
    bool leading_zero = c->p < c->end && *c->p == '0';
    while (c->p < c->end) {
        char ch = *c->p;
        int d;
        if (ch >= '0' && ch <= '9') d = ch - '0';
        else if (radix == 16 && ch >= 'a' && ch <= 'f') d = ch - 'a' + 10;
        else if (radix == 16 && ch >= 'A' && ch <= 'F') d = ch - 'A' + 10;
        else break;
        if ((unsigned)d >= radix) break;
        c->p++;
        v = v * radix + (uint32_t)d;
        if (++digits > max_digits) {
            *c = save;
            return false;
        }
    }
    if (digits == 0 || (!allow_zero_prefix && leading_zero && digits > 1) || v > max) {
        *c = save;
        return false;
    }
    *out = v;
    return true;
}

static bool read_char(cur_t *c, char ch) {
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

static bool read_ipv4(cur_t *c, uint8_t out[4]) {
    cur_t save = *c;
    for (int i = 0; i < 4; i++) {
        uint32_t v;
        if ((i > 0 && !read_char(c, '.')) || !read_number(c, 10, 3, false, 255, &v)) {
            *c = save;
            return false;
        }
        out[i] = (uint8_t)v;
    }
    return true;
}

/* Colon-separated groups, possibly ending in an embedded IPv4 address. Returns how many
 * groups were read; *ipv4 tells whether the last two came from an IPv4 address. */
static size_t read_groups(cur_t *c, uint16_t *groups, size_t limit, bool *ipv4) {
    *ipv4 = false;
    for (size_t i = 0; i < limit; i++) {
        if (i + 1 < limit) {
            cur_t save = *c;
            uint8_t v4[4];
            if ((i == 0 || read_char(c, ':')) && read_ipv4(c, v4)) {
                groups[i] = (uint16_t)(v4[0] << 8 | v4[1]);
                groups[i + 1] = (uint16_t)(v4[2] << 8 | v4[3]);
                *ipv4 = true;
                return i + 2;
            }
            *c = save;
        }
        cur_t save = *c;
        uint32_t g;
        if ((i == 0 || read_char(c, ':')) && read_number(c, 16, 4, true, 0xFFFF, &g)) {
            groups[i] = (uint16_t)g;
        } else {
            *c = save;
            return i;
        }
    }
    return limit;
}

static bool read_ipv6(cur_t *c, uint16_t out[8]) {
    cur_t save = *c;
    uint16_t head[8] = {0};
    bool ipv4;
    size_t head_size = read_groups(c, head, 8, &ipv4);
    if (head_size == 8) {
        memcpy(out, head, sizeof head);
        return true;
    }
    if (ipv4 || !read_char(c, ':') || !read_char(c, ':')) {
        *c = save;
        return false;
    }
    uint16_t tail[7] = {0};
    size_t tail_size = read_groups(c, tail, 8 - (head_size + 1), &ipv4);
    memcpy(&head[8 - tail_size], tail, tail_size * sizeof tail[0]);
    memcpy(out, head, sizeof head);
    return true;
}

char *check_ip(str_t address, uint8_t out[17]) {
    memset(out, 0, 17);
    cur_t c = {address.p, address.p + address.n};
    uint8_t v4[4];
    if (read_ipv4(&c, v4) && c.p == c.end) {
        out[0] = 4;
        memcpy(out + 1, v4, 4);
        return NULL;
    }
    c = (cur_t){address.p, address.p + address.n};
    uint16_t v6[8];
    if (read_ipv6(&c, v6) && c.p == c.end) {
        out[0] = 6;
        for (int i = 0; i < 8; i++) {
            out[1 + 2 * i] = (uint8_t)(v6[i] >> 8);
            out[2 + 2 * i] = (uint8_t)v6[i];
        }
        return NULL;
    }
    return fmt("%Q is not an IP address (Envoy does not resolve names here)", address);
}

/* ---------------------------------------------------------------- names and headers */

static bool ascii_alnum(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

char *check_name(str_t name) {
    if (name.n == 0) return fmt("must not be empty");
    if (name.n > 253) return fmt("%Q is longer than 253 characters", name);
    for (size_t i = 0; i < name.n; i++) {
        unsigned char c = (unsigned char)name.p[i];
        if (!ascii_alnum(c) && c != '-' && c != '.' && c != '_')
            return fmt("%Q may contain only letters, digits, '-', '.' and '_'", name);
    }
    return NULL;
}

char *check_weight(uint32_t weight) {
    if (weight == 0) return fmt("must be at least 1 (remove the entry to send it nothing)");
    return NULL;
}

char *check_domain(str_t domain) {
    if (domain.n == 0) return fmt("must not be empty");
    size_t stars = 0;
    for (size_t i = 0; i < domain.n;) {
        size_t len;
        uint32_t c = utf8_at(domain, i, &len);
        if (uni_is_whitespace(c) || uni_is_control(c) || c == '/')
            return fmt("%Q is not a hostname", domain);
        if (c == '*') stars++;
        i += len;
    }
    if (stars > 1 || (stars == 1 && domain.p[0] != '*' && domain.p[domain.n - 1] != '*'))
        return fmt("%Q: a wildcard must be the first or last character, once (*.example.com)", domain);
    return NULL;
}

char *check_header_name(str_t name, bool mutation) {
    str_t token = name;
    if (token.n && token.p[0] == ':') token = (str_t){token.p + 1, token.n - 1};
    bool ok = token.n > 0;
    for (size_t i = 0; ok && i < token.n; i++) {
        unsigned char c = (unsigned char)token.p[i];
        ok = ascii_alnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
    }
    if (!ok) return fmt("%Q is not a valid header name", name);
    bool host = name.n == 4 && (name.p[0] | 0x20) == 'h' && (name.p[1] | 0x20) == 'o' &&
                (name.p[2] | 0x20) == 's' && (name.p[3] | 0x20) == 't';
    if (mutation && ((name.n && name.p[0] == ':') || host))
        return fmt("%Q cannot be changed here (pseudo-headers and host are off limits)", name);
    return NULL;
}

char *check_at_least_one(uint32_t n) {
    if (n == 0) return fmt("must be at least 1");
    return NULL;
}

char *check_header_value(str_t value) {
    for (size_t i = 0; i < value.n; i++)
        if (value.p[i] == '\r' || value.p[i] == '\n' || value.p[i] == 0)
            return fmt("must not contain CR, LF or NUL");
    return NULL;
}

char *check_path(str_t path) {
    if (path.n == 0 || path.p[0] != '/') return fmt("%Q must start with '/'", path);
    return NULL;
}

char *check_regex(str_t re) {
    if (re.n == 0) return fmt("must not be empty");
    const char *e = regex_syntax_error(re);
    if (e) return fmt("invalid regex %Q: %s", re, e);
    return NULL;
}

char *check_retry_on(str_t on, const char *const *allowed, str_t *out) {
    sb_t b = {0};
    size_t start = 0;
    for (size_t i = 0; i <= on.n; i++) {
        if (i < on.n && on.p[i] != ',') continue;
        str_t condition = str_trim((str_t){on.p + start, i - start});
        start = i + 1;
        bool known = false;
        for (int k = 0; allowed[k]; k++)
            if (str_eq(condition, allowed[k])) known = true;
        if (!known) {
            sb_t list = {0};
            for (int k = 0; allowed[k]; k++) {
                if (k) sb_puts(&list, ", ");
                sb_puts(&list, allowed[k]);
            }
            return fmt("unknown retry condition %Q (one of: %s)", condition, sb_cstr(&list));
        }
        if (b.n) sb_putc(&b, ',');
        sb_str(&b, condition);
    }
    *out = (str_t){sb_cstr(&b), b.n};
    return NULL;
}
