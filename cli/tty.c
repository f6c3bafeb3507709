// SPDX-License-Identifier: MIT
/* tty.c - the command on a terminal: one self-overwriting progress line on stderr, colour only where it is wanted. */

/*
 * Progress. Long work (arming thousands of probes) shows one status line
 * on stderr, redrawn in place ("\r", the text, then erase to the end of
 * the line: "\033[K"), at most PROGRESS_MS apart, and only once the work
 * has lasted the delay (200 ms; PROBEKIT_PROGRESS_DELAY_MS, a test hook):
 * a short run prints nothing extra. Only when stderr is a terminal whose
 * TERM is not "dumb" and --quiet was not given: piped, nothing at all.
 * With NO_COLOR set (and not empty) the line holds no escape sequence at
 * all: it is erased by blanks over it and "\r".
 * The line is erased as soon as the work ends and before anything else
 * probekit writes to stderr (pkc_err(), a report), but COMMAND writes to
 * the same terminal: it may write in the few milliseconds before the
 * command sees the work done (man probekit, "Progress").
 *
 * Colour. ANSI SGR sequences only where the output is a terminal, NO_COLOR
 * is unset or empty (https://no-color.org) and TERM is not "dumb", unless
 * --color=always (which, as no-color.org has it, overrides NO_COLOR) or
 * --color=never; never in machine output (JSON, OpenMetrics) nor in a
 * report written to -o FILE. Text without colour is byte for byte what it
 * was before colour existed.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define PROGRESS_MS 100		/* at most ~10 redraws a second */
#define DELAY_MS 200		/* work shorter than this shows nothing */

static int color_when = PKC_COLOR_AUTO;

static struct {
	int on;			/* pkc_progress_init() found a terminal */
	int shown;		/* a line is on the terminal now */
	int busy;		/* work was seen at the previous update */
	int plain;		/* NO_COLOR: no escape sequence at all */
	int width;		/* of the line shown (plain: blanked) */
	long delay_ms;
	double since;		/* when the work began */
	double drawn;		/* when the line was drawn last */
} prog;

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* TERM is set to something that takes escape sequences. */
static int term_ok(void)
{
	const char *t = getenv("TERM");

	return t && *t && strcmp(t, "dumb");
}

int pkc_color_parse(const char *arg)
{
	/* A bare --color is --color=always, as ls(1) has it. */
	if (!arg)
		return PKC_COLOR_ALWAYS;
	if (!strcmp(arg, "auto") || !strcmp(arg, "tty") ||
	    !strcmp(arg, "if-tty"))
		return PKC_COLOR_AUTO;
	if (!strcmp(arg, "always") || !strcmp(arg, "yes") ||
	    !strcmp(arg, "force"))
		return PKC_COLOR_ALWAYS;
	if (!strcmp(arg, "never") || !strcmp(arg, "no") ||
	    !strcmp(arg, "none"))
		return PKC_COLOR_NEVER;
	return -1;
}

void pkc_color_set(int when)
{
	color_when = when;
}

int pkc_color_opt(const char *arg)
{
	int when = pkc_color_parse(arg);

	if (when < 0) {
		pkc_err("--color=%s: auto, always or never\n", arg);
		return PKC_EXIT_OWN;
	}
	pkc_color_set(when);
	return 0;
}

int pkc_color_for(FILE *f, int machine)
{
	const char *nc = getenv("NO_COLOR");

	if (machine || !f || (f != stderr && f != stdout) ||
	    color_when == PKC_COLOR_NEVER)
		return 0;
	if (color_when == PKC_COLOR_ALWAYS)
		return 1;
	return isatty(fileno(f)) && !(nc && *nc) && term_ok();
}

void pkc_progress_init(int quiet)
{
	const char *d = getenv("PROBEKIT_PROGRESS_DELAY_MS");
	char *end;

	const char *nc = getenv("NO_COLOR");

	prog.on = !quiet && isatty(STDERR_FILENO) && term_ok();
	prog.plain = nc && *nc;
	prog.delay_ms = DELAY_MS;
	if (d && *d) {
		long v = strtol(d, &end, 10);

		if (!*end && v >= 0 && v <= 3600000)
			prog.delay_ms = v;
	}
}

int pkc_progress_on(void)
{
	return prog.on;
}

void pkc_progress_clear(void)
{
	if (!prog.shown)
		return;
	if (prog.plain)
		fprintf(stderr, "\r%*s\r", prog.width, "");
	else
		fputs("\r\033[K", stderr);
	fflush(stderr);
	prog.shown = 0;
}

void pkc_progress_update(const char *text)
{
	struct winsize ws;
	double t;
	int cols = 80;

	if (!prog.on)
		return;
	if (!text) {
		pkc_progress_clear();
		prog.busy = 0;
		return;
	}
	t = now_s();
	if (!prog.busy) {
		prog.busy = 1;
		prog.since = t;
	}
	if ((t - prog.since) * 1e3 < (double)prog.delay_ms ||
	    (prog.shown && (t - prog.drawn) * 1e3 < PROGRESS_MS))
		return;
	/* A background job (probekit ... &) keeps the terminal's line alone. */
	if (!prog.shown && tcgetpgrp(STDERR_FILENO) != getpgrp())
		return;
	/* Never wider than the terminal: a wrapped line would not go back. */
	if (!ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) && ws.ws_col > 1)
		cols = ws.ws_col;
	if (prog.plain) {
		int w = (int)strlen(text) < cols - 1 ? (int)strlen(text) : cols - 1;

		/* Blanks over what the previous line had beyond this one. */
		fprintf(stderr, "\r%.*s%*s", w, text,
			prog.shown && prog.width > w ? prog.width - w : 0, "");
		if (!prog.shown || w > prog.width)
			prog.width = w;
	} else {
		fprintf(stderr, "\r%.*s\033[K", cols - 1, text);
	}
	fflush(stderr);
	prog.shown = 1;
	prog.drawn = t;
}

char *pkc_group(char *buf, size_t len, unsigned long long v)
{
	char digits[32];
	int n = snprintf(digits, sizeof(digits), "%llu", v);
	size_t w = 0;

	for (int i = 0; i < n && w + 2 < len; i++) {
		if (i && (n - i) % 3 == 0)
			buf[w++] = ' ';
		buf[w++] = digits[i];
	}
	buf[w] = 0;
	return buf;
}

void pkc_msg(const char *who, const char *fmt, ...)
{
	int c = pkc_color_for(stderr, 0);
	char line[8192];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	pkc_progress_clear();
	fprintf(stderr, "%s%s:%s %s", c ? PKC_SGR_ERR : "", who,
		c ? PKC_SGR_OFF : "", line);
}
