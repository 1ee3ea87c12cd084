/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_msg.c - transmit core and the fi_msg / fi_tagged entry points.
 *
 * One send core (opx_msg_send_locked, not inlined) behind every entry
 * point; the entry points only turn their arguments into an iovec (one
 * element for the single-buffer calls) and flags, and take the lock.
 * The small-message path
 * is: look up the peer (an array index), reserve credits with one CAS,
 * write the 64-byte header entry (payload inline up to 16 bytes, else in
 * the eager ring), publish with one release store.  No allocation, no
 * syscall, and no lock unless the domain is FI_THREAD_SAFE.
 */
#include <stdlib.h>

#include "opx_complete.h"
#include "opx_cq.h"
#include "opx_csum.h"
#include "opx_ep.h"
#include "opx_rndv_api.h"
#include "opx_stats.h"

/* Largest message sent eagerly to a peer of the udp wire: ours
 * (FI_OPX_UDP_EAGER_MAX) lowered to what the receiver advertises in its
 * datagrams (until it was heard, 0: it takes what we take, as peers
 * with the same settings do), to OPX_UDP_MP_MAX datagrams (the
 * receiver's reliability module reassembles no more in one piece) and
 * to a quarter of the link's send ring (the replay memory). */
static __attribute__((noinline)) size_t opx_msg_eager_max_udp(const struct shim_peer *peer)
{
	size_t lim = opx_env.udp_eager_max;
	size_t adv = peer->ctl->rx_eager_max; /* the shim stores what the peer says */
	size_t pkts = (size_t)OPX_UDP_MP_MAX * peer->mtu;
	size_t egr = (size_t)peer->egr_blocks * SHIM_BLOCK / 4;
	size_t hdrq = (size_t)peer->hdrq_cnt / 4 * peer->mtu;

	if (adv) {
		if (adv < peer->mtu) /* one packet: every receiver takes it */
			adv = peer->mtu;
		if (adv < lim)
			lim = adv;
	}
	if (pkts < lim)
		lim = pkts;
	if (egr < lim)
		lim = egr;
	if (hdrq < lim)
		lim = hdrq;
	return lim;
}

/* Largest message sent eagerly to peer: the limit of its wire.  To a shm
 * peer ours (FI_OPX_EAGER_MAX), lowered to what the receiver advertises
 * and to a quarter of its rings (the receiver drops multi-packet messages
 * above its advertised limit). */
static inline size_t opx_msg_eager_max(const struct shim_peer *peer)
{
	size_t lim = opx_env.eager_max;
	size_t adv, egr, hdrq;

	if (__builtin_expect(peer->wire == SHIM_WIRE_UDP, 0))
		return opx_msg_eager_max_udp(peer);
	adv = peer->ctl->rx_eager_max; /* one read; the receiver checks anyway */
	egr = (size_t)peer->egr_blocks * SHIM_BLOCK / 4;
	hdrq = (size_t)peer->hdrq_cnt / 4 * peer->mtu;
	if (adv && adv < lim)
		lim = adv;
	if (egr < lim)
		lim = egr;
	if (hdrq < lim)
		lim = hdrq;
	return lim;
}

/* FI_OPX_CHECKSUM: seal a packet whose header (and eager payload, when
 * pay is set) is written; before it is published. */
static __attribute__((noinline)) void opx_msg_send_seal(struct shim_rhq_entry *e,
							const uint8_t *pay)
{
	e->hdr.flags |= OPX_PF_CSUM;
	e->hdr.psn = opx_csum_pkt(&e->hdr, pay);
}

/* After an eager send of len bytes, prepare the lines the next send will
 * write.  One that follows another with nothing received in between is
 * part of a stream: the lines just ahead (shim_pio_prefetch_next; a
 * ping-pong does not pay for it).  A first send since a packet arrived
 * expects an answer first: the blocks of a next send as big, when it
 * has three or more (shim_pio_own_next). */
static inline void opx_msg_send_next(struct opx_ep *ep, struct shim_peer *peer,
				     const struct shim_pio_resv *r, size_t len)
{
	if (ep->msg_st.tx_streak++)
		shim_pio_prefetch_next(peer, r);
	else if (len > 2 * SHIM_BLOCK)
		shim_pio_own_next(peer, r, shim_egr_blocks_for((uint32_t)len));
}

/* Eager: one reservation for the whole message (n consecutive packets). */
static inline int opx_msg_send_eager(struct opx_ep *ep, struct shim_peer *peer,
				     const struct iovec *iov, size_t cnt, size_t len, uint64_t tag,
				     uint64_t data, uint8_t pflags)
{
	struct shim_pio_resv r;
	struct shim_rhq_entry *e;
	uint32_t mtu = peer->mtu;
	bool seal = opx_env.checksum || (peer->ctl->rx_flags & SHIM_RXF_CSUM);
	int rc;

	if (len <= SHIM_INLINE_MAX) {
		rc = shim_pio_reserve(peer, 1, 0, &r);
		if (rc)
			return rc;
		e = shim_pio_entry(peer, &r, 0);
		opx_ep_hdr_init(&e->hdr, ep, peer, OPX_OP_EAGER, pflags, (uint32_t)len, 0, tag,
				data);
		if (len)
			opx_iov_gather(e->hdr.p.inl, iov, cnt, len);
		if (__builtin_expect(seal, 0))
			opx_msg_send_seal(e, NULL);
		shim_pio_publish(peer, &r, 0, 0);
		opx_msg_send_next(ep, peer, &r, len);
		return 0;
	}
	if (len <= mtu) {
		rc = shim_pio_reserve(peer, 1, (uint32_t)len, &r);
		if (rc)
			return rc;
		opx_iov_gather(r.egr, iov, cnt, len);
		e = shim_pio_entry(peer, &r, 0);
		opx_ep_hdr_init(&e->hdr, ep, peer, OPX_OP_EAGER, pflags, (uint32_t)len, 0, tag,
				data);
		if (__builtin_expect(seal, 0))
			opx_msg_send_seal(e, r.egr);
		shim_pio_publish(peer, &r, 0, shim_rhf_egr(peer, &r, 0));
		opx_msg_send_next(ep, peer, &r, len);
		return 0;
	}

	uint32_t npkts = (uint32_t)((len + mtu - 1) / mtu);
	uint32_t msgid = ep->msg_st.next_msgid++;

	rc = shim_pio_reserve(peer, npkts, (uint32_t)len, &r);
	if (rc)
		return rc;
	opx_iov_gather(r.egr, iov, cnt, len);
	for (uint32_t i = 0; i < npkts; i++) {
		size_t off = (size_t)i * mtu;
		uint32_t plen = (uint32_t)(len - off < mtu ? len - off : mtu);

		e = shim_pio_entry(peer, &r, i);
		opx_ep_hdr_init(&e->hdr, ep, peer, i ? OPX_OP_MP_NEXT : OPX_OP_MP_FIRST, pflags,
				plen, msgid, tag, data);
		if (i)
			opx_proto_pw_set(&e->hdr,
					 &(union opx_proto_pw){.mp_next = {.offset = off}});
		else
			opx_proto_pw_set(&e->hdr,
					 &(union opx_proto_pw){.mp_first = {.total = len}});
		if (__builtin_expect(seal, 0))
			opx_msg_send_seal(e, r.egr + off);
		if (peer->wire != SHIM_WIRE_UDP)
			shim_pio_publish(peer, &r, i, shim_rhf_egr(peer, &r, (uint32_t)off));
	}
	/* The udp wire transmits what is published from its head on, at each
	 * publish: the first packet last, so that the whole message leaves
	 * in one batch (one sendmmsg or GSO send) instead of a system call
	 * per packet. */
	if (peer->wire == SHIM_WIRE_UDP)
		for (uint32_t i = npkts; i-- > 0;)
			shim_pio_publish(peer, &r, i, shim_rhf_egr(peer, &r, (uint32_t)i * mtu));
	opx_msg_send_next(ep, peer, &r, len);
	return 0;
}

/* ---------------------------------------------------------------------
 * FI_DELIVERY_COMPLETE.  Only sends that ask for it pay: a message that
 * fits one packet together with the sender's address goes as
 * OPX_OP_EAGER_DC and completes when the receiver's DONE says the data
 * was placed in a receive buffer (a rendezvous send slot waits for it, so
 * a receiver that dies fails the send like a rendezvous); larger
 * messages go by rendezvous, whose DONE already means placed.  FI_INJECT
 * with delivery completion is limited to what fits the packet.
 */
static __attribute__((noinline)) int opx_msg_send_dc(struct opx_ep *ep, struct shim_peer *peer,
						     const struct iovec *iov, size_t cnt,
						     size_t len, uint64_t tag, uint64_t data,
						     uint8_t pflags, void *context, uint64_t flags,
						     fi_addr_t dest)
{
	struct shim_pio_resv r;
	struct shim_rhq_entry *e;
	uint64_t cookie;
	int rc;

	if (len + sizeof(struct shim_addr) > peer->mtu) {
		if (flags & FI_INJECT)
			return -EMSGSIZE;
		return opx_rndv_send(ep, peer, iov, cnt, len, tag, data, pflags, context, flags,
				     dest);
	}
	rc = opx_rndv_dc_get(ep, peer, context, flags, len, dest, &cookie);
	if (rc)
		return rc;
	rc = shim_pio_reserve(peer, 1, (uint32_t)(len + sizeof(struct shim_addr)), &r);
	if (rc) {
		opx_rndv_dc_put(ep, cookie);
		return rc;
	}
	memcpy(r.egr, &ep->addr, sizeof(ep->addr));
	opx_iov_gather(r.egr + sizeof(ep->addr), iov, cnt, len);
	e = shim_pio_entry(peer, &r, 0);
	opx_ep_hdr_init(&e->hdr, ep, peer, OPX_OP_EAGER_DC, pflags,
			(uint32_t)(len + sizeof(struct shim_addr)), 0, tag, data);
	opx_proto_pw_set(&e->hdr, &(union opx_proto_pw){.dc = {.cookie = cookie}});
	shim_pio_publish(peer, &r, 0, shim_rhf_egr(peer, &r, 0));
	return 0;
}

static __attribute__((noinline)) ssize_t opx_msg_send_locked(struct opx_ep *ep,
							     const struct iovec *iov, size_t cnt,
							     fi_addr_t dest, uint64_t tag,
							     uint64_t data, void *context,
							     uint64_t flags, bool tagged)
{
	OPX_ASSERT_LOCKED(&ep->domain->lock);
	struct shim_peer *peer;
	uint8_t pflags = (tagged ? OPX_PF_TAGGED : 0) | ((flags & FI_REMOTE_CQ_DATA) ? OPX_PF_CQDATA : 0);
	struct iovec bounce;
	size_t len = 0;
	bool eager;
	int rc;

	if (__builtin_expect(!ep->enabled || ep->sep_role == OPX_SEP_RX, 0))
		return ep->sep_role == OPX_SEP_RX ? -FI_EOPNOTSUPP : -FI_EOPBADSTATE;
	if (__builtin_expect(cnt > OPX_IOV_LIMIT || (cnt && !iov), 0))
		return -FI_EINVAL;
	if (!opx_iov_sum(iov, cnt, &len))
		return -FI_EINVAL;
	if (__builtin_expect(len > opx_env.max_msg_size, 0))
		return -FI_EMSGSIZE;
	if ((flags & FI_INJECT) && len > opx_env.inject_size)
		return -FI_EMSGSIZE;
	/* a completion that could not be written would be lost: push back */
	if (__builtin_expect(!opx_cq_room_locked(ep->tx_cq, 1), 0))
		return -FI_EAGAIN;
	rc = opx_ep_peer_locked(ep, dest, &peer);
	if (__builtin_expect(rc, 0))
		return rc;

	flags |= tagged ? FI_TAGGED : FI_MSG;
	eager = len <= SHIM_INLINE_MAX || len <= opx_msg_eager_max(peer);
	if (__builtin_expect(!eager && (flags & FI_INJECT), 0)) {
		/* The receiver takes less eagerly than our inject_size: keep
		 * fi_inject's promise with a private copy sent by rendezvous. */
		struct opx_bounce *b = malloc(sizeof(*b) + len);

		if (!b)
			return -FI_EAGAIN;
		b->context = context;
		opx_iov_gather(b->data, iov, cnt, len);
		bounce.iov_len = len;
		bounce.iov_base = b->data;
		iov = &bounce;
		cnt = 1;
		context = b;
		flags |= OPX_TXF_BOUNCE;
	}
	for (int attempt = 0;; attempt++) {
		if (__builtin_expect(flags & FI_DELIVERY_COMPLETE, 0))
			rc = opx_msg_send_dc(ep, peer, iov, cnt, len, tag, data, pflags, context,
					     flags, dest);
		else if (eager)
			rc = opx_msg_send_eager(ep, peer, iov, cnt, len, tag, data, pflags);
		else
			rc = opx_rndv_send(ep, peer, iov, cnt, len, tag, data, pflags, context,
					   flags, dest);
		if (__builtin_expect(rc != -EAGAIN || attempt, 1))
			break;
		/* No credits: make progress (the peer may be waiting on us), retry once. */
		opx_progress_locked(ep);
	}
	if (__builtin_expect(rc, 0)) {
		if (flags & OPX_TXF_BOUNCE)
			free(context);
		if (rc != -EAGAIN)
			return opx_init_err_from_shim(rc);
		ep->tel.stats.tx_eagain++;
		return opx_av_stalled_locked(ep->av, dest);
	}
	opx_stats_tx(ep,
		     len <= SHIM_INLINE_MAX ? OPX_PROTO_INJECT
		     : eager		    ? (len <= peer->mtu ? OPX_PROTO_EAGER : OPX_PROTO_MP_EAGER)
					    : opx_stats_rndv_proto(len, peer->wire == SHIM_WIRE_UDP),
		     len);
	/* delivery-complete and rendezvous sends complete when DONE arrives */
	if (eager && !(flags & FI_DELIVERY_COMPLETE))
		opx_complete_tx(ep, context, flags, len, 0);
	return 0;
}

/* ---------------------------------------------------------------------
 * API entry points.
 */
#define OPX_EP_LOCK(ep) opx_lock_acquire(&(ep)->domain->lock)
#define OPX_EP_UNLOCK(ep) opx_lock_release(&(ep)->domain->lock)

/* FI_MSG_PREFIX: the data of iov starts msg_prefix bytes in; out is iov
 * without them.  -FI_EINVAL when the buffers are shorter than the prefix. */
static __attribute__((noinline)) ssize_t opx_msg_prefix_strip(const struct opx_ep *ep,
							      const struct iovec *iov, size_t cnt,
							      struct iovec *out, size_t *out_cnt)
{
	size_t skip = ep->msg_prefix, n = 0;

	if (cnt > OPX_IOV_LIMIT || (cnt && !iov))
		return -FI_EINVAL;
	for (size_t i = 0; i < cnt; i++) {
		if (skip >= iov[i].iov_len) {
			skip -= iov[i].iov_len;
			continue;
		}
		out[n].iov_base = (uint8_t *)iov[i].iov_base + skip;
		out[n].iov_len = iov[i].iov_len - skip;
		skip = 0;
		n++;
	}
	if (skip) {
		OPX_WARN(FI_LOG_EP_DATA, "FI_MSG_PREFIX: a buffer shorter than its %zu-byte prefix\n",
			 ep->msg_prefix);
		return -FI_EINVAL;
	}
	*out_cnt = n;
	return 0;
}

static inline ssize_t opx_msg_send_common(struct fid_ep *fep, const struct iovec *iov, size_t cnt,
					  fi_addr_t dest, uint64_t tag, uint64_t data,
					  void *context, uint64_t flags, bool tagged)
{
	struct opx_ep *ep = opx_ep_of(fep);
	struct iovec data_iov[OPX_IOV_LIMIT];
	ssize_t rc;

	if (__builtin_expect(ep->msg_prefix != 0, 0)) {
		rc = opx_msg_prefix_strip(ep, iov, cnt, data_iov, &cnt);
		if (rc)
			return rc;
		iov = data_iov;
	}
	OPX_EP_LOCK(ep);
	rc = opx_msg_send_locked(ep, iov, cnt, dest, tag, data, context, flags, tagged);
	OPX_EP_UNLOCK(ep);
	return rc;
}

static inline ssize_t opx_msg_recv_common(struct fid_ep *fep, const struct iovec *iov, size_t cnt,
					  fi_addr_t src, uint64_t tag, uint64_t ignore,
					  void *context, uint64_t flags, bool tagged)
{
	struct opx_ep *ep = opx_ep_of(fep);
	struct iovec data_iov[OPX_IOV_LIMIT];
	ssize_t rc;

	if (__builtin_expect(ep->msg_prefix != 0, 0)) {
		/* each message would need a prefix of its own */
		if (flags & FI_MULTI_RECV)
			return -FI_EINVAL;
		rc = opx_msg_prefix_strip(ep, iov, cnt, data_iov, &cnt);
		if (rc)
			return rc;
		iov = data_iov;
	}
	OPX_EP_LOCK(ep);
	/* a peek answers from what arrived: let it arrive first (progress
	 * does nothing on an endpoint not enabled yet) */
	if (__builtin_expect(flags & FI_PEEK, 0)) {
		ep->rx_st.rx_no_defer = true;
		opx_progress_locked(ep);
		ep->rx_st.rx_no_defer = false;
	}
	rc = opx_match_recv_locked(ep, iov, cnt, src, tag, ignore, context, flags, tagged);
	OPX_EP_UNLOCK(ep);
	return rc;
}

#define OPX_IOV1(buf, len) ((struct iovec){.iov_base = (void *)(buf), .iov_len = (len)})

/* msg */
static ssize_t opx_msg_recv(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src,
			    void *context)
{
	struct iovec v = OPX_IOV1(buf, len);
	(void)desc;
	return opx_msg_recv_common(ep, &v, 1, src, 0, 0, context, opx_ep_of(ep)->rx_op_flags,
				   false);
}

static ssize_t opx_msg_recvv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
			     fi_addr_t src, void *context)
{
	(void)desc;
	return opx_msg_recv_common(ep, iov, count, src, 0, 0, context, opx_ep_of(ep)->rx_op_flags,
				   false);
}

static ssize_t opx_msg_recvmsg(struct fid_ep *ep, const struct fi_msg *msg, uint64_t flags)
{
	if (!msg)
		return -FI_EINVAL;
	return opx_msg_recv_common(ep, msg->msg_iov, msg->iov_count, msg->addr, 0, 0, msg->context,
				   flags, false);
}

static ssize_t opx_msg_send(struct fid_ep *ep, const void *buf, size_t len, void *desc,
			    fi_addr_t dest, void *context)
{
	struct iovec v = OPX_IOV1(buf, len);
	(void)desc;
	return opx_msg_send_common(ep, &v, 1, dest, 0, 0, context, opx_ep_of(ep)->tx_op_flags,
				   false);
}

static ssize_t opx_msg_sendv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
			     fi_addr_t dest, void *context)
{
	(void)desc;
	return opx_msg_send_common(ep, iov, count, dest, 0, 0, context, opx_ep_of(ep)->tx_op_flags,
				   false);
}

static ssize_t opx_msg_sendmsg(struct fid_ep *ep, const struct fi_msg *msg, uint64_t flags)
{
	if (!msg)
		return -FI_EINVAL;
	return opx_msg_send_common(ep, msg->msg_iov, msg->iov_count, msg->addr, 0, msg->data,
				   msg->context, flags & ~OPX_TX_NO_CQ, false);
}

static ssize_t opx_msg_inject(struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dest)
{
	struct iovec v = OPX_IOV1(buf, len);
	return opx_msg_send_common(ep, &v, 1, dest, 0, 0, NULL, FI_INJECT | OPX_TX_NO_CQ, false);
}

static ssize_t opx_msg_senddata(struct fid_ep *ep, const void *buf, size_t len, void *desc,
				uint64_t data, fi_addr_t dest, void *context)
{
	struct iovec v = OPX_IOV1(buf, len);
	(void)desc;
	return opx_msg_send_common(ep, &v, 1, dest, 0, data, context,
				   opx_ep_of(ep)->tx_op_flags | FI_REMOTE_CQ_DATA, false);
}

static ssize_t opx_msg_injectdata(struct fid_ep *ep, const void *buf, size_t len, uint64_t data,
				  fi_addr_t dest)
{
	struct iovec v = OPX_IOV1(buf, len);
	return opx_msg_send_common(ep, &v, 1, dest, 0, data, NULL,
				   FI_INJECT | OPX_TX_NO_CQ | FI_REMOTE_CQ_DATA, false);
}

struct fi_ops_msg opx_ops_msg = {
	.size = sizeof(struct fi_ops_msg),
	.recv = opx_msg_recv,
	.recvv = opx_msg_recvv,
	.recvmsg = opx_msg_recvmsg,
	.send = opx_msg_send,
	.sendv = opx_msg_sendv,
	.sendmsg = opx_msg_sendmsg,
	.inject = opx_msg_inject,
	.senddata = opx_msg_senddata,
	.injectdata = opx_msg_injectdata,
};

/* tagged */
static ssize_t opx_msg_trecv(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src,
			     uint64_t tag, uint64_t ignore, void *context)
{
	struct iovec v = OPX_IOV1(buf, len);
	(void)desc;
	return opx_msg_recv_common(ep, &v, 1, src, tag, ignore, context, opx_ep_of(ep)->rx_op_flags,
				   true);
}

static ssize_t opx_msg_trecvv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
			      fi_addr_t src, uint64_t tag, uint64_t ignore, void *context)
{
	(void)desc;
	return opx_msg_recv_common(ep, iov, count, src, tag, ignore, context,
				   opx_ep_of(ep)->rx_op_flags, true);
}

static ssize_t opx_msg_trecvmsg(struct fid_ep *ep, const struct fi_msg_tagged *msg, uint64_t flags)
{
	if (!msg)
		return -FI_EINVAL;
	return opx_msg_recv_common(ep, msg->msg_iov, msg->iov_count, msg->addr, msg->tag,
				   msg->ignore, msg->context, flags, true);
}

static ssize_t opx_msg_tsend(struct fid_ep *ep, const void *buf, size_t len, void *desc,
			     fi_addr_t dest, uint64_t tag, void *context)
{
	struct iovec v = OPX_IOV1(buf, len);
	(void)desc;
	return opx_msg_send_common(ep, &v, 1, dest, tag, 0, context, opx_ep_of(ep)->tx_op_flags,
				   true);
}

static ssize_t opx_msg_tsendv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
			      fi_addr_t dest, uint64_t tag, void *context)
{
	(void)desc;
	return opx_msg_send_common(ep, iov, count, dest, tag, 0, context,
				   opx_ep_of(ep)->tx_op_flags, true);
}

static ssize_t opx_msg_tsendmsg(struct fid_ep *ep, const struct fi_msg_tagged *msg, uint64_t flags)
{
	if (!msg)
		return -FI_EINVAL;
	return opx_msg_send_common(ep, msg->msg_iov, msg->iov_count, msg->addr, msg->tag, msg->data,
				   msg->context, flags & ~OPX_TX_NO_CQ, true);
}

static ssize_t opx_msg_tinject(struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dest,
			       uint64_t tag)
{
	struct iovec v = OPX_IOV1(buf, len);
	return opx_msg_send_common(ep, &v, 1, dest, tag, 0, NULL, FI_INJECT | OPX_TX_NO_CQ, true);
}

static ssize_t opx_msg_tsenddata(struct fid_ep *ep, const void *buf, size_t len, void *desc,
				 uint64_t data, fi_addr_t dest, uint64_t tag, void *context)
{
	struct iovec v = OPX_IOV1(buf, len);
	(void)desc;
	return opx_msg_send_common(ep, &v, 1, dest, tag, data, context,
				   opx_ep_of(ep)->tx_op_flags | FI_REMOTE_CQ_DATA, true);
}

static ssize_t opx_msg_tinjectdata(struct fid_ep *ep, const void *buf, size_t len, uint64_t data,
				   fi_addr_t dest, uint64_t tag)
{
	struct iovec v = OPX_IOV1(buf, len);
	return opx_msg_send_common(ep, &v, 1, dest, tag, data, NULL,
				   FI_INJECT | OPX_TX_NO_CQ | FI_REMOTE_CQ_DATA, true);
}

struct fi_ops_tagged opx_ops_tagged = {
	.size = sizeof(struct fi_ops_tagged),
	.recv = opx_msg_trecv,
	.recvv = opx_msg_trecvv,
	.recvmsg = opx_msg_trecvmsg,
	.send = opx_msg_tsend,
	.sendv = opx_msg_tsendv,
	.sendmsg = opx_msg_tsendmsg,
	.inject = opx_msg_tinject,
	.senddata = opx_msg_tsenddata,
	.injectdata = opx_msg_tinjectdata,
};
