// SPDX-License-Identifier: MIT
/* test_fault_own_data.c - a watch or fault range over any static object of probekit's signal path (PK_SIGNAL_DATA) is refused. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "probekit.h"
#include "harness.h"

struct span {			/* internal.h's struct pk_span */
	const void *p;
	size_t len;
};

static const char *lib_path;
static uintptr_t lib_bias;

static int find_lib(struct dl_phdr_info *info, size_t sz, void *arg)
{
	(void)sz;
	(void)arg;
	if (!strstr(info->dlpi_name, "libprobekit.so"))
		return 0;
	lib_path = info->dlpi_name;
	lib_bias = info->dlpi_addr;
	return 1;
}

/* The section's address and size in the file at @path (0: none). */
static int section_of(const char *path, const char *name, uint64_t *addr,
		      uint64_t *size)
{
	int fd = open(path, O_RDONLY);
	struct stat st;
	const unsigned char *f;
	const Elf64_Ehdr *eh;
	const Elf64_Shdr *sh;
	const char *names;
	int found = 0;

	if (fd < 0 || fstat(fd, &st))
		return 0;
	f = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (f == MAP_FAILED)
		return 0;
	eh = (const Elf64_Ehdr *)f;
	sh = (const Elf64_Shdr *)(f + eh->e_shoff);
	names = (const char *)f + sh[eh->e_shstrndx].sh_offset;
	for (int i = 0; i < eh->e_shnum && !found; i++)
		if (!strcmp(names + sh[i].sh_name, name)) {
			*addr = sh[i].sh_addr;
			*size = sh[i].sh_size;
			found = 1;
		}
	munmap((void *)f, (size_t)st.st_size);
	return found;
}

static void on_watch(const struct pk_watch_hit *h, void *ctx)
{
	(void)h;
	(void)ctx;
}

int main(void)
{
	uint64_t addr = 0, size = 0;
	const struct span *s;
	size_t n, refused = 0;

	dl_iterate_phdr(find_lib, NULL);
	if (!lib_path || !section_of(lib_path, "pk_sigdata", &addr, &size))
		SKIP("no libprobekit.so with a pk_sigdata section loaded (linked statically?)");
	/* The loaded section: its pointers are relocated. */
	s = (const struct span *)(lib_bias + addr);
	n = size / sizeof(*s);
	printf("pk_sigdata: %zu objects\n", n);
	ASSERT_TRUE(n >= 10, "the signal path's statics are declared");
	for (size_t i = 0; i < n; i++) {
		struct pk_watch *w;
		uintptr_t a = (uintptr_t)s[i].p;
		int err = pk_watch_add((void *)a, 1, PK_WATCH_WRITE, on_watch,
				       NULL, &w);
		char what[80];

		if (!err)
			pk_watch_remove(w);
		snprintf(what, sizeof(what), "a watch on object %zu (%zu bytes)",
			 i, s[i].len);
		if (ASSERT_EQ(err, -EBUSY, what))
			refused++;
	}
	ASSERT_EQ(refused, n, "every object refused");
	return t_exit();
}
