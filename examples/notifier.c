// SPDX-License-Identifier: MIT
/* notifier.c - a notifier chain: handlers by priority, a veto that stops the walk, unregister. */
#include <probekit.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>

enum { EV_OPEN = 1, EV_SECRET = 2 };

/* A handler embeds its struct pk_notifier; container_of gets it back. */
struct listener {
	struct pk_notifier nb;
	const char *name;
	int vetoes_secret;
};
#define to_listener(p) ((struct listener *)((char *)(p) - offsetof(struct listener, nb)))

static PK_CHAIN_ATOMIC_DEFINE(events);

static int on_event(struct pk_notifier *nb, unsigned long action, void *data)
{
	struct listener *l = to_listener(nb);

	printf("  %s (priority %d) sees event %lu on %s\n", l->name, nb->priority,
	       action, (const char *)data);
	if (action == EV_SECRET && l->vetoes_secret)
		return pk_notifier_from_errno(-EACCES); /* a veto: stops the walk */
	return PK_OK;
}

int main(void)
{
	struct listener audit = { { on_event, 10, NULL, { NULL, NULL } }, "audit", 1 };
	struct listener log = { { on_event, 0, NULL, { NULL, NULL } }, "log", 0 };
	int ret, n;

	/* Empty chain: the pk_notify() site is a NOP, nothing runs. */
	ret = pk_notify(&events, EV_OPEN, "a.txt");
	printf("no listeners: result %d\n", ret);

	if (pk_chain_register(&events, &log.nb) || pk_chain_register(&events, &audit.nb))
		return 1;

	printf("open:\n");
	ret = pk_chain_call(&events, EV_OPEN, "a.txt", &n);
	printf("  -> result %#x after %d handlers\n", ret, n);
	if (ret != PK_OK || n != 2)
		return 1;

	printf("secret:\n");
	ret = pk_chain_call(&events, EV_SECRET, "key.pem", &n);
	printf("  -> result %#x after %d handler: errno %d\n", ret, n,
	       pk_notifier_to_errno(ret));
	if (pk_notifier_to_errno(ret) != -EACCES || n != 1)
		return 1;

	/* Returns once no thread can still be running the handler. */
	if (pk_chain_unregister(&events, &audit.nb) || pk_chain_unregister(&events, &log.nb))
		return 1;
	ret = pk_notify(&events, EV_OPEN, "b.txt");
	printf("after unregister: result %d\n", ret);
	return ret == PK_DONE ? 0 : 1;
}
