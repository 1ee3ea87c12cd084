/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_sockaddr.c - endpoints named by their udp socket (issue 31 item
 * 5): fi_getinfo with addr_format FI_SOCKADDR_IN or FI_SOCKADDR gives
 * struct sockaddr_in names (node, service, FI_SOURCE and hinted addresses
 * as fi_getinfo(3) has them, IPv6 and foreign addresses refused, nothing
 * where the udp wire is off); fi_getname/fi_setname, fi_av_insert,
 * fi_av_lookup and fi_av_straddr ("fi_sockaddr_in://a.b.c.d:port") take
 * and give them; two endpoints that know each other only by socket
 * address exchange checked data, directed receives and FI_SOURCE
 * included, and a peer whose socket address is inserted after it spoke
 * is known in full at once; FI_SOURCE_ERR's err_data is a sockaddr_in
 * where the sender's socket is known.  test_sockaddr_udp.sh runs it again
 * with every peer on the udp wire.
 *
 * Run as root, the process first moves into a network namespace of its
 * own (only lo, up), so the addresses it makes up (another host's) reach
 * nobody; without one, the test of made-up addresses is skipped.  Every
 * wait is bounded.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fixture.h"
#include "opx.h"

#define TS_WAIT_MS 10000u
#define TS_BIG (64u * 1024u) /* rendezvous on shm, many datagrams on udp */

static bool ts_netns; /* in a network namespace of our own */

static bool ts_udp(void)
{
	return opx_env.wire == SHIM_WIRE_UDP;
}

static struct sockaddr_in ts_sin(const char *ip, uint16_t port)
{
	struct sockaddr_in sin;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons(port);
	assert_int_equal(inet_pton(AF_INET, ip, &sin.sin_addr), 1);
	return sin;
}

static int ts_getinfo(uint32_t fmt, const char *node, const char *service, uint64_t flags,
		      struct fi_info *h, struct fi_info **fi)
{
	h->ep_attr->type = FI_EP_RDM;
	h->caps = FI_TAGGED;
	h->addr_format = fmt;
	return fx_prov()->getinfo(FX_VERSION, node, service, flags, h, fi);
}

static void ts_set_addr(void **field, size_t *len, const void *addr, size_t n)
{
	free(*field);
	*field = NULL;
	*len = 0;
	if (!addr)
		return;
	*field = malloc(n);
	assert_non_null(*field);
	memcpy(*field, addr, n);
	*len = n;
}

static const struct sockaddr_in *ts_sin_of(const void *addr, size_t len)
{
	const struct sockaddr_in *sin = addr;

	assert_non_null(addr);
	assert_int_equal(len, sizeof(*sin));
	assert_int_equal(sin->sin_family, AF_INET);
	return sin;
}

static struct sockaddr_in ts_name(struct fid_ep *ep)
{
	struct sockaddr_in sin;
	size_t len = sizeof(sin);

	assert_int_equal(fi_getname(&ep->fid, &sin, &len), 0);
	assert_int_equal(len, sizeof(sin));
	assert_int_equal(sin.sin_family, AF_INET);
	assert_int_not_equal(sin.sin_port, 0);
	assert_int_not_equal(sin.sin_addr.s_addr, 0);
	return sin;
}

/* ---------------------------------------------------------------------
 * fi_getinfo.
 */
static void test_sock_getinfo(void **state)
{
	(void)state;
	struct fi_info *h = fi_allocinfo(), *fi = NULL;
	const struct sockaddr_in *src, *dst;
	struct sockaddr_in want;
	struct sockaddr_in6 six;

	assert_non_null(h);
	/* no node, no service: the udp wire's address, any port */
	assert_int_equal(ts_getinfo(FI_SOCKADDR_IN, NULL, NULL, 0, h, &fi), 0);
	assert_int_equal(fi->addr_format, FI_SOCKADDR_IN);
	src = ts_sin_of(fi->src_addr, fi->src_addrlen);
	assert_int_not_equal(src->sin_addr.s_addr, 0);
	assert_int_equal(src->sin_port, 0);
	assert_null(fi->dest_addr);
	/* with hints, one entry: manual progress (opx_info_add_auto) */
	assert_int_equal(fi->domain_attr->data_progress, FI_PROGRESS_MANUAL);
	assert_null(fi->next);
	fi_freeinfo(fi);

	/* a client: node and service are the peer's socket */
	assert_int_equal(ts_getinfo(FI_SOCKADDR_IN, "127.0.0.1", "47592", 0, h, &fi), 0);
	dst = ts_sin_of(fi->dest_addr, fi->dest_addrlen);
	want = ts_sin("127.0.0.1", 47592);
	assert_memory_equal(dst, &want, sizeof(want));
	assert_int_equal(ts_sin_of(fi->src_addr, fi->src_addrlen)->sin_port, 0);
	fi_freeinfo(fi);

	/* a server: FI_SOURCE, the service is its port, the node its address */
	assert_int_equal(ts_getinfo(FI_SOCKADDR_IN, NULL, "47592", FI_SOURCE, h, &fi), 0);
	assert_int_equal(ts_sin_of(fi->src_addr, fi->src_addrlen)->sin_port, htons(47592));
	assert_null(fi->dest_addr);
	fi_freeinfo(fi);
	assert_int_equal(ts_getinfo(FI_SOCKADDR_IN, "127.0.0.1", "47593", FI_SOURCE, h, &fi), 0);
	want = ts_sin("127.0.0.1", 47593);
	assert_memory_equal(ts_sin_of(fi->src_addr, fi->src_addrlen), &want, sizeof(want));
	fi_freeinfo(fi);

	/* FI_SOCKADDR: the same names, the format echoed */
	assert_int_equal(ts_getinfo(FI_SOCKADDR, "127.0.0.1", "47594", 0, h, &fi), 0);
	assert_int_equal(fi->addr_format, FI_SOCKADDR);
	want = ts_sin("127.0.0.1", 47594);
	assert_memory_equal(ts_sin_of(fi->dest_addr, fi->dest_addrlen), &want, sizeof(want));
	fi_freeinfo(fi);

	/* hinted addresses: src_addr honoured (not with FI_SOURCE), dest_addr
	 * when node and service are NULL */
	want = ts_sin("127.0.0.1", 4242);
	ts_set_addr(&h->src_addr, &h->src_addrlen, &want, sizeof(want));
	assert_int_equal(ts_getinfo(FI_SOCKADDR_IN, NULL, NULL, 0, h, &fi), 0);
	assert_memory_equal(ts_sin_of(fi->src_addr, fi->src_addrlen), &want, sizeof(want));
	fi_freeinfo(fi);
	assert_int_equal(ts_getinfo(FI_SOCKADDR_IN, NULL, "4243", FI_SOURCE, h, &fi), 0);
	assert_int_equal(ts_sin_of(fi->src_addr, fi->src_addrlen)->sin_port, htons(4243));
	fi_freeinfo(fi);
	ts_set_addr(&h->src_addr, &h->src_addrlen, NULL, 0);
	want = ts_sin("198.51.100.9", 4244);
	ts_set_addr(&h->dest_addr, &h->dest_addrlen, &want, sizeof(want));
	assert_int_equal(ts_getinfo(FI_SOCKADDR_IN, NULL, NULL, 0, h, &fi), 0);
	assert_memory_equal(ts_sin_of(fi->dest_addr, fi->dest_addrlen), &want, sizeof(want));
	fi_freeinfo(fi);
	ts_set_addr(&h->dest_addr, &h->dest_addrlen, NULL, 0);

	/* refused: IPv6, a short address, an address that is not ours */
	memset(&six, 0, sizeof(six));
	six.sin6_family = AF_INET6;
	six.sin6_port = htons(4245);
	six.sin6_addr = in6addr_loopback;
	ts_set_addr(&h->src_addr, &h->src_addrlen, &six, sizeof(six));
	assert_int_equal(ts_getinfo(FI_SOCKADDR, NULL, NULL, 0, h, &fi), -FI_ENODATA);
	want = ts_sin("127.0.0.1", 4246);
	ts_set_addr(&h->src_addr, &h->src_addrlen, &want, sizeof(want) - 1);
	assert_int_equal(ts_getinfo(FI_SOCKADDR_IN, NULL, NULL, 0, h, &fi), -FI_ENODATA);
	want = ts_sin("198.51.100.9", 4247); /* TEST-NET-2: never this host's */
	ts_set_addr(&h->src_addr, &h->src_addrlen, &want, sizeof(want));
	assert_int_equal(ts_getinfo(FI_SOCKADDR_IN, NULL, NULL, 0, h, &fi), -FI_ENODATA);
	ts_set_addr(&h->src_addr, &h->src_addrlen, NULL, 0);

	/* formats opx does not have */
	assert_int_equal(ts_getinfo(FI_SOCKADDR_IN6, NULL, NULL, 0, h, &fi), -FI_ENODATA);
	assert_int_equal(ts_getinfo(FI_SOCKADDR_IB, NULL, NULL, 0, h, &fi), -FI_ENODATA);
	assert_int_equal(ts_getinfo(FI_ADDR_PSMX2, NULL, NULL, 0, h, &fi), -FI_ENODATA);

	/* unspecified: the native format, as before */
	assert_int_equal(ts_getinfo(FI_FORMAT_UNSPEC, "127.0.0.1", "47595", 0, h, &fi), 0);
	assert_int_equal(fi->addr_format, FI_ADDR_OPX);
	assert_int_equal(fi->src_addrlen, sizeof(struct shim_addr));
	assert_int_equal(fi->dest_addrlen, sizeof(struct shim_addr));
	fi_freeinfo(fi);
	fi_freeinfo(h);
}

/* Where no endpoint gets a socket, no socket format is offered, and an
 * endpoint asked for one anyway fails to open. */
static void test_sock_shm_only(void **state)
{
	(void)state;
	struct fi_info *h = fi_allocinfo(), *fi = NULL;
	int wire = opx_env.wire;
	struct fx_env e;

	assert_non_null(h);
	/* the device takes the parameters when it is opened, and nothing
	 * holds it open between tests */
	opx_env.wire = SHIM_WIRE_SHM;
	assert_int_equal(ts_getinfo(FI_SOCKADDR_IN, NULL, NULL, 0, h, &fi), -FI_ENODATA);
	assert_int_equal(ts_getinfo(FI_SOCKADDR, "127.0.0.1", "4248", 0, h, &fi), -FI_ENODATA);
	assert_int_equal(ts_getinfo(FI_ADDR_OPX, NULL, NULL, 0, h, &fi), 0);
	fi_freeinfo(fi);

	assert_int_equal(fx_open_domain(&e, NULL), 0);
	e.info->addr_format = FI_SOCKADDR_IN;
	ts_set_addr(&e.info->src_addr, &e.info->src_addrlen, NULL, 0);
	assert_int_equal(fi_close(&e.domain->fid), 0);
	assert_int_equal(fi_domain(e.fabric, e.info, &e.domain, NULL), 0);
	assert_int_equal(fi_endpoint(e.domain, e.info, &e.ep, NULL), -FI_ENODEV);
	e.ep = NULL;
	fx_close(&e);
	opx_env.wire = wire;
	fi_freeinfo(h);
}

/* ---------------------------------------------------------------------
 * Names and the AV.
 */
static void test_sock_names(void **state)
{
	(void)state;
	struct sockaddr_in name, other, got;
	struct sockaddr_in6 six;
	char str[64], want[64], ip[INET_ADDRSTRLEN];
	size_t len;
	fi_addr_t fa = FI_ADDR_NOTAVAIL;
	struct fx_env e;

	assert_int_equal(fx_open_fmt(&e, FI_SOCKADDR_IN, 0), 0);
	name = ts_name(e.ep);
	/* the name is the socket's: the port fi_getinfo's src_addr left open */
	assert_int_equal(name.sin_addr.s_addr,
			 ((const struct sockaddr_in *)e.info->src_addr)->sin_addr.s_addr);

	/* a short buffer: truncated, the length needed */
	len = 4;
	memset(&got, 0, sizeof(got));
	assert_int_equal(fi_getname(&e.ep->fid, &got, &len), -FI_ETOOSMALL);
	assert_int_equal(len, sizeof(name));
	assert_memory_equal(&got, &name, 4);

	/* the name it has is the only one it takes (and not once enabled) */
	assert_int_equal(fi_setname(&e.ep->fid, &name, sizeof(name)), -FI_EOPBADSTATE);

	/* straddr: libfabric's form, truncated when short */
	assert_non_null(inet_ntop(AF_INET, &name.sin_addr, ip, sizeof(ip)));
	snprintf(want, sizeof(want), "fi_sockaddr_in://%s:%u", ip, (unsigned)ntohs(name.sin_port));
	len = sizeof(str);
	assert_ptr_equal(fi_av_straddr(e.av, &name, str, &len), str);
	assert_string_equal(str, want);
	assert_int_equal(len, strlen(want) + 1);
	len = 8;
	assert_non_null(fi_av_straddr(e.av, &name, str, &len));
	assert_int_equal(len, strlen(want) + 1);
	assert_int_equal(strncmp(str, want, 7), 0);

	/* lookup of ourselves: our name back; short: truncated, still 0 */
	len = sizeof(got);
	assert_int_equal(fi_av_lookup(e.av, e.self, &got, &len), 0);
	assert_int_equal(len, sizeof(got));
	assert_memory_equal(&got, &name, sizeof(name));
	len = 2;
	memset(&got, 0, sizeof(got));
	assert_int_equal(fi_av_lookup(e.av, e.self, &got, &len), 0);
	assert_int_equal(len, sizeof(got));
	assert_int_equal(got.sin_family, AF_INET);
	assert_int_equal(got.sin_port, 0);

	/* 127.0.0.1 and our port: this host, us (the registry) */
	other = ts_sin("127.0.0.1", ntohs(name.sin_port));
	assert_int_equal(fi_av_insert(e.av, &other, 1, &fa, 0, NULL), 1);
	len = sizeof(got);
	assert_int_equal(fi_av_lookup(e.av, fa, &got, &len), 0);
	assert_memory_equal(&got, &name, sizeof(name));

	/* IPv6 is not taken, with a clear error per address */
	memset(&six, 0, sizeof(six));
	six.sin6_family = AF_INET6;
	six.sin6_port = name.sin_port;
	six.sin6_addr = in6addr_loopback;
	{
		int err[1] = {-1};

		fa = 0;
		assert_int_equal(fi_av_insert(e.av, &six, 1, &fa, FI_SYNC_ERR, err), 0);
		assert_int_equal(fa, FI_ADDR_NOTAVAIL);
		assert_int_equal(err[0], FI_EINVAL);
	}
	/* neither an address nor a port */
	other = ts_sin("0.0.0.0", 4249);
	assert_int_equal(fi_av_insert(e.av, &other, 1, &fa, 0, NULL), 0);
	other = ts_sin("127.0.0.1", 0);
	assert_int_equal(fi_av_insert(e.av, &other, 1, &fa, 0, NULL), 0);
	fx_close(&e);
}

/* An array of socket addresses, good and bad, 16 bytes apart; a port of
 * this host that nothing serves (one just closed) resolves to nothing. */
static void test_sock_insert_many(void **state)
{
	(void)state;
	struct fx_env e, gone;
	struct sockaddr_in addrs[4], name, got;
	fi_addr_t fa[4];
	int err[4];
	size_t len;

	assert_int_equal(fx_open_fmt(&gone, FI_SOCKADDR, 0), 0);
	name = ts_name(gone.ep);
	fx_close(&gone);
	assert_int_equal(fx_open_fmt(&e, FI_SOCKADDR, 0), 0);
	addrs[0] = ts_name(e.ep);
	addrs[1] = addrs[0];
	addrs[1].sin_family = AF_INET6;
	addrs[2] = ts_sin("127.0.0.1", 0);
	addrs[3] = addrs[0];
	memset(err, 0xff, sizeof(err));
	assert_int_equal(fi_av_insert(e.av, addrs, 4, fa, FI_SYNC_ERR, err), 2);
	assert_int_equal(err[0], 0);
	assert_int_equal(err[1], FI_EINVAL);
	assert_int_equal(err[2], FI_EINVAL);
	assert_int_equal(err[3], 0);
	assert_int_equal(fa[1], FI_ADDR_NOTAVAIL);
	assert_int_equal(fa[2], FI_ADDR_NOTAVAIL);
	for (int i = 0; i < 4; i += 3) {
		len = sizeof(got);
		assert_int_equal(fi_av_lookup(e.av, fa[i], &got, &len), 0);
		assert_memory_equal(&got, &addrs[0], sizeof(got));
	}
	/* a closed endpoint's port, on this host */
	name.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (!ts_udp()) {
		fa[0] = 0;
		assert_int_equal(fi_av_insert(e.av, &name, 1, fa, 0, NULL), -FI_EADDRNOTAVAIL);
		assert_int_equal(fa[0], FI_ADDR_NOTAVAIL);
	}
	fx_close(&e);
}

/* Addresses of other hosts are taken as they are (the udp wire reaches
 * them; nothing is sent here): only in a network namespace of our own,
 * where they reach nobody. */
static void test_sock_other_hosts(void **state)
{
	(void)state;
	struct sockaddr_in addrs[2], got;
	fi_addr_t fa[2];
	char str[64];
	size_t len;
	struct fx_env e;

	if (!ts_netns) {
		fprintf(stderr, "# skipped: made-up addresses need a network namespace (root)\n");
		skip();
	}
	assert_int_equal(fx_open_fmt(&e, FI_SOCKADDR_IN, 0), 0);
	addrs[0] = ts_sin("198.18.0.77", 5000);
	addrs[1] = ts_sin("198.18.0.78", 65535);
	assert_int_equal(fi_av_insert(e.av, addrs, 2, fa, 0, NULL), 2);
	for (int i = 0; i < 2; i++) {
		len = sizeof(got);
		assert_int_equal(fi_av_lookup(e.av, fa[i], &got, &len), 0);
		assert_memory_equal(&got, &addrs[i], sizeof(got));
	}
	len = sizeof(str);
	assert_non_null(fi_av_straddr(e.av, &addrs[1], str, &len));
	assert_string_equal(str, "fi_sockaddr_in://198.18.0.78:65535");
	assert_int_equal(fi_av_remove(e.av, fa, 2, 0), 0);
	fx_close(&e);
}

/* ---------------------------------------------------------------------
 * Two endpoints that know each other by socket address only.
 */
struct ts_pair {
	struct fx_env a, b;
	struct sockaddr_in name_a, name_b;
	fi_addr_t b_in_a; /* b in a's AV */
};

static void ts_pair_open(struct ts_pair *p, uint32_t fmt, uint64_t caps_b)
{
	assert_int_equal(fx_open_fmt(&p->a, fmt, 0), 0);
	assert_int_equal(fx_open_fmt(&p->b, fmt, caps_b), 0);
	p->name_a = ts_name(p->a.ep);
	p->name_b = ts_name(p->b.ep);
	assert_int_equal(fi_av_insert(p->a.av, &p->name_b, 1, &p->b_in_a, 0, NULL), 1);
}

static void ts_pair_close(struct ts_pair *p)
{
	fx_close(&p->b);
	fx_close(&p->a);
}

static uint8_t ts_pat(unsigned seed, size_t i)
{
	return (uint8_t)(seed * 131u + i * 7u + (i >> 8) + 1u);
}

/* An operation awaited on its endpoint's CQ: its entry and source, or
 * the positive code of its error entry (err, whose err_data goes to the
 * buffer it brings). */
struct ts_op {
	struct fx_env *env;
	void *ctx;
	bool done;
	struct fi_cq_tagged_entry ent;
	fi_addr_t src;
	int code;
	struct fi_cq_err_entry err;
};

/* Read the CQs of ops[0] and ops[1] (one entry each per round, so both
 * sides progress) until both operations completed: 0, or -FI_ETIMEDOUT.
 * Completions of other operations are dropped. */
static int ts_wait2(struct ts_op ops[2])
{
	uint64_t end = fx_now_ms() + TS_WAIT_MS;

	do {
		for (int i = 0; i < 2; i++) {
			struct fi_cq_tagged_entry ent;
			struct fi_cq_err_entry e;
			fi_addr_t from = FI_ADDR_NOTAVAIL;
			ssize_t n = fi_cq_readfrom(ops[i].env->cq, &ent, 1, &from);

			for (int j = 0; n == 1 && j < 2; j++) {
				if (!ops[j].done && ops[j].env == ops[i].env &&
				    ops[j].ctx == ent.op_context) {
					ops[j].ent = ent;
					ops[j].src = from;
					ops[j].done = true;
				}
			}
			if (n != -FI_EAVAIL)
				continue;
			memset(&e, 0, sizeof(e));
			e.err_data = ops[i].err.err_data; /* NULL, or the caller's buffer */
			e.err_data_size = ops[i].err.err_data_size;
			assert_int_equal(fi_cq_readerr(ops[i].env->cq, &e, 0), 1);
			for (int j = 0; j < 2; j++) {
				if (!ops[j].done && ops[j].env == ops[i].env &&
				    ops[j].ctx == e.op_context) {
					ops[j].err = e;
					ops[j].code = e.err;
					ops[j].done = true;
				}
			}
		}
		if (ops[0].done && ops[1].done)
			return 0;
	} while (fx_now_ms() <= end);
	return -FI_ETIMEDOUT;
}

/* from sends len bytes (pattern seed) with tag to dest; to receives them
 * from src (FI_ADDR_UNSPEC: anyone) and reports the sender it saw.  Both
 * completions are awaited (on the udp wire the send's waits for the
 * receiver's acknowledgement), so nothing is left behind. */
static fi_addr_t ts_xfer(struct fx_env *from, fi_addr_t dest, struct fx_env *to, fi_addr_t src,
			 uint64_t tag, size_t len, unsigned seed)
{
	uint8_t *sbuf = malloc(len + 1), *rbuf = calloc(1, len + 1);
	int rctx, sctx;
	struct ts_op ops[2] = {{.env = to, .ctx = &rctx}, {.env = from, .ctx = &sctx}};
	struct fi_cq_tagged_entry ent;
	uint64_t end;

	assert_non_null(sbuf);
	assert_non_null(rbuf);
	for (size_t i = 0; i < len; i++)
		sbuf[i] = ts_pat(seed, i);
	assert_int_equal(fi_trecv(to->ep, rbuf, len, NULL, src, tag, 0, &rctx), 0);
	end = fx_now_ms() + TS_WAIT_MS;
	for (;;) {
		ssize_t rc = fi_tsend(from->ep, sbuf, len, NULL, dest, tag, &sctx);

		if (rc == 0)
			break;
		assert_int_equal(rc, -FI_EAGAIN);
		assert_true(fx_now_ms() <= end);
		(void)fi_cq_read(to->cq, &ent, 1); /* nothing of ours completed yet */
		(void)fi_cq_read(from->cq, &ent, 1);
	}
	assert_int_equal(ts_wait2(ops), 0);
	assert_int_equal(ops[0].code, 0);
	assert_int_equal(ops[1].code, 0);
	assert_int_equal(ops[0].ent.len, len);
	assert_memory_equal(rbuf, sbuf, len);
	free(sbuf);
	free(rbuf);
	return ops[0].src;
}

static void ts_exchange(uint32_t fmt)
{
	struct ts_pair p;
	struct sockaddr_in got;
	fi_addr_t a_in_b;
	size_t len = sizeof(got);
	static const size_t sizes[] = {0, 1, 17, 8192, TS_BIG};

	ts_pair_open(&p, fmt, FI_TAGGED | FI_SOURCE | FI_DIRECTED_RECV);
	/* b hears from a before it knows it */
	assert_int_equal(ts_xfer(&p.a, p.b_in_a, &p.b, FI_ADDR_UNSPEC, 1, 32, 1), FI_ADDR_NOTAVAIL);
	/* then learns a's socket address (as a message would carry it) */
	assert_int_equal(fi_av_insert(p.b.av, &p.name_a, 1, &a_in_b, 0, NULL), 1);
	assert_int_equal(fi_av_lookup(p.b.av, a_in_b, &got, &len), 0);
	assert_memory_equal(&got, &p.name_a, sizeof(got));
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		/* a directed receive from a's fi_addr matches, FI_SOURCE says so */
		assert_int_equal(ts_xfer(&p.a, p.b_in_a, &p.b, a_in_b, 2 + i, sizes[i], 10 + i),
				 a_in_b);
		assert_int_equal(ts_xfer(&p.b, a_in_b, &p.a, p.b_in_a, 20 + i, sizes[i], 30 + i),
				 p.b_in_a);
	}
	ts_pair_close(&p);
}

static void test_sock_exchange(void **state)
{
	(void)state;
	ts_exchange(FI_SOCKADDR_IN);
}

static void test_sockaddr_exchange(void **state)
{
	(void)state;
	ts_exchange(FI_SOCKADDR);
}

/* A peer whose socket address is inserted after it spoke, and that is not
 * in this host's registry (a native-format endpoint with a socket): on
 * the udp wire its flow knows it in full, so the entry names it at once
 * and directed receives from it match; on shared memory such a port
 * names nothing here. */
static void test_sock_learned_peer(void **state)
{
	(void)state;
	struct fx_env a, b;
	struct shim_addr na;
	struct sockaddr_in name_a, name_b;
	fi_addr_t b_in_a, a_in_b = FI_ADDR_NOTAVAIL;
	size_t len = sizeof(na);

	assert_int_equal(fx_open(&a, FI_AV_TABLE, FI_CQ_FORMAT_TAGGED), 0);
	assert_int_equal(fx_open_fmt(&b, FI_SOCKADDR_IN, FI_TAGGED | FI_SOURCE | FI_DIRECTED_RECV),
			 0);
	assert_int_equal(fi_getname(&a.ep->fid, &na, &len), 0);
	name_b = ts_name(b.ep);
	memset(&name_a, 0, sizeof(name_a));
	name_a.sin_family = AF_INET;
	name_a.sin_addr.s_addr = na.ipv4;
	name_a.sin_port = na.udp_port;
	if (!ts_udp()) {
		/* a has a socket only with the udp wire forced, and serves no port */
		assert_int_equal(fi_av_insert(b.av, &name_a, 1, &a_in_b, 0, NULL),
				 name_a.sin_port ? -FI_EADDRNOTAVAIL : 0);
		goto out;
	}
	assert_int_not_equal(name_a.sin_port, 0);
	/* a reaches b through b's registry entry, in a's own format */
	{
		char port[8];

		snprintf(port, sizeof(port), "%u", (unsigned)ntohs(name_b.sin_port));
		assert_int_equal(fi_av_insertsvc(a.av, "127.0.0.1", port, &b_in_a, 0, NULL), 1);
	}
	assert_int_equal(ts_xfer(&a, b_in_a, &b, FI_ADDR_UNSPEC, 1, 8, 1), FI_ADDR_NOTAVAIL);
	assert_int_equal(fi_av_insert(b.av, &name_a, 1, &a_in_b, 0, NULL), 1);
	assert_int_equal(ts_xfer(&a, b_in_a, &b, a_in_b, 2, 100, 2), a_in_b);
	assert_int_equal(ts_xfer(&b, a_in_b, &a, b_in_a, 3, TS_BIG, 3), b_in_a);
out:
	fx_close(&b);
	fx_close(&a);
}

/* FI_SOURCE_ERR: a message from a sender not in the AV is an error entry
 * whose err_data is its socket address, ready for fi_av_insert, where its
 * socket is known (the udp wire); a sender of this host on shared memory
 * has no socket address to give, and its message completes normally from
 * FI_ADDR_NOTAVAIL. */
static void test_sock_source_err(void **state)
{
	(void)state;
	struct ts_pair p;
	struct sockaddr_in from;
	fi_addr_t a_in_b;
	uint8_t buf[16], msg[16] = "hello, sockets", errbuf[64];
	int rctx, sctx;
	struct ts_op ops[2] = {{.ctx = &rctx}, {.ctx = &sctx}};

	ts_pair_open(&p, FI_SOCKADDR_IN, FI_TAGGED | FI_SOURCE | FI_SOURCE_ERR);
	ops[0].env = &p.b;
	ops[0].err.err_data = errbuf;
	ops[0].err.err_data_size = sizeof(errbuf);
	ops[1].env = &p.a;
	assert_int_equal(fi_trecv(p.b.ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, 5, 0, &rctx), 0);
	assert_int_equal(fi_tsend(p.a.ep, msg, sizeof(msg), NULL, p.b_in_a, 5, &sctx), 0);
	assert_int_equal(ts_wait2(ops), 0);
	assert_int_equal(ops[1].code, 0);
	assert_memory_equal(buf, msg, sizeof(msg));
	if (!ts_udp()) {
		assert_int_equal(ops[0].code, 0);
		assert_int_equal(ops[0].src, FI_ADDR_NOTAVAIL);
	} else {
		assert_int_equal(ops[0].code, FI_EADDRNOTAVAIL);
		assert_int_equal(ops[0].err.err_data_size, sizeof(from));
		memcpy(&from, errbuf, sizeof(from));
		assert_memory_equal(&from, &p.name_a, sizeof(from));
		assert_int_equal(fi_av_insert(p.b.av, &from, 1, &a_in_b, 0, NULL), 1);
		assert_int_equal(ts_xfer(&p.a, p.b_in_a, &p.b, a_in_b, 6, 64, 6), a_in_b);
	}
	ts_pair_close(&p);
}

/* An endpoint's src_addr in the socket format: its socket is bound there,
 * and a second endpoint cannot take the same port. */
static void test_sock_src_port(void **state)
{
	(void)state;
	struct fx_env e;
	struct fid_ep *ep2 = NULL;
	struct sockaddr_in name, src;

	assert_int_equal(fx_open_fmt(&e, FI_SOCKADDR_IN, 0), 0);
	name = ts_name(e.ep);
	src = name;
	ts_set_addr(&e.info->src_addr, &e.info->src_addrlen, &src, sizeof(src));
	assert_int_equal(fi_endpoint(e.domain, e.info, &ep2, NULL), -FI_EADDRINUSE);
	src = ts_sin("198.51.100.9", 0); /* not ours: cannot be bound */
	ts_set_addr(&e.info->src_addr, &e.info->src_addrlen, &src, sizeof(src));
	assert_int_equal(fi_endpoint(e.domain, e.info, &ep2, NULL), -FI_EADDRNOTAVAIL);
	/* a native info on a socket-format domain: one format per domain */
	e.info->addr_format = FI_ADDR_OPX;
	ts_set_addr(&e.info->src_addr, &e.info->src_addrlen, NULL, 0);
	assert_int_equal(fi_endpoint(e.domain, e.info, &ep2, NULL), -FI_EINVAL);
	/* port 0 of address 0: any */
	e.info->addr_format = FI_SOCKADDR_IN;
	src = ts_sin("0.0.0.0", 0);
	ts_set_addr(&e.info->src_addr, &e.info->src_addrlen, &src, sizeof(src));
	assert_int_equal(fi_endpoint(e.domain, e.info, &ep2, NULL), 0);
	assert_int_equal(fi_setname(&ep2->fid, &name, sizeof(name)), -FI_EINVAL);
	name = ts_name(ep2);
	assert_int_equal(fi_setname(&ep2->fid, &name, sizeof(name)), 0);
	assert_int_equal(fi_setname(&ep2->fid, &name, sizeof(name) - 1), -FI_EINVAL);
	assert_int_equal(fi_close(&ep2->fid), 0);
	fx_close(&e);
}

/* Run as root: a network namespace of our own, lo up, so that made-up
 * addresses of other hosts reach nobody. */
static void ts_enter_netns(void)
{
	struct ifreq ifr;
	int fd;

	if (geteuid() != 0 || unshare(CLONE_NEWNET) < 0)
		return;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP;
		ts_netns = ioctl(fd, SIOCSIFFLAGS, &ifr) == 0;
	}
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sock_getinfo),
		cmocka_unit_test(test_sock_shm_only),
		cmocka_unit_test(test_sock_names),
		cmocka_unit_test(test_sock_insert_many),
		cmocka_unit_test(test_sock_other_hosts),
		cmocka_unit_test(test_sock_exchange),
		cmocka_unit_test(test_sockaddr_exchange),
		cmocka_unit_test(test_sock_learned_peer),
		cmocka_unit_test(test_sock_source_err),
		cmocka_unit_test(test_sock_src_port),
	};

	ts_enter_netns();
	fprintf(stderr, "# %s, wire %s\n",
		ts_netns ? "in a network namespace of its own" : "in the host's network namespace",
		getenv("FI_OPX_WIRE") ? getenv("FI_OPX_WIRE") : "default");
	/* the udp wire's secret, whatever the user's key file says */
	setenv("FI_OPX_AUTH_KEY", "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", 1);
	unsetenv("FI_OPX_IFACE");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
