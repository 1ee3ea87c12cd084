/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_stats.c - endpoint telemetry: what a job's communication did.
 *
 * The counters themselves (struct opx_stats, public in <rdma/opx_ext.h>)
 * live in the endpoint and are bumped on the data path with plain adds
 * under the endpoint's own serialisation: no atomics, no branches beyond
 * the size bucket.  This file only reads them:
 *   - live, through fi_open_ops(ep, OPX_STATS_OPS_NAME) for tools;
 *   - at endpoint close, when FI_OPX_STATS is set: "stderr" prints a short
 *     table, anything else is a path pattern (%h host, %p pid, %% a %)
 *     for one small JSON file per process holding every endpoint it
 *     closed so far (rewritten at each close).  scripts/opx_stats merges
 *     the files of a job into a report.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "opx_drop.h"
#include "opx_ep.h"
#include "opx_stats.h"

static const char *const opx_proto_names[OPX_PROTO_MAX] = {
	[OPX_PROTO_INJECT] = "inject",
	[OPX_PROTO_EAGER] = "eager",
	[OPX_PROTO_MP_EAGER] = "mp_eager",
	[OPX_PROTO_RNDV_PULL] = "rndv_pull",
	[OPX_PROTO_RNDV_SPLIT] = "rndv_split",
	[OPX_PROTO_RNDV_PUSH] = "rndv_push",
};

static_assert(OPX_DROP_MAX <= OPX_STATS_DROP_SLOTS, "drop reasons fit the public slots");

/* The JSON records of the endpoints this process closed (FI_OPX_STATS). */
static pthread_mutex_t opx_stats_mutex = PTHREAD_MUTEX_INITIALIZER;
static char *opx_stats_doc;      /* endpoint records, comma separated */
static size_t opx_stats_doc_len;
static unsigned int opx_stats_neps;

static const char *opx_stats_drop_name(unsigned int i)
{
	return i < OPX_DROP_MAX ? opx_drop_name((enum opx_drop_reason)i) : NULL;
}

/* Snapshot with the domain lock held. */
static void opx_stats_snapshot_locked(const struct opx_ep *ep, struct opx_stats *st)
{
	OPX_ASSERT_LOCKED(&ep->domain->lock);
	unsigned int i;

	*st = ep->tel.stats;
	st->size = sizeof(*st);
	st->version = OPX_STATS_VERSION;
	for (i = 0; i < OPX_DROP_MAX; i++)
		st->drops[i] = opx_drop_count(ep, (enum opx_drop_reason)i);
	/* the udp wire's reliability module (opx_rel.c) */
	st->retransmits = ep->rel.retransmits;
	st->duplicates = ep->rel.dups;
	st->nacks = ep->rel.nacks_sent;
	st->peer_timeouts = ep->rel.peers_dead;
}

static int opx_stats_read(struct fid *fid, struct opx_stats *out)
{
	struct opx_ep *ep;
	struct opx_stats st;
	size_t n;

	if (!fid || fid->fclass != FI_CLASS_EP || !out || out->size < offsetof(struct opx_stats, tx))
		return -FI_EINVAL;
	ep = OPX_CONTAINER_OF(fid, struct opx_ep, ep_fid.fid);
	opx_lock_acquire(&ep->domain->lock);
	opx_stats_snapshot_locked(ep, &st);
	opx_lock_release(&ep->domain->lock);
	n = out->size < sizeof(st) ? out->size : sizeof(st);
	memcpy((char *)out + sizeof(out->size), (char *)&st + sizeof(st.size), n - sizeof(st.size));
	return 0;
}

static int opx_stats_reset(struct fid *fid)
{
	struct opx_ep *ep;

	if (!fid || fid->fclass != FI_CLASS_EP)
		return -FI_EINVAL;
	ep = OPX_CONTAINER_OF(fid, struct opx_ep, ep_fid.fid);
	opx_lock_acquire(&ep->domain->lock);
	memset(&ep->tel.stats, 0, sizeof(ep->tel.stats));
	opx_lock_release(&ep->domain->lock);
	return 0;
}

static struct opx_stats_ops opx_stats_ops = {
	.size = sizeof(struct opx_stats_ops),
	.read = opx_stats_read,
	.reset = opx_stats_reset,
	.drop_name = opx_stats_drop_name,
};

int opx_stats_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops,
		       void *context)
{
	(void)fid;
	(void)context;
	if (!name || !ops || flags)
		return -FI_EINVAL;
	if (strcmp(name, OPX_STATS_OPS_NAME))
		return -FI_ENOSYS;
	*ops = &opx_stats_ops;
	return 0;
}

/* ---- FI_OPX_STATS at endpoint close ------------------------------------ */

/* FI_OPX_STATS expanded: %h host name, %p pid, %% a percent sign. */
static int opx_stats_path(const char *pattern, char *buf, size_t len)
{
	char host[256];
	size_t o = 0;
	const char *p;
	int n;

	if (gethostname(host, sizeof(host)))
		strcpy(host, "unknown");
	host[sizeof(host) - 1] = '\0';
	for (p = pattern; *p; p++) {
		if (*p == '%' && p[1] == 'h')
			n = snprintf(buf + o, len - o, "%s", host);
		else if (*p == '%' && p[1] == 'p')
			n = snprintf(buf + o, len - o, "%ld", (long)getpid());
		else if (*p == '%' && p[1] == '%')
			n = snprintf(buf + o, len - o, "%%");
		else
			n = snprintf(buf + o, len - o, "%c", *p);
		if (n < 0 || (size_t)n >= len - o)
			return -FI_EINVAL;
		o += (size_t)n;
		if (*p == '%' && (p[1] == 'h' || p[1] == 'p' || p[1] == '%'))
			p++;
	}
	return 0;
}

static void opx_stats_json_proto(FILE *f, const char *key, const struct opx_stats_proto *pr)
{
	int i;

	fprintf(f, "\"%s\": {", key);
	for (i = 0; i < OPX_PROTO_MAX; i++)
		fprintf(f, "%s\"%s\": {\"msgs\": %" PRIu64 ", \"bytes\": %" PRIu64 "}",
			i ? ", " : "", opx_proto_names[i], pr[i].msgs, pr[i].bytes);
	fprintf(f, "}");
}

static void opx_stats_json_hist(FILE *f, const char *key, const uint64_t *h)
{
	int i;

	fprintf(f, "\"%s\": [", key);
	for (i = 0; i < OPX_STATS_BUCKETS; i++)
		fprintf(f, "%s%" PRIu64, i ? ", " : "", h[i]);
	fprintf(f, "]");
}

/* The udp wire's datagram drops by reason (shim_udp_stats): name and
 * count, in one table for the JSON record and the stderr report. */
static unsigned int opx_stats_wire_drops(const struct opx_ep *ep, const char **names,
					 uint64_t *counts)
{
	struct shim_udp_stats w;
	unsigned int n = 0;

	shim_udp_stats(ep->shim, &w);
#define OPX_WIRE_DROP(name, field) (names[n] = (name), counts[n++] = w.field)
	OPX_WIRE_DROP("length", drop_len);
	OPX_WIRE_DROP("magic", drop_magic);
	OPX_WIRE_DROP("crc", drop_crc);
	OPX_WIRE_DROP("mac", drop_mac);
	OPX_WIRE_DROP("identity", drop_ident);
	OPX_WIRE_DROP("job_key", drop_jkey);
	OPX_WIRE_DROP("session", drop_dest);
	OPX_WIRE_DROP("quota", drop_quota);
	OPX_WIRE_DROP("no_memory", drop_nomem);
#undef OPX_WIRE_DROP
	return n;
}
#define OPX_WIRE_DROP_REASONS 9

/* Payload bytes per datagram over the endpoint's udp links (each the
 * smaller of both ends' path MTU): the smallest and the largest, 0 when
 * there is none. */
static void opx_stats_path_mtu(const struct opx_ep *ep, uint32_t *lo, uint32_t *hi)
{
	*lo = *hi = 0;
	for (struct shim_peer *p = shim_udp_next(ep->shim, NULL); p; p = shim_udp_next(ep->shim, p)) {
		if (!*lo || p->mtu < *lo)
			*lo = p->mtu;
		if (p->mtu > *hi)
			*hi = p->mtu;
	}
}

/* One endpoint as a JSON object. */
static void opx_stats_json_ep(FILE *f, const struct opx_ep *ep, const struct opx_stats *st)
{
	unsigned int i;

	fprintf(f, "{\"unit\": %u, \"lid\": %u, \"ctx\": %u, ", ep->addr.unit, ep->addr.lid,
		ep->addr.ctx);
	opx_stats_json_proto(f, "tx", st->tx);
	fprintf(f, ", ");
	opx_stats_json_proto(f, "rx", st->rx);
	fprintf(f, ", ");
	opx_stats_json_hist(f, "tx_hist", st->tx_hist);
	fprintf(f, ", ");
	opx_stats_json_hist(f, "rx_hist", st->rx_hist);
	fprintf(f, ", \"ux_msgs\": %" PRIu64 ", \"ux_bytes_peak\": %" PRIu64
		", \"posted_peak\": %" PRIu64 ", \"ux_peak\": %" PRIu64 ", \"tx_eagain\": %" PRIu64
		", \"drops\": {", st->ux_msgs, st->ux_bytes_peak, st->posted_peak, st->ux_peak,
		st->tx_eagain);
	for (i = 0; i < OPX_DROP_MAX; i++)
		fprintf(f, "%s\"%s\": %" PRIu64, i ? ", " : "",
			opx_drop_name((enum opx_drop_reason)i), st->drops[i]);
	fprintf(f, "}, \"retransmits\": %" PRIu64 ", \"duplicates\": %" PRIu64
		", \"nacks\": %" PRIu64 ", \"peer_timeouts\": %" PRIu64,
		st->retransmits, st->duplicates, st->nacks, st->peer_timeouts);
	if (ep->udp) {
		const char *names[OPX_WIRE_DROP_REASONS];
		uint64_t counts[OPX_WIRE_DROP_REASONS];
		unsigned int n = opx_stats_wire_drops(ep, names, counts);
		uint32_t mtu_min, mtu_max;
		struct shim_udp_stats us;

		shim_udp_stats(ep->shim, &us);
		opx_stats_path_mtu(ep, &mtu_min, &mtu_max);
		fprintf(f, ", \"ux_held\": %" PRIu64, ep->rel.ux_held);
		fprintf(f, ", \"udp_payload_min\": %u, \"udp_payload_max\": %u", mtu_min, mtu_max);
		/* where loss recovery goes: what NACKs asked for, what timeouts
		 * sent (the last resort), what arrived twice or past the window */
		fprintf(f, ", \"recovery\": {\"nacks_received\": %" PRIu64
			", \"nack_resends\": %" PRIu64 ", \"nack_ignored\": %" PRIu64
			", \"timeouts\": %" PRIu64
			", \"timeout_resends\": %" PRIu64 ", \"out_of_order\": %" PRIu64
			", \"beyond_window\": %" PRIu64 ", \"ring_full\": %" PRIu64
			", \"watchdog_resends\": %" PRIu64 "}",
			ep->rel.nacks_rx, ep->rel.nack_resends, ep->rel.nack_ignored, ep->rel.timeouts,
			ep->rel.rto_resends, ep->rel.stashed, ep->rel.beyond_window, ep->rel.ring_full,
			us.wd_resends);
		fprintf(f, ", \"datagrams\": {\"sent\": %" PRIu64 ", \"received\": %" PRIu64
			", \"packed_sent\": %" PRIu64 ", \"packed_received\": %" PRIu64
			", \"control_sent\": %" PRIu64 "}, \"idle_trims\": %" PRIu64,
			us.tx_datagrams, us.rx_datagrams, us.tx_packed, us.rx_packed, us.tx_ctl,
			us.trims);
		fprintf(f, ", \"wire_drops\": {");
		for (i = 0; i < n; i++)
			fprintf(f, "%s\"%s\": %" PRIu64, i ? ", " : "", names[i], counts[i]);
		fprintf(f, "}");
	}
	fprintf(f, "}");
}

static void opx_stats_table(const struct opx_ep *ep, const struct opx_stats *st)
{
	uint64_t drops = 0;
	int i;

	fprintf(stderr, "opx stats pid %ld unit %u ctx %u:\n", (long)getpid(), ep->addr.unit,
		ep->addr.ctx);
	fprintf(stderr, "  %-10s %12s %14s %12s %14s\n", "protocol", "sent", "bytes", "received",
		"bytes");
	for (i = 0; i < OPX_PROTO_MAX; i++)
		if (st->tx[i].msgs || st->rx[i].msgs)
			fprintf(stderr, "  %-10s %12" PRIu64 " %14" PRIu64 " %12" PRIu64 " %14" PRIu64 "\n",
				opx_proto_names[i], st->tx[i].msgs, st->tx[i].bytes, st->rx[i].msgs,
				st->rx[i].bytes);
	for (i = 0; i < OPX_DROP_MAX; i++)
		drops += st->drops[i];
	fprintf(stderr, "  unexpected %" PRIu64 " (peak %" PRIu64 " B), queue peaks posted %" PRIu64
		" unexpected %" PRIu64 ", credit stalls %" PRIu64 ", drops %" PRIu64 "\n",
		st->ux_msgs, st->ux_bytes_peak, st->posted_peak, st->ux_peak, st->tx_eagain, drops);
	if (ep->udp && ep->rel.flows) {
		uint32_t mtu_min, mtu_max;
		struct shim_udp_stats us;

		shim_udp_stats(ep->shim, &us);
		opx_stats_path_mtu(ep, &mtu_min, &mtu_max);
		fprintf(stderr, "  udp path: %u", mtu_min);
		if (mtu_max != mtu_min)
			fprintf(stderr, "..%u", mtu_max);
		fprintf(stderr, " payload bytes per datagram\n");
		fprintf(stderr,
			"  udp wire: retransmits %" PRIu64 ", duplicates %" PRIu64 ", nacks %" PRIu64
			", timeouts %" PRIu64 ", dead peers %" PRIu64
			", held for a sender over its unexpected share %" PRIu64 "\n",
			st->retransmits, st->duplicates, st->nacks, ep->rel.timeouts, st->peer_timeouts,
			ep->rel.ux_held);
		fprintf(stderr,
			"  udp recovery: nacks received %" PRIu64 ", resent for nacks %" PRIu64
			" (%" PRIu64 " named again within the round trip: not resent)"
			", resent by timeouts %" PRIu64 ", out of order %" PRIu64
			", beyond the window %" PRIu64 ", receive ring full %" PRIu64
			", resent by the watchdog %" PRIu64 "\n",
			ep->rel.nacks_rx, ep->rel.nack_resends, ep->rel.nack_ignored, ep->rel.rto_resends,
			ep->rel.stashed, ep->rel.beyond_window, ep->rel.ring_full, us.wd_resends);
		fprintf(stderr,
			"  udp datagrams: sent %" PRIu64 " (acks, nacks and keepalives %" PRIu64
			"), received %" PRIu64
			"; packets sharing one (FI_OPX_UDP_PACK): sent %" PRIu64 ", received %" PRIu64
			"; idle send rings trimmed %" PRIu64 "\n",
			us.tx_datagrams, us.tx_ctl, us.rx_datagrams, us.tx_packed, us.rx_packed,
			us.trims);
	}
	if (ep->udp) {
		const char *names[OPX_WIRE_DROP_REASONS];
		uint64_t counts[OPX_WIRE_DROP_REASONS];
		unsigned int n = opx_stats_wire_drops(ep, names, counts);
		bool any = false;

		for (unsigned int k = 0; k < n; k++) {
			if (!counts[k])
				continue;
			fprintf(stderr, "%s%s %" PRIu64, any ? ", " : "  udp datagrams dropped: ",
				names[k], counts[k]);
			any = true;
		}
		if (any)
			fprintf(stderr, "\n");
	}
}

/* Append this endpoint to the process's record and rewrite the file. */
static void opx_stats_file(const struct opx_ep *ep, const struct opx_stats *st)
{
	char path[4096], host[256], *rec = NULL;
	size_t rec_len = 0;
	FILE *f;
	char *grown;

	if (opx_stats_path(opx_env.stats, path, sizeof(path))) {
		OPX_WARN(FI_LOG_EP_CTRL, "FI_OPX_STATS=%s: path too long\n", opx_env.stats);
		return;
	}
	f = open_memstream(&rec, &rec_len);
	if (!f)
		return;
	opx_stats_json_ep(f, ep, st);
	fclose(f);

	pthread_mutex_lock(&opx_stats_mutex);
	grown = realloc(opx_stats_doc, opx_stats_doc_len + rec_len + 3);
	if (grown) {
		opx_stats_doc = grown;
		opx_stats_doc_len += (size_t)sprintf(opx_stats_doc + opx_stats_doc_len, "%s%s",
						     opx_stats_neps ? ",\n" : "", rec);
		opx_stats_neps++;
	}
	f = grown ? fopen(path, "w") : NULL;
	if (f) {
		if (gethostname(host, sizeof(host)))
			strcpy(host, "unknown");
		host[sizeof(host) - 1] = '\0';
		fprintf(f, "{\"opx_stats_version\": %d, \"host\": \"%s\", \"pid\": %ld, "
			   "\"rank\": \"%s\", \"endpoints\": [\n%s\n]}\n",
			OPX_STATS_VERSION, host, (long)getpid(),
			getenv("OMPI_COMM_WORLD_RANK") ? getenv("OMPI_COMM_WORLD_RANK")
			: getenv("PMI_RANK") ? getenv("PMI_RANK") : "",
			opx_stats_doc);
		if (fclose(f))
			OPX_WARN(FI_LOG_EP_CTRL, "FI_OPX_STATS: writing %s: %s\n", path,
				 strerror(errno));
	} else {
		OPX_WARN(FI_LOG_EP_CTRL, "FI_OPX_STATS: cannot write %s: %s\n", path,
			 strerror(errno));
	}
	pthread_mutex_unlock(&opx_stats_mutex);
	free(rec);
}

void opx_stats_ep_close(struct opx_ep *ep)
{
	struct opx_stats st;

	if (!opx_env.stats || !*opx_env.stats)
		return;
	opx_lock_acquire(&ep->domain->lock);
	opx_stats_snapshot_locked(ep, &st);
	opx_lock_release(&ep->domain->lock);
	if (!strcmp(opx_env.stats, "stderr"))
		opx_stats_table(ep, &st);
	else
		opx_stats_file(ep, &st);
}
