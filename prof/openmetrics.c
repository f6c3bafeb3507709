// SPDX-License-Identifier: MIT
/* openmetrics.c - OpenMetrics / Prometheus text exposition of calls and histograms (see openmetrics.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "esc.h"
#include "openmetrics.h"

#define PK_OM_LE_MAX_DEFAULT 34

static int valid_name(const char *p)
{
	if (!*p || (*p >= '0' && *p <= '9'))
		return 0;
	for (; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '_' || *p == ':'))
			return 0;
	return 1;
}

/* @ns as exact decimal seconds: "0.0", "0.000001023", "12.5". */
static int put_seconds(FILE *f, uint64_t ns)
{
	char frac[16];
	int i;

	snprintf(frac, sizeof(frac), "%09llu", (unsigned long long)(ns % 1000000000u));
	for (i = 8; i > 0 && frac[i] == '0'; i--)
		frac[i] = 0;
	return fprintf(f, "%llu.%s", (unsigned long long)(ns / 1000000000u), frac) < 0;
}

/* {function="...",object="...",process="...",pid="..." and le, if any} */
static int put_labels(FILE *f, const struct pk_om_series *s, const char *le_inf, int le_n)
{
	const char *name[] = { "function", "object", "process" };
	const char *val[] = { s->function, s->object, s->process };
	const char *sep = "";
	int err = 0;

	err |= putc('{', f) == EOF;
	for (int i = 0; i < 3; i++) {
		if (!val[i])
			continue;
		err |= fprintf(f, "%s%s=\"", sep, name[i]) < 0;
		err |= pk_esc_put(f, val[i], PK_ESC_OM) != 0;
		err |= putc('"', f) == EOF;
		sep = ",";
	}
	if (s->pid)
		err |= fprintf(f, "%spid=\"%d\"", sep, s->pid) < 0, sep = ",";
	if (le_inf) {
		err |= fprintf(f, "%sle=\"%s\"", sep, le_inf) < 0;
	} else if (le_n >= 0) {
		err |= fprintf(f, "%sle=\"", sep) < 0;
		err |= put_seconds(f, ((uint64_t)1 << le_n) - 1);
		err |= putc('"', f) == EOF;
	}
	err |= putc('}', f) == EOF;
	return err;
}

static int put_hist(FILE *f, const char *fam, const struct pk_om_series *s, unsigned int le_max)
{
	const struct pk_hist *h = s->hist;
	uint64_t cum = 0;
	unsigned int b = 0;
	int err = 0;

	for (unsigned int n = 0; n <= le_max; n++) {
		uint64_t limit = ((uint64_t)1 << n) - 1;

		/* Octave boundaries are bucket boundaries: no bucket straddles limit. */
		while (b < PK_HIST_BUCKETS && pk_hist_bucket_high(b) <= limit)
			cum += h->bucket[b++];
		err |= fprintf(f, "%s_bucket", fam) < 0;
		err |= put_labels(f, s, NULL, (int)n);
		err |= fprintf(f, " %llu\n", (unsigned long long)cum) < 0;
	}
	err |= fprintf(f, "%s_bucket", fam) < 0;
	err |= put_labels(f, s, "+Inf", -1);
	err |= fprintf(f, " %llu\n", (unsigned long long)h->count) < 0;
	err |= fprintf(f, "%s_count", fam) < 0;
	err |= put_labels(f, s, NULL, -1);
	err |= fprintf(f, " %llu\n", (unsigned long long)h->count) < 0;
	err |= fprintf(f, "%s_sum", fam) < 0;
	err |= put_labels(f, s, NULL, -1);
	err |= putc(' ', f) == EOF;
	err |= put_seconds(f, h->sum);
	err |= putc('\n', f) == EOF;
	return err;
}

int pk_om_write(FILE *f, const struct pk_om_series *s, size_t n, const struct pk_om_opts *o)
{
	const char *prefix = o && o->prefix ? o->prefix : "probekit";
	unsigned int le_max = o && o->le_max_shift ? o->le_max_shift : PK_OM_LE_MAX_DEFAULT;
	int om = !o || o->format == PK_OM_OPENMETRICS;
	char fam[256];
	int err = 0, any_hist = 0;

	if (!valid_name(prefix) || le_max > 63 ||
	    (size_t)snprintf(fam, sizeof(fam), "%s_call_duration_seconds", prefix) >= sizeof(fam))
		return -EINVAL;
	if (n) {
		if (om)
			err |= fprintf(f, "# TYPE %s_calls counter\n# HELP %s_calls Calls of a probed function.\n",
				       prefix, prefix) < 0;
		else
			err |= fprintf(f, "# HELP %s_calls_total Calls of a probed function.\n# TYPE %s_calls_total counter\n",
				       prefix, prefix) < 0;
	}
	for (size_t i = 0; i < n; i++) {
		err |= fprintf(f, "%s_calls_total", prefix) < 0;
		err |= put_labels(f, &s[i], NULL, -1);
		err |= fprintf(f, " %llu\n", (unsigned long long)s[i].calls) < 0;
		any_hist |= s[i].hist != NULL;
	}
	if (any_hist) {
		if (om)
			err |= fprintf(f, "# TYPE %s histogram\n# UNIT %s seconds\n", fam, fam) < 0;
		else
			err |= fprintf(f, "# TYPE %s histogram\n", fam) < 0;
		err |= fprintf(f, "# HELP %s Inclusive duration of a probed function's calls.\n", fam) < 0;
	}
	for (size_t i = 0; i < n; i++)
		if (s[i].hist)
			err |= put_hist(f, fam, &s[i], le_max);
	if (om)
		err |= fputs("# EOF\n", f) < 0;
	return err ? -EIO : 0;
}

int pk_om_write_file(const char *path, const struct pk_om_series *s, size_t n,
		     const struct pk_om_opts *o)
{
	size_t len = strlen(path);
	int fd, ret, saved = errno;	/* restored: errno is the caller's */
	char *tmp = malloc(len + 5);
	FILE *f;

	if (!tmp)
		return -ENOMEM;
	memcpy(tmp, path, len);
	memcpy(tmp + len, ".tmp", 5);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		ret = -errno;
		free(tmp);
		errno = saved;
		return ret;
	}
	f = fdopen(fd, "w");
	if (!f) {
		ret = -errno;
		close(fd);
		goto fail;
	}
	ret = pk_om_write(f, s, n, o);
	if (fclose(f) && !ret)
		ret = -EIO;
	if (ret)
		goto fail;
	if (rename(tmp, path)) {
		ret = -errno;
		goto fail;
	}
	free(tmp);
	errno = saved;
	return 0;
fail:
	unlink(tmp);
	free(tmp);
	errno = saved;
	return ret;
}
