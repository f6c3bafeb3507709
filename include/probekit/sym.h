/* SPDX-License-Identifier: MIT */
/* probekit/sym.h - symbol lookup across the executable and every loaded library (pk_sym_lookup), by which probes find functions. */
#ifndef PROBEKIT_SYM_H
#define PROBEKIT_SYM_H

#include <stddef.h>
#include <stdint.h>

#include <probekit/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Functions by name: the executable's and every loaded library's .dynsym
 * (with symbol versions), their .symtab where present (static functions,
 * with the source file each came from), the debug file's .symtab where
 * the object has none and one is installed (PROBEKIT_DEBUG_DIR, default
 * /usr/lib/debug), and .eh_frame for the extent of a function no symbol
 * table sizes.
 *
 * A spec is [OBJECT:]NAME or OBJECT:0xOFFSET:
 *   OBJECT   a loaded object's file name, whole or up to a dot
 *            ("libz.so.1", "libz"), an fnmatch(3) glob over it
 *            ("libsqlite3*"), or a path ("/lib/x86_64-linux-gnu/libc.so.6":
 *            the same file, by device and inode, whatever link or
 *            directory it was loaded through). Absent: every object.
 *   NAME     NAME[@VERSION|@@VERSION], optionally FILE#NAME:
 *            - a plain name means its default version (NAME@@V, what the
 *              dynamic linker binds); NAME@V selects another version;
 *            - fnmatch(3) globs ("str*", "*");
 *            - C++ names as written, "ns::Cls::method" or with its
 *              parameter list "ns::Cls::method(int)" (ABI tags such as
 *              "[abi:cxx11]" optional), when the C++
 *              runtime's __cxa_demangle is loaded (found at run time;
 *              without it only mangled names match);
 *            - FILE#NAME: a local (static) function of that source file
 *              (its STT_FILE entry in .symtab; FILE may be a glob).
 *   0xOFFSET the function starting OFFSET bytes from the object's load
 *            base (a file address), from a symbol or else from the FDE
 *            that starts there: how a stripped executable's functions
 *            are named.
 * An IFUNC resolves to the implementation this process's calls reach
 * (the resolver's choice, as dlsym(3) of it returns it, or its IRELATIVE
 * slot when it is not exported). A loaded object's symbols come from the
 * file mapped, never from another file put at its path since.
 */

enum pk_sym_table {
	PK_SYM_DYNSYM = 1,	/* the dynamic symbol table */
	PK_SYM_SYMTAB = 2,	/* the full table (static functions); absent when stripped */
	PK_SYM_DEBUG = 3,	/* the .symtab of a separate debug file */
	PK_SYM_EH_FRAME = 4,	/* no symbol sizes it: the FDE covering it */
	PK_SYM_MINIDEBUG = 5,	/* the .symtab in its .gnu_debugdata (MiniDebugInfo) */
};

enum pk_sym_flags {
	PK_SYM_F_GLOBAL = 1 << 0,	/* a global or weak definition */
	PK_SYM_F_IFUNC = 1 << 1,	/* @name is an IFUNC; @addr its target */
	PK_SYM_F_COMPAT = 1 << 2,	/* a non-default version (NAME@V) */
	PK_SYM_F_FILE = 1 << 3,		/* read from a file not loaded: @addr
					   is a file address, @base 0 */
	PK_SYM_F_UNRESOLVED = 1 << 4,	/* an IFUNC of a file not loaded: @addr
					   is its resolver */
};

/*
 * What a lookup found. Version 0 of the library extends this struct in
 * place (it had no size field: the ABI changed knowingly before 1.0);
 * @reserved is room for later fields without another break.
 */
struct pk_sym {
	uintptr_t addr;		/* where the function is loaded */
	size_t size;		/* its size (from @table) */
	int table;		/* enum pk_sym_table its extent came from */
	unsigned int flags;	/* enum pk_sym_flags */
	uintptr_t base;		/* the object's load base (addr - base: its file address) */
	char object[256];	/* path of the executable or library */
	char name[512];		/* the symbol's name, demangled where possible */
	char version[64];	/* its version ("GLIBC_2.14"), or "" */
	char impl[256];		/* IFUNC: the implementation's name
				   ("__strlen_avx2"), or "strlen (ifunc target
				   at 0xOFFSET)" where no table names it */
	char file[128];		/* the source file of a local, or "" */
	uint64_t reserved[8];
};

/**
 * pk_sym_lookup() - find one function in the executable or a loaded library
 * @spec: "[OBJECT:]NAME" or "OBJECT:0xOFFSET", see above
 * @out: receives the function
 *
 * Global definitions win in load order (as the dynamic linker binds them);
 * a name carried only by local (static) functions must be unique. A glob
 * must match exactly one function (pk_sym_each() for more).
 *
 * Context: any thread, may block; not from a signal handler.
 * Return: 0, or -ENOENT (no such function, version or object), -EINVAL
 * (bad @spec, ambiguous name, glob matching several, an offset inside a
 * function, an IFUNC that does not resolve), -ENOMEM. The log says which.
 */
PK_API int pk_sym_lookup(const char *spec, struct pk_sym *out);

/**
 * pk_sym_each() - every function a spec names
 * @spec: as for pk_sym_lookup(); a glob (in OBJECT or NAME) gives every
 *        function it matches, one per address; OBJECT may be the path of
 *        a file that is not loaded: its functions are read from the file
 *        (PK_SYM_F_FILE: file addresses, IFUNCs unresolved)
 * @fn: called once per function, in load order then table order; returns
 *      0 to go on, a negative errno to stop
 * @ctx: passed to @fn
 *
 * Without a glob it gives what pk_sym_lookup() would, once.
 *
 * Context: any thread, may block; not from a signal handler. @fn may call
 * pk_sym_lookup() and create probes, not register them.
 * Return: the number of functions passed to @fn (> 0), or -ENOENT
 * (nothing matched), -EINVAL, -ENOMEM as for pk_sym_lookup(), or @fn's
 * negative return.
 */
PK_API int pk_sym_each(const char *spec,
		       int (*fn)(const struct pk_sym *sym, void *ctx),
		       void *ctx);

#ifdef __cplusplus
}
#endif

#endif /* PROBEKIT_SYM_H */
