/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_rma_api.c - the fi_ops_rma entry points, and opx_rma_post, through
 * which the fi_ops_atomic ones (opx_atomic_api.c) post too.  Each call
 * becomes one struct opx_rma_args for the one-sided engine (opx_rma.c).
 * When the engine has no descriptor free, or a fenced operation
 * must wait for earlier ones, the call progresses the endpoint once and
 * tries again before it returns -FI_EAGAIN: this layer sits above progress,
 * the engine below it.
 */
#include "opx_ep.h"
#include "opx_rma.h"

ssize_t opx_rma_post(struct opx_ep *ep, const struct opx_rma_args *a)
{
	ssize_t rc;

	if (ep->sep_role == OPX_SEP_RX) /* a receive context initiates nothing */
		return -FI_EOPNOTSUPP;
	opx_lock_acquire(&ep->domain->lock);
	rc = opx_rma_post_locked(ep, a);
	if (rc == -FI_EAGAIN) {
		opx_progress_locked(ep);
		rc = opx_rma_post_locked(ep, a);
	}
	opx_lock_release(&ep->domain->lock);
	return rc;
}

/* ---------------------------------------------------------------------
 * fi_ops_rma.
 */
#define OPX_RMA_IOV1(buf, len) ((struct iovec){.iov_base = (void *)(buf), .iov_len = (len)})

static ssize_t opx_rma_common(struct fid_ep *fep, enum opx_rma_type type, const struct iovec *iov,
			      size_t cnt, fi_addr_t dest, uint64_t addr, uint64_t key,
			      uint64_t data, void *context, uint64_t flags)
{
	struct opx_rma_args a = {0};

	a.type = type;
	a.iov = iov;
	a.cnt = cnt;
	a.dest = dest;
	a.addr = addr;
	a.key = key;
	a.data = data;
	a.context = context;
	a.flags = flags;
	return opx_rma_post(opx_ep_of(fep), &a);
}

static ssize_t opx_rma_read(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src,
			    uint64_t addr, uint64_t key, void *context)
{
	struct iovec v = OPX_RMA_IOV1(buf, len);
	(void)desc;
	return opx_rma_common(ep, OPX_RT_READ, &v, 1, src, addr, key, 0, context,
			      opx_ep_of(ep)->tx_op_flags);
}

static ssize_t opx_rma_readv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
			     fi_addr_t src, uint64_t addr, uint64_t key, void *context)
{
	(void)desc;
	return opx_rma_common(ep, OPX_RT_READ, iov, count, src, addr, key, 0, context,
			      opx_ep_of(ep)->tx_op_flags);
}

static ssize_t opx_rma_msg(struct fid_ep *ep, const struct fi_msg_rma *msg, uint64_t flags,
			   enum opx_rma_type type)
{
	if (!msg || msg->rma_iov_count != 1 || !msg->rma_iov)
		return -FI_EINVAL;
	if (opx_iov_total(msg->msg_iov, msg->iov_count > OPX_IOV_LIMIT ? 0 : msg->iov_count) !=
	    msg->rma_iov[0].len)
		return -FI_EINVAL;
	return opx_rma_common(ep, type, msg->msg_iov, msg->iov_count, msg->addr,
			      msg->rma_iov[0].addr, msg->rma_iov[0].key, msg->data, msg->context,
			      flags);
}

static ssize_t opx_rma_readmsg(struct fid_ep *ep, const struct fi_msg_rma *msg, uint64_t flags)
{
	return opx_rma_msg(ep, msg, flags, OPX_RT_READ);
}

static ssize_t opx_rma_writemsg(struct fid_ep *ep, const struct fi_msg_rma *msg, uint64_t flags)
{
	return opx_rma_msg(ep, msg, flags, OPX_RT_WRITE);
}

static ssize_t opx_rma_write(struct fid_ep *ep, const void *buf, size_t len, void *desc,
			     fi_addr_t dest, uint64_t addr, uint64_t key, void *context)
{
	struct iovec v = OPX_RMA_IOV1(buf, len);
	(void)desc;
	return opx_rma_common(ep, OPX_RT_WRITE, &v, 1, dest, addr, key, 0, context,
			      opx_ep_of(ep)->tx_op_flags);
}

static ssize_t opx_rma_writev(struct fid_ep *ep, const struct iovec *iov, void **desc,
			      size_t count, fi_addr_t dest, uint64_t addr, uint64_t key,
			      void *context)
{
	(void)desc;
	return opx_rma_common(ep, OPX_RT_WRITE, iov, count, dest, addr, key, 0, context,
			      opx_ep_of(ep)->tx_op_flags);
}

static ssize_t opx_rma_inject(struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dest,
			      uint64_t addr, uint64_t key)
{
	struct iovec v = OPX_RMA_IOV1(buf, len);
	return opx_rma_common(ep, OPX_RT_WRITE, &v, 1, dest, addr, key, 0, NULL, FI_INJECT);
}

static ssize_t opx_rma_writedata(struct fid_ep *ep, const void *buf, size_t len, void *desc,
				 uint64_t data, fi_addr_t dest, uint64_t addr, uint64_t key,
				 void *context)
{
	struct iovec v = OPX_RMA_IOV1(buf, len);
	(void)desc;
	return opx_rma_common(ep, OPX_RT_WRITE, &v, 1, dest, addr, key, data, context,
			      opx_ep_of(ep)->tx_op_flags | FI_REMOTE_CQ_DATA);
}

static ssize_t opx_rma_injectdata(struct fid_ep *ep, const void *buf, size_t len, uint64_t data,
				  fi_addr_t dest, uint64_t addr, uint64_t key)
{
	struct iovec v = OPX_RMA_IOV1(buf, len);
	return opx_rma_common(ep, OPX_RT_WRITE, &v, 1, dest, addr, key, data, NULL,
			      FI_INJECT | FI_REMOTE_CQ_DATA);
}

struct fi_ops_rma opx_ops_rma = {
	.size = sizeof(struct fi_ops_rma),
	.read = opx_rma_read,
	.readv = opx_rma_readv,
	.readmsg = opx_rma_readmsg,
	.write = opx_rma_write,
	.writev = opx_rma_writev,
	.writemsg = opx_rma_writemsg,
	.inject = opx_rma_inject,
	.writedata = opx_rma_writedata,
	.injectdata = opx_rma_injectdata,
};
