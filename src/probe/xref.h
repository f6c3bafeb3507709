/* SPDX-License-Identifier: MIT */
/* xref.h - every direct branch destination of a loaded object, for the placement check (place.c). */
#ifndef PK_PROBE_XREF_H
#define PK_PROBE_XREF_H

/*
 * A jump probe displaces several instructions; a branch from anywhere in
 * the object that lands among them after their first byte would run the
 * middle of the jmp written over them (glibc's __mempcpy_sse2_unaligned
 * jumps to memcpy+3). The index answers "does any direct branch of the
 * object land in (lo, hi)?" with one binary search.
 *
 * What it holds: the destinations of every PC-relative branch (jmp, jcc,
 * call, loop, jrcxz, xbegin) decoded in the object's executable sections,
 * read from its file. Decoding restarts at every function start the file
 * names (.symtab, .dynsym, and the .eh_frame_hdr table, which also covers
 * the functions a stripped library has no symbol for) and at each
 * section's start; a byte that does not decode is stepped over. Stored as
 * a sorted array of distinct 32-bit offsets from the load bias.
 *
 * What it cannot see: indirect jumps and calls (jump tables, function
 * pointers: their destinations are data), branches in code generated at
 * run time, and, after data embedded in text, the few instructions the
 * decoder takes to fall back into step with the real instruction stream.
 * Junk decoded from data only adds destinations (a jump probe refused
 * where it was safe), never hides one.
 *
 * Built once per object, on the first check in it, and cached by load
 * bias and the file's identity (st_dev, st_ino, size, mtime): a library
 * unloaded and another (or a rebuilt one) loaded at the same place is
 * indexed again; the same file loaded again at the same place reuses its
 * index. A file whose GNU build id differs from the loaded object's
 * (replaced on disk since it was loaded) gets no index.
 *
 * Locking: xref_lock (rank PK_RANK_SYM, a leaf: nothing is taken under it
 * but the dynamic linker's lock and the log's) guards the cache. Nothing
 * here is async-signal-safe.
 */

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

struct pk_xref;

/*
 * pk_xref_lands_in() - whether a direct branch anywhere in the loaded
 * object that holds @lo lands in (@lo, @lo + @len): after @lo, before the
 * end. @at receives the lowest such destination.
 * Return: 0 (none does), 1 (one does: *@at), -ENOENT (no loaded object
 * holds @lo), -ENOEXEC (its file cannot be read, has no executable
 * sections, or is not the object loaded), -E2BIG (its code spans more than
 * 4 GiB), -ENOMEM.
 */
PK_HIDDEN int pk_xref_lands_in(uintptr_t lo, size_t len, uintptr_t *at);

/* What an index cost to build and costs to keep. */
struct pk_xref_stats {
	size_t text_bytes;	/* executable bytes decoded */
	size_t starts;		/* distinct decoding start points */
	size_t insns;		/* instructions decoded */
	size_t branches;	/* relative branches into the object's code */
	size_t targets;		/* distinct destinations kept */
	size_t bytes;		/* memory the index keeps */
	size_t peak_bytes;	/* the most its building held at once */
};

/*
 * pk_xref_build() - index the object file @path as if loaded at @bias,
 * outside the cache (the benchmark's entry point; pk_xref_lands_in()
 * builds its own).
 * Return: 0 with *@out set, or -errno as pk_xref_lands_in().
 */
PK_HIDDEN int pk_xref_build(const char *path, uintptr_t bias,
			    struct pk_xref **out);

/* pk_xref_get_stats() - @x's figures. */
PK_HIDDEN void pk_xref_get_stats(const struct pk_xref *x,
				 struct pk_xref_stats *st);

/* pk_xref_free() - free an index of pk_xref_build(); NULL is fine. */
PK_HIDDEN void pk_xref_free(struct pk_xref *x);

#endif /* PK_PROBE_XREF_H */
