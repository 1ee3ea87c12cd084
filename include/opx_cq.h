/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_cq.h - completion queues and counters: struct opx_cq and its
 * reader (fi_ops_cq, opx_cq.c) and writer (opx_complete.c), struct
 * opx_cntr (opx_cntr.c).  Both drive a progress set (opx_wait.h).
 */
#ifndef OPX_CQ_H
#define OPX_CQ_H

#include "opx.h"
#include "opx_wait.h"

/* ---------------------------------------------------------------------
 * Completion queue.  A power-of-two ring of full entries that grows when
 * full (completions are never dropped); error entries on a list.
 */
struct opx_cq_slot {
	struct fi_cq_tagged_entry e;
	fi_addr_t src;
};

struct opx_cq_err {
	struct opx_list link;
	struct fi_cq_err_entry e;
	fi_addr_t src;
};

struct opx_cq {
	struct fid_cq cq_fid;
	struct opx_domain *domain;
	enum fi_cq_format format;
	enum fi_wait_obj wait_obj;
	enum fi_cq_wait_cond wait_cond;
	struct opx_cq_slot *ring;
	size_t mask;
	uint64_t head;
	uint64_t tail;
	struct opx_list err_list;
	struct opx_pset pset;
	int epoll_fd; /* FI_WAIT_FD: endpoints' wait fds */
	_Atomic int signaled;
	_Atomic int refcnt; /* bound endpoints */
	struct shim_ctx *udp_via; /* the first bound endpoint's context: its
				     socket carries the udp peers opened here */
	/* writer side (opx_complete.c) */
	size_t cap;        /* most ring entries (0: no cap but memory) */
	uint64_t overruns; /* completions reported as FI_EOVERRUN errors */
};

/* Provider data of an error entry: only FI_SOURCE_ERR's address. */
#define OPX_CQ_ERR_DATA_MAX sizeof(struct shim_addr)
/* An error with its ring position and its provider-specific data, if
 * any (err.e.err_data_size bytes; 0 for most errors, whose err and
 * prov_errno say all there is). */
struct opx_cq_err_node {
	struct opx_cq_err err;
	uint64_t seq;
	char data[OPX_CQ_ERR_DATA_MAX];
};

int opx_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **cq,
		void *context);
/* The writer side, in opx_complete.c (the reader, fi_ops_cq, is opx_cq.c).
 * Room for n more completions, growing the ring if needed: false when it
 * cannot grow (memory, or the cap below).  Operations check it before
 * they are consumed and push back with -FI_EAGAIN, so no completion is
 * ever lost.  Lock held. */
bool opx_complete_make_room_locked(struct opx_cq *cq, size_t n);
static inline bool opx_cq_room_locked(struct opx_cq *cq, size_t n)
{
	return !cq || cq->tail - cq->head + n <= cq->mask + 1 ||
	       opx_complete_make_room_locked(cq, n);
}
/* Free ring slots now, without growing. */
static inline size_t opx_cq_free_locked(const struct opx_cq *cq)
{
	return cq->mask + 1 - (size_t)(cq->tail - cq->head);
}
/* Cap the ring at max_entries (rounded up to a power of two; 0: no cap
 * but memory).  A test hook standing for an allocator that fails. */
void opx_complete_set_cap(struct opx_cq *cq, size_t max_entries);
/* Lock held.  Returns 0; a completion that finds the ring full and
 * unable to grow becomes an FI_EOVERRUN error entry carrying all of it
 * (never silently dropped); -FI_ENOMEM only if even that fails. */
int opx_complete_report_locked(struct opx_cq *cq, void *op_context, uint64_t flags, size_t len,
			       void *buf, uint64_t data, uint64_t tag, fi_addr_t src);
int opx_complete_report_err_locked(struct opx_cq *cq, void *op_context, uint64_t flags, size_t len,
				   void *buf, uint64_t data, uint64_t tag, size_t olen, int err,
				   int prov_errno, fi_addr_t src);
/* FI_SOURCE_ERR: a successful receive from a source not in the AV, as an
 * FI_EADDRNOTAVAIL error entry whose err_data is the source address. */
int opx_complete_report_src_err_locked(struct opx_cq *cq, void *op_context, uint64_t flags,
				       size_t len, void *buf, uint64_t data, uint64_t tag,
				       const void *addr, size_t addrlen);
int opx_cq_attach_ep(struct opx_cq *cq, struct opx_ep *ep);
void opx_cq_detach_ep(struct opx_cq *cq, struct opx_ep *ep);

/* ---------------------------------------------------------------------
 * Counters.
 */
struct opx_cntr {
	struct fid_cntr cntr_fid;
	struct opx_domain *domain;
	enum fi_wait_obj wait_obj;
	_Atomic uint64_t value;
	_Atomic uint64_t err;
	struct opx_pset pset;
	int epoll_fd;
	_Atomic int refcnt;
};

int opx_cntr_open(struct fid_domain *domain, struct fi_cntr_attr *attr, struct fid_cntr **cntr,
		  void *context);
static inline void opx_cq_cntr_inc(struct opx_cntr *c)
{
	if (c)
		atomic_fetch_add_explicit(&c->value, 1, memory_order_release);
}
static inline void opx_cq_cntr_inc_err(struct opx_cntr *c)
{
	if (c)
		atomic_fetch_add_explicit(&c->err, 1, memory_order_release);
}
int opx_cntr_attach_ep(struct opx_cntr *cntr, struct opx_ep *ep);
void opx_cntr_detach_ep(struct opx_cntr *cntr, struct opx_ep *ep);

#endif /* OPX_CQ_H */
