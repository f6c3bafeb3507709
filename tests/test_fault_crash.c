// SPDX-License-Identifier: MIT
/* test_fault_crash.c - crashes with probekit armed: a stack overflow reaches the die chain on the alternate stack; a crash dumps core. */
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probekit.h"
#include "harness.h"

static int pipe_w;

static int on_die(struct pk_notifier *nb, unsigned long sig, void *data)
{
	(void)nb;
	(void)data;
	if (sig == SIGSEGV)
		(void)!write(pipe_w, "d", 1);	/* async-signal-safe */
	return PK_DONE;
}

static struct pk_notifier die_nb = { .call = on_die };

static volatile int forever = 1;

__attribute__((noinline)) static int recurse(volatile char *prev)
{
	volatile char buf[1024];

	buf[0] = prev ? prev[0] + 1 : 0;
	if (!forever)
		return 0;
	return recurse(buf) + buf[1];
}

static int on_fault(const struct pk_fault *f, void *ctx)
{
	(void)f;
	(void)ctx;
	return PK_FAULT_UNHANDLED;
}

/* A crash in a range whose handler declines: the core-dump flag is set. */
static void test_core(void)
{
	char dir[] = "/tmp/pk-core-XXXXXX";
	struct rlimit rl;
	int status = 0;
	pid_t pid;

	getrlimit(RLIMIT_CORE, &rl);
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < (64 << 20)) {
		printf("core dumps not allowed here (hard limit %lu): not checked\n",
		       (unsigned long)rl.rlim_max);
		return;
	}
	if (!mkdtemp(dir))
		return;
	pid = fork();
	if (pid == 0) {
		long page = sysconf(_SC_PAGESIZE);
		char *p = mmap(NULL, (size_t)page, PROT_NONE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_CORE, &rl);
		if (chdir(dir) || pk_fault_register(p, (size_t)page, on_fault,
						    NULL))
			_exit(2);
		*(volatile char *)p = 1;
		_exit(3);
	}
	waitpid(pid, &status, 0);
	ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV,
		    "declined fault: killed by SIGSEGV");
	/* Where core_pattern pipes cores elsewhere, the flag is still set. */
	ASSERT_TRUE(WIFSIGNALED(status) && WCOREDUMP(status),
		    "with the core-dump flag");
	{
		DIR *d = opendir(dir);
		struct dirent *de;

		while (d && (de = readdir(d)))
			if (de->d_name[0] != '.' &&
			    unlinkat(dirfd(d), de->d_name, 0))
				break;
		if (d)
			closedir(d);
		rmdir(dir);
	}
}

int main(void)
{
	int fds[2], status = 0;
	char c = 0;
	pid_t pid;

	if (pipe(fds))
		SKIP("pipe");
#ifdef __SANITIZE_ADDRESS__
	/* ASan's own stack-overflow report runs before ours; cores are fine. */
	test_core();
	return t_exit();
#endif
	pid = fork();
	if (pid == 0) {
		struct rlimit rl = { 0, 0 };

		setrlimit(RLIMIT_CORE, &rl);
		close(fds[0]);
		pipe_w = fds[1];
		if (pk_thread_altstack(0) || pk_die_register(&die_nb))
			_exit(2);
		recurse(NULL);
		_exit(3);
	}
	close(fds[1]);
	waitpid(pid, &status, 0);
	ASSERT_TRUE(WIFSIGNALED(status), "child killed by a signal");
	ASSERT_EQ(WIFSIGNALED(status) ? WTERMSIG(status) : status, SIGSEGV,
		  "by SIGSEGV");
	ASSERT_EQ(read(fds[0], &c, 1), 1, "die handler ran on the alternate stack");
	ASSERT_EQ(c, 'd', "its message");
	test_core();
	return t_exit();
}
