// SPDX-License-Identifier: MIT
/* test_place_reach.c - a probe at every instruction boundary of functions entered where no branch names it: computed gotos through memory, C++ landing pads, another function's jump table (review of issue 12's jump probes). */

/*
 * For each function below: a probe at each of its instruction boundaries
 * in turn (jump where placement says it is safe, int3 otherwise), armed,
 * the function run on every case and compared with its unprobed results,
 * then removed. Each function in a child of its own: a crash is reported
 * with the offset being tried. What each checks (all wrong on main
 * f504f86, where a jump probe was judged safe):
 *   cgoto_stack, cgoto_tls (tests/targets/place_cases.c, every
 *       compiled variant): &&label + int32 offset, stored and reloaded
 *       (the jmp reads a stack or thread-local word): a probe displacing a
 *       label ran the middle of its jmp (SIGILL) or computed garbage
 *   peh_catch (tests/targets/place_eh.cc, g++ -O2): the catch's landing
 *       pad right after a ret; the unwinder jumps there
 *   pr_cold (below): f.cold-shaped code entered at +2 by pr_hot's jump
 *       table, which no function's scan of pr_cold reads
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <signal.h>
#include <stdint.h>

#include "harness.h"
#include "place_cases.h"

long pr_hot(long x, unsigned long k);

__asm__(".text\n"
	".globl pr_hot\n.type pr_hot,@function\n"
	"pr_hot:\n"
	"	cmp $2, %rsi\n"
	"	ja 9f\n"
	"	lea .Lpr_tbl(%rip), %rcx\n"
	"	movslq (%rcx,%rsi,4), %rdx\n"
	"	add %rcx, %rdx\n"
	"	mov %rdi, %rax\n"
	"	jmp *%rdx\n"
	"9:	xor %eax, %eax\n"
	"	ret\n"
	"8:	mov $10, %eax\n"
	"	ret\n"
	".size pr_hot, .-pr_hot\n"
	".section .rodata\n"
	".p2align 2\n"
	".Lpr_tbl: .long 8b-.Lpr_tbl, pr_cold-.Lpr_tbl, .Lpr_c2-.Lpr_tbl\n"
	".section .text.unlikely,\"ax\",@progbits\n"
	".globl pr_cold\n.type pr_cold,@function\n"
	"pr_cold:\n"
	"	xor %eax, %eax\n"
	".Lpr_c2:\n"				/* +2: case 2 */
	"	add $1, %rax\n"
	"	add $100, %rax\n"
	"	ret\n"
	".size pr_cold, .-pr_cold\n"
	".text\n");

static int pr_run(int k, int x)
{
	return (int)pr_hot(x, (unsigned long)k % 4);
}

#define RUNS 12
#define NK 12

struct reach {
	char name[64];
	void *fn;
	size_t size;
	int (*run)(int k, int x);
	int k0, nk;	/* run(k, x) for k in [k0, k0 + nk) */
};

static volatile unsigned long hits;

static void on_pre(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)p;
	(void)r;
	(void)ctx;
	hits++;
}

/* Offsets between boundaries are refused: not worth a line each. */
static void on_log(enum pk_log_level level, const char *msg, void *ctx)
{
	(void)ctx;
	if (level <= PK_LOG_WARN && !strstr(msg, "not an instruction boundary"))
		fprintf(stderr, "probekit: %s\n", msg);
}

/* In a child: every boundary of @r; the number of wrong results. */
static int reach_all(const struct reach *r)
{
	int ref[NK][RUNS], bad = 0, jumps = 0, int3s = 0;

	for (int k = 0; k < r->nk; k++)
		for (int x = 0; x < RUNS; x++)
			ref[k][x] = r->run(r->k0 + k, x);
	for (size_t off = 0; off < r->size; off++) {
		PK_OPTS(pk_probe_opts, o, .addr = r->fn, .offset = off,
			.pre = on_pre);
		struct pk_probe_info info = { .sz = sizeof(info) };
		struct pk_probe *p = NULL;
		int err = pk_probe_create(&o, &p);

		/* Not a boundary; or no probe at all (a TLS call sequence). */
		if (err == -EINVAL || err == -ENOTSUP)
			continue;
		if (err) {
			fprintf(stderr, "%s+%zu: create %d\n", r->name, off, err);
			bad++;
			continue;
		}
		pk_probe_get_info(p, &info);
		printf("%s+%zu: kind %d reason %d\n", r->name, off, info.kind,
		       info.reason);
		fflush(stdout);
		info.kind == PK_PROBE_JUMP ? jumps++ : int3s++;
		if (pk_probe_register(&p, 1)) {
			fprintf(stderr, "%s+%zu: register failed\n", r->name, off);
			bad++;
		} else {
			for (int k = 0; k < r->nk; k++)
				for (int x = 0; x < RUNS; x++)
					if (r->run(r->k0 + k, x) != ref[k][x]) {
						fprintf(stderr, "%s+%zu: case %d "
							"x %d: %d, unprobed %d\n",
							r->name, off, r->k0 + k,
							x, r->run(r->k0 + k, x),
							ref[k][x]);
						bad++;
					}
			pk_probe_unregister(&p, 1);
		}
		pk_probe_destroy(p);
	}
	printf("%s: %d jump, %d int3 probe points, %d wrong\n", r->name,
	       jumps, int3s, bad);
	return bad;
}

static void check(const struct reach *r)
{
	pid_t pid;
	int st = 0;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		int bad;

		alarm(60);	/* a probe that loops the function: a failure */
		bad = reach_all(r);

		fflush(stdout);
		_exit(bad ? 1 : 0);
	}
	if (!ASSERT_TRUE(pid > 0, "fork"))
		return;
	waitpid(pid, &st, 0);
	if (WIFSIGNALED(st))
		fprintf(stderr, "%s: killed by signal %d (the last offset "
			"printed)\n", r->name, WTERMSIG(st));
	ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0, r->name);
}

/* The function at @fn's size from its dynamic symbol, or 0. */
static size_t sym_size(void *fn)
{
	const ElfW(Sym) *s = NULL;
	Dl_info di;

	if (!dladdr1(fn, &di, (void **)&s, RTLD_DL_SYMENT) || !s ||
	    di.dli_saddr != fn)
		return 0;
	return s->st_size;
}

int main(void)
{
	const char *dir = getenv("PK_TARGET_DIR");
	char path[1024];
	struct reach r;
	void *h;

	pk_set_log(on_log, NULL);
	/* Computed gotos through memory, as every compiled variant has them. */
	for (size_t i = 0; i < PC_NVARIANTS; i++) {
		struct pc_variant *v = &pc_variants[i];

		if (pc_load(v)) {
			printf("%s: not built here (no clang?): skipped\n", v->name);
			continue;
		}
		for (size_t k = 0; k < PC_N; k++) {
			if (strncmp(pc_names[k], "cgoto_", 6))
				continue;
			memset(&r, 0, sizeof(r));
			snprintf(r.name, sizeof(r.name), "%s:%s", v->name,
				 pc_names[k]);
			r.fn = v->fn[k];
			r.size = sym_size(r.fn);
			r.run = v->run;
			r.k0 = (int)k;
			r.nk = 1;
			if (ASSERT_TRUE(r.size, r.name))
				check(&r);
		}
	}
	/* A C++ landing pad right after a ret. */
	snprintf(path, sizeof(path), "%s/libplace_eh.so", dir ? dir : ".");
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (ASSERT_TRUE(h, path)) {
		memset(&r, 0, sizeof(r));
		snprintf(r.name, sizeof(r.name), "peh_catch");
		r.fn = dlsym(h, "peh_catch");
		*(void **)&r.run = dlsym(h, "peh_run");
		r.size = r.fn ? sym_size(r.fn) : 0;
		r.nk = 1;
		if (ASSERT_TRUE(r.fn && r.run && r.size, "peh_catch found"))
			check(&r);
	}
	/* Another function's jump table into this one. */
	memset(&r, 0, sizeof(r));
	snprintf(r.name, sizeof(r.name), "pr_cold");
	r.fn = dlsym(RTLD_DEFAULT, "pr_cold");
	r.size = r.fn ? sym_size(r.fn) : 0;
	r.run = pr_run;
	r.nk = 4;
	if (ASSERT_TRUE(r.fn && r.size, "pr_cold found (-rdynamic)"))
		check(&r);
	return t_exit();
}
