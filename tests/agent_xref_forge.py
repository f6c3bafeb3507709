#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# agent_xref_forge.py - rewrite a run's cache (.xref, agent/xcache.c's
# struct xc_ent) with well-formed but wrong answers, as a program of the
# run could: every placement 1 MiB past its function, every function's
# start 1 MiB off, every branch target outside its window; each entry's
# check word recomputed so that it reads back as valid.
# usage: agent_xref_forge.py FILE
import struct
import sys

ENT = 376                      # sizeof(struct xc_ent)
MAGIC = 0x70786333
M64 = (1 << 64) - 1


def xc_sum(b):
    h = 1469598103934665603
    for (w,) in struct.iter_unpack("<Q", b[:368]):
        h = ((h ^ w) * 1099511628211) & M64
        h ^= h >> 29
    return h


path = sys.argv[1]
data = bytearray(open(path, "rb").read())
forged = 0
for at in range(0, len(data) - ENT + 1, ENT):
    e = data[at:at + ENT]
    magic, kind = struct.unpack_from("<IH", e, 0)
    if magic != MAGIC:
        break
    v0 = struct.unpack_from("<Q", e, 72)[0]
    if kind == 4 or kind == 2:          # XC_PLACE, XC_FUNC: v[0] moved
        struct.pack_into("<Q", e, 72, (v0 + (1 << 20)) & M64)
    elif kind == 1:                     # XC_XREF: "lands at" far away
        struct.pack_into("<q", e, 64, 1)
        struct.pack_into("<Q", e, 72, (v0 + (1 << 20)) & M64)
    else:
        continue
    struct.pack_into("<Q", e, 368, xc_sum(bytes(e)))
    data[at:at + ENT] = e
    forged += 1
open(path + ".f", "wb").write(data)
print(forged)
