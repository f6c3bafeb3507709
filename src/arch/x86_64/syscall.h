/* SPDX-License-Identifier: MIT */
/* syscall.h - raw system calls and the thread pointer for the signal path: no libc function, no errno. */
#ifndef PK_ARCH_X86_64_SYSCALL_H
#define PK_ARCH_X86_64_SYSCALL_H

/*
 * Why: code on probekit's trap, fault and sweep paths (PK_NOPROBE) must
 * call nothing a probe can be on, or a probe there would trap again inside
 * its own trap handler, forever (issue 9, item 2). libc's syscall(),
 * getpid(), gettid() and __errno_location() are ordinary functions a user
 * may probe. These helpers are always inlined: a "syscall" instruction in
 * the caller's own section, the result returned as the kernel gives it
 * (-4095..-1 is -errno), errno never written.
 *
 * errno: glibc's errno is an initial-exec thread-local variable of libc's,
 * in the static TLS block, so its distance from the thread pointer is the
 * same in every thread of the process (that is what __errno_location()
 * itself computes: the thread pointer at %fs:0 plus a link-time constant).
 * util.c measures that distance once, in its constructor, before any probe
 * or signal hook of probekit's can exist (pk_errno_off); the signal path
 * adds it to %fs:0: one load, no call, valid on a thread's very first trap.
 */

#include <stdint.h>

#include "internal.h"

/* pk_sys3() - system call @nr with up to three arguments: >= 0, or -errno. */
static PK_NOPROBE_INLINE long pk_sys3(long nr, long a, long b, long c)
{
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "0"(nr), "D"(a), "S"(b), "d"(c)
			 : "rcx", "r11", "memory");
	return ret;
}

/* pk_sys4() - system call @nr with up to four arguments: >= 0, or -errno. */
static PK_NOPROBE_INLINE long pk_sys4(long nr, long a, long b, long c, long d)
{
	register long r10 __asm__("r10") = d;
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "0"(nr), "D"(a), "S"(b), "d"(c), "r"(r10)
			 : "rcx", "r11", "memory");
	return ret;
}

/* The calling thread's thread pointer (glibc's TCB: %fs:0 points to itself). */
static PK_NOPROBE_INLINE uintptr_t pk_arch_tp(void)
{
	uintptr_t tp;

	__asm__("mov %%fs:0, %0" : "=r"(tp));
	return tp;
}

/* &errno - thread pointer, the same in every thread (util.c, PK_SIGNAL_DATA). */
PK_HIDDEN extern intptr_t pk_errno_off;

/* The calling thread's &errno, without calling __errno_location(). */
static PK_NOPROBE_INLINE int *pk_errno_ptr(void)
{
	return (int *)(pk_arch_tp() + (uintptr_t)pk_errno_off);
}

#endif /* PK_ARCH_X86_64_SYSCALL_H */
