// The size of a regular expression's RE2 program, as Envoy measures it before it accepts a
// `safe_regex` (its default limit is 100). A C entry point over Debian's libre2, called from
// `src/re2.rs`.
#include <re2/re2.h>

#include <cstddef>
#include <cstring>
#include <string>

// Compiles `pattern` (`len` bytes) with RE2's defaults, quietly, as Envoy does. Returns the
// program's size, or -1 with RE2's error copied (NUL-terminated, clipped) into `error`.
extern "C" int xdst_re2_program_size(const char* pattern, size_t len, char* error, size_t error_len) {
    RE2 re(re2::StringPiece(pattern, len), RE2::Quiet);
    if (!re.ok()) {
        const std::string& why = re.error();
        if (error_len > 0) {
            size_t n = why.size() < error_len - 1 ? why.size() : error_len - 1;
            std::memcpy(error, why.data(), n);
            error[n] = '\0';
        }
        return -1;
    }
    return re.ProgramSize();
}
