/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shim_rgn.h - part of the shim's ABI, under shim_abi.h's layout version
 * and versioning rules: the region table at rgn_off of a receive
 * context's segment.  The peers' side of its protocol, rgn_busy, is in
 * their claim slots (struct shim_claim, shim_abi.h); the code is
 * shim_rgn.c.
 */
#ifndef SHIM_RGN_H
#define SHIM_RGN_H

#include "shim_abi.h"

/*
 * Region table (minor 2): the memory regions a peer on this host may copy
 * into or out of by itself, with Cross Memory Attach, without any help
 * from the owner's progress: what RDMA hardware gives (shim_rgn.c has the
 * protocol).  Written by the owner only, read by peers, each entry a
 * sequence lock: seq 0 or odd: empty or being changed; even: valid, and
 * each validity period has its own even value.  A peer copies the entry
 * between two equal even reads of seq, then checks that copy: the offset
 * and length against len, its access against access.
 *
 * Retracting a region (closing it, binding a counter to it) makes seq odd
 * and then waits until no claim slot's rgn_busy names the old (slot, seq)
 * any longer, or that slot's holder is gone.  A peer writes rgn_busy
 * before it reads seq a second time, both sequentially consistent, so
 * either it sees the odd seq and does not copy, or the owner sees its
 * rgn_busy and waits for the copy to end: no copy into memory the owner
 * has given back. */
#define SHIM_RGN_SLOTS 256u /* regions per receive context, power of two */
#define SHIM_RGN_PROBE 8u   /* slots one key may occupy (linear probing) */
#define SHIM_RGN_READ 0x1u  /* access: peers may read it */
#define SHIM_RGN_WRITE 0x2u /* access: peers may write it */

struct shim_rgn {
	_Atomic uint32_t seq;
	_Atomic uint32_t access; /* SHIM_RGN_READ | SHIM_RGN_WRITE */
	_Atomic uint64_t key;    /* the provider's memory-region key */
	_Atomic uint64_t raddr;  /* the remote address of its first byte */
	_Atomic uint64_t vaddr;  /* where that byte is in the owner */
	_Atomic uint64_t len;
	uint8_t pad[24];
};
static_assert(sizeof(struct shim_rgn) == 64, "region entry is one cache line");

#endif /* SHIM_RGN_H */
