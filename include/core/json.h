/* json.h -- a small strict JSON (RFC 8259) parser.
 *
 * json_parse() reads a whole document into a tree owned by one json_doc.
 * It accepts exactly RFC 8259: no comments, no trailing commas, no NaN, no
 * leading zeros, no control characters inside strings, valid UTF-8 only,
 * \uXXXX escapes with surrogate pairs joined (a lone surrogate is an error).
 * Duplicate keys in one object are an error (they make "which one wins"
 * ambiguous, and safetensors forbids them). Nesting deeper than
 * JSON_MAX_DEPTH is an error, so hostile input cannot exhaust the stack.
 * Every error message starts with "byte N:" -- the offset into the text.
 *
 * Strings are decoded to UTF-8, NUL-terminated, and carry their length
 * (a \u0000 escape may embed a NUL). Objects keep their members in file
 * order for iteration; json_get() is O(1) on average for large objects
 * (a hash index is built at parse time), so a 50257-key vocab.json can be
 * both iterated and queried.
 *
 * Numbers are kept as double (exact for integers up to 2^53);
 * json_get_size() / json_get_int64() check that a number is integral and in
 * range. The text need not be NUL-terminated. */
#ifndef ATTNSWEEP_JSON_H
#define ATTNSWEEP_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "errors.h"

#define JSON_MAX_DEPTH 64

typedef enum {
    JSON_NULL,
    JSON_FALSE,
    JSON_TRUE,
    JSON_NUMBER,
    JSON_STRING,
    JSON_ARRAY,
    JSON_OBJECT,
} json_type;

typedef struct json_value json_value;
typedef struct json_member json_member;

struct json_value {
    json_type type;
    size_t offset; /* byte offset of the value's first character in the text */
    union {
        double number;
        struct {
            const char *ptr; /* NUL-terminated UTF-8 */
            size_t len;
        } string;
        struct {
            json_value *items;
            size_t count;
        } array;
        struct {
            json_member *members; /* file order */
            size_t count;
            uint32_t *index; /* open-addressing hash of member positions + 1; NULL when small */
            size_t index_cap;
        } object;
    } u;
};

struct json_member {
    const char *key; /* NUL-terminated UTF-8 */
    size_t key_len;
    json_value value;
};

typedef struct json_doc json_doc;

/* Parses text[0..len). Returns NULL and fills err ("byte N: ...") on failure. */
json_doc *json_parse(const char *text, size_t len, as_err *err);
const json_value *json_root(const json_doc *doc);
void json_free(json_doc *doc);

/* Reads (fileio_read_all: a regular file of at most JSON_FILE_MAX_BYTES) and
 * parses a whole file; errors are prefixed with the path. */
#define JSON_FILE_MAX_BYTES ((size_t)64 << 20)
json_doc *json_parse_file(const char *path, as_err *err);

/* Member of an object by key, or NULL (also NULL when obj is not an object). */
const json_value *json_get(const json_value *obj, const char *key);
const json_value *json_get_n(const json_value *obj, const char *key, size_t key_len);

/* "null", "boolean", "number", "string", "array", "object" -- for messages. */
const char *json_type_name(json_type type);

/* Integral number in [0, SIZE_MAX] and exactly representable (<= 2^53): 0, else -1. */
int json_get_size(const json_value *v, size_t *out);
/* Integral number in [-2^53, 2^53]: 0, else -1. */
int json_get_int64(const json_value *v, int64_t *out);

#endif
