// SPDX-License-Identifier: MIT
/* elferr.c - libelf's error state for the agent: Debian's libelf.a keeps it in local-exec TLS, which no shared object may use. */
#include <stdio.h>

/*
 * libelf.a's elf_error.o is the one member of the archive a shared object
 * cannot link (its thread-local error number is local-exec). These three
 * definitions come before the archive on the agent's link line, so that
 * member is never pulled in. The library never prints elf_errmsg(): a
 * number is all a message needs to say here.
 */
static __thread int elf_err __attribute__((tls_model("initial-exec")));

void __libelf_seterrno(int value);
int elf_errno(void);
const char *elf_errmsg(int error);

void __libelf_seterrno(int value)
{
	elf_err = value;
}

int elf_errno(void)
{
	int e = elf_err;

	elf_err = 0;
	return e;
}

/* 0: the current error, NULL if none; -1: the current one in any case. */
const char *elf_errmsg(int error)
{
	static __thread char buf[32] __attribute__((tls_model("initial-exec")));
	int e = error <= 0 ? elf_err : error;

	if (!e)
		return error < 0 ? "no error" : NULL;
	snprintf(buf, sizeof(buf), "libelf error %d", e);
	return buf;
}
