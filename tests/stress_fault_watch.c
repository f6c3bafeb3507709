// SPDX-License-Identifier: MIT
/* stress_fault_watch.c - threads write a watched page while watchpoints come and go (hardware, then page protection). */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "probekit.h"
#include "harness.h"

#define WRITERS 3

#include "watch_writers.h"

static unsigned long phase_run(double seconds, const char *mech)
{
	pthread_t th[WRITERS];
	unsigned long changes = 0;
	double until = t_now() + seconds;

	stop = 0;
	for (long i = 0; i < WRITERS; i++)
		pthread_create(&th[i], NULL, writer, (void *)(uintptr_t)i);
	while (t_now() < until) {
		struct pk_watch *w;
		int err = pk_watch_add((void *)&vars[0], 8, PK_WATCH_WRITE,
				       on_hit, NULL, &w);

		if (!ASSERT_OK(err, "watch add"))
			break;
		usleep(200);
		if (!ASSERT_OK(pk_watch_remove(w), "watch remove"))
			break;
		changes++;
	}
	stop = 1;
	for (int i = 0; i < WRITERS; i++) {
		pthread_join(th[i], NULL);
		ASSERT_GE(writes[i], 1, "writer made progress");
		ASSERT_EQ(vars[8 + i], writes[i] - 1, "unwatched bytes written");
	}
	printf("%s: %lu add/remove cycles, %lu hits\n", mech, changes, hits);
	ASSERT_GE(hits, 1, "the watched writes were reported");
	return changes;
}

int main(void)
{
	double secs = t_stress_seconds(2.0);

	phase_run(secs / 2, "hardware where available");
	setenv("PROBEKIT_WATCH", "page", 1);
	hits = 0;
	phase_run(secs / 2, "page protection");
	return t_exit();
}
