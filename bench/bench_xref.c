// SPDX-License-Identifier: MIT
/* bench_xref.c - building the branch-destination index a jump probe's placement checks (probe/xref.h), on the largest objects here. */

/*
 * xref / OBJECT / build_ms      pk_xref_build() on the object's file: read
 *                               (mmap) its symbols, .eh_frame_hdr and
 *                               executable sections, scan every byte for a
 *                               rel32 branch's opcode, sort, deduplicate;
 *                               wall time (the file's pages read in
 *                               included: warm after the first run)
 * xref / OBJECT / build_cpu_ms  the same in this thread's CPU time, which
 *                               the machine's other load does not inflate
 * xref / OBJECT / bytes         what the index keeps afterwards
 * xref / OBJECT / peak_bytes    the most its building held at once (the
 *                               file's mapping not counted)
 * xref / OBJECT / text_mb, functions (start points), targets: its size, so
 *                               that a figure can be scaled to another
 *                               object (libxul: ~100k functions, ~100 MB)
 * xref / libc / check_us        pk_xref_lands_in() on memcpy, index cached:
 *                               what every jump probe's placement now pays
 *                               (stat, binary search, open, read and decode
 *                               the code within 130 bytes)
 * xref / libc / check_cpu_us    the same in this thread's CPU time (the
 *                               system calls included)
 * xref / libc / check_all_us    the CPU time of one check at the entry of
 *                               each function libc's .dynsym names (size
 *                               5 or more), its median over them: the
 *                               decoding starts at the previous start
 *                               point, so a check costs more after a long
 *                               function
 * xref / libc / check_max_us    the same, the costliest function's
 *
 * OBJECT: libc (libc.so.6), libstdc++ (libstdc++.so.6), and largest: the
 * largest regular file named *.so* under /usr/lib/x86_64-linux-gnu (its
 * name is printed; libLLVM on a machine with LLVM installed). The index is
 * a hidden function: this program links the static library.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <link.h>
#include <stdlib.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "bench.h"
#include "probe/xref.h"

#define LIBDIR "/usr/lib/x86_64-linux-gnu"

/* This thread's CPU time: the machine's other load left out. */
static double cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int largest_so(char *path, size_t cap)
{
	DIR *d = opendir(LIBDIR);
	struct dirent *de;
	off_t best = 0;

	if (!d)
		return -1;
	while ((de = readdir(d))) {
		char p[PATH_MAX];
		struct stat st;

		if (!strstr(de->d_name, ".so"))
			continue;
		snprintf(p, sizeof(p), "%s/%s", LIBDIR, de->d_name);
		if (lstat(p, &st) || !S_ISREG(st.st_mode) || st.st_size <= best)
			continue;
		best = st.st_size;
		snprintf(path, cap, "%s", p);
	}
	closedir(d);
	return best ? 0 : -1;
}

static void skip_all(const char *cas, const char *why)
{
	static const char *const m[] = { "build_ms", "build_cpu_ms", "bytes",
					  "peak_bytes" };

	for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++)
		bench_skip("xref", cas, m[i], why);
}

static void one(const char *cas, const char *path, int runs)
{
	struct bench_series ms = { 0 }, cpu = { 0 }, bytes = { 0 }, peak = { 0 },
			    text = { 0 }, funcs = { 0 }, targets = { 0 };
	struct pk_xref_stats st;

	for (int r = 0; r < runs; r++) {
		struct pk_xref *x;
		double t0 = bench_now_ns(), c0 = cpu_ns();
		int err = pk_xref_build(path, 0, &x);

		if (err) {
			char why[PATH_MAX + 64];

			snprintf(why, sizeof(why), "%s: pk_xref_build %d", path, err);
			skip_all(cas, why);
			return;
		}
		bench_add(&ms, (bench_now_ns() - t0) / 1e6);
		bench_add(&cpu, (cpu_ns() - c0) / 1e6);
		pk_xref_get_stats(x, &st);
		bench_add(&bytes, (double)st.bytes);
		bench_add(&peak, (double)st.peak_bytes);
		bench_add(&text, st.text_bytes / 1e6);
		bench_add(&funcs, (double)st.starts);
		bench_add(&targets, (double)st.targets);
		pk_xref_free(x);
	}
	printf("  %s: %s (%zu rel32 candidates into its code)\n", cas, path,
	       st.branches);
	bench_report("xref", cas, "build_ms", "ms", &ms);
	bench_report("xref", cas, "build_cpu_ms", "ms", &cpu);
	bench_report("xref", cas, "bytes", "B", &bytes);
	bench_report("xref", cas, "peak_bytes", "B", &peak);
	bench_report("xref", cas, "text_mb", "MB", &text);
	bench_report("xref", cas, "functions", "n", &funcs);
	bench_report("xref", cas, "targets", "n", &targets);
}

static int libc_bias(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	if (!info->dlpi_name || !strstr(info->dlpi_name, "/libc.so.6"))
		return 0;
	*(uintptr_t *)arg = info->dlpi_addr;
	return 1;
}

static int dbl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* One check at every libc function's entry: the median and the costliest. */
static void check_all(int runs)
{
	struct bench_series med = { 0 }, max = { 0 };
	uintptr_t bias = 0, *fn = NULL, worst = 0;
	size_t nfn = 0, cap = 0;
	Dl_info di;
	Elf_Scn *scn = NULL;
	double *t;
	int fd;
	Elf *e;

	dl_iterate_phdr(libc_bias, &bias);
	fd = open(LIBDIR "/libc.so.6", O_RDONLY | O_CLOEXEC);
	elf_version(EV_CURRENT);
	e = fd < 0 ? NULL : elf_begin(fd, ELF_C_READ_MMAP, NULL);
	while (e && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM ||
		    !sh.sh_entsize || !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;

			if (!gelf_getsym(d, (int)i, &sym) ||
			    GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
			    sym.st_shndx == SHN_UNDEF || sym.st_size < 5)
				continue;
			if (nfn == cap) {
				cap = cap ? 2 * cap : 1024;
				fn = realloc(fn, cap * sizeof(*fn));
				if (!fn)
					abort();
			}
			fn[nfn++] = bias + sym.st_value;
		}
	}
	elf_end(e);
	if (fd >= 0)
		close(fd);
	t = nfn && bias ? malloc(nfn * sizeof(*t)) : NULL;
	if (!t) {
		bench_skip("xref", "libc", "check_all_us", "libc's functions not found");
		bench_skip("xref", "libc", "check_max_us", "libc's functions not found");
		free(fn);
		return;
	}
	for (int r = 0; r < runs; r++) {
		double most = 0;

		for (size_t i = 0; i < nfn; i++) {
			uintptr_t at;
			double c0 = cpu_ns();

			bench_keep(pk_xref_lands_in(fn[i], 5, &at));
			t[i] = (cpu_ns() - c0) / 1e3;
			if (t[i] > most) {
				most = t[i];
				worst = fn[i];
			}
		}
		qsort(t, nfn, sizeof(*t), dbl_cmp);
		bench_add(&med, t[nfn / 2]);
		bench_add(&max, t[nfn - 1]);
	}
	printf("  libc: %zu functions checked at their entry, the costliest "
	       "at %s\n", nfn, dladdr((void *)worst, &di) && di.dli_sname ?
				 di.dli_sname : "?");
	bench_report("xref", "libc", "check_all_us", "us", &med);
	bench_report("xref", "libc", "check_max_us", "us", &max);
	free(t);
	free(fn);
}

static void check(int runs)
{
	struct bench_series us = { 0 }, cpu = { 0 };
	void *fn = dlsym(RTLD_DEFAULT, "memcpy");
	uintptr_t at;
	int n = bench_opts.quick ? 200 : 2000;

	if (!fn || pk_xref_lands_in((uintptr_t)fn, 5, &at) < 0) {
		bench_skip("xref", "libc", "check_us", "no index of libc here");
		return;
	}
	for (int r = 0; r < runs; r++) {
		double t0 = bench_now_ns(), c0 = cpu_ns();

		for (int i = 0; i < n; i++)
			bench_keep(pk_xref_lands_in((uintptr_t)fn, 5, &at));
		bench_add(&us, (bench_now_ns() - t0) / 1e3 / n);
		bench_add(&cpu, (cpu_ns() - c0) / 1e3 / n);
	}
	bench_report("xref", "libc", "check_us", "us", &us);
	bench_report("xref", "libc", "check_cpu_us", "us", &cpu);
	check_all(bench_opts.quick ? 1 : 3);
}

int main(int argc, char **argv)
{
	char big[PATH_MAX];
	int runs;

	bench_init(argc, argv);
	runs = bench_opts.quick ? 1 : bench_opts.runs;
	one("libc", LIBDIR "/libc.so.6", bench_opts.runs);
	one("libstdc++", LIBDIR "/libstdc++.so.6", bench_opts.runs);
	if (largest_so(big, sizeof(big))) {
		skip_all("largest", "no .so in " LIBDIR);
	} else {
		one("largest", big, runs);
	}
	check(bench_opts.runs);
	return 0;
}
