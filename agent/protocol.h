/* SPDX-License-Identifier: MIT */
/* protocol.h - the counts file shared by `probekit count` and its preloaded agent. */
#ifndef PK_AGENT_PROTOCOL_H
#define PK_AGENT_PROTOCOL_H

#include <stdint.h>

/*
 * `probekit count` runs the command with the agent (libprobekit-agent.so) in
 * LD_PRELOAD and these in the environment:
 *
 *   PROBEKIT_COUNT_DIR     a directory private to this run
 *   PROBEKIT_COUNT_PROBES  the probe specs, separated by PKC_SEP
 *
 * Every process that loads the agent creates a file of its own in DIR,
 * named <pid>-XXXXXX (mkostemp: unique even when a program exec()s in
 * place and keeps its pid), one struct pkc_file, maps it shared and counts hits straight into it. So counts
 * survive a process that ends by _exit() or by a signal (no destructor has
 * to run), and a fork()ed child, which keeps the mapping, adds to its
 * parent's file. A program started by exec() gets a file of its own. The
 * CLI reads every file in DIR whose name does not start with a dot.
 */
#define PKC_MAGIC 0x706b636eu	/* "pkcn" */
#define PKC_VERSION 2
#define PKC_MAX 64		/* probe specs per run */
#define PKC_SEP '\n'
#define PKC_PENDING INT32_MIN	/* status before the agent tried the spec */
#define PKC_WHY_LEN 96

struct pkc_file {
	uint32_t magic;		/* PKC_MAGIC, stored last (release) */
	uint32_t version;
	uint32_t n;		/* specs in this file */
	int32_t status[PKC_MAX]; /* 0 armed, -errno, or PKC_PENDING */
	int32_t int3[PKC_MAX];	/* armed as an int3 probe (~1 us a hit) */
	struct {		/* hits; atomic; a cache line each, so that */
		uint64_t n;	/* threads hitting different functions do */
		uint64_t pad[7]; /* not share one */
	} count[PKC_MAX] __attribute__((aligned(64)));
	char why[PKC_MAX][PKC_WHY_LEN];	/* the log line of a failure */
};

#endif /* PK_AGENT_PROTOCOL_H */
