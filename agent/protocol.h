/* SPDX-License-Identifier: MIT */
/* protocol.h - the seam between the probekit command and its preloaded agent: environment, shared records, versions. */
#ifndef PK_AGENT_PROTOCOL_H
#define PK_AGENT_PROTOCOL_H

#include <stdint.h>

/*
 * The command (cli/) does not link libprobekit: this header is all it
 * shares with the agent (agent/, libprobekit-agent.so). A run:
 *
 *  1. The command makes a directory private to the run, writes the probe
 *     specs into a file there (PKA_SPECS_FILE: the specs separated by
 *     PKA_SEP, then one NUL byte; thousands of specs would not fit in one
 *     environment string, which the kernel caps at 128 KiB) and starts
 *     COMMAND with the agent first in LD_PRELOAD and, in the environment,
 *       PROBEKIT_AGENT_DIR    that directory
 *       PROBEKIT_AGENT_MODE   what to do, by name: "count" (enum pka_mode)
 *       PROBEKIT_AGENT_SPECS  the path of the specs file
 *     Every process of COMMAND inherits them, and every program it exec()s
 *     loads the agent again.
 *  2. In each process the agent's constructor, before main(), creates a
 *     record of its own in the directory: a file named <pid>-XXXXXX
 *     (mkostemp: unique even when a program exec()s in place and keeps its
 *     pid). The agent sizes it (pka_record_size()): struct pka_header, a
 *     struct pka_spec per spec, a struct pka_probe and a slot of the
 *     mode's per-probe struct per probe (nprobe: what the specs expanded
 *     to in this process, known only there: a glob's every function,
 *     each function once, under the first spec matching it; a spec
 *     reports probes first .. first + nprobe - 1, which are another
 *     spec's when that one took all of its functions), and a pool for
 *     the log lines (pka_why_len()) and the probes' names (the rest). Its blocks are reserved
 *     (posix_fallocate: a full file system must not become a SIGBUS in the
 *     program; without room the file stays empty and the agent does
 *     nothing else) and mapped shared. It fills the header and stores
 *     magic last (release); it creates every spec's probe and sets n, then
 *     arms them as one batch, writing each spec's result into its struct
 *     pka_spec (a failed batch rewrites them: a reader may see a spec's
 *     status go from 0 to -errno); meanwhile arm_planned, arm_done and
 *     arm_state say how far it is (the command's progress line). From
 *     then on the mode's handlers write straight into the slots. So a record outlives a process that ends by
 *     _exit() or by a signal (no destructor has to run), and a fork()ed
 *     child, which keeps the mapping, adds to its parent's record.
 *  3. The command reads every file in the directory whose name does not
 *     start with a dot, each at the size the file has: while COMMAND runs
 *     (the figures move as it reads), and once after COMMAND ended,
 *     removing them. A record names its process (pid) and the program
 *     image it was made in (exe_dev, exe_ino), so the command can tell
 *     which processes of COMMAND loaded no agent; a process of that image
 *     with the same env_start is one of its fork()ed (or vfork()ed)
 *     children that has not exec()ed, whose hits land in that record.
 *     A process seen only once it had ended (a zombie: its name is all
 *     that is left) named as a record's process (comm) is taken for a
 *     fork()ed child of it.
 *  4. One more kind of file, never a record (the command only reads its
 *     name): <pid>-XXXXXX.fsize, an empty file: process <pid> made no
 *     record because its file size limit (RLIMIT_FSIZE, ulimit -f) is
 *     below the record's size; the agent never grows a file past the
 *     limit (the kernel would kill the program with SIGXFSZ).
 *
 * A mode the agent does not serve is refused, not ignored: the record has
 * mode PKA_MODE_NONE, status -EINVAL and the reason in why, and nothing is
 * armed in that process. magic and version are the first two fields in
 * every version of this protocol, so the command can tell a record of
 * another version from garbage; it reads nothing else of a record whose
 * version is not its own. (Version 2, libprobekit-count.so, had another
 * magic and environment: it makes no record here at all.) A process
 * started without all three variables, or whose specs file is gone or
 * malformed, makes no record either.
 */
#define PKA_ENV_DIR "PROBEKIT_AGENT_DIR"
#define PKA_ENV_MODE "PROBEKIT_AGENT_MODE"
#define PKA_ENV_SPECS "PROBEKIT_AGENT_SPECS"
#define PKA_SPECS_FILE ".specs"	/* in the run's directory: never a record */
#define PKA_FSIZE_SUFFIX ".fsize" /* <pid>-XXXXXX.fsize: over ulimit -f */

#define PKA_MAGIC 0x706b6167u	/* "pkag" */
/* 8: arming's progress in the header (arm_planned, arm_done, arm_state);
 * 7: the time mode (PKA_MODE_TIME, PKA_ENV_CLOCK) and a mode's own area
 * after the pool (mode_at, mode_len in the header);
 * 6: env_start and comm in the header, .fsize files;
 * 5: specs in a file, arrays sized by the record; 4: at most 64 specs;
 * 3: why was 96 bytes; 2: libprobekit-count.so */
#define PKA_VERSION 8
/* Specs per run: a bound on the record's size (32-bit offsets), no more. */
#define PKA_SPECS_MAX (1u << 20)
#define PKA_SEP '\n'
#define PKA_PENDING INT32_MIN	/* spec status before the agent tried it */
/*
 * A log line of the library is at most 511 bytes (pk_log()'s buffer): a
 * why holds any of them whole, so the command never prints a cut message.
 */
#define PKA_WHY_LEN 512
/*
 * The log-line pool holds lines at their length (and a NUL each), in
 * PKA_WHY_LEN bytes a spec up to this many specs: whole lines for every
 * spec of a small run, and for the first few hundred failures of a large
 * one (a spec whose line found no room has errno only), without paying
 * 512 bytes a spec in every process's record.
 */
#define PKA_WHY_LINES 64u

/*
 * What the agent does with the specs. PROBEKIT_AGENT_MODE names one; the
 * record's mode says which one was served, and so which per-probe struct
 * the slots hold. A new subcommand adds a mode here and a handler in
 * agent/.
 */
enum pka_mode {
	PKA_MODE_NONE = 0,	/* refused: see status and why */
	PKA_MODE_COUNT = 1,	/* "count": struct pka_count slots */
	PKA_MODE_TIME = 2,	/* "time": struct pka_time slots, and a
				 * struct pka_time_area at mode_at */
	PKA_MODE_TRACE = 3,	/* "trace": struct pka_count slots (calls
				 * seen), a struct pka_trace_area at mode_at
				 * and a ring file */
	PKA_MODE_STAT = 4,	/* "stat": struct pka_stat slots, and a
				 * struct pka_stat_area at mode_at */
};

/*
 * How arming one spec went in one process; the same in every mode.
 */
struct pka_spec {
	int32_t status;		/* 0 armed (some of its probes), -errno, or
				 * PKA_PENDING */
	uint32_t int3;		/* its probes armed as int3 probes (~1 us a hit) */
	uint32_t first;		/* its first probe */
	uint32_t nprobe;	/* and how many it has */
	uint32_t why;		/* its failure's log line: 1 + offset in the
				 * pool, or 0 */
	uint32_t left_out;	/* a late glob's functions not probed: no
				 * room left among its reserved slots (0
				 * before version 7's late globs said it) */
};

/* One probe a spec expanded to in one process: the function it is on. */
struct pka_probe {
	uint32_t spec;		/* the spec it comes from */
	int32_t status;		/* 0 armed, -errno, or PKA_PENDING */
	uint32_t int3;		/* armed as an int3 probe */
	uint32_t name;		/* its function: 1 + offset of its name in the
				 * pool, or 0: the spec names it */
};

/*
 * A record: this header, spec[nspec] at spec_at, probe[nprobe] at
 * probe_at, nprobe slots of slot_size bytes at slot_at (64-byte aligned),
 * the pool of why_len bytes at why_at (at least pka_why_len(nspec): the
 * log lines' share, then room for the probes' names), then the mode's own
 * area of mode_len bytes at mode_at (pka_mode_at(): 64-byte aligned; 0
 * bytes for count); size is the sum (the file's size).
 */
struct pka_header {
	uint32_t magic;		/* PKA_MAGIC, stored last (release) */
	uint32_t version;	/* PKA_VERSION */
	uint32_t size;		/* bytes of the record */
	uint32_t mode;		/* enum pka_mode served, or PKA_MODE_NONE */
	int32_t status;		/* 0, or -errno: the agent refused the run */
	uint32_t n;		/* specs tried, set once all were */
	uint32_t nspec;		/* specs of the run: spec[] */
	uint32_t nprobe;	/* probe slots */
	uint32_t spec_at;
	uint32_t slot_at;
	uint32_t slot_size;	/* the mode's per-probe struct */
	uint32_t why_at;
	uint32_t why_len;
	uint32_t why_used;	/* pool bytes taken (atomic) */
	int32_t pid;		/* the process that made it */
	uint32_t probe_at;
	uint64_t exe_dev;	/* its program image: /proc/self/exe's */
	uint64_t exe_ino;	/* st_dev and st_ino, 0 if unknown */
	uint64_t env_start;	/* where its environment strings begin (the
				 * kernel's env_start, /proc/PID/stat field
				 * 50): the same in the fork()ed children that
				 * did not exec, new in every exec; 0 if
				 * unknown */
	char comm[16];		/* its name then (PR_GET_NAME) */
	char why[2 * PKA_WHY_LEN]; /* the refusal, for the command to print */
	uint32_t mode_at;	/* the mode's area (version 7) */
	uint32_t mode_len;
	/*
	 * How far arming is (version 8), for the command's progress line:
	 * relaxed atomic stores, read while the agent writes them, so a
	 * reader may see an older value, never a torn one.
	 */
	uint32_t arm_planned;	/* probes to create here */
	uint32_t arm_done;	/* of them tried so far */
	uint32_t arm_state;	/* enum pka_arm_state */
	uint32_t arm_pad;
};

/* Where arming is in a record's process (arm_state). */
enum pka_arm_state {
	PKA_ARM_START = 0,	/* not yet creating probes */
	PKA_ARM_CREATE = 1,	/* creating them: arm_done of arm_planned */
	PKA_ARM_REGISTER = 2,	/* registering them all, one batch */
	PKA_ARM_DONE = 3,	/* done (or failed): main() may run */
};

/* Where each part of a record goes. */
static inline uint32_t pka_spec_at(void)
{
	return (uint32_t)sizeof(struct pka_header);
}

static inline uint32_t pka_probe_at(uint32_t nspec)
{
	return pka_spec_at() + nspec * (uint32_t)sizeof(struct pka_spec);
}

static inline uint64_t pka_slot_at(uint32_t nspec, uint32_t nprobe)
{
	return ((uint64_t)pka_probe_at(nspec) +
		(uint64_t)nprobe * sizeof(struct pka_probe) + 63u) & ~(uint64_t)63u;
}

static inline uint32_t pka_why_len(uint32_t nspec)
{
	return (nspec < PKA_WHY_LINES ? nspec : PKA_WHY_LINES) * PKA_WHY_LEN;
}

/* Where the mode's area begins, after a pool that ends at @pool_end. */
static inline uint64_t pka_mode_at(uint64_t pool_end)
{
	return (pool_end + 63u) & ~(uint64_t)63u;
}

/*
 * pka_record_size() - the bytes of a record of @nspec specs (at most
 * PKA_SPECS_MAX) and @nprobe slots of @slot bytes (no mode area, no
 * names).
 */
static inline uint64_t pka_record_size(uint32_t slot, uint32_t nspec,
				       uint32_t nprobe)
{
	return pka_slot_at(nspec, nprobe) + (uint64_t)nprobe * slot +
	       pka_why_len(nspec);
}

/*
 * pka_record_spec() - spec @i of record @h (its header checked by the
 * reader: spec_at + nspec specs within size).
 */
static inline struct pka_spec *pka_record_spec(struct pka_header *h,
					       uint32_t i)
{
	return (struct pka_spec *)((char *)h + h->spec_at) + i;
}

/* pka_record_probe() - probe @i of record @h. */
static inline struct pka_probe *pka_record_probe(struct pka_header *h,
						 uint32_t i)
{
	return (struct pka_probe *)((char *)h + h->probe_at) + i;
}

/* pka_record_slot() - probe @i's slot in record @h. */
static inline void *pka_record_slot(struct pka_header *h, uint32_t i)
{
	return (char *)h + h->slot_at + (uint64_t)i * h->slot_size;
}

/*
 * pka_spec_why() - spec @i's log line in record @h, or NULL if it has
 * none (a reader checks the header against what it read first, and that
 * the pool ends with a NUL).
 */
static inline const char *pka_spec_why(struct pka_header *h, uint32_t i)
{
	uint32_t at = pka_record_spec(h, i)->why;

	if (!at || at > h->why_len)
		return (const char *)0;
	return (const char *)h + h->why_at + at - 1;
}

/* PKA_MODE_COUNT: entries into a probe's function. */
struct pka_count {		/* hits; atomic; a cache line each, so that */
	uint64_t n;		/* threads hitting different functions do */
	uint64_t pad[7];	/* not share one */
};

/*
 * PKA_MODE_TIME: the inclusive duration of each call of a probe's
 * function, from a return probe (entry: a clock reading in the call's
 * data; return: the difference, in ns, less the timing's own cost).
 *
 * Where a duration goes. No cache line is written by two threads per
 * call: each thread of a process claims a struct pka_time_thread in the
 * record's area (compare-and-swap of its owner, pid and tid: a fork()ed
 * child claims its own, a thread gone without a trace is taken over by
 * a new one, whose durations then add to its cells), and the first
 * time it returns from probe i it takes a cell (struct pka_time_cell,
 * an atomic bump of cells_used), which it alone writes from then on. A
 * duration is one histogram record in the thread's cell: calls, total,
 * min, max exact, percentiles within PKA_TIME_REL_ERR. Everything is in
 * the shared record, written as the call returns: a process that ends by
 * _exit() or a signal has reported all its calls that returned (the same
 * promise as count's); a call still running then is not counted. The
 * record is fixed in size, so a thread that finds no free thread block
 * (more than nthr threads alive at once) or no free cell (more than
 * ncell (thread, function) pairs) adds the call to the probe's slot
 * instead (struct pka_time, atomic adds: calls, total, min and max exact,
 * no histogram); the command adds both and says how many calls have no
 * histogram.
 *
 * Sizes: a slot is 64 bytes; a cell 64 + 4 * PKA_TIME_BUCKETS = 4160
 * bytes; a thread block 64 + 4 * nprobe bytes rounded up to 64; ncell is
 * min(PKA_TIME_THREADS * nprobe, PKA_TIME_CELLS) (a glob of 1 700
 * functions: 256 cells, 1.06 MiB, plus 32 blocks of 6.8 KiB; one
 * function: 32 cells, 133 KiB).
 *
 * Histogram: prof/hist.h's buckets (2^5 linear sub-buckets per octave)
 * below 2^36 ns (68.7 s), with 32-bit counts (one thread's calls of one
 * function in one bucket); longer calls count in the last bucket (their
 * min, max and total stay exact). A bucket that holds 2^32 - 1 takes no
 * more: the thread's further calls in it go to the slot (calls without
 * histogram), and a cell's calls are its buckets' sum (the command reads
 * that, not calls, which a live thread may have bumped after the
 * buckets were read). The command copies them into a
 * struct pk_hist to merge and report.
 */
#define PKA_ENV_CLOCK "PROBEKIT_AGENT_CLOCK" /* "SOURCE:MULT:SHIFT" of
				 * the command's calibration (prof/tsc.h):
				 * no process calibrates; without it, the
				 * CLOCK_MONOTONIC_RAW fallback */
#define PKA_TIME_BUCKETS 1024u	/* pk_hist_index(2^36 - 1) + 1 */
#define PKA_TIME_THREADS 32u
#define PKA_TIME_CELLS 256u
#define PKA_TIME_REL_ERR (1.0 / 64)

/*
 * A probe's calls that found no cell; atomic. And its calls not timed at
 * all (missed): the return-probe library could not take their return
 * (deeper than PK_RETPROBE_DEPTH in one thread, a thread beyond its
 * record blocks, PROBEKIT_RETPROBE_THREADS; a hit inside a handler), and
 * adds each to it (pk_retprobe_opts.missed).
 */
struct pka_time {
	uint64_t calls;
	uint64_t total_ns;
	uint64_t min_inv;	/* ~min (atomic max): 0 is none */
	uint64_t max_ns;
	uint64_t missed;	/* calls not timed */
	uint64_t pad[3];
};

/* One thread's durations of one probe's calls; written by that thread. */
struct pka_time_cell {
	uint32_t probe;		/* its probe, set before the thread's block
				 * names the cell */
	uint32_t thread;	/* its thread block */
	uint64_t calls;
	uint64_t total_ns;
	uint64_t min_inv;	/* ~min: zero-filled is empty */
	uint64_t max_ns;
	uint64_t pad[3];
	uint32_t bucket[PKA_TIME_BUCKETS];
};

/* One thread's cells, by probe. */
struct pka_time_thread {
	uint64_t owner;		/* atomic: pid << 32 | tid, or 0 */
	uint64_t pad[7];
	uint32_t cell[];	/* [nprobe]: 1 + its cell, or 0 */
};

/* The time mode's area: this, then nthr blocks, then ncell cells. */
struct pka_time_area {
	uint32_t nthr;		/* thread blocks of thr_size bytes at thr_at */
	uint32_t thr_size;	/* (offsets from the record's start) */
	uint32_t thr_at;
	uint32_t ncell;		/* cells at cell_at */
	uint32_t cell_at;
	uint32_t cells_used;	/* atomic; may run past ncell */
	uint32_t source;	/* the clock: enum pk_tsc_source */
	int32_t cal_status;	/* the overhead calibration: 0, or -errno */
	uint64_t overhead_ns;	/* subtracted from every duration: what an
				 * empty function's timed call measures */
	uint64_t cal_raw_ns;	/* that call's median before, for the record */
	uint64_t pad[2];
};

/* A thread block's bytes, for @nprobe probes. */
static inline uint64_t pka_time_thr_size(uint32_t nprobe)
{
	return (sizeof(struct pka_time_thread) + 4ull * nprobe + 63u) &
	       ~(uint64_t)63u;
}

static inline uint32_t pka_time_ncell(uint32_t nprobe)
{
	uint64_t n = (uint64_t)PKA_TIME_THREADS * nprobe;

	return n < PKA_TIME_CELLS ? (uint32_t)n : PKA_TIME_CELLS;
}

/* pka_time_area_size() - the time mode's area for @nprobe probes. */
static inline uint64_t pka_time_area_size(uint32_t nprobe)
{
	return sizeof(struct pka_time_area) +
	       PKA_TIME_THREADS * pka_time_thr_size(nprobe) +
	       (uint64_t)pka_time_ncell(nprobe) * sizeof(struct pka_time_cell);
}

/*
 * PKA_MODE_TRACE: one event per call (struct pka_trace_event: entry
 * clock reading, duration, pid, tid, probe, depth, the first nargs
 * integer argument registers, the return value), from a return probe,
 * into a per-thread ring buffer in shared memory that the command drains
 * while COMMAND runs and once it ended.
 *
 * Where the rings are, and why not in the record: a record is read whole
 * (pread) at every poll and must stay about a megabyte at most; rings are
 * --buffer-size per thread (1 MiB by default) and the command has to
 * write each ring's tail back. So each process's agent makes a second
 * file in the run's directory, PKA_TRACE_PREFIX<pid>-XXXXXX (a leading
 * dot: never taken for a record, removed with the directory), names it in
 * its record's area (ring[]), and maps its header shared, and each
 * block when a thread first claims it; the command maps it whole,
 * read-write, and unmaps it once the process is gone. The file is sparse (ftruncate) but for its header and the
 * rings' indices (posix_fallocate): a block's bytes are reserved
 * (MADV_POPULATE_WRITE, which fails where a write would be SIGBUS)
 * PKA_TRACE_CHUNK bytes at a time as its producer reaches them, so a
 * thread of ten calls costs 64 KiB, and a full file system is lost calls
 * or drops, never a SIGBUS; neither side touches a block's bytes before
 * they are reserved (ready), so the command's reads fault in no hole.
 *
 * A ring: its indices (struct pka_trace_thread) in the file's header,
 * its nslot events of ev_size bytes in its block. One producer (the
 * thread owning the ring: claimed by compare-and-swap of owner as time's
 * blocks are, a gone thread's taken over by a new one),
 * one consumer (the command). The producer writes event head % nslot,
 * then stores head + 1 (release); the consumer loads head (acquire),
 * copies the events, then stores tail (release), which the producer
 * loads (acquire) before it reuses a slot. A full ring (head - tail ==
 * nslot) drops the new event and counts it in drops (the producer's; the
 * command reads it with head). An event is in shared memory once its
 * call returned: nothing needs flushing at exit, exec, _exit() or a
 * fatal signal; a call still running then has no event.
 *
 * Filters applied in the agent, so that they cost no ring space:
 * min_ns (--min-duration), depth (--depth: calls nested at most that deep
 * among traced calls, 1 being the outermost), pid and tid (0: any).
 * PKA_ENV_TRACE carries them and the sizes:
 * "NARGS:BUFFER_BYTES:MIN_NS:DEPTH:PID:TID".
 *
 * A call that finds no ring at its entry (more than nthr threads alive
 * at once in a process and its fork()ed children, or no room for the
 * block: ring_err says why), or that finds PKA_TRACE_DEPTH traced
 * calls in flight in its thread (counted in deep too), counts in the
 * area's lost (atomic), before any filter but pid and tid. The record's slots (struct pka_count) are not used. So for
 * the calls that returned and passed the filters, events + drops == calls
 * when lost is 0.
 */
#define PKA_ENV_TRACE "PROBEKIT_AGENT_TRACE"
#define PKA_TRACE_PREFIX ".trace-"
#define PKA_TRACE_MAGIC 0x706b7472u	/* "pktr" */
#define PKA_TRACE_THREADS 64u
#define PKA_TRACE_ARGS 6u
#define PKA_TRACE_DEPTH 128u	/* PK_RETPROBE_DEPTH: calls in flight a thread */
#define PKA_TRACE_BUF_DEFAULT (1u << 20)
#define PKA_TRACE_CHUNK (64u << 10)
#define PKA_TRACE_BUF_MIN 4096u
#define PKA_TRACE_BUF_MAX (256u << 20)

struct pka_trace_area {
	char ring[32];		/* the ring file's name in the run's directory,
				 * set before the first event; "" none yet */
	int32_t status;		/* 0, or -errno: no ring file (nothing traced) */
	uint32_t nargs;		/* argument registers kept per event */
	uint64_t lost;		/* atomic: calls with no ring to go to */
	uint64_t min_ns;	/* the filters the agent applied */
	uint32_t depth, pid, tid;
	uint32_t source;	/* the clock: enum pk_tsc_source */
	int32_t ring_err;	/* 0, or the -errno that last left a thread
				 * without a ring (reserving its first
				 * bytes failed: MADV_POPULATE_WRITE is
				 * EINVAL before Linux 5.14, ENOSPC on a
				 * full disk) */
	uint64_t deep;		/* atomic: of lost, the calls skipped
				 * because PKA_TRACE_DEPTH traced calls
				 * were in flight in the thread */
	uint32_t nthr;		/* rings in the file */
	uint32_t pad0;
	uint64_t missed;	/* atomic: calls whose return the library
				 * could not probe (pk_retprobe_opts.missed:
				 * deeper than PK_RETPROBE_DEPTH, no record
				 * block, inside a handler); the command
				 * adds them to lost */
};

/*
 * The ring file: this header (a page), then nthr struct pka_trace_thread
 * (the rings' indices, PKA_TRACE_HDR bytes in all with the header, always
 * reserved: nothing reads or writes a block before its bytes are), then
 * nthr blocks of thr_size bytes, each a struct pka_trace_ring.
 */
struct pka_trace_file {
	uint32_t magic;		/* PKA_TRACE_MAGIC */
	uint32_t nthr;
	uint64_t thr_size;	/* bytes of a block: a multiple of 4096 */
	uint32_t ev_size;	/* bytes of an event: 40 + 8 * nargs */
	uint32_t nslot;		/* events a ring holds */
	uint64_t size;		/* of the file: PKA_TRACE_HDR + nthr * thr_size */
};

/* One ring's indices: the producer's cache line, then the consumer's. */
struct pka_trace_thread {
	uint64_t owner;		/* atomic: pid << 32 | tid, or 0 */
	uint64_t head;		/* producer: events written (release) */
	uint64_t drops;		/* producer: events dropped, ring full */
	uint32_t ready;		/* its block's first PKA_TRACE_CHUNK bytes are
				 * reserved (release) */
	uint32_t pos;		/* producer's: the next event's slot */
	uint64_t reserved;	/* producer's: bytes of the block reserved,
				 * from its start (page-aligned) */
	uint64_t pad1[3];
	uint64_t tail;		/* consumer: events read (release) */
	uint64_t pad2[7];
};

#define PKA_TRACE_HDR (4096u + PKA_TRACE_THREADS * \
		       (uint32_t)sizeof(struct pka_trace_thread))

/* A block: the producer's depth stack, then nslot events. */
struct pka_trace_ring {
	uint64_t sp[PKA_TRACE_DEPTH]; /* producer's: the entry stack pointers
				 * of its traced calls in flight (agent/trace.c) */
};

struct pka_trace_event {
	uint64_t t0;		/* entry: clock ticks (PKA_ENV_CLOCK's clock) */
	uint64_t dur_ns;	/* inclusive duration */
	uint32_t pid, tid;
	uint32_t probe;		/* the record's probe */
	uint16_t depth;		/* 1: outermost traced call of its thread */
	uint16_t pad;
	uint64_t ret;		/* rax at the return */
	uint64_t args[];	/* nargs of rdi, rsi, rdx, rcx, r8, r9 */
};

static inline uint32_t pka_trace_ev_size(uint32_t nargs)
{
	return (uint32_t)sizeof(struct pka_trace_event) + 8u * nargs;
}

/* A block's bytes for rings of @buf bytes of events of @ev bytes. */
static inline uint64_t pka_trace_thr_size(uint64_t buf, uint32_t ev)
{
	uint64_t n = buf / ev;

	return (sizeof(struct pka_trace_ring) + n * ev + 4095u) &
	       ~(uint64_t)4095u;
}

/*
 * PKA_MODE_STAT: the page faults and context switches incurred inside
 * each call of a probe's function, from a return probe that reads the
 * thread's own counters at entry and at return: getrusage(RUSAGE_THREAD)
 * (ru_minflt, ru_majflt, ru_nvcsw, ru_nivcsw: the kernel's per-task
 * counts), one system call at each end (agent/stat.c says why that and
 * not perf_event_open or /proc). A call's figures are the differences:
 * inclusive, so what a nested probed call incurs (its own two reads
 * included) counts for its caller too.
 *
 * Where they go: as time's (PKA_MODE_TIME), per thread and function, a
 * cell (struct pka_stat_cell) in the record's area that only that thread
 * writes, named by the thread's block (struct pka_stat_thread, claimed
 * by compare-and-swap of its owner, pid and tid); both are found at the
 * call's entry, before the entry reading, so that their first touch (a
 * page fault) is not inside the call. A call that finds no block (more
 * than nthr threads alive at once) or no cell (more than ncell (thread,
 * function) pairs) goes to the probe's slot (struct pka_stat, atomic
 * adds). A call entered in one process and returning in another (its
 * function fork()ed) counts in the child what the child incurred (its
 * counters start at 0 at the fork). Everything is in the shared record
 * as the call returns: _exit() and fatal signals lose nothing that
 * returned; a call that never returns (longjmp, an exception, exec)
 * counts nowhere, and its faults count in its probed callers.
 *
 * Sizes: a slot and a cell are 64 bytes; a thread block 64 + 4 * nprobe
 * bytes rounded up to 64; ncell = min(PKA_STAT_THREADS * nprobe,
 * PKA_STAT_CELLS) (one function: 64 cells, 12 KiB in all; a glob of 1 700
 * functions: 2048 cells, 560 KiB).
 */
#define PKA_STAT_THREADS 64u
#define PKA_STAT_CELLS 2048u

/*
 * A probe's calls that found no cell (atomic), and its calls not counted
 * at all (missed: the return-probe library could not take their return,
 * as pka_time's missed).
 */
struct pka_stat {
	uint64_t calls;
	uint64_t minflt;	/* minor faults inside the calls */
	uint64_t majflt;	/* major faults */
	uint64_t nvcsw;		/* voluntary context switches */
	uint64_t nivcsw;	/* involuntary */
	uint64_t missed;	/* calls not counted */
	uint64_t pad[2];
};

/* One thread's figures for one probe; written by that thread only. */
struct pka_stat_cell {
	uint32_t probe;		/* its probe, set before the block names it */
	uint32_t thread;	/* its thread block */
	uint64_t calls;
	uint64_t minflt, majflt, nvcsw, nivcsw;
	uint64_t pad[2];
};

/* One thread's cells, by probe. */
struct pka_stat_thread {
	uint64_t owner;		/* atomic: pid << 32 | tid, or 0 */
	uint64_t pad[7];
	uint32_t cell[];	/* [nprobe]: 1 + its cell, or 0 */
};

/* The stat mode's area: this, then nthr blocks, then ncell cells. */
struct pka_stat_area {
	uint32_t nthr;		/* thread blocks of thr_size bytes at thr_at */
	uint32_t thr_size;	/* (offsets from the record's start) */
	uint32_t thr_at;
	uint32_t ncell;		/* cells at cell_at */
	uint32_t cell_at;
	uint32_t cells_used;	/* atomic; may run past ncell */
	int32_t status;		/* 0, or the -errno getrusage(RUSAGE_THREAD)
				 * gave at start (nothing counted then) */
	uint32_t pad0;
	uint64_t pad[4];
};

/* A thread block's bytes, for @nprobe probes. */
static inline uint64_t pka_stat_thr_size(uint32_t nprobe)
{
	return (sizeof(struct pka_stat_thread) + 4ull * nprobe + 63u) &
	       ~(uint64_t)63u;
}

static inline uint32_t pka_stat_ncell(uint32_t nprobe)
{
	uint64_t n = (uint64_t)PKA_STAT_THREADS * nprobe;

	return n < PKA_STAT_CELLS ? (uint32_t)n : PKA_STAT_CELLS;
}

/* pka_stat_area_size() - the stat mode's area for @nprobe probes. */
static inline uint64_t pka_stat_area_size(uint32_t nprobe)
{
	return sizeof(struct pka_stat_area) +
	       PKA_STAT_THREADS * pka_stat_thr_size(nprobe) +
	       (uint64_t)pka_stat_ncell(nprobe) * sizeof(struct pka_stat_cell);
}

#endif /* PK_AGENT_PROTOCOL_H */
