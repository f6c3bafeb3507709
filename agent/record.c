// SPDX-License-Identifier: MIT
/* record.c - a process's record: one shared file mapping per program image, kept by forked children. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent.h"

/*
 * One record per image, not per pid and not per process:
 *   - exec(): the constructor runs again in the new image and makes a new
 *     file. Named <pid>-XXXXXX, not <pid>: a program that exec()s in place
 *     (env PROG, sh -c "exec PROG") keeps its pid and must not overwrite
 *     (or share) the first image's record, whose specs resolved elsewhere.
 *   - fork(): the child inherits the MAP_SHARED mapping, so its hits land
 *     in its parent's record; the command counts one process.
 *   - _exit(), death by signal: the file is already complete; nothing has
 *     to run at exit. The command removes the files.
 * The descriptor is closed once the file is mapped (and is close-on-exec
 * until then): the program sees no descriptor of ours.
 *
 * The file's blocks are reserved before it is mapped: a page of a sparse
 * file on a full file system cannot be allocated when first written, and
 * the kernel says so with SIGBUS, which would kill the program before its
 * main(). Without room the file is left empty (the command reports it as
 * a process that found no room) and nothing is mapped.
 */
struct pka_header *pka_record_open(const char *dir, uint32_t base,
				   const char *specs)
{
	uint32_t n = 1, size;
	struct pka_header *h;
	char path[4096];
	void *p;
	int fd;

	for (const char *s = specs; *s && n < PKA_MAX; s++)
		n += *s == PKA_SEP;
	size = PKA_RECORD_SIZE(base, n);

	if (snprintf(path, sizeof(path), "%s/%d-XXXXXX", dir, (int)getpid()) >=
	    (int)sizeof(path))
		return NULL;
	fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (posix_fallocate(fd, 0, size)) {
		/* Undo a partial reservation; keep the empty file as the sign. */
		if (ftruncate(fd, 0))
			unlink(path);
		close(fd);
		return NULL;
	}
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		unlink(path);
		return NULL;
	}
	h = p;
	h->size = size;
	h->why_at = base;
	h->nwhy = n;
	return h;
}

void pka_record_publish(struct pka_header *h)
{
	/*
	 * Release: whoever sees magic sees the header stored before it. The
	 * command read()s the file through the same page and trusts nothing
	 * of a record without magic.
	 */
	__atomic_store_n(&h->magic, PKA_MAGIC, __ATOMIC_RELEASE);
}
