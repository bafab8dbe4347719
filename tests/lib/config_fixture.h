/* config_fixture.h -- a sweep config in a test's temporary folder, for the unit tests that
 * need a loaded as_config (the config, the grid, the plan): a file writer, and a loader
 * over a stub model (its config.json only: no weights, no text). */
#ifndef ATTNSWEEP_CONFIG_FIXTURE_H
#define ATTNSWEEP_CONFIG_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "check.h"
#include "config.h"

/* The stub model the tests default to: 3 layers, 4 heads, 32 wide, 256 positions. */
static const char *const fx_tiny_model_json =
    "{\"n_layer\": 3, \"n_head\": 4, \"n_embd\": 32, \"n_positions\": 256, \"vocab_size\": 100}";

/* path's content becomes text; a test cannot go on without its files, so a failure exits. */
static inline void fx_write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
}

/* dir/model/config.json = model_json, dir/fixture.cfg = the three required keys (model
 * "model", text "t", output "o.h5", beside the file) and extra; loaded into *c. 0 when
 * loaded (free it with config_free), else a failed CHECK naming the message. */
static inline int fx_load_config(as_config *c, const char *dir, const char *model_json, const char *extra) {
    char path[400], text[2048];
    snprintf(path, sizeof path, "%s/model", dir);
    mkdir(path, 0777);
    snprintf(path, sizeof path, "%s/model/config.json", dir);
    fx_write_file(path, model_json);
    snprintf(path, sizeof path, "%s/fixture.cfg", dir);
    snprintf(text, sizeof text, "model = \"model\";\ntext = { path = \"t\"; };\noutput = \"o.h5\";\n%s", extra);
    fx_write_file(path, text);
    as_err err;
    int rc = config_load(c, path, NULL, 0, &err);
    CHECK(rc == 0, "load: %s", err.msg);
    return rc;
}

#endif
