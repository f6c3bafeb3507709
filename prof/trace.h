/* SPDX-License-Identifier: MIT */
/* trace.h - per-call traces written for Perfetto and chrome://tracing: trace-event JSON and Perfetto's protobuf. */
#ifndef PK_PROF_TRACE_H
#define PK_PROF_TRACE_H

/*
 * Input: an array of completed calls (struct pk_trace_event), in any order
 * (a ring buffer holds them in return order), plus names: functions by id,
 * processes by pid, threads by tid. Calls of one thread must nest as calls
 * do (a call that starts inside another ends inside it); zero-length calls
 * are fine.
 *
 * pk_trace_write_json(): the Trace Event Format's JSON object form,
 *
 *	{"traceEvents":[
 *	{"ph":"M","pid":7,"tid":7,"name":"process_name","args":{"name":"xz"}},
 *	{"ph":"M","pid":7,"tid":8,"name":"thread_name","args":{"name":"worker"}},
 *	{"ph":"X","name":"lzma_code","pid":7,"tid":8,"ts":1234.567,"dur":0.089,
 *	 "args":{"arg0":"0x55d0c0","ret":"0x0"}},
 *	...],"displayTimeUnit":"ns"}
 *
 * complete ("X") events, ts and dur in us as exact decimals with 3 places
 * (ns precision; a double holds them exactly below 2^53 ns, 104 days),
 * arguments and return values as hex strings (JSON numbers lose 64-bit
 * values). Names are escaped and made valid UTF-8.
 *
 * pk_trace_write_proto(): a perfetto.protos.Trace, our own encoder
 * (varints, length-delimited fields, field numbers from Perfetto's public
 * protos: trace_packet.proto, track_descriptor.proto, track_event.proto,
 * interned_data.proto, debug_annotation.proto). One packet sequence
 * (trusted_packet_sequence_id 1):
 *
 *	1. a packet with sequence_flags SEQ_INCREMENTAL_STATE_CLEARED and the
 *	   interned debug annotation names arg0..arg5, ret (iids 1..7);
 *	2. a TrackDescriptor per process (uuid, ProcessDescriptor pid, name)
 *	   and per thread (uuid, parent_uuid: its process, ThreadDescriptor
 *	   pid, tid, name);
 *	3. per call a TYPE_SLICE_BEGIN TrackEvent (timestamp, track_uuid,
 *	   name_iid, arguments as pointer_value debug annotations) and a
 *	   TYPE_SLICE_END one (timestamp, track_uuid, ret), flagged
 *	   SEQ_NEEDS_INCREMENTAL_STATE; a function's name goes in the
 *	   interned_data (event_names) of the first packet that uses it.
 *
 * Packets are in timestamp order over the whole trace (each thread's
 * begins and ends in its call order), so no reader needs to sort. Track
 * uuids are small ordinals (one-byte varints). Timestamps are written as
 * given (CLOCK_MONOTONIC ns from pk_tsc_mono_ns()) on the default trace
 * clock: a lone sequence needs no clock snapshot to be shown.
 *
 * Perfetto's protobuf has no complete-slice event, so a call is two
 * packets; it is still smaller than the JSON (see bench_prof's
 * trace_json and trace_proto bytes_per_event).
 */

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define PK_TRACE_MAX_ARGS 6

struct pk_trace_event {
	uint64_t ts_ns;		/* entry time */
	uint64_t dur_ns;	/* inclusive duration */
	uint32_t pid;
	uint32_t tid;
	uint32_t func;		/* index into pk_trace_meta.funcs */
	uint8_t nargs;		/* integer argument registers kept, <= 6 */
	uint8_t has_ret;	/* ret is valid (0: longjmp'd over, unwound) */
	uint8_t pad[2];
	uint64_t args[PK_TRACE_MAX_ARGS];
	uint64_t ret;
};

struct pk_trace_process {
	uint32_t pid;
	const char *name;
};

struct pk_trace_thread {
	uint32_t pid;
	uint32_t tid;
	const char *name;
};

struct pk_trace_meta {
	const char *const *funcs;	/* function names by id */
	uint32_t nfuncs;
	const struct pk_trace_process *procs;	/* names; others unnamed */
	size_t nprocs;
	const struct pk_trace_thread *threads;
	size_t nthreads;
	/*
	 * Optional: called as the calls are written (@done of @n, from 0
	 * before the first to @n after the last, at most every 65 536),
	 * on the writer's thread, to show progress; NULL: not called.
	 */
	void (*progress)(void *arg, size_t done, size_t n);
	void *progress_arg;
};

/**
 * pk_trace_write_json() - write @n calls as trace-event JSON to @f.
 * @f: the stream.
 * @ev: the calls.
 * @n: how many.
 * @m: the names.
 *
 * Context: any thread, may block.
 * Return: 0; -EINVAL (nothing written) if a call's func is not below
 * nfuncs or its nargs above 6; -EIO if writing failed.
 */
int pk_trace_write_json(FILE *f, const struct pk_trace_event *ev, size_t n,
			const struct pk_trace_meta *m);

/**
 * pk_trace_write_proto() - write @n calls as a Perfetto protobuf trace to @f.
 * @f: the stream.
 * @ev: the calls.
 * @n: how many.
 * @m: the names.
 *
 * Uses about 40 bytes of memory per call for the ordering.
 *
 * Context: any thread, may block.
 * Return: 0; -EINVAL as pk_trace_write_json(); -ENOMEM; -EIO if writing failed.
 */
int pk_trace_write_proto(FILE *f, const struct pk_trace_event *ev, size_t n,
			 const struct pk_trace_meta *m);

#endif /* PK_PROF_TRACE_H */
