/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * fixture.h - shared cmocka fixtures for the opx unit test binaries.
 *
 * Unit tests link the provider objects (libopx_core) statically and call
 * them the way libfabric's core would: fi_prov_ini() for the provider,
 * prov->getinfo() and prov->fabric() directly, then the public fi_*
 * inline API for everything below the fabric.  No FI_PROVIDER_PATH, no
 * dlopen, so a test exercises exactly the objects that ship.
 */
#ifndef OPX_TEST_FIXTURE_H
#define OPX_TEST_FIXTURE_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <sys/types.h>

#include <cmocka.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_prov.h>

/* The API version every fixture asks for. */
#define FX_VERSION FI_VERSION(1, 17)

/* The provider's entry point; fi_prov.h only has the FI_EXT_INI
 * definition macro, not a prototype. */
struct fi_provider *fi_prov_ini(void);

/* The provider, initialised (safe to call any number of times).  Tests
 * must get the provider through this, never by calling fi_prov_ini()
 * first: the libfabric core has to be initialised before the provider
 * defines its parameters (see fixture.c). */
struct fi_provider *fx_prov(void);

/* fi_getinfo through the provider, RDM endpoint.
 *  threading: NULL (provider default), or "safe", "fid", "domain",
 *             "completion", "endpoint" (also accepted: "FI_THREAD_SAFE"...)
 *  caps:      0 for the provider's default capabilities.
 * Returns 0 with *info set (free it with fi_freeinfo), or the -FI_E* code
 * of getinfo (-FI_EINVAL for an unknown threading string). */
int fx_getinfo(const char *threading, uint64_t caps, struct fi_info **info);
/* The same with hints->addr_format (FI_FORMAT_UNSPEC: as fx_getinfo). */
int fx_getinfo_fmt(const char *threading, uint64_t caps, uint32_t addr_format,
		   struct fi_info **info);

/* Hints for an RDM endpoint with caps (0: the provider's defaults), to
 * adjust and pass to fx_getinfo_hints; NULL when out of memory. */
struct fi_info *fx_hints(uint64_t caps);
/* fi_getinfo through the provider with hints (still the caller's). */
int fx_getinfo_hints(const struct fi_info *hints, struct fi_info **info);

/* A loopback environment: one fabric, domain, AV, CQ and an enabled
 * endpoint bound to both, whose own address is inserted in the AV as
 * `self`.  The CQ is opened with wait_obj FI_WAIT_NONE and the given
 * format; the endpoint is bound with FI_TRANSMIT | FI_RECV, and to a
 * write and a read counter when asked for (struct fx_opts). */
struct fx_env {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_cntr *wcntr, *rcntr; /* NULL unless fx_opts.cntrs */
	struct fid_ep *ep;
	fi_addr_t self;
};

/* How fx_open_info opens the rest (NULL: FI_AV_TABLE, FI_CQ_FORMAT_TAGGED,
 * no counters, the endpoint anywhere). */
struct fx_opts {
	enum fi_av_type av_type;
	enum fi_cq_format cq_format;
	/* a write and a read counter (FI_CNTR_EVENTS_COMP, FI_WAIT_NONE),
	 * bound FI_WRITE and FI_READ */
	int cntrs;
	const void *src; /* the endpoint's fi_info src_addr (NULL: unset) */
	size_t srclen;
};

/* Open *e (zeroed first).  On failure everything opened so far is closed,
 * *e is zeroed again and the failing call's -FI_E* code is returned. */
int fx_open(struct fx_env *e, enum fi_av_type av_type, enum fi_cq_format cq_format);
/* The same with the endpoint at src (fi_info src_addr, e.g. a port). */
int fx_open_at(struct fx_env *e, enum fi_av_type av_type, enum fi_cq_format cq_format,
	       const void *src, size_t srclen);
/* fx_open (FI_AV_TABLE, FI_CQ_FORMAT_TAGGED) from an info asked for
 * with caps (0: defaults) and addr_format: names in that format. */
int fx_open_fmt(struct fx_env *e, uint32_t addr_format, uint64_t caps);
/* Open *e from info (the caller's fi_getinfo answer, adjusted as it
 * likes; e owns it from here, also on failure).  Same failure contract
 * as fx_open. */
int fx_open_info(struct fx_env *e, struct fi_info *info, const struct fx_opts *o);
/* fx_open_info (FI_AV_TABLE, FI_CQ_FORMAT_TAGGED) from the info of
 * hints (still the caller's). */
int fx_open_hints(struct fx_env *e, const struct fi_info *hints);
/* Only info, fabric and domain (threading as for fx_getinfo); av, cq and
 * ep stay NULL.  Same failure contract as fx_open. */
int fx_open_domain(struct fx_env *e, const char *threading);
/* The same from an info asked for with caps and addr_format. */
int fx_open_domain_fmt(struct fx_env *e, const char *threading, uint64_t caps,
		       uint32_t addr_format);
/* Close in reverse order; safe on a zeroed or partly opened env. */
void fx_close(struct fx_env *e);
/* One more endpoint on e's domain and AV, opened from info (NULL: e's),
 * bound to cq (NULL: e's) and enabled; *addr is its fi_addr in the AV.
 * Fails the test on any error. */
void fx_open_peer_ep(struct fx_env *e, struct fi_info *info, struct fid_cq *cq,
		     struct fid_ep **ep, fi_addr_t *addr);
/* The same with the directions apart: bound FI_TRANSMIT to txcq and
 * FI_RECV to rxcq in two fi_ep_bind calls (rxcq may be txcq: the CQ is
 * then bound twice; NULL: txcq for both, in one call, as fx_open_peer_ep),
 * and to rcntr for FI_RECV unless NULL. */
void fx_open_peer_ep_split(struct fx_env *e, struct fi_info *info, struct fid_cq *txcq,
			   struct fid_cq *rxcq, struct fid_cntr *rcntr, struct fid_ep **ep,
			   fi_addr_t *addr);

/* cmocka group/test fixtures: *state becomes a heap struct fx_env opened
 * with FI_AV_TABLE and FI_CQ_FORMAT_TAGGED.  fx_setup fails the test
 * (returns -1) if fx_open fails. */
int fx_setup(void **state);
int fx_teardown(void **state);

/* Unset the FI_OPX_* parameters a caller's environment may set (unit,
 * MTU, ring sizes, thresholds, job key, spinning), so a suite that checks
 * defaults sees them: call before the first fi_getinfo. */
void fx_param_defaults(void);

/* CLOCK_MONOTONIC in milliseconds, for the deadlines of bounded waits. */
uint64_t fx_now_ms(void);
/* Take the machine-wide test resource `what` (a lock file in /tmp, per
 * user) for the rest of the process, waiting at most ms for another run
 * (another build's make check) to finish with it: tests that fill a
 * shared namespace, like every context name of one unit, must not meet a
 * concurrent run of themselves.  Returns the lock's fd, -1 on timeout. */
int fx_exclusive(const char *what, unsigned ms);

/* Read cq one entry at a time until the completion of ctx shows up or ms
 * milliseconds have passed (it reads at least once; the deadline is
 * inclusive).  Other completions read on the way, successful or in
 * error, are dropped: loopback sends complete on the same CQ.  Returns
 * 0 (*out filled when out is not NULL), the positive FI_E* error of an
 * error completion for ctx, or -FI_ETIMEDOUT. */
int fx_cq_wait(struct fid_cq *cq, void *ctx, unsigned ms, struct fi_cq_tagged_entry *out);

/* The echo peers of the udp wire suites (test_auth, test_rel): a
 * message is the sender's name (FX_ECHO_NAME bytes) then data, which
 * the peer sends back tagged FX_TAG_ECHO. */
#define FX_TAG_ECHO 0x77u
#define FX_ECHO_NAME 32u
#define FX_ECHO_MS 20000u
/* Byte i of the data of seed. */
uint8_t fx_echo_pat(unsigned seed, size_t i);
/* Send len data bytes of seed tagged tag to `to`, and check they come
 * back within FX_ECHO_MS; fails the test otherwise. */
void fx_echo(struct fx_env *e, fi_addr_t to, size_t len, unsigned seed, uint64_t tag);
/* The echo peer's side, once: post a receive of FX_TAG_ECHO (the tag bits
 * in ignore ignored) into buf, wait for it until end (fx_now_ms), then
 * send the data after the sender's name back to the sender (inserted in
 * the AV when unknown), tagged FX_TAG_ECHO, or with high set the bits of
 * the tag it came with that are in ignore (FX_TAG_ECHO when none are).
 * Returns 0 (*ent: the message), -1 when end passed first, or the exit
 * status of a child that failed: 3 receive, 4 AV insert, 5 send. */
int fx_echo_serve(struct fx_env *e, void *buf, size_t size, uint64_t ignore, int high,
		  uint64_t end, struct fi_cq_tagged_entry *ent);
/* SIGKILL a child and reap it. */
void fx_reap(pid_t pid);

/* Completions read from a CQ (FI_CQ_FORMAT_TAGGED) but not yet claimed by
 * a test, found by context: operations that complete in an order the
 * tests should not depend on (loopback puts send and receive completions
 * on one CQ). */
#define FX_STASH_MAX 4096
struct fx_comp {
	void *ctx;
	struct fi_cq_tagged_entry e; /* error entries: the fields they share */
	fi_addr_t src;               /* FI_ADDR_NOTAVAIL for an error entry */
	int err;                     /* 0, or the positive FI_E* of an error entry */
	size_t olen;
};
struct fx_stash {
	struct fx_comp seen[FX_STASH_MAX];
	size_t n;
};
/* Read the CQ once (progress) and stash what completed. */
void fx_stash_poll(struct fid_cq *cq, struct fx_stash *st);
/* The completion of ctx within ms: 0 and *out (NULL: dropped), or
 * -FI_ETIMEDOUT.  The others stay stashed, in order. */
int fx_stash_wait(struct fid_cq *cq, struct fx_stash *st, void *ctx, struct fx_comp *out,
		  unsigned ms);

#endif /* OPX_TEST_FIXTURE_H */
