/*
 * opx_fi_test: two-process functional suite for a libfabric RDM provider
 * (default opx; any provider with -p NAME).
 *
 * The parent (side A) forks a child (side B).  Both open an RDM endpoint
 * (B opens a second one, so directed receive has two real sources to
 * choose from), exchange names over a socketpair and run the subtests in
 * lock step.  The socket carries framed control messages only: SYNC
 * frames order the two sides inside a subtest, REPORT frames carry each
 * side's verdict.  A side that gives up on a subtest sends its REPORT
 * early; the peer sees it in place of the next SYNC and gives up too, so
 * one failure never desynchronises the rest of the suite.
 *
 * Every completion is delivered into a struct test_op (the op_context),
 * buffers live for the whole run, and receives still posted when a subtest
 * ends are cancelled, so a late completion never touches freed memory.
 * All waits have deadlines; alarm() bounds the whole run.
 *
 * Output is TAP-like: "ok - name" / "not ok - name: reason", then
 * "N passed, N failed"; exit status is non-zero if anything failed.
 *
 * This file is the harness; the subtests live in opx_fi_subtests.c and
 * the state and helpers they share are declared in opx_fi_test.h.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "opx_fi_test.h"

struct t_state T;

int64_t t_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Keeps the first failure's reason and appends later ones. */
int t_fail(const char *fmt, ...)
{
	va_list ap;
	size_t used = T.failed ? strlen(T.why) : 0;

	/* keep every reason that fits: later ones are often the cause */
	if (used + 3 < sizeof(T.why)) {
		if (used) {
			strcpy(T.why + used, "; ");
			used += 2;
		}
		va_start(ap, fmt);
		vsnprintf(T.why + used, sizeof(T.why) - used, fmt, ap);
		va_end(ap);
	}
	T.failed = 1;
	return -1;
}

unsigned char t_byte(uint32_t seed, size_t off)
{
	uint32_t v = seed * 2654435761u + (uint32_t)off * 251u +
		     (uint32_t)(off >> 8) * 17u;
	return (unsigned char)(v ^ (v >> 11));
}

void t_fill(void *buf, size_t len, uint32_t seed)
{
	unsigned char *p = buf;
	for (size_t i = 0; i < len; i++)
		p[i] = t_byte(seed, i);
}

long t_verify(const void *buf, size_t len, uint32_t seed)
{
	const unsigned char *p = buf;
	for (size_t i = 0; i < len; i++)
		if (p[i] != t_byte(seed, i))
			return (long)i;
	return -1;
}

struct test_op *t_op(void)
{
	struct test_op *op;
	if (T.nops >= T_NOPS) {
		t_fail("test bug: out of op contexts");
		T.nops = 0;
	}
	op = &T.ops[T.nops++];
	memset(op, 0, sizeof(*op));
	return op;
}

void t_progress(void)
{
	struct fi_cq_tagged_entry ent[16];
	fi_addr_t src[16];
	ssize_t ret;

	for (int round = 0; round < 4; round++) {
		if (T.have_source)
			ret = fi_cq_readfrom(T.cq, ent, 16, src);
		else
			ret = fi_cq_read(T.cq, ent, 16);
		if (ret == -FI_EAVAIL) {
			struct fi_cq_err_entry e;
			struct test_op *op;

			memset(&e, 0, sizeof(e));
			if (fi_cq_readerr(T.cq, &e, 0) <= 0)
				return;
			op = e.op_context;
			if (!op) {
				fprintf(stderr, "# side %c: error entry with no "
					"context: %s\n", 'A' + T.side,
					fi_strerror(e.err));
				continue;
			}
			op->err = e;
			op->nerr++;
			op->n++;
			continue;
		}
		if (ret <= 0)
			return;
		for (ssize_t i = 0; i < ret; i++) {
			struct test_op *op = ent[i].op_context;
			if (!op)
				continue;
			if (op->n < T_MAXENT) {
				op->ent[op->n] = ent[i];
				op->src[op->n] = T.have_source ?
					src[i] : FI_ADDR_NOTAVAIL;
			}
			op->n++;
		}
	}
}

/* Wait until op has at least n completions; 0 or -1 on timeout. */
int t_wait(struct test_op *op, int n, int ms)
{
	int64_t end = t_now_ms() + ms;
	while (op->n < n) {
		t_progress();
		if (t_now_ms() > end)
			return -1;
	}
	return 0;
}

void t_spin(int ms)
{
	int64_t end = t_now_ms() + ms;
	while (t_now_ms() < end)
		t_progress();
}

/* ---- control channel ---------------------------------------------------- */

static int t_sock_send(const struct test_frame *f)
{
	const char *p = (const char *)f;
	size_t left = sizeof(*f);
	while (left) {
		ssize_t w = write(T.sock, p, left);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		left -= (size_t)w;
	}
	return 0;
}

/* Read one frame while driving progress (the peer may need our progress
 * to finish what it is doing before it writes). */
static int t_sock_recv(struct test_frame *f, int ms)
{
	char *p = (char *)f;
	size_t got = 0;
	int64_t end = t_now_ms() + ms;

	while (got < sizeof(*f)) {
		struct pollfd pfd = { .fd = T.sock, .events = POLLIN };
		int r = poll(&pfd, 1, 1);
		if (r > 0) {
			ssize_t n = read(T.sock, p + got, sizeof(*f) - got);
			if (n == 0)
				return -1; /* peer gone */
			if (n < 0 && errno != EINTR)
				return -1;
			if (n > 0)
				got += (size_t)n;
			continue;
		}
		t_progress();
		if (t_now_ms() > end)
			return -1;
	}
	return 0;
}

/* Rendezvous with the peer inside a subtest. */
int t_sync(void)
{
	struct test_frame f = { .kind = FR_SYNC, .test = T.test,
				.step = ++T.step };
	struct test_frame in;

	if (T.failed)
		return -1;
	if (t_sock_send(&f))
		return t_fail("control socket write failed");
	if (t_sock_recv(&in, T_SOCK_MS))
		return t_fail("sync %u: peer did not answer", T.step);
	if (in.kind == FR_REPORT && in.test == T.test) {
		T.pending = in;
		T.have_pending = 1;
		return t_fail("peer gave up: %s", in.text);
	}
	if (in.kind != FR_SYNC || in.test != T.test || in.step != T.step)
		return t_fail("sync %u: out of step with peer (%u/%u/%u)",
			      T.step, in.kind, in.test, in.step);
	return 0;
}

/* Cancel receives still posted by a failed subtest, so later completions
 * find no dangling expectations and later messages no stale buffers. */
static void t_cleanup(void)
{
	int any = 0;
	for (int i = 0; i < T.nops; i++)
		if (T.ops[i].posted_rx && T.ops[i].n == 0) {
			fi_cancel(&T.ep->fid, &T.ops[i].fctx);
			if (T.ep2)
				fi_cancel(&T.ep2->fid, &T.ops[i].fctx);
			any = 1;
		}
	if (any || T.failed)
		t_spin(100);
}

static void t_report(const char *name)
{
	struct test_frame mine = { .kind = FR_REPORT, .test = T.test,
				   .ok = !T.failed };
	struct test_frame peer;
	int got = 0;

	t_cleanup();
	snprintf(mine.text, sizeof(mine.text), "%s", T.failed ? T.why : "");
	if (t_sock_send(&mine) == 0) {
		if (T.have_pending && T.pending.test == T.test) {
			peer = T.pending;
			got = 1;
		}
		while (!got && t_sock_recv(&peer, T_SOCK_MS) == 0) {
			if (peer.kind == FR_REPORT && peer.test == T.test)
				got = 1; /* stale SYNC frames are skipped */
		}
	}
	T.have_pending = 0;
	if (T.side == 1)
		return;
	if (!got) {
		snprintf(peer.text, sizeof(peer.text), "no report from B");
		peer.ok = 0;
	}
	/* B merely following A's lead adds nothing to A's reason. */
	if (!mine.ok && !peer.ok && !strncmp(peer.text, "peer gave up", 12))
		peer.ok = 1;
	if (mine.ok && peer.ok) {
		T.npass++;
		printf("ok - %s\n", name);
	} else {
		T.nfail++;
		printf("not ok - %s:%s%s%s%s\n", name, mine.ok ? "" : " A: ",
		       mine.ok ? "" : mine.text, peer.ok ? "" : " B: ",
		       peer.ok ? "" : peer.text);
	}
	fflush(stdout);
}

/* ---- setup ---------------------------------------------------------------- */

static struct fi_info *t_hints(uint64_t extra_caps)
{
	struct fi_info *h = fi_allocinfo();
	if (!h)
		return NULL;
	h->caps = FI_TAGGED | FI_MSG | FI_DIRECTED_RECV | extra_caps;
	h->mode = FI_CONTEXT | FI_CONTEXT2;
	h->ep_attr->type = FI_EP_RDM;
	h->domain_attr->control_progress = FI_PROGRESS_MANUAL;
	h->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	h->domain_attr->threading = FI_THREAD_DOMAIN;
	h->domain_attr->av_type = FI_AV_TABLE;
	h->domain_attr->mr_mode = 0;
	h->fabric_attr->prov_name = strdup(T.prov);
	return h;
}

static int t_getinfo(void)
{
	/* Ask for the most first, then drop optional capabilities so a
	 * provider without them still runs the rest of the suite. */
	static const uint64_t tries[] = { FI_SOURCE | FI_MULTI_RECV,
					  FI_SOURCE, FI_MULTI_RECV, 0 };
	for (size_t i = 0; i < sizeof(tries) / sizeof(tries[0]); i++) {
		struct fi_info *h = t_hints(tries[i]);
		int ret;
		if (!h)
			return -FI_ENOMEM;
		ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &T.info);
		fi_freeinfo(h);
		if (ret == 0) {
			T.have_source = !!(T.info->caps & FI_SOURCE);
			T.have_multi = !!(T.info->caps & FI_MULTI_RECV);
			return 0;
		}
	}
	return -FI_ENODATA;
}

static int t_open_ep(struct fid_ep **ep)
{
	int ret = fi_endpoint(T.domain, T.info, ep, NULL);
	if (ret)
		return ret;
	if ((ret = fi_ep_bind(*ep, &T.av->fid, 0)) ||
	    (ret = fi_ep_bind(*ep, &T.cq->fid, FI_TRANSMIT | FI_RECV)))
		return ret;
	if (T.have_multi && !T.setopt_crash) {
		/* Release a multi-recv buffer once less than 4 KiB is left. */
		size_t min = 4096;
		ret = fi_setopt(&(*ep)->fid, FI_OPT_ENDPOINT,
				FI_OPT_MIN_MULTI_RECV, &min, sizeof(min));
		if (ret) {
			fprintf(stderr, "# FI_OPT_MIN_MULTI_RECV: %s; "
				"skipping multi-recv\n", fi_strerror(-ret));
			T.have_multi = 0;
		}
	}
	return fi_enable(*ep);
}

/* Some providers crash in fi_setopt (libfabric 1.17 shm does).  Try it in
 * a throw-away process first so a crash becomes a failed subtest, not a
 * dead suite. */
static void t_probe_setopt(void)
{
	pid_t pid = fork();
	int st = 0;

	if (pid == 0) {
		alarm(30);
		if (t_getinfo() || !T.have_multi ||
		    fi_fabric(T.info->fabric_attr, &T.fabric, NULL) ||
		    fi_domain(T.fabric, T.info, &T.domain, NULL) ||
		    fi_endpoint(T.domain, T.info, &T.ep, NULL))
			_exit(0);
		size_t min = 4096;
		fi_setopt(&T.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV,
			  &min, sizeof(min));
		_exit(0);
	}
	/* libfabric's own SIGSEGV handler may turn the signal into an exit
	 * code, so anything but a clean exit counts. */
	if (pid > 0 && waitpid(pid, &st, 0) == pid &&
	    (!WIFEXITED(st) || WEXITSTATUS(st) != 0)) {
		printf("# fi_setopt(FI_OPT_MIN_MULTI_RECV) killed a probe "
		       "process (status %#x)\n", st);
		T.setopt_crash = 1;
	}
}

static int t_setup(void)
{
	struct fi_cq_attr cqa = { .format = FI_CQ_FORMAT_TAGGED,
				  .size = 4096 };
	struct fi_av_attr ava = { .type = FI_AV_TABLE, .count = 8 };
	char name[2][256];
	size_t nlen[2] = { sizeof(name[0]), sizeof(name[1]) };
	struct { uint32_t n; size_t len[2]; char name[2][256]; } out, in;
	int ret;

	if ((ret = t_getinfo()))
		return ret;
	T.max_msg = T.info->ep_attr->max_msg_size;
	T.inject = T.info->tx_attr->inject_size;
	T.iov_limit = T.info->tx_attr->iov_limit < T.info->rx_attr->iov_limit ?
		T.info->tx_attr->iov_limit : T.info->rx_attr->iov_limit;
	T.cq_data = T.info->domain_attr->cq_data_size;
	if ((ret = fi_fabric(T.info->fabric_attr, &T.fabric, NULL)) ||
	    (ret = fi_domain(T.fabric, T.info, &T.domain, NULL)) ||
	    (ret = fi_av_open(T.domain, &ava, &T.av, NULL)) ||
	    (ret = fi_cq_open(T.domain, &cqa, &T.cq, NULL)) ||
	    (ret = t_open_ep(&T.ep)))
		return ret;
	if (T.side == 1 && (ret = t_open_ep(&T.ep2)))
		return ret;
	if ((ret = fi_getname(&T.ep->fid, name[0], &nlen[0])))
		return ret;
	if (T.ep2 && (ret = fi_getname(&T.ep2->fid, name[1], &nlen[1])))
		return ret;
	memset(&out, 0, sizeof(out));
	out.n = T.ep2 ? 2 : 1;
	for (uint32_t i = 0; i < out.n; i++) {
		out.len[i] = nlen[i];
		memcpy(out.name[i], name[i], nlen[i]);
	}
	if (write(T.sock, &out, sizeof(out)) != (ssize_t)sizeof(out) ||
	    read(T.sock, &in, sizeof(in)) != (ssize_t)sizeof(in))
		return -FI_EIO;
	if (fi_av_insert(T.av, in.name[0], 1, &T.peer, 0, NULL) != 1)
		return -FI_EADDRNOTAVAIL;
	if (in.n > 1 &&
	    fi_av_insert(T.av, in.name[1], 1, &T.peer2, 0, NULL) != 1)
		return -FI_EADDRNOTAVAIL;
	T.sbuf = calloc(1, T_BUFSZ);
	T.rbuf = calloc(1, T_BUFSZ);
	T.rbuf2 = calloc(1, T_BUFSZ);
	if (!T.sbuf || !T.rbuf || !T.rbuf2)
		return -FI_ENOMEM;
	return 0;
}

/* ---- helpers for subtests --------------------------------------------- */

/* Every protocol threshold of a provider like opx +-1: 16 B inline,
 * 8 KiB MTU (one packet), 16 KiB eager maximum (rendezvous above), 32 KiB
 * split copy, then
 * a few MiB sizes up to 64 MiB where a rendezvous is many SDMA requests
 * or CMA iovecs.  Sizes a provider cannot send are skipped. */
const size_t t_sweep[] = {
	0,	   1,	      15,	 16,	       17,	     63,
	64,	   65,	      4095,	 4096,	       4097,	     8191,
	8192,	   8193,      16383,	 16384,	       16385,	     32767,
	32768,	   32769,     65535,
	65536,	   65537,     T_MIB - 1, T_MIB,	       T_MIB + 1,    4 * T_MIB + 3,
	16 * T_MIB, 64 * T_MIB - 1, 64 * T_MIB,
};
const size_t t_nsweep = sizeof(t_sweep) / sizeof(t_sweep[0]);

int t_size_ok(size_t len)
{
	return len <= T.max_msg && len + 1 < T_BUFSZ;
}

/* Check a receive completion: success, length, tag, flags, data. */
int t_check_rx(struct test_op *op, int idx, size_t len, uint64_t tag,
		      uint64_t flags, const void *buf, uint32_t seed,
		      const char *what)
{
	struct fi_cq_tagged_entry *e = &op->ent[idx];
	long bad;

	T_CHECK(op->nerr == 0, "%s len %zu: error completion %s (olen %zu)",
		what, len, fi_strerror(op->err.err), op->err.olen);
	T_CHECK(e->len == len, "%s: cq len %zu, want %zu", what, e->len, len);
	T_CHECK(!(flags & FI_TAGGED) || e->tag == tag,
		"%s len %zu: cq tag %#lx, want %#lx", what, len,
		(unsigned long)e->tag, (unsigned long)tag);
	T_CHECK((e->flags & flags) == flags, "%s len %zu: cq flags %#lx lack "
		"%#lx", what, len, (unsigned long)e->flags,
		(unsigned long)flags);
	bad = t_verify(buf, len, seed);
	T_CHECK(bad < 0, "%s len %zu: data mismatch at offset %ld", what, len,
		bad);
	T_CHECK(((const unsigned char *)buf)[len] == 0xee,
		"%s len %zu: receive wrote past the message", what, len);
	return 0;
}

/* Post a receive into T.rbuf (tagged or msg). */
struct test_op *t_post_rx(int tagged, size_t buflen, uint64_t tag,
				 uint64_t ignore, fi_addr_t src)
{
	struct test_op *op = t_op();
	ssize_t ret;

	memset(T.rbuf, 0xee, buflen + 1);
	if (tagged)
		T_POST(ret, fi_trecv(T.ep, T.rbuf, buflen, NULL, src, tag,
				     ignore, &op->fctx));
	else
		T_POST(ret, fi_recv(T.ep, T.rbuf, buflen, NULL, src,
				    &op->fctx));
	if (ret) {
		t_fail("%s(%zu) returned %s", tagged ? "fi_trecv" : "fi_recv",
		       buflen, fi_strerror((int)-ret));
		return NULL;
	}
	op->posted_rx = 1;
	return op;
}

/* kind: 0 tsend, 1 send, 2 tsenddata, 3 senddata */
struct test_op *t_post_tx(struct fid_ep *ep, int kind, size_t len,
				 uint64_t tag, uint64_t data, uint32_t seed)
{
	struct test_op *op = t_op();
	ssize_t ret;

	t_fill(T.sbuf, len, seed);
	switch (kind) {
	case 0:
		T_POST(ret, fi_tsend(ep, T.sbuf, len, NULL, T.peer, tag,
				     &op->fctx));
		break;
	case 1:
		T_POST(ret, fi_send(ep, T.sbuf, len, NULL, T.peer, &op->fctx));
		break;
	case 2:
		T_POST(ret, fi_tsenddata(ep, T.sbuf, len, NULL, data, T.peer,
					 tag, &op->fctx));
		break;
	default:
		T_POST(ret, fi_senddata(ep, T.sbuf, len, NULL, data, T.peer,
					&op->fctx));
		break;
	}
	if (ret) {
		t_fail("send kind %d len %zu returned %s", kind, len,
		       fi_strerror((int)-ret));
		return NULL;
	}
	return op;
}

int t_wait_tx(struct test_op *op, size_t len)
{
	T_CHECK(t_wait(op, 1, T_WAIT_MS) == 0,
		"send len %zu: no send completion", len);
	T_CHECK(op->nerr == 0, "send len %zu: error completion %s", len,
		fi_strerror(op->err.err));
	T_CHECK(op->ent[0].flags & FI_SEND, "send len %zu: flags %#lx lack "
		"FI_SEND", len, (unsigned long)op->ent[0].flags);
	return 0;
}

/* One message B -> A; expected = receive posted before the send. */
int t_one(int kind, size_t len, int expected, uint32_t seed)
{
	int tagged = kind == 0 || kind == 2;
	int withdata = kind >= 2;
	uint64_t tag = T_TAGBASE(T.test) | (seed & 0xffff);
	uint64_t data = (0x5eed0000u + seed) &
		(T.cq_data >= 8 ? ~0ull : (1ull << (8 * T.cq_data)) - 1);
	uint64_t flags = FI_RECV | (tagged ? FI_TAGGED : FI_MSG) |
			 (withdata ? FI_REMOTE_CQ_DATA : 0);
	struct test_op *op = NULL;
	const char *what = kind == 0 ? "tsend" : kind == 1 ? "send" :
			   kind == 2 ? "tsenddata" : "senddata";

	if (T.side == 0 && expected && !(op = t_post_rx(tagged, len, tag, 0,
							 T.peer)))
		return -1;
	if (t_sync())
		return -1;
	if (T.side == 1) {
		if (!(op = t_post_tx(T.ep, kind, len, tag, data, seed)))
			return -1;
		if (t_sync() || t_wait_tx(op, len))
			return -1;
		return t_sync();
	}
	if (t_sync())
		return -1;
	if (!expected) {
		t_spin(2); /* let the message arrive unexpected */
		if (!(op = t_post_rx(tagged, len, tag, 0, T.peer)))
			return -1;
	}
	T_CHECK(t_wait(op, 1, T_WAIT_MS) == 0, "%s len %zu (%s): no receive "
		"completion", what, len, expected ? "expected" : "unexpected");
	if (t_check_rx(op, 0, len, tag, flags, T.rbuf, seed, what))
		return -1;
	T_CHECK(!withdata || op->ent[0].data == data, "%s len %zu: cq data "
		"%#lx, want %#lx", what, len, (unsigned long)op->ent[0].data,
		(unsigned long)data);
	T_CHECK(!T.have_source || op->src[0] == T.peer, "%s: FI_SOURCE "
		"address %lu, want %lu", what, (unsigned long)op->src[0],
		(unsigned long)T.peer);
	return t_sync();
}

int t_sweep_kind(int kind)
{
	for (size_t i = 0; i < t_nsweep; i++) {
		if (!t_size_ok(t_sweep[i]))
			continue;
		for (int expected = 1; expected >= 0; expected--)
			if (t_one(kind, t_sweep[i], expected,
				  (uint32_t)(i * 2 + (size_t)expected +
					     (size_t)kind * 64)))
				return -1;
	}
	if (T.max_msg < 65537 && t_size_ok(T.max_msg))
		return t_one(kind, T.max_msg, 1, 999);
	return 0;
}

ssize_t t_trecvmsg(void *buf, size_t len, uint64_t tag,
			  struct test_op *op, uint64_t flags)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct fi_msg_tagged m = { .msg_iov = buf ? &iov : NULL,
				   .iov_count = buf ? 1 : 0,
				   .addr = T.peer, .tag = tag, .ignore = 0,
				   .context = &op->fctx };
	ssize_t ret;
	T_POST(ret, fi_trecvmsg(T.ep, &m, flags | FI_COMPLETION));
	return ret;
}

/* Peek until the message shows up (it may still be in flight). */
int t_peek(uint64_t tag, uint64_t flags, struct test_op **opp)
{
	int64_t end = t_now_ms() + T_WAIT_MS;
	for (;;) {
		struct test_op *op = t_op();
		ssize_t ret = t_trecvmsg(NULL, 0, tag, op, FI_PEEK | flags);
		T_CHECK(ret == 0, "fi_trecvmsg(FI_PEEK): %s",
			fi_strerror((int)-ret));
		T_CHECK(t_wait(op, 1, T_WAIT_MS) == 0,
			"FI_PEEK produced no completion");
		if (op->nerr == 0) {
			*opp = op;
			return 0;
		}
		T_CHECK(op->err.err == FI_ENOMSG, "FI_PEEK error %s, want "
			"FI_ENOMSG or success", fi_strerror(op->err.err));
		T_CHECK(op->err.op_context == &op->fctx, "FI_ENOMSG entry has "
			"the wrong op_context");
		T_CHECK(t_now_ms() < end, "FI_PEEK: message never found");
		t_spin(1);
	}
}

/* Split total into n parts in proportion to w (every part >= 1 when
 * total >= the sum of w). */
void t_split(size_t total, size_t n, const unsigned *w, size_t *out)
{
	size_t sum = 0, acc = 0;

	for (size_t i = 0; i < n; i++)
		sum += w[i];
	for (size_t i = 0; i + 1 < n; i++) {
		out[i] = total / sum * w[i] + (total % sum) * w[i] / sum;
		if (!out[i])
			out[i] = 1;
		acc += out[i];
	}
	out[n - 1] = total - acc;
}

/* Lay out n entries of len[] in buf with gap bytes between them (odd
 * start, odd gaps: no entry is aligned), gap bytes set to fill.  Returns
 * the bytes spanned. */
size_t t_layout(char *buf, size_t n, const size_t *len,
		       struct iovec *iov, size_t gap, int fill)
{
	size_t off = 1;

	memset(buf, fill, 1);
	for (size_t i = 0; i < n; i++) {
		iov[i].iov_base = buf + off;
		iov[i].iov_len = len[i];
		off += len[i];
		memset(buf + off, fill, gap);
		off += gap;
	}
	return off;
}

/* The child kills itself while A has a receive posted; A must come back
 * within a bounded time.  Run last: B is gone afterwards. */
static void t_peer_death(pid_t child)
{
	uint64_t tag = T_TAGBASE(T.test);
	struct test_op *op;
	int st = 0;
	int64_t t0;
	const char *res;

	if (T.side == 1) {
		if (t_sync() == 0)
			kill(getpid(), SIGKILL);
		_exit(3);
	}
	T.failed = 0;
	op = t_post_rx(1, 1000, tag, 0, T.peer);
	if (!op || t_sync()) {
		printf("not ok - peer death: setup failed: %s\n", T.why);
		T.nfail++;
		return;
	}
	t0 = t_now_ms();
	if (waitpid(child, &st, 0) != child || !WIFSIGNALED(st)) {
		printf("not ok - peer death: child did not die by signal\n");
		T.nfail++;
		return;
	}
	t_wait(op, 1, 5000);
	if (op->n == 0) {
		int ret = fi_cancel(&T.ep->fid, &op->fctx);
		t_wait(op, 1, 2000);
		res = ret == 0 && op->nerr && op->err.err == FI_ECANCELED ?
			"no completion in 5 s; receive cancelled cleanly" :
			"no completion in 5 s; cancel did not complete";
	} else {
		res = op->nerr ? "receive failed with an error completion" :
				 "receive completed (unexpected)";
	}
	printf("ok - peer death: parent did not hang (%lld ms): %s\n",
	       (long long)(t_now_ms() - t0), res);
	T.npass++;
}

static void t_on_alarm(int sig)
{
	static const char m[] = "Bail out! opx_fi_test: global timeout\n";
	(void)sig;
	if (write(1, m, sizeof(m) - 1) < 0) {
		/* nothing to do */
	}
	_exit(2);
}

int main(int argc, char **argv)
{
	int sv[2], opt, ret;
	const char *only = NULL;
	pid_t child;

	T.prov = "opx";
	while ((opt = getopt(argc, argv, "p:t:vh")) != -1) {
		switch (opt) {
		case 'p':
			T.prov = optarg;
			break;
		case 't':
			only = optarg;
			break;
		case 'v':
			T.verbose = 1;
			break;
		default:
			fprintf(stderr, "usage: %s [-p provider] [-t N,M..] "
				"[-v]\n", argv[0]);
			return opt == 'h' ? 0 : 1;
		}
	}
	signal(SIGALRM, t_on_alarm);
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	t_probe_setopt();
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
		perror("socketpair");
		return 1;
	}
	child = fork();
	if (child < 0) {
		perror("fork");
		return 1;
	}
	T.side = child == 0;
	T.sock = sv[T.side];
	close(sv[!T.side]);
	alarm(T_ALARM_S);

	ret = t_setup();
	if (ret) {
		fprintf(stderr, "Bail out! side %c: setup with provider %s "
			"failed: %s\n", 'A' + T.side, T.prov,
			fi_strerror(-ret));
		if (T.side == 0)
			waitpid(child, NULL, 0);
		return 1;
	}
	if (T.side == 0)
		printf("# provider %s (%s): max_msg_size %zu inject_size %zu "
		       "iov_limit %zu cq_data_size %zu FI_SOURCE %s "
		       "FI_MULTI_RECV %s\n", T.info->fabric_attr->prov_name,
		       T.info->fabric_attr->name, T.max_msg, T.inject,
		       T.iov_limit, T.cq_data, T.have_source ? "yes" : "no",
		       T.have_multi ? "yes" : "no");
	for (unsigned i = 0; i < t_ntests; i++) {
		char num[16];
		snprintf(num, sizeof(num), ",%u,", i + 1);
		if (only) {
			char list[256];
			snprintf(list, sizeof(list), ",%s,", only);
			if (!strstr(list, num))
				continue;
		}
		if (t_tests[i].need_multi && T.setopt_crash) {
			if (T.side == 0) {
				printf("not ok - %s: fi_setopt(FI_OPT_MIN_"
				       "MULTI_RECV) crashes the provider\n",
				       t_tests[i].name);
				T.nfail++;
			}
			continue;
		}
		if (t_tests[i].need_multi && !T.have_multi) {
			if (T.side == 0)
				printf("ok - %s # SKIP provider does not "
				       "advertise FI_MULTI_RECV\n",
				       t_tests[i].name);
			continue;
		}
		T.test = i + 1;
		T.step = 0;
		T.failed = 0;
		T.nops = 0;
		t_tests[i].fn();
		t_report(t_tests[i].name);
	}
	T.test = t_ntests + 1;
	T.step = 0;
	T.failed = 0;
	T.nops = 0;
	t_peer_death(child);
	printf("%d passed, %d failed\n", T.npass, T.nfail);
	/* Close before exiting: fi_close on a peer-less endpoint must not
	 * hang either (alarm still armed). */
	fi_close(&T.ep->fid);
	fi_close(&T.cq->fid);
	fi_close(&T.av->fid);
	fi_close(&T.domain->fid);
	fi_close(&T.fabric->fid);
	fi_freeinfo(T.info);
	return T.nfail ? 1 : 0;
}
