/* safetensors.h -- reading and writing the safetensors file format.
 *
 * Layout: 8-byte little-endian header length N, N bytes of JSON header, then
 * the data section. The header maps tensor names to {"dtype", "shape",
 * "data_offsets": [begin, end]} (offsets relative to the data section) plus
 * an optional "__metadata__" object of string -> string.
 *
 * sft_open() maps the file and validates everything before anyone reads a
 * byte of data: N against the file size, the JSON (strictly, see json.h),
 * each entry's keys and types, the dtype, shape x dtype size == end - begin
 * (without overflow), and that the data_offsets of all tensors tile the data
 * section exactly: starting at 0, no gap, no overlap, ending at the end of
 * the file. Every error names the file and, where there is one, the tensor.
 *
 * The data section may start at any byte offset (N need not be a multiple
 * of 8), so tensor data is only ever copied out with sft_read_f32(), never
 * addressed as float through a cast pointer. Little-endian hosts only. */
#ifndef ATTNSWEEP_SAFETENSORS_H
#define ATTNSWEEP_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "errors.h"

#define SFT_MAX_DIMS 8
#define SFT_MAX_NAME 256

typedef enum {
    SFT_BOOL, SFT_U8, SFT_I8, SFT_I16, SFT_U16, SFT_F16, SFT_BF16, SFT_I32, SFT_U32, SFT_F32,
    SFT_F64, SFT_I64, SFT_U64, SFT_F8_E4M3, SFT_F8_E5M2,
} sft_dtype;

typedef struct {
    char name[SFT_MAX_NAME];
    sft_dtype dtype;
    size_t ndim;
    size_t shape[SFT_MAX_DIMS];
    size_t numel;
    size_t begin, end; /* byte range within the data section */
} sft_tensor;

typedef struct {
    char path[4096];
    const unsigned char *map; /* the whole file, read-only */
    size_t file_size;
    size_t header_len;        /* N */
    const unsigned char *data; /* map + 8 + N: possibly unaligned */
    size_t data_len;
    sft_tensor *tensors;       /* in header order */
    size_t n_tensors;
} sft_file;

/* "F32", "BF16", ...; and its size in bytes. */
const char *sft_dtype_name(sft_dtype dtype);
size_t sft_dtype_size(sft_dtype dtype);

/* Maps and validates PATH. On failure nothing is left open. */
int sft_open(sft_file *f, const char *path, as_err *err);
void sft_close(sft_file *f);

/* The tensor with exactly this name, or NULL. */
const sft_tensor *sft_find(const sft_file *f, const char *name);

/* Copies tensor t into dst (t->numel floats, any alignment) converting
 * F32, F16 and BF16 to float32; any other dtype is an error. A NaN or an
 * infinity in the data is an error naming the tensor and the element. */
int sft_read_f32(const sft_file *f, const sft_tensor *t, float *dst, as_err *err);

/* Tells the kernel the mapped pages wholly inside tensor t are no longer
 * needed (madvise MADV_DONTNEED on the read-only private map: a later read
 * maps them again from the file). A loader that has copied t calls it so that
 * the file's pages do not sit in its RSS next to the float32 copy (gpt2-xl:
 * 3.2 GB of BF16 next to a 6.2 GB arena). Never fails. */
void sft_release(const sft_file *f, const sft_tensor *t);
/* The same for the file bytes [from, to). */
void sft_release_bytes(const sft_file *f, size_t from, size_t to);

/* Half-precision conversions (exact: every F16/BF16 value is a float32,
 * subnormals included; inf and NaN map to inf and NaN, NaN payloads kept). */
float sft_f16_to_f32(uint16_t h);
float sft_bf16_to_f32(uint16_t b);

/* The other way, round to nearest, ties to even (IEEE 754's default, and what
 * torch's .to(torch.float16 / torch.bfloat16) does): F16 overflows to inf
 * beyond 65504 and underflows through its subnormals to signed zero; NaN stays
 * a (quiet) NaN. For writing test and synthetic files; the reader never rounds. */
uint16_t sft_f32_to_f16(float v);
uint16_t sft_f32_to_bf16(float v);

/* --- writing --------------------------------------------------------------
 * The header is built from specs (data laid out in the order given, tightly
 * packed) and padded with spaces to a multiple of 8 bytes as the reference
 * implementation does; the caller then writes each tensor's bytes in order. */
typedef struct {
    const char *name;
    sft_dtype dtype;
    size_t ndim;
    size_t shape[SFT_MAX_DIMS];
} sft_spec;

/* Returns a malloc'd buffer "N(8 bytes) + header JSON" in *out, its size in
 * *out_len, and the total data section size in *data_len. metadata_json is
 * NULL or the text of a JSON object of strings to store as __metadata__. */
int sft_header_build(unsigned char **out, size_t *out_len, size_t *data_len, const sft_spec *specs,
                    size_t n, const char *metadata_json, as_err *err);

#endif
