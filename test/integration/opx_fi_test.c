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
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#define T_ALARM_S 300
#define T_WAIT_MS 10000 /* one completion */
#define T_SOCK_MS 30000 /* one control frame */
#define T_NOPS 2048
#define T_MAXENT 8
#define T_BUFSZ (1u << 20)
#define T_TAGBASE(n) ((uint64_t)(n) << 32)

struct test_op {
	struct fi_context2 fctx; /* must be first: it is the op_context */
	int posted_rx;
	int n; /* completions seen (success or error) */
	int nerr;
	struct fi_cq_tagged_entry ent[T_MAXENT];
	fi_addr_t src[T_MAXENT];
	struct fi_cq_err_entry err;
};

enum { FR_SYNC = 1, FR_REPORT = 2 };
struct test_frame {
	uint32_t kind;
	uint32_t test;
	uint32_t step;
	int32_t ok;
	char text[240];
};

static struct {
	const char *prov;
	int side; /* 0 = A (parent), 1 = B (child) */
	int sock;
	int verbose;
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep, *ep2;
	fi_addr_t peer, peer2; /* peer2: B's second endpoint (A only) */
	int have_source, have_multi;
	int setopt_crash; /* fi_setopt killed a throw-away probe process */
	size_t max_msg, inject, iov_limit, cq_data;
	struct test_op ops[T_NOPS];
	int nops;
	char *sbuf, *rbuf, *rbuf2;
	/* per-subtest state */
	unsigned test;
	unsigned step;
	int failed;
	char why[240];
	int have_pending;
	struct test_frame pending;
	int npass, nfail;
} T;

static int64_t t_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Record the first failure of the running subtest; returns -1 so callers
 * can write "return t_fail(...)". */
__attribute__((format(printf, 1, 2)))
static int t_fail(const char *fmt, ...)
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

#define T_CHECK(cond, ...)                                                    \
	do {                                                                  \
		if (!(cond))                                                  \
			return t_fail(__VA_ARGS__);                           \
	} while (0)

static unsigned char t_byte(uint32_t seed, size_t off)
{
	uint32_t v = seed * 2654435761u + (uint32_t)off * 251u +
		     (uint32_t)(off >> 8) * 17u;
	return (unsigned char)(v ^ (v >> 11));
}

static void t_fill(void *buf, size_t len, uint32_t seed)
{
	unsigned char *p = buf;
	for (size_t i = 0; i < len; i++)
		p[i] = t_byte(seed, i);
}

static long t_verify(const void *buf, size_t len, uint32_t seed)
{
	const unsigned char *p = buf;
	for (size_t i = 0; i < len; i++)
		if (p[i] != t_byte(seed, i))
			return (long)i;
	return -1;
}

static struct test_op *t_op(void)
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

static void t_progress(void)
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
static int t_wait(struct test_op *op, int n, int ms)
{
	int64_t end = t_now_ms() + ms;
	while (op->n < n) {
		t_progress();
		if (t_now_ms() > end)
			return -1;
	}
	return 0;
}

static void t_spin(int ms)
{
	int64_t end = t_now_ms() + ms;
	while (t_now_ms() < end)
		t_progress();
}

/* Issue an operation, retrying -FI_EAGAIN after progress, bounded. */
#define T_POST(ret, call)                                                     \
	do {                                                                  \
		int64_t end_ = t_now_ms() + T_WAIT_MS;                        \
		for (;;) {                                                    \
			(ret) = (call);                                       \
			if ((ret) != -FI_EAGAIN || t_now_ms() > end_)         \
				break;                                        \
			t_progress();                                         \
		}                                                             \
	} while (0)

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
static int t_sync(void)
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

static const size_t t_sweep[] = { 0,	 1,	15,    16,    17,    63,
				  64,	 65,	4095,  4096,  4097,  8191,
				  8192,	 8193,	16383, 16384, 16385, 65535,
				  65536, 65537 };
#define T_NSWEEP (sizeof(t_sweep) / sizeof(t_sweep[0]))

static int t_size_ok(size_t len)
{
	return len <= T.max_msg && len + 1 < T_BUFSZ;
}

/* Check a receive completion: success, length, tag, flags, data. */
static int t_check_rx(struct test_op *op, int idx, size_t len, uint64_t tag,
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
static struct test_op *t_post_rx(int tagged, size_t buflen, uint64_t tag,
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
static struct test_op *t_post_tx(struct fid_ep *ep, int kind, size_t len,
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

static int t_wait_tx(struct test_op *op, size_t len)
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
static int t_one(int kind, size_t len, int expected, uint32_t seed)
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

static int t_sweep_kind(int kind)
{
	for (size_t i = 0; i < T_NSWEEP; i++) {
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

/* ---- subtests ---------------------------------------------------------- */

static int st_tagged_sweep(void)
{
	return t_sweep_kind(0);
}

static int st_msg_data_inject(void)
{
	if (t_sweep_kind(1))
		return -1;
	if (T.cq_data && (t_sweep_kind(2) || t_sweep_kind(3)))
		return -1;
	/* inject variants: no send completion, receive as usual */
	size_t sizes[] = { 0, 1, T.inject / 2, T.inject };
	for (int k = 0; k < 4; k++) {
		if (k >= 2 && !T.cq_data)
			break;
		for (size_t s = 0; s < 4; s++) {
			size_t len = sizes[s];
			if (len > T.inject)
				continue;
			uint32_t seed = 500u + (uint32_t)(k * 8 + (int)s);
			uint64_t tag = T_TAGBASE(T.test) | seed;
			uint64_t data = 0xd0d0u + seed;
			int tagged = k == 0 || k == 2;
			struct test_op *op = NULL;
			ssize_t ret;

			if (T.side == 0 &&
			    !(op = t_post_rx(tagged, len, tag, 0, T.peer)))
				return -1;
			if (t_sync())
				return -1;
			if (T.side == 1) {
				t_fill(T.sbuf, len, seed);
				if (k == 0)
					T_POST(ret, fi_tinject(T.ep, T.sbuf,
						len, T.peer, tag));
				else if (k == 1)
					T_POST(ret, fi_inject(T.ep, T.sbuf, len,
						T.peer));
				else if (k == 2)
					T_POST(ret, fi_tinjectdata(T.ep, T.sbuf,
						len, data, T.peer, tag));
				else
					T_POST(ret, fi_injectdata(T.ep, T.sbuf,
						len, data, T.peer));
				/* the source buffer is reusable at once */
				memset(T.sbuf, 0, len);
				T_CHECK(ret == 0, "inject kind %d len %zu: %s",
					k, len, fi_strerror((int)-ret));
				if (t_sync())
					return -1;
				continue;
			}
			T_CHECK(t_wait(op, 1, T_WAIT_MS) == 0, "inject kind %d "
				"len %zu: no receive completion", k, len);
			if (t_check_rx(op, 0, len, tag, FI_RECV |
				       (k >= 2 ? FI_REMOTE_CQ_DATA : 0),
				       T.rbuf, seed, "inject"))
				return -1;
			T_CHECK(k < 2 || op->ent[0].data == data,
				"injectdata: cq data %#lx want %#lx",
				(unsigned long)op->ent[0].data,
				(unsigned long)data);
			if (t_sync())
				return -1;
		}
	}
	return 0;
}

static int st_iov(void)
{
	size_t lim = T.iov_limit > 8 ? 8 : T.iov_limit;

	T_CHECK(lim >= 1, "iov_limit is 0");
	for (size_t n = 2; n <= lim; n++) {
		for (int tagged = 0; tagged < 2; tagged++) {
			struct iovec iov[8];
			size_t total = 0, off = 0;
			uint32_t seed = 700u + (uint32_t)(n * 2) +
					(uint32_t)tagged;
			uint64_t tag = T_TAGBASE(T.test) | seed;
			struct test_op *op = t_op();
			ssize_t ret;

			/* Sender and receiver split differently, so data must
			 * be scattered across entry boundaries. */
			for (size_t i = 0; i < n; i++) {
				size_t part = T.side ? 1000 + i * 777 :
						       1500 + (n - i) * 600;
				iov[i].iov_base = (T.side ? T.sbuf : T.rbuf) +
						  off;
				iov[i].iov_len = part;
				off += part + (T.side ? 0 : 3);
				total += part;
			}
			if (T.side == 1) {
				size_t want = 0;
				for (size_t i = 0; i < n; i++)
					want += 1000 + i * 777;
				t_fill(T.sbuf, want, seed);
				if (t_sync())
					return -1;
				if (tagged)
					T_POST(ret, fi_tsendv(T.ep, iov, NULL,
						n, T.peer, tag, &op->fctx));
				else
					T_POST(ret, fi_sendv(T.ep, iov, NULL, n,
						T.peer, &op->fctx));
				T_CHECK(ret == 0, "sendv n=%zu: %s", n,
					fi_strerror((int)-ret));
				if (t_wait_tx(op, want) || t_sync())
					return -1;
				continue;
			}
			memset(T.rbuf, 0xee, off + 1);
			if (tagged)
				T_POST(ret, fi_trecvv(T.ep, iov, NULL, n,
					T.peer, tag, 0, &op->fctx));
			else
				T_POST(ret, fi_recvv(T.ep, iov, NULL, n, T.peer,
					&op->fctx));
			T_CHECK(ret == 0, "recvv n=%zu: %s", n,
				fi_strerror((int)-ret));
			op->posted_rx = 1;
			if (t_sync())
				return -1;
			T_CHECK(t_wait(op, 1, T_WAIT_MS) == 0,
				"recvv n=%zu: no completion", n);
			T_CHECK(op->nerr == 0, "recvv n=%zu: error %s", n,
				fi_strerror(op->err.err));
			{
				size_t want = 0;
				for (size_t i = 0; i < n; i++)
					want += 1000 + i * 777;
				T_CHECK(op->ent[0].len == want, "recvv n=%zu: "
					"len %zu want %zu", n,
					op->ent[0].len, want);
				if (want > total)
					return t_fail("test bug: iov too small");
				size_t pos = 0;
				for (size_t i = 0; i < n && pos < want; i++) {
					unsigned char *b = iov[i].iov_base;
					for (size_t j = 0; j < iov[i].iov_len &&
					     pos < want; j++, pos++)
						T_CHECK(b[j] == t_byte(seed, pos),
							"%s n=%zu: byte %zu "
							"(iov %zu+%zu) wrong",
							tagged ? "trecvv" :
							"recvv", n, pos, i, j);
				}
			}
			if (t_sync())
				return -1;
		}
	}
	return 0;
}

static int st_match(void)
{
	uint64_t base = T_TAGBASE(T.test);
	struct test_op *wild, *exact, *fromb2, *fromb1, *any;
	ssize_t ret;

	if (T.side == 1) {
		struct test_op *o[4];
		if (t_sync())
			return -1;
		/* matched by exact tag, then by the ignore-bits receive */
		o[0] = t_post_tx(T.ep, 0, 10, base | 0x3400, 0, 1);
		if (!o[0] || t_wait_tx(o[0], 10))
			return -1;
		o[1] = t_post_tx(T.ep, 0, 11, base | 0x12ab, 0, 2);
		if (!o[1] || t_wait_tx(o[1], 11) || t_sync() || t_sync())
			return -1;
		/* directed receive: same tag from the second endpoint first */
		o[2] = t_post_tx(T.ep2, 0, 12, base | 0x77, 0, 3);
		if (!o[2] || t_wait_tx(o[2], 12))
			return -1;
		o[3] = t_post_tx(T.ep, 0, 13, base | 0x77, 0, 4);
		if (!o[3] || t_wait_tx(o[3], 13))
			return -1;
		o[0] = t_post_tx(T.ep2, 0, 14, base | 0x78, 0, 5);
		if (!o[0] || t_wait_tx(o[0], 14))
			return -1;
		return t_sync();
	}
	/* Separate buffers: several receives are posted at once. */
	wild = t_op();
	exact = t_op();
	memset(T.rbuf, 0xee, 4096);
	T_POST(ret, fi_trecv(T.ep, T.rbuf, 100, NULL, T.peer, base | 0x1200,
			     0xff, &wild->fctx));
	T_CHECK(ret == 0, "trecv: %s", fi_strerror((int)-ret));
	wild->posted_rx = 1;
	T_POST(ret, fi_trecv(T.ep, T.rbuf + 1024, 100, NULL, T.peer,
			     base | 0x3400, 0, &exact->fctx));
	T_CHECK(ret == 0, "trecv: %s", fi_strerror((int)-ret));
	exact->posted_rx = 1;
	if (t_sync() || t_sync())
		return -1;
	T_CHECK(t_wait(exact, 1, T_WAIT_MS) == 0 &&
		t_wait(wild, 1, T_WAIT_MS) == 0, "ignore bits: receives did "
		"not complete (exact %d, wild %d)", exact->n, wild->n);
	T_CHECK(exact->nerr == 0 && exact->ent[0].len == 10 &&
		exact->ent[0].tag == (base | 0x3400), "exact-tag receive got "
		"len %zu tag %#lx", exact->ent[0].len,
		(unsigned long)exact->ent[0].tag);
	T_CHECK(wild->nerr == 0 && wild->ent[0].len == 11 &&
		wild->ent[0].tag == (base | 0x12ab), "ignore-bits receive got "
		"len %zu tag %#lx (want the sender's full tag %#lx)",
		wild->ent[0].len, (unsigned long)wild->ent[0].tag,
		(unsigned long)(base | 0x12ab));
	T_CHECK(t_verify(T.rbuf + 1024, 10, 1) < 0 && t_verify(T.rbuf, 11, 2) < 0,
		"ignore bits: data mismatch");

	fromb2 = t_op();
	fromb1 = t_op();
	any = t_op();
	/* posted: (B1, 0x77) first, then (B2, 0x77), then (any, 0x78) */
	T_POST(ret, fi_trecv(T.ep, T.rbuf2, 100, NULL, T.peer, base | 0x77, 0,
			     &fromb1->fctx));
	T_CHECK(ret == 0, "trecv: %s", fi_strerror((int)-ret));
	fromb1->posted_rx = 1;
	T_POST(ret, fi_trecv(T.ep, T.rbuf2 + 1024, 100, NULL, T.peer2,
			     base | 0x77, 0, &fromb2->fctx));
	T_CHECK(ret == 0, "trecv: %s", fi_strerror((int)-ret));
	fromb2->posted_rx = 1;
	T_POST(ret, fi_trecv(T.ep, T.rbuf2 + 2048, 100, NULL, FI_ADDR_UNSPEC,
			     base | 0x78, 0, &any->fctx));
	T_CHECK(ret == 0, "trecv: %s", fi_strerror((int)-ret));
	any->posted_rx = 1;
	if (t_sync())
		return -1;
	T_CHECK(t_wait(fromb1, 1, T_WAIT_MS) == 0 &&
		t_wait(fromb2, 1, T_WAIT_MS) == 0 &&
		t_wait(any, 1, T_WAIT_MS) == 0, "directed: receives did not "
		"complete (%d %d %d)", fromb1->n, fromb2->n, any->n);
	T_CHECK(fromb2->nerr == 0 && fromb2->ent[0].len == 12,
		"directed receive from B2 got len %zu (want 12: message from "
		"the other source matched it)", fromb2->ent[0].len);
	T_CHECK(fromb1->nerr == 0 && fromb1->ent[0].len == 13,
		"directed receive from B1 got len %zu, want 13",
		fromb1->ent[0].len);
	T_CHECK(any->nerr == 0 && any->ent[0].len == 14,
		"FI_ADDR_UNSPEC receive got len %zu, want 14", any->ent[0].len);
	T_CHECK(t_verify(T.rbuf2 + 1024, 12, 3) < 0 &&
		t_verify(T.rbuf2, 13, 4) < 0 &&
		t_verify(T.rbuf2 + 2048, 14, 5) < 0, "directed: data mismatch");
	if (T.have_source) {
		T_CHECK(fromb1->src[0] == T.peer && fromb2->src[0] == T.peer2 &&
			any->src[0] == T.peer2, "FI_SOURCE: addresses %lu %lu "
			"%lu, want %lu %lu %lu", (unsigned long)fromb1->src[0],
			(unsigned long)fromb2->src[0],
			(unsigned long)any->src[0], (unsigned long)T.peer,
			(unsigned long)T.peer2, (unsigned long)T.peer2);
	}
	return t_sync();
}

static ssize_t t_trecvmsg(void *buf, size_t len, uint64_t tag,
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
static int t_peek(uint64_t tag, uint64_t flags, struct test_op **opp)
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

static int st_peek(void)
{
	uint64_t base = T_TAGBASE(T.test);

	for (size_t i = 0; i < T_NSWEEP + 3; i++) {
		/* the last three rounds: claim, discard, nothing there */
		size_t len = i < T_NSWEEP ? t_sweep[i] : 1000;
		uint32_t seed = 900u + (uint32_t)i;
		uint64_t tag = base | seed;
		uint64_t data = T.cq_data ? 0xabcu + i : 0;
		int nmsg = i == T_NSWEEP + 1 ? 2 : i == T_NSWEEP + 2 ? 0 : 1;
		struct test_op *pk = NULL, *rx;
		ssize_t ret;

		if (!t_size_ok(len))
			continue;
		if (T.side == 1) {
			for (int k = 0; k < nmsg; k++) {
				struct test_op *tx = t_post_tx(T.ep,
					T.cq_data ? 2 : 0, len, tag, data,
					seed + (uint32_t)k * 1000u);
				if (!tx)
					return -1;
				if (t_sync() || t_wait_tx(tx, len))
					return -1;
			}
			if (t_sync())
				return -1;
			continue;
		}
		for (int k = 0; k < nmsg; k++)
			if (t_sync())
				return -1;
		if (nmsg == 0) {
			pk = t_op();
			ret = t_trecvmsg(NULL, 0, base | 0xfffff, pk, FI_PEEK);
			T_CHECK(ret == 0, "peek: %s", fi_strerror((int)-ret));
			T_CHECK(t_wait(pk, 1, T_WAIT_MS) == 0, "peek of nothing:"
				" no completion");
			T_CHECK(pk->nerr == 1 && pk->err.err == FI_ENOMSG,
				"peek of nothing: want FI_ENOMSG error entry, "
				"got %s", pk->nerr ? fi_strerror(pk->err.err) :
				"success");
			T_CHECK(pk->err.op_context == &pk->fctx,
				"FI_ENOMSG entry: wrong op_context");
			if (t_sync())
				return -1;
			continue;
		}
		if (t_peek(tag, i == T_NSWEEP ? FI_CLAIM :
			   i == T_NSWEEP + 1 ? FI_DISCARD : 0, &pk))
			return -1;
		/* A discarding peek need not describe the message it drops;
		 * every other peek must report what a receive would. */
		T_CHECK(pk->ent[0].tag == tag && (pk->ent[0].len == len ||
			i == T_NSWEEP + 1), "peek len %zu: reported len %zu "
			"tag %#lx", len, pk->ent[0].len,
			(unsigned long)pk->ent[0].tag);
		T_CHECK(!T.cq_data || pk->ent[0].data == data, "peek len %zu: "
			"data %#lx, want %#lx", len,
			(unsigned long)pk->ent[0].data, (unsigned long)data);
		memset(T.rbuf, 0xee, len + 1);
		if (i == T_NSWEEP) {
			/* claimed: receive with the same context + FI_CLAIM */
			pk->n = 0;
			pk->posted_rx = 1;
			ret = t_trecvmsg(T.rbuf, len, tag, pk, FI_CLAIM);
			T_CHECK(ret == 0, "FI_CLAIM receive: %s",
				fi_strerror((int)-ret));
			rx = pk;
		} else if (i == T_NSWEEP + 1) {
			/* the first was discarded: expect the second */
			rx = t_post_rx(1, len, tag, 0, T.peer);
			seed += 1000u;
		} else {
			/* a peek must leave the message queued */
			rx = t_post_rx(1, len, tag, 0, T.peer);
		}
		if (!rx)
			return -1;
		T_CHECK(t_wait(rx, 1, T_WAIT_MS) == 0, "receive after peek "
			"(len %zu): no completion", len);
		if (t_check_rx(rx, 0, len, tag, FI_TAGGED | FI_RECV, T.rbuf,
			       seed, i == T_NSWEEP ? "claim" :
			       i == T_NSWEEP + 1 ? "after discard" :
			       "after peek"))
			return -1;
		if (t_sync())
			return -1;
	}
	return 0;
}

static int st_cancel(void)
{
	uint64_t tag = T_TAGBASE(T.test) | 1;
	struct test_op *op, *bogus, *rx;
	int ret;

	if (T.side == 1) {
		struct test_op *tx;
		if (t_sync())
			return -1;
		tx = t_post_tx(T.ep, 0, 100, tag, 0, 42);
		if (!tx || t_wait_tx(tx, 100))
			return -1;
		return t_sync();
	}
	op = t_post_rx(1, 100, tag, 0, T.peer);
	if (!op)
		return -1;
	ret = fi_cancel(&T.ep->fid, &op->fctx);
	T_CHECK(ret == 0, "fi_cancel of posted receive: %s",
		fi_strerror(-ret));
	T_CHECK(t_wait(op, 1, T_WAIT_MS) == 0, "cancel: no completion");
	T_CHECK(op->nerr == 1 && op->err.err == FI_ECANCELED, "cancel: want "
		"FI_ECANCELED error entry, got %s",
		op->nerr ? fi_strerror(op->err.err) : "success");
	T_CHECK(op->err.op_context == &op->fctx, "cancel: wrong op_context");
	bogus = t_op();
	ret = fi_cancel(&T.ep->fid, &bogus->fctx);
	T_CHECK(ret == 0 || ret == -FI_ENOENT, "fi_cancel(unknown context) "
		"returned %s", fi_strerror(-ret));
	t_spin(5);
	T_CHECK(bogus->n == 0, "cancel of unknown context produced a "
		"completion");
	/* the endpoint still works and the cancelled buffer stays unused */
	rx = t_op();
	memset(T.rbuf2, 0xee, 101);
	ret = (int)fi_trecv(T.ep, T.rbuf2, 100, NULL, T.peer, tag, 0,
			    &rx->fctx);
	T_CHECK(ret == 0, "trecv after cancel: %s", fi_strerror(-ret));
	rx->posted_rx = 1;
	if (t_sync())
		return -1;
	T_CHECK(t_wait(rx, 1, T_WAIT_MS) == 0, "receive after cancel: no "
		"completion");
	if (t_check_rx(rx, 0, 100, tag, FI_TAGGED | FI_RECV, T.rbuf2, 42,
		       "after cancel"))
		return -1;
	T_CHECK(op->n == 1, "cancelled receive completed again");
	return t_sync();
}

#define ORD_N 1000
#define ORD_WIN 14 /* 14 slots of ORD_SLOT fit in T_BUFSZ */
#define ORD_SLOT 70000

static size_t t_ord_len(int i)
{
	static const size_t l[] = { 8, 64, 1000, 4000, 9000, 20000, 0, 69999 };
	size_t len = l[(unsigned)i % 8];
	return len <= T.max_msg ? len : T.max_msg;
}

static int st_order(void)
{
	uint64_t tag = T_TAGBASE(T.test) | 5;
	static struct test_op *rx[ORD_N];

	if (T.side == 1) {
		/* One send in flight per slot of a window; each slot's source
		 * region is separate so pending sends keep their data. */
		static struct test_op *tx[ORD_N];
		if (t_sync())
			return -1;
		for (int i = 0; i < ORD_N; i++) {
			char *b = T.sbuf + (size_t)(i % 8) * ORD_SLOT;
			size_t len = t_ord_len(i);
			ssize_t ret;
			if (i >= 8 && t_wait(tx[i - 8], 1, T_WAIT_MS))
				return t_fail("order: send %d not completed",
					      i - 8);
			t_fill(b, len, 3000u + (uint32_t)i);
			tx[i] = t_op();
			T_POST(ret, fi_tsend(T.ep, b, len, NULL, T.peer, tag,
					     &tx[i]->fctx));
			T_CHECK(ret == 0, "order: send %d: %s", i,
				fi_strerror((int)-ret));
		}
		for (int i = ORD_N - 8; i < ORD_N; i++)
			T_CHECK(t_wait(tx[i], 1, T_WAIT_MS) == 0, "order: send "
				"%d not completed", i);
		return t_sync();
	}
	/* Receiver: a window of ORD_WIN receives, each with a full-size
	 * slot, re-posted in order as they complete.  Same tag and source,
	 * so message k must land in the k-th posted receive. */
	T.nops = 0;
	for (int i = 0; i < ORD_N + ORD_WIN; i++) {
		if (i >= ORD_WIN) {
			int k = i - ORD_WIN;
			char *b = T.rbuf + (size_t)(k % ORD_WIN) * ORD_SLOT;
			size_t len = t_ord_len(k);
			long bad;
			T_CHECK(t_wait(rx[k], 1, T_WAIT_MS) == 0, "order: "
				"receive %d not completed", k);
			T_CHECK(rx[k]->nerr == 0, "order: receive %d error %s",
				k, fi_strerror(rx[k]->err.err));
			T_CHECK(rx[k]->ent[0].len == len, "order: receive %d "
				"has len %zu, want %zu (out of order)", k,
				rx[k]->ent[0].len, len);
			bad = t_verify(b, len, 3000u + (uint32_t)k);
			T_CHECK(bad < 0, "order: message %d data mismatch at "
				"%ld (out of order?)", k, bad);
		}
		if (i < ORD_N) {
			char *b = T.rbuf + (size_t)(i % ORD_WIN) * ORD_SLOT;
			ssize_t ret;
			rx[i] = t_op();
			T_POST(ret, fi_trecv(T.ep, b, ORD_SLOT, NULL, T.peer,
					     tag, 0, &rx[i]->fctx));
			T_CHECK(ret == 0, "order: trecv %d: %s", i,
				fi_strerror((int)-ret));
			rx[i]->posted_rx = 1;
		}
		if (i == ORD_WIN - 1 && t_sync())
			return -1;
	}
	return t_sync();
}

static int st_multi_recv(void)
{
	const size_t bufsz = 16384, mlen = 4000;
	const int nmsg = 4; /* 16000 used, 384 < 4096 left: released */

	if (T.side == 1) {
		if (t_sync())
			return -1;
		for (int i = 0; i < nmsg; i++) {
			struct test_op *tx = t_post_tx(T.ep, 1, mlen, 0, 0,
						       1100u + (uint32_t)i);
			if (!tx || t_wait_tx(tx, mlen))
				return -1;
		}
		return t_sync();
	}
	struct test_op *op = t_op();
	struct iovec iov = { .iov_base = T.rbuf, .iov_len = bufsz };
	struct fi_msg m = { .msg_iov = &iov, .iov_count = 1, .addr = T.peer,
			    .context = &op->fctx };
	ssize_t ret;
	size_t next = 0;
	int released = 0;

	T_POST(ret, fi_recvmsg(T.ep, &m, FI_MULTI_RECV | FI_COMPLETION));
	T_CHECK(ret == 0, "fi_recvmsg(FI_MULTI_RECV): %s",
		fi_strerror((int)-ret));
	op->posted_rx = 1;
	if (t_sync())
		return -1;
	T_CHECK(t_wait(op, nmsg, T_WAIT_MS) == 0, "multi-recv: %d of %d "
		"completions", op->n, nmsg);
	t_spin(20); /* a separate release entry may follow */
	T_CHECK(op->nerr == 0, "multi-recv: error %s",
		fi_strerror(op->err.err));
	for (int i = 0; i < op->n && i < T_MAXENT; i++) {
		struct fi_cq_tagged_entry *e = &op->ent[i];
		size_t off;
		if (e->len == 0 && (e->flags & FI_MULTI_RECV) && i == nmsg) {
			released = 1;
			continue;
		}
		T_CHECK(i < nmsg, "multi-recv: unexpected entry %d len %zu", i,
			e->len);
		T_CHECK(e->len == mlen && (e->flags & FI_RECV),
			"multi-recv entry %d: len %zu flags %#lx", i, e->len,
			(unsigned long)e->flags);
		off = (size_t)((char *)e->buf - T.rbuf);
		T_CHECK(e->buf && off >= next && off + mlen <= bufsz,
			"multi-recv entry %d: buf offset %zu not consecutive "
			"(next free %zu)", i, off, next);
		T_CHECK(t_verify(e->buf, mlen, 1100u + (uint32_t)i) < 0,
			"multi-recv entry %d: data mismatch", i);
		if (e->flags & FI_MULTI_RECV) {
			T_CHECK(i == nmsg - 1, "multi-recv: buffer released "
				"early at entry %d", i);
			released = 1;
		}
		next = off + mlen;
	}
	T_CHECK(released, "multi-recv: no FI_MULTI_RECV flag after the "
		"buffer fell below FI_OPT_MIN_MULTI_RECV");
	return t_sync();
}

static int st_trunc(void)
{
	static const size_t lens[] = { 1000, 20000, 65537 };
	for (size_t k = 0; k < 3; k++) {
		size_t len = lens[k], blen = lens[k] / 10;
		uint64_t tag = T_TAGBASE(T.test) | k;
		struct test_op *op = NULL;
		if (!t_size_ok(len))
			continue;
		if (T.side == 1) {
			if (t_sync())
				return -1;
			op = t_post_tx(T.ep, 0, len, tag, 0, 1200u + (uint32_t)k);
			if (!op || t_wait_tx(op, len) || t_sync())
				return -1;
			continue;
		}
		if (!(op = t_post_rx(1, blen, tag, 0, T.peer)) || t_sync())
			return -1;
		T_CHECK(t_wait(op, 1, T_WAIT_MS) == 0, "trunc %zu->%zu: no "
			"completion", len, blen);
		T_CHECK(op->nerr == 1 && op->n == 1 &&
			op->err.err == FI_ETRUNC, "trunc %zu->%zu: want one "
			"FI_ETRUNC (%d) error entry, got %d entries, %d errors "
			"(err %d: %s)", len, blen, FI_ETRUNC, op->n, op->nerr,
			op->err.err, op->nerr ? fi_strerror(op->err.err) :
			"success");
		T_CHECK(op->err.olen == len - blen, "trunc %zu->%zu: olen %zu, "
			"want %zu", len, blen, op->err.olen, len - blen);
		T_CHECK(op->err.op_context == &op->fctx, "trunc: op_context");
		T_CHECK(t_verify(T.rbuf, blen, 1200u + (uint32_t)k) < 0 &&
			(unsigned char)T.rbuf[blen] == 0xee,
			"trunc %zu->%zu: buffer contents wrong or overrun",
			len, blen);
		if (t_sync())
			return -1;
	}
	return 0;
}

#define FLOOD_N 2000

static size_t t_flood_len(int i)
{
	return i % 10 == 9 ? 100 : i % 10 == 4 ? 0 : 64;
}

static int st_flood(void)
{
	uint64_t tag = T_TAGBASE(T.test) | 9;
	static struct test_op *tx[FLOOD_N];

	if (T.side == 1) {
		int posted = 0, eagain = 0;
		int64_t end = t_now_ms() + 2000;
		/* Phase 1 (receiver idle): post until done or 2 s of
		 * back-pressure.  Phase 2 (receiver draining): the rest. */
		for (int phase = 0; phase < 2; phase++) {
			while (posted < FLOOD_N && t_now_ms() < end) {
				size_t len = t_flood_len(posted);
				char *b = T.sbuf + (size_t)posted * 128;
				ssize_t ret;
				t_fill(b, len, 4000u + (uint32_t)posted);
				tx[posted] = t_op();
				ret = fi_tsend(T.ep, b, len, NULL, T.peer, tag,
					       &tx[posted]->fctx);
				if (ret == -FI_EAGAIN) {
					eagain++;
					T.nops--;
					t_progress();
					continue;
				}
				T_CHECK(ret == 0, "flood: send %d: %s", posted,
					fi_strerror((int)-ret));
				posted++;
			}
			if (phase == 0) {
				if (T.verbose)
					fprintf(stderr, "# flood: %d posted "
						"before the receiver started, "
						"%d -FI_EAGAIN\n", posted,
						eagain);
				if (t_sync())
					return -1;
				end = t_now_ms() + 3 * T_WAIT_MS;
			}
		}
		T_CHECK(posted == FLOOD_N, "flood: only %d of %d sends accepted",
			posted, FLOOD_N);
		for (int i = 0; i < FLOOD_N; i++)
			T_CHECK(t_wait(tx[i], 1, T_WAIT_MS) == 0 &&
				tx[i]->nerr == 0, "flood: send %d did not "
				"complete cleanly", i);
		return t_sync();
	}
	if (t_sync())
		return -1;
	T.nops = 0;
	for (int i = 0; i < FLOOD_N; i++) {
		size_t len = t_flood_len(i);
		struct test_op *op = t_post_rx(1, 128, tag, 0, T.peer);
		if (!op)
			return -1;
		T_CHECK(t_wait(op, 1, T_WAIT_MS) == 0, "flood: receive %d not "
			"completed", i);
		if (t_check_rx(op, 0, len, tag, FI_TAGGED | FI_RECV, T.rbuf,
			       4000u + (uint32_t)i, "flood"))
			return -1;
		T.nops = 0;
	}
	return t_sync();
}

/* like T_CHECK, but keeps going: the remaining checks are independent */
#define T_EXPECT(cond, ...)                                                   \
	do {                                                                  \
		if (!(cond))                                                  \
			t_fail(__VA_ARGS__);                                  \
	} while (0)

#define T_G_ACCEPTED 126
#define T_G_OTHER 125
#define T_G_CRASH 1000

static const char *t_gstr(int r)
{
	static char b[64];
	if (r == T_G_CRASH)
		return "the call crashed the process";
	if (r == T_G_ACCEPTED)
		return "returned 0";
	if (r == T_G_OTHER)
		return "returned an unlisted error";
	snprintf(b, sizeof(b), "returned -%s", fi_strerror(r));
	return b;
}

/* Make one invalid call in a forked copy of this process, so a provider
 * that crashes on bad arguments fails the check instead of killing the
 * suite.  The child only makes the call and exits; it never polls, so it
 * cannot steal the parent's traffic.  Returns the positive error code,
 * T_G_ACCEPTED when the call returned 0, or T_G_CRASH. */
static int t_guarded(int which)
{
	pid_t pid = fork();
	int st = 0;

	if (pid == 0) {
		struct iovec iov[65];
		struct test_op *op = t_op();
		uint64_t tag = T_TAGBASE(T.test) | 0xbad;
		ssize_t ret;

		alarm(10);
		for (int i = 0; i < 65; i++) {
			iov[i].iov_base = T.sbuf;
			iov[i].iov_len = 1;
		}
		if (which == 0)
			ret = fi_tsend(T.ep, T.sbuf, 8, NULL, (fi_addr_t)12345,
				       tag, &op->fctx);
		else if (which == 1)
			ret = fi_tsend(T.ep, T.sbuf, T.max_msg + 1, NULL,
				       T.peer, tag, &op->fctx);
		else if (which == 2)
			ret = fi_tsendv(T.ep, iov, NULL, T.iov_limit + 1,
					T.peer, tag, &op->fctx);
		else
			ret = fi_tinject(T.ep, T.sbuf, T.inject + 1, T.peer,
					 tag);
		_exit(ret == 0 ? T_G_ACCEPTED :
		      -ret > 0 && -ret < T_G_OTHER ? (int)-ret : T_G_OTHER);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return T_G_OTHER;
	if (!WIFEXITED(st))
		return T_G_CRASH;
	/* libfabric's SIGSEGV handler exits with status 1 (FI_EPERM would
	 * also be 1; no valid answer here is EPERM). */
	return WEXITSTATUS(st) == 1 ? T_G_CRASH : WEXITSTATUS(st);
}

static int st_negative(void)
{
	uint64_t tag = T_TAGBASE(T.test);
	struct test_op *op;
	ssize_t ret;

	if (T.side == 0) {
		int r;

		r = t_guarded(0);
		if (r == T_G_ACCEPTED) {
			/* accepted: the error must then come through the CQ */
			op = t_op();
			ret = fi_tsend(T.ep, T.sbuf, 8, NULL, (fi_addr_t)12345,
				       tag, &op->fctx);
			T_EXPECT(ret != 0 || (t_wait(op, 1, T_WAIT_MS) == 0 &&
					     op->nerr), "fi_tsend to invalid "
				"fi_addr: returned 0 and no error completion");
		} else {
			T_EXPECT(r == FI_EINVAL, "fi_tsend to invalid fi_addr: "
				"%s, want -FI_EINVAL", t_gstr(r));
		}
		if (T.max_msg < ((size_t)1 << 40)) {
			r = t_guarded(1);
			T_EXPECT(r == FI_EMSGSIZE, "fi_tsend(len > max_msg_size "
				"%zu): %s, want -FI_EMSGSIZE", T.max_msg,
				t_gstr(r));
		}
		if (T.iov_limit < 64) {
			r = t_guarded(2);
			T_EXPECT(r == FI_EINVAL, "fi_tsendv(iov count %zu > "
				"iov_limit): %s, want -FI_EINVAL",
				T.iov_limit + 1, t_gstr(r));
		}
		if (T.inject + 1 < T_BUFSZ) {
			r = t_guarded(3);
			T_EXPECT(r == FI_EMSGSIZE, "fi_tinject(inject_size %zu "
				"+ 1): %s, want -FI_EMSGSIZE", T.inject,
				t_gstr(r));
		}
		/* still usable */
		op = t_post_tx(T.ep, 0, 300, tag | 1, 0, 1300);
		if (!op || t_wait_tx(op, 300))
			return -1;
		return t_sync();
	}
	op = t_op();
	memset(T.rbuf, 0xee, 301);
	T_POST(ret, fi_trecv(T.ep, T.rbuf, 300, NULL, T.peer, tag | 1, 0,
			     &op->fctx));
	T_CHECK(ret == 0, "trecv: %s", fi_strerror((int)-ret));
	op->posted_rx = 1;
	T_CHECK(t_wait(op, 1, T_WAIT_MS) == 0, "no message after the negative "
		"calls: endpoint unusable?");
	if (t_check_rx(op, 0, 300, tag | 1, FI_TAGGED | FI_RECV, T.rbuf, 1300,
		       "after negative"))
		return -1;
	return t_sync();
}

/* The child kills itself while A has a receive posted; A must come back
 * within a bounded time.  Run last: B is gone afterwards. */
static void st_peer_death(pid_t child)
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

struct subtest {
	const char *name;
	int (*fn)(void);
	int need_multi;
};

static const struct subtest t_tests[] = {
	{ "tagged size sweep (expected and unexpected)", st_tagged_sweep, 0 },
	{ "msg sweep, senddata/tsenddata, inject variants", st_msg_data_inject,
	  0 },
	{ "sendv/recvv and tsendv/trecvv scatter", st_iov, 0 },
	{ "tag ignore bits, directed receive, FI_SOURCE", st_match, 0 },
	{ "FI_PEEK / FI_CLAIM / FI_DISCARD / FI_ENOMSG", st_peek, 0 },
	{ "fi_cancel", st_cancel, 0 },
	{ "ordering of 1000 mixed-size messages", st_order, 0 },
	{ "FI_MULTI_RECV", st_multi_recv, 1 },
	{ "truncation FI_ETRUNC", st_trunc, 0 },
	{ "unexpected flood", st_flood, 0 },
	{ "negative API checks", st_negative, 0 },
};
#define T_NTESTS (sizeof(t_tests) / sizeof(t_tests[0]))

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
	for (unsigned i = 0; i < T_NTESTS; i++) {
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
	T.test = T_NTESTS + 1;
	T.step = 0;
	T.failed = 0;
	T.nops = 0;
	st_peer_death(child);
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
