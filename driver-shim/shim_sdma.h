/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shim_sdma.h - the SDMA engine's state machine (shim_sdma.c), private to
 * driver-shim/ like shim_internal.h: the descriptor states and events and
 * one step of the transition table, for shim_sdma.c and the unit tests
 * that drive it directly.
 */
#ifndef SHIM_SDMA_H
#define SHIM_SDMA_H

#include "shim_internal.h"

/* SDMA descriptor states and events (shim_sdma.c holds the transition
 * table and its reasoning).  Here so unit tests can drive the state
 * machine directly. */
enum shim_sdma_state {
	SHIM_SDMA_S0_FREE = 0,
	SHIM_SDMA_S1_QUEUED = 1,
	SHIM_SDMA_S2_RUNNING = 2,
	SHIM_SDMA_S3_WAIT_CREDIT = 3,
	SHIM_SDMA_S4_DONE = 4,
	SHIM_SDMA_S5_ERROR = 5,
};
#define SHIM_SDMA_NSTATES 6

enum shim_sdma_event {
	SHIM_SDMA_E0_SUBMIT = 0,
	SHIM_SDMA_E1_START = 1,
	SHIM_SDMA_E2_PKT_SENT = 2,
	SHIM_SDMA_E3_NO_CREDIT = 3,
	SHIM_SDMA_E4_CREDIT_BACK = 4,
	SHIM_SDMA_E5_LAST_SENT = 5,
	SHIM_SDMA_E6_PEER_GONE = 6,
	SHIM_SDMA_E7_REAPED = 7,
};
#define SHIM_SDMA_NEVENTS 8

/* One request in the engine's descriptor ring. */
struct shim_sdma_desc {
	enum shim_sdma_state state;
	int status;              /* 0 or -errno, reported at reap */
	struct shim_peer *peer;
	struct shim_sdma_req req; /* the caller's request, copied at submit */
	uint64_t sent;           /* payload bytes published so far */
	uint32_t iov_idx;        /* gather cursor: current iovec ... */
	size_t iov_off;          /* ... and the offset inside it */
	uint32_t credit_polls;   /* reservations refused while waiting */
	/* Zero copy to a udp peer (shim_udp_ext_set): packets that read the
	 * caller's iovec, not a copy; the request completes once the peer
	 * acknowledged the last of them, before ring position ext_end of
	 * link epoch ext_epoch (shim_udp_released). */
	bool ext;
	uint32_t ext_end;
	uint32_t ext_epoch;
};

/* Apply one event: 0, or -EPROTO for a transition the table does not
 * allow (the descriptor is then marked S5 ERROR with status -EPROTO). */
int shim_sdma_step(struct shim_sdma_desc *desc, enum shim_sdma_event ev);

#endif /* SHIM_SDMA_H */
