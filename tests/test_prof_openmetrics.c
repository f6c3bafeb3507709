// SPDX-License-Identifier: MIT
/* test_prof_openmetrics.c - the exposition read back by prometheus_client's two parsers (OpenMetrics, classic), values compared; atomic rewrite. */
#include <errno.h>
#include <sys/stat.h>

#include "harness.h"
#include "openmetrics.h"

static uint64_t rng = 88172645463325252ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void put_hex(FILE *f, const char *s)
{
	if (!s) {
		fputs("- ", f);
		return;
	}
	if (!*s)
		fputs("\"\"", f);	/* not used: labels here are never empty */
	for (; *s; s++)
		fprintf(f, "%02x", (unsigned char)*s);
	fputc(' ', f);
}

/* A python3 that has prometheus_client (Debian's python3-prometheus-client). */
static const char *python(void)
{
	static const char *const cand[] = { "/usr/bin/python3", "python3" };

	for (size_t i = 0; i < 2; i++) {
		char cmd[256];

		snprintf(cmd, sizeof(cmd), "%s -c 'import prometheus_client' 2>/dev/null", cand[i]);
		if (system(cmd) == 0)
			return cand[i];
	}
	return NULL;
}

int main(void)
{
	enum { NS = 4, NV = 5000 };
	static struct pk_hist h[NS];
	static uint64_t v[NS][NV];
	struct pk_om_series s[NS + 1] = {
		{ "lzma_code", "/usr/lib/x86_64-linux-gnu/liblzma.so.5", "xz", 4242, 0, &h[0] },
		/* C++ names carry quotes; paths may hold backslashes and newlines. */
		{ "operator\"\" _km(unsigned long long)", "/tmp/a\\b\nc.so", "x\"z", 4243, 0, &h[1] },
		{ "caf\xc3\xa9_\xff", "/lib/libc.so.6", NULL, 0, 0, &h[2] },
		{ "slow", "/bin/true", "true", 1, 0, &h[3] },
		{ "counted_only", "/bin/true", "true", 1, 77, NULL },
	};
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char exp_path[256], om_path[256], prom_path[256], tmp_path[300], cmd[2048];
	const char *src = getenv("PK_SOURCE_DIR"), *py = python();
	struct pk_om_opts om = { .format = PK_OM_OPENMETRICS, .le_max_shift = 36 };
	struct pk_om_opts prom = { .format = PK_OM_PROMETHEUS, .le_max_shift = 36 };
	struct stat st;
	FILE *f;
	int rc;

	for (int i = 0; i < NS; i++) {
		for (int j = 0; j < NV; j++) {
			uint64_t x = next();

			switch (i) {
			case 0: x = 200 + x % 100000; break;
			case 1: x >>= 30 + x % 34; break;
			case 2: x = (1ull << (x % 20)) - (x >> 63); break;	/* octave edges: 2^n and 2^n - 1 */
			default: x = 30000000000ull + x % 1000000000000ull; break;	/* above the last le */
			}
			v[i][j] = x;
			pk_hist_record(&h[i], x);
		}
		s[i].calls = NV + (uint64_t)i;	/* calls counted at entry may exceed returns */
	}
	snprintf(exp_path, sizeof(exp_path), "%s/pk_om_%d.expected", dir, getpid());
	snprintf(om_path, sizeof(om_path), "%s/pk_om_%d.prom", dir, getpid());
	snprintf(prom_path, sizeof(prom_path), "%s/pk_om_%d.txt", dir, getpid());
	snprintf(tmp_path, sizeof(tmp_path), "%s.tmp", om_path);

	f = fopen(exp_path, "w");
	for (int i = 0; i < NS + 1; i++) {
		put_hex(f, s[i].function);
		put_hex(f, s[i].object);
		put_hex(f, s[i].process);
		fprintf(f, "%d %" PRIu64 " ", s[i].pid, s[i].calls);
		if (!s[i].hist) {
			fputs("-\n", f);
			continue;
		}
		fprintf(f, "%d", NV);
		for (int j = 0; j < NV; j++)
			fprintf(f, " %" PRIu64, v[i][j]);
		fputc('\n', f);
	}
	fclose(f);

	/* An old file is replaced whole; no .tmp is left behind. */
	f = fopen(om_path, "w");
	fputs("old contents\n", f);
	fclose(f);
	errno = 1234;
	ASSERT_OK(pk_om_write_file(om_path, s, NS + 1, &om), "write openmetrics");
	ASSERT_EQ(errno, 1234, "errno left alone");
	ASSERT_OK(pk_om_write_file(prom_path, s, NS + 1, &prom), "write prometheus");
	ASSERT_EQ(stat(tmp_path, &st), -1, "no .tmp left");
	ASSERT_EQ(pk_om_write_file("/nonexistent-dir/x.prom", s, 1, NULL), -ENOENT, "missing dir: -ENOENT");
	{
		struct pk_om_opts bad = { .prefix = "9bad" };

		ASSERT_EQ(pk_om_write(stdout, s, 1, &bad), -EINVAL, "bad prefix: -EINVAL");
	}

	snprintf(cmd, sizeof(cmd), "head -c 1500 %s; echo ...; grep -m3 operator %s; tail -4 %s", om_path, om_path, om_path);
	rc = system(cmd);
	(void)rc;
	if (!py || !src) {
		unlink(exp_path), unlink(om_path), unlink(prom_path);
		if (!src)
			SKIP("PK_SOURCE_DIR not set (run under ctest)");
		SKIP("no python3 with prometheus_client (Debian: python3-prometheus-client)");
	}
	snprintf(cmd, sizeof(cmd), "%s %s/tests/prof_openmetrics.py %s %s %s 36", py, src, exp_path, om_path, prom_path);
	rc = system(cmd);
	ASSERT_EQ(rc, 0, "prometheus_client parsers agree with the recorded samples");
	if (!rc)
		unlink(exp_path), unlink(om_path), unlink(prom_path);
	else
		fprintf(stderr, "kept %s %s %s\n", exp_path, om_path, prom_path);
	return t_exit();
}
