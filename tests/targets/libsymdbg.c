// SPDX-License-Identifier: MIT
/* libsymdbg.c - a library test_sym_debug strips and gives a separate debug file: its static function is named only there. */

static __attribute__((noinline)) int sd_hidden(int x)
{
	volatile int v = x;

	return v * 11;
}

__attribute__((visibility("default"), noinline)) int sd_call(int x)
{
	return sd_hidden(x) + 1;
}

__attribute__((visibility("default"))) void *sd_hidden_addr(void)
{
	return (void *)sd_hidden;
}
