/* test_sha256.c -- SHA-256 against the FIPS 180-2 / NIST example vectors,
 * incremental hashing in uneven pieces against one-shot, and (with
 * --file PATH) prints a file's digest so loader.cmake can compare it with
 * coreutils' sha256sum. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "sha256.h"

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--file")) {
        char hex[65];
        as_err err = {{0}};
        if (sha256_file_hex(hex, argv[2], &err)) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        printf("%s\n", hex);
        return 0;
    }
    static const struct {
        const char *text;
        const char *digest;
    } vectors[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlm"
         "nopqrsmnopqrstnopqrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
    };
    char hex[65];
    for (size_t i = 0; i < sizeof vectors / sizeof vectors[0]; i++) {
        sha256_hex(hex, vectors[i].text, strlen(vectors[i].text));
        CHECK(!strcmp(hex, vectors[i].digest), "vector %zu: %s", i, hex);
    }
    /* one million 'a' fed in uneven pieces (crossing block boundaries) */
    char *a = malloc(1000000);
    memset(a, 'a', 1000000);
    sha256_ctx ctx;
    sha256_init(&ctx);
    size_t done = 0, piece = 1;
    while (done < 1000000) {
        size_t n = piece < 1000000 - done ? piece : 1000000 - done;
        sha256_update(&ctx, a + done, n);
        done += n;
        piece = piece * 7 % 131 + 1;
    }
    unsigned char digest[32];
    sha256_final(&ctx, digest);
    sha256_digest_to_hex(hex, digest);
    CHECK(!strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"),
          "million a: %s", hex);
    /* lengths around the padding boundary (55, 56, 63, 64 bytes): pieces == one shot */
    for (size_t len = 50; len < 130; len++) {
        char one[65], inc[65];
        sha256_hex(one, a, len);
        sha256_init(&ctx);
        sha256_update(&ctx, a, len / 3);
        sha256_update(&ctx, a, len - len / 3);
        sha256_final(&ctx, digest);
        sha256_digest_to_hex(inc, digest);
        CHECK(!strcmp(one, inc), "length %zu", len);
    }
    free(a);
    as_err err = {{0}};
    CHECK(sha256_file_hex(hex, "/nonexistent/x", &err) == -1 && strstr(err.msg, "/nonexistent/x"),
          "missing file: %s", err.msg);
    /* the SHA-NI path (when this CPU has it) equals the portable one for every
     * length around the block and padding boundaries, one-shot and in pieces */
    unsigned char *buf = malloc(70000);
    for (size_t i = 0; i < 70000; i++) buf[i] = (unsigned char)(i * 2654435761u >> 13);
    size_t bad = 0, lens = 0;
    for (size_t len = 0; len < 70000; len = len < 300 ? len + 1 : len * 3 + 17, lens++) {
        char fast[65], slow[65], pieces[65];
        sha256_force_portable(0);
        sha256_hex(fast, buf, len);
        sha256_ctx ctx;
        sha256_init(&ctx);
        for (size_t at = 0; at < len;) {
            size_t n = (at * 7 + 13) % 200 + 1;
            if (n > len - at) n = len - at;
            sha256_update(&ctx, buf + at, n);
            at += n;
        }
        unsigned char dg[32];
        sha256_final(&ctx, dg);
        sha256_digest_to_hex(pieces, dg);
        sha256_force_portable(1);
        sha256_hex(slow, buf, len);
        bad += strcmp(fast, slow) != 0 || strcmp(fast, pieces) != 0;
    }
    sha256_force_portable(0);
    CHECK(bad == 0, "%zu of %zu lengths differ between the accelerated and the portable code", bad, lens);
    printf("sha256: SHA-NI %s\n", sha256_accelerated() ? "used" : "not available (portable code only)");
    free(buf);
    return check_summary("test_sha256");
}
