/* SPDX-License-Identifier: MIT */
/* sym.h - what the symbol layer's files share: one ELF file's functions (symbol tables, debug file, .eh_frame), read with libelf. */
#ifndef PK_SYM_SYM_H
#define PK_SYM_SYM_H

/*
 * The symbol layer's files, each using only those before it:
 *
 *   eh.c     .eh_frame reader: every FDE's [start, start + range)
 *   minidebug.c  .gnu_debugdata's xz stream unpacked (liblzma)
 *   elf.c    one file's functions: .dynsym with versions, .symtab with
 *            STT_FILE, .gnu_debugdata's .symtab (MiniDebugInfo), the
 *            debug file's .symtab, FDEs (pk_elf_scan)
 *   sym.c    specs, matching, versions and IFUNCs of the loaded objects:
 *            pk_sym_lookup(), pk_sym_each(), pk_sym_func_at()
 */

#include <stddef.h>
#include <stdint.h>

#include <gelf.h>

#include "internal.h"

struct pk_func;

/*
 * pk_eh_each_fde() - call @fn for every FDE in the .eh_frame section
 * @data (@len bytes, loaded at file address @vaddr) with its initial
 * location and range as file addresses; CIEs give the pointer encodings.
 * A malformed entry ends the walk (what was read before it stays).
 * @fn returns 0 to go on, a -errno to stop.
 * Return: the FDEs passed to @fn, or @fn's negative return.
 */
PK_HIDDEN int pk_eh_each_fde(const uint8_t *data, size_t len, uint64_t vaddr,
			     int (*fn)(uint64_t start, uint64_t range, void *ctx),
			     void *ctx);

/*
 * pk_eh_each_lsda() - call @fn for every FDE of the .eh_frame section
 * @data (as pk_eh_each_fde()) that names an LSDA (a C++ function's
 * .gcc_except_table entry), with its start, range and the LSDA's file
 * address. Return: the FDEs passed to @fn, @fn's nonzero return, or
 * -EINVAL (an entry cannot be read: what follows it is unknown).
 */
PK_HIDDEN int pk_eh_each_lsda(const uint8_t *data, size_t len, uint64_t vaddr,
			      int (*fn)(uint64_t start, uint64_t range,
					uint64_t lsda, void *ctx),
			      void *ctx);

/*
 * pk_eh_landing_pads() - call @fn with the address of every landing pad
 * of the LSDA @lsda (@len bytes readable, at file address @vaddr) of the
 * function starting at @start (the default LPStart). The unwinder jumps
 * to these; no branch names them. Return: 0, or -EINVAL (not readable).
 */
PK_HIDDEN int pk_eh_landing_pads(const uint8_t *lsda, size_t len,
				 uint64_t vaddr, uint64_t start,
				 void (*fn)(uint64_t pad, void *ctx), void *ctx);

/* One function of a file, as pk_elf_scan() hands it out. */
struct pk_elf_sym {
	const char *name;	/* without a version suffix; NULL for an FDE */
	const char *version;	/* its version, or NULL */
	int hidden;		/* a non-default version (NAME@V, not NAME@@V) */
	uint64_t value;		/* file address (add the load bias) */
	uint64_t size;
	int type;		/* STT_FUNC or STT_GNU_IFUNC */
	int bind;		/* STB_* */
	int table;		/* enum pk_sym_table */
	const char *file;	/* the STT_FILE a local follows, or NULL */
};

enum {
	PK_ELF_SYMS = 1,	/* .dynsym and .symtab */
	PK_ELF_DEBUG = 2,	/* if no .symtab: .gnu_debugdata's .symtab, else
				 * the debug file's */
	PK_ELF_FDES = 4,	/* .eh_frame FDEs (name NULL) */
	PK_ELF_MANGLED = 8,	/* with a prefix: C++ names (_Z...) pass too */
};

/* What pk_elf_scan() learnt about the file. */
struct pk_elf_info {
	int has_symtab;
	int e_type;			/* ET_EXEC, ET_DYN */
	uint64_t jump_table;		/* __pk_jump_table's file address */
	uint64_t jump_table_size;
	char debug[4096];		/* the debug file read (the file itself
					 * for its .gnu_debugdata), or "" */
};

/*
 * pk_minidebug_unpack() - unpack the xz stream @xz (@len bytes, a
 * .gnu_debugdata section) into a malloc()ed buffer *@out of *@outlen
 * bytes (caller frees). On failure *@why says why in a few words.
 * Return: 0, or -EINVAL (not xz, corrupt, truncated), -E2BIG (over
 * 256 MiB unpacked), -ENOMEM.
 */
PK_HIDDEN int pk_minidebug_unpack(const void *xz, size_t len, void **out,
				  size_t *outlen, const char **why);

/*
 * pk_elf_scan() - call @fn for every defined function of the ELF file at
 * @path (what @flags asks for). The debug file is looked for under
 * PROBEKIT_DEBUG_DIR (default /usr/lib/debug; empty: none) by build-id,
 * then by .gnu_debuglink, unless the file's .gnu_debugdata (MiniDebugInfo)
 * gave a .symtab; one whose build id is not the file's is refused (an
 * error line says so, as for one that cannot be unpacked, and the other
 * sources are read as if it were absent). @prefix: only symbols whose name starts with it
 * (and C++ ones with PK_ELF_MANGLED) are handed out; NULL: all.
 * @fn returns 0 to go on, a -errno to stop.
 * Return: 0, or -ENOENT (no such file, not ELF), -ENOMEM, or @fn's
 * negative return.
 */
PK_HIDDEN int pk_elf_scan(const char *path, unsigned int flags,
			  const char *prefix,
			  int (*fn)(const struct pk_elf_sym *s, void *ctx),
			  void *ctx, struct pk_elf_info *info);

/*
 * pk_elf_irelative() - the slot an R_X86_64_IRELATIVE relocation of the
 * ELF file at @path fills with what the resolver at file address
 * @resolver returns: its file address into *@slot (the dynamic linker
 * wrote the IFUNC's target there when it loaded the object, as it does
 * for IRELATIVE relocations even under lazy binding).
 * Return: 0, or -ENOENT (no such file, no such relocation: the IFUNC is
 * never called or its address never taken through a relocation).
 */
PK_HIDDEN int pk_elf_irelative(const char *path, uint64_t resolver,
			       uint64_t *slot);

/* pk_elf_build_id() - the build id of the ELF file at @path into @id (up to @cap bytes): its length, 0 if none or unreadable. */
PK_HIDDEN size_t pk_elf_build_id(const char *path, uint8_t *id, size_t cap);

/*
 * pk_note_build_id() - the GNU build id in the ELF notes at @p (@size bytes,
 * as mapped or read) into @id (PK_BUILD_ID_MAX bytes): its length, or 0.
 */
#define PK_BUILD_ID_MAX 64
PK_HIDDEN size_t pk_note_build_id(const uint8_t *p, size_t size, uint8_t *id);

/*
 * pk_sym_spec_loaded() - whether @spec's OBJECT is loaded (some object of
 * the link map matches it, as pk_sym_lookup() matches objects): 1, or 0
 * when none is (the agent says "not loaded" then, not "no function").
 * A spec without OBJECT, one naming a file, or one that does not parse: 1.
 */
PK_HIDDEN int pk_sym_spec_loaded(const char *spec);

/*
 * pk_sym_func_at_hook - NULL, or what answers for the extent of an
 * IFUNC's implementation (pk_sym_func_at()'s question) instead of the
 * object's index, which reads and sorts every symbol and FDE of the
 * object (4 ms for libc): the agent's run cache (agent/xcache.c), while
 * it arms. Set and read by the thread that arms only.
 */
PK_HIDDEN extern int (*pk_sym_func_at_hook)(uintptr_t addr,
					    struct pk_func *out);

/* pk_elf_debug_dir() - where debug files are looked for ("": nowhere). */
PK_HIDDEN const char *pk_elf_debug_dir(void);

#endif /* PK_SYM_SYM_H */
