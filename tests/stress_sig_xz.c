// SPDX-License-Identifier: MIT
/* stress_sig_xz.c - liblzma's multi-threaded encoder (workers that block every signal) compresses while probes on lzma_crc64 come and go and a key flips (issue 9, item 1). */
#include <dlfcn.h>
#include <sched.h>
#include <string.h>

#include "sig_common.h"

#if __has_include(<lzma.h>)
#include <lzma.h>

static lzma_ret (*enc_mt)(lzma_stream *, const lzma_mt *);
static lzma_ret (*code)(lzma_stream *, lzma_action);
static void (*end)(lzma_stream *);

#define DATA (4u << 20)
static uint8_t *in, *out;
static volatile int stop;
static volatile unsigned long encodes, bad_encodes;

/* One xz -T2 -1 of the data; 0 when the stream ended as it should. */
static int encode_once(void)
{
	lzma_stream s = LZMA_STREAM_INIT;
	lzma_mt mt;
	lzma_ret r;

	memset(&mt, 0, sizeof(mt));
	mt.threads = 2;
	mt.preset = 1;
	mt.check = LZMA_CHECK_CRC64;
	if (enc_mt(&s, &mt) != LZMA_OK)
		return -1;
	s.next_in = in;
	s.avail_in = DATA;
	do {
		s.next_out = out;
		s.avail_out = DATA;
		r = code(&s, LZMA_FINISH);
	} while (r == LZMA_OK);
	end(&s);
	return r == LZMA_STREAM_END ? 0 : -1;
}

static void *compressor(void *arg)
{
	(void)arg;
	while (!stop) {
		if (encode_once())
			bad_encodes++;
		encodes++;
	}
	return NULL;
}

int main(void)
{
	void *lz = dlopen("liblzma.so.5", RTLD_NOW | RTLD_GLOBAL);
	double secs = t_stress_seconds(3);
	struct pk_probe *jp = NULL, *ip = NULL;
	unsigned long rounds = 0, fails = 0;
	uint32_t x = 1;
	pthread_t t;
	time_t t0;

	if (!lz)
		SKIP("no liblzma.so.5 (%s)", dlerror());
	*(void **)&enc_mt = dlsym(lz, "lzma_stream_encoder_mt");
	*(void **)&code = dlsym(lz, "lzma_code");
	*(void **)&end = dlsym(lz, "lzma_end");
	if (!enc_mt || !code || !end)
		SKIP("liblzma without the multi-threaded encoder");
	in = malloc(DATA);
	out = malloc(DATA);
	for (size_t i = 0; i < DATA; i++) {	/* text-like, compressible */
		x = x * 1103515245 + 12345;
		in[i] = (uint8_t)('a' + (x >> 16) % 16);
	}
	{
		PK_OPTS(pk_probe_opts, o, .symbol = "liblzma.so.5:lzma_crc64",
			.pre = sig_count);
		PK_OPTS(pk_probe_opts, o3, .symbol = "liblzma.so.5:lzma_crc64",
			.pre = sig_count, .flags = PK_PROBE_F_INT3);

		if (!ASSERT_OK(pk_probe_create(&o, &jp), "jump probe on lzma_crc64") ||
		    !ASSERT_OK(pk_probe_create(&o3, &ip), "int3 probe on lzma_crc64"))
			return t_exit();
	}
	/* Owned before the workers start, as in a program under the agent. */
	pk_key_enable(&sig_key);
	pthread_create(&t, NULL, compressor, NULL);
	t0 = time(NULL);
	/*
	 * At least one hit counted: on a loaded machine under ASan a round
	 * can take half a second, of which the probe is armed 20 ms, so the
	 * run goes on (up to a minute more) until one of them saw a call.
	 */
	while (difftime(time(NULL), t0) < secs ||
	       (!__atomic_load_n(&sig_hits, __ATOMIC_RELAXED) &&
		difftime(time(NULL), t0) < secs + 60)) {
		struct pk_probe *p = (rounds & 1) ? ip : jp;

		fails += pk_probe_register(&p, 1) != 0;
		usleep(20000);	/* armed while the workers check blocks */
		fails += pk_probe_unregister(&p, 1) != 0;
		fails += (rounds & 1 ? pk_key_enable(&sig_key)
				     : pk_key_disable(&sig_key)) < 0;
		rounds++;
	}
	stop = 1;
	pthread_join(t, NULL);
	printf("%lu rounds, %lu encodes, %lu probe hits\n", rounds, encodes,
	       sig_hits);
	ASSERT_EQ(fails, 0, "every registration, unregistration and key flip");
	ASSERT_GE(encodes, 1, "encodes finished");
	ASSERT_GE(sig_hits, 1, "lzma_crc64 calls counted");
	ASSERT_EQ(bad_encodes, 0, "every stream ended right");
	pk_probe_destroy(jp);
	pk_probe_destroy(ip);
	free(in);
	free(out);
	return t_exit();
}
#else
int main(void)
{
	SKIP("no <lzma.h> (liblzma-dev)");
}
#endif
