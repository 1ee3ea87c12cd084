/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_cq.c - completion queue: the object and its reader side (fi_ops_cq,
 * which drives progress); the writer side that fills the ring and the
 * error list is at the bottom of the data path, opx_complete.c.
 *
 * Successful completions go to a power-of-two ring of full tagged
 * entries; the ring doubles when full.  Growth can fail (memory, or the
 * cap opx_complete_set_cap puts on it), so producers ask for room before they
 * consume an operation (opx_cq_room_locked): a send returns -FI_EAGAIN,
 * a receive post too, and progress leaves packets queued (the senders
 * then see -FI_EAGAIN) until the application reads the CQ.  A completion
 * that still finds no room (a multi-recv buffer draining many unexpected
 * messages at once, rendezvous completions) is not dropped: it becomes an
 * FI_EOVERRUN error entry that carries all of it.  Reporting is a handful
 * of stores; only growth allocates.
 *
 * Errors go to a list.  Each error remembers the ring position (tail) it
 * was reported at, so fi_cq_read returns the successful completions that
 * came before it and then -FI_EAVAIL: the error is "topmost" exactly when
 * man fi_cq says it is, and completion order is preserved across both.
 *
 * Reads convert from the tagged entry to the CQ's format by copying a
 * prefix: fi_cq_entry, fi_cq_msg_entry and fi_cq_data_entry are prefixes
 * of fi_cq_tagged_entry.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "opx.h"
#include "opx_cq.h"


#define OPX_CQ_DEF_SIZE 1024
#define OPX_CQ_MIN_SIZE 16
/* attr->size is a hint; the ring grows anyway, so a huge hint is not
 * allowed to pin memory up front. */
#define OPX_CQ_MAX_INIT_SIZE (1u << 20)

static_assert(offsetof(struct fi_cq_tagged_entry, op_context) == 0, "format prefix");
static_assert(offsetof(struct fi_cq_msg_entry, len) == offsetof(struct fi_cq_tagged_entry, len),
	      "format prefix");
static_assert(offsetof(struct fi_cq_data_entry, data) == offsetof(struct fi_cq_tagged_entry, data),
	      "format prefix");

/* Private part; struct opx_cq (opx.h) first so other files use it as is. */
struct opx_cq_priv {
	struct opx_cq cq;
	size_t entry_size;
	uint32_t api_version;
	bool armed;       /* fi_trywait armed our endpoints */
	int sig_fd;       /* FI_WAIT_FD: eventfd in the epoll set, for fi_cq_signal */
	_Atomic int sig_fd_written;
	char err_data[OPX_CQ_ERR_DATA_MAX]; /* provider-owned err_data (readerr) */
};

static inline struct opx_cq_priv *opx_cq_priv_of(struct opx_cq *cq)
{
	return OPX_CONTAINER_OF(cq, struct opx_cq_priv, cq);
}

static inline struct opx_cq *opx_cq_of(struct fid_cq *cq_fid)
{
	return OPX_CONTAINER_OF(cq_fid, struct opx_cq, cq_fid);
}

/* ---------------------------------------------------------------------
 * Consumer side.
 */
static struct opx_cq_err_node *opx_cq_first_err(struct opx_cq *cq)
{
	if (opx_list_empty(&cq->err_list))
		return NULL;
	return OPX_CONTAINER_OF(cq->err_list.next, struct opx_cq_err_node, err.link);
}

/* A ring the reader emptied starts again at slot 0, so that an
 * application that keeps up reuses the same few slots (lines in the
 * cache) instead of walking the whole ring, a cache miss per line on
 * every lap: with Open MPI's default CQ (1024 entries, 56 KiB) the
 * sender's completion store was its most expensive instruction.  Only
 * when no error waits: their positions are absolute. */
static inline void opx_cq_rewind_locked(struct opx_cq *cq)
{
	if (cq->head == cq->tail && opx_list_empty(&cq->err_list))
		cq->head = cq->tail = 0;
}

/* Successful entries readable before the first error, or -FI_EAVAIL when
 * the error is topmost. */
static ssize_t opx_cq_avail_locked(struct opx_cq *cq)
{
	OPX_ASSERT_LOCKED(&cq->domain->lock);
	struct opx_cq_err_node *en = opx_cq_first_err(cq);
	uint64_t end = cq->tail;

	if (en) {
		if (en->seq <= cq->head)
			return -FI_EAVAIL;
		end = en->seq;
	}
	return (ssize_t)(end - cq->head);
}

/* Housekeeping every read does before looking at entries: undo a
 * trywait's arming, drain a consumed fi_cq_signal, then progress. */
static void opx_cq_enter_read_locked(struct opx_cq *cq)
{
	OPX_ASSERT_LOCKED(&cq->domain->lock);
	struct opx_cq_priv *priv = opx_cq_priv_of(cq);

	if (__builtin_expect(priv->armed, 0)) {
		opx_pset_disarm_locked(&cq->pset);
		priv->armed = false;
	}
	if (__builtin_expect(atomic_load_explicit(&priv->sig_fd_written, memory_order_relaxed), 0)) {
		uint64_t v;

		atomic_store(&priv->sig_fd_written, 0);
		/* nonblocking: nothing to drain is fine */
		if (read(priv->sig_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			OPX_DBG(FI_LOG_CQ, "signal fd drain: %d\n", errno);
	}
	opx_pset_progress_locked(&cq->pset);
}

static ssize_t opx_cq_copy_locked(struct opx_cq *cq, void *buf, size_t count, fi_addr_t *src_addr)
{
	OPX_ASSERT_LOCKED(&cq->domain->lock);
	size_t esz = opx_cq_priv_of(cq)->entry_size;
	ssize_t avail = opx_cq_avail_locked(cq);
	uint8_t *out = buf;
	size_t n;

	if (avail < 0)
		return avail;
	if (avail == 0)
		return -FI_EAGAIN;
	n = (size_t)avail < count ? (size_t)avail : count;
	for (size_t i = 0; i < n; i++) {
		const struct opx_cq_slot *s = &cq->ring[(cq->head + i) & cq->mask];

		memcpy(out + i * esz, &s->e, esz);
		if (src_addr)
			src_addr[i] = s->src;
	}
	cq->head += n;
	opx_cq_rewind_locked(cq);
	return (ssize_t)n;
}

static ssize_t opx_cq_readfrom(struct fid_cq *cq_fid, void *buf, size_t count,
			       fi_addr_t *src_addr)
{
	struct opx_cq *cq;
	ssize_t ret;

	if (!cq_fid || (count && !buf))
		return -FI_EINVAL;
	cq = opx_cq_of(cq_fid);
	opx_lock_acquire(&cq->domain->lock);
	opx_cq_enter_read_locked(cq);
	if (count == 0) {
		/* man fi_cq: count 0 drives progress; still say whether
		 * an error is waiting. */
		ret = opx_cq_avail_locked(cq) == -FI_EAVAIL ? -FI_EAVAIL : 0;
	} else {
		ret = opx_cq_copy_locked(cq, buf, count, src_addr);
	}
	opx_lock_release(&cq->domain->lock);
	return ret;
}

static ssize_t opx_cq_read(struct fid_cq *cq_fid, void *buf, size_t count)
{
	return opx_cq_readfrom(cq_fid, buf, count, NULL);
}

/* Move an entry's provider data, if any, to the CQ's buffer, which stays
 * valid until the next read of the CQ (the entry itself is freed). */
static void opx_cq_err_data_own(struct opx_cq_priv *priv, struct opx_cq_err_node *en)
{
	if (!en->err.e.err_data_size) {
		en->err.e.err_data = NULL;
		return;
	}
	memcpy(priv->err_data, en->data, en->err.e.err_data_size);
	en->err.e.err_data = priv->err_data;
}

static ssize_t opx_cq_readerr(struct fid_cq *cq_fid, struct fi_cq_err_entry *buf, uint64_t flags)
{
	struct opx_cq_err_node *en;
	struct opx_cq_priv *priv;
	struct opx_cq *cq;

	if (!cq_fid || !buf)
		return -FI_EINVAL;
	if (flags)
		return -FI_EBADFLAGS;
	cq = opx_cq_of(cq_fid);
	priv = opx_cq_priv_of(cq);

	opx_lock_acquire(&cq->domain->lock);
	en = opx_cq_first_err(cq);
	if (!en) {
		opx_lock_release(&cq->domain->lock);
		return -FI_EAGAIN;
	}
	opx_list_remove(&en->err.link);

	if (FI_VERSION_LT(priv->api_version, FI_VERSION(1, 5))) {
		/* The 1.0 entry ends before err_data_size, and err_data
		 * always points to provider memory (NULL: no data). */
		opx_cq_err_data_own(priv, en);
		memcpy(buf, &en->err.e, offsetof(struct fi_cq_err_entry, err_data_size));
	} else if (!en->err.e.err_data_size) {
		/* No provider data (cancel, peek miss, truncation, ...): the
		 * caller's buffer is not touched whatever err_data_size says -
		 * it may be an uninitialised entry - and err_data_size says
		 * nothing was copied.  With size 0 there is nothing to point
		 * to either. */
		void *user = buf->err_data_size ? buf->err_data : NULL;

		*buf = en->err.e;
		buf->err_data = user;
		buf->err_data_size = 0;
	} else if (buf->err_data_size && buf->err_data) {
		void *user = buf->err_data;
		size_t n = buf->err_data_size < en->err.e.err_data_size ? buf->err_data_size
									: en->err.e.err_data_size;

		memcpy(user, en->data, n);
		*buf = en->err.e;
		buf->err_data = user;
		buf->err_data_size = n;
	} else {
		/* Valid until the next read of this CQ (man fi_cq).  Nothing
		 * was copied to the caller, so err_data_size says 0: an entry
		 * reused for the next readerr (of this or another CQ) then
		 * again asks for provider memory instead of handing back our
		 * buffer as if it were the caller's. */
		opx_cq_err_data_own(priv, en);
		*buf = en->err.e;
		buf->err_data_size = 0;
	}
	opx_lock_release(&cq->domain->lock);
	free(en);
	return 1;
}

struct opx_cq_wait_arg {
	struct opx_cq *cq;
	size_t threshold;
};

static bool opx_cq_wait_done(void *arg)
{
	struct opx_cq_wait_arg *wa = arg;
	struct opx_cq *cq = wa->cq;

	return !opx_list_empty(&cq->err_list) || cq->tail - cq->head >= wa->threshold;
}

static ssize_t opx_cq_sreadfrom(struct fid_cq *cq_fid, void *buf, size_t count,
				fi_addr_t *src_addr, const void *cond, int timeout)
{
	struct opx_cq_wait_arg wa;
	struct opx_cq *cq;
	ssize_t ret;
	int wret;

	if (!cq_fid || !buf || !count)
		return -FI_EINVAL;
	cq = opx_cq_of(cq_fid);
	/* man fi_cq: sread on a CQ without a wait object is invalid. */
	if (cq->wait_obj == FI_WAIT_NONE)
		return -FI_EINVAL;

	wa.cq = cq;
	wa.threshold = 1;
	if (cq->wait_cond == FI_CQ_COND_THRESHOLD && cond) {
		wa.threshold = *(const size_t *)cond;
		if (wa.threshold == 0)
			wa.threshold = 1;
		if (wa.threshold > count)
			wa.threshold = count;
	}

	opx_lock_acquire(&cq->domain->lock);
	opx_cq_enter_read_locked(cq);
	wret = opx_pset_wait_locked(&cq->pset, &cq->domain->lock, timeout, opx_cq_wait_done, &wa,
				    &cq->signaled);
	/* Timeout or fi_cq_signal: return what there is, else -FI_EAGAIN. */
	ret = opx_cq_copy_locked(cq, buf, count, src_addr);
	opx_lock_release(&cq->domain->lock);
	if (wret && wret != -FI_ETIMEDOUT && wret != -FI_ECANCELED && ret == -FI_EAGAIN)
		return wret;
	return ret;
}

static ssize_t opx_cq_sread(struct fid_cq *cq_fid, void *buf, size_t count, const void *cond,
			    int timeout)
{
	return opx_cq_sreadfrom(cq_fid, buf, count, NULL, cond, timeout);
}

static int opx_cq_signal(struct fid_cq *cq_fid)
{
	struct opx_cq_priv *priv;
	struct opx_cq *cq;

	if (!cq_fid)
		return -FI_EINVAL;
	cq = opx_cq_of(cq_fid);
	priv = opx_cq_priv_of(cq);
	if (cq->wait_obj == FI_WAIT_NONE)
		return -FI_EINVAL; /* man fi_cq: only with a wait object */
	/* No lock: a blocked sread holds none while it sleeps, and sees the
	 * flag within one sleep slice. */
	atomic_store(&cq->signaled, 1);
	if (priv->sig_fd >= 0) {
		uint64_t one = 1;

		atomic_store(&priv->sig_fd_written, 1);
		if (write(priv->sig_fd, &one, sizeof(one)) < 0)
			OPX_DBG(FI_LOG_CQ, "signal fd write: %d\n", errno);
	}
	return 0;
}

/* From prov_errno alone: err_data is opx's only for FI_SOURCE_ERR (an
 * address, not text), and after a readerr of an entry without data it is
 * whatever the caller passed in, so it is never read here. */
static const char *opx_cq_strerror(struct fid_cq *cq_fid, int prov_errno, const void *err_data,
				   char *buf, size_t len)
{
	static const char none[] = "opx: no provider error information";
	int code = prov_errno < 0 && prov_errno != INT_MIN ? -prov_errno : prov_errno;

	(void)cq_fid;
	(void)err_data;
	if (!buf || !len)
		return prov_errno ? fi_strerror(code) : none;
	if (prov_errno)
		snprintf(buf, len, "opx: %s (prov_errno %d)", fi_strerror(code), prov_errno);
	else
		snprintf(buf, len, "%s", none);
	return buf;
}

static struct fi_ops_cq opx_cq_ops = {
	.size = sizeof(struct fi_ops_cq),
	.read = opx_cq_read,
	.readfrom = opx_cq_readfrom,
	.readerr = opx_cq_readerr,
	.sread = opx_cq_sread,
	.sreadfrom = opx_cq_sreadfrom,
	.signal = opx_cq_signal,
	.strerror = opx_cq_strerror,
};

/* ---------------------------------------------------------------------
 * Endpoint attach.  Called from the endpoint's bind/close without the
 * domain lock (control path), so these take it.  An endpoint attached
 * twice is progressed and polled once, and in the epoll set once.
 */
int opx_cq_attach_ep(struct opx_cq *cq, struct opx_ep *ep)
{
	if (!cq || !ep)
		return -FI_EINVAL;
	return opx_pset_attach(&cq->domain->lock, &cq->pset, cq->epoll_fd, &cq->refcnt, ep);
}

void opx_cq_detach_ep(struct opx_cq *cq, struct opx_ep *ep)
{
	if (cq && ep)
		opx_pset_detach(&cq->domain->lock, &cq->pset, cq->epoll_fd, &cq->refcnt, ep);
}

/* ---------------------------------------------------------------------
 * fid ops and open.
 */
/* fi_trywait for this CQ (opx_wait_trywait dispatches here). */
static int opx_cq_trywait(struct opx_cq *cq)
{
	struct opx_cq_priv *priv = opx_cq_priv_of(cq);
	int ret;

	if (cq->wait_obj == FI_WAIT_NONE)
		return -FI_EINVAL;
	opx_lock_acquire(&cq->domain->lock);
	opx_pset_progress_locked(&cq->pset);
	ret = opx_pset_trywait_locked(&cq->pset, &priv->armed,
				      cq->tail != cq->head || !opx_list_empty(&cq->err_list));
	opx_lock_release(&cq->domain->lock);
	return ret;
}

static int opx_cq_control(struct fid *fid, int command, void *arg)
{
	struct opx_cq *cq = OPX_CONTAINER_OF(fid, struct opx_cq, cq_fid.fid);

	switch (command) {
	case OPX_CTL_TRYWAIT:
		return opx_cq_trywait(cq);
	case OPX_CTL_POLL: {
		int ready;

		opx_lock_acquire(&cq->domain->lock);
		opx_pset_progress_locked(&cq->pset);
		ready = cq->tail != cq->head || !opx_list_empty(&cq->err_list);
		opx_lock_release(&cq->domain->lock);
		return ready;
	}
	default:
		return opx_wait_control(command, arg, cq->epoll_fd, cq->wait_obj);
	}
}

static void opx_cq_free(struct opx_cq *cq)
{
	struct opx_cq_priv *priv = opx_cq_priv_of(cq);
	struct opx_list *it, *tmp;

	opx_list_foreach_safe(&cq->err_list, it, tmp)
	{
		opx_list_remove(it);
		free(OPX_CONTAINER_OF(it, struct opx_cq_err_node, err.link));
	}
	opx_pset_free(&cq->pset);
	if (cq->epoll_fd >= 0)
		close(cq->epoll_fd);
	if (priv->sig_fd >= 0)
		close(priv->sig_fd);
	free(cq->ring);
	free(priv);
}

static int opx_cq_close(struct fid *fid)
{
	struct opx_cq *cq = OPX_CONTAINER_OF(fid, struct opx_cq, cq_fid.fid);
	struct opx_domain *domain = cq->domain;

	opx_lock_acquire(&domain->lock);
	if (atomic_load(&cq->refcnt) > 0) {
		opx_lock_release(&domain->lock);
		return -FI_EBUSY;
	}
	opx_lock_release(&domain->lock);
	opx_cq_free(cq);
	atomic_fetch_sub(&domain->refcnt, 1);
	return 0;
}

static struct fi_ops opx_cq_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = opx_cq_close,
	.bind = opx_init_no_bind,
	.control = opx_cq_control,
	.ops_open = opx_init_no_ops_open,
};

static int opx_cq_check_attr(const struct fi_cq_attr *attr)
{
	int ret;

	switch (attr->format) {
	case FI_CQ_FORMAT_UNSPEC:
	case FI_CQ_FORMAT_CONTEXT:
	case FI_CQ_FORMAT_MSG:
	case FI_CQ_FORMAT_DATA:
	case FI_CQ_FORMAT_TAGGED:
		break;
	default:
		return -FI_EINVAL;
	}
	ret = opx_wait_obj_check(attr->wait_obj);
	if (ret)
		return ret;
	if (attr->wait_cond != FI_CQ_COND_NONE && attr->wait_cond != FI_CQ_COND_THRESHOLD)
		return -FI_EINVAL;
	if (attr->flags & ~(uint64_t)FI_AFFINITY)
		return -FI_EBADFLAGS;
	return 0;
}

static size_t opx_cq_entry_size(enum fi_cq_format format)
{
	switch (format) {
	case FI_CQ_FORMAT_MSG:
		return sizeof(struct fi_cq_msg_entry);
	case FI_CQ_FORMAT_DATA:
		return sizeof(struct fi_cq_data_entry);
	case FI_CQ_FORMAT_TAGGED:
		return sizeof(struct fi_cq_tagged_entry);
	default:
		return sizeof(struct fi_cq_entry);
	}
}

static int opx_cq_open_fds(struct opx_cq_priv *priv)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};

	priv->cq.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (priv->cq.epoll_fd < 0)
		goto err;
	priv->sig_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (priv->sig_fd < 0)
		goto err;
	if (epoll_ctl(priv->cq.epoll_fd, EPOLL_CTL_ADD, priv->sig_fd, &ev))
		goto err;
	return 0;
err:
	OPX_WARN(FI_LOG_CQ, "cannot create CQ wait fd: %d\n", errno);
	return opx_init_err_from_shim(-errno);
}

int opx_cq_open(struct fid_domain *domain_fid, struct fi_cq_attr *attr, struct fid_cq **cq_out,
		void *context)
{
	struct fi_cq_attr def = {.format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_NONE};
	const struct fi_cq_attr *a = attr ? attr : &def;
	struct opx_domain *domain;
	struct opx_cq_priv *priv;
	struct opx_cq *cq;
	size_t size;
	int ret;

	if (!domain_fid || !cq_out)
		return -FI_EINVAL;
	ret = opx_cq_check_attr(a);
	if (ret)
		return ret;
	domain = OPX_CONTAINER_OF(domain_fid, struct opx_domain, domain_fid);

	priv = calloc(1, sizeof(*priv));
	if (!priv)
		return -FI_ENOMEM;
	cq = &priv->cq;
	cq->epoll_fd = -1;
	priv->sig_fd = -1;
	size = OPX_CQ_MIN_SIZE;
	while (size < (a->size ? a->size : OPX_CQ_DEF_SIZE) && size < OPX_CQ_MAX_INIT_SIZE)
		size *= 2;
	cq->ring = malloc(size * sizeof(*cq->ring));
	if (!cq->ring) {
		free(priv);
		return -FI_ENOMEM;
	}
	cq->mask = size - 1;
	cq->format = a->format == FI_CQ_FORMAT_UNSPEC ? FI_CQ_FORMAT_CONTEXT : a->format;
	cq->wait_obj = a->wait_obj;
	cq->wait_cond = a->wait_cond;
	cq->domain = domain;
	opx_list_init(&cq->err_list);
	atomic_init(&cq->signaled, 0);
	atomic_init(&cq->refcnt, 0);
	atomic_init(&priv->sig_fd_written, 0);
	priv->entry_size = opx_cq_entry_size(cq->format);
	priv->api_version = domain->fabric->fabric_fid.api_version;
	if (!priv->api_version)
		priv->api_version = OPX_FI_VERSION;
	if (cq->wait_obj == FI_WAIT_FD) {
		ret = opx_cq_open_fds(priv);
		if (ret) {
			opx_cq_free(cq);
			return ret;
		}
	}

	cq->cq_fid.fid.fclass = FI_CLASS_CQ;
	cq->cq_fid.fid.context = context;
	cq->cq_fid.fid.ops = &opx_cq_fi_ops;
	cq->cq_fid.ops = &opx_cq_ops;
	atomic_fetch_add(&domain->refcnt, 1);
	*cq_out = &cq->cq_fid;
	return 0;
}
