// SPDX-License-Identifier: MIT
/* agent_dlcall.c - agentfix7's tests' target: for each LIB FUNC N triple of its arguments, dlopen()s LIB and calls its FUNC (as long FUNC(long)) N times; the handles stay open. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	long sum = 0;

	for (int i = 1; i + 2 < argc; i += 3) {
		void *h = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
		long (*f)(long);
		int n = atoi(argv[i + 2]);

		f = h ? (long (*)(long))(unsigned long)dlsym(h, argv[i + 1]) : NULL;
		if (!f) {
			fprintf(stderr, "agent_dlcall: %s: %s\n", argv[i],
				dlerror());
			return 2;
		}
		for (int k = 0; k < n; k++)
			sum += f(k);
	}
	printf("agent_dlcall: %ld\n", sum > 0 ? 1L : 0L);
	return 0;
}
