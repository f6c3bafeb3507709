// SPDX-License-Identifier: MIT
/* test_probe_xjump.c - branches from other functions into a probe's displaced bytes (issue 9, item 3). */

/*
 * xj_first's first two instructions (7 bytes) are what a jump probe at its
 * entry would displace; other code jumps to xj_first+3, the second one:
 *   xj_jmp     jmp rel32 (2a + 1)
 *   xj_jcc8    jnz rel8 (3a + 1; 100 when a is 0)
 *   xj_jcc32   jnz rel32 (5a + 1; 100 when a is 0)
 *   xj_far     jmp rel32 from 1 KiB away (7a + 1): past a rel8's reach,
 *              found by the object's index, not the decoding near the probe
 *   (and xj_lone_far, 1 KiB away, the only branch into xj_lone+3:
 *              3a + 1; an int3 probe on xj_lone through the index alone)
 *   xj_anon()  code with no symbol and no FDE, reached through a pointer,
 *              as glibc's __mempcpy_sse2_unaligned in a stripped libc.so.6
 *              (jmp rel8: -a + 1)
 * Before the object's branch index, the entry probe was a jump probe and
 * each of them ran the middle of its jmp (on main e3216dd: an endless loop
 * in the child, killed by its alarm after 10 s); now
 * it is an int3 probe and all return the right value, and the entry's
 * handler runs for calls of xj_first only. A probe at xj_first+3 itself
 * (the destination: nothing lands after its first byte) stays a jump
 * probe and sees every path, and xj_plain, which nothing jumps into, too.
 * The calls run in a child: a crash is reported, not the test's death.
 *
 * The index is per loaded file: libxjumpa.so (nothing jumps into xj_lib_f)
 * copied to a temporary path gives a jump probe; dlclose'd, replaced there
 * by libxjumpb.so (xj_lib_g jumps to xj_lib_f+3) and loaded again, most
 * likely at the same address, it must give an int3 probe and run.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>

#include "harness.h"

long xj_first(long a);
long xj_jmp(long a);
long xj_jcc8(long a);
long xj_jcc32(long a);
long xj_plain(long a);
long xj_far(long a);
long xj_lone(long a);
long xj_lone_far(long a);
extern long (*const xj_anon_ptr)(long a);

__asm__(".text\n"
	".globl xj_first\n.type xj_first,@function\n"
	"xj_first:\n"
	"	mov %rdi, %rax\n"		/* 3 bytes */
	".Lxj_first3:\n"
	"	add $1, %rax\n"			/* 4 bytes: the jump's 5th */
	"	ret\n"
	".size xj_first, .-xj_first\n"
	".globl xj_jmp\n.type xj_jmp,@function\n"
	"xj_jmp:\n"
	"	lea (%rdi,%rdi,1), %rax\n"
	"	{disp32} jmp .Lxj_first3\n"
	".size xj_jmp, .-xj_jmp\n"
	".globl xj_jcc8\n.type xj_jcc8,@function\n"
	"xj_jcc8:\n"
	"	lea (%rdi,%rdi,2), %rax\n"
	"	test %rdi, %rdi\n"
	"	jnz .Lxj_first3\n"
	"	mov $100, %eax\n"
	"	ret\n"
	".size xj_jcc8, .-xj_jcc8\n"
	".globl xj_jcc32\n.type xj_jcc32,@function\n"
	"xj_jcc32:\n"
	"	lea (%rdi,%rdi,4), %rax\n"
	"	test %rdi, %rdi\n"
	"	{disp32} jnz .Lxj_first3\n"
	"	mov $100, %eax\n"
	"	ret\n"
	".size xj_jcc32, .-xj_jcc32\n"
	/* No symbol, no .cfi: only the decoding of the gap finds it. */
	".Lxj_anon:\n"
	"	mov %rdi, %rax\n"
	"	neg %rax\n"
	"	jmp .Lxj_first3\n"
	"	.p2align 4\n"
	".globl xj_plain\n.type xj_plain,@function\n"
	"xj_plain:\n"
	"	mov %rdi, %rax\n"
	"	add $2, %rax\n"
	"	ret\n"
	".size xj_plain, .-xj_plain\n"
	".globl xj_lone\n.type xj_lone,@function\n"
	"xj_lone:\n"
	"	mov %rdi, %rax\n"
	".Lxj_lone3:\n"
	"	add $1, %rax\n"
	"	ret\n"
	".size xj_lone, .-xj_lone\n"
	"	.p2align 4\n"
	"	.skip 1024, 0xcc\n"
	".globl xj_far\n.type xj_far,@function\n"
	"xj_far:\n"
	"	imul $7, %rdi, %rax\n"
	"	jmp .Lxj_first3\n"
	".size xj_far, .-xj_far\n"
	".globl xj_lone_far\n.type xj_lone_far,@function\n"
	"xj_lone_far:\n"
	"	lea (%rdi,%rdi,2), %rax\n"
	"	jmp .Lxj_lone3\n"
	".size xj_lone_far, .-xj_lone_far\n"
	".section .data.rel.ro,\"aw\"\n"
	".globl xj_anon_ptr\n.type xj_anon_ptr,@object\n"
	"xj_anon_ptr:\n"
	"	.quad .Lxj_anon\n"
	".size xj_anon_ptr, 8\n"
	".text\n");

static volatile unsigned long hits[3];

static void on_pre(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)p;
	(void)r;
	hits[(uintptr_t)ctx]++;
}

static int create(void *addr, size_t off, uintptr_t slot, struct pk_probe **out)
{
	PK_OPTS(pk_probe_opts, o, .addr = addr, .offset = off, .pre = on_pre,
		.ctx = (void *)slot);

	*out = NULL;
	return pk_probe_create(&o, out);
}

static int kind_of(struct pk_probe *p)
{
	struct pk_probe_info info = { .sz = sizeof(info) };

	if (pk_probe_get_info(p, &info))
		return -1;
	return info.kind;
}

/* In a child: every path gives its value; hits as expected. */
static int run_paths(void)
{
	int bad = 0;

	hits[0] = hits[1] = hits[2] = 0;
	bad |= xj_first(5) != 6;
	bad |= xj_jmp(5) != 11;
	bad |= xj_jcc8(5) != 16;
	bad |= xj_jcc8(0) != 100;
	bad |= xj_jcc32(5) != 26;
	bad |= xj_jcc32(0) != 100;
	bad |= xj_anon_ptr(5) != -4;
	bad |= xj_plain(5) != 7;
	bad |= xj_far(5) != 36;
	if (bad)
		fprintf(stderr, "a path returned a wrong value\n");
	/* The entry: xj_first once; +3: every path but the two jcc fall-throughs. */
	if (hits[0] != 1 || hits[1] != 6 || hits[2] != 1) {
		fprintf(stderr, "hits: entry %lu (want 1), +3 %lu (want 6), "
			"xj_plain %lu (want 1)\n", hits[0], hits[1], hits[2]);
		bad = 1;
	}
	return bad;
}

/* Run run_paths() in a child; its exit code, or 128 + the signal. */
static int in_child(void)
{
	int st;
	pid_t pid = fork();

	if (pid == 0) {
		alarm(10);	/* a jump into a jmp's middle may spin forever */
		_exit(run_paths());
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return -1;
	if (WIFSIGNALED(st)) {
		fprintf(stderr, "the child died of signal %d (%s)\n",
			WTERMSIG(st), strsignal(WTERMSIG(st)));
		return 128 + WTERMSIG(st);
	}
	return WEXITSTATUS(st);
}

static void test_foreign_jumps(void)
{
	struct pk_probe *p[3];

	if (!ASSERT_OK(create((void *)xj_first, 0, 0, &p[0]), "entry probe") ||
	    !ASSERT_OK(create((void *)xj_first, 3, 1, &p[1]), "probe at +3") ||
	    !ASSERT_OK(create((void *)xj_plain, 0, 2, &p[2]), "plain probe"))
		goto out;
	/* Branches land at +3, inside the entry's 7 displaced bytes. */
	ASSERT_EQ(kind_of(p[0]), PK_PROBE_INT3, "entry: an int3 probe");
	/* At +3 they land on the first byte: nothing to refuse. */
	ASSERT_EQ(kind_of(p[1]), PK_PROBE_JUMP, "+3: a jump probe");
	ASSERT_EQ(kind_of(p[2]), PK_PROBE_JUMP, "nothing jumps into xj_plain");
	/* +3 first: the entry's int3 leaves its bytes alone. */
	if (!ASSERT_OK(pk_probe_register(&p[1], 1), "register +3") ||
	    !ASSERT_OK(pk_probe_register(&p[0], 1), "register entry")) {
		pk_probe_unregister(&p[1], 1);
		goto out;
	}
	if (ASSERT_OK(pk_probe_register(&p[2], 1), "register plain")) {
		ASSERT_EQ(in_child(), 0, "every path, probed (child's status)");
		ASSERT_OK(pk_probe_unregister(&p[2], 1), "unregister plain");
	}
	ASSERT_OK(pk_probe_unregister(&p[0], 1), "unregister entry");
	ASSERT_OK(pk_probe_unregister(&p[1], 1), "unregister +3");
	/* Unprobed: the same values (the hits stay 0: the child says so). */
	ASSERT_EQ(xj_first(5) + xj_jmp(5) + xj_anon_ptr(5), 6 + 11 - 4,
		  "unprobed values");
out:
	for (int i = 0; i < 3; i++)
		pk_probe_destroy(p[i]);
}

/* The entry probe alone, registered before anything else (main's crash). */
static void test_entry_alone(void)
{
	struct pk_probe *p;
	int st;

	if (!ASSERT_OK(create((void *)xj_first, 0, 0, &p), "entry probe"))
		return;
	if (ASSERT_OK(pk_probe_register(&p, 1), "register")) {
		pid_t pid = fork();

		if (pid == 0) {
			alarm(10);
			hits[0] = 0;
			_exit(xj_jmp(5) != 11 || xj_jcc32(7) != 36 ||
			      xj_anon_ptr(9) != -8 || xj_first(1) != 2 ||
			      xj_far(1) != 8 ||
			      hits[0] != 1);
		}
		ASSERT_EQ(waitpid(pid, &st, 0), pid, "waitpid");
		if (WIFSIGNALED(st))
			fprintf(stderr, "the child died of signal %d (%s)\n",
				WTERMSIG(st), strsignal(WTERMSIG(st)));
		ASSERT_TRUE(WIFEXITED(st) && !WEXITSTATUS(st),
			    "foreign jumps into an entry-probed function");
		ASSERT_OK(pk_probe_unregister(&p, 1), "unregister");
	}
	pk_probe_destroy(p);
}

static int copy_file(const char *from, const char *to)
{
	char tmp[4200], buf[65536];
	int in = open(from, O_RDONLY | O_CLOEXEC), out, ok = in >= 0;
	ssize_t n;

	snprintf(tmp, sizeof(tmp), "%s.new", to);
	out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	ok = ok && out >= 0;
	while (ok && (n = read(in, buf, sizeof(buf))) > 0)
		ok = write(out, buf, (size_t)n) == n;
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	/* A new inode under the old name, as a package upgrade makes. */
	return ok && !rename(tmp, to) ? 0 : -1;
}

/* Probe xj_lib_f of the library at @path: its kind; xj_lib_g(5), probed. */
static int lib_kind(const char *path, uintptr_t *base, long *g5)
{
	struct pk_probe *p;
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	void *f, *g;
	int kind = -1, st;

	if (!ASSERT_TRUE(h, "dlopen the copy"))
		return -1;
	f = dlsym(h, "xj_lib_f");
	g = dlsym(h, "xj_lib_g");
	*base = (uintptr_t)f;
	if (ASSERT_TRUE(f && g, "dlsym") &&
	    ASSERT_OK(create(f, 0, 0, &p), "probe xj_lib_f")) {
		kind = kind_of(p);
		if (ASSERT_OK(pk_probe_register(&p, 1), "register")) {
			pid_t pid = fork();

			if (pid == 0) {
				alarm(10);
				_exit((int)((long (*)(long))g)(5) & 0x7f);
			}
			ASSERT_EQ(waitpid(pid, &st, 0), pid, "waitpid");
			*g5 = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
			if (WIFSIGNALED(st))
				fprintf(stderr, "the child died of signal %d (%s)\n",
					WTERMSIG(st), strsignal(WTERMSIG(st)));
			ASSERT_OK(pk_probe_unregister(&p, 1), "unregister");
		}
		pk_probe_destroy(p);
	}
	dlclose(h);
	return kind;
}

/* Only a rel32 from afar lands in xj_lone's displaced bytes. */
static void test_far_only(void)
{
	struct pk_probe *p;
	int st;

	if (!ASSERT_OK(create((void *)xj_lone, 0, 0, &p), "probe xj_lone"))
		return;
	ASSERT_EQ(kind_of(p), PK_PROBE_INT3, "xj_lone: an int3 probe");
	if (ASSERT_OK(pk_probe_register(&p, 1), "register")) {
		pid_t pid = fork();

		if (pid == 0) {
			alarm(10);
			hits[0] = 0;
			_exit(xj_lone_far(5) != 16 || xj_lone(5) != 6 ||
			      hits[0] != 1);
		}
		ASSERT_EQ(waitpid(pid, &st, 0), pid, "waitpid");
		if (WIFSIGNALED(st))
			fprintf(stderr, "the child died of signal %d (%s)\n",
				WTERMSIG(st), strsignal(WTERMSIG(st)));
		ASSERT_TRUE(WIFEXITED(st) && !WEXITSTATUS(st),
			    "a jump from 1 KiB into xj_lone+3");
		ASSERT_OK(pk_probe_unregister(&p, 1), "unregister");
	}
	pk_probe_destroy(p);
}

static void test_reload(void)
{
	const char *dir = getenv("PK_TARGET_DIR");
	char a[4096], b[4096], tmpl[] = "/tmp/pk_xjump.XXXXXX", path[4200];
	uintptr_t base_a = 0, base_b = 0;
	long g = 0;

	if (!dir) {
		printf("reload: PK_TARGET_DIR not set (run through ctest): not run\n");
		return;
	}
	snprintf(a, sizeof(a), "%s/libxjumpa.so", dir);
	snprintf(b, sizeof(b), "%s/libxjumpb.so", dir);
	if (!ASSERT_TRUE(mkdtemp(tmpl), "mkdtemp"))
		return;
	snprintf(path, sizeof(path), "%s/libxjump.so", tmpl);
	if (ASSERT_OK(copy_file(a, path), "copy libxjumpa.so")) {
		ASSERT_EQ(lib_kind(path, &base_a, &g), PK_PROBE_JUMP,
			  "libxjumpa: a jump probe");
		ASSERT_EQ(g, 10, "libxjumpa: xj_lib_g(5), in a child");
	}
	if (ASSERT_OK(copy_file(b, path), "replace it by libxjumpb.so")) {
		ASSERT_EQ(lib_kind(path, &base_b, &g), PK_PROBE_INT3,
			  "libxjumpb, same path: an int3 probe");
		ASSERT_EQ(g, 11, "libxjumpb: xj_lib_g(5) through xj_lib_f+3, "
			  "in a child");
	}
	printf("reload: xj_lib_f at %#lx, then at %#lx (%s)\n",
	       (unsigned long)base_a, (unsigned long)base_b,
	       base_a == base_b ? "same address" : "moved");
	unlink(path);
	rmdir(tmpl);
}

/*
 * The file at the loaded path replaced while the library stays loaded
 * (rename() over it, as a package upgrade does): the index must come from
 * the mapped file or from none. libxjumpb.so is loaded (xj_lib_g jumps to
 * xj_lib_f+3); the path then names libxjumpa.so, in which nothing does.
 * Both are linked without a build id (tests/extra.cmake), so only the
 * mapping's device and inode can tell them apart.
 */
static void test_replaced_while_loaded(void)
{
	const char *dir = getenv("PK_TARGET_DIR");
	char a[4096], b[4096], tmpl[] = "/tmp/pk_xjump.XXXXXX", path[4200],
	     next[4200];
	struct pk_probe *p;
	void *h, *f;

	if (!dir) {
		printf("replaced: PK_TARGET_DIR not set (run through ctest): not run\n");
		return;
	}
	snprintf(a, sizeof(a), "%s/libxjumpa.so", dir);
	snprintf(b, sizeof(b), "%s/libxjumpb.so", dir);
	if (!ASSERT_TRUE(mkdtemp(tmpl), "mkdtemp"))
		return;
	snprintf(path, sizeof(path), "%s/libxjumpr.so", tmpl);
	snprintf(next, sizeof(next), "%s/libxjumpr.so.new", tmpl);
	if (!ASSERT_OK(copy_file(b, path), "copy libxjumpb.so"))
		goto out;
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!ASSERT_TRUE(h, "dlopen it"))
		goto out;
	f = dlsym(h, "xj_lib_f");
	if (ASSERT_OK(copy_file(a, next), "copy libxjumpa.so") &&
	    ASSERT_OK(rename(next, path), "rename it over the loaded file") &&
	    ASSERT_TRUE(f, "dlsym") &&
	    ASSERT_OK(create(f, 0, 0, &p), "probe the loaded xj_lib_f")) {
		ASSERT_EQ(kind_of(p), PK_PROBE_INT3,
			  "the loaded libxjumpb's xj_lib_f: an int3 probe");
		pk_probe_destroy(p);
	}
	dlclose(h);
out:
	unlink(path);
	unlink(next);
	rmdir(tmpl);
}

int main(void)
{
	pk_set_log(t_quiet_log, NULL);
	test_entry_alone();
	test_foreign_jumps();
	test_far_only();
	test_reload();
	test_replaced_while_loaded();
	return t_exit();
}
