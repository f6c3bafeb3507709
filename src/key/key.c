// SPDX-License-Identifier: MIT
/* key.c - static keys: per-module site tables, one text batch per key change. */

/*
 * Design
 * ======
 *
 * Every module (executable, shared library) that includes probekit.h has a
 * __pk_jump_table section, one struct pk_jump_entry per branch site, and a
 * constructor in each of its translation units that calls
 * pk_jump_module_register() with the same table. The first call for a table
 * sorts it in place by key (the section is writable) and, in patched mode,
 * rewrites every site of the module in ONE text batch from its compiled form
 * to its direct form:
 *
 *   compiled   e9 <rel32 to entry.check>    a load-and-branch on key->enabled
 *   direct     0f 1f 44 00 00               when !(enabled ^ likely)
 *              e9 <rel32 to entry.target>   when  (enabled ^ likely)
 *
 * A key change (enable, disable, inc, dec, set_many) that flips a key's truth
 * collects the sites of every flipped key in every patched module (binary
 * search in each sorted table) into ONE text batch, commits it, and only then
 * stores the new key->enabled. A failed commit leaves everything as it was,
 * code and count alike. Changes that do not flip a key (inc from 1 to 2)
 * only store the count.
 *
 * Modes (key_mode):
 *
 *   undecided  nothing committed yet;
 *   patched    the first commit succeeded: registered modules are patched;
 *   fallback   PROBEKIT_NOPATCH=1, or the first commit was refused with
 *              -EPERM/-ENOTSUP: no site is ever patched again, every site
 *              keeps its compiled load-and-branch and stays correct.
 *
 * A module whose registration batch fails for another reason (one odd site)
 * stays registered but unpatched (module->patched false); its sites are
 * load-and-branch and are left out of every later batch.
 *
 * A site whose key pointer is still NULL at registration cannot be sorted
 * or patched. probekit/key.h now refuses non-constant keys (constexpr in C++),
 * but a table built by an older header could hold one: C++ initialised a
 * function-local static at its first run when the key was a parameter of a
 * template. Such entries sort first, stay compiled (their check block
 * reads the key expression itself, so they stay correct) and are never
 * looked at again: the pointer may change later, so searches start at
 * module->first.
 */

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "arch/arch.h"
#include "internal.h"

#define PK_SITE_LEN PK_ARCH_JMP_LEN

struct pk_key pk_debug_key = PK_KEY_INIT_FALSE;

enum pk_key_mode {
	PK_KEY_MODE_UNDECIDED = 0,
	PK_KEY_MODE_PATCHED,
	PK_KEY_MODE_FALLBACK,
};

/* One registered __pk_jump_table. */
struct pk_jump_module {
	struct pk_jump_entry *start, *stop;	/* sorted by entry key */
	struct pk_jump_entry *first;	/* first entry with a key: see below */
	unsigned long refs;	/* translation units that registered it */
	bool patched;		/* sites are in direct form and follow keys */
};

/*
 * pk_key_lock guards:
 *   - pk_modules, pk_nr_modules, pk_cap_modules and the order of the
 *     tables they point to (sorted once, on first registration);
 *   - every write of a key's ->enabled (readers load it atomically without
 *     the lock: fallback sites, pk_key_enabled());
 *   - the code bytes of every site of every registered module: only this
 *     file patches them, always under the lock, so the bytes a site holds
 *     follow from its module's ->patched and its key's ->enabled;
 *   - writes of pk_key_mode and pk_key_env_done (pk_key_patching() reads
 *     pk_key_mode without it).
 * It is held across pk_batch_commit(): the text layer must never call back
 * into this file (lock order: pk_key_lock, then the text layer's locks).
 */
static pthread_mutex_t pk_key_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pk_jump_module *pk_modules;
static size_t pk_nr_modules, pk_cap_modules;
static int pk_key_mode;			/* enum pk_key_mode */
static bool pk_key_env_done;		/* PROBEKIT_NOPATCH looked at */

/* ------------------------------------------------------------ entries */

static inline struct pk_key *entry_key(const struct pk_jump_entry *e)
{
	return *(struct pk_key *const *)(e->key & ~(uintptr_t)1);
}

static inline bool entry_likely(const struct pk_jump_entry *e)
{
	return e->key & 1;
}

static inline bool key_true(int count)
{
	return count > 0;
}

/* A jmp from @from to @to; false if @to is out of reach. */
static bool encode_jmp(uint8_t out[PK_SITE_LEN], uintptr_t from, uintptr_t to)
{
	return pk_arch_encode_jmp(out, from, to) == 0;
}

/* The site as the compiler emitted it: jmp to the load-and-branch. */
static bool encode_compiled(const struct pk_jump_entry *e,
			    uint8_t out[PK_SITE_LEN])
{
	return encode_jmp(out, e->code, e->check);
}

/* The site's direct form for a key whose truth is @on. */
static bool encode_direct(const struct pk_jump_entry *e, bool on,
			  uint8_t out[PK_SITE_LEN])
{
	if (on != entry_likely(e))
		return encode_jmp(out, e->code, e->target);
	pk_arch_encode_nop(out);
	return true;
}

static int entry_cmp(const void *a, const void *b)
{
	const struct pk_jump_entry *x = a, *y = b;
	uintptr_t kx = (uintptr_t)entry_key(x), ky = (uintptr_t)entry_key(y);

	if (kx != ky)
		return kx < ky ? -1 : 1;
	return (x->code > y->code) - (x->code < y->code);
}

/* First entry of @m whose key is >= @k. */
static struct pk_jump_entry *module_lower_bound(const struct pk_jump_module *m,
						const struct pk_key *k)
{
	return m->first + PK_LOWER_BOUND((size_t)(m->stop - m->first), i,
					 (uintptr_t)entry_key(&m->first[i]) <
						 (uintptr_t)k);
}

static struct pk_jump_module *module_find(const struct pk_jump_entry *start)
{
	pk_assert_held(&pk_key_lock);
	for (size_t i = 0; i < pk_nr_modules; i++)
		if (pk_modules[i].start == start)
			return &pk_modules[i];
	return NULL;
}

/* -------------------------------------------------------------- batch */

/* A text batch built lazily; the first error sticks and fails the commit. */
struct key_batch {
	struct pk_batch *b;
	int err;
};

static void kb_add(struct key_batch *kb, const struct pk_jump_entry *e,
		   const uint8_t new_bytes[PK_SITE_LEN],
		   const uint8_t old_bytes[PK_SITE_LEN])
{
	int ret;

	if (kb->err)
		return;
	if (!memcmp(new_bytes, old_bytes, PK_SITE_LEN))
		return;
	if (!kb->b) {
		ret = pk_batch_create(&kb->b);
		if (ret < 0) {
			kb->b = NULL;
			kb->err = ret;
			return;
		}
	}
	ret = pk_batch_add(kb->b, (void *)e->code, new_bytes, PK_SITE_LEN,
			   old_bytes, 0);
	if (ret < 0)
		kb->err = ret;
}

/* fork() takes pk_key_lock, in internal.h's lock order. */
static void key_fork_prepare(void)
{
	pthread_mutex_lock(&pk_key_lock);
}

static void key_fork_release(void)
{
	pthread_mutex_unlock(&pk_key_lock);
}

PK_ATFORK(key, PK_RANK_KEY, key_fork_prepare, key_fork_release,
	  key_fork_release);

static void key_mode_set(enum pk_key_mode mode)
{
	pk_assert_held(&pk_key_lock);
	__atomic_store_n(&pk_key_mode, mode, __ATOMIC_RELAXED);
}

/* Look at PROBEKIT_NOPATCH once, before the first commit. */
static void key_mode_env_locked(void)
{
	pk_assert_held(&pk_key_lock);
	if (pk_key_env_done)
		return;
	pk_key_env_done = true;
	if (pk_key_mode == PK_KEY_MODE_UNDECIDED && pk_env_flag("NOPATCH")) {
		key_mode_set(PK_KEY_MODE_FALLBACK);
		pk_info("static keys: fallback mode (load-and-branch sites): PROBEKIT_NOPATCH=1");
	}
}

static const char *err_name(int err)
{
	const char *s = strerrorname_np(err < 0 ? -err : err);

	return s ? s : "unknown error";
}

/*
 * Commit @kb (nothing to do if it is empty) and free it. The first commit
 * decides the mode: success means patched; -EPERM or -ENOTSUP means the
 * system or the text layer refuses code patching, hence fallback.
 * Return: 0, or -errno with nothing changed.
 */
static int kb_commit(struct key_batch *kb, const char *what)
{
	int ret = kb->err;

	pk_assert_held(&pk_key_lock);
	if (!ret && kb->b)
		ret = pk_batch_commit(kb->b);
	else if (!ret)
		return 0;
	pk_batch_free(kb->b);
	kb->b = NULL;

	if (ret >= 0) {
		if (pk_key_mode == PK_KEY_MODE_UNDECIDED) {
			key_mode_set(PK_KEY_MODE_PATCHED);
			pk_info("static keys: patched mode (sites are NOP or JMP)");
		}
		return 0;
	}
	if (pk_key_mode == PK_KEY_MODE_UNDECIDED &&
	    (ret == -EPERM || ret == -ENOTSUP)) {
		key_mode_set(PK_KEY_MODE_FALLBACK);
		pk_warn("static keys: fallback mode (load-and-branch sites): code patching refused (%s) while %s",
			err_name(ret), what);
	} else {
		pk_warn("static keys: %s failed: %s", what, err_name(ret));
	}
	return ret;
}

/* --------------------------------------------------------------- keys */

/* A key's count before and after a change. */
struct key_change {
	struct pk_key *key;
	int old, new;
};

/*
 * Apply @n changes of distinct keys: one batch for the sites of every key
 * whose truth flips, then the new counts. The counts are stored after the
 * commit (as the kernel's static_key_enable does), so a failed commit leaves
 * no trace, not even a transient one on fallback sites.
 */
static int key_apply(struct key_change *c, size_t n, const char *what)
{
	struct key_batch kb = { 0 };
	uint8_t old_bytes[PK_SITE_LEN], new_bytes[PK_SITE_LEN];
	int ret;

	pk_assert_held(&pk_key_lock);
	for (size_t i = 0; i < n; i++) {
		bool on = key_true(c[i].new);

		if (on == key_true(c[i].old))
			continue;
		for (size_t j = 0; j < pk_nr_modules; j++) {
			const struct pk_jump_module *m = &pk_modules[j];
			struct pk_jump_entry *e;

			if (!m->patched)
				continue;
			for (e = module_lower_bound(m, c[i].key);
			     e < m->stop && entry_key(e) == c[i].key; e++) {
				/* in range: checked at registration */
				encode_direct(e, !on, old_bytes);
				encode_direct(e, on, new_bytes);
				kb_add(&kb, e, new_bytes, old_bytes);
			}
		}
	}
	ret = kb_commit(&kb, what);
	if (ret < 0)
		return ret;
	/*
	 * Fallback sites and pk_key_enabled() load the count relaxed: they see
	 * it eventually, in no promised order with the code just written
	 * (release is free on x86 and keeps the count after the commit).
	 */
	for (size_t i = 0; i < n; i++)
		__atomic_store_n(&c[i].key->enabled, c[i].new, __ATOMIC_RELEASE);
	return 0;
}

static int key_set_one(struct pk_key *k, int new_count, const char *what)
{
	struct key_change c = { k, 0, new_count };

	pk_assert_held(&pk_key_lock);
	c.old = k->enabled;
	if (c.old == new_count)
		return 0;
	return key_apply(&c, 1, what);
}

int pk_key_enable(struct pk_key *k)
{
	int ret = 0;

	if (!k)
		return -EINVAL;
	pthread_mutex_lock(&pk_key_lock);
	if (!key_true(k->enabled))
		ret = key_set_one(k, 1, "enabling a key");
	pthread_mutex_unlock(&pk_key_lock);
	return ret;
}

int pk_key_disable(struct pk_key *k)
{
	int ret;

	if (!k)
		return -EINVAL;
	pthread_mutex_lock(&pk_key_lock);
	ret = key_set_one(k, 0, "disabling a key");
	pthread_mutex_unlock(&pk_key_lock);
	return ret;
}

int pk_key_inc(struct pk_key *k)
{
	int ret;

	if (!k)
		return -EINVAL;
	pthread_mutex_lock(&pk_key_lock);
	if (k->enabled == INT_MAX)
		ret = -EOVERFLOW;
	else
		ret = key_set_one(k, key_true(k->enabled) ? k->enabled + 1 : 1,
				  "enabling a key");
	pthread_mutex_unlock(&pk_key_lock);
	return ret;
}

int pk_key_dec(struct pk_key *k)
{
	int ret;

	if (!k)
		return -EINVAL;
	pthread_mutex_lock(&pk_key_lock);
	if (!key_true(k->enabled))
		ret = -EINVAL;
	else
		ret = key_set_one(k, k->enabled - 1, "disabling a key");
	pthread_mutex_unlock(&pk_key_lock);
	return ret;
}

struct key_req {
	struct pk_key *key;
	size_t idx;
};

static int key_req_cmp(const void *a, const void *b)
{
	const struct key_req *x = a, *y = b;

	if (x->key != y->key)
		return (uintptr_t)x->key < (uintptr_t)y->key ? -1 : 1;
	return (x->idx > y->idx) - (x->idx < y->idx);
}

/*
 * A true value enables a key as pk_key_enable() does (a count > 0 stays), a
 * false one disables it whatever its count. A key listed twice takes its
 * last value.
 */
int pk_key_set_many(struct pk_key *const *keys, const bool *values, size_t n)
{
	struct key_change *c;
	struct key_req *req;
	size_t nc = 0;
	int ret;

	if (!n)
		return 0;
	if (!keys || !values || n > SIZE_MAX / sizeof(*req))
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (!keys[i])
			return -EINVAL;
	req = malloc(n * sizeof(*req));
	c = malloc(n * sizeof(*c));
	if (!req || !c) {
		free(req);
		free(c);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		req[i] = (struct key_req){ keys[i], i };
	qsort(req, n, sizeof(*req), key_req_cmp);

	pthread_mutex_lock(&pk_key_lock);
	for (size_t i = 0; i < n; i++) {
		struct pk_key *k = req[i].key;
		int old;

		if (i + 1 < n && req[i + 1].key == k)
			continue; /* a later value for the same key wins */
		old = k->enabled;
		c[nc] = (struct key_change){ k, old,
					     values[req[i].idx] ?
						     (key_true(old) ? old : 1) : 0 };
		if (c[nc].new != old)
			nc++;
	}
	ret = nc ? key_apply(c, nc, "setting keys") : 0;
	pthread_mutex_unlock(&pk_key_lock);
	free(req);
	free(c);
	return ret;
}

bool pk_key_enabled(const struct pk_key *k)
{
	return k && key_true(__atomic_load_n(&k->enabled, __ATOMIC_RELAXED));
}

bool pk_key_patching(void)
{
	return __atomic_load_n(&pk_key_mode, __ATOMIC_RELAXED) !=
	       PK_KEY_MODE_FALLBACK;
}

/* ------------------------------------------------------------ modules */

/* Patch every site of the new module @m to its direct form: one batch. */
static int module_patch(struct pk_jump_module *m)
{
	uint8_t old_bytes[PK_SITE_LEN], new_bytes[PK_SITE_LEN];
	struct key_batch kb = { 0 };

	pk_assert_held(&pk_key_lock);
	for (struct pk_jump_entry *e = m->first; e < m->stop; e++) {
		struct pk_key *k = entry_key(e);

		/* Both jmp forms must reach: key_apply() relies on it. */
		if (!encode_compiled(e, old_bytes) ||
		    !encode_jmp(new_bytes, e->code, e->target)) {
			pk_err("static keys: site %#lx: target out of rel32 reach",
			       (unsigned long)e->code);
			kb.err = -EINVAL;
			break;
		}
		encode_direct(e, key_true(k->enabled), new_bytes);
		kb_add(&kb, e, new_bytes, old_bytes);
	}
	return kb_commit(&kb, "patching a module's sites");
}

static bool table_valid(const struct pk_jump_entry *start,
			const struct pk_jump_entry *stop)
{
	uintptr_t s = (uintptr_t)start, e = (uintptr_t)stop;

	return start && stop && s <= e && s % _Alignof(struct pk_jump_entry) == 0 &&
	       (e - s) % sizeof(struct pk_jump_entry) == 0;
}

int pk_jump_module_register(struct pk_jump_entry *start,
			    struct pk_jump_entry *stop)
{
	struct pk_jump_module *m;
	size_t n;
	int ret;

	if (!table_valid(start, stop))
		return -EINVAL;
	n = (size_t)(stop - start);
	if (n > INT_MAX)
		return -EINVAL;

	pthread_mutex_lock(&pk_key_lock);
	key_mode_env_locked();
	m = module_find(start);
	if (m) {
		ret = m->stop == stop ? (int)n : -EINVAL;
		if (ret >= 0)
			m->refs++;
		pthread_mutex_unlock(&pk_key_lock);
		return ret;
	}
	if (PK_GROW(&pk_modules, &pk_cap_modules, pk_nr_modules + 1)) {
		pthread_mutex_unlock(&pk_key_lock);
		return -ENOMEM;
	}
	/* No other thread reads the table: sites still run their compiled form. */
	qsort(start, n, sizeof(*start), entry_cmp);
	m = &pk_modules[pk_nr_modules++];
	*m = (struct pk_jump_module){ start, stop, start, 1, false };
	while (m->first < stop && !entry_key(m->first))
		m->first++;
	if (m->first != start)
		pk_warn("static keys: module table %p: %zu sites without a key (not a constant at start-up) stay load-and-branch",
			(void *)start, (size_t)(m->first - start));
	if (n && pk_key_mode != PK_KEY_MODE_FALLBACK) {
		ret = module_patch(m);
		m->patched = ret == 0;
		if (ret < 0)
			pk_warn("static keys: module table %p: %zu sites left as load-and-branch",
				(void *)start, n);
	}
	pk_dbg("static keys: module table %p registered, %zu sites, %s",
	       (void *)start, n, m->patched ? "patched" : "load-and-branch");
	pthread_mutex_unlock(&pk_key_lock);
	return (int)n;
}

void pk_jump_module_unregister(struct pk_jump_entry *start)
{
	struct pk_jump_module *m;

	if (!start)
		return;
	pthread_mutex_lock(&pk_key_lock);
	m = module_find(start);
	if (!m)
		pk_dbg("static keys: unregistering unknown module table %p",
		       (void *)start);
	else if (--m->refs == 0) {
		/* Its code goes away (dlclose): nothing to restore. */
		size_t i = (size_t)(m - pk_modules);

		memmove(m, m + 1, (pk_nr_modules - i - 1) * sizeof(*m));
		pk_nr_modules--;
		pk_dbg("static keys: module table %p unregistered", (void *)start);
	}
	pthread_mutex_unlock(&pk_key_lock);
}

/* -------------------------------------------------------------- debug */

void pk_debug_failed(const char *expr, const char *file, int line)
{
	pk_err("debug check failed: %s (%s:%d)", expr, file, line);
	abort();
}

/* Decide NOPATCH early, and honour PROBEKIT_DEBUG=1. */
__attribute__((constructor(102))) static void pk_key_init(void)
{
	int ret;

	pthread_mutex_lock(&pk_key_lock);
	key_mode_env_locked();
	pthread_mutex_unlock(&pk_key_lock);
	if (!pk_env_flag("DEBUG"))
		return;
	ret = pk_key_enable(&pk_debug_key);
	if (ret < 0)
		pk_warn("PROBEKIT_DEBUG=1: debug checks could not be enabled: %s",
			err_name(ret));
	else
		pk_info("PROBEKIT_DEBUG=1: debug checks enabled");
}
