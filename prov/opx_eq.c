/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_eq.c - event queue (control path).
 *
 * RDM endpoints rarely post events, so the EQ favours simplicity: one
 * mutex, one FIFO of heap entries kept in arrival order (events and
 * errors together, so "an error at the head" is exactly what fi_eq(3)
 * means by -FI_EAVAIL), and an eventfd whose readability mirrors "the
 * FIFO is not empty" for FI_WAIT_FD.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "opx.h"
#include "opx_wait.h"

/*
 * fi_eq_write flag that inserts an error entry (buf is a struct
 * fi_eq_err_entry).  The public API has no way to do this; the bit is in
 * the range libfabric reserves for providers.  Provider code that needs
 * to report an asynchronous error writes through this flag.
 */
#define OPX_EQ_WRITE_ERR (1ULL << 60)

struct opx_eq_entry {
	struct opx_list link;
	uint32_t event;
	uint64_t flags;
	bool is_err;
	struct fi_eq_err_entry err; /* valid when is_err */
	size_t len;
	uint8_t buf[]; /* event data, or err_data bytes when is_err */
};

/* The EQ plus what fi_eq(3) asks a provider to keep: the err_data buffer
 * of the last error read stays valid until the next read. */
struct opx_eq_impl {
	struct opx_eq eq;
	struct opx_eq_entry *last_err;
};

static struct opx_eq_impl *opx_eq_impl(struct fid_eq *eq)
{
	return OPX_CONTAINER_OF(eq, struct opx_eq_impl, eq.eq_fid);
}

/* Keep the eventfd readable iff there are entries.  Called with lock. */
static void opx_eq_signal_locked(struct opx_eq *eq)
{
	OPX_ASSERT_LOCKED(&eq->lock);
	if (eq->efd >= 0)
		(void)eventfd_write(eq->efd, 1);
}

static void opx_eq_drain_locked(struct opx_eq *eq)
{
	OPX_ASSERT_LOCKED(&eq->lock);
	eventfd_t v;

	if (eq->efd >= 0 && opx_list_empty(&eq->events))
		(void)eventfd_read(eq->efd, &v); /* non-blocking: EAGAIN is fine */
}

static void opx_eq_forget_err_locked(struct opx_eq_impl *impl)
{
	OPX_ASSERT_LOCKED(&impl->eq.lock);
	free(impl->last_err);
	impl->last_err = NULL;
}

static struct opx_eq_entry *opx_eq_head_locked(struct opx_eq *eq)
{
	OPX_ASSERT_LOCKED(&eq->lock);
	if (opx_list_empty(&eq->events))
		return NULL;
	return OPX_CONTAINER_OF(eq->events.next, struct opx_eq_entry, link);
}

static ssize_t opx_eq_read_locked(struct opx_eq_impl *impl, uint32_t *event, void *buf,
				  size_t len, uint64_t flags)
{
	OPX_ASSERT_LOCKED(&impl->eq.lock);
	struct opx_eq *eq = &impl->eq;
	struct opx_eq_entry *e = opx_eq_head_locked(eq);
	size_t n;

	if (!e)
		return -FI_EAGAIN;
	if (e->is_err)
		return -FI_EAVAIL;
	if (len < e->len && buf)
		return -FI_ETOOSMALL;
	n = e->len;
	if (event)
		*event = e->event;
	if (buf && n)
		memcpy(buf, e->buf, n);
	if (!(flags & FI_PEEK)) {
		opx_eq_forget_err_locked(impl);
		opx_list_remove(&e->link);
		free(e);
		opx_eq_drain_locked(eq);
	}
	return (ssize_t)n;
}

static ssize_t opx_eq_read(struct fid_eq *eq_fid, uint32_t *event, void *buf, size_t len,
			   uint64_t flags)
{
	struct opx_eq_impl *impl;
	ssize_t ret;

	if (!eq_fid || (!buf && len))
		return -FI_EINVAL;
	if (flags & ~FI_PEEK)
		return -FI_EBADFLAGS;
	impl = opx_eq_impl(eq_fid);
	opx_lock_acquire(&impl->eq.lock);
	ret = opx_eq_read_locked(impl, event, buf, len, flags);
	opx_lock_release(&impl->eq.lock);
	return ret;
}

static ssize_t opx_eq_readerr(struct fid_eq *eq_fid, struct fi_eq_err_entry *buf, uint64_t flags)
{
	struct opx_eq_impl *impl;
	struct opx_eq_entry *e;
	size_t want;

	if (!eq_fid || !buf)
		return -FI_EINVAL;
	if (flags & ~FI_PEEK)
		return -FI_EBADFLAGS;
	impl = opx_eq_impl(eq_fid);
	opx_lock_acquire(&impl->eq.lock);
	e = opx_eq_head_locked(&impl->eq);
	if (!e || !e->is_err) {
		opx_lock_release(&impl->eq.lock);
		return -FI_EAGAIN;
	}
	want = buf->err_data_size;
	buf->fid = e->err.fid;
	buf->context = e->err.context;
	buf->data = e->err.data;
	buf->err = e->err.err;
	buf->prov_errno = e->err.prov_errno;
	if (!e->len) {
		buf->err_data = NULL;
		buf->err_data_size = 0;
	} else if (want && buf->err_data) {
		/* 1.5+: copy into the caller's buffer. */
		buf->err_data_size = want < e->len ? want : e->len;
		memcpy(buf->err_data, e->buf, buf->err_data_size);
	} else {
		/* Compatibility: point at our copy, valid until the next read. */
		buf->err_data = e->buf;
		buf->err_data_size = e->len;
	}
	if (!(flags & FI_PEEK)) {
		opx_eq_forget_err_locked(impl);
		opx_list_remove(&e->link);
		impl->last_err = e;
		opx_eq_drain_locked(&impl->eq);
	}
	opx_lock_release(&impl->eq.lock);
	return (ssize_t)sizeof(*buf);
}

static ssize_t opx_eq_write(struct fid_eq *eq_fid, uint32_t event, const void *buf, size_t len,
			    uint64_t flags)
{
	struct opx_eq_impl *impl;
	struct opx_eq_entry *e;
	const struct fi_eq_err_entry *err = NULL;
	size_t data_len = len;

	if (!eq_fid || (!buf && len))
		return -FI_EINVAL;
	if (flags & ~OPX_EQ_WRITE_ERR)
		return -FI_EBADFLAGS;
	if (flags & OPX_EQ_WRITE_ERR) {
		if (len < sizeof(*err))
			return -FI_EINVAL;
		err = buf;
		if (err->err_data_size && !err->err_data)
			return -FI_EINVAL;
		data_len = err->err_data_size;
	}
	e = calloc(1, sizeof(*e) + data_len);
	if (!e)
		return -FI_ENOMEM;
	e->event = event;
	e->flags = flags;
	e->len = data_len;
	if (err) {
		e->is_err = true;
		e->err = *err;
		e->err.err_data = NULL;
		e->err.err_data_size = 0;
		if (data_len)
			memcpy(e->buf, err->err_data, data_len);
	} else if (len) {
		memcpy(e->buf, buf, len);
	}
	impl = opx_eq_impl(eq_fid);
	opx_lock_acquire(&impl->eq.lock);
	opx_list_insert_tail(&impl->eq.events, &e->link);
	opx_eq_signal_locked(&impl->eq);
	opx_lock_release(&impl->eq.lock);
	return (ssize_t)len;
}

static uint64_t opx_eq_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static ssize_t opx_eq_sread(struct fid_eq *eq_fid, uint32_t *event, void *buf, size_t len,
			    int timeout, uint64_t flags)
{
	struct opx_eq_impl *impl;
	uint64_t deadline = 0;
	ssize_t ret;

	if (!eq_fid || (!buf && len))
		return -FI_EINVAL;
	if (flags & ~FI_PEEK)
		return -FI_EBADFLAGS;
	impl = opx_eq_impl(eq_fid);
	if (impl->eq.wait_obj == FI_WAIT_NONE)
		return -FI_EINVAL; /* fi_eq(3): sread is invalid without a wait object */
	if (timeout >= 0)
		deadline = opx_eq_now_ms() + (uint64_t)timeout;

	for (;;) {
		struct pollfd pfd = {.fd = impl->eq.efd, .events = POLLIN};
		int slice = opx_env.sleep_ms > 0 ? opx_env.sleep_ms : 1;

		opx_lock_acquire(&impl->eq.lock);
		ret = opx_eq_read_locked(impl, event, buf, len, flags);
		opx_lock_release(&impl->eq.lock);
		if (ret != -FI_EAGAIN)
			return ret;
		if (timeout >= 0) {
			uint64_t now = opx_eq_now_ms();

			if (now >= deadline)
				return -FI_EAGAIN;
			if (deadline - now < (uint64_t)slice)
				slice = (int)(deadline - now);
		}
		/* Sleep on the eventfd in bounded slices: a writer wakes us at
		 * once, and a bounded slice keeps an infinite wait interruptible
		 * by nothing worse than one slice of latency. */
		if (poll(&pfd, 1, slice) < 0 && errno != EINTR)
			return -FI_EOTHER;
	}
}

static const char *opx_eq_strerror(struct fid_eq *eq_fid, int prov_errno, const void *err_data,
				   char *buf, size_t len)
{
	const char *s = fi_strerror(prov_errno < 0 ? -prov_errno : prov_errno);

	(void)eq_fid;
	if (buf && len) {
		if (err_data)
			snprintf(buf, len, "%s (opx: %.*s)", s, 64, (const char *)err_data);
		else
			snprintf(buf, len, "%s", s);
		return buf;
	}
	return s;
}

static int opx_eq_close(struct fid *fid)
{
	struct opx_eq_impl *impl;
	struct opx_list *it, *tmp;

	if (!fid || fid->fclass != FI_CLASS_EQ)
		return -FI_EINVAL;
	impl = OPX_CONTAINER_OF(fid, struct opx_eq_impl, eq.eq_fid.fid);
	if (atomic_load(&impl->eq.refcnt) > 0)
		return -FI_EBUSY;
	opx_list_foreach_safe(&impl->eq.events, it, tmp)
	{
		opx_list_remove(it);
		free(OPX_CONTAINER_OF(it, struct opx_eq_entry, link));
	}
	free(impl->last_err); /* no one else can reach the EQ any more */
	if (impl->eq.efd >= 0)
		close(impl->eq.efd);
	opx_lock_destroy(&impl->eq.lock);
	atomic_fetch_sub(&impl->eq.fabric->refcnt, 1);
	free(impl);
	return 0;
}

/* fi_trywait(3) for an EQ (opx_wait_trywait dispatches here): -FI_EAGAIN
 * while an event or error is queued, else 0.  The eventfd is readable
 * exactly while the FIFO is not empty, so there is nothing to arm: a
 * writer signals it after queuing. */
static int opx_eq_trywait(struct opx_eq *eq)
{
	int ret;

	if (eq->wait_obj == FI_WAIT_NONE)
		return -FI_EINVAL;
	opx_lock_acquire(&eq->lock);
	ret = opx_list_empty(&eq->events) ? 0 : -FI_EAGAIN;
	opx_lock_release(&eq->lock);
	return ret;
}

static int opx_eq_control(struct fid *fid, int command, void *arg)
{
	struct opx_eq_impl *impl;

	if (!fid || fid->fclass != FI_CLASS_EQ)
		return -FI_EINVAL;
	impl = OPX_CONTAINER_OF(fid, struct opx_eq_impl, eq.eq_fid.fid);
	if (command == OPX_CTL_TRYWAIT)
		return opx_eq_trywait(&impl->eq);
	return opx_wait_control(command, arg, impl->eq.wait_obj == FI_WAIT_FD ? impl->eq.efd : -1,
				impl->eq.wait_obj);
}

static struct fi_ops opx_eq_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = opx_eq_close,
	.bind = opx_init_no_bind,
	.control = opx_eq_control,
	.ops_open = opx_init_no_ops_open,
};

static struct fi_ops_eq opx_eq_ops = {
	.size = sizeof(struct fi_ops_eq),
	.read = opx_eq_read,
	.readerr = opx_eq_readerr,
	.write = opx_eq_write,
	.sread = opx_eq_sread,
	.strerror = opx_eq_strerror,
};

int opx_eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr, struct fid_eq **eq,
		void *context)
{
	struct opx_fabric *fab;
	struct opx_eq_impl *impl;
	enum fi_wait_obj wait;

	if (!fabric || fabric->fid.fclass != FI_CLASS_FABRIC || !attr || !eq)
		return -FI_EINVAL;
	fab = OPX_CONTAINER_OF(fabric, struct opx_fabric, fabric_fid);
	if (attr->flags & ~FI_WRITE) /* FI_WRITE: fi_eq_write allowed (always is) */
		return -FI_EBADFLAGS;
	switch (attr->wait_obj) {
	case FI_WAIT_NONE:
		wait = FI_WAIT_NONE;
		break;
	case FI_WAIT_UNSPEC: /* the best we have is an fd */
	case FI_WAIT_FD:
		wait = FI_WAIT_FD;
		break;
	default:
		OPX_INFO(FI_LOG_EQ, "wait object %d not supported\n", (int)attr->wait_obj);
		return -FI_ENOSYS;
	}
	if (attr->wait_set)
		return -FI_ENOSYS;

	impl = calloc(1, sizeof(*impl));
	if (!impl)
		return -FI_ENOMEM;
	impl->eq.efd = -1;
	if (wait == FI_WAIT_FD) {
		impl->eq.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (impl->eq.efd < 0) {
			int err = -errno;

			free(impl);
			return opx_init_err_from_shim(err);
		}
	}
	impl->eq.fabric = fab;
	impl->eq.wait_obj = wait;
	opx_lock_init(&impl->eq.lock, true); /* always a real mutex */
	opx_list_init(&impl->eq.events);
	opx_list_init(&impl->eq.errors); /* unused: errors stay in arrival order */
	atomic_init(&impl->eq.refcnt, 0);
	impl->eq.eq_fid.fid.fclass = FI_CLASS_EQ;
	impl->eq.eq_fid.fid.context = context;
	impl->eq.eq_fid.fid.ops = &opx_eq_fi_ops;
	impl->eq.eq_fid.ops = &opx_eq_ops;
	atomic_fetch_add(&fab->refcnt, 1);
	*eq = &impl->eq.eq_fid;
	return 0;
}
