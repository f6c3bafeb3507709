// SPDX-License-Identifier: MIT
/* test_arch_reloc.c - golden files for the x86-64 relocator: tests/cases/reloc/NAME.in -> NAME.out. */

/*
 * NAME.in:   "# what it is", "from 0xADDR", "to 0xADDR", "bytes XX XX ...",
 *            and "one" to relocate one instruction for an int3 probe's slot
 *            (pk_arch_relocate_one(): calls become push + jmp)
 * NAME.out:  "bytes XX ..." (the copy) followed by "map S:D ..." (where each
 *            instruction starts in the source and in the copy) or, with
 *            "one", "falls_through 0|1"; or "error ENAME" when the relocator
 *            refuses.
 *
 * PK_REBASE=1 rewrites every .out from what the relocator does now (review
 * the diff before committing it), as Zydis' regression.py rebase does.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch/arch.h"
#include "harness.h"

static const char *errname(int e)
{
	switch (e) {
	case EINVAL: return "EINVAL";
	case ENOTSUP: return "ENOTSUP";
	case ERANGE: return "ERANGE";
	case E2BIG: return "E2BIG";
	default: return "E?";
	}
}

static int parse_in(const char *path, uint64_t *from, uint64_t *to,
		    uint8_t *bytes, size_t *n, int *one)
{
	char line[512];
	FILE *f = fopen(path, "r");
	int have = 0;

	if (!f)
		return -1;
	*n = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long v;

		if (!strcmp(line, "one\n")) {
			*one = 1;
		} else if (sscanf(line, "from %llx", &v) == 1) {
			*from = v;
			have |= 1;
		} else if (sscanf(line, "to %llx", &v) == 1) {
			*to = v;
			have |= 2;
		} else if (!strncmp(line, "bytes", 5)) {
			char *p = line + 5, *q;

			for (;;) {
				unsigned long b = strtoul(p, &q, 16);

				if (q == p)
					break;
				bytes[(*n)++] = (uint8_t)b;
				p = q;
			}
			have |= 4;
		}
	}
	fclose(f);
	return have == 7 ? 0 : -1;
}

static void render(char *buf, size_t cap, int ret, const uint8_t *out,
		   const struct pk_reloc_map *map, int falls_through)
{
	size_t o = 0;

	if (ret < 0) {
		snprintf(buf, cap, "error %s\n", errname(-ret));
		return;
	}
	o += (size_t)snprintf(buf + o, cap - o, "bytes");
	for (int i = 0; i < ret; i++)
		o += (size_t)snprintf(buf + o, cap - o, " %02x", out[i]);
	if (falls_through >= 0) {
		snprintf(buf + o, cap - o, "\nfalls_through %d\n", falls_through);
		return;
	}
	o += (size_t)snprintf(buf + o, cap - o, "\nmap");
	for (unsigned int i = 0; i < map->n; i++)
		o += (size_t)snprintf(buf + o, cap - o, " %u:%u", map->src[i],
				      map->dst[i]);
	snprintf(buf + o, cap - o, "\n");
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static int is_in(const struct dirent *d)
{
	size_t l = strlen(d->d_name);

	return l > 3 && !strcmp(d->d_name + l - 3, ".in");
}

int main(void)
{
	const char *srcdir = getenv("PK_SOURCE_DIR");
	int rebase = getenv("PK_REBASE") && !strcmp(getenv("PK_REBASE"), "1");
	char dir[1024];
	struct dirent **ents;
	int n;

	snprintf(dir, sizeof(dir), "%s/tests/cases/reloc",
		 srcdir ? srcdir : ".");
	n = scandir(dir, &ents, is_in, by_name);
	if (n <= 0)
		SKIP("no golden files in %s (set PK_SOURCE_DIR)", dir);
	ASSERT_GE(n, 20, "golden cases");
	for (int i = 0; i < n; i++) {
		char in[1400], outp[1400], got[2048], want[2048] = "";
		uint8_t bytes[64], out[128];
		struct pk_reloc_map map;
		uint64_t from = 0, to = 0;
		size_t len;
		FILE *f;
		int ret, one = 0, ft = -1;

		snprintf(in, sizeof(in), "%s/%s", dir, ents[i]->d_name);
		snprintf(outp, sizeof(outp), "%.*s.out",
			 (int)(strlen(in) - 3), in);
		if (!ASSERT_OK(parse_in(in, &from, &to, bytes, &len, &one), in))
			continue;
		memset(out, 0xcc, sizeof(out));
		if (one)
			ret = pk_arch_relocate_one(bytes, len, from, out,
						   sizeof(out), to, &ft);
		else
			ret = pk_arch_relocate(bytes, len, from, out, sizeof(out),
					       to, &map);
		render(got, sizeof(got), ret, out, &map, one ? ft : -1);
		if (rebase) {
			f = fopen(outp, "w");
			if (ASSERT_TRUE(f, outp)) {
				fputs(got, f);
				fclose(f);
			}
			continue;
		}
		f = fopen(outp, "r");
		if (!ASSERT_TRUE(f, "expected output exists (PK_REBASE=1 makes it)"))
			continue;
		want[fread(want, 1, sizeof(want) - 1, f)] = 0;
		fclose(f);
		if (!ASSERT_EQ(strcmp(got, want), 0, ents[i]->d_name))
			fprintf(stderr, "  got:  %s  want: %s", got, want);
		free(ents[i]);
	}
	free(ents);

	/* A relocation that does not fit says so instead of overrunning. */
	{
		static const uint8_t j[] = { 0x74, 0x10 };
		uint8_t small[4];

		ASSERT_EQ(pk_arch_relocate(j, 2, 0x1000, small, sizeof(small),
					   0x2000, NULL), -E2BIG, "cap honoured");
	}
	return t_exit();
}
