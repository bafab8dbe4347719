/* signals.c -- see signals.h. */
#include "clock.h"
#include "signals.h"

#include <signal.h>
#include <string.h>
#include <time.h>

static const int stop_signals[] = {SIGTERM, SIGINT, SIGUSR1};
enum { N_STOP_SIGNALS = sizeof stop_signals / sizeof stop_signals[0] };

static volatile sig_atomic_t caught_signal;
static struct sigaction previous[N_STOP_SIGNALS];
static int installed;
static double caught_at = -1.0; /* set outside the handler: clock_gettime is safe, doubles are not atomic */

static void on_stop_signal(int signo) {
    /* Keep the first one: it names why the run stopped. */
    if (!caught_signal) caught_signal = signo;
}

int as_signals_install(as_err *err) {
    if (installed) return 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    /* No SA_RESTART: a sleeping poll loop should wake up and look at the flag. */
    sa.sa_flags = 0;
    for (int i = 0; i < N_STOP_SIGNALS; i++) {
        if (sigaction(stop_signals[i], &sa, &previous[i]) != 0) {
            for (int j = 0; j < i; j++) sigaction(stop_signals[j], &previous[j], NULL);
            return as_fail(err, "signals: sigaction(%s) failed", strsignal(stop_signals[i]));
        }
    }
    installed = 1;
    return 0;
}

void as_signals_restore(void) {
    if (!installed) return;
    for (int i = 0; i < N_STOP_SIGNALS; i++) sigaction(stop_signals[i], &previous[i], NULL);
    installed = 0;
    as_signals_clear();
}

int as_signals_caught(void) {
    int s = caught_signal;
    if (s && caught_at < 0) caught_at = as_monotonic_s();
    return s;
}

double as_signals_caught_at(void) {
    (void)as_signals_caught();
    return caught_at;
}

void as_signals_clear(void) {
    caught_signal = 0;
    caught_at = -1.0;
}
