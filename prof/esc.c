// SPDX-License-Identifier: MIT
/* esc.c - JSON and OpenMetrics escaping, invalid UTF-8 replaced (see esc.h). */
#include <errno.h>
#include <stdint.h>

#include "esc.h"

/* The length of the well-formed UTF-8 sequence at @p (RFC 3629), or 0. */
static int utf8_len(const unsigned char *p)
{
	uint32_t cp;
	int n;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		n = 2, cp = p[0] & 0x1f;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		n = 3, cp = p[0] & 0x0f;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		n = 4, cp = p[0] & 0x07;
	else
		return 0;
	for (int i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)	/* a NUL stops here too */
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

int pk_esc_put(FILE *f, const char *s, enum pk_esc_mode mode)
{
	const unsigned char *p = (const unsigned char *)s;
	int err = 0;

	while (*p) {
		int n = utf8_len(p);

		if (!n) {
			err |= fputs("\xef\xbf\xbd", f) < 0;
			p++;
			continue;
		}
		if (n > 1) {
			err |= fwrite(p, 1, n, f) != (size_t)n;
			p += n;
			continue;
		}
		switch (mode == PK_ESC_NONE ? 0 : *p) {
		case '"':
			err |= fputs("\\\"", f) < 0;
			break;
		case '\\':
			err |= fputs("\\\\", f) < 0;
			break;
		case '\n':
			err |= fputs("\\n", f) < 0;
			break;
		default:
			if (mode == PK_ESC_JSON && *p < 0x20)
				err |= fprintf(f, "\\u%04x", *p) < 0;
			else
				err |= putc(*p, f) == EOF;
		}
		p++;
	}
	return err ? -EIO : 0;
}
