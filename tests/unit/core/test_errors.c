/* test_errors.c -- the error-reporting convention. */
#include <string.h>

#include "check.h"
#include "errors.h"

int main(void) {
    as_err err = {{0}};
    CHECK(as_fail(&err, "%s: tensor %s missing", "m.safetensors", "wte") == -1, "returns -1");
    CHECK(!strcmp(err.msg, "m.safetensors: tensor wte missing"), "msg: %s", err.msg);
    CHECK(as_wrap(&err, "loading %s", "models/tiny") == -1, "wrap returns -1");
    CHECK(!strcmp(err.msg, "loading models/tiny: m.safetensors: tensor wte missing"), "msg: %s",
          err.msg);
    CHECK(as_fail(NULL, "no crash") == -1, "NULL err allowed");
    as_fail(&err, "%s: bad", "a\nb\tc\x01");
    CHECK(!strcmp(err.msg, "a\\nb\\tc\\x01: bad"), "control characters escaped: %s", err.msg);
    as_wrap(&err, "in \r");
    CHECK(!strchr(err.msg, '\r') && strstr(err.msg, "in \\r: "), "wrap escapes too: %s", err.msg);
    CHECK_CLOSE(1.0 + 1e-12, 1.0, 0.0, 1e-9, "close");
    return check_summary("test_errors");
}
