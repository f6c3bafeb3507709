/* SPDX-License-Identifier: MIT */
/* esc.h - strings escaped for the prof writers' text formats (JSON, OpenMetrics label values). */
#ifndef PK_PROF_ESC_H
#define PK_PROF_ESC_H

#include <stdio.h>

enum pk_esc_mode {
	PK_ESC_JSON,	/* \" \\ \n \t ..., other controls as \u00XX */
	PK_ESC_OM,	/* OpenMetrics/Prometheus label values: \" \\ \n only */
	PK_ESC_NONE,	/* nothing escaped, only invalid UTF-8 replaced (protobuf strings) */
};

/**
 * pk_esc_put() - write @s to @f escaped for @mode, as valid UTF-8.
 * @f: the stream.
 * @s: a NUL-terminated string of any bytes (symbol names, paths).
 * @mode: PK_ESC_JSON, PK_ESC_OM or PK_ESC_NONE.
 *
 * Each byte that does not begin a well-formed UTF-8 sequence (overlong
 * forms, surrogates and values above U+10FFFF included) is written as
 * U+FFFD, the replacement character, as Python's decode(errors="replace")
 * does for a lone invalid byte. No quotes are added.
 *
 * Context: any thread, may block.
 * Return: 0, or -EIO if writing failed.
 */
int pk_esc_put(FILE *f, const char *s, enum pk_esc_mode mode);

#endif /* PK_PROF_ESC_H */
