/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_rma_test.c - one-sided operations between processes, through the
 * public libfabric API (FI_PROVIDER selects the provider, default opx).
 *
 * The program forks: the parent is the target, NCHILD children are
 * initiators.  Addresses and keys go over pipes (no ports), or, with
 * -l/-c, over TCP between a target and initiators on different hosts
 * (the udp wire between them).  The target
 * only progresses (manual progress: a target that reads its CQ) and
 * answers the children's requests to check its memory.  Child 0:
 *   - write/read/writev/readv/writedata sweep 0 B .. 64 MiB around every
 *     threshold, the target checking its memory after each write, the
 *     child checking what it reads back; remote CQ data checked by the
 *     target, in order;
 *   - every atomic op x datatype x call against a reference computed
 *     here on small integers every datatype represents exactly; the
 *     largest count fi_*atomicvalid allows, for each call;
 *   - an fi_inject_write whose buffer is overwritten as soon as the call
 *     returns, posted behind a window the stalled target keeps full;
 *   - bad key, out-of-range (also a large atomic), missing access and
 *     closed-key attempts:
 *     error completions, and the target's memory byte-for-byte unchanged.
 * Every child: concurrent fetch-add and compare-swap increments of two
 * counters at the target, whose final values must be exact.
 *
 *   opx_rma_test [-p prov] [-v] [-l PORT | -c HOST:PORT]
 *     -v       FI_MR_VIRT_ADDR | FI_MR_PROV_KEY (give it to both sides)
 *     -l PORT  the target only: it waits on TCP PORT (0: any; the port
 *              is printed as "listening on port N") for the NCHILD
 *              initiators of one -c instead of forking them
 *     -c HOST:PORT  the initiators only, forked here, each connecting
 *              to the target's -l; exit status 0 when all passed
 *     -n       the target does not insert its initiators into its AV
 *              (as Open MPI's osc rdma, whose targets insert only the
 *              peers they initiate to): replies still reach them
 */
#include <complex.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#define NCHILD 3
#define BIG (64u << 20)
#define BIG_PAD 4096u
#define SMALL 4096u
#define NINC 1000
#define NCAS 100
#define DEADLINE_S 240
#define STALL_MS 300

#define DIE(...)                                                                                   \
	do {                                                                                       \
		fprintf(stderr, "[%d] FAIL %s:%d: ", (int)getpid(), __FILE__, __LINE__);           \
		fprintf(stderr, __VA_ARGS__);                                                      \
		fprintf(stderr, "\n");                                                             \
		exit(1);                                                                           \
	} while (0)
#define CHK(x)                                                                                     \
	do {                                                                                       \
		long _r = (long)(x);                                                               \
		if (_r < 0)                                                                        \
			DIE("%s = %ld (%s)", #x, _r, fi_strerror((int)-_r));                       \
	} while (0)

static const char *prov = "opx";
static bool virt;
static time_t t_start;

struct node {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
};

/* What the target tells each initiator. */
enum { R_BIG, R_RO, R_WO, R_ATOM, R_DOOMED, R_NUM };
struct setup {
	char addr[64];
	size_t addrlen;
	uint64_t base[R_NUM]; /* remote address of offset 0 of each region */
	uint64_t key[R_NUM];
};

/* Requests from an initiator to the target (pipe). */
struct cmd {
	char op;       /* V verify pattern, U unchanged, X close doomed key, D done,
			  S stall: no progress for STALL_MS after answering */
	uint32_t seed;
	uint64_t off, len;
	uint64_t ndata; /* D: writedata operations sent */
	int status;     /* D */
};

static void check_deadline(void)
{
	if (time(NULL) - t_start > DEADLINE_S)
		DIE("deadline of %d s passed", DEADLINE_S);
}

static void xwrite(int fd, const void *p, size_t n)
{
	if (write(fd, p, n) != (ssize_t)n)
		DIE("pipe write: %s", strerror(errno));
}

static void xread(int fd, void *p, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(fd, (char *)p + got, n - got);
		if (r <= 0)
			DIE("pipe read: %s", r ? strerror(errno) : "eof");
		got += (size_t)r;
	}
}

static void node_open(struct node *n)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_NONE};

	hints->caps = FI_RMA | FI_ATOMIC;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
	hints->fabric_attr->prov_name = strdup(prov);
	CHK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &n->info));
	fi_freeinfo(hints);
	if (!(n->info->caps & FI_RMA) || !(n->info->caps & FI_ATOMIC))
		DIE("provider does not offer FI_RMA|FI_ATOMIC");
	if (virt)
		n->info->domain_attr->mr_mode |= FI_MR_VIRT_ADDR | FI_MR_PROV_KEY;
	else
		n->info->domain_attr->mr_mode &= ~(FI_MR_VIRT_ADDR | FI_MR_PROV_KEY);
	CHK(fi_fabric(n->info->fabric_attr, &n->fabric, NULL));
	CHK(fi_domain(n->fabric, n->info, &n->domain, NULL));
	CHK(fi_av_open(n->domain, &av_attr, &n->av, NULL));
	CHK(fi_cq_open(n->domain, &cq_attr, &n->cq, NULL));
	CHK(fi_endpoint(n->domain, n->info, &n->ep, NULL));
	CHK(fi_ep_bind(n->ep, &n->av->fid, 0));
	CHK(fi_ep_bind(n->ep, &n->cq->fid, FI_TRANSMIT | FI_RECV));
	CHK(fi_enable(n->ep));
}

static void node_close(struct node *n)
{
	fi_close(&n->ep->fid);
	fi_close(&n->cq->fid);
	fi_close(&n->av->fid);
	fi_close(&n->domain->fid);
	fi_close(&n->fabric->fid);
	fi_freeinfo(n->info);
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
	for (size_t i = 0; i < n; i++) {
		if (!(i & 7))
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		p[i] = (uint8_t)(x >> ((i & 7) * 8));
	}
}

/* ---------------------------------------------------------------------
 * Initiator side helpers.
 */
static struct node me;
static fi_addr_t tgt;
static struct setup su;
static int to_parent, from_parent;

/* Wait for the completion of ctx; returns 0 or the positive error. */
static int wait_comp(void *ctx)
{
	for (;;) {
		struct fi_cq_data_entry c;
		ssize_t n = fi_cq_read(me.cq, &c, 1);
		if (n == 1) {
			if (c.op_context != ctx)
				DIE("completion for %p, want %p", c.op_context, ctx);
			return 0;
		}
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry e = {0};
			CHK(fi_cq_readerr(me.cq, &e, 0));
			if (e.op_context != ctx)
				DIE("error completion for %p, want %p", e.op_context, ctx);
			return e.err;
		}
		if (n != -FI_EAGAIN)
			DIE("fi_cq_read: %zd", n);
		check_deadline();
	}
}

/* Post with retry on -FI_EAGAIN (progressing). */
#define POST(call)                                                                                 \
	do {                                                                                       \
		ssize_t _rc;                                                                       \
		while ((_rc = (call)) == -FI_EAGAIN) {                                             \
			struct fi_cq_data_entry _c;                                                \
			if (fi_cq_read(me.cq, &_c, 0) < -FI_EAGAIN)                                 \
				DIE("cq");                                                         \
			check_deadline();                                                          \
		}                                                                                  \
		CHK(_rc);                                                                          \
	} while (0)

static char ask(struct cmd c)
{
	char r;
	xwrite(to_parent, &c, sizeof(c));
	xread(from_parent, &r, 1);
	return r;
}

static void expect_err(int got, int want, const char *what)
{
	if (got != want)
		DIE("%s: completion error %d (%s), want %d (%s)", what, got, fi_strerror(got), want,
		    fi_strerror(want));
}

static uint64_t ndata;

static void sweep(void)
{
	static const size_t base_sizes[] = {0, 1, 7, 8, 15, 16, 17, 63, 64, 65};
	static const size_t pts[] = {4096, 8192, 16384, 65536, 131072, 262144, 1u << 20, 16u << 20};
	size_t sizes[64], ns = 0;
	uint8_t *src = malloc(BIG + BIG_PAD), *dst = malloc(BIG + BIG_PAD);
	int ctx;

	if (!src || !dst)
		DIE("malloc");
	for (size_t i = 0; i < sizeof(base_sizes) / sizeof(base_sizes[0]); i++)
		sizes[ns++] = base_sizes[i];
	for (size_t i = 0; i < sizeof(pts) / sizeof(pts[0]); i++) {
		sizes[ns++] = pts[i] - 1;
		sizes[ns++] = pts[i];
		sizes[ns++] = pts[i] + 1;
	}
	sizes[ns++] = BIG;
	for (size_t i = 0; i < ns; i++) {
		size_t len = sizes[i], off = len == BIG ? 0 : (i * 13) % 256;
		uint32_t seed = (uint32_t)(i * 3 + 1);
		uint64_t ra = su.base[R_BIG] + off;

		/* contiguous write, checked at the target, read back */
		fill(src, len, seed);
		POST(fi_write(me.ep, src, len, NULL, tgt, ra, su.key[R_BIG], &ctx));
		expect_err(wait_comp(&ctx), 0, "write");
		if (ask((struct cmd){.op = 'V', .seed = seed, .off = off, .len = len}) != 'k')
			DIE("target memory wrong after a %zu-byte write at %zu", len, off);
		memset(dst, 0, len + 1);
		POST(fi_read(me.ep, dst, len, NULL, tgt, ra, su.key[R_BIG], &ctx));
		expect_err(wait_comp(&ctx), 0, "read");
		if (memcmp(dst, src, len) || dst[len] != 0)
			DIE("read of %zu bytes at %zu differs", len, off);

		/* three-piece writev, two-piece readv */
		seed += 1000;
		fill(src, len, seed);
		struct iovec w[3] = {{src, len / 3}, {src + len / 3, len / 3},
				     {src + 2 * (len / 3), len - 2 * (len / 3)}};
		struct iovec r[2] = {{dst, len / 2}, {dst + len / 2, len - len / 2}};
		POST(fi_writev(me.ep, w, NULL, 3, tgt, ra, su.key[R_BIG], &ctx));
		expect_err(wait_comp(&ctx), 0, "writev");
		if (ask((struct cmd){.op = 'V', .seed = seed, .off = off, .len = len}) != 'k')
			DIE("target memory wrong after a %zu-byte writev", len);
		memset(dst, 0, len);
		POST(fi_readv(me.ep, r, NULL, 2, tgt, ra, su.key[R_BIG], &ctx));
		expect_err(wait_comp(&ctx), 0, "readv");
		if (memcmp(dst, src, len))
			DIE("readv of %zu bytes differs", len);

		/* writedata: data checked at the target (in order) */
		if (len <= (1u << 20) + 1) {
			seed += 1000;
			fill(src, len, seed);
			POST(fi_writedata(me.ep, src, len, NULL, 0xD000 + ndata, tgt, ra,
					  su.key[R_BIG], &ctx));
			expect_err(wait_comp(&ctx), 0, "writedata");
			ndata++;
			if (ask((struct cmd){.op = 'V', .seed = seed, .off = off, .len = len}) != 'k')
				DIE("target memory wrong after a %zu-byte writedata", len);
		}
	}
	free(src);
	free(dst);
	printf("[%d] sweep: %zu sizes 0 .. %u B, write/read/writev/readv/writedata ok\n",
	       (int)getpid(), ns, BIG);
}

/* ---- atomics: reference on small integers ---- */
static size_t dsize(int dt)
{
	switch (dt) {
	case FI_INT8: case FI_UINT8: return 1;
	case FI_INT16: case FI_UINT16: return 2;
	case FI_INT32: case FI_UINT32: case FI_FLOAT: return 4;
	case FI_INT64: case FI_UINT64: case FI_DOUBLE: case FI_FLOAT_COMPLEX: return 8;
	case FI_LONG_DOUBLE: return sizeof(long double);
	case FI_DOUBLE_COMPLEX: return sizeof(double complex);
	case FI_LONG_DOUBLE_COMPLEX: return sizeof(long double complex);
	default: return 0;
	}
}

static void put(int dt, void *buf, int i, int64_t v)
{
	uint8_t *p = (uint8_t *)buf + (size_t)i * dsize(dt);
#define PUT(T) do { T x = (T)v; memcpy(p, &x, sizeof(x)); } while (0)
	switch (dt) {
	case FI_INT8: PUT(int8_t); break;
	case FI_UINT8: PUT(uint8_t); break;
	case FI_INT16: PUT(int16_t); break;
	case FI_UINT16: PUT(uint16_t); break;
	case FI_INT32: PUT(int32_t); break;
	case FI_UINT32: PUT(uint32_t); break;
	case FI_INT64: PUT(int64_t); break;
	case FI_UINT64: PUT(uint64_t); break;
	case FI_FLOAT: PUT(float); break;
	case FI_DOUBLE: PUT(double); break;
	case FI_LONG_DOUBLE: PUT(long double); break;
	case FI_FLOAT_COMPLEX: PUT(float complex); break;
	case FI_DOUBLE_COMPLEX: PUT(double complex); break;
	case FI_LONG_DOUBLE_COMPLEX: PUT(long double complex); break;
	}
#undef PUT
}

static bool same(int dt, const void *buf, int i, int64_t v)
{
	const uint8_t *p = (const uint8_t *)buf + (size_t)i * dsize(dt);
	if (dt == FI_LONG_DOUBLE) {
		long double a;
		memcpy(&a, p, sizeof(a));
		return a == (long double)v;
	}
	if (dt == FI_LONG_DOUBLE_COMPLEX) {
		long double complex a;
		memcpy(&a, p, sizeof(a));
		return a == (long double complex)v;
	}
	uint8_t want[16];
	put(dt, want, 0, v);
	return memcmp(want, p, dsize(dt)) == 0;
}

static bool is_cplx(int dt)
{
	return dt == FI_FLOAT_COMPLEX || dt == FI_DOUBLE_COMPLEX || dt == FI_LONG_DOUBLE_COMPLEX;
}

static bool ref_valid(int kind, int op, int dt)
{
	if (kind == 0 && !(op <= FI_BXOR || op == FI_ATOMIC_WRITE))
		return false;
	if (kind == 1 && op > FI_ATOMIC_WRITE)
		return false;
	if (kind == 2 && (op < FI_CSWAP || op > FI_MSWAP))
		return false;
	if (op == FI_BOR || op == FI_BAND || op == FI_BXOR || op == FI_MSWAP)
		return dt <= FI_UINT64;
	if (op == FI_MIN || op == FI_MAX || (op >= FI_CSWAP_LE && op <= FI_CSWAP_GT))
		return !is_cplx(dt);
	return true;
}

static int64_t ref_op(int op, int64_t d, int64_t s, int64_t c)
{
	switch (op) {
	case FI_MIN: return s < d ? s : d;
	case FI_MAX: return s > d ? s : d;
	case FI_SUM: return d + s;
	case FI_PROD: return d * s;
	case FI_LOR: return d || s;
	case FI_LAND: return d && s;
	case FI_BOR: return d | s;
	case FI_BAND: return d & s;
	case FI_LXOR: return (d && !s) || (!d && s);
	case FI_BXOR: return d ^ s;
	case FI_ATOMIC_READ: return d;
	case FI_ATOMIC_WRITE: return s;
	case FI_CSWAP: return c == d ? s : d;
	case FI_CSWAP_NE: return c != d ? s : d;
	case FI_CSWAP_LE: return c <= d ? s : d;
	case FI_CSWAP_LT: return c < d ? s : d;
	case FI_CSWAP_GE: return c >= d ? s : d;
	case FI_CSWAP_GT: return c > d ? s : d;
	case FI_MSWAP: return (s & c) | (d & ~c);
	default: return -999;
	}
}

#define NEL 3
static const int64_t V_D[NEL] = {6, 2, 0}, V_S[NEL] = {3, 7, 5}, V_C[NEL] = {6, 1, 0};

static void atomics(void)
{
	int ctx, n = 0;
	uint64_t ra = su.base[R_ATOM] + 64; /* 0..63: the shared counters */

	for (int dt = 0; dt < FI_DATATYPE_LAST; dt++) {
		for (int op = 0; op < FI_ATOMIC_OP_LAST; op++) {
			for (int k = 0; k < 3; k++) {
				uint8_t init[NEL * 32], s[NEL * 32], c[NEL * 32], r[NEL * 32],
					back[NEL * 32];
				size_t cnt = 0, bytes = NEL * dsize(dt);
				int v = k == 0   ? fi_atomicvalid(me.ep, dt, op, &cnt)
					: k == 1 ? fi_fetch_atomicvalid(me.ep, dt, op, &cnt)
						 : fi_compare_atomicvalid(me.ep, dt, op, &cnt);

				if ((v == 0) != ref_valid(k, op, dt))
					DIE("valid(kind %d op %d dt %d) = %d", k, op, dt, v);
				if (v)
					continue;
				for (int i = 0; i < NEL; i++) {
					put(dt, init, i, V_D[i]);
					put(dt, s, i, V_S[i]);
					put(dt, c, i, V_C[i]);
				}
				POST(fi_write(me.ep, init, bytes, NULL, tgt, ra, su.key[R_ATOM], &ctx));
				expect_err(wait_comp(&ctx), 0, "atomic setup write");
				if (k == 0)
					POST(fi_atomic(me.ep, s, NEL, NULL, tgt, ra, su.key[R_ATOM], dt,
						       op, &ctx));
				else if (k == 1)
					POST(fi_fetch_atomic(me.ep, s, NEL, NULL, r, NULL, tgt, ra,
							     su.key[R_ATOM], dt, op, &ctx));
				else
					POST(fi_compare_atomic(me.ep, s, NEL, NULL, c, NULL, r, NULL,
							       tgt, ra, su.key[R_ATOM], dt, op,
							       &ctx));
				expect_err(wait_comp(&ctx), 0, "atomic");
				POST(fi_read(me.ep, back, bytes, NULL, tgt, ra, su.key[R_ATOM], &ctx));
				expect_err(wait_comp(&ctx), 0, "atomic read back");
				for (int i = 0; i < NEL; i++) {
					if (!same(dt, back, i, ref_op(op, V_D[i], V_S[i], V_C[i])))
						DIE("kind %d op %d dt %d element %d: target wrong", k,
						    op, dt, i);
					if (k && !same(dt, r, i, V_D[i]))
						DIE("kind %d op %d dt %d element %d: fetched wrong", k,
						    op, dt, i);
				}
				n++;
			}
		}
	}
	printf("[%d] atomics: %d op x datatype x call combinations ok\n", (int)getpid(), n);
}

/* The largest count fi_*atomicvalid allows, for each kind of call: what
 * one call may carry must arrive whole on every wire (a udp path's
 * datagrams may be smaller than the provider's MTU). */
static void atomics_max(void)
{
	uint64_t ra = su.base[R_BIG];
	int ctx;

	for (int k = 0; k < 3; k++) {
		int op = k == 2 ? FI_CSWAP : FI_SUM;
		size_t cnt = 0;
		int v = k == 0   ? fi_atomicvalid(me.ep, FI_UINT64, op, &cnt)
			: k == 1 ? fi_fetch_atomicvalid(me.ep, FI_UINT64, op, &cnt)
				 : fi_compare_atomicvalid(me.ep, FI_UINT64, op, &cnt);
		size_t bytes = cnt * sizeof(uint64_t);
		uint64_t *d = malloc(bytes), *sv = malloc(bytes), *c = malloc(bytes),
			 *r = malloc(bytes), *back = malloc(bytes);

		if (v || !cnt || !d || !sv || !c || !r || !back)
			DIE("kind %d: valid %d count %zu", k, v, cnt);
		for (size_t i = 0; i < cnt; i++) {
			d[i] = i * 3;
			sv[i] = 1000000 + i;
			c[i] = i % 3 ? d[i] : ~d[i]; /* two in three compare equal */
		}
		POST(fi_write(me.ep, d, bytes, NULL, tgt, ra, su.key[R_BIG], &ctx));
		expect_err(wait_comp(&ctx), 0, "max atomic setup write");
		memset(r, 0xee, bytes);
		if (k == 0)
			POST(fi_atomic(me.ep, sv, cnt, NULL, tgt, ra, su.key[R_BIG], FI_UINT64, op,
				       &ctx));
		else if (k == 1)
			POST(fi_fetch_atomic(me.ep, sv, cnt, NULL, r, NULL, tgt, ra, su.key[R_BIG],
					     FI_UINT64, op, &ctx));
		else
			POST(fi_compare_atomic(me.ep, sv, cnt, NULL, c, NULL, r, NULL, tgt, ra,
					       su.key[R_BIG], FI_UINT64, op, &ctx));
		expect_err(wait_comp(&ctx), 0, "max-count atomic");
		POST(fi_read(me.ep, back, bytes, NULL, tgt, ra, su.key[R_BIG], &ctx));
		expect_err(wait_comp(&ctx), 0, "max atomic read back");
		for (size_t i = 0; i < cnt; i++) {
			uint64_t want = k == 2 ? (c[i] == d[i] ? sv[i] : d[i]) : d[i] + sv[i];

			if (back[i] != want)
				DIE("kind %d, %zu elements: element %zu is %llu, want %llu", k,
				    cnt, i, (unsigned long long)back[i], (unsigned long long)want);
			if (k && r[i] != d[i])
				DIE("kind %d, %zu elements: fetched %zu wrong", k, cnt, i);
		}
		printf("[%d] atomics: %s of %zu uint64 ok\n", (int)getpid(),
		       k == 0 ? "atomic" : k == 1 ? "fetch" : "compare", cnt);
		free(d);
		free(sv);
		free(c);
		free(r);
		free(back);
	}
}

/* fi_inject_write returns before the data is sent, and the buffer is the
 * caller's again at once, even when the operation needs several chunks
 * (a udp path's MTU is smaller than inject_size) and the window is
 * nearly full: the target stalls while 60 one-chunk writes fill it, so
 * the inject cannot leave whole; the buffer is overwritten right after
 * the call, then read back. */
static void inject_window(void)
{
	enum { NW = 60 };
	static uint8_t small[64], buf[8192], back[8192];
	size_t len = me.info->tx_attr->inject_size < sizeof(buf) ? me.info->tx_attr->inject_size
								  : sizeof(buf);
	uint64_t ra = su.base[R_BIG] + (1u << 20); /* the sweep is over: free */
	int ctx[NW], rctx, got = 0;
	bool seen[NW] = {false};

	fill(buf, len, 901);
	if (ask((struct cmd){.op = 'S'}) != 'k')
		DIE("target did not stall");
	for (int i = 0; i < NW; i++)
		POST(fi_write(me.ep, small, sizeof(small), NULL, tgt, su.base[R_BIG], su.key[R_BIG],
			      &ctx[i]));
	POST(fi_inject_write(me.ep, buf, len, tgt, ra, su.key[R_BIG]));
	memset(buf, 0xa5, len);
	while (got < NW) {
		struct fi_cq_data_entry c;
		ssize_t n = fi_cq_read(me.cq, &c, 1);

		if (n == 1) {
			int i = (int)((int *)c.op_context - ctx);

			if (i < 0 || i >= NW || seen[i])
				DIE("unexpected completion %p", c.op_context);
			seen[i] = true;
			got++;
		} else if (n != -FI_EAGAIN) {
			DIE("fi_cq_read %zd while filling the window", n);
		}
		check_deadline();
	}
	/* read after write: executed after the inject's last chunk */
	POST(fi_read(me.ep, back, len, NULL, tgt, ra, su.key[R_BIG], &rctx));
	expect_err(wait_comp(&rctx), 0, "read after inject");
	fill(buf, len, 901);
	if (memcmp(back, buf, len))
		DIE("a %zu-byte fi_inject_write behind a full window wrote what the buffer held "
		    "after the call",
		    len);
	printf("[%d] inject: %zu-byte fi_inject_write behind a nearly full window ok\n",
	       (int)getpid(), len);
}

static void refused(void)
{
	/* src has one byte more than the regions: the write longer than the
	 * region below must be refused by the target, not read past src */
	static uint8_t src[SMALL + 1], dst[SMALL];
	uint64_t one = 1, res;
	int ctx;

	fill(src, sizeof(src), 77);
	/* bad key */
	POST(fi_write(me.ep, src, 64, NULL, tgt, su.base[R_BIG], su.key[R_BIG] + 1000, &ctx));
	expect_err(wait_comp(&ctx), FI_EACCES, "write with a bad key");
	POST(fi_read(me.ep, dst, 64, NULL, tgt, su.base[R_RO], su.key[R_RO] + 1000, &ctx));
	expect_err(wait_comp(&ctx), FI_EACCES, "read with a bad key");
	/* out of range: straddling the end, past it, below the start */
	POST(fi_write(me.ep, src, 64, NULL, tgt, su.base[R_WO] + SMALL - 32, su.key[R_WO], &ctx));
	expect_err(wait_comp(&ctx), FI_EINVAL, "write straddling the end");
	POST(fi_write(me.ep, src, SMALL + 1, NULL, tgt, su.base[R_WO], su.key[R_WO], &ctx));
	expect_err(wait_comp(&ctx), FI_EINVAL, "write longer than the region");
	POST(fi_read(me.ep, dst, 8, NULL, tgt, su.base[R_RO] + SMALL + 8, su.key[R_RO], &ctx));
	expect_err(wait_comp(&ctx), FI_EINVAL, "read past the end");
	/* large ones (one CMA request, or chunks checked whole at the first) */
	static uint8_t big[1u << 20];
	fill(big, sizeof(big), 79);
	POST(fi_write(me.ep, big, sizeof(big), NULL, tgt,
		      su.base[R_BIG] + BIG + BIG_PAD - sizeof(big) / 2, su.key[R_BIG], &ctx));
	expect_err(wait_comp(&ctx), FI_EINVAL, "large write straddling the end");
	POST(fi_read(me.ep, big, sizeof(big), NULL, tgt,
		     su.base[R_BIG] + BIG + BIG_PAD - sizeof(big) + 1, su.key[R_BIG], &ctx));
	expect_err(wait_comp(&ctx), FI_EINVAL, "large read straddling the end");
	if (virt) {
		POST(fi_write(me.ep, src, 8, NULL, tgt, su.base[R_WO] - 8, su.key[R_WO], &ctx));
		expect_err(wait_comp(&ctx), FI_EINVAL, "write below the start");
	}
	/* missing access */
	POST(fi_write(me.ep, src, 64, NULL, tgt, su.base[R_RO], su.key[R_RO], &ctx));
	expect_err(wait_comp(&ctx), FI_EACCES, "write to a read-only region");
	POST(fi_read(me.ep, dst, 64, NULL, tgt, su.base[R_WO], su.key[R_WO], &ctx));
	expect_err(wait_comp(&ctx), FI_EACCES, "read from a write-only region");
	POST(fi_atomic(me.ep, &one, 1, NULL, tgt, su.base[R_RO], su.key[R_RO], FI_UINT64, FI_SUM,
		       &ctx));
	expect_err(wait_comp(&ctx), FI_EACCES, "atomic on a read-only region");
	POST(fi_fetch_atomic(me.ep, &one, 1, NULL, &res, NULL, tgt, su.base[R_WO], su.key[R_WO],
			     FI_UINT64, FI_SUM, &ctx));
	expect_err(wait_comp(&ctx), FI_EACCES, "fetch atomic on a write-only region");
	/* a large atomic (several chunks where datagrams are small)
	 * straddling the end: refused whole, no element applied */
	static uint64_t ones[1024];
	size_t cnt = 0;
	if (fi_atomicvalid(me.ep, FI_UINT64, FI_SUM, &cnt) || cnt * 8 <= SMALL)
		DIE("atomic count %zu", cnt);
	cnt = cnt > 1024 ? 1024 : cnt;
	for (size_t i = 0; i < cnt; i++)
		ones[i] = 1;
	POST(fi_atomic(me.ep, ones, cnt, NULL, tgt, su.base[R_WO] + 8, su.key[R_WO], FI_UINT64,
		       FI_SUM, &ctx));
	expect_err(wait_comp(&ctx), FI_EINVAL, "large atomic straddling the end");
	if (ask((struct cmd){.op = 'U'}) != 'k')
		DIE("refused operations changed the target's memory");
	/* allowed ones on the same regions work */
	POST(fi_read(me.ep, dst, 64, NULL, tgt, su.base[R_RO], su.key[R_RO], &ctx));
	expect_err(wait_comp(&ctx), 0, "read of the read-only region");
	/* a key closed while we hold it */
	POST(fi_write(me.ep, src, 64, NULL, tgt, su.base[R_DOOMED], su.key[R_DOOMED], &ctx));
	expect_err(wait_comp(&ctx), 0, "write before close");
	if (ask((struct cmd){.op = 'X'}) != 'k')
		DIE("target could not close the region");
	fill(src, sizeof(src), 78);
	POST(fi_write(me.ep, src, 64, NULL, tgt, su.base[R_DOOMED], su.key[R_DOOMED], &ctx));
	expect_err(wait_comp(&ctx), FI_EACCES, "write to a closed key");
	POST(fi_read(me.ep, dst, 64, NULL, tgt, su.base[R_DOOMED], su.key[R_DOOMED], &ctx));
	expect_err(wait_comp(&ctx), FI_EACCES, "read of a closed key");
	if (ask((struct cmd){.op = 'U'}) != 'k')
		DIE("a closed key's region changed");
	printf("[%d] refused: bad key, range, access and closed key give errors, memory unchanged\n",
	       (int)getpid());
}

static void hammer(void)
{
	uint64_t one = 1, old, cur = 0, res;
	int ctx, tries = 0;

	for (int i = 0; i < NINC; i++) {
		POST(fi_fetch_atomic(me.ep, &one, 1, NULL, &old, NULL, tgt, su.base[R_ATOM],
				     su.key[R_ATOM], FI_UINT64, FI_SUM, &ctx));
		expect_err(wait_comp(&ctx), 0, "fetch-add");
	}
	for (int i = 0; i < NCAS;) {
		uint64_t next = cur + 1;
		POST(fi_compare_atomic(me.ep, &next, 1, NULL, &cur, NULL, &res, NULL, tgt,
				       su.base[R_ATOM] + 8, su.key[R_ATOM], FI_UINT64, FI_CSWAP,
				       &ctx));
		expect_err(wait_comp(&ctx), 0, "compare-swap");
		if (res == cur)
			i++;
		cur = res == cur ? next : res;
		if (++tries > 1000000)
			DIE("compare-swap never succeeds");
	}
	printf("[%d] hammer: %d fetch-adds, %d compare-swap increments (%d tries)\n", (int)getpid(),
	       NINC, NCAS, tries);
}

static void child(int idx)
{
	node_open(&me);
	char addr[64];
	size_t addrlen = sizeof(addr);
	CHK(fi_getname(&me.ep->fid, addr, &addrlen));
	xwrite(to_parent, &addrlen, sizeof(addrlen));
	xwrite(to_parent, addr, addrlen);
	xread(from_parent, &su, sizeof(su));
	if (fi_av_insert(me.av, su.addr, 1, &tgt, 0, NULL) != 1)
		DIE("av insert");
	if (idx == 0) {
		sweep();
		atomics();
		atomics_max();
		inject_window();
		refused();
	}
	hammer();
	xwrite(to_parent, &(struct cmd){.op = 'D', .ndata = ndata}, sizeof(struct cmd));
	char r;
	xread(from_parent, &r, 1);
	node_close(&me);
	exit(r == 'k' ? 0 : 1);
}

/* ---------------------------------------------------------------------
 * Across hosts (-l / -c): the pipes become one TCP connection per
 * initiator, which first sends its index.
 */
static int tcp_connect(const char *hostport)
{
	char host[256], *colon;
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai;
	int fd = -1, rc;

	snprintf(host, sizeof(host), "%s", hostport);
	colon = strrchr(host, ':');
	if (!colon)
		DIE("-c wants HOST:PORT, not %s", hostport);
	*colon = '\0';
	rc = getaddrinfo(host, colon + 1, &hints, &ai);
	if (rc)
		DIE("%s: %s", hostport, gai_strerror(rc));
	/* the target may still be starting */
	for (int i = 0; i < 100; i++) {
		fd = socket(ai->ai_family, ai->ai_socktype, 0);
		if (fd < 0)
			DIE("socket: %s", strerror(errno));
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		close(fd);
		fd = -1;
		usleep(100000);
	}
	freeaddrinfo(ai);
	if (fd < 0)
		DIE("no target at %s", hostport);
	return fd;
}

/* -c: NCHILD initiators against a remote target. */
static int initiators(const char *hostport)
{
	pid_t pids[NCHILD];
	int failed = 0;

	for (int i = 0; i < NCHILD; i++) {
		pids[i] = fork();
		if (pids[i] < 0)
			DIE("fork");
		if (pids[i] == 0) {
			int fd = tcp_connect(hostport);

			xwrite(fd, &i, sizeof(i));
			to_parent = from_parent = fd;
			child(i);
		}
	}
	for (int i = 0; i < NCHILD; i++) {
		int st;

		if (waitpid(pids[i], &st, 0) != pids[i] || !WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr, "FAIL: initiator %d exited with status 0x%x\n", i, st);
			failed = 1;
		}
	}
	printf("%s\n", failed ? "FAIL" : "PASS");
	return failed;
}

/* -l: accept the NCHILD initiators of one -c; conn[i] is initiator i's. */
static void accept_initiators(const char *port, int conn[NCHILD])
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sin);
	int one = 1, ls = socket(AF_INET, SOCK_STREAM, 0);
	char *end;
	long p = strtol(port, &end, 10);

	if (*end || p < 0 || p > 65535)
		DIE("bad port %s", port);
	sin.sin_port = htons((uint16_t)p);
	if (ls < 0 || setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(ls, (struct sockaddr *)&sin, sizeof(sin)) || listen(ls, NCHILD) ||
	    getsockname(ls, (struct sockaddr *)&sin, &sl))
		DIE("listen on port %s: %s", port, strerror(errno));
	printf("listening on port %u\n", (unsigned)ntohs(sin.sin_port));
	for (int i = 0; i < NCHILD; i++)
		conn[i] = -1;
	for (int n = 0; n < NCHILD; n++) {
		struct pollfd pl = {.fd = ls, .events = POLLIN};
		int fd, idx;

		while (poll(&pl, 1, 1000) == 0)
			check_deadline();
		fd = accept(ls, NULL, NULL);
		if (fd < 0)
			DIE("accept: %s", strerror(errno));
		xread(fd, &idx, sizeof(idx));
		if (idx < 0 || idx >= NCHILD || conn[idx] >= 0)
			DIE("initiator index %d twice or out of range", idx);
		conn[idx] = fd;
	}
	close(ls);
}

/* ---------------------------------------------------------------------
 * Target.
 */
int main(int argc, char **argv)
{
	int opt, up[NCHILD][2], down[NCHILD][2], failed = 0;
	const char *listen_port = NULL, *connect_to = NULL;
	pid_t pids[NCHILD];
	struct node t;

	bool no_insert = false;

	while ((opt = getopt(argc, argv, "p:vl:c:n")) != -1) {
		if (opt == 'p')
			prov = optarg;
		else if (opt == 'v')
			virt = true;
		else if (opt == 'l')
			listen_port = optarg;
		else if (opt == 'c')
			connect_to = optarg;
		else if (opt == 'n')
			no_insert = true;
		else {
			fprintf(stderr, "usage: %s [-p prov] [-v] [-n] [-l PORT | -c HOST:PORT]\n",
				argv[0]);
			return 2;
		}
	}
	t_start = time(NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (connect_to)
		return initiators(connect_to);
	if (listen_port) {
		int conn[NCHILD];

		accept_initiators(listen_port, conn);
		for (int i = 0; i < NCHILD; i++) {
			up[i][0] = down[i][1] = conn[i];
			pids[i] = -1;
		}
	}
	for (int i = 0; !listen_port && i < NCHILD; i++) {
		if (pipe(up[i]) || pipe(down[i]))
			DIE("pipe");
		pids[i] = fork();
		if (pids[i] < 0)
			DIE("fork");
		if (pids[i] == 0) {
			to_parent = up[i][1];
			from_parent = down[i][0];
			child(i);
		}
		close(up[i][1]);
		close(down[i][0]);
	}

	node_open(&t);
	size_t sizes[R_NUM] = {BIG + BIG_PAD, SMALL, SMALL, SMALL, SMALL};
	uint64_t access[R_NUM] = {FI_REMOTE_READ | FI_REMOTE_WRITE, FI_REMOTE_READ,
				  FI_REMOTE_WRITE, FI_REMOTE_READ | FI_REMOTE_WRITE,
				  FI_REMOTE_READ | FI_REMOTE_WRITE};
	uint8_t *mem[R_NUM], *snap[R_NUM];
	struct fid_mr *mr[R_NUM];
	struct setup s;

	memset(&s, 0, sizeof(s));
	s.addrlen = sizeof(s.addr);
	CHK(fi_getname(&t.ep->fid, s.addr, &s.addrlen));
	for (int r = 0; r < R_NUM; r++) {
		mem[r] = malloc(sizes[r]);
		snap[r] = malloc(sizes[r]);
		if (!mem[r] || !snap[r])
			DIE("malloc");
		fill(mem[r], sizes[r], 500 + r);
		if (r == R_ATOM)
			memset(mem[r], 0, 64);
		CHK(fi_mr_reg(t.domain, mem[r], sizes[r], access[r], 0, 100 + r, 0, &mr[r], NULL));
		s.key[r] = fi_mr_key(mr[r]);
		s.base[r] = (t.info->domain_attr->mr_mode & FI_MR_VIRT_ADDR)
				    ? (uint64_t)(uintptr_t)mem[r]
				    : 0;
		memcpy(snap[r], mem[r], sizes[r]);
	}
	for (int i = 0; i < NCHILD; i++) {
		size_t alen;
		char a[64];
		fi_addr_t fa;
		xread(up[i][0], &alen, sizeof(alen));
		if (alen > sizeof(a))
			DIE("address length");
		xread(up[i][0], a, alen);
		if (!no_insert && fi_av_insert(t.av, a, 1, &fa, 0, NULL) != 1)
			DIE("av insert");
	}
	for (int i = 0; i < NCHILD; i++)
		xwrite(down[i][1], &s, sizeof(s));

	int done = 0;
	bool stall = false;
	uint64_t rdata = 0;
	struct pollfd pfd[NCHILD];
	for (int i = 0; i < NCHILD; i++)
		pfd[i] = (struct pollfd){.fd = up[i][0], .events = POLLIN};
	for (unsigned long it = 0; done < NCHILD; it++) {
		struct fi_cq_data_entry c;
		ssize_t n = fi_cq_read(t.cq, &c, 1);
		if (n == 1) {
			if (!(c.flags & FI_REMOTE_CQ_DATA) || c.data != 0xD000 + rdata)
				DIE("target CQ entry flags 0x%llx data 0x%llx, want data 0x%llx",
				    (unsigned long long)c.flags, (unsigned long long)c.data,
				    (unsigned long long)(0xD000 + rdata));
			rdata++;
		} else if (n != -FI_EAGAIN) {
			DIE("target fi_cq_read %zd", n);
		}
		if (it % 64)
			continue;
		check_deadline();
		if (poll(pfd, NCHILD, 0) <= 0)
			continue;
		for (int i = 0; i < NCHILD; i++) {
			if (!(pfd[i].revents & (POLLIN | POLLHUP)))
				continue;
			struct cmd cm;
			char ok = 'k';
			xread(up[i][0], &cm, sizeof(cm));
			switch (cm.op) {
			case 'V': {
				uint8_t *ref = malloc(cm.len + 1);
				fill(ref, cm.len, cm.seed);
				if (memcmp(mem[R_BIG] + cm.off, ref, cm.len))
					ok = 'f';
				/* the bytes around it are the last writes' or the snapshot's:
				 * only the range itself is checked */
				free(ref);
				break;
			}
			case 'U':
				for (int r = R_RO; r <= R_DOOMED; r++)
					if (r != R_ATOM && memcmp(mem[r], snap[r], sizes[r]))
						ok = 'f';
				break;
			case 'X':
				/* the region's last legal write is its new reference */
				memcpy(snap[R_DOOMED], mem[R_DOOMED], sizes[R_DOOMED]);
				if (fi_close(&mr[R_DOOMED]->fid))
					ok = 'f';
				mr[R_DOOMED] = NULL;
				break;
			case 'S':
				stall = true;
				break;
			case 'D':
				if (i == 0 && cm.ndata != rdata) {
					fprintf(stderr, "FAIL: %llu remote CQ data entries, want %llu\n",
						(unsigned long long)rdata,
						(unsigned long long)cm.ndata);
					ok = 'f';
				}
				done++;
				pfd[i].fd = -1;
				break;
			default:
				DIE("bad command %d", cm.op);
			}
			if (ok != 'k')
				failed = 1; /* the initiator may be on another host */
			xwrite(down[i][1], &ok, 1);
			if (stall) {
				usleep(STALL_MS * 1000);
				stall = false;
			}
		}
	}
	uint64_t a, b;
	memcpy(&a, mem[R_ATOM], 8);
	memcpy(&b, mem[R_ATOM] + 8, 8);
	if (a != (uint64_t)NCHILD * NINC || b != (uint64_t)NCHILD * NCAS) {
		fprintf(stderr, "FAIL: counters %llu and %llu, want %d and %d\n",
			(unsigned long long)a, (unsigned long long)b, NCHILD * NINC, NCHILD * NCAS);
		failed = 1;
	} else {
		printf("target: %d processes: fetch-add counter %llu, compare-swap counter %llu exact\n",
		       NCHILD, (unsigned long long)a, (unsigned long long)b);
	}
	for (int i = 0; listen_port && i < NCHILD; i++) {
		/* keep progressing until the initiator has closed its
		 * endpoint and exited: its connection reaches end of file */
		char c;

		for (;;) {
			struct pollfd pl = {.fd = up[i][0], .events = POLLIN};
			struct fi_cq_data_entry e;

			(void)fi_cq_read(t.cq, &e, 1);
			check_deadline();
			if (poll(&pl, 1, 0) > 0 && read(up[i][0], &c, 1) <= 0)
				break;
		}
		close(up[i][0]);
	}
	for (int i = 0; !listen_port && i < NCHILD; i++) {
		int st;
		/* keep progressing until the child has exited */
		while (waitpid(pids[i], &st, WNOHANG) == 0) {
			struct fi_cq_data_entry c;
			(void)fi_cq_read(t.cq, &c, 1);
			check_deadline();
		}
		if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr, "FAIL: initiator %d exited with status 0x%x\n", i, st);
			failed = 1;
		}
	}
	for (int r = 0; r < R_NUM; r++) {
		if (mr[r])
			fi_close(&mr[r]->fid);
		free(mem[r]);
		free(snap[r]);
	}
	node_close(&t);
	printf("%s\n", failed ? "FAIL" : "PASS");
	return failed;
}
