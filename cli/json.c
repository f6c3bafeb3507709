// SPDX-License-Identifier: MIT
/* json.c - the JSON the subcommands' reports are written in: strings, valid UTF-8 whatever bytes they are made from. */
#include "cli.h"

/*
 * Bytes of the well-formed UTF-8 sequence at @s (Unicode 15, table 3-7:
 * no overlong form, no surrogate, nothing past U+10FFFF), or 0.
 */
static int utf8_len(const unsigned char *s)
{
	unsigned char lo = 0x80, hi = 0xbf;
	int n;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4;
	else
		return 0;
	if (s[0] == 0xe0)
		lo = 0xa0;
	else if (s[0] == 0xed)
		hi = 0x9f;
	else if (s[0] == 0xf0)
		lo = 0x90;
	else if (s[0] == 0xf4)
		hi = 0x8f;
	if (s[1] < lo || s[1] > hi)
		return 0;
	/* The NUL that ends @s is no continuation byte: no read past it. */
	for (int i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return n;
}

void pkc_json_str(FILE *o, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;

	fputc('"', o);
	while (*s) {
		int n = utf8_len(s);

		if (!n) {
			/* One U+FFFD per byte that is not part of a sequence. */
			fputs("\\ufffd", o);
			s++;
		} else if (*s == '"' || *s == '\\') {
			fprintf(o, "\\%c", *s++);
		} else if (*s < 0x20 || *s == 0x7f) {
			fprintf(o, "\\u%04x", *s++);
		} else {
			fwrite(s, 1, (size_t)n, o);
			s += n;
		}
	}
	fputc('"', o);
}
