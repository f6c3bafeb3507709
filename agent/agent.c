// SPDX-License-Identifier: MIT
/* agent.c - libprobekit-agent.so: preloaded by the probekit command, serves the mode it names in every process of COMMAND. */

/*
 * Runs from a constructor, before the program's main(), in every process
 * of the command (LD_PRELOAD and the PROBEKIT_AGENT_* variables are
 * inherited; see protocol.h). It must never break the program: whatever
 * goes wrong is written into the process's record for the command to
 * report, and nothing is printed.
 *
 * Functions of libraries the program dlopen()s after start-up are not
 * loaded yet when the constructor runs: those specs fail with -ENOENT
 * then, and are armed when such a library is loaded, before its code
 * runs, if the command put the audit module in LD_AUDIT (late.c).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"

/* Every mode this agent serves. */
static const struct pka_mode_ops *const modes[] = {
	&pka_mode_count,
	&pka_mode_time,
	&pka_mode_trace,
	&pka_mode_stat,
};

#define N_MODES (sizeof(modes) / sizeof(modes[0]))

static const struct pka_mode_ops *find_mode(const char *name)
{
	for (size_t i = 0; name && i < N_MODES; i++)
		if (!strcmp(modes[i]->name, name))
			return modes[i];
	return NULL;
}

/* Say in the record why this process serves nothing, and which modes exist. */
static void refuse(struct pka_header *h, const char *name)
{
	size_t len = sizeof(h->why);
	int at;

	at = snprintf(h->why, len, "no mode '%s' (modes:", name);
	for (size_t i = 0; i < N_MODES && at > 0 && (size_t)at < len; i++)
		at += snprintf(h->why + at, len - (size_t)at, " %s",
			       modes[i]->name);
	if (at > 0 && (size_t)at < len)
		snprintf(h->why + at, len - (size_t)at, ")");
	h->mode = PKA_MODE_NONE;
	h->status = -EINVAL;
}

/*
 * The return trampoline's unwind info (src/probe/ret.c registers it with
 * __register_frame()) must reach the unwinder the program throws with.
 * The agent links libgcc's unwinder statically (agent/CMakeLists.txt), so
 * the library's call lands in the agent's private copy, which no C++
 * program uses: an exception thrown through a return-probed function
 * ended in std::terminate() (tests/cli-time.sh). So the call is wrapped
 * (--wrap=__register_frame) and made in the program's libgcc_s as well,
 * if it has one loaded by then, and in the executable's own unwinder (a
 * program linked with -static-libgcc: its __register_frame found in its
 * .symtab, pka_unwinder_check()). Not covered: a libgcc_s loaded later
 * (dlopen()ed with a C++ plugin, or by glibc for pthread_cancel()).
 */
void __real___register_frame(void *begin);
void __wrap___register_frame(void *begin);

static void (*exe_register)(void *);

void __wrap___register_frame(void *begin)
{
	void (*prog)(void *) = (void (*)(void *))dlsym(RTLD_DEFAULT,
							"__register_frame");

	__real___register_frame(begin);
	if (prog && prog != __real___register_frame &&
	    prog != __wrap___register_frame)
		prog(begin);
	if (exe_register && exe_register != prog &&
	    exe_register != __real___register_frame)
		exe_register(begin);
}

/* Whether the @n symbols at @sym import (leave undefined) one named @name. */
static int imports(const Elf64_Sym *sym, size_t n, const char *str,
		   size_t len, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (sym[i].st_shndx == SHN_UNDEF && sym[i].st_name < len &&
		    !strcmp(str + sym[i].st_name, name))
			return 1;
	return 0;
}

/* Section @sh of @fd, NUL-terminated, or NULL (over 16 MiB too). */
static void *section(int fd, const Elf64_Shdr *sh)
{
	char *p = sh->sh_size <= (16u << 20) ? calloc(1, sh->sh_size + 1) : NULL;

	if (p && pread(fd, p, sh->sh_size, (off_t)sh->sh_offset) !=
	    (ssize_t)sh->sh_size) {
		free(p);
		p = NULL;
	}
	return p;
}

/*
 * Whether executable @path unwinds C++ exceptions with its own unwinder:
 * it has C++ exception tables (.gcc_except_table; section headers are
 * kept by strip) and its .dynsym imports neither _Unwind_Resume
 * (libgcc_s's) nor __gxx_personality_v0 (libstdc++'s, which unwinds with
 * libgcc_s). Whatever cannot be read: no.
 */
static int own_unwinder(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), eh_tables = 0, imp = 1;
	Elf64_Ehdr eh;
	Elf64_Shdr *sh = NULL;
	char *names = NULL;

	if (fd < 0)
		return 0;
	if (pread(fd, &eh, sizeof(eh), 0) != sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_shentsize != sizeof(Elf64_Shdr) || !eh.e_shnum ||
	    eh.e_shnum > 4096 || eh.e_shstrndx >= eh.e_shnum)
		goto out;
	sh = calloc(eh.e_shnum, sizeof(*sh));
	if (!sh || pread(fd, sh, eh.e_shnum * sizeof(*sh), (off_t)eh.e_shoff) !=
	    (ssize_t)(eh.e_shnum * sizeof(*sh)) ||
	    !(names = section(fd, &sh[eh.e_shstrndx])))
		goto out;
	for (unsigned int i = 0; i < eh.e_shnum; i++)
		if (sh[i].sh_name < sh[eh.e_shstrndx].sh_size &&
		    !strcmp(names + sh[i].sh_name, ".gcc_except_table"))
			eh_tables = 1;
	for (unsigned int i = 0; i < eh.e_shnum; i++) {
		Elf64_Sym *sym;
		char *str;

		if (sh[i].sh_type != SHT_DYNSYM || sh[i].sh_link >= eh.e_shnum)
			continue;
		sym = section(fd, &sh[i]);
		str = section(fd, &sh[sh[i].sh_link]);
		if (sym && str) {
			size_t n = sh[i].sh_size / sizeof(*sym);
			size_t len = sh[sh[i].sh_link].sh_size;

			imp = imports(sym, n, str, len, "_Unwind_Resume") ||
			      imports(sym, n, str, len, "__gxx_personality_v0");
		}
		free(sym);
		free(str);
		break;
	}
out:
	free(sh);
	free(names);
	close(fd);
	return eh_tables && !imp;
}

/*
 * Before a mode with return probes arms anything: the executable's own
 * unwinder (libgcc linked in statically), if it has one, must learn the
 * return trampoline's unwind info too, or an exception thrown through a
 * return-probed function ends in std::terminate(). Its __register_frame
 * is looked up in the executable's symbol tables; where it cannot be (a
 * stripped executable) but the executable looks like one that unwinds on
 * its own (own_unwinder(): whatever libgcc_s another library loaded),
 * return probes are refused in this process: 0, or -ENOTSUP with the
 * reason in @why.
 */
static int pka_unwinder_check(char *why, size_t len)
{
	char exe[4096], spec[4200];
	struct pk_sym sym;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n <= 0)
		return 0;
	exe[n] = 0;
	snprintf(spec, sizeof(spec), "%s:__register_frame", exe);
	if (!pk_sym_lookup(spec, &sym) && !(sym.flags & PK_SYM_F_FILE)) {
		exe_register = (void (*)(void *))sym.addr;
		return 0;
	}
	if (!own_unwinder(exe))
		return 0;
	snprintf(why, len, "return probes refused: %.300s has C++ exception tables "
		 "and unwinds with its own copy of libgcc (it imports no unwinder), "
		 "whose __register_frame its stripped symbol table does not "
		 "name: an exception through a return-probed function would end in "
		 "std::terminate()", exe);
	return -ENOTSUP;
}

int pka_hook_create(const struct pka_mode_ops *m, const struct pk_probe_opts *o,
		    void **out)
{
	struct pk_retprobe *rp;
	struct pk_probe *p;
	int err;

	if (!m->ret) {
		err = pk_probe_create(o, &p);
		if (!err)
			*out = p;
		return err;
	}
	PK_OPTS(pk_retprobe_opts, ro, .symbol = o->symbol, .addr = o->addr,
		.ctx = o->ctx);
	m->ret(&ro);
	err = pk_retprobe_create(&ro, &rp);
	if (!err)
		*out = rp;
	return err;
}

/* The set as an array of the mode's kind (@hs holds void pointers). */
static int hook_change(const struct pka_mode_ops *m, void *const *hs, size_t n,
		       int arming)
{
	int err;

	if (!m->ret) {
		struct pk_probe **ps = calloc(n ? n : 1, sizeof(*ps));

		if (!ps)
			return -ENOMEM;
		for (size_t i = 0; i < n; i++)
			ps[i] = hs[i];
		err = arming ? pk_probe_register(ps, n) : pk_probe_unregister(ps, n);
		free(ps);
	} else {
		struct pk_retprobe **rs = calloc(n ? n : 1, sizeof(*rs));

		if (!rs)
			return -ENOMEM;
		for (size_t i = 0; i < n; i++)
			rs[i] = hs[i];
		err = arming ? pk_retprobe_register(rs, n)
			     : pk_retprobe_unregister(rs, n);
		free(rs);
	}
	return err;
}

int pka_hook_register(const struct pka_mode_ops *m, void *const *hs, size_t n)
{
	return hook_change(m, hs, n, 1);
}

int pka_hook_unregister(const struct pka_mode_ops *m, void *const *hs,
			size_t n)
{
	return hook_change(m, hs, n, 0);
}

void pka_hook_destroy(const struct pka_mode_ops *m, void *hk)
{
	if (m->ret)
		pk_retprobe_destroy(hk);
	else
		pk_probe_destroy(hk);
}

static void hook_nop(struct pk_probe *p, struct pk_regs *regs, void *ctx)
{
	(void)p;
	(void)regs;
	(void)ctx;
}

int pka_hook_info(const struct pka_mode_ops *m, const void *hk,
		  struct pk_probe_info *info)
{
	struct pk_retprobe_info ri = { .sz = sizeof(ri) };
	struct pk_probe *p;
	int err;

	if (!m->ret)
		return pk_probe_get_info(hk, info);
	err = pk_retprobe_get_info(hk, &ri);
	if (err)
		return err;
	/*
	 * The kind its entry probe has: a probe on the same address, never
	 * armed, is told the kind the armed one has or would have
	 * (pk_probe_get_info()); pk_retprobe_info does not say it.
	 */
	memset(info, 0, sizeof(*info));
	info->sz = sizeof(*info);
	info->func = ri.func;
	info->addr = ri.addr;
	info->armed = ri.armed;
	info->kind = PK_PROBE_JUMP;
	{
		PK_OPTS(pk_probe_opts, o, .addr = (void *)ri.func,
			.pre = hook_nop);

		if (!pk_probe_create(&o, &p)) {
			struct pk_probe_info pi = { .sz = sizeof(pi) };

			if (!pk_probe_get_info(p, &pi))
				info->kind = pi.kind;
			pk_probe_destroy(p);
		}
	}
	return 0;
}

__attribute__((constructor)) static void pka_init(void)
{
	const char *dir = secure_getenv(PKA_ENV_DIR);
	const char *name = secure_getenv(PKA_ENV_MODE);
	const char *specs_file = secure_getenv(PKA_ENV_SPECS);
	const struct pka_mode_ops *m = find_mode(name);
	struct pka_plan *plan = NULL;
	struct pka_header *h = NULL;
	const char *specs;

	/*
	 * probekit list's run (agent/list.c) ends at start-up, before any
	 * constructor: here, the audit module was not loaded, and the
	 * program would run whole. It must not (exit 5, list says so).
	 * list unsets PROBEKIT_AGENT_DIR; the other subcommands set it (and
	 * unset PROBEKIT_LIST_*: one inherited must not end their runs).
	 */
	if (secure_getenv("PROBEKIT_LIST_REQ") && !dir)
		_exit(5);
	/* Not started by probekit: nothing at all, not even a lookup. */
	if (!dir || !name || !specs_file)
		return;
	pka_busy++;	/* all of what follows is the agent's own work */
	/*
	 * Started by a program that passed on only part of probekit's
	 * environment (or no room for a record): do nothing, as if not
	 * preloaded. Only a mode named but unknown is refused.
	 */
	specs = pka_specs_map(specs_file);
	if (!specs)
		goto out;
	/*
	 * What the specs expand to here sizes the record: look them up
	 * first (the log stays quiet; failure lines go to the record).
	 */
	if (m) {
		pka_zydis_load();
		pka_xcache_open(dir);
		plan = pka_plan(specs);
	}
	h = pka_record_open(dir, m ? m->size : 0, specs, pka_plan_nprobe(plan),
			    pka_plan_names(plan), m ? m->area : NULL);
	if (!h)
		goto done;
	h->version = PKA_VERSION;
	pka_log_quiet(h);
	if (m)
		h->mode = m->mode;
	else
		refuse(h, name);
	/* Nothing armed where the program's unwinder cannot be reached. */
	if (m && m->ret)
		h->status = pka_unwinder_check(h->why, sizeof(h->why));
	pka_record_publish(h);
	if (h->status)
		goto done;
	if (m && m->start)
		m->start(h);
	if (m)
		pka_arm(h, plan, m);
done:
	if (m)
		pka_xcache_close();
	pka_plan_free(plan);
	if (m && h && !h->status)
		pka_late_init(h, dir, specs, m);
out:
	pka_busy--;
}
