/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_atomic_api.c - the fi_ops_atomic entry points.  Each call becomes
 * one struct opx_rma_args of type OPX_RT_ATOMIC for the one-sided engine
 * (opx_rma.c), posted through opx_rma_post (opx_rma_api.c); fi_ioc element
 * counts are translated to byte iovecs first.  Which op is valid on which
 * datatype, and the kernels the target runs, are in opx_atomic.c.
 */
#include "opx_ep.h"
#include "opx_rma.h"

/* ---------------------------------------------------------------------
 * fi_ops_atomic: what the *valid calls answer, then the calls.
 */
static int opx_atomic_check_valid(enum opx_atomic_kind kind, enum fi_datatype dt, enum fi_op op,
				  size_t *count)
{
	if (!count)
		return -FI_EINVAL;
	if (!opx_atomic_valid(kind, op, dt))
		return -FI_EOPNOTSUPP;
	*count = opx_atomic_max_count(kind, dt);
	return 0;
}

static int opx_atomic_writevalid(struct fid_ep *ep, enum fi_datatype dt, enum fi_op op,
				 size_t *count)
{
	(void)ep;
	return opx_atomic_check_valid(OPX_AK_WRITE, dt, op, count);
}

static int opx_atomic_readwritevalid(struct fid_ep *ep, enum fi_datatype dt, enum fi_op op,
				     size_t *count)
{
	(void)ep;
	return opx_atomic_check_valid(OPX_AK_FETCH, dt, op, count);
}

static int opx_atomic_compwritevalid(struct fid_ep *ep, enum fi_datatype dt, enum fi_op op,
				     size_t *count)
{
	(void)ep;
	return opx_atomic_check_valid(OPX_AK_COMPARE, dt, op, count);
}

/* ---------------------------------------------------------------------
 * Entry points: translate fi_ioc (counts of elements) to byte iovecs and
 * hand the request to the RMA engine.
 */
static int opx_atomic_ioc_to_iov(const struct fi_ioc *ioc, size_t cnt, enum fi_datatype dt,
				 struct iovec *iov)
{
	size_t sz = opx_atomic_dt_size(dt);

	if (cnt > OPX_IOV_LIMIT || (cnt && !ioc) || !sz)
		return -FI_EINVAL;
	for (size_t i = 0; i < cnt; i++) {
		iov[i].iov_base = ioc[i].addr;
		iov[i].iov_len = ioc[i].count * sz;
	}
	return 0;
}

static ssize_t opx_atomic_post(struct fid_ep *fep, struct opx_rma_args *a)
{
	struct opx_ep *ep = opx_ep_of(fep);

	a->type = OPX_RT_ATOMIC;
	return opx_rma_post(ep, a);
}

static ssize_t opx_atomic_generic(struct fid_ep *fep, enum opx_atomic_kind kind,
				  const struct fi_ioc *iov, size_t count, const struct fi_ioc *cmp,
				  size_t cmp_count, struct fi_ioc *res, size_t res_count,
				  fi_addr_t dest, uint64_t addr, uint64_t key, enum fi_datatype dt,
				  enum fi_op op, void *context, uint64_t flags, uint64_t data)
{
	struct iovec v[OPX_IOV_LIMIT], c[OPX_IOV_LIMIT], r[OPX_IOV_LIMIT];
	struct opx_rma_args a = {0};

	if (opx_atomic_ioc_to_iov(iov, count, dt, v) ||
	    opx_atomic_ioc_to_iov(cmp, cmp_count, dt, c) ||
	    opx_atomic_ioc_to_iov(res, res_count, dt, r))
		return -FI_EINVAL;
	a.iov = v;
	a.cnt = count;
	a.cmp = c;
	a.cmp_cnt = cmp_count;
	a.res = r;
	a.res_cnt = res_count;
	a.dest = dest;
	a.addr = addr;
	a.key = key;
	a.data = data;
	a.context = context;
	a.flags = flags;
	a.kind = kind;
	a.op = op;
	a.dt = dt;
	return opx_atomic_post(fep, &a);
}

#define OPX_IOC1(buf, n) ((struct fi_ioc){.addr = (void *)(buf), .count = (n)})

static ssize_t opx_atomic_write(struct fid_ep *ep, const void *buf, size_t count, void *desc,
				fi_addr_t dest, uint64_t addr, uint64_t key, enum fi_datatype dt,
				enum fi_op op, void *context)
{
	struct fi_ioc v = OPX_IOC1(buf, count);
	(void)desc;
	return opx_atomic_generic(ep, OPX_AK_WRITE, &v, 1, NULL, 0, NULL, 0, dest, addr, key, dt,
				  op, context, opx_ep_of(ep)->tx_op_flags, 0);
}

static ssize_t opx_atomic_writev(struct fid_ep *ep, const struct fi_ioc *iov, void **desc,
				 size_t count, fi_addr_t dest, uint64_t addr, uint64_t key,
				 enum fi_datatype dt, enum fi_op op, void *context)
{
	(void)desc;
	return opx_atomic_generic(ep, OPX_AK_WRITE, iov, count, NULL, 0, NULL, 0, dest, addr, key,
				  dt, op, context, opx_ep_of(ep)->tx_op_flags, 0);
}

static ssize_t opx_atomic_writemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
				   uint64_t flags)
{
	if (!msg || msg->rma_iov_count != 1 || !msg->rma_iov)
		return -FI_EINVAL;
	return opx_atomic_generic(ep, OPX_AK_WRITE, msg->msg_iov, msg->iov_count, NULL, 0, NULL, 0,
				  msg->addr, msg->rma_iov[0].addr, msg->rma_iov[0].key,
				  msg->datatype, msg->op, msg->context, flags, msg->data);
}

static ssize_t opx_atomic_inject(struct fid_ep *ep, const void *buf, size_t count, fi_addr_t dest,
				 uint64_t addr, uint64_t key, enum fi_datatype dt, enum fi_op op)
{
	struct fi_ioc v = OPX_IOC1(buf, count);
	return opx_atomic_generic(ep, OPX_AK_WRITE, &v, 1, NULL, 0, NULL, 0, dest, addr, key, dt,
				  op, NULL, FI_INJECT, 0);
}

static ssize_t opx_atomic_readwrite(struct fid_ep *ep, const void *buf, size_t count, void *desc,
				    void *result, void *result_desc, fi_addr_t dest, uint64_t addr,
				    uint64_t key, enum fi_datatype dt, enum fi_op op, void *context)
{
	/* ATOMIC_READ has no operand: buf may be NULL, count still counts */
	struct fi_ioc v = OPX_IOC1(buf, count), r = OPX_IOC1(result, count);
	(void)desc, (void)result_desc;
	return opx_atomic_generic(ep, OPX_AK_FETCH, &v, 1, NULL, 0, &r, 1, dest, addr, key, dt, op,
				  context, opx_ep_of(ep)->tx_op_flags, 0);
}

static ssize_t opx_atomic_readwritev(struct fid_ep *ep, const struct fi_ioc *iov, void **desc,
				     size_t count, struct fi_ioc *resultv, void **result_desc,
				     size_t result_count, fi_addr_t dest, uint64_t addr,
				     uint64_t key, enum fi_datatype dt, enum fi_op op,
				     void *context)
{
	(void)desc, (void)result_desc;
	return opx_atomic_generic(ep, OPX_AK_FETCH, iov, count, NULL, 0, resultv, result_count,
				  dest, addr, key, dt, op, context, opx_ep_of(ep)->tx_op_flags, 0);
}

static ssize_t opx_atomic_readwritemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
				       struct fi_ioc *resultv, void **result_desc,
				       size_t result_count, uint64_t flags)
{
	(void)result_desc;
	if (!msg || msg->rma_iov_count != 1 || !msg->rma_iov)
		return -FI_EINVAL;
	return opx_atomic_generic(ep, OPX_AK_FETCH, msg->msg_iov, msg->iov_count, NULL, 0, resultv,
				  result_count, msg->addr, msg->rma_iov[0].addr,
				  msg->rma_iov[0].key, msg->datatype, msg->op, msg->context, flags,
				  msg->data);
}

static ssize_t opx_atomic_compwrite(struct fid_ep *ep, const void *buf, size_t count, void *desc,
				    const void *compare, void *compare_desc, void *result,
				    void *result_desc, fi_addr_t dest, uint64_t addr, uint64_t key,
				    enum fi_datatype dt, enum fi_op op, void *context)
{
	struct fi_ioc v = OPX_IOC1(buf, count), c = OPX_IOC1(compare, count),
		      r = OPX_IOC1(result, count);
	(void)desc, (void)compare_desc, (void)result_desc;
	return opx_atomic_generic(ep, OPX_AK_COMPARE, &v, 1, &c, 1, &r, 1, dest, addr, key, dt, op,
				  context, opx_ep_of(ep)->tx_op_flags, 0);
}

static ssize_t opx_atomic_compwritev(struct fid_ep *ep, const struct fi_ioc *iov, void **desc,
				     size_t count, const struct fi_ioc *comparev,
				     void **compare_desc, size_t compare_count,
				     struct fi_ioc *resultv, void **result_desc,
				     size_t result_count, fi_addr_t dest, uint64_t addr,
				     uint64_t key, enum fi_datatype dt, enum fi_op op,
				     void *context)
{
	(void)desc, (void)compare_desc, (void)result_desc;
	return opx_atomic_generic(ep, OPX_AK_COMPARE, iov, count, comparev, compare_count, resultv,
				  result_count, dest, addr, key, dt, op, context,
				  opx_ep_of(ep)->tx_op_flags, 0);
}

static ssize_t opx_atomic_compwritemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
				       const struct fi_ioc *comparev, void **compare_desc,
				       size_t compare_count, struct fi_ioc *resultv,
				       void **result_desc, size_t result_count, uint64_t flags)
{
	(void)compare_desc, (void)result_desc;
	if (!msg || msg->rma_iov_count != 1 || !msg->rma_iov)
		return -FI_EINVAL;
	return opx_atomic_generic(ep, OPX_AK_COMPARE, msg->msg_iov, msg->iov_count, comparev,
				  compare_count, resultv, result_count, msg->addr,
				  msg->rma_iov[0].addr, msg->rma_iov[0].key, msg->datatype,
				  msg->op, msg->context, flags, msg->data);
}

struct fi_ops_atomic opx_ops_atomic = {
	.size = sizeof(struct fi_ops_atomic),
	.write = opx_atomic_write,
	.writev = opx_atomic_writev,
	.writemsg = opx_atomic_writemsg,
	.inject = opx_atomic_inject,
	.readwrite = opx_atomic_readwrite,
	.readwritev = opx_atomic_readwritev,
	.readwritemsg = opx_atomic_readwritemsg,
	.compwrite = opx_atomic_compwrite,
	.compwritev = opx_atomic_compwritev,
	.compwritemsg = opx_atomic_compwritemsg,
	.writevalid = opx_atomic_writevalid,
	.readwritevalid = opx_atomic_readwritevalid,
	.compwritevalid = opx_atomic_compwritevalid,
};
