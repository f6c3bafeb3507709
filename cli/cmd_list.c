// SPDX-License-Identifier: MIT
/* cmd_list.c - probekit list: what a spec would probe (object, name, offset, size, kind), from the files, running nothing but the dynamic linker (and the IFUNC resolvers it calls while relocating). */

/*
 * probekit list [--json] [SPEC...] [-- COMMAND [ARG]...]
 * probekit list [--json] OBJECT-FILE [SPEC...]
 *
 * The objects: with COMMAND, the program and the libraries its dynamic
 * linker would load, from `INTERP --list PROGRAM` (the loader only: no
 * code of the program runs); without, probekit's own (libc, the loader)
 * and every OBJECT-FILE named. A SPEC that is a file (no ':') means every
 * function of it (FILE:*). Each spec is resolved on disk, object by
 * object, by libprobekit's pk_sym_each() with OBJECT given as the file's
 * path; a name without a glob stops at the first object (in load order)
 * that defines it, as the dynamic linker binds it.
 *
 * The kind (jump or int3, and why int3) is what pk_probe_create() decides,
 * without registering anything; it can only be asked of code mapped by a
 * dynamic linker (the probe layer finds objects by dl_iterate_phdr()).
 * For the objects probekit has loaded itself (libc, the loader: the same
 * files COMMAND gets) it is asked here. For the others, with COMMAND,
 * the specs are resolved twice: first to collect those functions (object
 * path, offset), which are asked inside COMMAND's own process, started
 * with the agent preloaded and libprobekit-listaudit.so in LD_AUDIT: at
 * the start-up LA_ACT_CONSISTENT (every object mapped and relocated, no
 * constructor run) the agent answers each (agent/list.c) and the process
 * _exit()s before running anything of COMMAND's; then printed with those
 * answers. Without COMMAND, an OBJECT-FILE's are asked the same way of the
 * program itself (exec()ed without arguments) or, for a library, of a copy
 * of this command with it preloaded (ask_files()). Where that run fails
 * or is not made (said on stderr) they stay "unknown" (decided when a
 * probe is armed). IFUNCs of objects not loaded here are shown
 * unresolved.
 *
 * libprobekit is loaded at run time (dlopen, RTLD_LOCAL), not linked: it
 * interposes sigaction(), signal() and the signal mask calls, which would
 * then be the command's own for every subcommand (count's forwarding of
 * signals to COMMAND included). Only list needs it.
 *
 * Exit status: 0 when every spec matched; 1 when one matched nothing (the
 * reason on stderr, and in the JSON); 125 when probekit failed (usage, no
 * libprobekit, COMMAND's objects unknown).
 */
#define _GNU_SOURCE 1	/* pipe2() */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cli.h"
#include "sym/spec.h"
/* Types only: the functions are dlsym()ed (key.h would register a module). */
#include <probekit/probe.h>
#include <probekit/sym.h>

#ifndef PKC_LIB_REL
#define PKC_LIB_REL "../lib/libprobekit.so.0"
#endif
#ifndef PKC_LIB_PATH
#define PKC_LIB_PATH "libprobekit.so.0"
#endif

/* libprobekit's functions list uses. */
static struct {
	int (*each)(const char *, int (*)(const struct pk_sym *, void *), void *);
	int (*create)(const struct pk_probe_opts *, struct pk_probe **);
	int (*info)(const struct pk_probe *, struct pk_probe_info *);
	void (*destroy)(struct pk_probe *);
	void (*set_log)(pk_log_fn, void *);
} lib;

static int load_lib(void)
{
	static const char *const rel[] = { "../libprobekit.so.0", PKC_LIB_REL };
	const char *env = getenv("PROBEKIT_LIB");
	char self[PATH_MAX], path[PATH_MAX + 64];
	void *h = NULL;
	ssize_t n;

	if (env)
		h = dlopen(env, RTLD_NOW | RTLD_LOCAL);
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (!h && !env && n > 0 && strrchr(self, '/')) {
		self[n] = 0;
		*strrchr(self, '/') = 0;
		for (size_t i = 0; !h && i < sizeof(rel) / sizeof(rel[0]); i++) {
			snprintf(path, sizeof(path), "%s/%s", self, rel[i]);
			if (!access(path, R_OK))
				h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		}
	}
	if (!h && !env)
		h = dlopen(PKC_LIB_PATH, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		pkc_err("list needs libprobekit (set "
				"PROBEKIT_LIB): %s\n", dlerror());
		return -ENOENT;
	}
	lib.each = (void *)(uintptr_t)dlsym(h, "pk_sym_each");
	lib.create = (void *)(uintptr_t)dlsym(h, "pk_probe_create");
	lib.info = (void *)(uintptr_t)dlsym(h, "pk_probe_get_info");
	lib.destroy = (void *)(uintptr_t)dlsym(h, "pk_probe_destroy");
	lib.set_log = (void *)(uintptr_t)dlsym(h, "pk_set_log");
	if (!lib.each || !lib.create || !lib.info || !lib.destroy || !lib.set_log) {
		pkc_err("the libprobekit loaded has no "
				"pk_sym_each (too old?)\n");
		return -ENOENT;
	}
	return 0;
}

/* ------------------------------------------------------------ objects */

struct objs {
	char **path;
	int n;
	int is_static;
	char interp[PATH_MAX];	/* the program's dynamic linker, or "" */
};

static int objs_add(struct objs *o, const char *path)
{
	char **p = realloc(o->path, (size_t)(o->n + 1) * sizeof(*p));

	if (!p)
		return -ENOMEM;
	o->path = p;
	p[o->n] = strdup(path);
	if (!p[o->n])
		return -ENOMEM;
	o->n++;
	return 0;
}

/* @cmd as execvp() would find it, into @out. */
static int find_cmd(const char *cmd, char *out, size_t len)
{
	const char *pathv = getenv("PATH");
	char *copy, *save = NULL;

	if (strchr(cmd, '/')) {
		snprintf(out, len, "%s", cmd);
		return access(out, X_OK) ? -errno : 0;
	}
	copy = strdup(pathv ? pathv : "/usr/local/bin:/usr/bin:/bin");
	if (!copy)
		return -ENOMEM;
	for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		struct stat st;

		snprintf(out, len, "%s/%s", *d ? d : ".", cmd);
		if (!stat(out, &st) && S_ISREG(st.st_mode) && !access(out, X_OK)) {
			free(copy);
			return 0;
		}
	}
	free(copy);
	return -ENOENT;
}

/* The PT_INTERP of the ELF file @path into @out: 0, 1 if it has none. */
static int elf_interp(const char *path, char *out, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf64_Ehdr eh;
	int ret = -ENOEXEC;

	if (fd < 0)
		return -errno;
	if (pread(fd, &eh, sizeof(eh), 0) != sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64)
		goto out;
	ret = 1;
	for (int i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;

		if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + (uint64_t)i * eh.e_phentsize)) !=
		    sizeof(ph)) {
			ret = -ENOEXEC;
			break;
		}
		if (ph.p_type != PT_INTERP)
			continue;
		if (!ph.p_filesz || ph.p_filesz >= len ||
		    pread(fd, out, ph.p_filesz, (off_t)ph.p_offset) != (ssize_t)ph.p_filesz) {
			ret = -ENOEXEC;
			break;
		}
		out[ph.p_filesz] = 0;
		ret = 0;
		break;
	}
out:
	close(fd);
	return ret;
}

/*
 * The program @prog and the libraries its dynamic linker loads for it,
 * in load order: `INTERP --list PROG` (ld.so(8)), which maps them and
 * runs nothing of theirs. 0, or 125 after saying why.
 */
static int command_objects(const char *cmd, struct objs *o)
{
	char prog[PATH_MAX], interp[PATH_MAX], line[PATH_MAX + 128];
	int pfd[2], st, r;
	FILE *f;
	pid_t pid;

	if (find_cmd(cmd, prog, sizeof(prog))) {
		pkc_err("list: %s: command not found\n", cmd);
		return PKC_EXIT_OWN;
	}
	r = elf_interp(prog, interp, sizeof(interp));
	if (!r)
		snprintf(o->interp, sizeof(o->interp), "%s", interp);
	if (r < 0) {
		pkc_err("list: %s is not a 64-bit ELF program\n",
			prog);
		return PKC_EXIT_OWN;
	}
	if (objs_add(o, prog))
		return PKC_EXIT_OWN;
	if (r == 1) {
		o->is_static = 1;	/* no loader, no libraries */
		return 0;
	}
	if (pipe2(pfd, O_CLOEXEC)) {
		pkc_err("list: pipe: %s\n", strerror(errno));
		return PKC_EXIT_OWN;
	}
	pid = fork();
	if (pid < 0) {
		pkc_err("list: fork: %s\n", strerror(errno));
		close(pfd[0]);
		close(pfd[1]);
		return PKC_EXIT_OWN;
	}
	if (!pid) {
		dup2(pfd[1], 1);
		execl(interp, interp, "--list", prog, (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	f = fdopen(pfd[0], "r");
	if (!f) {
		pkc_err("list: fdopen: %s\n", strerror(errno));
		close(pfd[0]);	/* the loader's writes end with EPIPE */
		waitpid(pid, &st, 0);
		return PKC_EXIT_OWN;
	}
	while (fgets(line, sizeof(line), f)) {
		char *arrow = strstr(line, " => "), *p = arrow ? arrow + 4 : line;
		char *end;

		while (*p == ' ' || *p == '\t')
			p++;
		end = strstr(p, " (0x");
		if (!end || *p != '/')
			continue;	/* the vDSO, "not found", "statically linked" */
		*end = 0;
		if (objs_add(o, p))
			break;
	}
	fclose(f);
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		pkc_err("list: %s --list %s failed (a library "
				"not found?)\n", interp, prog);
		return PKC_EXIT_OWN;
	}
	return 0;
}

/* Whether @path's file name is @want, whole or up to a dot, or matches it as a glob. */
static int base_matches(const char *path, const char *want)
{
	const char *base = strrchr(path, '/');
	char b[NAME_MAX + 1];

	base = base ? base + 1 : path;
	if (strlen(base) >= sizeof(b))
		return 0;
	strcpy(b, base);
	for (;;) {
		char *dot;

		if (!fnmatch(want, b, 0))
			return 1;
		dot = strrchr(b, '.');
		if (!dot || dot == b)
			return 0;
		*dot = 0;
	}
}

/* Whether @s holds a glob character (an ABI tag's '[' is none). */
static int has_glob(const char *s)
{
	for (; (s = strpbrk(s, "*?[")); s++)
		if (strncmp(s, "[abi:", 5))
			return 1;
	return 0;
}

/* -------------------------------------------------------------- output */

struct out {
	FILE *f;
	int json;
	int col;		/* colour the table (pkc_color_for()) */
	int rows;		/* printed, for the JSON commas */
	int found;		/* by the spec now */
	char reason[512];	/* the last log line while probing */
	uintptr_t *seen;	/* offsets listed of the OBJECT-FILE */
	size_t nseen, cap;
	int unnamed;		/* now: only what is not in seen */
	char *spec_err;		/* the spec's log line (spec_log()'s ctx) */
	int collect;		/* first pass: only note what to ask COMMAND */
	struct ask {		/* functions of objects not loaded here */
		char *obj;
		uintptr_t off;
		char kind[16];	/* the answer ("" before it) */
		char why[512];
	} *ask;
	size_t nask, askcap;
};

static void spec_log(enum pk_log_level level, const char *msg, void *ctx);

/* Whether offset @off was listed already (and if not, it is now). */
static int seen_before(struct out *o, uintptr_t off)
{
	for (size_t i = 0; i < o->nseen; i++)
		if (o->seen[i] == off)
			return 1;
	if (o->nseen == o->cap) {
		size_t cap = o->cap ? 2 * o->cap : 256;
		uintptr_t *p = realloc(o->seen, cap * sizeof(*p));

		if (!p)
			return 0;
		o->seen = p;
		o->cap = cap;
	}
	o->seen[o->nseen++] = off;
	return 0;
}

static void capture(enum pk_log_level level, const char *msg, void *ctx)
{
	struct out *o = ctx;

	const char *why = msg;

	if (level > PK_LOG_DEBUG || !strncmp(msg, "sym:", 4))
		return;
	/* "probe: WHAT: why": WHAT is the address, shown already. */
	if (!strncmp(why, "probe: ", 7) && strstr(why + 7, ": "))
		why = strstr(why + 7, ": ") + 2;
	snprintf(o->reason, sizeof(o->reason), "%s", why);
}

static const char *table_name(int t)
{
	switch (t) {
	case PK_SYM_DYNSYM: return ".dynsym";
	case PK_SYM_SYMTAB: return ".symtab";
	case PK_SYM_DEBUG: return "debug";
	case PK_SYM_EH_FRAME: return ".eh_frame";
	case PK_SYM_MINIDEBUG: return "minidebug";
	}
	return "?";
}

/* The kind a probe at @s would be, and for int3 why; "unknown" off this process. */
static const char *kind_of(const struct pk_sym *s, struct out *o, char *why,
			   size_t len)
{
	PK_OPTS(pk_probe_opts, po, .addr = (void *)s->addr);
	struct pk_probe_info info = { .sz = sizeof(info) };
	struct pk_probe *p;
	int err;

	why[0] = 0;
	if ((s->flags & PK_SYM_F_FILE) && !(s->flags & PK_SYM_F_UNRESOLVED)) {
		/* Asked in COMMAND's process (ask_command()), or to be. */
		for (size_t i = 0; i < o->nask; i++)
			if (o->ask[i].off == s->addr - s->base &&
			    !strcmp(o->ask[i].obj, s->object) && o->ask[i].kind[0]) {
				snprintf(why, len, "%s", o->ask[i].why);
				return o->ask[i].kind;
			}
	}
	if (s->flags & (PK_SYM_F_FILE | PK_SYM_F_UNRESOLVED)) {
		snprintf(why, len, "not loaded here: decided when armed");
		return "unknown";
	}
	o->reason[0] = 0;
	lib.set_log(capture, o);
	err = lib.create(&po, &p);
	if (!err) {
		lib.info(p, &info);
		lib.destroy(p);
	}
	/* The spec's own hook again: the library says nothing on stderr. */
	lib.set_log(spec_log, o->spec_err);
	if (err) {
		snprintf(why, len, "%s", o->reason[0] ? o->reason : strerror(-err));
		return "refused";
	}
	if (info.kind == PK_PROBE_INT3) {
		snprintf(why, len, "%s", o->reason[0] ? o->reason : "int3");
		return "int3";
	}
	return "jump";
}

static int print_sym(const struct pk_sym *s, void *ctx)
{
	struct out *o = ctx;
	char why[512], name[1024];
	uintptr_t off = s->addr - s->base;
	const char *kind;

	if (seen_before(o, off) && o->unnamed)
		return 0;
	if (o->collect) {
		/* Only the functions of objects not loaded here, once each. */
		if (!(s->flags & PK_SYM_F_FILE) || (s->flags & PK_SYM_F_UNRESOLVED))
			return 0;
		o->found++;
		for (size_t i = 0; i < o->nask; i++)
			if (o->ask[i].off == off && !strcmp(o->ask[i].obj, s->object))
				return 0;
		if (o->nask == o->askcap) {
			size_t cap = o->askcap ? 2 * o->askcap : 64;
			struct ask *a = realloc(o->ask, cap * sizeof(*a));

			if (!a)
				return -ENOMEM;
			o->ask = a;
			o->askcap = cap;
		}
		memset(&o->ask[o->nask], 0, sizeof(o->ask[0]));
		if (!(o->ask[o->nask].obj = strdup(s->object)))
			return -ENOMEM;
		o->ask[o->nask++].off = off;
		return 0;
	}
	kind = kind_of(s, o, why, sizeof(why));
	o->found++;
	snprintf(name, sizeof(name), "%s%s%s%s%s", s->file, s->file[0] ? "#" : "",
		 s->name, s->version[0] ?
		 (s->flags & PK_SYM_F_COMPAT ? "@" : "@@") : "", s->version);
	if (!o->json) {
		/* An int3 probe's kind yellow, a refusal's red, to the end. */
		int c = o->col && strcmp(kind, "jump");

		fprintf(o->f, "%-28s %-40s %#10" PRIxPTR " %7zu %-9s %s%s%s%s%s%s%s\n",
			strrchr(s->object, '/') ? strrchr(s->object, '/') + 1 : s->object,
			name, off, s->size, table_name(s->table),
			pkc_sgr(c, strcmp(kind, "int3") ? PKC_SGR_BAD : PKC_SGR_WARN),
			kind,
			s->impl[0] ? " ifunc->" : (s->flags & PK_SYM_F_UNRESOLVED ?
						   " ifunc (unresolved)" : ""),
			s->impl, why[0] ? ": " : "", why, pkc_sgr(c, PKC_SGR_OFF));
		return 0;
	}
	fprintf(o->f, "%s\n  {\"object\": ", o->rows++ ? "," : "");
	pkc_json_str(o->f, s->object);
	fprintf(o->f, ", \"name\": ");
	pkc_json_str(o->f, s->name);
	fprintf(o->f, ", \"version\": ");
	pkc_json_str(o->f, s->version);
	fprintf(o->f, ", \"default_version\": %s, \"ifunc\": %s, \"impl\": ",
		s->flags & PK_SYM_F_COMPAT ? "false" : "true",
		s->flags & PK_SYM_F_IFUNC ? "true" : "false");
	pkc_json_str(o->f, s->impl);
	fprintf(o->f, ", \"file\": ");
	pkc_json_str(o->f, s->file);
	fprintf(o->f, ", \"offset\": %" PRIuPTR ", \"size\": %zu, \"extent\": \"%s\", "
		"\"kind\": \"%s\", \"reason\": ", off, s->size,
		table_name(s->table), kind);
	pkc_json_str(o->f, why);
	fprintf(o->f, "}");
	return 0;
}

/* One spec over the objects (or as it is without them). */
static int list_spec(const char *spec, const struct objs *os, struct out *o,
		     char *err, size_t errlen)
{
	const char *colon = pk_spec_obj_colon(spec), *name = colon ? colon + 1 : spec;
	char obj[PATH_MAX], full[PATH_MAX * 2];
	int glob = has_glob(name), any = 0, r = -ENOENT;
	struct stat st;

	o->found = 0;
	if (!colon && strchr(spec, '/') && !stat(spec, &st) && S_ISREG(st.st_mode)) {
		/* OBJECT-FILE: its symbols, then the functions only an FDE
		   bounds (a stripped program's), by offset. */
		snprintf(full, sizeof(full), "%s:*", spec);
		o->nseen = 0;
		r = lib.each(full, print_sym, o);
		snprintf(full, sizeof(full), "%s:0x*", spec);
		o->unnamed = 1;
		if (lib.each(full, print_sym, o) > 0)
			r = 0;
		o->unnamed = 0;
		goto done;
	}
	if (!os->n || (colon && memchr(spec, '/', (size_t)(colon - spec)))) {
		r = lib.each(spec, print_sym, o);
		goto done;
	}
	if (colon) {
		snprintf(obj, sizeof(obj), "%.*s", (int)(colon - spec), spec);
		glob = glob || has_glob(obj);
	}
	for (int i = 0; i < os->n; i++) {
		if (colon && !base_matches(os->path[i], obj))
			continue;
		any = 1;
		snprintf(full, sizeof(full), "%s:%s", os->path[i], name);
		r = lib.each(full, print_sym, o);
		if (r < 0 && r != -ENOENT)
			break;
		if (o->found && !glob)
			break;	/* the first definition, as the linker binds */
	}
	if (!any)
		snprintf(err, errlen, "no object of the command is called %.400s", obj);
	else if (!o->found && r == -ENOENT && !colon)
		snprintf(err, errlen, "no function %s in the command's %d "
			 "objects (%.200s and its libraries)", glob ? "matches" :
			 "of that name", os->n, os->path[0]);
done:
	if (o->found)
		return 0;
	if (!err[0])
		snprintf(err, errlen, "%s", r == -ENOENT ? "nothing matches" :
			 r == -EINVAL ? "not a valid spec (or ambiguous)" :
			 strerror(-r));
	return r < 0 ? r : -ENOENT;
}

/*
 * A file's MiniDebugInfo refused: said whatever the spec finds (its other
 * sources are listed), once a file, in whichever pass reads the file (the
 * symbol layer keeps what it read).
 */
static void file_line(enum pk_log_level level, const char *msg)
{
	static char said[4][512];	/* the last files' lines */
	static unsigned int nsaid;

	if (level > PK_LOG_ERROR || !strstr(msg, ".gnu_debugdata"))
		return;
	for (unsigned int i = 0; i < 4; i++)
		if (!strncmp(said[i], msg, sizeof(said[i]) - 1))
			return;
	snprintf(said[nsaid++ % 4], sizeof(said[0]), "%s", msg);
	pkc_err("list: %s\n", msg);
}

static void spec_log(enum pk_log_level level, const char *msg, void *ctx)
{
	char *err = ctx;

	if (level > PK_LOG_ERROR)
		return;
	snprintf(err, 512, "%s", msg);
	file_line(level, msg);
}

/*
 * Ask COMMAND's own process the kind of each function in o->ask (see the
 * top of this file): COMMAND @argv started with the agent preloaded (and
 * @extra after it, or NULL) and libprobekit-listaudit.so in LD_AUDIT; it
 * ends at its start-up, before any constructor. Only the functions of
 * object @only if not NULL. 0, or -errno after saying why (the kinds
 * stay unknown).
 */
/*
 * Run @path (@argv) stopped by the audit module at its start-up (LD_PRELOAD
 * @pre, LD_AUDIT @aud, questions in @req, answers to @ans). Its wait
 * status, or -1.
 */
static int run_asked(const char *path, char **argv, const char *pre,
		     const char *aud, const char *req, const char *ans)
{
	int st = -1;
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (!pid) {
		int null = open("/dev/null", O_RDWR);

		/* Its output is not list's: nothing of it should come, anyway. */
		if (null >= 0) {
			dup2(null, 0);
			dup2(null, 1);
		}
		setenv("LD_PRELOAD", pre, 1);
		setenv("LD_AUDIT", aud, 1);
		setenv("PROBEKIT_LIST_REQ", req, 1);
		setenv("PROBEKIT_LIST_OUT", ans, 1);
		/* What pka_init() would arm on: nothing. */
		unsetenv(PKA_ENV_DIR);
		execv(path, argv);
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0) {
		if (errno != EINTR)
			return -1;
	}
	return st;
}

static int ask_command(char **argv, const struct objs *os, const char *extra,
		       const char *only, struct out *o)
{
	struct pkc_run *r = calloc(1, sizeof(*r));
	char dir[] = "/tmp/probekit-list.XXXXXX", req[64], ans[64], *slash;
	char audit[4096 + 64], line[1200], *pre = NULL, *aud = NULL;
	const char *old;
	FILE *f = NULL;
	size_t k = 0, nq = 0, *q = calloc(o->nask ? o->nask : 1, sizeof(*q));
	int st = -1, err = -ENOMEM;

	if (!r || !q) {
		free(r);
		free(q);
		return -ENOMEM;
	}
	/*
	 * Only where the dynamic linker is glibc's and honours LD_AUDIT and
	 * LD_PRELOAD: a static, setuid or setgid program, or one with file
	 * capabilities (secure mode), would run whole.
	 */
	{
		const char *b = strrchr(os->interp, '/');
		struct stat st;

		if (os->is_static || !b || strncmp(b + 1, "ld-linux", 8) ||
		    stat(os->path[0], &st) || (st.st_mode & (S_ISUID | S_ISGID)) ||
		    getxattr(os->path[0], "security.capability", NULL, 0) >= 0) {
			pkc_err("list: %s is not run (static, set-user-ID or "
				"-group, capabilities, or not glibc's loader): kinds "
				"of its objects unknown\n", os->path[0]);
			free(r);
			free(q);
			return -EPERM;
		}
	}
	if (pkc_run_find_agent(r) || !(slash = strrchr(r->agent, '/')) ||
	    (size_t)snprintf(audit, sizeof(audit), "%.*s/libprobekit-listaudit.so",
			     (int)(slash - r->agent), r->agent) >= sizeof(audit) ||
	    access(audit, R_OK)) {
		pkc_err("list: no libprobekit-listaudit.so beside the agent: "
			"kinds of the command's objects unknown\n");
		free(r);
		free(q);
		return -ENOENT;
	}
	/*
	 * LD_PRELOAD and LD_AUDIT are lists split at ':' (and LD_PRELOAD at
	 * blanks): a path holding one would load nothing, and COMMAND would
	 * run whole.
	 */
	if (strpbrk(r->agent, ": \t\n") || strpbrk(audit, ": \t\n")) {
		pkc_err("list: the agent's path %s has a ':' or a blank, which "
			"the dynamic linker would split: COMMAND is not run, kinds "
			"of its objects unknown\n", r->agent);
		free(r);
		free(q);
		return -EINVAL;
	}
	if (!mkdtemp(dir)) {
		err = -errno;
		goto out;
	}
	snprintf(req, sizeof(req), "%s/req", dir);
	snprintf(ans, sizeof(ans), "%s/ans", dir);
	f = fopen(req, "w");
	if (!f)
		goto out;
	for (size_t i = 0; i < o->nask; i++) {
		if (only && strcmp(only, o->ask[i].obj))
			continue;
		q[nq++] = i;
		fprintf(f, "%s\t%" PRIxPTR "\n", o->ask[i].obj, o->ask[i].off);
	}
	if (fclose(f)) {
		f = NULL;
		goto out;
	}
	f = NULL;
	old = getenv("LD_PRELOAD");
	if (asprintf(&pre, "%s%s%s%s%s", r->agent, extra ? ":" : "",
		     extra ? extra : "", old && *old ? ":" : "",
		     old ? old : "") < 0) {
		pre = NULL;
		goto out;
	}
	old = getenv("LD_AUDIT");
	if (asprintf(&aud, "%s%s%s", audit, old && *old ? ":" : "",
		     old ? old : "") < 0) {
		aud = NULL;
		goto out;
	}
	/*
	 * Fail closed: the same modules must stop a harmless program first
	 * (no questions: an empty answer file, status 0). A dynamic linker
	 * that ignores the audit module only warns, and runs the program
	 * whole: then COMMAND is not run.
	 */
	{
		char *tav[] = { (char *)"true", NULL };
		char ereq[80];
		FILE *e;

		snprintf(ereq, sizeof(ereq), "%s/none", dir);
		e = fopen(ereq, "w");
		if (!e || fclose(e)) {
			err = -EIO;
			goto out;
		}
		unlink(ans);
		st = run_asked("/bin/true", tav, pre, aud, ereq, ans);
		unlink(ereq);
		if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) ||
		    access(ans, F_OK)) {
			pkc_err("list: /bin/true did not answer (the dynamic "
				"linker did not stop it with %s): COMMAND is not "
				"run, kinds of its objects unknown\n", audit);
			err = -EIO;
			goto out;
		}
		unlink(ans);
	}
	st = run_asked(os->path[0], argv, pre, aud, req, ans);
	if (st < 0) {
		err = -errno;
		goto out;
	}
	f = fopen(ans, "r");
	if (!WIFEXITED(st) || WEXITSTATUS(st) || !f) {
		pkc_err("list: %s did not answer (%s %d): kinds of its objects "
			"unknown\n", os->path[0], WIFEXITED(st) ? "exit status" :
			"signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
		err = -EIO;
		goto out;
	}
	while (k < nq && fgets(line, sizeof(line), f)) {
		char *tab = strchr(line, '\t'), *nl = strchr(line, '\n');

		if (nl)
			*nl = 0;
		if (!tab)
			break;
		*tab = 0;
		snprintf(o->ask[q[k]].kind, sizeof(o->ask[0].kind), "%.15s", line);
		snprintf(o->ask[q[k]].why, sizeof(o->ask[0].why), "%s", tab + 1);
		k++;
	}
	err = k == nq ? 0 : -EIO;
	if (err)
		pkc_err("list: %s answered %zu of %zu questions\n", os->path[0],
			k, nq);
out:
	if (f)
		fclose(f);
	unlink(req);
	unlink(ans);
	rmdir(dir);
	free(pre);
	free(aud);
	free(r);
	free(q);
	return err;
}

/*
 * Without COMMAND: the functions of each OBJECT-FILE not loaded here are
 * asked of a process that loads it and runs nothing of it: a program
 * itself, exec()ed without arguments; a library, preloaded into a copy of
 * this command (its own code does not run either).
 */
static void ask_files(struct out *o)
{
	for (size_t i = 0; i < o->nask; i++) {
		struct objs one = { 0 };
		char self[PATH_MAX], *argv[2];
		const char *extra = NULL;
		ssize_t n;
		int r;

		if (o->ask[i].kind[0] || (i && !strcmp(o->ask[i].obj, o->ask[i - 1].obj)))
			continue;
		r = elf_interp(o->ask[i].obj, one.interp, sizeof(one.interp));
		if (r < 0)
			continue;
		if (r == 0) {
			argv[0] = o->ask[i].obj;
		} else {
			/* A library (no PT_INTERP): into this command. */
			n = readlink("/proc/self/exe", self, sizeof(self) - 1);
			if (n <= 0 || elf_interp((self[n] = 0, self), one.interp,
						 sizeof(one.interp)))
				continue;
			argv[0] = self;
			extra = o->ask[i].obj;
		}
		argv[1] = NULL;
		if (objs_add(&one, argv[0]) == 0)
			ask_command(argv, &one, extra, o->ask[i].obj, o);
		for (int k = 0; k < one.n; k++)
			free(one.path[k]);
		free(one.path);
	}
}

static void collect_log(enum pk_log_level level, const char *msg, void *ctx)
{
	(void)ctx;
	file_line(level, msg);
}

static int list_body(int argc, char **argv, struct objs *os, struct out *o,
		     char (**whyp)[512])
{
	int nspecs, failed = 0, code = 0;
	char **specs, *all[] = { (char *)"*" };

	/* Options anywhere before "--" (after it: COMMAND's). */
	for (int i = 1, w = 1; i <= argc; i++) {
		if (i == argc || !strcmp(argv[i], "--")) {
			for (; i <= argc; i++)
				argv[w++] = argv[i];
			argc = w - 1;
			break;
		}
		if (!strcmp(argv[i], "-j") || !strcmp(argv[i], "--json")) {
			o->json = 1;
			continue;
		}
		if (!strcmp(argv[i], "--color") || !strcmp(argv[i], "--colour") ||
		    !strncmp(argv[i], "--color=", 8) ||
		    !strncmp(argv[i], "--colour=", 9)) {
			const char *eq = strchr(argv[i], '=');

			if (pkc_color_opt(eq ? eq + 1 : NULL))
				return PKC_EXIT_OWN;
			continue;
		}
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			pkc_usage(stdout, &pkc_cmd_list);
			return 0;
		}
		if (argv[i][0] == '-' && argv[i][1]) {
			pkc_err("list: unknown option %s\n",
				argv[i]);
			pkc_usage(stderr, &pkc_cmd_list);
			return PKC_EXIT_OWN;
		}
		argv[w++] = argv[i];
	}
	optind = 1;
	specs = argv + optind;
	for (nspecs = 0; optind + nspecs < argc && strcmp(specs[nspecs], "--");
	     nspecs++)
		;
	if (optind + nspecs < argc && !argv[optind + nspecs + 1]) {
		pkc_err("list: no COMMAND after --\n");
		return PKC_EXIT_OWN;
	}
	if (!nspecs && optind + nspecs == argc) {
		pkc_usage(stderr, &pkc_cmd_list);
		return PKC_EXIT_OWN;
	}
	*whyp = calloc((size_t)nspecs + 1, sizeof(**whyp));
	if (!*whyp || load_lib())
		return PKC_EXIT_OWN;
	/* C++ names demangled: libstdc++'s __cxa_demangle, where installed. */
	dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_GLOBAL);
	if (optind + nspecs < argc) {
		code = command_objects(argv[optind + nspecs + 1], os);
		if (code)
			return code;
		if (!nspecs) {
			/* Every function of the program itself (OBJECT-FILE). */
			all[0] = os->path[0];
			specs = all;
			nspecs = 1;
		}
	}
	/*
	 * The kinds of the functions of objects not loaded here asked first
	 * (a pass that prints nothing, then the real one): in COMMAND's own
	 * process, or without COMMAND in one loading each OBJECT-FILE.
	 */
	{
		/* The real pass says the rest. */
		lib.set_log(collect_log, NULL);
		o->collect = 1;
		for (int i = 0; i < nspecs; i++) {
			char err[512] = "";

			o->spec_err = err;
			list_spec(specs[i], os, o, err, sizeof(err));
		}
		o->collect = 0;
		o->nseen = 0;
		if (o->nask && optind + nspecs < argc)
			ask_command(argv + optind + nspecs + 1, os, NULL, NULL, o);
		else if (o->nask)
			ask_files(o);
	}
	o->col = pkc_color_for(o->f, o->json);
	if (!o->json)
		fprintf(o->f, "%s%-28s %-40s %10s %7s %-9s %s%s\n",
			pkc_sgr(o->col, PKC_SGR_HEAD), "OBJECT", "NAME",
			"OFFSET", "SIZE", "EXTENT", "KIND", pkc_sgr(o->col, PKC_SGR_OFF));
	else
		fprintf(o->f, "{\"objects\": [");
	for (int i = 0; o->json && i < os->n; i++) {
		fprintf(o->f, "%s", i ? ", " : "");
		pkc_json_str(o->f, os->path[i]);
	}
	if (o->json)
		fprintf(o->f, "], \"static\": %s, \"functions\": [",
			os->is_static ? "true" : "false");
	for (int i = 0; i < nspecs; i++) {
		char err[512] = "";

		o->spec_err = err;
		lib.set_log(spec_log, err);
		if (list_spec(specs[i], os, o, err, sizeof(err)))
			failed++;
		lib.set_log(NULL, NULL);
		snprintf((*whyp)[i], sizeof((*whyp)[i]), "%s", o->found ? "" : err);
		if (!o->found)
			pkc_err("list: %s: %s\n", specs[i], err);
	}
	if (o->json) {
		fprintf(o->f, "\n], \"unmatched\": [");
		for (int i = 0, k = 0; i < nspecs; i++) {
			if (!(*whyp)[i][0])
				continue;
			fprintf(o->f, "%s{\"spec\": ", k++ ? ", " : "");
			pkc_json_str(o->f, specs[i]);
			fprintf(o->f, ", \"why\": ");
			pkc_json_str(o->f, (*whyp)[i]);
			fprintf(o->f, "}");
		}
		fprintf(o->f, "]}\n");
	}
	if (fflush(o->f) || ferror(o->f)) {
		pkc_err("list: cannot write the list\n");
		return PKC_EXIT_OWN;
	}
	return failed ? 1 : 0;
}

static int list_main(int argc, char **argv)
{
	struct objs os = { 0 };
	struct out o = { .f = stdout };
	char (*why)[512] = NULL;
	int code = list_body(argc, argv, &os, &o, &why);

	for (int i = 0; i < os.n; i++)
		free(os.path[i]);
	free(os.path);
	free(o.seen);
	for (size_t i = 0; i < o.nask; i++)
		free(o.ask[i].obj);
	free(o.ask);
	free(why);
	return code;
}

const struct pkc_cmd pkc_cmd_list = {
	.name = "list",
	.synopsis = "list [--json] [--color[=WHEN]] [SPEC|OBJECT-FILE]... [-- COMMAND [ARG]...]",
	.help =
		"Lists what each SPEC would probe: object, name, offset from the object's\n"
		"load base, size, where the size came from, and the kind of probe (jump, or\n"
		"int3 and why). Runs nothing of COMMAND: its libraries come from its dynamic\n"
		"linker's --list. An OBJECT-FILE alone lists all its functions.\n"
		"  SPEC              [OBJECT:]NAME[@VERSION], OBJECT:FILE.c#NAME,\n"
		"                    OBJECT:0xOFFSET; globs in OBJECT and NAME; C++ names\n"
		"  -j, --json        one JSON object instead of the table\n"
		"      --color[=WHEN] colour the table (stdout): auto (a terminal, NO_COLOR\n"
		"                    unset), always, never\n",
	.main = list_main,
};
