/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * fixture.c - shared cmocka fixtures: provider bring-up without the
 * libfabric core's provider loading, and a ready loopback endpoint.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <fcntl.h>
#include <stdio.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"

/*
 * The libfabric core resets its parameter list when it initialises
 * (lazily, on the first fi_getinfo/fi_getparams/...), so parameters a
 * provider defines before that are lost.  In production the core always
 * runs first (it is what calls fi_prov_ini); here we make it so.  The
 * provider path is pointed away from the build tree first, or the core
 * would dlopen() a second copy of opx (the module) next to the linked one.
 */
static pthread_once_t fx_core_once = PTHREAD_ONCE_INIT;

static void fx_core_init(void)
{
	struct fi_param *params = NULL;
	int count = 0;

	setenv("FI_PROVIDER_PATH", "/nonexistent/opx-unit-tests", 1);
	if (fi_getparams(&params, &count) == 0)
		fi_freeparams(params);
}

struct fi_provider *fx_prov(void)
{
	pthread_once(&fx_core_once, fx_core_init);
	return fi_prov_ini();
}

static int fx_threading(const char *s, enum fi_threading *t)
{
	static const struct {
		const char *name;
		enum fi_threading val;
	} map[] = {
		{"safe", FI_THREAD_SAFE},
		{"fid", FI_THREAD_FID},
		{"domain", FI_THREAD_DOMAIN},
		{"completion", FI_THREAD_COMPLETION},
		{"endpoint", FI_THREAD_ENDPOINT},
		{"unspec", FI_THREAD_UNSPEC},
	};
	size_t i;

	if (!strncasecmp(s, "FI_THREAD_", 10))
		s += 10;
	for (i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
		if (!strcasecmp(s, map[i].name)) {
			*t = map[i].val;
			return 0;
		}
	}
	return -FI_EINVAL;
}

int fx_getinfo(const char *threading, uint64_t caps, struct fi_info **info)
{
	return fx_getinfo_fmt(threading, caps, FI_FORMAT_UNSPEC, info);
}

struct fi_info *fx_hints(uint64_t caps)
{
	struct fi_info *hints = fi_allocinfo();

	if (hints) {
		hints->ep_attr->type = FI_EP_RDM;
		hints->caps = caps;
	}
	return hints;
}

int fx_getinfo_hints(const struct fi_info *hints, struct fi_info **info)
{
	return fx_prov()->getinfo(FX_VERSION, NULL, NULL, 0, hints, info);
}

int fx_getinfo_fmt(const char *threading, uint64_t caps, uint32_t addr_format,
		   struct fi_info **info)
{
	struct fi_info *hints;
	int ret;

	if (!info)
		return -FI_EINVAL;
	*info = NULL;
	hints = fx_hints(caps);
	if (!hints)
		return -FI_ENOMEM;
	hints->addr_format = addr_format;
	if (threading) {
		ret = fx_threading(threading, &hints->domain_attr->threading);
		if (ret) {
			fi_freeinfo(hints);
			return ret;
		}
	}
	ret = fx_getinfo_hints(hints, info);
	fi_freeinfo(hints);
	return ret;
}

void fx_open_peer_ep(struct fx_env *e, struct fi_info *info, struct fid_cq *cq,
		     struct fid_ep **ep, fi_addr_t *addr)
{
	fx_open_peer_ep_split(e, info, cq ? cq : e->cq, NULL, NULL, ep, addr);
}

void fx_open_peer_ep_split(struct fx_env *e, struct fi_info *info, struct fid_cq *txcq,
			   struct fid_cq *rxcq, struct fid_cntr *rcntr, struct fid_ep **ep,
			   fi_addr_t *addr)
{
	char name[64];
	size_t namelen = sizeof(name);

	assert_int_equal(fi_endpoint(e->domain, info ? info : e->info, ep, NULL), 0);
	if (rxcq) {
		assert_int_equal(fi_ep_bind(*ep, &txcq->fid, FI_TRANSMIT), 0);
		assert_int_equal(fi_ep_bind(*ep, &rxcq->fid, FI_RECV), 0);
	} else {
		assert_int_equal(fi_ep_bind(*ep, &txcq->fid, FI_TRANSMIT | FI_RECV), 0);
	}
	if (rcntr)
		assert_int_equal(fi_ep_bind(*ep, &rcntr->fid, FI_RECV), 0);
	assert_int_equal(fi_ep_bind(*ep, &e->av->fid, 0), 0);
	assert_int_equal(fi_enable(*ep), 0);
	assert_int_equal(fi_getname(&(*ep)->fid, name, &namelen), 0);
	assert_int_equal(fi_av_insert(e->av, name, 1, addr, 0, NULL), 1);
}

void fx_close(struct fx_env *e)
{
	if (!e)
		return;
	if (e->ep)
		(void)fi_close(&e->ep->fid);
	if (e->wcntr)
		(void)fi_close(&e->wcntr->fid);
	if (e->rcntr)
		(void)fi_close(&e->rcntr->fid);
	if (e->cq)
		(void)fi_close(&e->cq->fid);
	if (e->av)
		(void)fi_close(&e->av->fid);
	if (e->domain)
		(void)fi_close(&e->domain->fid);
	if (e->fabric)
		(void)fi_close(&e->fabric->fid);
	if (e->info)
		fi_freeinfo(e->info);
	memset(e, 0, sizeof(*e));
}

int fx_open_domain(struct fx_env *e, const char *threading)
{
	return fx_open_domain_fmt(e, threading, 0, FI_FORMAT_UNSPEC);
}

/* info (e owns it from here), fabric and domain; on failure e is closed
 * and zeroed. */
static int fx_open_fabric(struct fx_env *e, struct fi_info *info)
{
	int ret;

	if (!e) {
		fi_freeinfo(info);
		return -FI_EINVAL;
	}
	memset(e, 0, sizeof(*e));
	e->info = info;
	if (!info)
		return -FI_EINVAL;
	ret = fx_prov()->fabric(e->info->fabric_attr, &e->fabric, NULL);
	if (!ret)
		ret = fi_domain(e->fabric, e->info, &e->domain, NULL);
	if (ret)
		fx_close(e);
	return ret;
}

int fx_open_domain_fmt(struct fx_env *e, const char *threading, uint64_t caps,
		       uint32_t addr_format)
{
	struct fi_info *info = NULL;
	int ret = fx_getinfo_fmt(threading, caps, addr_format, &info);

	if (ret) {
		if (e)
			memset(e, 0, sizeof(*e));
		return ret;
	}
	return fx_open_fabric(e, info);
}

static int fx_open_rest(struct fx_env *e, const struct fx_opts *o);

int fx_open(struct fx_env *e, enum fi_av_type av_type, enum fi_cq_format cq_format)
{
	return fx_open_at(e, av_type, cq_format, NULL, 0);
}

int fx_open_at(struct fx_env *e, enum fi_av_type av_type, enum fi_cq_format cq_format,
	       const void *src, size_t srclen)
{
	struct fx_opts o = {.av_type = av_type, .cq_format = cq_format, .src = src, .srclen = srclen};
	int ret = fx_open_domain(e, NULL);

	if (ret)
		return ret;
	return fx_open_rest(e, &o);
}

int fx_open_fmt(struct fx_env *e, uint32_t addr_format, uint64_t caps)
{
	int ret = fx_open_domain_fmt(e, NULL, caps, addr_format);

	if (ret)
		return ret;
	return fx_open_rest(e, NULL);
}

int fx_open_info(struct fx_env *e, struct fi_info *info, const struct fx_opts *o)
{
	int ret = fx_open_fabric(e, info);

	if (ret)
		return ret;
	return fx_open_rest(e, o);
}

int fx_open_hints(struct fx_env *e, const struct fi_info *hints)
{
	struct fi_info *info = NULL;
	int ret = fx_getinfo_hints(hints, &info);

	if (ret) {
		if (e)
			memset(e, 0, sizeof(*e));
		return ret;
	}
	return fx_open_info(e, info, NULL);
}

/* AV, CQ, counters and endpoint on an open domain; the endpoint's name
 * inserted.  o NULL: the defaults (see struct fx_opts). */
static int fx_open_rest(struct fx_env *e, const struct fx_opts *o)
{
	static const struct fx_opts dflt = {.av_type = FI_AV_TABLE, .cq_format = FI_CQ_FORMAT_TAGGED};
	struct fi_av_attr av_attr;
	struct fi_cq_attr cq_attr;
	struct fi_cntr_attr cntr_attr = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_NONE};
	char addr[64];
	size_t addrlen = sizeof(addr);
	int ret;

	if (!o)
		o = &dflt;
	e->info->domain_attr->av_type = o->av_type;
	if (o->src) {
		free(e->info->src_addr);
		e->info->src_addr = malloc(o->srclen);
		if (!e->info->src_addr) {
			ret = -FI_ENOMEM;
			goto fail;
		}
		memcpy(e->info->src_addr, o->src, o->srclen);
		e->info->src_addrlen = o->srclen;
	}

	memset(&av_attr, 0, sizeof(av_attr));
	av_attr.type = o->av_type;
	ret = fi_av_open(e->domain, &av_attr, &e->av, NULL);
	if (ret)
		goto fail;

	memset(&cq_attr, 0, sizeof(cq_attr));
	cq_attr.format = o->cq_format;
	cq_attr.wait_obj = FI_WAIT_NONE;
	ret = fi_cq_open(e->domain, &cq_attr, &e->cq, NULL);
	if (ret)
		goto fail;
	if (o->cntrs) {
		ret = fi_cntr_open(e->domain, &cntr_attr, &e->wcntr, NULL);
		if (!ret)
			ret = fi_cntr_open(e->domain, &cntr_attr, &e->rcntr, NULL);
		if (ret)
			goto fail;
	}

	ret = fi_endpoint(e->domain, e->info, &e->ep, NULL);
	if (ret)
		goto fail;
	ret = fi_ep_bind(e->ep, &e->cq->fid, FI_TRANSMIT | FI_RECV);
	if (ret)
		goto fail;
	ret = fi_ep_bind(e->ep, &e->av->fid, 0);
	if (ret)
		goto fail;
	if (o->cntrs) {
		ret = fi_ep_bind(e->ep, &e->wcntr->fid, FI_WRITE);
		if (!ret)
			ret = fi_ep_bind(e->ep, &e->rcntr->fid, FI_READ);
		if (ret)
			goto fail;
	}
	ret = fi_enable(e->ep);
	if (ret)
		goto fail;
	ret = fi_getname(&e->ep->fid, addr, &addrlen);
	if (ret)
		goto fail;
	ret = fi_av_insert(e->av, addr, 1, &e->self, 0, NULL);
	if (ret != 1) {
		ret = ret < 0 ? ret : -FI_EOTHER;
		goto fail;
	}
	return 0;
fail:
	fx_close(e);
	return ret;
}

int fx_setup(void **state)
{
	struct fx_env *e = calloc(1, sizeof(*e));

	if (!e)
		return -1;
	if (fx_open(e, FI_AV_TABLE, FI_CQ_FORMAT_TAGGED)) {
		free(e);
		return -1;
	}
	*state = e;
	return 0;
}

int fx_teardown(void **state)
{
	struct fx_env *e = *state;

	fx_close(e);
	free(e);
	*state = NULL;
	return 0;
}

void fx_param_defaults(void)
{
	static const char *const vars[] = {
		"FI_OPX_UNITS",	      "FI_OPX_UNIT",	    "FI_OPX_MTU",	 "FI_OPX_HDRQ_ENTRIES",
		"FI_OPX_EAGER_RING_BYTES", "FI_OPX_INJECT_SIZE", "FI_OPX_EAGER_MAX",
		"FI_OPX_UX_MAX_BYTES", "FI_OPX_JKEY",	    "FI_OPX_SPIN_COUNT", "FI_OPX_SLEEP_MS",
		"FI_OPX_RMA_DIRECT_WRITE", "FI_OPX_RMA_DIRECT_READ", "FI_OPX_RMA_DIRECT_IDLE_MS",
	};

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
}

uint64_t fx_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int fx_exclusive(const char *what, unsigned ms)
{
	char path[128];
	uint64_t end = fx_now_ms() + ms;
	int fd;

	snprintf(path, sizeof(path), "/tmp/opx-test.%s.%u.lock", what, (unsigned)geteuid());
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -1;
	while (flock(fd, LOCK_EX | LOCK_NB)) {
		if (fx_now_ms() > end) {
			close(fd);
			return -1;
		}
		usleep(50 * 1000);
	}
	return fd; /* held until the process exits */
}

int fx_cq_wait(struct fid_cq *cq, void *ctx, unsigned ms, struct fi_cq_tagged_entry *out)
{
	uint64_t end = fx_now_ms() + ms;
	struct fi_cq_tagged_entry e;

	do {
		ssize_t n = fi_cq_read(cq, &e, 1);

		if (n == 1 && e.op_context == ctx) {
			if (out)
				*out = e;
			return 0;
		}
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry ee;

			memset(&ee, 0, sizeof(ee));
			if (fi_cq_readerr(cq, &ee, 0) == 1 && ee.op_context == ctx)
				return ee.err;
		}
	} while (fx_now_ms() <= end);
	return -FI_ETIMEDOUT;
}

static void fx_stash_put(struct fx_stash *st, const struct fx_comp *c)
{
	assert_true(st->n < FX_STASH_MAX);
	st->seen[st->n++] = *c;
}

void fx_stash_poll(struct fid_cq *cq, struct fx_stash *st)
{
	struct fi_cq_tagged_entry ents[16];
	fi_addr_t src[16];
	struct fx_comp c;
	ssize_t n = fi_cq_readfrom(cq, ents, 16, src);

	if (n > 0) {
		for (ssize_t i = 0; i < n; i++) {
			memset(&c, 0, sizeof(c));
			c.ctx = ents[i].op_context;
			c.e = ents[i];
			c.src = src[i];
			fx_stash_put(st, &c);
		}
		return;
	}
	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry ee;

		memset(&ee, 0, sizeof(ee));
		assert_int_equal(fi_cq_readerr(cq, &ee, 0), 1);
		memset(&c, 0, sizeof(c));
		c.ctx = ee.op_context;
		c.e.op_context = ee.op_context;
		c.e.flags = ee.flags;
		c.e.len = ee.len;
		c.e.buf = ee.buf;
		c.e.data = ee.data;
		c.e.tag = ee.tag;
		c.src = FI_ADDR_NOTAVAIL; /* fi_cq_readerr has no source */
		c.err = ee.err;
		c.olen = ee.olen;
		assert_true(c.err > 0);
		fx_stash_put(st, &c);
		return;
	}
	assert_int_equal(n, -FI_EAGAIN);
}

int fx_stash_wait(struct fid_cq *cq, struct fx_stash *st, void *ctx, struct fx_comp *out,
		  unsigned ms)
{
	uint64_t end = fx_now_ms() + ms;

	for (;;) {
		for (size_t i = 0; i < st->n; i++) {
			if (st->seen[i].ctx != ctx)
				continue;
			if (out)
				*out = st->seen[i];
			memmove(&st->seen[i], &st->seen[i + 1], (st->n - i - 1) * sizeof(st->seen[0]));
			st->n--;
			return 0;
		}
		if (fx_now_ms() > end)
			return -FI_ETIMEDOUT;
		fx_stash_poll(cq, st);
	}
}

uint8_t fx_echo_pat(unsigned seed, size_t i)
{
	return (uint8_t)(seed * 131u + i * 7u + 3u);
}

void fx_echo(struct fx_env *e, fi_addr_t to, size_t len, unsigned seed, uint64_t tag)
{
	uint8_t *out = malloc(len + FX_ECHO_NAME), *back = malloc(len);
	struct fx_stash st = {.n = 0};
	struct fx_comp c;
	size_t nl = FX_ECHO_NAME;

	assert_non_null(out);
	assert_non_null(back);
	assert_int_equal(fi_getname(&e->ep->fid, out, &nl), 0);
	for (size_t i = 0; i < len; i++)
		out[FX_ECHO_NAME + i] = fx_echo_pat(seed, i);
	memset(back, 0, len);
	assert_int_equal(fi_trecv(e->ep, back, len, NULL, to, FX_TAG_ECHO, 0, back), 0);
	assert_int_equal(fi_tsend(e->ep, out, len + FX_ECHO_NAME, NULL, to, tag, out), 0);
	/* either may complete first (the echo can beat the send's own
	 * completion): a stash keeps the one not waited for yet */
	assert_int_equal(fx_stash_wait(e->cq, &st, out, &c, FX_ECHO_MS), 0);
	assert_int_equal(c.err, 0);
	assert_int_equal(fx_stash_wait(e->cq, &st, back, &c, FX_ECHO_MS), 0);
	assert_int_equal(c.err, 0);
	for (size_t i = 0; i < len; i++)
		if (back[i] != fx_echo_pat(seed, i))
			fail_msg("echo of %zu bytes differs at %zu", len, i);
	free(out);
	free(back);
}

int fx_echo_serve(struct fx_env *e, void *buf, size_t size, uint64_t ignore, int high,
		  uint64_t end, struct fi_cq_tagged_entry *ent)
{
	uint8_t *b = buf;
	uint64_t tag = FX_TAG_ECHO;
	fi_addr_t from;

	if (fi_trecv(e->ep, buf, size, NULL, FI_ADDR_UNSPEC, FX_TAG_ECHO, ignore, buf))
		return 3;
	for (;;) {
		ssize_t n = fi_cq_readfrom(e->cq, ent, 1, &from);

		if (n == 1 && ent->op_context == buf)
			break;
		if (fx_now_ms() > end)
			return -1;
	}
	/* the sender put its own name in the first bytes */
	if (from == FI_ADDR_NOTAVAIL && fi_av_insert(e->av, buf, 1, &from, 0, NULL) != 1)
		return 4;
	if (high && (ent->tag & ignore))
		tag = ent->tag & ignore;
	while (fi_tsend(e->ep, b + FX_ECHO_NAME, ent->len - FX_ECHO_NAME, NULL, from, tag, buf) ==
	       -FI_EAGAIN)
		fi_cq_read(e->cq, NULL, 0);
	if (fx_cq_wait(e->cq, buf, FX_ECHO_MS, NULL))
		return 5;
	return 0;
}

void fx_reap(pid_t pid)
{
	int st;

	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &st, 0), pid);
}
