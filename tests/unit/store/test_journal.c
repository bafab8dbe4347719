/* test_journal.c -- the append-only journal: round trip, CRC32 against the
 * standard check value, torn tails (truncated mid-record) ignored read-only
 * and cut off writable, corruption ends the valid journal, bad headers refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "journal.h"

static const char *path = "test_journal.tmp.journal";

static void payload_of(unsigned char *buf, size_t n, int seed) {
    for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)(seed * 31 + i * 7);
}

static long long file_size(const char *p) {
    struct stat st;
    return stat(p, &st) ? -1 : (long long)st.st_size;
}

/* Counts the records and checks each payload against payload_of(). */
static int count_records(journal *j, int *bad_payloads) {
    as_err err;
    journal_record r;
    int n = 0;
    *bad_payloads = 0;
    journal_rewind(j);
    while (journal_next(j, &r, &err) == 1) {
        unsigned char got[4096], want[4096];
        if (r.payload_len > sizeof got) {
            (*bad_payloads)++;
            continue;
        }
        if (journal_read_payload(j, &r, got, &err)) (*bad_payloads)++;
        payload_of(want, r.payload_len, r.window);
        if (memcmp(got, want, r.payload_len)) (*bad_payloads)++;
        n++;
    }
    return n;
}

/* CRC-32 one bit at a time, straight from the definition (reflected polynomial
 * 0xEDB88320, complemented in and out): the reference for journal_crc32's table and
 * carry-less-multiply paths (src/store/crc32.c). */
static uint32_t crc32_bitwise(uint32_t crc, const unsigned char *p, size_t n) {
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1)));
    }
    return ~crc;
}

/* Every length up to 1,100 bytes at every alignment mod 16 (the fast path starts at 256
 * bytes and folds 64 at a time, so heads, tails and block counts are all covered), one
 * 3 MB run, and a long run split at odd places: equal to the bitwise CRC. */
static void test_crc32_paths(void) {
    size_t big = 3u << 20;
    unsigned char *buf = malloc(big + 16);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < big + 16; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        buf[i] = (unsigned char)(x >> 24);
    }
    int bad = 0;
    for (size_t off = 0; off < 16; off++)
        for (size_t n = 0; n <= 1100; n++)
            if (journal_crc32(0, buf + off, n) != crc32_bitwise(0, buf + off, n)) bad++;
    CHECK(bad == 0, "crc32: %d (offset, length) pairs differ from the bitwise CRC", bad);
    uint32_t want = crc32_bitwise(0, buf + 3, big);
    CHECK(journal_crc32(0, buf + 3, big) == want, "crc32 of 3 MB");
    uint32_t c = journal_crc32(0, buf + 3, 1000);
    c = journal_crc32(c, buf + 1003, 77777);
    c = journal_crc32(c, buf + 78780, big - 78777);
    CHECK(c == want, "crc32 of 3 MB continued over three calls");
    CHECK(journal_crc32(0x12345678u, buf, 4096) == crc32_bitwise(0x12345678u, buf, 4096),
          "crc32 continued from a nonzero crc");
    free(buf);
}

int main(void) {
    as_err err = {{0}};
    test_crc32_paths();
    /* The CRC-32 check value of "123456789" (IEEE 802.3, as zlib) is CBF43926. */
    CHECK(journal_crc32(0, "123456789", 9) == 0xCBF43926u, "crc32 %08x",
          journal_crc32(0, "123456789", 9));
    CHECK(journal_crc32(journal_crc32(0, "1234", 4), "56789", 5) == 0xCBF43926u, "crc32 continued");

    unlink(path);
    journal_header h = {.layout = {3, 2, 2, 2, 2, 3}, .payload_bytes = 1000, .axes_fingerprint = 42};
    snprintf(h.config_sha256, sizeof h.config_sha256, "%064d", 7);
    journal *j = journal_create(path, &h, &err);
    CHECK(j != NULL, "create: %s", err.msg);
    if (!j) return check_summary("test_journal");
    CHECK(journal_create(path, &h, &err) == NULL, "second create of an existing journal must fail");

    unsigned char buf[4096];
    for (int i = 0; i < 5; i++) {
        journal_record r = {.type = JR_COMMIT, .window = i, .L = 16 * (i + 1), .status = 1,
                            .attempt = 1, .rank = i + 1, .window_start = 512LL * i,
                            .t_start = 1e9 + i, .t_end = 1e9 + i + 0.5, .wall_time = 0.5,
                            .payload_len = 1000};
        payload_of(buf, 1000, i);
        CHECK(journal_append(j, &r, buf, &err) == 0, "append %d: %s", i, err.msg);
    }
    CHECK(journal_sync(j, &err) == 0, "sync: %s", err.msg);
    long long full = file_size(path);
    CHECK(full == JOURNAL_HEADER_BYTES + 5 * (JOURNAL_RECORD_BYTES + 1000), "size %lld", full);
    journal_close(j);

    /* Round trip. */
    journal_header got;
    off_t torn = -1;
    j = journal_open(path, 0, &got, &torn, &err);
    CHECK(j != NULL, "open: %s", err.msg);
    if (j) {
        CHECK(torn == 0, "no torn tail, got %lld", (long long)torn);
        CHECK(!memcmp(&got.layout, &h.layout, sizeof h.layout) && got.payload_bytes == 1000 &&
                  got.axes_fingerprint == 42 && !strcmp(got.config_sha256, h.config_sha256),
              "header round trip");
        journal_record r;
        int n = 0;
        while (journal_next(j, &r, &err) == 1) {
            CHECK(r.type == JR_COMMIT && r.window == n && r.L == 16 * (n + 1) && r.rank == n + 1 &&
                      r.window_start == 512LL * n && r.t_start == 1e9 + n && r.wall_time == 0.5,
                  "record %d fields", n);
            n++;
        }
        CHECK(n == 5, "5 records, got %d", n);
        int bad;
        CHECK(count_records(j, &bad) == 5 && bad == 0, "payloads intact (%d bad)", bad);
        journal_close(j);
    }

    /* A crash mid-record: cut the last record in the middle of its payload. */
    CHECK(truncate(path, full - 400) == 0, "truncate");
    j = journal_open(path, 0, NULL, &torn, &err);
    CHECK(j != NULL, "open torn read-only: %s", err.msg);
    if (j) {
        int bad, n = count_records(j, &bad);
        CHECK(n == 4 && bad == 0, "torn record ignored: %d records, %d bad", n, bad);
        CHECK(torn == JOURNAL_RECORD_BYTES + 600, "torn bytes %lld", (long long)torn);
        journal_close(j);
    }
    CHECK(file_size(path) == full - 400, "read-only open leaves the file alone");
    /* Cut inside the fixed fields of the record too. */
    CHECK(truncate(path, full - 1000 - 30) == 0, "truncate in fields");
    j = journal_open(path, JOURNAL_WRITABLE, NULL, &torn, &err);
    CHECK(j != NULL, "open torn writable: %s", err.msg);
    if (j) {
        int bad;
        CHECK(count_records(j, &bad) == 4, "4 records after a cut in the fields");
        long long cut = file_size(path);
        CHECK(cut == full - (JOURNAL_RECORD_BYTES + 1000), "writable open truncated to %lld", cut);
        /* Appending after the cut yields a valid journal again. */
        journal_record r = {.type = JR_DISPATCH, .window = 9, .L = 16, .payload_len = 10};
        payload_of(buf, 10, 9);
        CHECK(journal_append(j, &r, buf, &err) == 0 && journal_sync(j, &err) == 0, "append after cut");
        journal_close(j);
        j = journal_open(path, 0, NULL, &torn, &err);
        CHECK(j && count_records(j, &bad) == 5 && bad == 0 && torn == 0, "5 valid records after append");
        journal_close(j);
    }

    /* A flipped payload byte in record 2 (of 5) is damage in the middle, not a torn
     * tail: records 0, 1, 3, 4 are kept, record 2 is skipped and reported, and a
     * writable open truncates nothing. */
    FILE *f = fopen(path, "r+b");
    long at = JOURNAL_HEADER_BYTES + 2 * (JOURNAL_RECORD_BYTES + 1000) + JOURNAL_RECORD_BYTES + 10;
    fseek(f, at, SEEK_SET);
    int c = fgetc(f);
    fseek(f, at, SEEK_SET);
    fputc(c ^ 0xFF, f);
    fclose(f);
    struct stat before_st;
    stat(path, &before_st);
    for (int writable = 0; writable < 2; writable++) {
        j = journal_open(path, writable ? JOURNAL_WRITABLE : 0, NULL, &torn, &err);
        CHECK(j != NULL, "open damaged journal: %s", err.msg);
        if (!j) continue;
        int bad;
        size_t nd;
        const journal_damage *d = journal_damaged(j, &nd);
        off_t rec2 = JOURNAL_HEADER_BYTES + 2 * (JOURNAL_RECORD_BYTES + 1000);
        CHECK(count_records(j, &bad) == 4 && bad == 0, "damaged record 2 skipped, 4 kept");
        CHECK(nd == 1 && d[0].start == rec2 && d[0].end == rec2 + JOURNAL_RECORD_BYTES + 1000 &&
              d[0].records == 1, "damage reported as record 2's bytes");
        CHECK(torn == 0, "damage in the middle is no torn tail (%lld)", (long long)torn);
        journal_close(j);
    }
    struct stat after_st;
    stat(path, &after_st);
    CHECK(after_st.st_size == before_st.st_size, "writable open truncated nothing");
    /* With payload checks skipped (the status command's quick look) it is seen. */
    j = journal_open(path, JOURNAL_SKIP_PAYLOAD_CRC, NULL, &torn, &err);
    if (j) {
        journal_record r;
        int n = 0;
        while (journal_next(j, &r, &err) == 1) n++;
        CHECK(n == 5, "quick open counts %d records", n);
        journal_close(j);
    }

    /* A damaged header is refused with a message naming the file. */
    f = fopen(path, "r+b");
    fseek(f, 20, SEEK_SET);
    fputc('x', f);
    fclose(f);
    j = journal_open(path, 0, NULL, NULL, &err);
    CHECK(j == NULL && strstr(err.msg, path), "bad header refused: %s", err.msg);
    journal_close(j);
    unlink(path);
    return check_summary("test_journal");
}
