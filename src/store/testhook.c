/* testhook.c -- see testhook.h. Empty in the production build. */
#include "testhook.h"

#ifdef AS_TEST_HOOKS
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int hooks_read;     /* the environment is read once */
static int delay_ms;
static const char *phase_file, *release_file;
static char hold_phase[64];
static long hold_at; /* hold at the hold_at-th arrival at hold_phase only; 0: at every one */

static void pause_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) && errno == EINTR) {}
}

void st_test_phase(const char *phase) {
    if (!hooks_read) {
        const char *v = getenv("ATTNSWEEP_TEST_COMMIT_DELAY_MS");
        delay_ms = v && atoi(v) > 0 ? atoi(v) : 0;
        phase_file = getenv("ATTNSWEEP_TEST_PHASE_FILE");
        const char *h = getenv("ATTNSWEEP_TEST_HOLD");
        if (h && sscanf(h, "%63s %ld", hold_phase, &hold_at) < 1) hold_phase[0] = 0;
        release_file = getenv("ATTNSWEEP_TEST_RELEASE");
        hooks_read = 1;
    }
    static long arrivals;
    int at_hold_phase = hold_phase[0] && release_file && !strcmp(hold_phase, phase);
    int hold = at_hold_phase && (hold_at <= 0 || ++arrivals == hold_at);
    if (!delay_ms && !at_hold_phase) return; /* every arrival is reported, so a test can count */
    static unsigned long seq;
    if (phase_file && *phase_file) {
        int fd = open(phase_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd >= 0) {
            char line[96];
            int n = snprintf(line, sizeof line, "%lu %s\n", ++seq, phase);
            if (write(fd, line, (size_t)n) < 0) { /* best effort: test only */ }
            close(fd);
        }
    }
    if (delay_ms) pause_ms(delay_ms);
    struct stat st;
    while (hold && stat(release_file, &st)) pause_ms(10);
}

long long st_test_number(const char *name) {
    const char *v = getenv(name);
    return v && *v ? atoll(v) : -1;
}

int st_test_fail(const char *point) {
    const char *v = getenv("ATTNSWEEP_TEST_FAIL");
    return v && !strcmp(v, point);
}
#endif
