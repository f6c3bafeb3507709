// SPDX-License-Identifier: MIT
/* zydis.c - the agent's Zydis: loaded in a link-map namespace of its own (dlmopen), reached through the five functions the library calls. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>

#include <Zydis/Zydis.h>

#include "agent.h"
#include "internal.h"

/*
 * Debian ships no static libZydis, and the program must not find Zydis
 * in its own link map (issue 10): a probe on a Zydis function would see
 * the agent's decoding, dl_iterate_phdr() would list it, and a program
 * that loads another Zydis would share ours. So the agent links the
 * library's objects with these definitions of the Zydis functions they
 * call (the version script keeps them local), each forwarding to the
 * real one in a copy of libZydis the agent maps and relocates itself
 * (zload.c: in no link map, its libc calls to the agent's own copies),
 * or, if that cannot be done, loaded with dlmopen(LM_ID_NEWLM): its own
 * namespace, with its own libc, which the program's probes never see
 * either (0.16 ms of start-up against 0.03: bench_agent.c).
 *
 * All five are resolved by pka_zydis_load(), from the agent's
 * constructor, before anything decodes: the library decodes on its
 * signal path too, and dlmopen() must never run there. Until then, or if
 * the copy could not be loaded, every call fails and the probe that
 * needed it is refused with the reason.
 */
static ZyanStatus (*z_init)(ZydisDecoder *, ZydisMachineMode, ZydisStackWidth);
static ZyanStatus (*z_mode)(ZydisDecoder *, ZydisDecoderMode, ZyanBool);
static ZyanStatus (*z_full)(const ZydisDecoder *, const void *, ZyanUSize,
			    ZydisDecodedInstruction *, ZydisDecodedOperand *);
static ZyanStatus (*z_insn)(const ZydisDecoder *, ZydisDecoderContext *,
			    const void *, ZyanUSize, ZydisDecodedInstruction *);
static ZydisRegister (*z_large)(ZydisMachineMode, ZydisRegister);

#ifndef PKA_ZYDIS_SONAME
#define PKA_ZYDIS_SONAME "libZydis.so.4.0"
#endif
#ifndef PKA_ZYDIS_PATH	/* agent/CMakeLists.txt: the one built against */
#define PKA_ZYDIS_PATH "/usr/lib/x86_64-linux-gnu/" PKA_ZYDIS_SONAME
#endif

static ZyanU64 (*z_version)(void);

int pka_zydis_load(void)
{
	static int done;
	void *(*sym)(void *, const char *);
	void *h;

	if (done)
		return done > 0 ? 0 : -ENOENT;
	done = -1;
	/* Mapped by the agent itself (zload.c); else a namespace of its own. */
	h = pka_zload(PKA_ZYDIS_PATH);
	if (h) {
		sym = pka_zload_sym;
	} else {
		pk_log(PK_LOG_INFO, "agent: %s not mapped by the agent itself; "
		       "loading %s with dlmopen(LM_ID_NEWLM)", PKA_ZYDIS_PATH,
		       PKA_ZYDIS_SONAME);
		h = dlmopen(LM_ID_NEWLM, PKA_ZYDIS_SONAME, RTLD_NOW | RTLD_LOCAL);
		sym = dlsym;
	}
	if (!h)
		return -ENOENT;
	/* The headers this file was built with must be the library's. */
	*(void **)&z_version = sym(h, "ZydisGetVersion");
	if (!z_version || z_version() != ZYDIS_VERSION) {
		pk_log(PK_LOG_ERROR, "agent: Zydis %s is version %#llx, built "
		       "for %#llx", PKA_ZYDIS_SONAME,
		       z_version ? (unsigned long long)z_version() : 0ull,
		       (unsigned long long)ZYDIS_VERSION);
		return -ENOENT;
	}
	*(void **)&z_init = sym(h, "ZydisDecoderInit");
	*(void **)&z_mode = sym(h, "ZydisDecoderEnableMode");
	*(void **)&z_full = sym(h, "ZydisDecoderDecodeFull");
	*(void **)&z_insn = sym(h, "ZydisDecoderDecodeInstruction");
	*(void **)&z_large = sym(h, "ZydisRegisterGetLargestEnclosing");
	if (!z_init || !z_mode || !z_full || !z_insn || !z_large) {
		z_init = NULL;
		return -ENOENT;
	}
	done = 1;
	return 0;
}

ZyanStatus ZydisDecoderInit(ZydisDecoder *d, ZydisMachineMode m,
			    ZydisStackWidth w)
{
	return z_init ? z_init(d, m, w) : ZYAN_STATUS_MISSING_DEPENDENCY;
}

ZyanStatus ZydisDecoderEnableMode(ZydisDecoder *d, ZydisDecoderMode m,
				  ZyanBool on)
{
	return z_init ? z_mode(d, m, on) : ZYAN_STATUS_MISSING_DEPENDENCY;
}

ZyanStatus ZydisDecoderDecodeFull(const ZydisDecoder *d, const void *buf,
				  ZyanUSize len, ZydisDecodedInstruction *insn,
				  ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT])
{
	return z_init ? z_full(d, buf, len, insn, ops)
		      : ZYAN_STATUS_MISSING_DEPENDENCY;
}

ZyanStatus ZydisDecoderDecodeInstruction(const ZydisDecoder *d,
					 ZydisDecoderContext *ctx,
					 const void *buf, ZyanUSize len,
					 ZydisDecodedInstruction *insn)
{
	return z_init ? z_insn(d, ctx, buf, len, insn)
		      : ZYAN_STATUS_MISSING_DEPENDENCY;
}

ZydisRegister ZydisRegisterGetLargestEnclosing(ZydisMachineMode m,
					       ZydisRegister r)
{
	return z_init ? z_large(m, r) : ZYDIS_REGISTER_NONE;
}
