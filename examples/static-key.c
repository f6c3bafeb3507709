// SPDX-License-Identifier: MIT
/* static-key.c - a tracing hook that costs a 5-byte NOP until switched on at run time. */
#include <probekit.h>
#include <stdio.h>

/* False by default: every pk_branch_unlikely(&tracing) site is a NOP. */
static PK_KEY_FALSE(tracing);
static unsigned long traced;

static int work(int x)
{
	if (pk_branch_unlikely(&tracing))
		traced++; /* the rarely wanted extra work: out of line */
	return x * 2;
}

int main(void)
{
	long sum = 0;
	int err;

	printf("probekit %s, branch sites %s\n", pk_version(),
	       pk_key_patching() ? "patched" : "in fallback mode (load and branch)");

	for (int i = 0; i < 1000; i++)
		sum += work(i);
	printf("key off: %lu calls traced\n", traced);

	err = pk_key_enable(&tracing);	/* patches every site: NOP -> JMP */
	if (err) {
		fprintf(stderr, "pk_key_enable: %d\n", err);
		return 1;
	}
	for (int i = 0; i < 1000; i++)
		sum += work(i);
	printf("key on:  %lu calls traced\n", traced);

	err = pk_key_disable(&tracing);	/* and back: JMP -> NOP */
	if (err) {
		fprintf(stderr, "pk_key_disable: %d\n", err);
		return 1;
	}
	for (int i = 0; i < 1000; i++)
		sum += work(i);
	printf("key off: %lu calls traced (sum %ld)\n", traced, sum);

	return traced == 1000 ? 0 : 1;
}
