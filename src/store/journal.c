/* journal.c -- see journal.h. */
#include "journal.h"
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

static const char journal_magic[8] = {'A', 'S', 'J', 'R', 'N', 'L', 0, 1};
#define RECORD_MAGIC 0x4C435341u /* "ASCL" */

struct journal {
    int fd;
    int writable;
    uint32_t version; /* of the header: 1 or 2 */
    off_t valid_end; /* end of the last valid record */
    off_t cursor;    /* journal_next position */
    journal_damage *damage; /* damaged ranges between valid records, ascending */
    size_t n_damage;
    char path[4096];
};

/* Full reads/writes at an offset, retrying short transfers and EINTR. */
static int pread_all(int fd, void *buf, size_t n, off_t at) {
    char *p = buf;
    while (n) {
        ssize_t r = pread(fd, p, n, at);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r, n -= (size_t)r, at += r;
    }
    return 0;
}

static int pwrite_all(int fd, const void *buf, size_t n, off_t at) {
    const char *p = buf;
    while (n) {
        ssize_t r = pwrite(fd, p, n, at);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r, n -= (size_t)r, at += r;
    }
    return 0;
}

static void put(unsigned char *b, size_t *at, const void *v, size_t n) {
    memcpy(b + *at, v, n);
    *at += n;
}
static void get(const unsigned char *b, size_t *at, void *v, size_t n) {
    memcpy(v, b + *at, n);
    *at += n;
}

static void header_encode(unsigned char b[JOURNAL_HEADER_BYTES], const journal_header *h) {
    memset(b, 0, JOURNAL_HEADER_BYTES);
    size_t at = 0;
    uint32_t version = JOURNAL_VERSION, size = JOURNAL_HEADER_BYTES;
    put(b, &at, journal_magic, 8);
    put(b, &at, &version, 4);
    put(b, &at, &size, 4);
    put(b, &at, h->config_sha256, 64);
    put(b, &at, h->layout, sizeof h->layout);
    put(b, &at, &h->payload_bytes, 8);
    put(b, &at, &h->axes_fingerprint, 8);
    uint32_t crc = journal_crc32(0, b, JOURNAL_HEADER_BYTES - 4);
    memcpy(b + JOURNAL_HEADER_BYTES - 4, &crc, 4);
}

static void record_encode(unsigned char b[JOURNAL_RECORD_BYTES], const journal_record *r,
                          uint32_t payload_crc) {
    memset(b, 0, JOURNAL_RECORD_BYTES);
    size_t at = 0;
    uint32_t magic = RECORD_MAGIC;
    put(b, &at, &magic, 4);
    put(b, &at, &r->type, 4);
    put(b, &at, &r->window, 4);
    put(b, &at, &r->L, 4);
    put(b, &at, &r->status, 4);
    put(b, &at, &r->attempt, 4);
    put(b, &at, &r->rank, 4);
    uint32_t word = (r->flags & 0xffffu) | (r->model << 16); /* version 3 (journal.h) */
    put(b, &at, &word, 4);
    put(b, &at, &r->window_start, 8);
    put(b, &at, &r->t_start, 8);
    put(b, &at, &r->t_end, 8);
    put(b, &at, &r->wall_time, 8);
    put(b, &at, &r->payload_len, 8);
    put(b, &at, &payload_crc, 4);
    uint32_t crc = journal_crc32(0, b, at);
    put(b, &at, &crc, 4);
}

/* Returns 0 and fills r when the fields are intact, -1 otherwise. */
static int record_decode(const unsigned char b[JOURNAL_RECORD_BYTES], journal_record *r) {
    size_t at = 0;
    uint32_t magic, crc;
    get(b, &at, &magic, 4);
    if (magic != RECORD_MAGIC) return -1;
    get(b, &at, &r->type, 4);
    get(b, &at, &r->window, 4);
    get(b, &at, &r->L, 4);
    get(b, &at, &r->status, 4);
    get(b, &at, &r->attempt, 4);
    get(b, &at, &r->rank, 4);
    uint32_t word;
    get(b, &at, &word, 4);
    r->flags = word & 0xffffu;
    r->model = word >> 16;
    get(b, &at, &r->window_start, 8);
    get(b, &at, &r->t_start, 8);
    get(b, &at, &r->t_end, 8);
    get(b, &at, &r->wall_time, 8);
    get(b, &at, &r->payload_len, 8);
    get(b, &at, &r->payload_crc, 4);
    size_t covered = at;
    get(b, &at, &crc, 4);
    if (crc != journal_crc32(0, b, covered)) return -1;
    if (r->type < JR_CONFIG || r->type > JR_SEG_END) return -1;
    return 0;
}

static journal *journal_alloc(const char *path, int fd, int writable) {
    journal *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->fd = fd;
    j->writable = writable;
    snprintf(j->path, sizeof j->path, "%s", path);
    return j;
}

journal *journal_create(const char *path, const journal_header *hdr, as_err *err) {
    int fd = fileio_open_beside(path, O_RDWR | O_CREAT | O_EXCL, 0666, "create journal", err);
    if (fd < 0) return NULL;
    unsigned char b[JOURNAL_HEADER_BYTES];
    header_encode(b, hdr);
    if (pwrite_all(fd, b, sizeof b, 0) || fsync(fd)) {
        as_fail(err, "%s: cannot write journal header: %s", path, strerror(errno));
        close(fd);
        unlink(path);
        return NULL;
    }
    fileio_sync_parent_dir(path);
    journal *j = journal_alloc(path, fd, 1);
    if (!j) {
        close(fd);
        unlink(path);
        as_fail(err, "%s: out of memory", path);
        return NULL;
    }
    j->valid_end = j->cursor = JOURNAL_HEADER_BYTES;
    j->version = JOURNAL_VERSION;
    return j;
}

/* CRC of len bytes at offset, read in slices. */
static int crc_of_range(int fd, off_t at, uint64_t len, uint32_t *crc_out) {
    enum { SLICE = 1 << 20 };
    static unsigned char buf[SLICE];
    uint32_t crc = 0;
    while (len) {
        size_t n = len < SLICE ? (size_t)len : SLICE;
        if (pread_all(fd, buf, n, at)) return -1;
        crc = journal_crc32(crc, buf, n);
        at += (off_t)n, len -= n;
    }
    *crc_out = crc;
    return 0;
}

/* Is there a complete, intact record at pos? 0 and its payload length, else -1. */
static int record_at(int fd, off_t pos, off_t size, int flags, uint64_t *len) {
    unsigned char rb[JOURNAL_RECORD_BYTES];
    journal_record r;
    if (pos + JOURNAL_RECORD_BYTES > size) return -1;
    if (pread_all(fd, rb, sizeof rb, pos) || record_decode(rb, &r)) return -1;
    if (r.payload_len > (uint64_t)(size - pos - JOURNAL_RECORD_BYTES)) return -1;
    uint32_t pcrc;
    if (!(flags & JOURNAL_SKIP_PAYLOAD_CRC) &&
        (crc_of_range(fd, pos + JOURNAL_RECORD_BYTES, r.payload_len, &pcrc) || pcrc != r.payload_crc))
        return -1;
    *len = r.payload_len;
    return 0;
}

/* The first intact record after the bad one at bad (found by its magic, then checked
 * like any record: fields CRC, length, payload CRC), or -1 when none follows.
 * *records counts the record magics in the damaged range (at least 1): how many
 * records the damage took, as far as can be told. */
static off_t resync(int fd, off_t bad, off_t size, int flags, unsigned *records) {
    enum { CHUNK = 1 << 20 };
    static unsigned char buf[CHUNK + 3];
    const unsigned char magic[4] = {RECORD_MAGIC & 0xFF, RECORD_MAGIC >> 8 & 0xFF,
                                    RECORD_MAGIC >> 16 & 0xFF, RECORD_MAGIC >> 24};
    unsigned seen = 0;
    for (off_t at = bad; at < size; at += CHUNK) {
        size_t n = (size_t)(size - at < CHUNK + 3 ? size - at : CHUNK + 3);
        if (pread_all(fd, buf, n, at)) return -1;
        for (size_t i = 0; i + 4 <= n && i < CHUNK; i++) {
            if (memcmp(buf + i, magic, 4)) continue;
            uint64_t len;
            if (at + (off_t)i > bad && record_at(fd, at + (off_t)i, size, flags, &len) == 0) {
                *records = seen ? seen : 1;
                return at + (off_t)i;
            }
            seen++;
        }
    }
    return -1;
}

journal *journal_open(const char *path, int flags, journal_header *hdr, off_t *torn_bytes,
                      as_err *err) {
    int writable = (flags & JOURNAL_WRITABLE) != 0;
    /* The writer's journal is never a symbolic link (fileio.h); a reader may follow one
     * (shards gathered by links for a merge). */
    int fd = writable ? fileio_open_beside(path, O_RDWR, 0, "open journal", err)
                      : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (!writable) as_fail(err, "%s: cannot open journal: %s", path, strerror(errno));
        return NULL;
    }
    off_t size = lseek(fd, 0, SEEK_END);
    unsigned char b[JOURNAL_HEADER_BYTES];
    if (size < JOURNAL_HEADER_BYTES || pread_all(fd, b, sizeof b, 0)) {
        as_fail(err, "%s: journal header missing or short (%lld bytes)", path, (long long)size);
        close(fd);
        return NULL;
    }
    uint32_t crc;
    memcpy(&crc, b + JOURNAL_HEADER_BYTES - 4, 4);
    if (memcmp(b, journal_magic, 8) || crc != journal_crc32(0, b, JOURNAL_HEADER_BYTES - 4)) {
        as_fail(err, "%s: not an attnsweep journal (bad magic or header checksum)", path);
        close(fd);
        return NULL;
    }
    size_t at = 8;
    uint32_t version, hsize;
    get(b, &at, &version, 4);
    get(b, &at, &hsize, 4);
    if (version < 1 || version > JOURNAL_VERSION || hsize != JOURNAL_HEADER_BYTES) {
        as_fail(err, "%s: journal version %u, this program reads versions 1 to %u", path, version,
                JOURNAL_VERSION);
        close(fd);
        return NULL;
    }
    journal_header h;
    memset(&h, 0, sizeof h);
    get(b, &at, h.config_sha256, 64);
    get(b, &at, h.layout, sizeof h.layout);
    get(b, &at, &h.payload_bytes, 8);
    get(b, &at, &h.axes_fingerprint, 8);
    if (hdr) *hdr = h;

    /* Validate the records. A bad one followed by a valid record is damage: the
     * range up to that record is skipped and remembered, the records after it are
     * kept. A bad one followed by no valid record is the torn tail of a crash. */
    journal_damage *damage = NULL;
    size_t n_damage = 0;
    off_t pos = JOURNAL_HEADER_BYTES;
    for (;;) {
        uint64_t len;
        if (record_at(fd, pos, size, flags, &len) == 0) {
            pos += JOURNAL_RECORD_BYTES + (off_t)len;
            continue;
        }
        if (pos >= size) break;
        unsigned records = 0;
        off_t next = resync(fd, pos, size, flags, &records);
        if (next < 0) break;
        journal_damage *grown = realloc(damage, (n_damage + 1) * sizeof *grown);
        if (!grown) {
            free(damage);
            close(fd);
            as_fail(err, "%s: out of memory", path);
            return NULL;
        }
        damage = grown;
        damage[n_damage++] = (journal_damage){.start = pos, .end = next, .records = records};
        pos = next;
    }
    if (torn_bytes) *torn_bytes = size - pos;
    if (writable && pos < size) {
        if (ftruncate(fd, pos) || fsync(fd)) {
            as_fail(err, "%s: cannot truncate the torn journal tail: %s", path, strerror(errno));
            free(damage);
            close(fd);
            return NULL;
        }
    }
    journal *j = journal_alloc(path, fd, writable);
    if (!j) {
        free(damage);
        close(fd);
        as_fail(err, "%s: out of memory", path);
        return NULL;
    }
    j->valid_end = pos;
    j->version = version;
    j->cursor = JOURNAL_HEADER_BYTES;
    j->damage = damage;
    j->n_damage = n_damage;
    return j;
}

const journal_damage *journal_damaged(const journal *j, size_t *n) {
    *n = j->n_damage;
    return j->damage;
}

void journal_rewind(journal *j) { j->cursor = JOURNAL_HEADER_BYTES; }

int journal_next(journal *j, journal_record *rec, as_err *err) {
    for (size_t i = 0; i < j->n_damage; i++)
        if (j->cursor == j->damage[i].start) j->cursor = j->damage[i].end;
    if (j->cursor >= j->valid_end) return 0;
    unsigned char rb[JOURNAL_RECORD_BYTES];
    if (pread_all(j->fd, rb, sizeof rb, j->cursor) || record_decode(rb, rec))
        return as_fail(err, "%s: cannot re-read record at byte %lld", j->path,
                       (long long)j->cursor);
    rec->payload_offset = j->cursor + JOURNAL_RECORD_BYTES;
    j->cursor = rec->payload_offset + (off_t)rec->payload_len;
    return 1;
}

int journal_read_payload(journal *j, const journal_record *rec, void *buf, as_err *err) {
    if (pread_all(j->fd, buf, rec->payload_len, rec->payload_offset))
        return as_fail(err, "%s: cannot read payload at byte %lld: %s", j->path,
                       (long long)rec->payload_offset, strerror(errno));
    if (journal_crc32(0, buf, rec->payload_len) != rec->payload_crc)
        return as_fail(err, "%s: payload at byte %lld changed since it was validated", j->path,
                       (long long)rec->payload_offset);
    return 0;
}

int journal_append(journal *j, const journal_record *rec, const void *payload, as_err *err) {
    return journal_append_crc(j, rec, payload, journal_crc32(0, payload, payload ? rec->payload_len : 0),
                              err);
}

int journal_append_crc(journal *j, const journal_record *rec, const void *payload,
                       uint32_t payload_crc, as_err *err) {
    if (!j->writable) return as_fail(err, "%s: journal opened read-only", j->path);
    if (rec->flags && j->version < 2)
        return as_fail(err, "%s: a version 1 journal cannot hold compacted records", j->path);
    if ((rec->flags & JF_DEFLATE) && j->version < 4)
        return as_fail(err, "%s: a version %u journal cannot hold compressed cells", j->path, j->version);
    if (rec->model && j->version < 3)
        return as_fail(err, "%s: written by an older attnsweep (journal version %u, one model): it "
                       "cannot hold the cells of a second model; sweep the models into a new output",
                       j->path, j->version);
    if (rec->flags > 0xffffu || rec->model > JOURNAL_MAX_MODELS)
        return as_fail(err, "%s: record flags %u or model %u out of range", j->path, rec->flags, rec->model);
    unsigned char rb[JOURNAL_RECORD_BYTES];
    record_encode(rb, rec, payload_crc);
    /* Fields and payload in one system call, so a crash tears at most this
     * record (the checksums catch it either way). */
    struct iovec iov[2] = {{rb, sizeof rb}, {(void *)payload, payload ? (size_t)rec->payload_len : 0}};
    size_t total = JOURNAL_RECORD_BYTES + (size_t)rec->payload_len;
    int rc = 0;
    size_t written = 0;
    while (written < total) {
        ssize_t r;
        if (written < sizeof rb) {
            struct iovec v[2] = {{rb + written, sizeof rb - written}, iov[1]};
            r = pwritev(j->fd, v, iov[1].iov_len ? 2 : 1, j->valid_end + (off_t)written);
        } else {
            r = pwrite(j->fd, (const char *)payload + (written - sizeof rb), total - written,
                       j->valid_end + (off_t)written);
        }
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            rc = -1;
            break;
        }
        written += (size_t)r;
    }
    if (rc) {
        int e = errno;
        /* Cut off whatever part made it, so the journal stays valid. */
        if (ftruncate(j->fd, j->valid_end)) { /* the checksum catches it at the next open */ }
        return as_fail(err, "%s: cannot append record: %s", j->path, strerror(e));
    }
    j->valid_end += (off_t)total;
    return 0;
}

int journal_sync(journal *j, as_err *err) {
    if (fsync(j->fd)) return as_fail(err, "%s: fsync failed: %s", j->path, strerror(errno));
    return 0;
}

off_t journal_size(const journal *j) { return j->valid_end; }
unsigned journal_version(const journal *j) { return j->version; }

int journal_rename(journal *j, const char *to, as_err *err) {
    if (rename(j->path, to))
        return as_fail(err, "%s: cannot rename to %s: %s", j->path, to, strerror(errno));
    fileio_sync_parent_dir(to);
    snprintf(j->path, sizeof j->path, "%s", to);
    return 0;
}
const char *journal_path(const journal *j) { return j->path; }

void journal_close(journal *j) {
    if (!j) return;
    close(j->fd);
    free(j->damage);
    free(j);
}
