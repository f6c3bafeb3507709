// SPDX-License-Identifier: MIT
/* test_sig_spawn.c - posix_spawn()/system() children live with probes on what glibc's spawn child runs: int3 there is refused with -EPERM, jump probes work (issue 9, item 3). */
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>

#include "sig_common.h"

extern char **environ;

static struct pk_probe *probe_sym(const char *sym, unsigned int flags)
{
	PK_OPTS(pk_probe_opts, o, .symbol = sym, .pre = sig_count,
		.flags = flags);
	struct pk_probe *p = NULL;

	if (pk_probe_create(&o, &p))
		return NULL;
	return p;
}

/* Spawn /bin/true @n times with a dup2 file action; how many exited 0. */
static int spawn_ok(int n)
{
	char *argv[] = { "true", NULL };
	int ok = 0;

	for (int i = 0; i < n; i++) {
		posix_spawn_file_actions_t fa;
		pid_t pid;
		int st;

		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_adddup2(&fa, 2, 1);
		if (posix_spawn(&pid, "/bin/true", &fa, NULL, argv, environ) == 0 &&
		    waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
		    WEXITSTATUS(st) == 0)
			ok++;
		else if (WIFSIGNALED(st))
			fprintf(stderr, "child killed by signal %d\n", WTERMSIG(st));
		posix_spawn_file_actions_destroy(&fa);
	}
	return ok;
}

/* libc's own (a bare "sigaction" is libprobekit's interposer, first in the lookup). */
static const char *const child_fns[] = { "libc.so.6:execve", "libc.so.6:dup2",
					 "libc.so.6:sigaction",
					 "libc.so.6:sigprocmask",
					 "libc.so.6:close" };

/* In a child: a probe on each, int3 refused (or never armed), spawns live. */
static int scenario(void)
{
	int bad = 0;

	for (size_t i = 0; i < sizeof(child_fns) / sizeof(child_fns[0]); i++) {
		struct pk_probe *ip = probe_sym(child_fns[i], PK_PROBE_F_INT3);
		struct pk_probe *jp = probe_sym(child_fns[i], 0);
		int r;

		if (!ip || !jp) {
			fprintf(stderr, "%s: no probe\n", child_fns[i]);
			return 2;
		}
		r = pk_probe_register(&ip, 1);
		if (r != -EPERM) {
			fprintf(stderr, "int3 probe on %s: %d, not -EPERM\n",
				child_fns[i], r);
			bad |= 1;
			if (!r)
				pk_probe_unregister(&ip, 1);
		}
		if (spawn_ok(4) != 4)
			bad |= 2;
		/* A jump probe, where the function has room for one. */
		r = pk_probe_register(&jp, 1);
		if (r == 0) {
			if (spawn_ok(4) != 4 || system("exit 0") != 0)
				bad |= 4;
			pk_probe_unregister(&jp, 1);
		}
		pk_probe_destroy(ip);
		pk_probe_destroy(jp);
	}
	if (bad)
		fprintf(stderr, "failed checks %#x\n", bad);
	return bad;
}

int main(void)
{
	sig_expect_ok(sig_in_child(scenario),
		      "probes on glibc's spawn-child functions: spawned children live");
	return t_exit();
}
