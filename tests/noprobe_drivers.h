/* SPDX-License-Identifier: MIT */
/* noprobe_drivers.h - one harmless call of each function probekit's signal path could reach, for tests that probe them while threads run them (issue 9, item 2). */
#ifndef PK_TEST_NOPROBE_DRIVERS_H
#define PK_TEST_NOPROBE_DRIVERS_H

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <Zydis/Zydis.h>

/*
 * Through volatile pointers, so the compiler calls each function as the
 * library has it (no builtin expansion of memcpy and friends), and the
 * IFUNC-resolved implementation runs, the one a probe on it is on.
 */
static void *(*volatile d_memcpy)(void *, const void *, size_t) = memcpy;
static void *(*volatile d_memset)(void *, int, size_t) = memset;
static int (*volatile d_memcmp)(const void *, const void *, size_t) = memcmp;
static size_t (*volatile d_strlen)(const char *) = strlen;

static int d_null_fd = -1;
static void *d_page;			/* a private page of our own */
static pthread_key_t d_key;
static void *(*d_tls_get_addr)(void *);
static unsigned long d_tls_index[2];	/* liburcu-bp's module, offset 0 */
static volatile unsigned long d_sink;	/* unsigned: sums wrap, never overflow */

/* Once, before any thread runs a driver. 0, or -1 (errno set). */
static int drivers_init(void)
{
	void *h;
	size_t modid = 0;

	d_null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	d_page = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (d_null_fd < 0 || d_page == MAP_FAILED)
		return -1;
	if (pthread_key_create(&d_key, NULL))
		return -1;
	/* __tls_get_addr() needs a module with TLS: liburcu-bp (loaded by us). */
	d_tls_get_addr = (void *(*)(void *))dlsym(RTLD_DEFAULT, "__tls_get_addr");
	h = dlopen("liburcu-bp.so.8", RTLD_NOW | RTLD_NOLOAD);
	if (h && dlinfo(h, RTLD_DI_TLS_MODID, &modid) == 0 && modid) {
		d_tls_index[0] = modid;
		d_tls_index[1] = 0;
	} else {
		d_tls_get_addr = NULL;
	}
	if (h)
		dlclose(h);
	return 0;
}

static void dr_errno(void) { errno = EINTR; d_sink += errno; errno = 0; }
static void dr_getpid(void) { d_sink += getpid(); }
static void dr_gettid(void) { d_sink += gettid(); }
static void dr_syscall(void) { d_sink += syscall(SYS_getpid); }
static void dr_memcpy(void)
{
	char a[64], b[64] = "x";

	d_memcpy(a, b, sizeof(a));
	d_sink += a[0];
}
static void dr_memset(void)
{
	char a[64];

	d_memset(a, 1, sizeof(a));
	d_sink += a[3];
}
static void dr_memcmp(void)
{
	char a[16] = "abc", b[16] = "abd";

	d_sink += d_memcmp(a, b, sizeof(a));
}
static void dr_strlen(void) { d_sink += (long)d_strlen("probekit"); }
static void dr_write(void) { d_sink += write(d_null_fd, "x", 1); }
static void dr_sched_yield(void) { sched_yield(); }
static void dr_mprotect(void)
{
	d_sink += mprotect(d_page, 4096, PROT_READ | PROT_WRITE);
}
static void dr_mmap(void)
{
	void *p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p != MAP_FAILED)
		munmap(p, 4096);
}
static void dr_sigsets(void)
{
	sigset_t s;

	sigemptyset(&s);
	sigaddset(&s, SIGUSR2);
	d_sink += sigismember(&s, SIGUSR2);
	sigdelset(&s, SIGUSR2);
	sigfillset(&s);
}
static void dr_sigaction(void)
{
	struct sigaction old;

	sigaction(SIGUSR2, NULL, &old);
}
/* Blocks and unblocks SIGUSR2 only: never SIGTRAP (issue 9, item 1). */
static void dr_sigmask(void)
{
	sigset_t s, old;

	sigemptyset(&s);
	sigaddset(&s, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &s, &old);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	sigprocmask(SIG_BLOCK, &s, &old);
	sigprocmask(SIG_SETMASK, &old, NULL);
}
/* SIGURG is ignored by default: raise() returns. */
static void dr_raise(void) { raise(SIGURG); }
static void dr_setspecific(void)
{
	pthread_setspecific(d_key, &d_null_fd);
}
static void dr_tls_get_addr(void)
{
	if (d_tls_get_addr)
		d_sink += (uintptr_t)d_tls_get_addr(d_tls_index);
}
static void dr_zydis(void)
{
	static const uint8_t code[] = { 0x48, 0x8b, 0x03, 0xc3 };
	ZydisDecoder dec;
	ZydisDecodedInstruction insn;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];

	if (ZYAN_SUCCESS(ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64,
					  ZYDIS_STACK_WIDTH_64)) &&
	    ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, code, sizeof(code), &insn,
						ops)))
		d_sink += insn.length;
	d_sink += ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64,
						   ZYDIS_REGISTER_EAX);
}
static void dr_none(void) { }

struct driver {
	const char *name;	/* the function probed */
	void (*run)(void);	/* a call of it; dr_none: not run (why) */
	const char *why;	/* dr_none's reason */
};

/*
 * The fixed part of the list: what the brief and PITFALLS name (errno,
 * getpid, syscall, gettid, the mem* functions, the signal functions), on
 * top of what check-noprobe.sh --list derives from the library.
 */
static const struct driver drivers[] = {
	{ "__errno_location", dr_errno, NULL },
	{ "getpid", dr_getpid, NULL },
	{ "gettid", dr_gettid, NULL },
	{ "syscall", dr_syscall, NULL },
	{ "memcpy", dr_memcpy, NULL },
	{ "memset", dr_memset, NULL },
	{ "memcmp", dr_memcmp, NULL },
	{ "strlen", dr_strlen, NULL },
	{ "write", dr_write, NULL },
	{ "sched_yield", dr_sched_yield, NULL },
	{ "mprotect", dr_mprotect, NULL },
	{ "mmap", dr_mmap, NULL },
	{ "munmap", dr_mmap, NULL },
	{ "sigemptyset", dr_sigsets, NULL },
	{ "sigaddset", dr_sigsets, NULL },
	{ "sigdelset", dr_sigsets, NULL },
	{ "sigismember", dr_sigsets, NULL },
	{ "sigfillset", dr_sigsets, NULL },
	{ "sigaction", dr_sigaction, NULL },
	{ "pthread_sigmask", dr_sigmask, NULL },
	{ "sigprocmask", dr_sigmask, NULL },
	{ "raise", dr_raise, NULL },
	{ "pthread_setspecific", dr_setspecific, NULL },
	{ "__tls_get_addr", dr_tls_get_addr, NULL },
	{ "ZydisDecoderInit", dr_zydis, NULL },
	{ "ZydisDecoderDecodeFull", dr_zydis, NULL },
	{ "ZydisRegisterGetLargestEnclosing", dr_zydis, NULL },
	{ "abort", dr_none, "ends the process (ret.c's die()): probed, never run" },
};

static const struct driver *driver_of(const char *name)
{
	for (size_t i = 0; i < sizeof(drivers) / sizeof(drivers[0]); i++)
		if (!strcmp(drivers[i].name, name))
			return &drivers[i];
	return NULL;
}

#endif /* PK_TEST_NOPROBE_DRIVERS_H */
