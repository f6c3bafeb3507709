// SPDX-License-Identifier: MIT
/* test_fault_own_data.c - a watch over any object of probekit's signal path, static (PK_SIGNAL_DATA) or this thread's (PK_SIGNAL_TLS), is refused. */
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
static char *tls;	/* this thread's copy of libprobekit's TLS block */
static size_t tls_size;

static int find_lib(struct dl_phdr_info *info, size_t sz, void *arg)
{
	(void)sz;
	(void)arg;
	if (!strstr(info->dlpi_name, "libprobekit.so"))
		return 0;
	lib_path = info->dlpi_name;
	lib_bias = info->dlpi_addr;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_TLS)
			tls_size = info->dlpi_phdr[i].p_memsz;
	tls = info->dlpi_tls_data;
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

/* Every static object declared PK_SIGNAL_DATA: each one refused. */
static void static_data(void)
{
	uint64_t addr = 0, size = 0;
	const struct span *s;
	size_t n, refused = 0;

	if (!section_of(lib_path, "pk_sigdata", &addr, &size)) {
		ASSERT_TRUE(0, "libprobekit.so has a pk_sigdata section");
		return;
	}
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
}

/*
 * Every 8-byte word of this thread's TLS block: the fault layer's
 * per-thread state (its reader slot, a watch step in flight) and the
 * sweep's are among them, and a watch there would make probekit's own
 * handler fault. Words of other layers may be accepted: those are removed
 * at once.
 */
static void thread_data(void)
{
	size_t busy = 0, tried = 0;

	if (!tls || !tls_size) {
		ASSERT_TRUE(0, "libprobekit.so has a TLS block on this thread");
		return;
	}
	for (size_t off = 0; off + 8 <= tls_size; off += 8) {
		struct pk_watch *w;
		int err = pk_watch_add(tls + off, 8, PK_WATCH_WRITE, on_watch,
				       NULL, &w);

		tried++;
		if (err == -EBUSY)
			busy++;
		else if (!err)
			pk_watch_remove(w);
	}
	printf("libprobekit TLS: %zu bytes, %zu of %zu words refused\n",
	       tls_size, busy, tried);
	ASSERT_TRUE(busy > 0, "a word of the signal path's TLS is refused");
}

int main(void)
{
	/* A call first, so that the library's TLS is in use on this thread. */
	ASSERT_OK(pk_fault_stats(&(struct pk_fault_stats){
			  .sz = sizeof(struct pk_fault_stats) }), "stats");
	dl_iterate_phdr(find_lib, NULL);
	if (!lib_path)
		SKIP("no libprobekit.so loaded (linked statically?)");
	static_data();
	thread_data();
	return t_exit();
}
