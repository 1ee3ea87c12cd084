/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_rma_test.h - shared by the opx_rma_test harness (opx_rma_test.c:
 * the target, the forked or connecting initiators, the pipes or TCP
 * connections between them, main) and the initiators' subtests
 * (opx_rma_subtests.c).
 *
 * An initiator talks to the target through ask(): a struct cmd answered
 * with one byte, 'k' when the target found what the command says (its
 * memory holds a pattern, is unchanged, a region closed).  A failure
 * anywhere is fatal: DIE() prints where and exits, and the harness turns
 * an initiator's exit status into the verdict.
 */
#ifndef OPX_RMA_TEST_H
#define OPX_RMA_TEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#define NCHILD 3
#define BIG (64u << 20)
#define BIG_PAD 4096u
#define SMALL 4096u
#define NINC 1000
#define NCAS 100
#define DEADLINE_S 240
#define STALL_MS 300

#define DIE(...)                                                                                   \
	do {                                                                                       \
		fprintf(stderr, "[%d] FAIL %s:%d: ", (int)getpid(), __FILE__, __LINE__);           \
		fprintf(stderr, __VA_ARGS__);                                                      \
		fprintf(stderr, "\n");                                                             \
		exit(1);                                                                           \
	} while (0)
#define CHK(x)                                                                                     \
	do {                                                                                       \
		long _r = (long)(x);                                                               \
		if (_r < 0)                                                                        \
			DIE("%s = %ld (%s)", #x, _r, fi_strerror((int)-_r));                       \
	} while (0)

struct node {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
};

/* What the target tells each initiator. */
enum { R_BIG, R_RO, R_WO, R_ATOM, R_DOOMED, R_NUM };
struct setup {
	char addr[64];
	size_t addrlen;
	uint64_t base[R_NUM]; /* remote address of offset 0 of each region */
	uint64_t key[R_NUM];
};

/* Requests from an initiator to the target (pipe). */
struct cmd {
	char op;       /* V verify pattern, U unchanged, X close doomed key, D done,
			  S stall: no progress for STALL_MS after answering */
	uint32_t seed;
	uint64_t off, len;
	uint64_t ndata; /* D: writedata operations sent */
	int status;     /* D */
};

/* ---- the harness (opx_rma_test.c) ------------------------------------------ */
extern bool virt;        /* -v: FI_MR_VIRT_ADDR | FI_MR_PROV_KEY */
extern struct node me;   /* this initiator's node */
extern fi_addr_t tgt;    /* the target in me's AV */
extern struct setup su;  /* what the target told this initiator */
extern uint64_t ndata;   /* writedata operations sent */

/* DIE once DEADLINE_S has passed since the start. */
void check_deadline(void);
/* n bytes of the pattern of seed. */
void fill(uint8_t *p, size_t n, uint32_t seed);
/* Wait for the completion of ctx; returns 0 or the positive error. */
int wait_comp(void *ctx);
/* Send c to the target, return its one-byte answer ('k': fine). */
char ask(struct cmd c);
/* DIE unless the completion error got is want (0: success). */
void expect_err(int got, int want, const char *what);

/* Post with retry on -FI_EAGAIN (progressing). */
#define POST(call)                                                                                 \
	do {                                                                                       \
		ssize_t _rc;                                                                       \
		while ((_rc = (call)) == -FI_EAGAIN) {                                             \
			struct fi_cq_data_entry _c;                                                \
			if (fi_cq_read(me.cq, &_c, 0) < -FI_EAGAIN)                                 \
				DIE("cq");                                                         \
			check_deadline();                                                          \
		}                                                                                  \
		CHK(_rc);                                                                          \
	} while (0)

/* ---- the initiators' subtests (opx_rma_subtests.c) ------------------------- */
void sweep(void);
void atomics(void);
void atomics_max(void);
void inject_window(void);
void refused(void);
void hammer(void);

#endif /* OPX_RMA_TEST_H */
