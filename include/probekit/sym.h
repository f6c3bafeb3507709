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
 * Functions by name: the executable's and every loaded library's .dynsym,
 * and their .symtab where present (static functions).
 */

enum pk_sym_table {
	PK_SYM_DYNSYM = 1,	/* the dynamic symbol table */
	PK_SYM_SYMTAB = 2,	/* the full table (static functions); absent when stripped */
};

struct pk_sym {
	uintptr_t addr;		/* where the function is loaded */
	size_t size;		/* its size from the symbol table */
	int table;		/* enum pk_sym_table it came from */
	char object[256];	/* path of the executable or library */
};

/**
 * pk_sym_lookup() - find a function in the executable or a loaded library
 * @spec: "name", or "object:name" where object is a file's base name, whole
 *        or up to a dot ("libz.so.1:inflate", "libz:inflate")
 * @out: receives the address, size, table and object
 *
 * Global definitions win in load order (as the dynamic linker binds them);
 * a name carried only by local (static) functions must be unique.
 *
 * Context: any thread, may block; not from a signal handler.
 * Return: 0, or -ENOENT (no such function or object), -EINVAL (bad @spec,
 * ambiguous name, IFUNC), -ENOMEM. The log says which.
 */
PK_API int pk_sym_lookup(const char *spec, struct pk_sym *out);

#ifdef __cplusplus
}
#endif

#endif /* PROBEKIT_SYM_H */
