/* SPDX-License-Identifier: MIT */
/* protocol.h - the seam between the probekit command and its preloaded agent: environment, shared records, versions. */
#ifndef PK_AGENT_PROTOCOL_H
#define PK_AGENT_PROTOCOL_H

#include <stdint.h>

/*
 * The command (cli/) does not link libprobekit: this header is all it
 * shares with the agent (agent/, libprobekit-agent.so). A run:
 *
 *  1. The command makes a directory private to the run and starts COMMAND
 *     with the agent first in LD_PRELOAD and, in the environment,
 *       PROBEKIT_AGENT_DIR    that directory
 *       PROBEKIT_AGENT_MODE   what to do, by name: "count" (enum pka_mode)
 *       PROBEKIT_AGENT_SPECS  the probe specs, separated by PKA_SEP
 *     Every process of COMMAND inherits them, and every program it exec()s
 *     loads the agent again.
 *  2. In each process the agent's constructor, before main(), creates a
 *     record of its own in the directory: a file named <pid>-XXXXXX
 *     (mkostemp: unique even when a program exec()s in place and keeps its
 *     pid), struct pka_header, the mode's body and a why line per spec
     (see struct pka_header), its blocks reserved
     (posix_fallocate: a full file system must not become a SIGBUS in the
     program; without room the file stays empty and the agent does
     nothing else) and mapped shared. It fills
 *     the header and stores magic last (release); it creates every spec's
 *     probe and sets n, then arms them as one batch, writing each spec's
 *     result into spec[] (a failed batch rewrites them: a reader may see a
 *     spec's status go from 0 to -errno). From then on the mode's handlers
 *     write straight into the body. So a record
 *     outlives a process that ends by _exit() or by a signal (no destructor
 *     has to run), and a fork()ed child, which keeps the mapping, adds to
 *     its parent's record.
 *  3. The command reads every file in the directory whose name does not
 *     start with a dot: while COMMAND runs (the figures move as it reads),
 *     and once after COMMAND ended, removing them.
 *
 * A mode the agent does not serve is refused, not ignored: the record has
 * mode PKA_MODE_NONE, status -EINVAL and the reason in why, and nothing is
 * armed in that process. magic and version are the first two fields in
 * every version of this protocol, so the command can tell a record of
 * another version from garbage; it reads nothing else of a record whose
 * version is not its own. (Version 2, libprobekit-count.so, had another
 * magic and environment: it makes no record here at all.) A process
 * started without all three variables makes no record either.
 */
#define PKA_ENV_DIR "PROBEKIT_AGENT_DIR"
#define PKA_ENV_MODE "PROBEKIT_AGENT_MODE"
#define PKA_ENV_SPECS "PROBEKIT_AGENT_SPECS"

#define PKA_MAGIC 0x706b6167u	/* "pkag" */
#define PKA_VERSION 4		/* 3: why was 96 bytes; 2: libprobekit-count.so */
#define PKA_MAX 64		/* probe specs per run */
#define PKA_SEP '\n'
#define PKA_PENDING INT32_MIN	/* spec status before the agent tried it */
/*
 * A log line of the library is at most 511 bytes (pk_log()'s buffer): a
 * why holds any of them whole, so the command never prints a cut message.
 */
#define PKA_WHY_LEN 512

/*
 * What the agent does with the specs. PROBEKIT_AGENT_MODE names one; the
 * record's mode says which one was served, and so which body follows the
 * header. A new subcommand adds a mode here and a handler in agent/.
 */
enum pka_mode {
	PKA_MODE_NONE = 0,	/* refused: see status and why */
	PKA_MODE_COUNT = 1,	/* "count": struct pka_count_record */
};

/*
 * How arming one spec went in one process; the same in every mode. Its
 * failure's log line is in the record's tail (pka_spec_why()).
 */
struct pka_spec {
	int32_t status;		/* 0 armed, -errno, or PKA_PENDING */
	int32_t int3;		/* armed as an int3 probe (~1 us a hit) */
};

/*
 * A record: the mode's struct (this header first, then its body), then a
 * tail of nwhy log lines of PKA_WHY_LEN bytes, one per spec of the run:
 * the room for whole lines is paid for the specs given, not for PKA_MAX
 * (a record's blocks are reserved, and a build makes thousands).
 */
struct pka_header {
	uint32_t magic;		/* PKA_MAGIC, stored last (release) */
	uint32_t version;	/* PKA_VERSION */
	uint32_t size;		/* bytes of the record: why_at + nwhy lines */
	uint32_t mode;		/* enum pka_mode served, or PKA_MODE_NONE */
	int32_t status;		/* 0, or -errno: the agent refused the run */
	uint32_t n;		/* specs in spec[], set once all were tried */
	uint32_t why_at;	/* offset of the tail: the mode struct's size */
	uint32_t nwhy;		/* lines in the tail: the run's specs */
	char why[2 * PKA_WHY_LEN]; /* the refusal, for the command to print */
	struct pka_spec spec[PKA_MAX];
};

/* The bytes of a record of a mode struct of @base bytes, for @n specs. */
#define PKA_RECORD_SIZE(base, n) ((uint32_t)(base) + (uint32_t)(n) * PKA_WHY_LEN)

/*
 * pka_spec_why() - spec @i's log line in record @h, or NULL if the record
 * has none for it (a reader checks size, why_at and nwhy against what it
 * read before it trusts this).
 */
static inline char *pka_spec_why(struct pka_header *h, uint32_t i)
{
	if (i >= h->nwhy ||
	    (uint64_t)h->why_at + (uint64_t)(i + 1) * PKA_WHY_LEN > h->size)
		return (char *)0;
	return (char *)h + h->why_at + (uint64_t)i * PKA_WHY_LEN;
}

/* PKA_MODE_COUNT: entries into each spec's function. */
struct pka_count_record {
	struct pka_header h;
	struct {		/* hits; atomic; a cache line each, so that */
		uint64_t n;	/* threads hitting different functions do */
		uint64_t pad[7]; /* not share one */
	} count[PKA_MAX] __attribute__((aligned(64)));
};

#endif /* PK_AGENT_PROTOCOL_H */
