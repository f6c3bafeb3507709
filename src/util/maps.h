/* SPDX-License-Identifier: MIT */
/* maps.h - the mappings of this process (/proc/self/maps), looked up by address. */
#ifndef PK_UTIL_MAPS_H
#define PK_UTIL_MAPS_H

/*
 * A view (struct pk_maps) answers lookups of the process's mappings. With
 * PROCMAP_QUERY (Linux 6.11) each mapping is fetched from the kernel once,
 * when first looked up, one ioctl; otherwise /proc/self/maps is read whole
 * when the view opens (a process with many threads has hundreds of lines:
 * tens of microseconds). Either way a view remembers what it found: it
 * answers as the address space was then, so it is for the span of one
 * operation (a commit, a check), and is opened again for the next.
 *
 * A view belongs to one thread at a time (the caller's lock guards it).
 * Nothing here is async-signal-safe (open, ioctl, malloc), and nothing
 * writes errno. PROBEKIT_TEST_MAPS_READ=1 forces the reading path (in the
 * tests' copy of the library only).
 */

#include <stddef.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/types.h>

#include "internal.h"

/*
 * PROCMAP_QUERY's argument (uapi linux/fs.h, 104 bytes; Debian 12's headers
 * predate it). The watch layer asks it from its fault path too.
 */
struct pk_procmap_query {
	uint64_t size, query_flags, query_addr;
	uint64_t vma_start, vma_end, vma_flags, vma_page_size, vma_offset;
	uint64_t inode;
	uint32_t dev_major, dev_minor, vma_name_size, build_id_size;
	uint64_t vma_name_addr, build_id_addr;
};
#define PK_PROCMAP_QUERY _IOWR('f', 17, struct pk_procmap_query)
#define PK_PROCMAP_VMA_READABLE 0x01
#define PK_PROCMAP_VMA_WRITABLE 0x02
#define PK_PROCMAP_VMA_EXECUTABLE 0x04
#define PK_PROCMAP_VMA_SHARED 0x08
#define PK_PROCMAP_COVERING_OR_NEXT_VMA 0x10	/* query_flags */

/* One mapping, as a line of /proc/self/maps describes it. */
struct pk_mapinfo {
	uintptr_t lo, hi;	/* [lo, hi) */
	int prot;		/* PROT_READ | PROT_WRITE | PROT_EXEC */
	int shared;		/* 's': MAP_SHARED (else private) */
	unsigned int dev_major, dev_minor; /* the file's device, or 0 */
	uint64_t ino;		/* the file's inode, or 0 (anonymous) */
	char name[32];		/* with PK_MAPS_NAME: "[heap]", "[stack]",
				   "[anon:...]", a path (its first 31 bytes),
				   or "" (anonymous); else "" */
};

#define PK_MAPS_NAME 0x1	/* pk_maps_open(): fill in pk_mapinfo.name */

struct pk_maps {
	struct pk_mapinfo *m;	/* sorted by address: what was fetched, or
				   (reading) every mapping */
	size_t n, cap;
	int fd;			/* /proc/self/maps, or -1 */
	pid_t pid;		/* the process that opened @fd */
	unsigned int flags;	/* PK_MAPS_* */
	int query;		/* lookups by PROCMAP_QUERY */
};

#define PK_MAPS_INIT { .fd = -1 }

/*
 * pk_maps_open() - start a view of the mappings in @ms (PK_MAPS_INIT, or a
 * view opened before: what it found is forgotten, its descriptor and
 * memory are kept if still this process's, so a view per operation costs
 * no open(2)).
 * @flags: PK_MAPS_NAME, or 0
 * Return: 0, or -errno (of open(2) or read(2), -ENOMEM). Then @ms answers
 * nothing, but pk_maps_close() is still due.
 */
PK_HIDDEN int pk_maps_open(struct pk_maps *ms, unsigned int flags);

/*
 * pk_maps_find() - the mapping that holds @addr.
 * Return: 0 with *@out filled, -ENOENT (nothing mapped there), or -errno
 * of the kernel's lookup.
 */
PK_HIDDEN int pk_maps_find(struct pk_maps *ms, uintptr_t addr,
			   struct pk_mapinfo *out);

/*
 * pk_maps_next() - the mapping that holds @addr, else the first one above
 * it: walk every mapping with
 *	for (a = 0; !pk_maps_next(ms, a, &mi); a = mi.hi)
 * Return: 0 with *@out filled, -ENOENT (none above), or -errno.
 */
PK_HIDDEN int pk_maps_next(struct pk_maps *ms, uintptr_t addr,
			   struct pk_mapinfo *out);

/* pk_maps_close() - free @ms and close its descriptor; PK_MAPS_INIT again. */
PK_HIDDEN void pk_maps_close(struct pk_maps *ms);

#endif /* PK_UTIL_MAPS_H */
