// SPDX-License-Identifier: MIT
/* test_text_fork.c - fork while another thread commits: the child runs and patches correctly. */
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probekit.h"
#include "harness.h"
#include "codegen.h"

static struct cg busy, quiet;
static volatile int stop;

static void *patcher(void *arg)
{
	uint8_t old[5], nw[5];
	int state = 0;

	(void)arg;
	while (!stop) {
		struct pk_batch *b;

		state = !state;
		if (pk_batch_create(&b))
			break;
		for (size_t i = 0; i < busy.n; i++) {
			cg_site_bytes(&busy, i, !state, old);
			cg_site_bytes(&busy, i, state, nw);
			pk_batch_add(b, cg_fn(&busy, i), nw, 5, old, 0);
		}
		pk_batch_commit(b);
		pk_batch_free(b);
	}
	return NULL;
}

/* In the child: code runs, and a commit patches the child alone. */
static int child(void)
{
	uint8_t on[5], off[5];
	int bad = 0;

	for (size_t i = 0; i < busy.n; i++) {
		uint32_t v = cg_call(&busy, i);

		bad += v != cg_val(i, 0) && v != cg_val(i, 1);
	}
	cg_site_bytes(&quiet, 0, 1, on);
	cg_site_bytes(&quiet, 0, 0, off);
	if (pk_text_poke(cg_fn(&quiet, 0), on, 5, off, 0) != 1)
		return 2;
	if (cg_call(&quiet, 0) != cg_val(0, 1))
		return 3;
	return bad ? 4 : 0;
}

int main(void)
{
	pthread_t th;
	int forks = 0, good = 0;
	double until = t_now() + t_stress_seconds(1.0);

#ifdef __SANITIZE_ADDRESS__
	/* Seen here: the child blocks forever in ASan's allocator lock. */
	SKIP("GCC 12's AddressSanitizer allocator is not fork-safe while "
	     "another thread allocates");
#endif

	if (!ASSERT_OK(cg_create(&busy, CG_MOV, 256, 16, 0), "cg busy") ||
	    !ASSERT_OK(cg_create(&quiet, CG_JMP, 1, 32, 0), "cg quiet"))
		return t_exit();
	pthread_create(&th, NULL, patcher, NULL);
	while (t_now() < until || forks < 20) {
		int status;
		pid_t pid = fork();

		if (pid == 0)
			_exit(child());
		forks++;
		if (waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
		    WEXITSTATUS(status) == 0)
			good++;
		else
			fprintf(stderr, "child status %#x\n", status);
	}
	stop = 1;
	pthread_join(th, NULL);

	ASSERT_EQ(good, forks, "children that ran and patched correctly");
	/* The children's commits went to their own memory, not ours. */
	ASSERT_EQ(cg_call(&quiet, 0), cg_val(0, 0), "parent's quiet site untouched");
	return t_exit();
}
