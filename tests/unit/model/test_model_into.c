/* test_model_into.c -- model_load_into (model.h): weights in a caller-owned
 * arena, as the ranks of a node share them (src/mpi/weights.c). Checked against
 * model_load of the same directory: the same bytes at the same offsets with
 * fill = 1; with fill = 0 the arena is left untouched and only the pointers
 * are set; misaligned or missing arenas are refused; model_free leaves a
 * borrowed arena alone. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "model.h"
#include "synth.h"

int main(void) {
    char dir[] = "/tmp/test_model_into.XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char mdir[256];
    snprintf(mdir, sizeof mdir, "%s/tiny", dir);
    as_err err;
    CHECK(synth_write(mdir, "tiny", 3, 0, &err) == 0, "synth: %s", err.msg);

    gpt2_model ref;
    CHECK(model_load(&ref, mdir, &err) == 0, "model_load: %s", err.msg);
    size_t bytes = model_arena_bytes(&ref.cfg);
    CHECK(bytes >= model_param_count(&ref.cfg) * sizeof(float) && bytes % 64 == 0,
          "arena bytes %zu for %zu floats", bytes, model_param_count(&ref.cfg));

    /* fill = 1: the same weights, the same layout (pointer offsets from the arena). */
    float *arena = aligned_alloc(64, bytes + 64);
    memset(arena, 0xAB, bytes + 64);
    gpt2_model m;
    CHECK(model_load_into(&m, mdir, arena, 1, &err) == 0, "fill: %s", err.msg);
    CHECK(m.arena == arena && m.arena_borrowed, "arena is the caller's");
    CHECK(!memcmp(arena, ref.arena, ref.arena_floats * sizeof(float)), "same bytes as model_load");
    CHECK(m.wte - m.arena == ref.wte - ref.arena && m.wpe - m.arena == ref.wpe - ref.arena &&
              m.ln_f_b - m.arena == ref.ln_f_b - ref.arena,
          "same offsets of wte, wpe, ln_f_b");
    int same_blocks = 1;
    for (size_t l = 0; l < ref.cfg.n_layer; l++)
        same_blocks &= m.blocks[l].fc_w - m.arena == ref.blocks[l].fc_w - ref.arena &&
                       m.blocks[l].attn_b - m.arena == ref.blocks[l].attn_b - ref.arena;
    CHECK(same_blocks, "same offsets of every block's tensors");
    CHECK(!strcmp(m.weights_sha256, ref.weights_sha256) && strlen(m.weights_sha256) == 64,
          "sha256 computed when filling");
    const unsigned char *after = (const unsigned char *)(arena + ref.arena_floats);
    int tail_ok = 1;
    for (size_t i = ref.arena_floats * sizeof(float); i < bytes + 64; i++, after++) tail_ok &= *after == 0xAB;
    CHECK(tail_ok, "nothing written past the weights");
    model_free(&m); /* must not free arena: the next use would crash under ASan */

    /* fill = 0: pointers only; the arena keeps what the "other process" put there. */
    memset(arena, 0x5C, bytes);
    gpt2_model shared;
    CHECK(model_load_into(&shared, mdir, arena, 0, &err) == 0, "map: %s", err.msg);
    unsigned char *p = (unsigned char *)arena;
    int untouched = 1;
    for (size_t i = 0; i < bytes; i++) untouched &= p[i] == 0x5C;
    CHECK(untouched, "fill = 0 leaves the arena alone");
    CHECK(shared.blocks[ref.cfg.n_layer - 1].mlp_proj_w - shared.arena ==
              ref.blocks[ref.cfg.n_layer - 1].mlp_proj_w - ref.arena,
          "fill = 0 sets the same pointers");
    CHECK(shared.weights_sha256[0] == 0, "no digest without reading");
    model_free(&shared);

    /* refusals */
    gpt2_model bad;
    CHECK(model_load_into(&bad, mdir, (float *)(void *)((char *)arena + 4), 1, &err) == -1 &&
              strstr(err.msg, "aligned"),
          "misaligned arena refused: %s", err.msg);
    CHECK(model_load_into(&bad, mdir, NULL, 1, &err) == -1 && strstr(err.msg, "arena"),
          "missing arena refused: %s", err.msg);
    char missing[300];
    snprintf(missing, sizeof missing, "%s/none", dir);
    CHECK(model_load_into(&bad, missing, arena, 0, &err) == -1 && strstr(err.msg, "none"),
          "missing directory named: %s", err.msg);

    free(arena);
    model_free(&ref);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
    return check_summary("test_model_into");
}
