/* args.c -- see args.h. */
#include "args.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"

static size_t count_opts(const arg_opt *o) {
    size_t n = 0;
    while (o[n].type != ARG_END) n++;
    return n;
}

static const arg_opt *find_long(const arg_spec *s, const char *name, size_t len) {
    for (const arg_opt *o = s->opts; o->type != ARG_END; o++)
        if (strlen(o->name) == len && !strncmp(o->name, name, len)) return o;
    return NULL;
}

/* Lists grow to at most argc entries: one array of argc pointers each. */
static int list_init(arg_list *l, int argc) {
    l->n = 0;
    l->v = calloc((size_t)argc + 1, sizeof *l->v);
    return l->v ? 0 : -1;
}

void args_free(const arg_spec *s) {
    for (const arg_opt *o = s->opts; o && o->type != ARG_END; o++)
        if (o->type == ARG_LIST && o->value) {
            arg_list *l = o->value;
            free(l->v);
            l->v = NULL;
            l->n = 0;
        }
    if (s->pos) {
        free(s->pos->v);
        s->pos->v = NULL;
        s->pos->n = 0;
    }
}

/* The value of o from text; -1 with why (a phrase after the quoted value). */
static int assign_value(const arg_opt *o, const char *text, const char **why) {
    char *end;
    errno = 0;
    switch (o->type) {
    case ARG_INT: {
        long long v = strtoll(text, &end, 10);
        if (!*text || *end || errno || v < o->min || v > o->max) {
            *why = o->min == 1 && o->max == LLONG_MAX   ? "is not a positive integer"
                   : o->min == 0 && o->max == LLONG_MAX ? "is not a non-negative integer"
                                                        : NULL;
            return -1;
        }
        *(long long *)o->value = v;
        return 0;
    }
    case ARG_U64: {
        unsigned long long v = strtoull(text, &end, 10);
        if (!*text || *end || errno || text[0] < '0' || text[0] > '9') {
            *why = "is not an unsigned 64-bit integer";
            return -1;
        }
        *(uint64_t *)o->value = (uint64_t)v;
        return 0;
    }
    case ARG_DOUBLE: {
        double v = strtod(text, &end);
        if (!*text || *end || !isfinite(v) || !(v > (double)o->min)) {
            *why = o->min == 0 ? "is not a positive number" : NULL;
            return -1;
        }
        *(double *)o->value = v;
        return 0;
    }
    case ARG_STRING:
        *(const char **)o->value = text;
        return 0;
    case ARG_LIST: {
        arg_list *l = o->value;
        l->v[l->n++] = text;
        return 0;
    }
    case ARG_CALLBACK:
        return o->parse(o, text, why);
    default:
        return 0;
    }
}

static int bad_value(const arg_spec *s, const arg_opt *o, const char *text, const char *why) {
    if (why)
        fprintf(stderr, "%s: --%s '%s' %s\n", s->prog, o->name, text, why);
    else
        fprintf(stderr, "%s: --%s '%s' is not an integer in %lld..%lld\n", s->prog, o->name, text,
                o->min, o->max);
    return -1;
}

/* One option at argv[*i]: 0, or -1 after its message; 1 for --help. */
static int take_option(const arg_spec *s, int argc, char **argv, int *i, int *seen) {
    const char *a = argv[*i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) return 1;
    const char *name = a + 2, *eq = a[1] == '-' ? strchr(name, '=') : NULL;
    const arg_opt *o = a[1] == '-' ? find_long(s, name, eq ? (size_t)(eq - name) : strlen(name)) : NULL;
    if (!o) {
        fprintf(stderr, "%s: unknown option '%s' (try --help)\n", s->prog, a);
        return -1;
    }
    seen[o - s->opts] = 1;
    if (o->type == ARG_FLAG) {
        if (eq) {
            fprintf(stderr, "%s: --%s takes no value (got '%s')\n", s->prog, o->name, a);
            return -1;
        }
        *(int *)o->value = 1;
        return 0;
    }
    const char *text = eq ? eq + 1 : NULL;
    if (!text) {
        if (*i + 1 >= argc) {
            fprintf(stderr, "%s: --%s needs a value (try --help)\n", s->prog, o->name);
            return -1;
        }
        text = argv[++*i];
    }
    const char *why = NULL;
    if (assign_value(o, text, &why)) return bad_value(s, o, text, why);
    return 0;
}

static int take_positional(const arg_spec *s, const char *a) {
    if (s->pos && s->pos->n < s->max_pos) {
        s->pos->v[s->pos->n++] = a;
        return 0;
    }
    if (s->max_pos == 0 || !s->pos)
        fprintf(stderr, "%s: unexpected argument '%s' (try --help)\n", s->prog, a);
    else if (s->max_pos == 1)
        fprintf(stderr, "%s: one %s only (got '%s' and '%s')\n", s->prog, s->positional,
                s->pos->v[0], a);
    else
        fprintf(stderr, "%s: at most %zu %s arguments (got '%s' too)\n", s->prog, s->max_pos,
                s->positional, a);
    return -1;
}

/* Required options and the positional count, after the walk. */
static int check_counts(const arg_spec *s, const int *seen) {
    for (const arg_opt *o = s->opts; o->type != ARG_END; o++)
        if (o->required && !seen[o - s->opts]) {
            fprintf(stderr, "%s: --%s is required (try --help)\n", s->prog, o->name);
            return -1;
        }
    size_t n = s->pos ? s->pos->n : 0;
    if (n < s->min_pos) {
        fprintf(stderr, "%s: missing %s (try --help)\n", s->prog, s->positional);
        return -1;
    }
    return 0;
}

int args_parse(const arg_spec *s, int argc, char **argv, int *exit_code) {
    size_t n_opts = count_opts(s->opts);
    int *seen = calloc(n_opts + 1, sizeof *seen), rc = 0, only_pos = 0;
    int lists_ok = seen != NULL && (!s->pos || list_init(s->pos, argc) == 0);
    for (const arg_opt *o = s->opts; lists_ok && o->type != ARG_END; o++)
        if (o->type == ARG_LIST && list_init(o->value, argc)) lists_ok = 0;
    if (!lists_ok) {
        fprintf(stderr, "%s: out of memory\n", s->prog);
        free(seen);
        args_free(s);
        *exit_code = AS_EXIT_ERROR;
        return 1;
    }
    for (int i = 1; i < argc && rc == 0; i++) {
        const char *a = argv[i];
        if (!only_pos && !strcmp(a, "--")) only_pos = 1;
        else if (!only_pos && a[0] == '-' && a[1]) rc = take_option(s, argc, argv, &i, seen);
        else {
            rc = take_positional(s, a);
            if (s->stop_at_positional) break; /* the rest is the positional's own */
        }
    }
    if (rc == 0) rc = check_counts(s, seen);
    free(seen);
    if (rc == 0) return 0;
    if (rc == 1) args_help(s, stdout);
    args_free(s);
    *exit_code = rc == 1 ? AS_EXIT_OK : AS_EXIT_USAGE;
    return 1;
}

/* "--name VALUE" as the usage line and the option list show it. */
static void option_form(char *buf, size_t size, const arg_opt *o) {
    if (o->value_name) snprintf(buf, size, "--%s %s", o->name, o->value_name);
    else snprintf(buf, size, "--%s", o->name);
}

#define USAGE_WIDTH 96
static void usage_line(const arg_spec *s, FILE *out) {
    const char *cmd = s->usage_prefix ? s->usage_prefix : s->prog;
    size_t indent = strlen("usage: ") + strlen(cmd) + 1, col = indent;
    fprintf(out, "usage: %s", cmd);
    char item[160], form[128];
    if (s->max_pos) {
        snprintf(item, sizeof item, s->min_pos ? "%s%s" : "[%s]%s", s->positional,
                 s->max_pos > 1 ? "..." : "");
        col += (size_t)fprintf(out, " %s", item);
    }
    for (const arg_opt *o = s->opts; o->type != ARG_END; o++) {
        option_form(form, sizeof form, o);
        snprintf(item, sizeof item, o->required ? "%s%s" : "[%s]%s", form,
                 o->type == ARG_LIST ? "..." : "");
        if (col + 1 + strlen(item) > USAGE_WIDTH) {
            fprintf(out, "\n%*s", (int)indent - 1, "");
            col = indent - 1;
        }
        col += (size_t)fprintf(out, " %s", item);
    }
    fprintf(out, "\n");
    if (s->usage_extra) fprintf(out, "%s", s->usage_extra);
}

/* The option list: the forms in one column, each help line beside or below its form. */
static void option_list(const arg_spec *s, FILE *out) {
    size_t width = strlen("-h, --help");
    char form[128];
    for (const arg_opt *o = s->opts; o->type != ARG_END; o++) {
        option_form(form, sizeof form, o);
        if (strlen(form) > width && strlen(form) <= 24) width = strlen(form);
    }
    for (const arg_opt *o = s->opts; o->type != ARG_END; o++) {
        option_form(form, sizeof form, o);
        const char *h = o->help ? o->help : "";
        if (strlen(form) > width) fprintf(out, "  %s\n  %-*s", form, (int)width, "");
        else fprintf(out, "  %-*s", (int)width, form);
        for (const char *line = h; *line;) {
            const char *nl = strchr(line, '\n');
            size_t len = nl ? (size_t)(nl - line) : strlen(line);
            fprintf(out, "  %.*s\n", (int)len, line);
            line += len + (nl != NULL);
            if (*line) fprintf(out, "  %-*s", (int)width, "");
        }
        if (!*h) fprintf(out, "\n");
    }
    fprintf(out, "  %-*s  this text\n", (int)width, "-h, --help");
}

void args_help(const arg_spec *s, FILE *out) {
    usage_line(s, out);
    if (s->description) fprintf(out, "\n%s", s->description);
    fprintf(out, "\n");
    option_list(s, out);
    if (s->epilogue) fprintf(out, "\n%s", s->epilogue);
}
