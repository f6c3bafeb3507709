// SPDX-License-Identifier: MIT
/* encode.c - x86-64 jmp and NOP encodings for patch sites (trampoline code: tramp.c). */
#include <errno.h>
#include <string.h>

#include "arch/arch.h"

int pk_arch_encode_jmp(uint8_t buf[PK_ARCH_JMP_LEN], uint64_t from, uint64_t to)
{
	int64_t rel = (int64_t)(to - (from + PK_ARCH_JMP_LEN));
	int32_t rel32 = (int32_t)rel;

	if (rel != rel32)
		return -ERANGE;
	buf[0] = 0xe9;	/* jmp rel32 */
	memcpy(buf + 1, &rel32, sizeof(rel32));
	return 0;
}

void pk_arch_encode_nop(uint8_t buf[PK_ARCH_JMP_LEN])
{
	static const uint8_t nop5[PK_ARCH_JMP_LEN] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };

	memcpy(buf, nop5, sizeof(nop5));
}

size_t pk_arch_encode_abs_jmp(uint8_t *buf, uint64_t to)
{
	static const uint8_t op[6] = { 0xff, 0x25, 0, 0, 0, 0 };

	memcpy(buf, op, sizeof(op));
	memcpy(buf + sizeof(op), &to, sizeof(to));
	return PK_ARCH_ABS_JMP_LEN;
}

int pk_arch_encode_jmp_site(uint8_t *buf, size_t len, uint64_t from, uint64_t to)
{
	/* NOPs of 1 to 4 bytes, the forms the SDM recommends. */
	static const uint8_t nops[][4] = {
		{ 0 }, { 0x90 }, { 0x66, 0x90 }, { 0x0f, 0x1f, 0x00 },
		{ 0x0f, 0x1f, 0x40, 0x00 },
	};
	size_t k = len - PK_ARCH_JMP_LEN, o = 0;

	while (k) {
		size_t m = k > 4 ? 4 : k;

		memcpy(buf + o, nops[m], m);
		o += m;
		k -= m;
	}
	return pk_arch_encode_jmp(buf + o, from + o, to);
}
