// SPDX-License-Identifier: MIT
/* bench_real.c - every function of real libraries probed as one batch during their real workloads: jump vs int3, wall time, kernel uprobes side by side. */

/*
 * For each library (liblzma: xz -T1 and -T2; libxml2: xmllint --noout;
 * libpcre2-8: grep -P; libstdc++: bench_real_cxx), every function of its
 * .dynsym (defined STT_FUNC, st_size >= 5, one per address) is probed by
 * the preload shim (bench_real_shim.c) with one pk_probe_register() of
 * them all, while the workload runs on data generated here (the same bytes
 * every time). Runs, per library:
 *
 *   unprobed and probed (probekit picks jump or int3) alternately, R times
 *   once with every probe forced to int3 (PK_PROBE_F_INT3)
 *   once through kernel uprobes on the same functions (the ones probekit
 *   armed and saw called; PKR_UPROBES=all: every one it armed), counted
 *   per process with `perf stat -e GROUP:*` (tracefs uprobe_events; not
 *   with --quick or PKR_UPROBES=none, not without root or perf). perf opens and closes one
 *   event per function, and each close waits for an RCU tasks-trace grace
 *   period (~110 ms here): all 3 839 of libstdc++ add 7 minutes, so by
 *   default a function never called in the probed run gets no uprobe (it
 *   costs a run nothing but that). With PKR_UPROBES=all, libstdc++'s
 *   _ZNSt14error_categoryC2Ev and _ZSt15future_categoryv differ (kernel
 *   2 and 1, probekit 0): libstdc++'s own initialisers call them before
 *   the shim's constructor has armed anything; the kernel's uprobes are
 *   there from the library's mmap
 *
 * Every run's stdout and stderr must equal the unprobed run's, byte for
 * byte; the per-function counts of the jump run, the int3 run and the
 * kernel's must be equal (count_mismatch_* = functions whose counts
 * differ). Figures, case = the library:
 *
 *   real / LIB / functions, functions_int3, functions_failed   count
 *   real / LIB / int3_share_of_functions    int3 / armed probes
 *   real / LIB / calls, int3_share_of_calls hits, and the share of them on
 *                                           int3 probes (jump run)
 *   real / LIB / ratio_vs_unprobed          probed / unprobed wall time,
 *                                           per pair of runs, median
 *   real / LIB / ratio_vs_unprobed_after_arming
 *                                           the same without the time the
 *                                           shim took to create and
 *                                           register the probes (arm_ms)
 *   real / LIB / ratio_int3_forced_vs_unprobed
 *   real / LIB / ratio_uprobe_overhead_vs_probekit
 *                                           (uprobe - unprobed) /
 *                                           (probed - unprobed) wall time
 *   real / LIB / count_mismatch_int3, count_mismatch_uprobe, output_mismatch
 *                                           (xz -T2 calls lzma_code a
 *                                           call more or less from run to
 *                                           run: one function differs)
 *                                           uprobe_functions: how many
 *                                           functions had a uprobe
 *                                           count_mismatch_jump_runs: the
 *                                           first and last probed runs
 *                                           (the workload's own variation)
 *   real / LIB / arm_ms                     create + register in the shim
 *                                           (summed over a job's commands),
 *                                           per probed run, median
 *   real / LIB / arm_us_per_function        arm_ms per probe created, per
 *                                           command (each arms them all)
 *   real / LIB / wall_uprobe_ms, wall_uprobe_perf_ms
 *                                           the uprobe run: the workload
 *                                           alone (timed by this program
 *                                           run under perf stat, --timed),
 *                                           and perf stat whole (opening
 *                                           and closing its events)
 *   real / LIB,int3=REASON / functions, calls
 *                                           int3 probes by the reason
 *                                           probekit logs for each
 *
 * The human table adds the functions that are int3 probes and take the
 * most calls. Uprobes this adds are removed at exit, also on SIGINT/TERM.
 */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "bench_real.h"
#include "tracefs.h"

#ifndef PKR_SHIM
#define PKR_SHIM "bench_real_shim.so"
#endif
#ifndef PKR_CXX
#define PKR_CXX "bench_real_cxx"
#endif

#define MAX_CMDS 4
#define MAX_ARGS 16

struct func {
	uint64_t vaddr, size, off;	/* off: in the file, for uprobes */
	const char *name;
};

struct cmd {
	char *argv[MAX_ARGS];
	int argc;
};

struct lib {
	const char *name, *soname;
	char path[PATH_MAX];
	struct func *fn;
	size_t nfn;
	struct cmd cmd[MAX_CMDS];
	int ncmd;
};

static char tmpdir[64];
static char self_exe[PATH_MAX];
static int quick;

/* --------------------------------------------------------------- ELF */

static int cmp_func(const void *a, const void *b)
{
	const struct func *x = a, *y = b;

	return (x->vaddr > y->vaddr) - (x->vaddr < y->vaddr);
}

/*
 * @l->fn: its file's defined STT_FUNC .dynsym entries of >= 5 bytes, one
 * per address, sorted. The file stays mapped (names point into it).
 */
static const char *read_funcs(struct lib *l)
{
	const Elf64_Ehdr *eh;
	const Elf64_Shdr *sh;
	const Elf64_Phdr *ph;
	struct stat st;
	const char *base;
	size_t n = 0, k = 0;
	int fd = open(l->path, O_RDONLY);

	if (fd < 0 || fstat(fd, &st))
		return "cannot open the library file";
	base = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (base == MAP_FAILED)
		return "cannot map the library file";
	eh = (const void *)base;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64)
		return "not a 64-bit ELF file";
	sh = (const void *)(base + eh->e_shoff);
	ph = (const void *)(base + eh->e_phoff);
	for (int i = 0; i < eh->e_shnum; i++) {
		const Elf64_Sym *sym;
		const char *str;
		size_t cnt;

		if (sh[i].sh_type != SHT_DYNSYM)
			continue;
		sym = (const void *)(base + sh[i].sh_offset);
		str = base + sh[sh[i].sh_link].sh_offset;
		cnt = sh[i].sh_size / sizeof(*sym);
		l->fn = calloc(cnt, sizeof(*l->fn));
		if (!l->fn)
			return "out of memory";
		for (size_t j = 0; j < cnt; j++) {
			if (ELF64_ST_TYPE(sym[j].st_info) != STT_FUNC ||
			    sym[j].st_shndx == SHN_UNDEF || sym[j].st_size < 5)
				continue;
			l->fn[n].vaddr = sym[j].st_value;
			l->fn[n].size = sym[j].st_size;
			l->fn[n].name = str + sym[j].st_name;
			n++;
		}
	}
	qsort(l->fn, n, sizeof(*l->fn), cmp_func);
	for (size_t i = 0; i < n; i++) {
		if (k && l->fn[k - 1].vaddr == l->fn[i].vaddr)
			continue;
		l->fn[k] = l->fn[i];
		l->fn[k].off = 0;
		for (int p = 0; p < eh->e_phnum; p++)
			if (ph[p].p_type == PT_LOAD && l->fn[k].vaddr >= ph[p].p_vaddr &&
			    l->fn[k].vaddr < ph[p].p_vaddr + ph[p].p_filesz)
				l->fn[k].off = l->fn[k].vaddr - ph[p].p_vaddr + ph[p].p_offset;
		k++;
	}
	l->nfn = k;
	return k ? NULL : "no functions in .dynsym";
}

/* Where the dynamic linker finds @l->soname. */
static const char *find_lib(struct lib *l)
{
	struct link_map *lm = NULL;
	void *dl = dlopen(l->soname, RTLD_LAZY | RTLD_LOCAL);

	if (!dl || dlinfo(dl, RTLD_DI_LINKMAP, &lm) || !lm || !lm->l_name[0])
		return "the library is not installed";
	if (!realpath(lm->l_name, l->path))
		return "cannot resolve the library's path";
	return NULL;
}

/* ------------------------------------------------------------- workloads */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static unsigned rnd(void)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (unsigned)(rng >> 33);
}

static void put_word(FILE *f)
{
	static const char *syl[] = { "ba", "ce", "di", "fo", "gu", "ha", "ki", "lo",
				     "ma", "ne", "pi", "ro", "su", "ta", "vo", "ing" };
	int n = 1 + (int)(rnd() % 4);

	for (int i = 0; i < n; i++)
		fputs(syl[rnd() % 16], f);
}

/* @bytes of semi-compressible text: words, numbers, repeats. */
static int gen_text(const char *path, long bytes)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -1;
	rng = 0x9e3779b97f4a7c15ull;
	while (ftell(f) < bytes) {
		int words = 6 + (int)(rnd() % 8);

		for (int w = 0; w < words; w++) {
			if (rnd() % 11 == 0)
				fprintf(f, "%u", rnd() % 100000);
			else
				put_word(f);
			if (rnd() % 23 == 0) {	/* a doubled word */
				fputc(' ', f);
				fputs("again again", f);
			}
			fputc(w + 1 < words ? ' ' : '\n', f);
		}
	}
	return fclose(f);
}

static int gen_xml(const char *path, long items)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -1;
	rng = 0x9e3779b97f4a7c15ull;
	fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE catalog [\n"
	      "<!ENTITY co \"probekit &amp; co\">\n]>\n<catalog>\n", f);
	for (long i = 0; i < items; i++) {
		fprintf(f, "  <item id=\"i%ld\" price=\"%u.%02u\" name=\"", i,
			rnd() % 1000, rnd() % 100);
		put_word(f);
		fputs("\">\n    <title>", f);
		put_word(f);
		fputs(" &lt;", f);
		put_word(f);
		fputs("&gt; &co;</title>\n    <tags>", f);
		for (int t = 0; t < 3; t++) {
			fputs("<tag k=\"", f);
			put_word(f);
			fputs("\"/>", f);
		}
		fputs("</tags>\n    <!-- note -->\n    <desc><![CDATA[", f);
		put_word(f);
		fputs(" < raw > ]]></desc>\n  </item>\n", f);
	}
	fputs("</catalog>\n", f);
	return fclose(f);
}

static void add_cmd(struct lib *l, ...)
{
	struct cmd *c = &l->cmd[l->ncmd++];
	va_list ap;
	char *a;

	va_start(ap, l);
	while ((a = va_arg(ap, char *)) && c->argc < MAX_ARGS - 1)
		c->argv[c->argc++] = strdup(a);
	va_end(ap);
	c->argv[c->argc] = NULL;
}

/* Data files and command lines for @l. */
static const char *setup(struct lib *l)
{
	char p[128], n[32];

	if (!strcmp(l->name, "liblzma")) {
		snprintf(p, sizeof(p), "%s/text.lzma", tmpdir);
		if (gen_text(p, quick ? 128 << 10 : 2 << 20))
			return "cannot write the data";
		add_cmd(l, "xz", "-T1", "-3", "-c", p, NULL);
		add_cmd(l, "xz", "-T2", "-3",
			quick ? "--block-size=64KiB" : "--block-size=512KiB", "-c", p, NULL);
	} else if (!strcmp(l->name, "libxml2")) {
		snprintf(p, sizeof(p), "%s/doc.xml", tmpdir);
		if (gen_xml(p, quick ? 300 : 12500))
			return "cannot write the document";
		add_cmd(l, "xmllint", "--noout", p, NULL);
	} else if (!strcmp(l->name, "libpcre2-8")) {
		snprintf(p, sizeof(p), "%s/text.grep", tmpdir);
		if (gen_text(p, quick ? 128 << 10 : 4 << 20))
			return "cannot write the text";
		add_cmd(l, "grep", "-P", "-n", "\\b(\\w+) \\1\\b|^[a-z]+ \\d{3,}|ing\\b.*ki", p, NULL);
		add_cmd(l, "grep", "-P", "-o", "-i", "(?<=ro)(su|ta)+(?!vo)", p, NULL);
	} else {
		snprintf(n, sizeof(n), "%d", quick ? 200 : 3000);
		add_cmd(l, PKR_CXX, n, NULL);
	}
	return NULL;
}

/* ----------------------------------------------------------- uprobes */

static char upgrp[32];
static struct lib *uplib;
static size_t upadded, up_n;
static int up_all;	/* PKR_UPROBES=all: unhit functions too */
static int up_none;	/* PKR_UPROBES=none: no uprobe run (arming figures alone) */

static int tf_write(const char *name, const char *text)
{
	char p[256];
	int fd, ok;

	snprintf(p, sizeof(p), "%s/%s", TRACEFS_DIR, name);
	fd = open(p, O_WRONLY | O_APPEND);
	if (fd < 0)
		return -errno;
	ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
	close(fd);
	return ok ? 0 : -EIO;
}

/* Remove every uprobe event this process added. */
static void uprobes_remove(void)
{
	char line[96];

	for (size_t i = 0; i < upadded; i++) {
		snprintf(line, sizeof(line), "-:%s/f%zu\n", upgrp, i);
		tf_write("uprobe_events", line);
	}
	upadded = 0;
	uplib = NULL;
}

static volatile pid_t cur_child;	/* the workload (or perf) running now */

/*
 * Events are removable only once no perf holds them: end the child first
 * (a perf closing its events takes a while, in the kernel).
 */
static void on_fatal(int sig)
{
	pid_t c = cur_child;

	if (c > 0) {
		kill(c, SIGKILL);
		waitpid(c, NULL, 0);
	}
	uprobes_remove();
	signal(sig, SIG_DFL);
	raise(sig);
}

/*
 * Events GROUP/fI for the functions of @l that @armed marks; returns why
 * not, or NULL. Event i is function i (unarmed ones get none).
 */
static const char *uprobes_add(struct lib *l, const struct pkr_fn *res)
{
	char line[PATH_MAX + 96];

	snprintf(upgrp, sizeof(upgrp), "pkreal%d", (int)getpid());
	uplib = l;
	up_n = 0;
	for (size_t i = 0; i < l->nfn; i++) {
		upadded = i + 1;
		if (!res[i].kind || !l->fn[i].off || (!res[i].hits && !up_all))
			continue;
		up_n++;
		snprintf(line, sizeof(line), "p:%s/f%zu %s:0x%llx\n", upgrp, i, l->path,
			 (unsigned long long)l->fn[i].off);
		if (tf_write("uprobe_events", line)) {
			uprobes_remove();
			return "writing uprobe_events failed";
		}
	}
	return NULL;
}

/* ------------------------------------------------------------- runs */

enum mode { M_PLAIN, M_JUMP, M_INT3, M_UPROBE };

struct result {
	double wall_ns;
	double perf_ns;		/* M_UPROBE: perf stat's whole run */
	int ok;			/* every command exited 0 */
	int out_differs;	/* commands whose output differs from the reference */
};

static int same_file(const char *a, const char *b)
{
	FILE *x = fopen(a, "r"), *y = fopen(b, "r");
	int same = x && y, c, d;

	while (same) {
		c = getc(x);
		d = getc(y);
		if (c != d)
			same = 0;
		if (c == EOF)
			break;
	}
	if (x)
		fclose(x);
	if (y)
		fclose(y);
	return same;
}

/*
 * Runs @l's commands in @m; @ref: save outputs as the reference, else
 * compare. @shm: the shim's file (jump, int3). Uprobe counts go to
 * <tmpdir>/perf.<k>.
 */
static struct result run(struct lib *l, enum mode m, int ref, const char *shm)
{
	struct result res = { 0, 0, 1, 0 };

	for (int k = 0; k < l->ncmd; k++) {
		char out[128], err[128], ro[128], re[128], pf[128], ev[64], tf[128];
		char *argv[MAX_ARGS + 8];
		int a = 0, status;
		double t0;
		pid_t pid;

		snprintf(out, sizeof(out), "%s/out.%d", tmpdir, k);
		snprintf(err, sizeof(err), "%s/err.%d", tmpdir, k);
		snprintf(ro, sizeof(ro), "%s/ref.out.%d", tmpdir, k);
		snprintf(re, sizeof(re), "%s/ref.err.%d", tmpdir, k);
		snprintf(pf, sizeof(pf), "%s/perf.%d", tmpdir, k);
		snprintf(ev, sizeof(ev), "%s:*", upgrp);
		snprintf(tf, sizeof(tf), "%s/timed.%d", tmpdir, k);
		if (m == M_UPROBE) {
			static char *pre[] = { "perf", "stat", "-x,", "--no-big-num",
					       "-o", NULL, "-e", NULL, "--", NULL,
					       "--timed", NULL };

			for (int i = 0; i < 12; i++)
				argv[a++] = pre[i];
			argv[5] = pf;
			argv[7] = ev;
			argv[9] = self_exe;
			argv[11] = tf;
		}
		for (int i = 0; i < l->cmd[k].argc; i++)
			argv[a++] = l->cmd[k].argv[i];
		argv[a] = NULL;
		t0 = bench_now_ns();
		pid = fork();
		if (pid == 0) {
			int fo = open(ref ? ro : out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
			int fe = open(ref ? re : err, O_WRONLY | O_CREAT | O_TRUNC, 0600);

			if (fo < 0 || fe < 0)
				_exit(126);
			dup2(fo, 1);
			dup2(fe, 2);
			close(fo);
			close(fe);
			if (m == M_JUMP || m == M_INT3) {
				setenv("LD_PRELOAD", PKR_SHIM, 1);
				setenv("PKR_SHM", shm, 1);
				setenv("PKR_LIB", l->path, 1);
				setenv("PKR_MODE", m == M_INT3 ? "int3" : "jump", 1);
			}
			execvp(argv[0], argv);
			_exit(127);
		}
		cur_child = pid;
		if (pid < 0 || waitpid(pid, &status, 0) != pid ||
		    !WIFEXITED(status) ||
		    WEXITSTATUS(status) > (strcmp(l->cmd[k].argv[0], "grep") ? 0 : 1))
			res.ok = 0;
		if (m == M_UPROBE) {
			FILE *f = fopen(tf, "r");
			double w = 0;

			res.perf_ns += bench_now_ns() - t0;
			if (!f || fscanf(f, "%lf", &w) != 1)
				res.ok = 0;
			if (f)
				fclose(f);
			res.wall_ns += w;
		} else {
			res.wall_ns += bench_now_ns() - t0;
		}
		cur_child = 0;
		if (!ref && !(same_file(out, ro) && (m == M_UPROBE || same_file(err, re))))
			res.out_differs++;
	}
	return res;
}

/* A fresh shim file for @l: its functions, counts 0. */
static int shm_init(const struct lib *l, const char *path)
{
	size_t sz = sizeof(struct pkr_hdr) + l->nfn * sizeof(struct pkr_fn);
	struct pkr_hdr *h = calloc(1, sz);
	struct pkr_fn *fn = (struct pkr_fn *)(h + 1);
	char log[160];
	int fd, ok;

	if (!h)
		return -1;
	snprintf(log, sizeof(log), "%s.log", path);
	unlink(log);
	h->magic = PKR_MAGIC;
	h->n = (uint32_t)l->nfn;
	for (size_t i = 0; i < l->nfn; i++)
		fn[i].vaddr = l->fn[i].vaddr;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ok = fd >= 0 && write(fd, h, sz) == (ssize_t)sz;
	if (fd >= 0)
		close(fd);
	free(h);
	return ok ? 0 : -1;
}

/* The shim file after a run, in @out (l->nfn entries); header in @h. */
static int shm_read(const struct lib *l, const char *path, struct pkr_hdr *h,
		    struct pkr_fn *out)
{
	int fd = open(path, O_RDONLY), ok;

	ok = fd >= 0 && read(fd, h, sizeof(*h)) == (ssize_t)sizeof(*h) &&
	     read(fd, out, l->nfn * sizeof(*out)) == (ssize_t)(l->nfn * sizeof(*out));
	if (fd >= 0)
		close(fd);
	return ok && h->status == PKR_ST_ARMED ? 0 : -1;
}

/* Kernel counts from perf stat's files, summed over the commands. */
static int perf_counts(const struct lib *l, uint64_t *cnt)
{
	int found = 0;

	memset(cnt, 0, l->nfn * sizeof(*cnt));
	for (int k = 0; k < l->ncmd; k++) {
		char pf[128], line[512], pre[48];
		FILE *f;

		snprintf(pf, sizeof(pf), "%s/perf.%d", tmpdir, k);
		snprintf(pre, sizeof(pre), "%s:f", upgrp);
		f = fopen(pf, "r");
		if (!f)
			return -1;
		while (fgets(line, sizeof(line), f)) {
			char *c1 = strchr(line, ','), *c2, *ev;
			unsigned long long v;
			size_t i;

			if (!c1 || !(c2 = strchr(c1 + 1, ',')))
				continue;
			ev = strstr(c2 + 1, pre);
			if (!ev || sscanf(line, "%llu,", &v) != 1)
				continue;
			i = strtoul(ev + strlen(pre), NULL, 10);
			if (i < l->nfn) {
				cnt[i] += v;
				found++;
			}
		}
		fclose(f);
	}
	return found ? 0 : -1;
}

/* ------------------------------------------------------------- reasons */

#define MAX_REASONS 32

struct reason {
	char text[160];
	size_t fns;
	uint64_t calls;
};

/* The function of @l that holds @vaddr, or -1. */
static long func_at(const struct lib *l, uint64_t vaddr)
{
	size_t lo = 0, hi = l->nfn;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (l->fn[mid].vaddr <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || vaddr >= l->fn[lo - 1].vaddr + l->fn[lo - 1].size)
		return -1;
	return (long)lo - 1;
}

/*
 * @in with every number after '+' or "of " made N: one reason for all
 * offsets and function sizes.
 */
static void normalize(char *out, size_t sz, const char *in)
{
	size_t n = 0;

	for (; *in && n + 2 < sz; in++) {
		out[n++] = *in;
		if ((*in == '+' || (n >= 3 && !memcmp(out + n - 3, "of ", 3))) &&
		    in[1] >= '0' && in[1] <= '9') {
			out[n++] = 'N';
			while (in[1] >= '0' && in[1] <= '9')
				in++;
		}
	}
	out[n] = 0;
}

/*
 * Why each int3 probe of the jump run is one, from probekit's log lines
 * "probe: ADDR: REASON: int3 probe" (@base: the library's load bias).
 * Returns the number of reasons in @rs.
 */
static size_t reasons_read(const struct lib *l, const char *logp, uint64_t base,
			   const struct pkr_fn *res, struct reason *rs)
{
	char line[512], norm[160];
	unsigned char *seen = calloc(l->nfn, 1);
	size_t nr = 0;
	FILE *f = fopen(logp, "r");

	while (f && seen && fgets(line, sizeof(line), f)) {
		char *end = strstr(line, ": int3 probe"), *why;
		unsigned long long a;
		size_t i;
		long fi;

		if (strncmp(line, "probe: 0x", 9) || !end)
			continue;
		a = strtoull(line + 7, &why, 16);
		if (strncmp(why, ": ", 2))
			continue;
		*end = 0;
		fi = func_at(l, a - base);
		if (fi < 0 || seen[fi] || res[fi].kind != 2)
			continue;
		seen[fi] = 1;
		normalize(norm, sizeof(norm), why + 2);
		for (i = 0; i < nr && strcmp(rs[i].text, norm); i++)
			;
		if (i == nr) {
			if (nr == MAX_REASONS - 1)
				continue;
			snprintf(rs[nr++].text, sizeof(rs[0].text), "%s", norm);
		}
		rs[i].fns++;
		rs[i].calls += res[fi].hits;
	}
	for (size_t i = 0; seen && i < l->nfn; i++)
		if (res[i].kind == 2 && !seen[i]) {
			size_t k;

			for (k = 0; k < nr && strcmp(rs[k].text, "(no reason in the log)"); k++)
				;
			if (k == nr)
				snprintf(rs[nr++].text, sizeof(rs[0].text), "(no reason in the log)");
			rs[k].fns++;
			rs[k].calls += res[i].hits;
		}
	if (f)
		fclose(f);
	free(seen);
	return nr;
}

/* A JSON-friendly name for a reason: lower case, words joined by '_'. */
static void slug(char *out, size_t sz, const char *in)
{
	size_t n = 0;

	for (; *in && !strchr("(:/", *in) && n + 1 < sz && n < 40; in++) {
		char c = *in;

		if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
			out[n++] = c;
		else if (c >= 'A' && c <= 'Z')
			out[n++] = (char)(c - 'A' + 'a');
		else if (n && out[n - 1] != '_')
			out[n++] = '_';
	}
	while (n && out[n - 1] == '_')
		n--;
	out[n] = 0;
}

/* --------------------------------------------------------------- report */

static void one(const char *lib, const char *metric, const char *unit, double v)
{
	struct bench_series s = { 0 };

	bench_add(&s, v);
	bench_report("real", lib, metric, unit, &s);
}

static void skip_all(const char *lib, const char *why)
{
	static const char *m[] = { "int3_share_of_functions", "int3_share_of_calls",
				   "ratio_vs_unprobed", "ratio_uprobe_overhead_vs_probekit" };

	for (int i = 0; i < 4; i++)
		bench_skip("real", lib, m[i], why);
}

static struct pkr_fn *top_res;

static int cmp_hits(const void *a, const void *b)
{
	uint64_t x = top_res[*(const size_t *)a].hits, y = top_res[*(const size_t *)b].hits;

	return (x < y) - (x > y);
}

static int bench_lib(struct lib *l)
{
	char shm[128], logp[160];
	uint64_t base = 0;
	struct bench_series plain = { 0 }, probed = { 0 }, ratio = { 0 }, ratio_run = { 0 };
	struct bench_series arm = { 0 }, arm_fn = { 0 };
	struct pkr_hdr h;
	struct pkr_fn *jr, *ir;
	struct result r;
	const char *why;
	size_t njump = 0, nint3 = 0, nfail = 0, mism3 = 0, *order;
	uint64_t calls = 0, calls3 = 0;
	int runs = quick ? 1 : (bench_opts.runs < 3 ? bench_opts.runs : 3);
	int outbad = 0;
	double t_int3;

	printf("\nbench_real: %s\n", l->name);
	why = find_lib(l);
	why = why ? why : read_funcs(l);
	why = why ? why : setup(l);
#ifdef PKR_SANITIZE
	why = why ? why : "a sanitizer build: the shim cannot be preloaded into "
			  "uninstrumented programs";
#endif
	if (why) {
		skip_all(l->name, why);
		return 0;
	}
	printf("  %s: %zu functions; %s", l->path, l->nfn, l->cmd[0].argv[0]);
	for (int k = 0; k < l->ncmd; k++)
		printf(k ? " ; %s" : "%s", k ? l->cmd[k].argv[0] : "");
	printf(" (%d command%s)\n", l->ncmd, l->ncmd > 1 ? "s" : "");
	snprintf(shm, sizeof(shm), "%s/shm", tmpdir);
	jr = calloc(l->nfn, sizeof(*jr));
	ir = calloc(l->nfn, sizeof(*ir));
	order = calloc(l->nfn, sizeof(*order));
	if (!jr || !ir || !order)
		return -1;
	r = run(l, M_PLAIN, 1, NULL);
	if (!r.ok) {
		skip_all(l->name, "the workload fails unprobed here");
		return 0;
	}
	for (int i = 0; i < runs; i++) {
		double p;

		r = run(l, M_PLAIN, 0, NULL);
		outbad += r.out_differs;
		p = r.wall_ns;
		bench_add(&plain, p / 1e6);
		if (shm_init(l, shm))
			return -1;
		r = run(l, M_JUMP, 0, shm);
		outbad += r.out_differs;
		if (!r.ok || shm_read(l, shm, &h, i ? ir : jr)) {
			fprintf(stderr, "bench_real: %s: the probed run failed (see %s.log)\n",
				l->name, shm);
			skip_all(l->name, "the probed run failed");
			return -1;
		}
		bench_add(&probed, r.wall_ns / 1e6);
		bench_add(&ratio, r.wall_ns / p);
		bench_add(&ratio_run, (r.wall_ns - h.arm_ns) / p);
		if (i == 0) {
			char cp[160];

			base = h.base;
			snprintf(cp, sizeof(cp), "%s.log", shm);
			snprintf(logp, sizeof(logp), "%s/jump.log", tmpdir);
			rename(cp, logp);
		}
		if (i == 0 && h.batch_err)
			printf("  one batch refused (%d): armed one by one\n", h.batch_err);
		bench_add(&arm, h.arm_ns / 1e6);
		if (h.created)
			bench_add(&arm_fn, h.arm_ns / 1e3 / (double)h.created /
					   (double)l->ncmd);
	}
	bench_report("real", l->name, "arm_ms", "ms", &arm);
	bench_report("real", l->name, "arm_us_per_function", "us", &arm_fn);
	if (runs > 1) {
		size_t var = 0;

		/* ir: the last probed run's counts. */
		for (size_t i = 0; i < l->nfn; i++)
			var += jr[i].kind && ir[i].hits != jr[i].hits;
		one(l->name, "count_mismatch_jump_runs", "count", (double)var);
	}
	for (size_t i = 0; i < l->nfn; i++) {
		if (jr[i].kind == 1) {
			njump++;
		} else if (jr[i].kind == 2) {
			nint3++;
			calls3 += jr[i].hits;
		} else {
			nfail++;
		}
		calls += jr[i].hits;
	}
	one(l->name, "functions", "count", (double)l->nfn);
	one(l->name, "functions_int3", "count", (double)nint3);
	one(l->name, "functions_failed", "count", (double)nfail);
	one(l->name, "int3_share_of_functions", "fraction",
	    njump + nint3 ? (double)nint3 / (double)(njump + nint3) : 0);
	one(l->name, "calls", "count", (double)calls);
	one(l->name, "int3_share_of_calls", "fraction", calls ? (double)calls3 / (double)calls : 0);
	bench_report("real", l->name, "wall_unprobed_ms", "ms", &plain);
	bench_report("real", l->name, "wall_probed_ms", "ms", &probed);
	bench_report("real", l->name, "ratio_vs_unprobed", "x", &ratio);
	bench_report("real", l->name, "ratio_vs_unprobed_after_arming", "x", &ratio_run);
	for (size_t i = 0; i < l->nfn; i++)
		if (jr[i].err)
			printf("  not probed: %s (%d)\n", l->fn[i].name, jr[i].err);
	{
		struct reason rs[MAX_REASONS] = { 0 };
		size_t nr = reasons_read(l, logp, base, jr, rs);

		printf("  int3 probes by reason (probekit's log):\n");
		for (size_t i = 0; i < nr; i++) {
			char cas[96], sl[64];

			printf("    %5zu functions %12llu calls  %s\n", rs[i].fns,
			       (unsigned long long)rs[i].calls, rs[i].text);
			slug(sl, sizeof(sl), rs[i].text);
			snprintf(cas, sizeof(cas), "%s,int3=%s", l->name, sl);
			one(cas, "functions", "count", (double)rs[i].fns);
			one(cas, "calls", "count", (double)rs[i].calls);
		}
	}

	/* Every probe an int3 probe: the same counts. */
	if (shm_init(l, shm))
		return -1;
	r = run(l, M_INT3, 0, shm);
	t_int3 = r.wall_ns;
	outbad += r.out_differs;
	if (!r.ok || shm_read(l, shm, &h, ir)) {
		bench_skip("real", l->name, "count_mismatch_int3", "the int3-forced run failed");
	} else {
		for (size_t i = 0; i < l->nfn; i++)
			if (jr[i].kind && ir[i].hits != jr[i].hits) {
				if (mism3++ < 5)
					printf("  count differs: %s jump %llu int3 %llu\n",
					       l->fn[i].name, (unsigned long long)jr[i].hits,
					       (unsigned long long)ir[i].hits);
			}
		one(l->name, "count_mismatch_int3", "count", (double)mism3);
		one(l->name, "ratio_int3_forced_vs_unprobed", "x",
		    t_int3 / bench_median(&plain) / 1e6);
	}

	/* The same functions through kernel uprobes. */
	why = quick ? "not run with --quick (kernel uprobe events hung when two "
		      "processes used them at once)" :
	      up_none ? "not run with PKR_UPROBES=none" : tracefs_uprobes_unusable();
	if (!why && access("/usr/bin/perf", X_OK))
		why = "perf is not installed (perf stat counts the uprobes per process)";
	why = why ? why : uprobes_add(l, jr);
	if (why) {
		bench_skip("real", l->name, "ratio_uprobe_overhead_vs_probekit", why);
		bench_skip("real", l->name, "count_mismatch_uprobe", why);
	} else {
		uint64_t *cnt = calloc(l->nfn, sizeof(*cnt));
		size_t mism = 0;

		r = run(l, M_UPROBE, 0, NULL);
		outbad += r.out_differs;
		if (!cnt || !r.ok || perf_counts(l, cnt)) {
			bench_skip("real", l->name, "ratio_uprobe_overhead_vs_probekit",
				   "perf stat with the uprobe events failed");
			bench_skip("real", l->name, "count_mismatch_uprobe",
				   "perf stat with the uprobe events failed");
		} else {
			double pm = bench_median(&plain);
			struct bench_series ur = { 0 };

			for (size_t i = 0; i < l->nfn; i++)
				if (jr[i].kind && (jr[i].hits || up_all) &&
				    cnt[i] != jr[i].hits) {
					if (mism++ < 5)
						printf("  count differs: %s probekit %llu kernel %llu\n",
						       l->fn[i].name,
						       (unsigned long long)jr[i].hits,
						       (unsigned long long)cnt[i]);
				}
			one(l->name, "uprobe_functions", "count", (double)up_n);
			one(l->name, "count_mismatch_uprobe", "count", (double)mism);
			one(l->name, "wall_uprobe_ms", "ms", r.wall_ns / 1e6);
			if (r.perf_ns > 0)
				one(l->name, "wall_uprobe_perf_ms", "ms", r.perf_ns / 1e6);
			/*
			 * Only where both added times stand out of the unprobed
			 * runs' spread: a job that seldom calls the library's
			 * exported functions (xz) measures noise.
			 */
			if (bench_median(&probed) > bench_max(&plain) &&
			    r.wall_ns / 1e6 > bench_max(&plain))
				for (int i = 0; i < probed.n; i++)
					if (probed.v[i] > pm)
						bench_add(&ur, (r.wall_ns / 1e6 - pm) /
							       (probed.v[i] - pm));
			if (ur.n)
				bench_report("real", l->name, "ratio_uprobe_overhead_vs_probekit",
					     "x", &ur);
			else
				bench_skip("real", l->name, "ratio_uprobe_overhead_vs_probekit",
					   "the added time of probekit or of the uprobes is "
					   "within the unprobed runs' spread (few calls)");
		}
		free(cnt);
		uprobes_remove();
	}
	one(l->name, "output_mismatch", "count", (double)outbad);

	/* Where the int3 probes' cost comes from. */
	top_res = jr;
	for (size_t i = 0; i < l->nfn; i++)
		order[i] = i;
	qsort(order, l->nfn, sizeof(*order), cmp_hits);
	/* What the probed run's added time after arming is made of. */
	printf("  probes taking the most calls (any kind):\n");
	for (size_t i = 0, shown = 0; i < l->nfn && shown < 8; i++) {
		size_t f = order[i];

		if (!jr[f].kind || !jr[f].hits)
			continue;
		printf("    %-40s %12llu calls (%.1f %%), %s, %llu bytes\n",
		       l->fn[f].name, (unsigned long long)jr[f].hits,
		       calls ? 100.0 * (double)jr[f].hits / (double)calls : 0,
		       jr[f].kind == 2 ? "int3" : "jump",
		       (unsigned long long)l->fn[f].size);
		shown++;
	}
	printf("  int3 probes taking the most calls:\n");
	for (size_t i = 0, shown = 0; i < l->nfn && shown < 8; i++) {
		size_t f = order[i];

		if (jr[f].kind != 2 || !jr[f].hits)
			continue;
		printf("    %-40s %12llu calls (%.1f %%), %llu bytes\n", l->fn[f].name,
		       (unsigned long long)jr[f].hits,
		       calls ? 100.0 * (double)jr[f].hits / (double)calls : 0,
		       (unsigned long long)l->fn[f].size);
		shown++;
	}
	free(order);
	free(ir);
	free(jr);
	return 0;
}

static void rm_tmp(void)
{
	char cmd[128];

	uprobes_remove();
	if (tmpdir[0] && !getenv("PKR_KEEP")) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
		if (system(cmd))
			fprintf(stderr, "bench_real: could not remove %s\n", tmpdir);
	}
}

/*
 * bench_real --timed FILE CMD...: runs CMD, writes its wall time in ns to
 * FILE, exits as it did. Under perf stat: the workload's time without
 * perf's opening and closing of its events.
 */
static int timed(char **argv)
{
	double t0 = bench_now_ns();
	int status;
	pid_t pid = fork();
	FILE *f;

	if (pid == 0) {
		execvp(argv[1], argv + 1);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return 126;
	f = fopen(argv[0], "w");
	if (!f)
		return 126;
	fprintf(f, "%.0f\n", bench_now_ns() - t0);
	fclose(f);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int main(int argc, char **argv)
{
	static struct lib libs[] = {
		{ .name = "liblzma", .soname = "liblzma.so.5" },
		{ .name = "libxml2", .soname = "libxml2.so.2" },
		{ .name = "libpcre2-8", .soname = "libpcre2-8.so.0" },
		{ .name = "libstdc++", .soname = "libstdc++.so.6" },
	};
	const char *only = getenv("PKR_ONLY"), *ua = getenv("PKR_UPROBES");
	struct rlimit rl;
	int rc = 0;

	if (argc > 3 && !strcmp(argv[1], "--timed"))
		return timed(argv + 2);
	if (readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1) < 0)
		return 1;
	bench_init(argc, argv);
	quick = bench_opts.quick;
	up_all = ua && !strcmp(ua, "all");
	up_none = ua && !strcmp(ua, "none");
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/pkreal.XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	atexit(rm_tmp);
	signal(SIGINT, on_fatal);
	signal(SIGTERM, on_fatal);
	signal(SIGHUP, on_fatal);
	signal(SIGQUIT, on_fatal);
	/* perf stat opens one descriptor per event. */
	if (!getrlimit(RLIMIT_NOFILE, &rl)) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	printf("bench_real: every .dynsym function (>= 5 bytes) of a library probed "
	       "as one batch during a real workload%s\n", quick ? " (--quick)" : "");
	for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++) {
		if (only && !strstr(only, libs[i].name))
			continue;
		if (bench_lib(&libs[i]))
			rc = 1;
	}
	return rc;
}
