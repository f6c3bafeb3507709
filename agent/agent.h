/* SPDX-License-Identifier: MIT */
/* agent.h - what the agent's files share: the modes it serves, its record, arming a spec list. */
#ifndef PK_AGENT_AGENT_H
#define PK_AGENT_AGENT_H

#include <link.h>
#include <stddef.h>
#include <stdint.h>

#include "probekit.h"
#include "protocol.h"

/*
 * A mode: what a subcommand's agent side does. agent.c picks the one
 * PROBEKIT_AGENT_MODE names; a new subcommand adds one (a file in agent/
 * and a line in agent.c's table), not a new agent.
 */
struct pka_mode_ops {
	const char *name;	/* its PROBEKIT_AGENT_MODE */
	uint32_t mode;		/* its enum pka_mode */
	uint32_t size;		/* bytes of its per-probe struct (a slot) */
	/*
	 * Fill in the handlers and ctx of the probe in slot @i before it
	 * is created; @h is this process's record, zeroed but for the
	 * header and the spec and probe tables.
	 */
	void (*probe)(struct pka_header *h, unsigned int i,
		      struct pk_probe_opts *o);
	/*
	 * Optional. A mode with ret arms return probes (probekit/retprobe.h)
	 * instead of entry probes: @o comes with where, and ctx as probe()
	 * left it; ret() sets the handlers and data_size.
	 */
	void (*ret)(struct pk_retprobe_opts *o);
	/* Optional: the bytes of the mode's area for @nprobe probes. */
	uint64_t (*area)(uint32_t nprobe);
	/* Optional: after the record is published, before arming. */
	void (*start)(struct pka_header *h);
};

extern const struct pka_mode_ops pka_mode_count;
extern const struct pka_mode_ops pka_mode_time;
extern const struct pka_mode_ops pka_mode_trace;
extern const struct pka_mode_ops pka_mode_stat;

/* A raw system call (async-signal-safe, errno untouched): -errno or the result. */
static inline long pka_sys(long nr, long a, long b, long c)
{
	long ret;

	__asm__ volatile("syscall" : "=a"(ret)
			 : "0"(nr), "D"(a), "S"(b), "d"(c)
			 : "rcx", "r11", "memory");
	return ret;
}

/*
 * pka_block_claim() - claim one of @n per-thread blocks @stride bytes
 * apart whose owner words (pid << 32 | tid, 0 free) start at @owner0,
 * for this thread: a free one, else a gone thread's or process's
 * (scanned for at most every 4096th failure, counted in *@fails).
 * The block's index, or -1. Async-signal-safe (time.c, trace.c).
 */
int pka_block_claim(uint64_t *owner0, uint32_t n, uint64_t stride,
		    unsigned int *fails);

/* pka_clock_from_env() - @clk from PKA_ENV_CLOCK, if it is set and valid (time.c). */
struct pk_tsc;
void pka_clock_from_env(struct pk_tsc *clk);

/*
 * A mode's probe, as arm.c and late.c handle it (agent.c): a struct
 * pk_probe, or a struct pk_retprobe for a mode with ret. Each call does
 * what its pk_probe_* namesake does, on the right kind; info fills
 * kind (a return probe's entry probe's, or PK_PROBE_JUMP if unknown) and
 * func.
 */
int pka_hook_create(const struct pka_mode_ops *m, const struct pk_probe_opts *o,
		    void **out);
int pka_hook_register(const struct pka_mode_ops *m, void *const *hs, size_t n);
int pka_hook_unregister(const struct pka_mode_ops *m, void *const *hs,
			size_t n);
void pka_hook_destroy(const struct pka_mode_ops *m, void *hk);
int pka_hook_info(const struct pka_mode_ops *m, const void *hk,
		  struct pk_probe_info *info);

/*
 * pka_specs_map() - the specs in the file at @path (PKA_SEP-separated,
 * NUL-terminated; protocol.h), mapped read-only for the life of the
 * process, or NULL if @path is NULL or not such a file.
 */
const char *pka_specs_map(const char *path);

/*
 * pka_record_open() - this process's record: a new file in @dir sized for
 * the specs of @specs, @nprobe probes (at least one per spec; 0: one per
 * spec) with a slot of @slot bytes each, and a pool with room for the
 * specs' log lines and @names more bytes (the probes' names), then the
 * mode's area (@area(nprobe) bytes, if @area is not NULL), its blocks
 * reserved, mapped shared, zeroed but for the layout, pid, exe and one
 * probe per spec with PKA_PENDING status (pka_arm() lays out the rest).
 * NULL if it cannot be made (then the command finds no record of this
 * process, or an empty one where there was no room, and says so).
 */
struct pka_header *pka_record_open(const char *dir, uint32_t slot,
				   const char *specs, uint32_t nprobe,
				   uint32_t names, uint64_t (*area)(uint32_t));

/*
 * pka_record_why() - keep @msg as spec @i's log line in @h's pool, if it
 * has none yet and the pool has room for it whole.
 */
void pka_record_why(struct pka_header *h, uint32_t i, const char *msg);

/* pka_record_publish() - store magic: the header is ready to be read. */
void pka_record_publish(struct pka_header *h);

/*
 * pka_log_quiet() - from now on, keep the library's first error line per
 * spec in the record's pool and print nothing: the program's stderr
 * is the program's. Stays set for the life of the process.
 */
void pka_log_quiet(struct pka_header *h);
/* pka_log_spec() - the library's lines from now on explain spec @i (-1: none). */
void pka_log_spec(int i);

/*
 * pka_plan() - what the specs in @specs (PKA_SEP-separated) name in this
 * process: every function each expands to (pk_sym_each(): globs, IFUNCs
 * resolved, C++ names), each function once by address (the first spec
 * matching it owns it), with its name; the run's xcache is used for
 * specs without glob characters. Before the record exists: it says how
 * big to make it (pka_plan_nprobe(), pka_plan_names()). Sets the quiet
 * log (failure lines are kept for pka_arm()). NULL without memory.
 * pka_plan_free() - free it (NULL is fine).
 */
struct pka_plan;
struct pka_plan *pka_plan(const char *specs);
uint32_t pka_plan_nprobe(const struct pka_plan *pl);
uint32_t pka_plan_names(const struct pka_plan *pl);
void pka_plan_free(struct pka_plan *pl);

/*
 * pka_arm() - create a probe by address for each function of @pl, as @m
 * sets it up, and register them all as one text batch. Each spec's
 * result goes to its struct pka_spec, each probe's (and its function's
 * name, in the pool) to its struct pka_probe (protocol.h); h->n is set
 * once all were tried. Probes stay armed until the process ends:
 * disarming them in a destructor could race with threads still running.
 * Nothing if @pl is NULL or not the plan @h was sized for.
 */
void pka_arm(struct pka_header *h, const struct pka_plan *pl,
	     const struct pka_mode_ops *m);

/*
 * pka_busy - nonzero while this thread runs the agent's own work (own.c):
 * a mode's handler counts nothing then.
 */
extern __thread unsigned int pka_busy __attribute__((tls_model("initial-exec")));

/*
 * pka_zydis_load() - load the agent's private copy of Zydis (zydis.c)
 * in a namespace of its own; 0, or -ENOENT if it cannot be. Once, from
 * the constructor, before anything decodes.
 */
int pka_zydis_load(void);

/*
 * pka_zload() - map and relocate libZydis at @path for the agent alone
 * (zload.c); NULL if it cannot be. pka_zload_sym() - a function of it.
 */
void *pka_zload(const char *path);
void *pka_zload_sym(void *obj, const char *name);

/*
 * pka_dynsym_count() - the symbols in the .dynsym of the object whose
 * dynamic section is @dyn, loaded at @bias (dladdr.c).
 */
size_t pka_dynsym_count(const ElfW(Dyn) *dyn, uintptr_t bias);

/*
 * pka_xcache_open() - from now on, answer the probe layer's branch-index
 * questions from the run's cache in @dir, adding what it computes
 * (xcache.c); pka_xcache_close() - stop, and close the file. Around
 * arming only; nothing happens if the file cannot be had.
 */
void pka_xcache_open(const char *dir);
void pka_xcache_close(void);

/*
 * pka_xcache_spec_get() - the function @spec named in another process of
 * the run with this same link map, or NULL; pka_xcache_spec_put() - say
 * that @spec names the function at @addr here.
 */
void *pka_xcache_spec_get(const char *spec);
void pka_xcache_spec_put(const char *spec, void *addr);


/*
 * The audit module (audit.c, libprobekit-audit.so, in LD_AUDIT) calls the
 * agent's hook with these events (in the dynamic linker, before a
 * dlopen()ed object runs; after an unloaded one's destructors).
 */
#define PKA_AUDIT_NAME "libprobekit-audit.so"
enum pka_audit_event {
	PKA_AUDIT_LOADED = 1,	/* la_activity(LA_ACT_CONSISTENT) */
	PKA_AUDIT_CLOSING = 2,	/* la_objclose(): base and name */
	PKA_AUDIT_OTHER_NS = 3,	/* la_objopen() in another namespace than
				 * the program's: its Lmid_t (as base) and
				 * name */
};

/*
 * pka_late_init() - after pka_arm(): arm the specs of @specs not armed
 * yet whenever a library is loaded later, and retire them when it is
 * unloaded (late.c), with the run's cache in @dir. Nothing if the audit
 * module is not loaded.
 */
void pka_late_init(struct pka_header *h, const char *dir, const char *specs,
		   const struct pka_mode_ops *m);

/*
 * pka_late_possible() - whether libraries loaded later are armed here
 * (the audit module is loaded): pka_plan() then reserves PKA_LATE_SLOTS
 * probes for each glob that matched nothing at start-up (PKA_LATE_BUDGET
 * in all: later globs get what is left, the rest none), which late.c
 * fills, function by function, as libraries it matches are loaded.
 */
#define PKA_LATE_SLOTS 1024u
#define PKA_LATE_BUDGET 8192u	/* reserved in all, whatever the number of globs */
#define PKA_LATE_NAME 40u	/* pool bytes reserved a late function's name */
#define PKA_LATE_NAMES_EXTRA (128u << 10) /* and for longer ones, a record */
int pka_late_possible(void);

/*
 * pka_record_name() - put @name into @h's pool as probe @i's function
 * name, if the pool has room (arm.c).
 */
void pka_record_name(struct pka_header *h, uint32_t i, const char *name);

#endif /* PK_AGENT_AGENT_H */
