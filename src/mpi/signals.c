/* signals.c -- see signals.h. */
#include "clock.h"
#include "signals.h"

#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

static const int stop_signals[] = {SIGTERM, SIGINT, SIGUSR1};
enum { N_STOP_SIGNALS = sizeof stop_signals / sizeof stop_signals[0] };

static volatile sig_atomic_t caught_signal;
static struct sigaction previous[N_STOP_SIGNALS];
static int installed;
/* CLOCK_MONOTONIC nanoseconds of the first signal, taken in the handler (clock_gettime is
 * async-signal-safe, a lock-free atomic store too): a stop grace counts from the signal's
 * arrival, not from whenever a busy rank first looks at the flag. -1: none caught. */
static _Atomic long long caught_ns = -1;
/* The same for the signal that abandons the running cells: SIGTERM (first or later), or a
 * SIGINT once a stop is under way (the second Ctrl-C). -1: none. */
static _Atomic long long abandon_ns = -1;

static void on_stop_signal(int signo) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long now = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec, none = -1;
    if (signo == SIGTERM || (signo == SIGINT && caught_signal)) {
        atomic_compare_exchange_strong(&abandon_ns, &none, now);
        none = -1;
    }
    /* Keep the first one: it names why the run stopped. */
    if (caught_signal) return;
    atomic_compare_exchange_strong(&caught_ns, &none, now);
    caught_signal = signo;
}

int signals_install(as_err *err) {
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

void signals_restore(void) {
    if (!installed) return;
    for (int i = 0; i < N_STOP_SIGNALS; i++) sigaction(stop_signals[i], &previous[i], NULL);
    installed = 0;
    signals_clear();
}

int signals_caught(void) { return caught_signal; }

double signals_caught_at(void) {
    if (!caught_signal) return -1.0;
    long long ns = atomic_load(&caught_ns);
    return ns < 0 ? as_monotonic_s() : 1e-9 * (double)ns; /* the flag is set after the time */
}

double signals_abandon_at(void) {
    long long ns = atomic_load(&abandon_ns);
    return ns < 0 ? -1.0 : 1e-9 * (double)ns;
}

int signals_graceful(int signo) { return signo == SIGUSR1 || signo == SIGINT; }

void signals_clear(void) {
    caught_signal = 0;
    atomic_store(&caught_ns, -1);
    atomic_store(&abandon_ns, -1);
}
