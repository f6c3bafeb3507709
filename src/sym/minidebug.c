// SPDX-License-Identifier: MIT
/* minidebug.c - MiniDebugInfo: the xz-compressed ELF a stripped file carries in .gnu_debugdata (a .symtab of the functions its .dynsym lacks), decompressed with liblzma. */

/*
 * What Fedora (and others) ship, and what gdb's manual, "MiniDebugInfo",
 * builds with nm, objcopy and xz: the object stripped, and in a section
 * .gnu_debugdata an xz stream holding an ELF file whose .symtab lists the
 * static functions (those that .dynsym does not). elf.c reads that
 * .symtab as table PK_SYM_MINIDEBUG when the object has no .symtab of its
 * own, before looking for a separate debug file.
 *
 * The stream comes from the file, not from us: bounded (PK_MD_MAX bytes
 * out, PK_MD_MEMLIMIT for the decoder) and every liblzma failure said in
 * one line. Concatenated streams and padding are accepted, as xz(1) does.
 *
 * The integrity check (CRC64 by default) is not verified
 * (LZMA_IGNORE_CHECK): liblzma 5.4 (Debian 12) picks its CRC64 function
 * in a constructor of its own, and in the agent, where liblzma.a is linked
 * in, that constructor runs after the agent's, which arms: lzma_crc64()
 * is a call through a NULL pointer then. What still catches a damaged
 * section: the LZMA2 decoder (corrupt data), the end of input (a
 * truncated stream), the stream's index (every block's sizes), libelf's
 * parse of what comes out, and elf.c's build-id comparison.
 */
#include <errno.h>
#include <lzma.h>
#include <stdlib.h>

#include "internal.h"
#include "sym/sym.h"

/* Fedora's are tens of kilobytes; libxul's a few megabytes. */
/*
 * Bounds, paid inside the measured program: at most PK_MD_RATIO times the
 * section (a symbol table packs 3 to 6 times) and PK_MD_MAX in all; real
 * MiniDebugInfo is tens of KiB, a few MiB for the largest libraries. The
 * decoder's own memory: a 64 MiB dictionary at most (xz -9 uses 64).
 */
#define PK_MD_MAX ((size_t)64 << 20)
#define PK_MD_RATIO 32
#define PK_MD_MEMLIMIT ((uint64_t)96 << 20)

static const char *lzma_why(lzma_ret r)
{
	switch (r) {
	case LZMA_MEM_ERROR: return "out of memory";
	case LZMA_MEMLIMIT_ERROR: return "needs more memory than allowed";
	case LZMA_FORMAT_ERROR: return "not xz data";
	case LZMA_OPTIONS_ERROR: return "unsupported xz options";
	case LZMA_DATA_ERROR: return "corrupt xz data";
	case LZMA_BUF_ERROR: return "xz data truncated";
	case LZMA_UNSUPPORTED_CHECK: return "unsupported xz check";
	default: return "xz decoder error";
	}
}

int pk_minidebug_unpack(const void *xz, size_t len, void **out, size_t *outlen,
			const char **why)
{
	lzma_stream s = LZMA_STREAM_INIT;
	size_t max = len > PK_MD_MAX / PK_MD_RATIO ? PK_MD_MAX :
		     len * PK_MD_RATIO > ((size_t)1 << 20) ? len * PK_MD_RATIO :
		     (size_t)1 << 20;
	size_t cap = len * 4 > 4096 ? len * 4 : 4096, n = 0;
	uint8_t *buf = NULL;
	lzma_ret r;
	int err;

	*out = NULL;
	*outlen = 0;
	*why = NULL;
	r = lzma_stream_decoder(&s, PK_MD_MEMLIMIT,
				LZMA_CONCATENATED | LZMA_IGNORE_CHECK);
	if (r != LZMA_OK) {
		*why = lzma_why(r);
		return r == LZMA_MEM_ERROR ? -ENOMEM : -EINVAL;
	}
	s.next_in = xz;
	s.avail_in = len;
	for (;;) {
		if (n == cap || !buf) {
			uint8_t *nb;

			/* Never below what is already unpacked (n == cap). */
			if (!buf && cap > max)
				cap = max;
			else if (buf && cap >= max) {
				*why = "larger unpacked than 32 times its size "
				       "or 64 MiB";
				err = -E2BIG;
				goto fail;
			} else if (buf) {
				cap = cap > max / 2 ? max : 2 * cap;
			}
			nb = realloc(buf, cap);
			if (!nb) {
				*why = "out of memory";
				err = -ENOMEM;
				goto fail;
			}
			buf = nb;
		}
		s.next_out = buf + n;
		s.avail_out = cap - n;
		r = lzma_code(&s, LZMA_FINISH);
		n = cap - s.avail_out;
		if (r == LZMA_STREAM_END)
			break;
		if (r != LZMA_OK) {
			*why = lzma_why(r);
			err = r == LZMA_MEM_ERROR ? -ENOMEM : -EINVAL;
			goto fail;
		}
	}
	lzma_end(&s);
	*out = buf;
	*outlen = n;
	return 0;
fail:
	lzma_end(&s);
	free(buf);
	return err;
}
