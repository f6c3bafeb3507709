// SPDX-License-Identifier: MIT
/* maps.c - the mappings of this process: PROCMAP_QUERY, or /proc/self/maps read whole. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/maps.h"


/* Whether PROCMAP_QUERY answers here: -1 not known yet (atomic, relaxed). */
static int query_ok = -1;

/*
 * PROBEKIT_TEST_MAPS_READ=1 keeps the reading path tested on kernels that
 * have PROCMAP_QUERY. A test hook: only the tests' copy of the library has it.
 */
static int test_maps_read(void)
{
#ifdef PK_TEST_HOOKS
	return pk_env_flag("TEST_MAPS_READ");
#else
	return 0;
#endif
}

static void copy_name(char dst[32], const char *src, size_t len)
{
	if (len > 31)
		len = 31;
	memcpy(dst, src, len);
	dst[len] = 0;
}

/*
 * The mapping holding @addr from the kernel, or with @next the first one
 * above if none does: 0, -ENOENT, or -errno (errno is the caller's).
 */
static int query(const struct pk_maps *ms, uintptr_t addr, int next,
		 struct pk_mapinfo *out)
{
	char name[PATH_MAX];	/* the kernel refuses a buffer too short */
	struct pk_procmap_query q;

	memset(&q, 0, sizeof(q));
	q.size = sizeof(q);
	q.query_addr = addr;
	q.query_flags = next ? PK_PROCMAP_COVERING_OR_NEXT_VMA : 0;
	if (ms->flags & PK_MAPS_NAME) {
		q.vma_name_addr = (uintptr_t)name;
		q.vma_name_size = sizeof(name);
	}
	if (ioctl(ms->fd, PK_PROCMAP_QUERY, &q))
		return -errno;
	out->lo = q.vma_start;
	out->hi = q.vma_end;
	out->prot = (q.vma_flags & PK_PROCMAP_VMA_READABLE ? PROT_READ : 0) |
		    (q.vma_flags & PK_PROCMAP_VMA_WRITABLE ? PROT_WRITE : 0) |
		    (q.vma_flags & PK_PROCMAP_VMA_EXECUTABLE ? PROT_EXEC : 0);
	out->shared = !!(q.vma_flags & PK_PROCMAP_VMA_SHARED);
	out->dev_major = q.dev_major;
	out->dev_minor = q.dev_minor;
	out->ino = q.inode;
	/* vma_name_size comes back 0 for a mapping without a name. */
	copy_name(out->name, name, q.vma_name_size ? q.vma_name_size - 1 : 0);
	return 0;
}

/* One line, "lo-hi perm offset dev inode   name", up to @nl (a hand parser: sscanf is slow). */
static void parse_line(const char *p, const char *nl, int names,
		       struct pk_mapinfo *mi)
{
	char *q;

	mi->lo = strtoull(p, &q, 16);
	mi->hi = strtoull(q + 1, &q, 16);
	/* q is at the space before the permissions, "rwxp". */
	mi->prot = (q[1] == 'r' ? PROT_READ : 0) | (q[2] == 'w' ? PROT_WRITE : 0) |
		   (q[3] == 'x' ? PROT_EXEC : 0);
	mi->shared = q[4] == 's';
	mi->name[0] = 0;
	/* Past the permissions and the offset: "maj:min inode". */
	p = q + 1;
	for (int field = 0; field < 2 && p < nl; field++) {
		while (p < nl && *p != ' ')
			p++;
		while (p < nl && *p == ' ')
			p++;
	}
	mi->dev_major = (unsigned int)strtoul(p, &q, 16);
	mi->dev_minor = (unsigned int)strtoul(q + 1, &q, 16);
	mi->ino = strtoull(q, &q, 10);
	if (!names)
		return;
	p = q;
	while (p < nl && *p == ' ')
		p++;
	copy_name(mi->name, p, (size_t)(nl - p));
}

/* Every mapping into @ms->m, from the start of @ms->fd: 0, or -errno. */
static int maps_read(struct pk_maps *ms)
{
	size_t size = 1 << 16, have = 0;
	char *buf = malloc(size);
	int err = 0;

	if (!buf)
		return -ENOMEM;
	if (lseek(ms->fd, 0, SEEK_SET) < 0) {
		free(buf);
		return -errno;
	}
	for (;;) {
		ssize_t r = read(ms->fd, buf + have, size - 1 - have);
		char *p = buf, *nl;

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			err = -errno;
		if (r <= 0)
			break;
		have += (size_t)r;
		buf[have] = 0;
		/* Whole lines only; a partial last line waits for more. */
		while ((nl = strchr(p, '\n'))) {
			if (PK_GROW(&ms->m, &ms->cap, ms->n + 1)) {
				err = -ENOMEM;
				goto out;
			}
			parse_line(p, nl, !!(ms->flags & PK_MAPS_NAME),
				   &ms->m[ms->n++]);
			p = nl + 1;
		}
		have -= (size_t)(p - buf);
		memmove(buf, p, have);
	}
out:
	free(buf);
	if (err)
		ms->n = 0;
	return err;
}

int pk_maps_open(struct pk_maps *ms, unsigned int flags)
{
	int saved = errno, err = 0, q;
	pid_t pid = getpid();

	ms->n = 0;
	ms->flags = flags;
	ms->query = 0;
	if (ms->fd >= 0 && ms->pid != pid) {
		/* Inherited through fork(): it names the parent's memory. */
		close(ms->fd);
		ms->fd = -1;
	}
	if (ms->fd < 0) {
		ms->fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
		if (ms->fd < 0) {
			err = -errno;
			goto out;
		}
		ms->pid = pid;
	}
	q = __atomic_load_n(&query_ok, __ATOMIC_RELAXED);
	if (q < 0) {
		struct pk_mapinfo mi;

		q = !test_maps_read() &&
		    !query(ms, (uintptr_t)pk_maps_open, 0, &mi);
		__atomic_store_n(&query_ok, q, __ATOMIC_RELAXED);
		pk_dbg("maps: mappings by %s",
		       q ? "PROCMAP_QUERY" : "reading /proc/self/maps");
	}
	ms->query = q;
	if (!q)
		err = maps_read(ms);
out:
	errno = saved;
	return err;
}

int pk_maps_find(struct pk_maps *ms, uintptr_t addr, struct pk_mapinfo *out)
{
	size_t i = PK_LOWER_BOUND(ms->n, k, ms->m[k].hi <= addr);
	int saved, err;

	if (i < ms->n && ms->m[i].lo <= addr) {
		*out = ms->m[i];
		return 0;
	}
	if (!ms->query)
		return -ENOENT;
	saved = errno;
	err = query(ms, addr, 0, out);
	/* Remembered where it sorts; if that fails, answered all the same. */
	if (!err && !PK_GROW(&ms->m, &ms->cap, ms->n + 1)) {
		memmove(&ms->m[i + 1], &ms->m[i], (ms->n - i) * sizeof(*ms->m));
		ms->m[i] = *out;
		ms->n++;
	}
	errno = saved;
	return err;
}

int pk_maps_next(struct pk_maps *ms, uintptr_t addr, struct pk_mapinfo *out)
{
	size_t i = PK_LOWER_BOUND(ms->n, k, ms->m[k].hi <= addr);
	int saved, err;

	/* Reading, the view has every mapping; querying, only some. */
	if (i < ms->n && (!ms->query || ms->m[i].lo <= addr)) {
		*out = ms->m[i];
		return 0;
	}
	if (!ms->query)
		return -ENOENT;
	saved = errno;
	err = query(ms, addr, 1, out);
	errno = saved;
	return err;
}

void pk_maps_close(struct pk_maps *ms)
{
	int saved = errno;

	if (ms->fd >= 0)
		close(ms->fd);
	free(ms->m);
	*ms = (struct pk_maps)PK_MAPS_INIT;
	errno = saved;
}
