/* safetensors.c -- see safetensors.h. */
#include "safetensors.h"
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"

/* A header larger than this is not a model file (GPT-2 xl's is ~20 KB). */
#define ST_MAX_HEADER (100u * 1024u * 1024u)

static const struct {
    const char *name;
    sft_dtype dtype;
    size_t size;
} dtypes[] = {
    {"BOOL", SFT_BOOL, 1}, {"U8", SFT_U8, 1},       {"I8", SFT_I8, 1},
    {"I16", SFT_I16, 2},   {"U16", SFT_U16, 2},     {"F16", SFT_F16, 2},
    {"BF16", SFT_BF16, 2}, {"I32", SFT_I32, 4},     {"U32", SFT_U32, 4},
    {"F32", SFT_F32, 4},   {"F64", SFT_F64, 8},     {"I64", SFT_I64, 8},
    {"U64", SFT_U64, 8},   {"F8_E4M3", SFT_F8_E4M3, 1}, {"F8_E5M2", SFT_F8_E5M2, 1},
};
enum { N_DTYPES = sizeof dtypes / sizeof dtypes[0] };

const char *sft_dtype_name(sft_dtype dtype) {
    for (size_t i = 0; i < N_DTYPES; i++)
        if (dtypes[i].dtype == dtype) return dtypes[i].name;
    return "?";
}

size_t sft_dtype_size(sft_dtype dtype) {
    for (size_t i = 0; i < N_DTYPES; i++)
        if (dtypes[i].dtype == dtype) return dtypes[i].size;
    return 0;
}

static int is_little_endian(void) {
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

void sft_close(sft_file *f) {
    if (!f) return;
    if (f->map) munmap((void *)f->map, f->file_size);
    free(f->tensors);
    f->map = NULL;
    f->tensors = NULL;
    f->n_tensors = 0;
}

const sft_tensor *sft_find(const sft_file *f, const char *name) {
    for (size_t i = 0; i < f->n_tensors; i++)
        if (!strcmp(f->tensors[i].name, name)) return &f->tensors[i];
    return NULL;
}

/* Fills t from one header entry; err names the tensor. */
static int parse_entry(sft_tensor *t, const char *path, const json_member *m, as_err *err) {
    const json_value *v = &m->value;
    if (m->key_len == 0) return as_fail(err, "%s: tensor with an empty name", path);
    if (m->key_len >= SFT_MAX_NAME || memchr(m->key, '\0', m->key_len))
        return as_fail(err, "%s: tensor name too long or containing NUL (\"%.60s...\")", path,
                       m->key);
    memcpy(t->name, m->key, m->key_len + 1);
    if (v->type != JSON_OBJECT)
        return as_fail(err, "%s: tensor %s: entry is a %s, expected an object", path, t->name,
                       json_type_name(v->type));
    for (size_t i = 0; i < v->u.object.count; i++) {
        const char *k = v->u.object.members[i].key;
        if (strcmp(k, "dtype") && strcmp(k, "shape") && strcmp(k, "data_offsets"))
            return as_fail(err, "%s: tensor %s: unknown key \"%s\"", path, t->name, k);
    }
    const json_value *dtype = json_get(v, "dtype");
    const json_value *shape = json_get(v, "shape");
    const json_value *offsets = json_get(v, "data_offsets");
    if (!dtype || dtype->type != JSON_STRING)
        return as_fail(err, "%s: tensor %s: \"dtype\" missing or not a string", path, t->name);
    size_t i;
    for (i = 0; i < N_DTYPES; i++)
        if (!strcmp(dtype->u.string.ptr, dtypes[i].name)) break;
    if (i == N_DTYPES)
        return as_fail(err, "%s: tensor %s: unknown dtype \"%s\"", path, t->name,
                       dtype->u.string.ptr);
    t->dtype = dtypes[i].dtype;
    size_t elem = dtypes[i].size;

    if (!shape || shape->type != JSON_ARRAY)
        return as_fail(err, "%s: tensor %s: \"shape\" missing or not an array", path, t->name);
    if (shape->u.array.count > SFT_MAX_DIMS)
        return as_fail(err, "%s: tensor %s: %zu dimensions (at most %d)", path, t->name,
                       shape->u.array.count, SFT_MAX_DIMS);
    t->ndim = shape->u.array.count;
    t->numel = 1;
    for (size_t d = 0; d < t->ndim; d++) {
        size_t n;
        if (json_get_size(&shape->u.array.items[d], &n))
            return as_fail(err, "%s: tensor %s: shape[%zu] is not a non-negative integer", path,
                           t->name, d);
        t->shape[d] = n;
        if (n && t->numel > SIZE_MAX / n)
            return as_fail(err, "%s: tensor %s: shape overflows", path, t->name);
        t->numel *= n;
    }
    if (t->numel > SIZE_MAX / elem)
        return as_fail(err, "%s: tensor %s: shape overflows", path, t->name);

    if (!offsets || offsets->type != JSON_ARRAY || offsets->u.array.count != 2)
        return as_fail(err, "%s: tensor %s: \"data_offsets\" missing or not [begin, end]", path,
                       t->name);
    if (json_get_size(&offsets->u.array.items[0], &t->begin) ||
        json_get_size(&offsets->u.array.items[1], &t->end))
        return as_fail(err, "%s: tensor %s: data_offsets are not non-negative integers", path,
                       t->name);
    if (t->end < t->begin)
        return as_fail(err, "%s: tensor %s: data_offsets [%zu, %zu] end before they begin", path,
                       t->name, t->begin, t->end);
    if (t->end - t->begin != t->numel * elem)
        return as_fail(err,
                       "%s: tensor %s: data_offsets [%zu, %zu] span %zu bytes but shape x %s "
                       "needs %zu",
                       path, t->name, t->begin, t->end, t->end - t->begin, dtypes[i].name,
                       t->numel * elem);
    return 0;
}

static const sft_tensor *sort_base;
static int by_offsets(const void *a, const void *b) {
    const sft_tensor *x = &sort_base[*(const size_t *)a], *y = &sort_base[*(const size_t *)b];
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

/* The data_offsets must cover [0, data_len) exactly once. */
static int check_tiling(const sft_file *f, as_err *err) {
    for (size_t i = 0; i < f->n_tensors; i++) {
        const sft_tensor *t = &f->tensors[i];
        if (t->end > f->data_len)
            return as_fail(err,
                           "%s: tensor %s: data_offsets [%zu, %zu] run past the end of the data "
                           "section (%zu bytes)",
                           f->path, t->name, t->begin, t->end, f->data_len);
    }
    size_t *order = malloc((f->n_tensors + 1) * sizeof *order);
    if (!order) return as_fail(err, "%s: out of memory", f->path);
    for (size_t i = 0; i < f->n_tensors; i++) order[i] = i;
    sort_base = f->tensors;
    qsort(order, f->n_tensors, sizeof *order, by_offsets);
    size_t covered = 0;
    const sft_tensor *prev = NULL;
    int rc = 0;
    for (size_t i = 0; i < f->n_tensors && !rc; i++) {
        const sft_tensor *t = &f->tensors[order[i]];
        if (t->begin < covered)
            rc = as_fail(err, "%s: tensor %s: data_offsets [%zu, %zu] overlap tensor %s [%zu, %zu]",
                         f->path, t->name, t->begin, t->end, prev->name, prev->begin, prev->end);
        else if (t->begin > covered)
            rc = as_fail(err,
                         "%s: tensor %s: data_offsets [%zu, %zu] leave a gap: bytes [%zu, %zu) of "
                         "the data section belong to no tensor",
                         f->path, t->name, t->begin, t->end, covered, t->begin);
        if (t->end > t->begin || !prev) prev = t;
        if (t->end > covered) covered = t->end;
    }
    free(order);
    if (!rc && covered != f->data_len)
        rc = as_fail(err,
                     "%s: %zu bytes after the last tensor: the data section is %zu bytes but the "
                     "tensors cover %zu",
                     f->path, f->data_len - covered, f->data_len, covered);
    return rc;
}

int sft_open(sft_file *f, const char *path, as_err *err) {
    memset(f, 0, sizeof *f);
    if (strlen(path) >= sizeof f->path) return as_fail(err, "%s: path too long", path);
    strcpy(f->path, path);
    if (!is_little_endian()) return as_fail(err, "%s: big-endian hosts are not supported", path);
    uint64_t size = 0;
    int fd = fileio_open_regular(path, 0, &size, err); /* a FIFO would block open() */
    if (fd < 0) return -1;
    f->file_size = (size_t)size;
    if (f->file_size < 8) {
        close(fd);
        return as_fail(err, "%s: file is %zu bytes, too short for the 8-byte header length", path,
                       f->file_size);
    }
    void *map = mmap(NULL, f->file_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int map_errno = errno;
    close(fd);
    if (map == MAP_FAILED) return as_fail(err, "%s: cannot mmap: %s", path, strerror(map_errno));
    f->map = map;

    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | f->map[i];
    if (n > f->file_size - 8) {
        as_fail(err, "%s: header length %llu exceeds the %zu bytes after it (file truncated?)",
                path, (unsigned long long)n, f->file_size - 8);
        goto fail;
    }
    if (n > ST_MAX_HEADER) {
        as_fail(err, "%s: header length %llu is implausibly large", path, (unsigned long long)n);
        goto fail;
    }
    f->header_len = (size_t)n;
    f->data = f->map + 8 + f->header_len;
    f->data_len = f->file_size - 8 - f->header_len;

    json_doc *doc = json_parse((const char *)f->map + 8, f->header_len, err);
    if (!doc) {
        as_wrap(err, "%s: header JSON", path);
        goto fail;
    }
    const json_value *root = json_root(doc);
    if (root->type != JSON_OBJECT) {
        as_fail(err, "%s: header JSON is a %s, expected an object", path,
                json_type_name(root->type));
        goto fail_doc;
    }
    f->tensors = calloc(root->u.object.count + 1, sizeof *f->tensors);
    if (!f->tensors) {
        as_fail(err, "%s: out of memory", path);
        goto fail_doc;
    }
    for (size_t i = 0; i < root->u.object.count; i++) {
        const json_member *m = &root->u.object.members[i];
        if (!strcmp(m->key, "__metadata__")) {
            if (m->value.type != JSON_OBJECT) {
                as_fail(err, "%s: __metadata__ is a %s, expected an object", path,
                        json_type_name(m->value.type));
                goto fail_doc;
            }
            for (size_t j = 0; j < m->value.u.object.count; j++)
                if (m->value.u.object.members[j].value.type != JSON_STRING) {
                    as_fail(err, "%s: __metadata__ key \"%s\" is not a string", path,
                            m->value.u.object.members[j].key);
                    goto fail_doc;
                }
            continue;
        }
        if (parse_entry(&f->tensors[f->n_tensors], path, m, err)) goto fail_doc;
        f->n_tensors++;
    }
    json_free(doc);
    if (check_tiling(f, err)) goto fail;
    madvise((void *)f->map, f->file_size, MADV_SEQUENTIAL);
    return 0;
fail_doc:
    json_free(doc);
fail:
    sft_close(f);
    return -1;
}

void sft_release_bytes(const sft_file *f, size_t from, size_t to) {
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0 || !f->map || to > f->file_size) return;
    size_t p = (size_t)page;
    from = (from + p - 1) / p * p; /* first page wholly inside */
    to = to == f->file_size ? (to + p - 1) / p * p : to / p * p; /* the map's last page is ours */
    if (to > from) madvise((void *)(f->map + from), to - from, MADV_DONTNEED);
}

void sft_release(const sft_file *f, const sft_tensor *t) {
    size_t data_start = (size_t)(f->data - f->map);
    sft_release_bytes(f, data_start + t->begin, data_start + t->end);
}

float sft_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31;
    uint32_t exp = (h >> 10) & 0x1F;
    uint32_t mant = h & 0x3FF;
    uint32_t bits;
    if (exp == 0x1F) {
        bits = sign | 0x7F800000u | (mant << 13); /* inf or NaN */
    } else if (exp != 0) {
        bits = sign | ((exp + 112) << 23) | (mant << 13); /* rebias 15 -> 127 */
    } else if (mant == 0) {
        bits = sign;
    } else {
        /* subnormal: mant * 2^-24, exact in float */
        float v = (float)mant * 0x1p-24f;
        memcpy(&bits, &v, 4);
        bits |= sign;
    }
    float out;
    memcpy(&out, &bits, 4);
    return out;
}

float sft_bf16_to_f32(uint16_t b) {
    uint32_t bits = (uint32_t)b << 16;
    float out;
    memcpy(&out, &bits, 4);
    return out;
}

uint16_t sft_f32_to_bf16(float v) {
    uint32_t bits;
    memcpy(&bits, &v, 4);
    if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((bits >> 16) | 0x0040u); /* NaN */
    /* add half an ulp of bf16, minus one unless the kept part is odd (ties to even);
     * a carry into the exponent is the correct rounding up, up to inf */
    bits += 0x7FFFu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}

uint16_t sft_f32_to_f16(float v) {
    uint32_t bits;
    memcpy(&bits, &v, 4);
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    uint32_t abs = bits & 0x7FFFFFFFu;
    if (abs > 0x7F800000u) return (uint16_t)(sign | 0x7E00u | ((abs >> 13) & 0x3FFu)); /* NaN */
    if (abs >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u); /* >= 65520 rounds to inf */
    if (abs >= 0x38800000u) { /* >= 2^-14: normal in F16 */
        uint32_t r = abs + 0xFFFu + ((abs >> 13) & 1u);
        return (uint16_t)(sign | ((r - (112u << 23)) >> 13));
    }
    /* subnormal or zero: |v| / 2^-24 rounded to an integer in [0, 1024], ties to
     * even; 1024 is the smallest normal, which the bit pattern encodes as is */
    float scaled = fabsf(v) * 0x1p24f; /* exact: a power-of-two scaling, no overflow */
    uint32_t n = (uint32_t)scaled;
    float frac = scaled - (float)n; /* exact: scaled < 1024 has <= 10 integer bits */
    if (frac > 0.5f || (frac == 0.5f && (n & 1u))) n++;
    return (uint16_t)(sign | n);
}

int sft_read_f32(const sft_file *f, const sft_tensor *t, float *dst, as_err *err) {
    const unsigned char *src = f->data + t->begin;
    switch (t->dtype) {
    case SFT_F32: memcpy(dst, src, t->numel * 4); break;
    case SFT_F16:
        for (size_t i = 0; i < t->numel; i++)
            dst[i] = sft_f16_to_f32((uint16_t)(src[2 * i] | (src[2 * i + 1] << 8)));
        break;
    case SFT_BF16:
        for (size_t i = 0; i < t->numel; i++)
            dst[i] = sft_bf16_to_f32((uint16_t)(src[2 * i] | (src[2 * i + 1] << 8)));
        break;
    default:
        return as_fail(err, "%s: tensor %s has dtype %s; only F32, F16 and BF16 are supported",
                       f->path, t->name, sft_dtype_name(t->dtype));
    }
    for (size_t i = 0; i < t->numel; i++)
        if (!isfinite(dst[i]))
            return as_fail(err, "%s: tensor %s: element %zu is %s", f->path, t->name, i,
                           isnan(dst[i]) ? "NaN" : "infinite");
    return 0;
}

/* --- writing --- */

typedef struct {
    char *buf;
    size_t len, cap;
    int oom;
} strbuf;

static void sb_add(strbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n + 1) cap *= 2;
        char *grown = realloc(b->buf, cap);
        if (!grown) {
            b->oom = 1;
            return;
        }
        b->buf = grown;
        b->cap = cap;
    }
    memcpy(b->buf + b->len, s, n);
    b->len += n;
    b->buf[b->len] = '\0';
}

static void sb_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_printf(strbuf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp) {
        b->oom = 1;
        return;
    }
    sb_add(b, tmp, (size_t)n);
}

static void sb_json_string(strbuf *b, const char *s) {
    sb_add(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            sb_add(b, esc, 2);
        } else if (c < 0x20) {
            sb_printf(b, "\\u%04x", c);
        } else {
            sb_add(b, (const char *)&c, 1);
        }
    }
    sb_add(b, "\"", 1);
}

int sft_header_build(unsigned char **out, size_t *out_len, size_t *data_len, const sft_spec *specs,
                    size_t n, const char *metadata_json, as_err *err) {
    strbuf b = {0};
    sb_add(&b, "\0\0\0\0\0\0\0\0{", 9);
    int first = 1;
    if (metadata_json) {
        sb_add(&b, "\"__metadata__\":", 15);
        sb_add(&b, metadata_json, strlen(metadata_json));
        first = 0;
    }
    size_t offset = 0;
    for (size_t i = 0; i < n; i++) {
        const sft_spec *s = &specs[i];
        size_t bytes = sft_dtype_size(s->dtype);
        if (!bytes || s->ndim > SFT_MAX_DIMS) {
            free(b.buf);
            return as_fail(err, "tensor %s: bad dtype or rank", s->name);
        }
        if (!first) sb_add(&b, ",", 1);
        first = 0;
        sb_json_string(&b, s->name);
        sb_printf(&b, ":{\"dtype\":\"%s\",\"shape\":[", sft_dtype_name(s->dtype));
        for (size_t d = 0; d < s->ndim; d++) {
            sb_printf(&b, d ? ",%zu" : "%zu", s->shape[d]);
            bytes *= s->shape[d];
        }
        sb_printf(&b, "],\"data_offsets\":[%zu,%zu]}", offset, offset + bytes);
        offset += bytes;
    }
    sb_add(&b, "}", 1);
    while (b.len % 8) sb_add(&b, " ", 1);
    if (b.oom) {
        free(b.buf);
        return as_fail(err, "out of memory building a safetensors header");
    }
    uint64_t header_len = b.len - 8;
    for (int i = 0; i < 8; i++) b.buf[i] = (char)((header_len >> (8 * i)) & 0xFF);
    *out = (unsigned char *)b.buf;
    *out_len = b.len;
    *data_len = offset;
    return 0;
}
