// SPDX-License-Identifier: MIT
/* record.c - a process's record: one shared file mapping per program image, kept by forked children. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
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
 * a process that found no room) and nothing is mapped. Nor is a file
 * ever grown past the process's file size limit (RLIMIT_FSIZE, ulimit -f):
 * the kernel would say so with SIGXFSZ, which kills the program too. The
 * process leaves an empty <pid>-XXXXXX.fsize instead, for the command to
 * say why it has no record.
 *
 * The record keeps the process's name (comm) too: the command sees a
 * fork()ed child that ends within a few milliseconds only once it has
 * ended, with nothing left of it but its name, and takes one named as a
 * process with a record for a child of it (nothing is done at fork: a
 * note per fork would cost every fork a file).
 */

/*
 * Where this image's environment strings begin: envp[0] of the
 * constructors' arguments is the first string the kernel laid out
 * (env_start). Run before the agent's own constructor.
 */
static uint64_t env_start;

__attribute__((constructor(101))) static void note_env(int argc, char **argv,
							char **envp)
{
	(void)argc;
	(void)argv;
	if (envp && envp[0])
		env_start = (uint64_t)(uintptr_t)envp[0];
}

/* Whether @size bytes would pass the file size limit. */
static int over_fsize(uint64_t size)
{
	struct rlimit rl;

	return !getrlimit(RLIMIT_FSIZE, &rl) && rl.rlim_cur != RLIM_INFINITY &&
	       size > rl.rlim_cur;
}

/*
 * posix_fallocate() with SIGXFSZ blocked in this thread (raw syscalls:
 * the program's view of its mask, kept by the signal layer, never
 * changes): should the limit have been lowered since over_fsize() looked,
 * the signal the kernel sends this thread is taken back, unless one was
 * pending already. 0, or the error.
 */
static int reserve(int fd, uint64_t size)
{
	uint64_t set = 1ull << (SIGXFSZ - 1), old = 0, pend = 0;
	struct timespec zero = { 0, 0 };
	int err, had;

	if (syscall(SYS_rt_sigprocmask, SIG_BLOCK, &set, &old, sizeof(set)))
		return over_fsize(size) ? EFBIG : posix_fallocate(fd, 0, (off_t)size);
	had = !syscall(SYS_rt_sigpending, &pend, sizeof(pend)) && (pend & set);
	err = posix_fallocate(fd, 0, (off_t)size);
	if (err == EFBIG && !had)
		syscall(SYS_rt_sigtimedwait, &set, NULL, &zero, sizeof(set));
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, sizeof(old));
	return err;
}

/* Leave the sign of a file size limit too low: an empty <pid>-XXXXXX.fsize. */
static void fsize_sign(const char *dir)
{
	char path[4096];
	int fd;

	if (snprintf(path, sizeof(path), "%s/%d-XXXXXX" PKA_FSIZE_SUFFIX, dir,
		     (int)getpid()) >= (int)sizeof(path))
		return;
	fd = mkostemps(path, (int)strlen(PKA_FSIZE_SUFFIX), O_CLOEXEC);
	if (fd >= 0)
		close(fd);
}

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
				   uint32_t names, uint64_t (*area)(uint32_t))
{
	uint32_t n = 1;
	struct pka_header *h;
	struct stat exe;
	char path[4096];
	uint64_t size;
	void *p;
	int fd, err;

	for (const char *s = specs; *s; s++)
		n += *s == PKA_SEP;
	if (n > PKA_SPECS_MAX)
		return NULL;
	/* What the specs expanded to (pka_plan()): one a spec at least. */
	if (nprobe < n)
		nprobe = n;
	size = pka_record_size(slot, n, nprobe) + names;
	/* The mode's own area last, aligned (protocol.h). */
	if (area)
		size = pka_mode_at(size) + area(nprobe);
	if (size > UINT32_MAX)
		return NULL;

	if (over_fsize(size)) {
		fsize_sign(dir);
		return NULL;
	}
	if (snprintf(path, sizeof(path), "%s/%d-XXXXXX", dir, (int)getpid()) >=
	    (int)sizeof(path) - (int)sizeof(PKA_FSIZE_SUFFIX))
		return NULL;
	fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0)
		return NULL;
	err = reserve(fd, size);
	if (err) {
		char sign[4096 + sizeof(PKA_FSIZE_SUFFIX)];

		/* Undo a partial reservation; keep the empty file as the sign. */
		if (ftruncate(fd, 0))
			unlink(path);
		else if (err == EFBIG)
			rename(path, strcat(strcpy(sign, path), PKA_FSIZE_SUFFIX));
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
	if (area) {
		h->mode_at = (uint32_t)pka_mode_at((uint64_t)h->why_at + h->why_len);
		h->mode_len = h->size - h->mode_at;
	}
	h->pid = (int32_t)getpid();
	if (!stat("/proc/self/exe", &exe)) {
		h->exe_dev = exe.st_dev;
		h->exe_ino = exe.st_ino;
	}
	h->env_start = env_start;
	prctl(PR_GET_NAME, h->comm);
	h->comm[sizeof(h->comm) - 1] = 0;
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
