/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_proto.h - the provider's packet format, in one place.
 *
 * Every packet is a struct shim_pkt_hdr (shim_abi.h: the shim routes it
 * by dlid/dctx, checks jkey and paylen, and places TID data) plus an
 * optional payload in the eager ring (inline in the header up to
 * SHIM_INLINE_MAX bytes where an opcode says so).  The provider owns
 * opcode, flags, msgid, tag, data and the 16 protocol bytes hdr.p, which
 * each opcode reads through its own member of union opx_proto_pw:
 *
 *  opcode     tag          data        msgid       hdr.p (opx_proto_pw)          payload
 *  EAGER      tag          CQ data     -           inline data <= 16 B     data
 *  MP_FIRST   tag          CQ data     message id  mp_first.total          data
 *  MP_NEXT    tag          CQ data     message id  mp_next.offset          data
 *  RTS        tag          CQ data     -           rts.len, rts.cookie     opx_rts_payload
 *  DONE       -            -           -           done.cookie, .status    -
 *  CTS        -            -           -           cts.cookie, .rx_cookie  opx_cts_payload
 *  CTW        -            -           -           cts.cookie, .rx_cookie  opx_ctw_payload
 *  WDONE      -            -           -           wdone.rx_cookie, .status -
 *  DATA       rx cookie    -           -           tid.handle, .offset     data, placed
 *  EAGER_DC   tag          CQ data     -           dc.cookie               shim_addr + data
 *  RMA_WRITE  remote addr  (opx_rma.h) (opx_rma.h) rma.key, rma.op         data
 *  RMA_READ   remote addr  (opx_rma.h) bytes       rma.key, rma.op         - (or CMA request)
 *  ATOMIC     remote addr  (opx_rma.h) op/dt/kind  rma.key, rma.op         operands
 *  RMA_RESP   request's op status      -           inline result           result or grant
 *
 * hdr.psn is 0 but in checksummed message packets (OPX_PF_CSUM: the CRC)
 * and in one-sided requests (RMA_WRITE, RMA_READ, ATOMIC): the sending
 * context's nonce, so that a target answering through its cache of
 * peers knows the cached one is the sender (opx_rndv_src_peer); 0 from
 * an older sender, which costs the target a liveness check.
 *
 * Cookies name the sender's (cookie) or the receiver's (rx_cookie)
 * rendezvous slot: index in the low 32 bits, a random generation in the
 * high 32, so a stale or forged one is refused (opx_rndv.c).  The
 * one-sided protocol is described in opx_rma.h, the rendezvous states in
 * opx_rndv.c, the reliability of the udp wire (psn, acks) in opx_rel.c.
 */
#ifndef OPX_PROTO_H
#define OPX_PROTO_H

#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "opx.h"
#include "shim_abi.h"

/* Provider opcodes (shim_pkt_hdr.opcode). */
enum opx_opcode {
	OPX_OP_EAGER = 1,   /* whole message in this packet */
	OPX_OP_MP_FIRST,    /* multi-packet eager, first packet */
	OPX_OP_MP_NEXT,     /* multi-packet eager, a later packet */
	OPX_OP_RTS,         /* rendezvous request */
	/* rendezvous control and data: handled in opx_rndv.c */
	OPX_OP_DONE,        /* receiver has the data (pulled, or placed) */
	OPX_OP_CTS,         /* receiver wants a push into its TID registrations */
	OPX_OP_DATA,        /* pushed data (SDMA, TID placed) */
	OPX_OP_CTW,         /* receiver asks the sender to write a part with CMA */
	OPX_OP_WDONE,       /* sender wrote it (or OPX_WDONE_REFUSED: not written,
			       the receiver pulls it and sends a second DONE) */
	OPX_OP_EAGER_DC,    /* whole message, FI_DELIVERY_COMPLETE: the receiver
			       answers DONE(cookie) once the data is placed */
	/* one-sided: handled in opx_rma.c, layout in opx_rma.h */
	OPX_OP_RMA_WRITE,
	OPX_OP_RMA_READ,
	OPX_OP_ATOMIC,
	OPX_OP_RMA_RESP,
	OPX_OP_MAX
};

#define OPX_WDONE_REFUSED 0xffffu

/* shim_pkt_hdr.flags */
#define OPX_PF_TAGGED 0x01u
#define OPX_PF_CQDATA 0x02u
#define OPX_PF_CSUM 0x04u /* hdr.psn holds the CRC32C of the packet (opx_csum.c) */
/* One-sided request: the data moves by Cross Memory Attach (payload: struct
 * opx_rma_cma_req); on a reply: the target could not, send it by chunks. */
#define OPX_PF_CMA 0x08u
/* With OPX_PF_CMA, a CMA write's second step (opx_rma.h): on a reply, the
 * region's pieces the initiator may now write; on an RMA_WRITE, "written". */
#define OPX_PF_GRANT 0x10u
#define OPX_PF_MASK (OPX_PF_TAGGED | OPX_PF_CQDATA | OPX_PF_CSUM | OPX_PF_CMA | OPX_PF_GRANT)

/* One-sided request: rma.op is the initiator's cookie (bits 0..31), the
 * chunk index (32..62) and "last chunk" (63). */
#define OPX_RMA_LAST (1ULL << 63)
#define OPX_RMA_CHUNK_MAX 0x7fffffffULL

/* The 16 protocol bytes (shim_pkt_hdr.p) as each opcode uses them.  Read
 * with opx_proto_pw(h), written with opx_proto_pw_set(h, &w): copies, so no packet
 * word is ever read through a pointer of another type. */
union opx_proto_pw {
	struct { uint64_t total, zero; } mp_first;           /* MP_FIRST: message length */
	struct { uint64_t offset, zero; } mp_next;           /* MP_NEXT: where this part goes */
	struct { uint64_t len, cookie; } rts;                /* RTS: message length, sender slot */
	struct { uint64_t cookie; uint32_t status, zero; } done;   /* DONE: 0 or FI_E* */
	struct { uint64_t cookie, rx_cookie; } cts;          /* CTS and CTW */
	struct { uint64_t rx_cookie; uint32_t status, zero; } wdone;
	struct { uint32_t handle, zero; uint64_t offset; } tid; /* DATA: shim_tid_place_wire */
	struct { uint64_t cookie, zero; } dc;                /* EAGER_DC: sender's completion */
	struct { uint64_t key, op; } rma;                    /* RMA_WRITE/READ, ATOMIC */
	uint8_t inl[SHIM_INLINE_MAX];                        /* EAGER, RMA_RESP: inline data */
};
static_assert(sizeof(union opx_proto_pw) == sizeof(((struct shim_pkt_hdr *)0)->p),
	      "opx_proto_pw covers shim_pkt_hdr.p exactly");

static inline union opx_proto_pw opx_proto_pw(const struct shim_pkt_hdr *h)
{
	union opx_proto_pw w;

	memcpy(&w, &h->p, sizeof(w));
	return w;
}

static inline void opx_proto_pw_set(struct shim_pkt_hdr *h, const union opx_proto_pw *w)
{
	memcpy(&h->p, w, sizeof(*w));
}

/* RTS payload (eager ring): what the receiver needs to pull. */
struct opx_rts_payload {
	struct shim_addr src; /* to reply DONE even if the sender is not in our AV */
	uint32_t pid;
	uint32_t iov_count;
	uint64_t iov_base[OPX_IOV_LIMIT];
	uint64_t iov_len[OPX_IOV_LIMIT];
};
static_assert(sizeof(struct opx_rts_payload) == 104, "rts payload layout");

/* CTS payload: where the receiver wants the data. */
struct opx_cts_payload {
	uint32_t ntid;
	uint32_t rsvd;
	uint32_t tid[OPX_IOV_LIMIT];
	uint64_t len[OPX_IOV_LIMIT];
};
static_assert(sizeof(struct opx_cts_payload) == 56, "cts payload layout");

/* CTW payload: where the sender writes its part of a split copy. */
struct opx_ctw_payload {
	uint32_t pid;       /* the receiver */
	uint32_t iov_count;
	uint64_t off;       /* offset in the message of the part */
	uint64_t len;       /* bytes of the part */
	uint64_t rsvd;
	uint64_t iov_base[OPX_IOV_LIMIT];
	uint64_t iov_len[OPX_IOV_LIMIT];
};
static_assert(sizeof(struct opx_ctw_payload) == 96, "ctw payload layout");

/* Payload of an OPX_PF_CMA one-sided request: the initiator's buffer. */
struct opx_rma_cma_req {
	uint64_t len;        /* sum of iov_len[] */
	uint32_t iov_count;  /* 1..OPX_IOV_LIMIT */
	uint32_t rsvd;
	uint64_t iov_base[OPX_IOV_LIMIT];
	uint64_t iov_len[OPX_IOV_LIMIT];
};
static_assert(sizeof(struct opx_rma_cma_req) == 80, "cma request layout");

/* Payload of an OPX_PF_GRANT reply: where the initiator writes. */
struct opx_rma_grant {
	uint32_t iov_count;  /* 1..OPX_IOV_LIMIT */
	uint32_t rsvd;
	uint64_t iov_base[OPX_IOV_LIMIT];
	uint64_t iov_len[OPX_IOV_LIMIT];
};
static_assert(sizeof(struct opx_rma_grant) == 72, "grant layout");

#endif /* OPX_PROTO_H */
