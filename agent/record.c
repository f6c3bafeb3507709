// SPDX-License-Identifier: MIT
/* record.c - a process's record: one shared file mapping per program image, kept by forked children. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
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
const char *pka_specs_map(const char *path)
{
	struct stat st;
	const char *p;
	int fd;

	if (!path)
		return NULL;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	/* A regular file ending with its NUL, of a size the specs can have. */
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size < 2 ||
	    st.st_size > 256 * 1024 * 1024) {
		close(fd);
		return NULL;
	}
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return NULL;
	if (p[st.st_size - 1] || memchr(p, 0, (size_t)st.st_size - 1)) {
		munmap((void *)p, (size_t)st.st_size);
		return NULL;
	}
	return p;
}

struct pka_header *pka_record_open(const char *dir, uint32_t slot,
				   const char *specs, uint32_t nprobe,
				   uint32_t names)
{
	uint32_t n = 1;
	struct pka_header *h;
	struct stat exe;
	char path[4096];
	uint64_t size;
	void *p;
	int fd;

	for (const char *s = specs; *s; s++)
		n += *s == PKA_SEP;
	if (n > PKA_SPECS_MAX)
		return NULL;
	/* What the specs expanded to (pka_plan()): one a spec at least. */
	if (nprobe < n)
		nprobe = n;
	size = pka_record_size(slot, n, nprobe) + names;
	if (size > UINT32_MAX)
		return NULL;

	if (snprintf(path, sizeof(path), "%s/%d-XXXXXX", dir, (int)getpid()) >=
	    (int)sizeof(path))
		return NULL;
	fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (posix_fallocate(fd, 0, (off_t)size)) {
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
	h->size = (uint32_t)size;
	h->nspec = n;
	h->nprobe = nprobe;
	h->spec_at = pka_spec_at();
	h->probe_at = pka_probe_at(n);
	h->slot_at = (uint32_t)pka_slot_at(n, nprobe);
	h->slot_size = slot;
	h->why_at = h->slot_at + nprobe * slot;
	h->why_len = pka_why_len(n) + names;
	h->pid = (int32_t)getpid();
	if (!stat("/proc/self/exe", &exe)) {
		h->exe_dev = exe.st_dev;
		h->exe_ino = exe.st_ino;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct pka_spec *s = pka_record_spec(h, i);

		s->status = PKA_PENDING;
		s->first = i;
		s->nprobe = 1;
		pka_record_probe(h, i)->spec = i;
		pka_record_probe(h, i)->status = PKA_PENDING;
	}
	return h;
}

void pka_record_why(struct pka_header *h, uint32_t i, const char *msg)
{
	struct pka_spec *s;
	uint32_t len, at;

	if (i >= h->nspec)
		return;
	s = pka_record_spec(h, i);
	if (s->why)
		return;
	len = (uint32_t)strnlen(msg, PKA_WHY_LEN - 1) + 1;
	at = __atomic_fetch_add(&h->why_used, len, __ATOMIC_RELAXED);
	/* No room for it whole: the spec keeps its errno only. */
	if (at > h->why_len || len > h->why_len - at)
		return;
	memcpy((char *)h + h->why_at + at, msg, len - 1);
	((char *)h + h->why_at)[at + len - 1] = 0;
	__atomic_store_n(&s->why, at + 1, __ATOMIC_RELEASE);
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
