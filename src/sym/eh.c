// SPDX-License-Identifier: MIT
/* eh.c - a small .eh_frame reader: CIEs for their pointer encodings, FDEs for the code range each covers. */

/*
 * Every function compiled with unwind tables (the default on x86-64, and
 * kept by strip, being allocated) has an FDE: its initial location and
 * range bound the function even where no symbol table does. We walk the
 * section linearly (the sorted index is built once per object by sym.c),
 * so .eh_frame_hdr's table is not needed. Format: the LSB's "Exception
 * Frame" chapter (DWARF CFI with the 'z' augmentation and DW_EH_PE_*
 * pointer encodings). Read from the file's section, not from memory: the
 * same code serves loaded objects and files on disk.
 */
#include <errno.h>
#include <string.h>

#include "sym/sym.h"

enum {
	PE_ABSPTR = 0x00, PE_ULEB128 = 0x01, PE_UDATA2 = 0x02,
	PE_UDATA4 = 0x03, PE_UDATA8 = 0x04, PE_SLEB128 = 0x09,
	PE_SDATA2 = 0x0a, PE_SDATA4 = 0x0b, PE_SDATA8 = 0x0c,
	PE_PCREL = 0x10, PE_TEXTREL = 0x20, PE_DATAREL = 0x30,
	PE_FUNCREL = 0x40, PE_ALIGNED = 0x50, PE_INDIRECT = 0x80,
	PE_OMIT = 0xff,
};

struct cur {
	const uint8_t *p, *end;
	int bad;
};

static uint64_t get_n(struct cur *c, size_t n)
{
	uint64_t v = 0;

	if ((size_t)(c->end - c->p) < n) {
		c->bad = 1;
		c->p = c->end;
		return 0;
	}
	for (size_t i = 0; i < n; i++)
		v |= (uint64_t)c->p[i] << (8 * i);	/* little-endian */
	c->p += n;
	return v;
}

static uint64_t get_uleb(struct cur *c)
{
	uint64_t v = 0;
	unsigned int shift = 0;

	while (c->p < c->end) {
		uint8_t b = *c->p++;

		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80))
			return v;
	}
	c->bad = 1;
	return 0;
}

static int64_t get_sleb(struct cur *c)
{
	int64_t v = 0;
	unsigned int shift = 0;

	while (c->p < c->end) {
		uint8_t b = *c->p++;

		if (shift < 64)
			v |= (int64_t)((uint64_t)(b & 0x7f) << shift);
		shift += 7;
		if (!(b & 0x80)) {
			if (shift < 64 && (b & 0x40))
				v |= -((int64_t)1 << shift);
			return v;
		}
	}
	c->bad = 1;
	return 0;
}

/*
 * A pointer in encoding @enc at c->p, whose file address is @here. Only
 * the value's format and pc-relative adjustment matter for code ranges;
 * indirect, text-, data- and function-relative initial locations are not
 * what GCC and binutils emit for .eh_frame, so they mark the entry bad.
 */
static uint64_t get_ptr(struct cur *c, uint8_t enc, uint64_t here, int apply)
{
	uint64_t v;

	switch (enc & 0x0f) {
	case PE_ABSPTR:	 v = get_n(c, 8); break;
	case PE_ULEB128: v = get_uleb(c); break;
	case PE_UDATA2:	 v = get_n(c, 2); break;
	case PE_UDATA4:	 v = get_n(c, 4); break;
	case PE_UDATA8:	 v = get_n(c, 8); break;
	case PE_SLEB128: v = (uint64_t)get_sleb(c); break;
	case PE_SDATA2:	 v = (uint64_t)(int64_t)(int16_t)get_n(c, 2); break;
	case PE_SDATA4:	 v = (uint64_t)(int64_t)(int32_t)get_n(c, 4); break;
	case PE_SDATA8:	 v = get_n(c, 8); break;
	default:
		c->bad = 1;
		return 0;
	}
	if (!apply)
		return v;
	switch (enc & 0x70) {
	case PE_ABSPTR:
		break;
	case PE_PCREL:
		v += here;
		break;
	default:
		c->bad = 1;
	}
	if (enc & PE_INDIRECT)
		c->bad = 1;
	return v;
}

/*
 * A CIE's FDE pointer encoding ('R') and LSDA pointer encoding ('L',
 * PE_OMIT without one), and whether FDEs carry augmentation data ('z').
 */
static int cie_encs(const uint8_t *sec, size_t len, uint64_t vaddr,
		    size_t off, uint8_t *enc, uint8_t *lenc, int *z)
{
	struct cur c = { sec + off, sec + len, 0 };
	uint64_t l = get_n(&c, 4), id;
	const char *aug;
	uint8_t ver;

	*enc = PE_ABSPTR;
	*lenc = PE_OMIT;
	*z = 0;
	if (l == 0xffffffff)
		l = get_n(&c, 8);
	if (c.bad || l > (uint64_t)(c.end - c.p))
		return -1;
	c.end = c.p + l;
	id = get_n(&c, 4);
	ver = (uint8_t)get_n(&c, 1);
	if (c.bad || id != 0 || (ver != 1 && ver != 3))
		return -1;
	aug = (const char *)c.p;
	c.p = memchr(c.p, 0, (size_t)(c.end - c.p));
	if (!c.p)
		return -1;
	c.p++;
	if (aug[0] != 'z')
		return aug[0] ? -1 : 0;
	*z = 1;
	get_uleb(&c);
	get_sleb(&c);
	if (ver == 1)
		get_n(&c, 1);
	else
		get_uleb(&c);
	get_uleb(&c);
	for (const char *a = aug + 1; *a && !c.bad; a++) {
		uint8_t e;

		switch (*a) {
		case 'R':
			*enc = (uint8_t)get_n(&c, 1);
			break;
		case 'P':
			e = (uint8_t)get_n(&c, 1);
			get_ptr(&c, e, vaddr + (uint64_t)(c.p - sec), 0);
			break;
		case 'L':
			*lenc = (uint8_t)get_n(&c, 1);
			break;
		case 'S':
		case 'B':
			break;
		default:
			return -1;
		}
	}
	return c.bad ? -1 : 0;
}

int pk_eh_each_fde(const uint8_t *data, size_t len, uint64_t vaddr,
		   int (*fn)(uint64_t start, uint64_t range, void *ctx),
		   void *ctx)
{
	size_t off = 0, cached_cie = (size_t)-1;
	uint8_t enc = 0;
	int n = 0;

	while (off + 4 <= len) {
		struct cur c = { data + off, data + len, 0 };
		uint64_t l = get_n(&c, 4), id, start, range;
		size_t body, next;

		if (l == 0)
			break;			/* the terminator */
		if (l == 0xffffffff)
			l = get_n(&c, 8);
		if (c.bad || l > (uint64_t)(c.end - c.p))
			break;
		body = (size_t)(c.p - data);
		next = body + (size_t)l;
		c.end = c.p + l;
		id = get_n(&c, 4);
		if (c.bad)
			break;
		if (id != 0) {			/* an FDE: id is its CIE's distance */
			size_t cie;

			if (id > body)
				break;
			cie = body - (size_t)id;
			if (cie != cached_cie) {
				uint8_t lenc;
				int z;

				if (cie_encs(data, len, vaddr, cie, &enc, &lenc, &z))
					break;
				cached_cie = cie;
			}
			start = get_ptr(&c, enc, vaddr + (uint64_t)(c.p - data), 1);
			range = get_ptr(&c, enc & 0x0f, 0, 0);
			if (c.bad)
				break;
			if (start && range) {
				int r = fn(start, range, ctx);

				if (r)
					return r;
				n++;
			}
		}
		off = next;
	}
	return n;
}

int pk_eh_each_lsda(const uint8_t *data, size_t len, uint64_t vaddr,
		    int (*fn)(uint64_t start, uint64_t range, uint64_t lsda,
			      void *ctx),
		    void *ctx)
{
	size_t off = 0;
	int n = 0;

	while (off + 4 <= len) {
		struct cur c = { data + off, data + len, 0 };
		uint64_t l = get_n(&c, 4), id, start, range, lsda;
		uint8_t enc, lenc;
		size_t body, next;
		int z, r;

		if (l == 0)
			break;
		if (l == 0xffffffff)
			l = get_n(&c, 8);
		if (c.bad || l > (uint64_t)(c.end - c.p))
			return -EINVAL;
		body = (size_t)(c.p - data);
		next = body + (size_t)l;
		c.end = c.p + l;
		id = get_n(&c, 4);
		if (c.bad)
			return -EINVAL;
		off = next;
		if (id == 0)
			continue;		/* a CIE */
		if (id > body || cie_encs(data, len, vaddr, body - (size_t)id,
					  &enc, &lenc, &z))
			return -EINVAL;
		start = get_ptr(&c, enc, vaddr + (uint64_t)(c.p - data), 1);
		range = get_ptr(&c, enc & 0x0f, 0, 0);
		if (c.bad)
			return -EINVAL;
		if (!z || lenc == PE_OMIT)
			continue;
		get_uleb(&c);			/* augmentation length */
		lsda = get_ptr(&c, lenc, vaddr + (uint64_t)(c.p - data), 1);
		if (c.bad)
			return -EINVAL;
		if (!lsda || !start)
			continue;
		r = fn(start, range, lsda, ctx);
		if (r)
			return r;
		n++;
	}
	return n;
}

int pk_eh_landing_pads(const uint8_t *lsda, size_t len, uint64_t vaddr,
		       uint64_t start,
		       void (*fn)(uint64_t pad, void *ctx), void *ctx)
{
	struct cur c = { lsda, lsda + len, 0 };
	uint8_t lpenc, ttenc, csenc;
	uint64_t lpstart = start, cslen;
	const uint8_t *end;

	lpenc = (uint8_t)get_n(&c, 1);
	if (lpenc != PE_OMIT)
		lpstart = get_ptr(&c, lpenc, vaddr + (uint64_t)(c.p - lsda), 1);
	ttenc = (uint8_t)get_n(&c, 1);
	if (ttenc != PE_OMIT)
		get_uleb(&c);			/* the type table's offset */
	csenc = (uint8_t)get_n(&c, 1);
	cslen = get_uleb(&c);
	if (c.bad || cslen > (uint64_t)(c.end - c.p) || (csenc & 0x70))
		return -EINVAL;
	end = c.p + cslen;
	c.end = end;
	while (c.p < end) {
		uint64_t lp;

		get_ptr(&c, csenc, 0, 0);	/* the call site's start */
		get_ptr(&c, csenc, 0, 0);	/* and length */
		lp = get_ptr(&c, csenc, 0, 0);
		get_uleb(&c);			/* the action */
		if (c.bad)
			return -EINVAL;
		if (lp)
			fn(lpstart + lp, ctx);
	}
	return 0;
}
