// SPDX-License-Identifier: MIT
/* agent_late_z.c - agent_late_glob.sh's target: dlopen()s libz.so.1 ROUNDS times, each time calling compress() and uncompress() N times, then dlclose()s it; built with LATE_LINKED (agent_late_zl), libz linked instead and the same calls made. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef LATE_LINKED
#include <zlib.h>
#endif

typedef int (*zfn)(unsigned char *dst, unsigned long *dlen,
		   const unsigned char *src, unsigned long slen);

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1, rounds = argc > 2 ? atoi(argv[2]) : 1;
	unsigned char in[4096], z[8192], out[4096];

	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = (unsigned char)(i * 7 % 251);
	for (int r = 0; r < rounds; r++) {
#ifdef LATE_LINKED
		void *h = (void *)1;
		zfn comp = (zfn)compress, uncomp = (zfn)uncompress;
#else
		void *h = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
		zfn comp, uncomp;

		if (!h) {
			fprintf(stderr, "agent_late_z: %s\n", dlerror());
			return 2;
		}
		comp = (zfn)(unsigned long)dlsym(h, "compress");
		uncomp = (zfn)(unsigned long)dlsym(h, "uncompress");
		if (!comp || !uncomp)
			return 2;
#endif
		for (int i = 0; i < n; i++) {
			unsigned long zl = sizeof(z), ol = sizeof(out);

			if (comp(z, &zl, in, sizeof(in)) ||
			    uncomp(out, &ol, z, zl) || ol != sizeof(in) ||
			    memcmp(in, out, ol)) {
				fprintf(stderr, "agent_late_z: round trip failed\n");
				return 1;
			}
		}
#ifndef LATE_LINKED
		if (dlclose(h))
			return 2;
#else
		(void)h;
#endif
	}
	printf("agent_late_z: %d rounds of %d\n", rounds, n);
	return 0;
}
