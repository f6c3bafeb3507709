/* SPDX-License-Identifier: MIT */
/* probekit/key.h - static keys: branch sites patched between NOP and JMP (pk_branch_*, pk_key_*), debug checks. */
#ifndef PROBEKIT_KEY_H
#define PROBEKIT_KEY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <probekit/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Static keys. A site compiled by pk_branch_unlikely()/pk_branch_likely() is
 * a 5-byte instruction recorded in the module's __pk_jump_table section:
 *
 *   as compiled          jmp to a load-and-branch on key->enabled (correct
 *                        before probekit has seen the module, and forever in
 *                        fallback mode);
 *   once the module is   a 5-byte NOP or a jmp straight to the branch target:
 *   registered           no load, no flag; patched whenever the key flips.
 *
 *                      key disabled     key enabled
 *   pk_branch_unlikely   NOP (false)      JMP -> true block
 *   pk_branch_likely     JMP -> false     NOP (true)
 *
 * Every module (executable, shared library, dlopen'ed library) registers its
 * table from a constructor emitted by this header, so sites of a library
 * loaded after a key was enabled come up in the key's state.
 *
 * Fallback mode (PROBEKIT_NOPATCH=1, or code patching refused by the system):
 * sites stay load-and-branch; behaviour is identical, only slower.
 */

struct pk_key {
	int enabled;			/* > 0: true. Read by fallback sites. */
	unsigned int pk_private_flags;
	void *pk_private[2];
};

#define PK_KEY_INIT_FALSE { 0, 0, { 0, 0 } }
#define PK_KEY_INIT_TRUE { 1, 0, { 0, 0 } }
#define PK_KEY_FALSE(name) struct pk_key name = PK_KEY_INIT_FALSE
#define PK_KEY_TRUE(name) struct pk_key name = PK_KEY_INIT_TRUE

/* One entry per branch site; layout shared with the asm below. */
struct pk_jump_entry {
	uintptr_t code;		/* the 5-byte site */
	uintptr_t target;	/* where the JMP form goes */
	uintptr_t check;	/* the load-and-branch block */
	uintptr_t key;		/* address of a pointer to the key; bit 0: likely */
};

/*
 * The key must be a constant address (a key with static storage): C refuses
 * anything else as a static initializer; C++ needs constexpr to do the same,
 * or it would initialize the pointer on first use, after the site was
 * registered.
 */
#ifdef __cplusplus
#define PK__KEY_TYPECHECK(k)                                                   \
	static_assert(__is_same(__typeof__(*(k)), struct pk_key),              \
		      "pk_branch_*() takes a struct pk_key *")
#define PK__KEY_PTR static constexpr struct pk_key *pk__kp
#else
#define PK__KEY_TYPECHECK(k)                                                   \
	_Static_assert(__builtin_types_compatible_p(__typeof__(*(k)),           \
						    struct pk_key),            \
		       "pk_branch_*() takes a struct pk_key *")
#define PK__KEY_PTR static struct pk_key *const pk__kp
#endif

/*
 * The key's address goes through a static pointer so that the asm operand is
 * a local symbol, which position-independent code accepts as "i".
 */
#define PK__BRANCH(k, likely, l_jmp, l_check)                                  \
	PK__KEY_TYPECHECK(k);                                                  \
	PK__KEY_PTR __attribute__((used)) = (k);                              \
	__asm__ goto("1: .byte 0xe9\n\t"                                       \
		     ".long %l[" #l_check "] - 2f\n"                           \
		     "2:\n\t"                                                  \
		     ".pushsection __pk_jump_table,\"aw\"\n\t"                 \
		     ".balign 8\n\t"                                           \
		     ".quad 1b, %l[" #l_jmp "], %l[" #l_check "], %c0 + %c1\n\t" \
		     ".popsection"                                             \
		     : : "i"(&pk__kp), "i"(likely) : : l_jmp, l_check)

/**
 * pk_branch_unlikely() - true while @k is enabled; the false path is inline
 * @k: a struct pk_key * (anything else does not compile)
 *
 * Context: any thread, async-signal-safe.
 */
#define pk_branch_unlikely(k)                                                  \
	(__extension__({                                                       \
		__label__ pk__jmp, pk__check, pk__out;                         \
		int pk__r = 0;                                                 \
		PK__BRANCH(k, 0, pk__jmp, pk__check);                          \
		goto pk__out;                                                  \
	pk__check:                                                             \
		if (__atomic_load_n(&(k)->enabled, __ATOMIC_RELAXED) <= 0)     \
			goto pk__out;                                          \
	pk__jmp:                                                               \
		pk__r = 1;                                                     \
	pk__out:                                                               \
		pk__r != 0;                                                    \
	}))

/**
 * pk_branch_likely() - true while @k is enabled; the true path is inline
 * @k: a struct pk_key *
 *
 * Context: any thread, async-signal-safe.
 */
#define pk_branch_likely(k)                                                    \
	(__extension__({                                                       \
		__label__ pk__jmp, pk__check, pk__out;                         \
		int pk__r = 1;                                                 \
		PK__BRANCH(k, 1, pk__jmp, pk__check);                          \
		goto pk__out;                                                  \
	pk__check:                                                             \
		if (__atomic_load_n(&(k)->enabled, __ATOMIC_RELAXED) > 0)      \
			goto pk__out;                                          \
	pk__jmp:                                                               \
		pk__r = 0;                                                     \
	pk__out:                                                               \
		pk__r != 0;                                                    \
	}))

/**
 * pk_key_enable() - make @k true (no-op if it already is)
 * @k: the key
 *
 * Context: any thread, may block; not from a chain callback or signal handler.
 * Return: 0, or -EINVAL (NULL), -EPERM/-ENOMEM (patching failed; @k unchanged).
 */
PK_API int pk_key_enable(struct pk_key *k);

/**
 * pk_key_disable() - make @k false, whatever its count
 * @k: the key
 *
 * Context: any thread, may block; not from a chain callback or signal handler.
 * Return: 0, or -EINVAL, -EPERM/-ENOMEM (@k unchanged).
 */
PK_API int pk_key_disable(struct pk_key *k);

/**
 * pk_key_inc() - take a reference on @k; the first makes it true
 * @k: the key
 *
 * Context: any thread, may block; not from a chain callback or signal handler.
 * Return: 0, or -EINVAL, -EOVERFLOW, -EPERM/-ENOMEM (@k unchanged).
 */
PK_API int pk_key_inc(struct pk_key *k);

/**
 * pk_key_dec() - drop a reference on @k; the last makes it false
 * @k: the key
 *
 * Context: any thread, may block; not from a chain callback or signal handler.
 * Return: 0, or -EINVAL (NULL, or count already 0), -EPERM/-ENOMEM.
 */
PK_API int pk_key_dec(struct pk_key *k);

/**
 * pk_key_set_many() - set several keys at once: one text batch for all sites
 * @keys: the keys
 * @values: true or false for each
 * @n: how many
 *
 * Context: any thread, may block; not from a chain callback or signal handler.
 * Return: 0, or -EINVAL, -EPERM/-ENOMEM (no key changed).
 */
PK_API int pk_key_set_many(struct pk_key *const *keys, const bool *values,
			   size_t n);

/**
 * pk_key_enabled() - whether @k is true now
 * @k: the key
 *
 * Context: any thread, async-signal-safe.
 */
PK_API bool pk_key_enabled(const struct pk_key *k);

/**
 * pk_key_patching() - whether branch sites are patched (false: fallback mode)
 *
 * Context: any thread, async-signal-safe.
 */
PK_API bool pk_key_patching(void);

/**
 * pk_jump_module_register() - register a module's branch sites
 * @start, @stop: its __pk_jump_table section
 *
 * Called by the constructor this header emits in every translation unit;
 * registering the same table again only counts a reference. Brings every
 * site to its key's state.
 *
 * Context: any thread, may block; not from a chain callback or signal handler.
 * Return: the number of sites, or -EINVAL, -ENOMEM.
 */
PK_API int pk_jump_module_register(struct pk_jump_entry *start,
				   struct pk_jump_entry *stop);

/**
 * pk_jump_module_unregister() - forget a module's sites (its destructor)
 * @start: as registered
 *
 * Context: any thread, may block; not from a chain callback or signal handler.
 */
PK_API void pk_jump_module_unregister(struct pk_jump_entry *start);

#ifndef PK_NO_MODULE_CONSTRUCTOR
extern struct pk_jump_entry __start___pk_jump_table
	__attribute__((weak, visibility("hidden")));
extern struct pk_jump_entry __stop___pk_jump_table
	__attribute__((weak, visibility("hidden")));

/* Runs before default-priority constructors, so no site runs unregistered. */
__attribute__((constructor(101), used)) static void pk__module_init(void)
{
	if (&__start___pk_jump_table != &__stop___pk_jump_table)
		pk_jump_module_register(&__start___pk_jump_table,
					&__stop___pk_jump_table);
}

__attribute__((destructor(101), used)) static void pk__module_fini(void)
{
	if (&__start___pk_jump_table != &__stop___pk_jump_table)
		pk_jump_module_unregister(&__start___pk_jump_table);
}
#endif

/*
 * Debug checks: assertions that stay compiled in and cost a NOP until turned
 * on at run time (by pk_key_enable(&pk_debug_key), or PROBEKIT_DEBUG=1).
 */
PK_API extern struct pk_key pk_debug_key;

/**
 * pk_debug_failed() - report a failed debug check and abort
 * @expr: the check's text
 * @file, @line: where it is
 *
 * Context: any thread.
 */
PK_API void pk_debug_failed(const char *expr, const char *file, int line)
	__attribute__((noreturn));

#define pk_debug_check(expr)                                                   \
	do {                                                                   \
		if (pk_branch_unlikely(&pk_debug_key) && !(expr))              \
			pk_debug_failed(#expr, __FILE__, __LINE__);            \
	} while (0)

#ifdef __cplusplus
}
#endif

#endif /* PROBEKIT_KEY_H */
