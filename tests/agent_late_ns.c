// SPDX-License-Identifier: MIT
/* agent_late_ns.c - agent_late_ns.sh's target: loads libz.so.1 with dlmopen(LM_ID_NEWLM) (a link-map namespace of its own) and calls compress() N times. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef int (*zfn)(unsigned char *dst, unsigned long *dlen,
		   const unsigned char *src, unsigned long slen);

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1;
	unsigned char in[1024] = { 1 }, z[2048];
	void *h = dlmopen(LM_ID_NEWLM, "libz.so.1", RTLD_NOW | RTLD_LOCAL);
	Lmid_t lmid = -1;
	zfn comp;

	if (!h) {
		fprintf(stderr, "agent_late_ns: %s\n", dlerror());
		return 2;
	}
	comp = (zfn)(unsigned long)dlsym(h, "compress");
	if (!comp || dlinfo(h, RTLD_DI_LMID, &lmid))
		return 2;
	for (int i = 0; i < n; i++) {
		unsigned long zl = sizeof(z);

		if (comp(z, &zl, in, sizeof(in)))
			return 1;
	}
	printf("agent_late_ns: %d calls in namespace %ld\n", n, (long)lmid);
	return 0;
}
