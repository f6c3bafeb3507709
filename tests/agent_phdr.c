// SPDX-License-Identifier: MIT
/* agent_phdr.c - for agent.sh: prints the objects dl_iterate_phdr() shows this program, one a line, then for each argument dlopen()s that library and calls its f(), or dlclose()s the last one ("close"). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

static int show(struct dl_phdr_info *info, size_t size, void *arg)
{
	const char *n = info->dlpi_name;
	const char *slash = strrchr(n, '/');

	(void)size;
	(void)arg;
	printf("object %s\n", !*n ? "(main)" : slash ? slash + 1 : n);
	return 0;
}

int main(int argc, char **argv)
{
	void *h = NULL;

	dl_iterate_phdr(show, NULL);
	for (int i = 1; i < argc; i++) {
		void (*f)(void);

		if (!strcmp(argv[i], "close")) {
			if (!h || dlclose(h))
				return 1;
			h = NULL;
			continue;
		}
		h = dlopen(argv[i], RTLD_NOW);
		f = h ? (void (*)(void))dlsym(h, "f") : NULL;
		if (!f) {
			fprintf(stderr, "agent_phdr: %s: %s\n", argv[i], dlerror());
			return 1;
		}
		f();
	}
	return 0;
}
