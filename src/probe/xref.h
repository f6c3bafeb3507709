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
 * What it holds, built from the object's file (its executable sections):
 *   - rel32: every byte that could begin a jmp, call, jcc or xbegin rel32
 *     (e8, e9, 0f 8x, c7 f8) and whose destination would fall in the
 *     object's code, kept as a sorted array of distinct 32-bit offsets
 *     from the load bias. No decoding: a superset of the rel32 branches a
 *     decoding finds. The extra ones (bytes of other instructions, data)
 *     have all but random destinations: 3 more int3 probes among libc's
 *     2614 jump-probeable functions, 46 among libLLVM-15's 33031.
 *   - rel8 branches reach 128 bytes at most: at each check where a byte
 *     within 130 bytes of the displaced bytes could be the opcode of one
 *     landing inside (a superset, as for rel32: 6 % of libxml2's
 *     functions have such a byte), that code is decoded exactly (read
 *     again from the file), each stretch from its start point as a
 *     decoding of the whole object would: the start points are every
 *     function start the file names (.symtab, .dynsym, and the
 *     .eh_frame_hdr table, which also covers the functions a stripped
 *     library has no symbol for) and each section's start.
 *
 * And the code addresses the object's data holds (pk_xref_data_in()):
 * its dynamic relocations' targets, and a non-PIE executable's aligned
 * data words that name its code.
 *
 * What it cannot see: indirect jumps and calls through what no
 * relocation names (jump tables of offsets: place.c reads those of the
 * probed function), branches in code generated at
 * run time, a rel8 branch whose instruction a decoding loses after data
 * embedded in text (for the few instructions the decoder takes to fall
 * back into step), and 66-prefixed rel16 jmp/call (which no compiler
 * emits). Junk decoded from data only adds destinations (a jump probe
 * refused where it was safe), never hides one.
 *
 * Built once per object, on the first check in it, and cached by load
 * bias and the file's identity (st_dev, st_ino, size, mtime): a library
 * unloaded and another (or a rebuilt one) loaded at the same place is
 * indexed again; the same file loaded again at the same place reuses its
 * index. A file whose GNU build id differs from the loaded object's
 * (replaced on disk since it was loaded) gets no index. Once an index is
 * verified to be of the object loaded at its bias, queries skip the stat
 * of its file until another object is loaded (dl_iterate_phdr's
 * dlpi_adds grows): until then the object at that bias is the same one,
 * whatever happens to the file on disk. test_place_batch unloads a
 * library, renames another over its file and loads it at its address.
 *
 * Arming a batch (thousands of checks in one object): after 32 checks
 * that read the file for rel8 candidates, the object's candidates are
 * kept as a bitmap (one bit a byte of its code span: 130 KB for
 * libstdc++'s 1 MB, 6.6 MB for libLLVM-15's 53 MB), built in one read of
 * its code; a check then opens the file only where a candidate lands in
 * the window, for the exact decoding.
 *
 * Locking: xref_lock (rank PK_RANK_SYM, a leaf: nothing is taken under it
 * but the dynamic linker's lock and the log's) guards the cache. Nothing
 * here is async-signal-safe. Cost (bench/bench_xref.c, 2026-12-01): libc
 * 4 ms of CPU to build, 100 KB kept; libLLVM-15 (53 MB of code, 98k
 * start points) 0.15 s, 2.2 MB; a check (open, read, decode with Zydis)
 * 24 us of CPU on memcpy, 17 us the median over libc's functions, 0.86 ms
 * at the costliest (vfwprintf, decoded from __vfwprintf_internal's start,
 * 36 KB before).
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

/*
 * pk_xref_start_in() - whether a function starts in [@lo, @lo + @len) of
 * the loaded object that holds @lo, as its symbol tables (.symtab,
 * .dynsym) and .eh_frame_hdr's FDEs say, or a section does: the padding
 * after a function is no other's. @at receives the lowest such start.
 * Return: as pk_xref_lands_in().
 */
PK_HIDDEN int pk_xref_start_in(uintptr_t lo, size_t len, uintptr_t *at);

/*
 * pk_xref_data_in() - whether the object's data holds a code address in
 * (@lo, @lo + @len), where an indirect jmp or call anywhere could go: a
 * dynamic relocation's target (a PIC object's pointers all have one), or,
 * in a non-PIE executable, an aligned 8-byte word of its data. @at
 * receives the lowest. Return: as pk_xref_lands_in().
 */
PK_HIDDEN int pk_xref_data_in(uintptr_t lo, size_t len, uintptr_t *at);

/* What an index cost to build and costs to keep. */
struct pk_xref_stats {
	size_t text_bytes;	/* executable bytes decoded */
	size_t starts;		/* distinct decoding start points */
	size_t insns;		/* unused: nothing is decoded at build time */
	size_t branches;	/* rel32 candidates into the object's code */
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
