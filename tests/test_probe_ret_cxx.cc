// SPDX-License-Identifier: MIT
/* test_probe_ret_cxx.cc - return probes vs the unwinder: C++ exceptions through probed calls, pthread_exit's forced unwind, backtrace(). */
#include <probekit.h>

#include <execinfo.h>
#include <pthread.h>

#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "harness.h"


namespace {

int dtors;

struct guard {
	int *n;
	~guard() { ++*n; }
};

} // namespace

extern "C" {

T_NOINLINE long rx_thrower(long n)
{
	volatile long x = n;

	if (x > 0)
		throw std::runtime_error("thrown through probed calls");
	return x + 1;
}

/* A frame with a destructor between the throw and the catch. */
T_NOINLINE long rx_middle(long n)
{
	guard g{ &dtors };
	volatile long x = n;

	return rx_thrower(x) + 1;
}

/* Probed itself; catches what is thrown below it, then returns normally. */
T_NOINLINE long rx_catcher(long n)
{
	volatile long x = n;

	try {
		return rx_middle(x);
	} catch (const std::runtime_error &) {
		return -x;
	}
}

/* Adds 1 and tail-jumps to rx_thrower: both probed, one stack slot. */
long rx_tail(long n);
__asm__(".text\n"
	".globl rx_tail\n.type rx_tail,@function\n"
	"rx_tail:\n"
	"	lea 1(%rdi), %rdi\n"
	"	add $0, %rdi\n"
	"	jmp rx_thrower\n"
	".size rx_tail, .-rx_tail\n");

T_NOINLINE long rx_exit(long n)
{
	volatile long x = n;

	if (x)
		pthread_exit(nullptr);
	return x;
}

/* Collects a backtrace from under a probed call. */
static void *bt[64];
static int nbt;

T_NOINLINE long rx_bt(long n)
{
	volatile long x = n;

	nbt = backtrace(bt, 64);
	return x + 1;
}

T_NOINLINE long rx_bt_caller(long n)
{
	volatile long x = n;

	return rx_bt(x) * 2;
}

} // extern "C"

namespace {

struct counts {
	int rets;
	long last;
};

void on_ret(pk_retprobe *, pk_regs *r, void *, void *ctx)
{
	counts *c = static_cast<counts *>(ctx);

	c->rets++;
	c->last = static_cast<long>(pk_regs_ret(r));
}

int make(const char *sym, counts *c, pk_retprobe **out)
{
	PK_OPTS(pk_retprobe_opts, o, .symbol = sym, .addr = nullptr,
		.entry = nullptr, .ret = on_ret, .ctx = c, .data_size = 0, .flags = 0,
		.missed = nullptr);

	return pk_retprobe_create(&o, out);
}

unsigned long missed(pk_retprobe *rp)
{
	pk_retprobe_info i{};

	i.sz = sizeof(i);
	pk_retprobe_get_info(rp, &i);
	return i.missed;
}

void test_exceptions()
{
	counts ct{}, cm{}, cc{};
	pk_retprobe *rp[3] = {};
	int caught = 0, ok = 1;
	const int n = 3 * PK_RETPROBE_DEPTH;

	if (!ASSERT_OK(make("rx_thrower", &ct, &rp[0]), "thrower") ||
	    !ASSERT_OK(make("rx_middle", &cm, &rp[1]), "middle") ||
	    !ASSERT_OK(make("rx_catcher", &cc, &rp[2]), "catcher") ||
	    !ASSERT_OK(pk_retprobe_register(rp, 3), "register"))
		goto out;
	/* Caught by an unprobed caller, through two probed frames. */
	for (int i = 0; i < n; i++) {
		try {
			rx_middle(i + 1);
		} catch (const std::runtime_error &) {
			caught++;
		}
	}
	ASSERT_EQ(caught, n, "every exception reached the caller");
	ASSERT_EQ(dtors, n, "destructors in probed frames ran");
	ASSERT_EQ(ct.rets + cm.rets, 0, "no return handler for frames unwound");
	/* Caught inside a probed function, which then returns normally. */
	for (int i = 0; i < n; i++)
		ok &= rx_catcher(i + 1) == -(i + 1);
	ASSERT_TRUE(ok, "probed catcher's results");
	ASSERT_EQ(cc.rets, n, "its returns all probed");
	ASSERT_EQ(cc.last, -n, "with its value");
	ASSERT_EQ(dtors, 2 * n, "destructors again");
	/* Normal returns afterwards: nothing stale in the way. */
	ASSERT_EQ(rx_catcher(0), 2, "no throw");
	ASSERT_EQ(ct.rets, 1, "thrower returned");
	ASSERT_EQ(ct.last, 1, "thrower's value");
	ASSERT_EQ(cm.rets, 1, "middle returned");
	ASSERT_EQ(cm.last, 2, "middle's value");
	ASSERT_EQ(cc.last, 2, "catcher's value");
	ASSERT_EQ(missed(rp[0]) + missed(rp[1]) + missed(rp[2]), 0,
		  "unwound calls left nothing that fills the stack");
out:
	for (auto *p : rp)
		pk_retprobe_destroy(p);
}

/* An exception from a tail-called probed function, and normal returns. */
void test_tail_call_throw()
{
	counts ct{}, cx{};
	pk_retprobe *rp[2] = {};
	int caught = 0;

	if (!ASSERT_OK(make("rx_tail", &ct, &rp[0]), "tail") ||
	    !ASSERT_OK(make("rx_thrower", &cx, &rp[1]), "thrower") ||
	    !ASSERT_OK(pk_retprobe_register(rp, 2), "register"))
		goto out;
	for (int i = 0; i < 2 * PK_RETPROBE_DEPTH; i++) {
		try {
			rx_tail(i);
		} catch (const std::runtime_error &) {
			caught++;
		}
	}
	ASSERT_EQ(caught, 2 * PK_RETPROBE_DEPTH, "caught through the tail call");
	ASSERT_EQ(ct.rets + cx.rets, 0, "no return handler");
	ASSERT_EQ(rx_tail(-1), 1, "normal return through the tail call");
	ASSERT_EQ(ct.rets, 1, "caller's return");
	ASSERT_EQ(cx.rets, 1, "tail callee's return");
	ASSERT_EQ(ct.last, 1, "value");
	ASSERT_EQ(missed(rp[0]) + missed(rp[1]), 0, "no miss");
out:
	for (auto *p : rp)
		pk_retprobe_destroy(p);
}

int thread_dtors;

void *exit_thread(void *)
{
	guard g{ &thread_dtors };

	rx_exit(1);
	return nullptr;
}

void test_pthread_exit()
{
	counts c{};
	pk_retprobe *rp = nullptr;

	if (!ASSERT_OK(make("rx_exit", &c, &rp), "create") ||
	    !ASSERT_OK(pk_retprobe_register(&rp, 1), "register"))
		goto out;
	for (int i = 0; i < 4; i++) {
		pthread_t t;

		pthread_create(&t, nullptr, exit_thread, nullptr);
		pthread_join(t, nullptr);
	}
	/* The forced unwind went through the trampoline to the guard. */
	ASSERT_EQ(thread_dtors, 4, "destructors above the probed call ran");
	ASSERT_EQ(c.rets, 0, "no return handler");
	ASSERT_EQ(rx_exit(0), 0, "normal return");
	ASSERT_EQ(c.rets, 1, "probed");
out:
	pk_retprobe_destroy(rp);
}

void test_backtrace()
{
	counts c{};
	pk_retprobe *rp = nullptr;
	pk_sym caller{};
	int found = 0;

	if (!ASSERT_OK(pk_sym_lookup("rx_bt_caller", &caller), "caller's extent") ||
	    !ASSERT_OK(make("rx_bt", &c, &rp), "create") ||
	    !ASSERT_OK(pk_retprobe_register(&rp, 1), "register"))
		goto out;
	ASSERT_EQ(rx_bt_caller(20), 42, "result");
	ASSERT_EQ(c.rets, 1, "probed");
	for (int i = 0; i < nbt; i++) {
		uintptr_t a = reinterpret_cast<uintptr_t>(bt[i]);

		found += a > caller.addr && a <= caller.addr + caller.size;
	}
	ASSERT_EQ(found, 1, "backtrace continues past the trampoline to the caller");
out:
	pk_retprobe_destroy(rp);
}

} // namespace

int main()
{
	test_exceptions();
	test_tail_call_throw();
	test_pthread_exit();
	test_backtrace();
	return t_exit();
}
