/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_domain.c - fabric, domain, MR and EQ, including the negative API
 * paths, and the shared fixture's loopback environment.  Init,
 * parameters and fi_getinfo: test_info.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fixture.h"
#include "opx.h"

/* Mirrors OPX_EQ_WRITE_ERR in prov/opx_eq.c. */
#define TEST_EQ_WRITE_ERR (1ULL << 60)

/* ---------------------------------------------------------------------
 * Fabric, domain, MR.
 */
struct objs {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
};

static void objs_open(struct objs *o, uint64_t mr_mode)
{
	memset(o, 0, sizeof(*o));
	assert_int_equal(fx_getinfo(NULL, 0, &o->info), 0);
	o->info->domain_attr->mr_mode = (int)mr_mode;
	assert_int_equal(fx_prov()->fabric(o->info->fabric_attr, &o->fabric, NULL), 0);
	assert_int_equal(fi_domain(o->fabric, o->info, &o->domain, NULL), 0);
}

static void objs_close(struct objs *o)
{
	assert_int_equal(fi_close(&o->domain->fid), 0);
	assert_int_equal(fi_close(&o->fabric->fid), 0);
	fi_freeinfo(o->info);
}

/* A key lookup with the domain lock it expects (a debug build asserts it). */
static struct opx_mr *mr_find(struct opx_domain *d, uint64_t key)
{
	struct opx_mr *mr;

	opx_lock_acquire(&d->lock);
	mr = opx_mr_find_locked(d, key);
	opx_lock_release(&d->lock);
	return mr;
}

static void test_fabric_open_close(void **state)
{
	(void)state;
	struct fi_info *fi = NULL;
	struct fid_fabric *fab = NULL;
	struct fi_fabric_attr attr;

	assert_int_equal(fx_prov()->getinfo(FX_VERSION, NULL, NULL, 0, NULL, &fi), 0);
	assert_int_equal(fx_prov()->fabric(NULL, &fab, NULL), -FI_EINVAL);
	assert_int_equal(fx_prov()->fabric(fi->fabric_attr, NULL, NULL), -FI_EINVAL);
	attr = *fi->fabric_attr;
	attr.name = (char *)"other";
	assert_int_equal(fx_prov()->fabric(&attr, &fab, NULL), -FI_ENODATA);
	assert_int_equal(fx_prov()->fabric(fi->fabric_attr, &fab, (void *)0x1234), 0);
	assert_int_equal(fab->fid.fclass, FI_CLASS_FABRIC);
	assert_ptr_equal(fab->fid.context, (void *)0x1234);
	/* Unsupported fabric ops. */
	assert_int_equal(fi_passive_ep(fab, fi, NULL, NULL), -FI_ENOSYS);
	assert_int_equal(fi_close(&fab->fid), 0);
	fi_freeinfo(fi);
}

static void test_close_with_children_busy(void **state)
{
	(void)state;
	struct objs o;
	struct fid_mr *mr = NULL;
	struct fi_eq_attr eq_attr = {.wait_obj = FI_WAIT_NONE};
	struct fid_eq *eq = NULL;
	char buf[64];

	objs_open(&o, 0);
	/* Fabric with a domain open. */
	assert_int_equal(fi_close(&o.fabric->fid), -FI_EBUSY);
	/* Domain with an MR open. */
	assert_int_equal(fi_mr_reg(o.domain, buf, sizeof(buf), FI_SEND, 0, 7, 0, &mr, NULL), 0);
	assert_int_equal(fi_close(&o.domain->fid), -FI_EBUSY);
	/* Both still usable after the refusal. */
	assert_int_equal(fi_close(&mr->fid), 0);
	assert_int_equal(fi_mr_reg(o.domain, buf, sizeof(buf), FI_SEND, 0, 7, 0, &mr, NULL), 0);
	assert_int_equal(fi_close(&mr->fid), 0);
	/* Fabric with an EQ open. */
	assert_int_equal(fi_eq_open(o.fabric, &eq_attr, &eq, NULL), 0);
	assert_int_equal(fi_close(&o.domain->fid), 0);
	assert_int_equal(fi_close(&o.fabric->fid), -FI_EBUSY);
	assert_int_equal(fi_close(&eq->fid), 0);
	assert_int_equal(fi_close(&o.fabric->fid), 0);
	fi_freeinfo(o.info);
}

static void test_domain_open_args(void **state)
{
	(void)state;
	struct objs o;
	struct fid_domain *d = NULL;
	struct fi_info *bad;
	char *name;

	objs_open(&o, 0);
	assert_int_equal(fi_domain(o.fabric, NULL, &d, NULL), -FI_EINVAL);
	assert_int_equal(fi_domain(o.fabric, o.info, NULL, NULL), -FI_EINVAL);

	bad = fi_dupinfo(o.info);
	assert_non_null(bad);
	name = bad->domain_attr->name;
	bad->domain_attr->name = strdup("opx_99");
	free(name);
	assert_int_equal(fi_domain(o.fabric, bad, &d, NULL), -FI_EINVAL);
	fi_freeinfo(bad);

	bad = fi_dupinfo(o.info);
	bad->caps |= FI_TRIGGER;
	assert_int_equal(fi_domain(o.fabric, bad, &d, NULL), -FI_EOPNOTSUPP);
	fi_freeinfo(bad);

	/* A second domain on the same fabric works; unsupported ops say so. */
	assert_int_equal(fi_domain(o.fabric, o.info, &d, NULL), 0);
	/* scalable endpoints: test_sep; a NULL result is an argument error */
	assert_int_equal(fi_scalable_ep(d, o.info, NULL, NULL), -FI_EINVAL);
	assert_int_equal(fi_stx_context(d, NULL, NULL, NULL), -FI_ENOSYS);
	assert_int_equal(fi_srx_context(d, NULL, NULL, NULL), -FI_ENOSYS);
	assert_int_equal(fi_close(&d->fid), 0);
	objs_close(&o);
}

static void test_mr_reg(void **state)
{
	(void)state;
	struct objs o;
	struct fid_mr *a = NULL, *b = NULL, *c = NULL;
	char buf[256];
	struct opx_domain *dom;

	objs_open(&o, 0);
	dom = OPX_CONTAINER_OF(o.domain, struct opx_domain, domain_fid);
	assert_int_equal(fi_mr_reg(o.domain, buf, sizeof(buf), FI_SEND | FI_RECV | FI_REMOTE_WRITE,
				   0, 42, 0, &a, (void *)0x99),
			 0);
	assert_int_equal(fi_mr_key(a), 42);
	assert_non_null(fi_mr_desc(a));
	assert_ptr_equal(a->fid.context, (void *)0x99);
	assert_ptr_equal(mr_find(dom, 42), fi_mr_desc(a));
	assert_null(mr_find(dom, 43));

	/* Duplicate key. */
	assert_int_equal(fi_mr_reg(o.domain, buf, 8, FI_SEND, 0, 42, 0, &b, NULL), -FI_ENOKEY);
	/* Zero-length and distinct keys are fine. */
	assert_int_equal(fi_mr_reg(o.domain, buf, 0, FI_SEND, 0, 43, 0, &b, NULL), 0);
	assert_int_equal(fi_close(&a->fid), 0);
	assert_null(mr_find(dom, 42));
	/* The key is free again after close. */
	assert_int_equal(fi_mr_reg(o.domain, buf, 8, FI_RECV, 0, 42, 0, &c, NULL), 0);
	assert_int_equal(fi_close(&c->fid), 0);
	assert_int_equal(fi_close(&b->fid), 0);
	objs_close(&o);
}

static void test_mr_bad_args(void **state)
{
	(void)state;
	struct objs o;
	struct fid_mr *mr = NULL;
	char buf[64];
	struct iovec iov[OPX_IOV_LIMIT + 1];
	struct fi_mr_attr attr;
	size_t i;

	objs_open(&o, 0);
	for (i = 0; i < OPX_IOV_LIMIT + 1; i++) {
		iov[i].iov_base = buf + i;
		iov[i].iov_len = 1;
	}
	assert_int_equal(fi_mr_regv(o.domain, iov, OPX_IOV_LIMIT + 1, FI_SEND, 0, 1, 0, &mr, NULL),
			 -FI_EINVAL);
	assert_int_equal(fi_mr_regv(o.domain, NULL, 1, FI_SEND, 0, 1, 0, &mr, NULL), -FI_EINVAL);
	/* memory that is not there: taken where mr_mode lacks FI_MR_ALLOCATED
	 * (test_rma.c's test_mr_whole_space: refused with it), but never a
	 * range that wraps the address space */
	assert_int_equal(fi_mr_reg(o.domain, NULL, 8, FI_SEND, 0, 1, 0, &mr, NULL), 0);
	assert_int_equal(fi_close(&mr->fid), 0);
	assert_int_equal(fi_mr_reg(o.domain, buf, UINTPTR_MAX, FI_SEND, 0, 1, 0, &mr, NULL),
			 -FI_EINVAL);
	assert_int_equal(fi_mr_reg(o.domain, buf, 8, 1ULL << 50, 0, 1, 0, &mr, NULL), -FI_EINVAL);
	assert_int_equal(fi_mr_reg(o.domain, buf, 8, FI_SEND, 0, 1, 1ULL << 3, &mr, NULL),
			 -FI_EBADFLAGS);
	assert_int_equal(fi_mr_regattr(o.domain, NULL, 0, &mr), -FI_EINVAL);
	memset(&attr, 0, sizeof(attr));
	attr.mr_iov = iov;
	attr.iov_count = 1;
	attr.access = FI_SEND;
	attr.requested_key = 5;
	assert_int_equal(fi_mr_regattr(o.domain, &attr, 0, NULL), -FI_EINVAL);
	/* Still usable. */
	assert_int_equal(fi_mr_regattr(o.domain, &attr, 0, &mr), 0);
	assert_int_equal(fi_mr_key(mr), 5);
	assert_int_equal(fi_mr_regv(o.domain, iov, OPX_IOV_LIMIT, FI_SEND, 0, 1, 0, &mr, NULL), 0);
	/* mr now names the regv region; close both through the domain list. */
	{
		struct opx_domain *dom = OPX_CONTAINER_OF(o.domain, struct opx_domain, domain_fid);
		struct opx_mr *m5 = mr_find(dom, 5);

		assert_non_null(m5);
		assert_int_equal(fi_close(&m5->mr_fid.fid), 0);
	}
	assert_int_equal(fi_close(&mr->fid), 0);
	objs_close(&o);
}

static void test_mr_prov_key(void **state)
{
	(void)state;
	struct objs o;
	struct fid_mr *a = NULL, *b = NULL;
	char buf[64];

	objs_open(&o, FI_MR_PROV_KEY);
	assert_int_equal(fi_mr_reg(o.domain, buf, 8, FI_SEND, 0, 42, 0, &a, NULL), 0);
	assert_int_equal(fi_mr_reg(o.domain, buf, 8, FI_SEND, 0, 42, 0, &b, NULL), 0);
	assert_int_not_equal(fi_mr_key(a), fi_mr_key(b));
	assert_int_equal(fi_close(&a->fid), 0);
	assert_int_equal(fi_close(&b->fid), 0);
	objs_close(&o);
}

/* ---------------------------------------------------------------------
 * EQ.
 */
static void eq_setup(struct objs *o, struct fid_eq **eq, enum fi_wait_obj wait)
{
	struct fi_eq_attr attr = {.wait_obj = wait};

	objs_open(o, 0);
	assert_int_equal(fi_eq_open(o->fabric, &attr, eq, NULL), 0);
}

static void eq_teardown(struct objs *o, struct fid_eq *eq)
{
	assert_int_equal(fi_close(&eq->fid), 0);
	objs_close(o);
}

/* Issue 10 item 3: fi_trywait(3) takes EQs as well as CQs and counters:
 * 0 when the EQ is empty (safe to block on its fd), -FI_EAGAIN while an
 * event is queued; an EQ without a wait object cannot be waited on. */
static void test_eq_trywait(void **state)
{
	(void)state;
	struct objs o;
	struct fid_eq *eq, *eq_none;
	struct fi_eq_attr none_attr = {.wait_obj = FI_WAIT_NONE};
	struct fi_eq_entry in = {.context = (void *)0x55}, out;
	struct fid *fids[1];
	uint32_t event = 0;

	eq_setup(&o, &eq, FI_WAIT_FD);
	fids[0] = &eq->fid;
	assert_int_equal(fi_trywait(o.fabric, fids, 1), 0);
	assert_int_equal(fi_eq_write(eq, FI_NOTIFY, &in, sizeof(in), 0), sizeof(in));
	assert_int_equal(fi_trywait(o.fabric, fids, 1), -FI_EAGAIN);
	assert_int_equal(fi_eq_read(eq, &event, &out, sizeof(out), 0), sizeof(in));
	assert_ptr_equal(out.context, (void *)0x55);
	assert_int_equal(fi_trywait(o.fabric, fids, 1), 0);

	assert_int_equal(fi_eq_open(o.fabric, &none_attr, &eq_none, NULL), 0);
	fids[0] = &eq_none->fid;
	assert_int_equal(fi_trywait(o.fabric, fids, 1), -FI_EINVAL);
	assert_int_equal(fi_close(&eq_none->fid), 0);
	eq_teardown(&o, eq);
}

static void test_eq_write_read(void **state)
{
	(void)state;
	struct objs o;
	struct fid_eq *eq;
	struct fi_eq_entry in = {.fid = NULL, .context = (void *)0x77, .data = 5}, out;
	uint32_t event = 0;
	int fd = -1;

	eq_setup(&o, &eq, FI_WAIT_FD);
	assert_int_equal(fi_control(&eq->fid, FI_GETWAIT, &fd), 0);
	assert_true(fd >= 0);
	assert_int_equal(fi_eq_read(eq, &event, &out, sizeof(out), 0), -FI_EAGAIN);
	assert_int_equal(fi_eq_write(eq, FI_NOTIFY, &in, sizeof(in), 0), sizeof(in));
	memset(&out, 0, sizeof(out));
	assert_int_equal(fi_eq_read(eq, &event, &out, sizeof(out), FI_PEEK), sizeof(in));
	assert_int_equal(event, FI_NOTIFY);
	assert_ptr_equal(out.context, (void *)0x77);
	memset(&out, 0, sizeof(out));
	assert_int_equal(fi_eq_read(eq, &event, &out, sizeof(out), 0), sizeof(in));
	assert_int_equal(out.data, 5);
	assert_int_equal(fi_eq_read(eq, &event, &out, sizeof(out), 0), -FI_EAGAIN);
	/* Too small a buffer leaves the event queued. */
	assert_int_equal(fi_eq_write(eq, FI_NOTIFY, &in, sizeof(in), 0), sizeof(in));
	assert_int_equal(fi_eq_read(eq, &event, &out, 4, 0), -FI_ETOOSMALL);
	assert_int_equal(fi_eq_read(eq, &event, &out, sizeof(out), 0), sizeof(in));
	eq_teardown(&o, eq);
}

static void test_eq_readerr(void **state)
{
	(void)state;
	struct objs o;
	struct fid_eq *eq;
	struct fi_eq_err_entry err = {.context = (void *)0x5, .err = FI_EIO, .prov_errno = 3};
	struct fi_eq_err_entry out;
	struct fi_eq_entry ev;
	uint32_t event;
	char text[128];

	eq_setup(&o, &eq, FI_WAIT_UNSPEC);
	memset(&out, 0, sizeof(out));
	assert_int_equal(fi_eq_readerr(eq, &out, 0), -FI_EAGAIN);
	assert_int_equal(fi_eq_write(eq, 0, &err, sizeof(err), TEST_EQ_WRITE_ERR), sizeof(err));
	assert_int_equal(fi_eq_read(eq, &event, &ev, sizeof(ev), 0), -FI_EAVAIL);
	assert_int_equal(fi_eq_readerr(eq, &out, 0), sizeof(out));
	assert_int_equal(out.err, FI_EIO);
	assert_int_equal(out.prov_errno, 3);
	assert_ptr_equal(out.context, (void *)0x5);
	assert_int_equal(fi_eq_readerr(eq, &out, 0), -FI_EAGAIN);
	assert_int_equal(fi_eq_read(eq, &event, &ev, sizeof(ev), 0), -FI_EAGAIN);
	assert_non_null(fi_eq_strerror(eq, out.prov_errno, NULL, text, sizeof(text)));
	assert_true(strlen(text) > 0);
	assert_non_null(fi_eq_strerror(eq, FI_EIO, NULL, NULL, 0));
	eq_teardown(&o, eq);
}

static long elapsed_ms(const struct timespec *a)
{
	struct timespec b;

	clock_gettime(CLOCK_MONOTONIC, &b);
	return (b.tv_sec - a->tv_sec) * 1000 + (b.tv_nsec - a->tv_nsec) / 1000000;
}

static void test_eq_sread(void **state)
{
	(void)state;
	struct objs o;
	struct fid_eq *eq;
	struct fi_eq_entry ev = {.data = 9};
	uint32_t event;
	struct timespec t0;
	long ms;

	eq_setup(&o, &eq, FI_WAIT_FD);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(fi_eq_sread(eq, &event, &ev, sizeof(ev), 50, 0), -FI_EAGAIN);
	ms = elapsed_ms(&t0);
	assert_true(ms >= 45 && ms < 2000);
	assert_int_equal(fi_eq_write(eq, FI_NOTIFY, &ev, sizeof(ev), 0), sizeof(ev));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(fi_eq_sread(eq, &event, &ev, sizeof(ev), 1000, 0), sizeof(ev));
	assert_true(elapsed_ms(&t0) < 500);
	assert_int_equal(fi_eq_sread(eq, &event, &ev, sizeof(ev), 0, 0), -FI_EAGAIN);
	eq_teardown(&o, eq);
}

static void test_eq_bad_args(void **state)
{
	(void)state;
	struct objs o;
	struct fid_eq *eq = NULL;
	struct fi_eq_attr attr = {.wait_obj = FI_WAIT_MUTEX_COND};
	struct fi_eq_entry ev;
	uint32_t event;
	int fd;

	objs_open(&o, 0);
	assert_int_equal(fi_eq_open(o.fabric, &attr, &eq, NULL), -FI_ENOSYS);
	assert_int_equal(fi_eq_open(o.fabric, NULL, &eq, NULL), -FI_EINVAL);
	objs_close(&o);

	eq_setup(&o, &eq, FI_WAIT_NONE);
	assert_int_equal(fi_eq_sread(eq, &event, &ev, sizeof(ev), 10, 0), -FI_EINVAL);
	assert_int_equal(fi_control(&eq->fid, FI_GETWAIT, &fd), -FI_ENODATA);
	assert_int_equal(fi_eq_write(eq, FI_NOTIFY, &ev, sizeof(ev), 1ULL << 2), -FI_EBADFLAGS);
	assert_int_equal(fi_eq_write(eq, FI_NOTIFY, NULL, 8, 0), -FI_EINVAL);
	assert_int_equal(fi_eq_read(eq, &event, &ev, sizeof(ev), 1ULL << 2), -FI_EBADFLAGS);
	assert_int_equal(fi_eq_readerr(eq, NULL, 0), -FI_EINVAL);
	/* Still usable. */
	assert_int_equal(fi_eq_write(eq, FI_NOTIFY, &ev, sizeof(ev), 0), sizeof(ev));
	assert_int_equal(fi_eq_read(eq, &event, &ev, sizeof(ev), 0), sizeof(ev));
	eq_teardown(&o, eq);
}

/* ---------------------------------------------------------------------
 * The shared fixture itself, once the endpoint exists.
 */
static void test_fixture_env(void **state)
{
	(void)state;
	struct fx_env e;
	int ret = fx_open(&e, FI_AV_TABLE, FI_CQ_FORMAT_TAGGED);

	if (ret == -FI_ENOSYS)
		skip();
	assert_int_equal(ret, 0);
	assert_non_null(e.ep);
	assert_int_not_equal(e.self, FI_ADDR_NOTAVAIL);
	fx_close(&e);
	assert_null(e.ep);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fabric_open_close),
		cmocka_unit_test(test_close_with_children_busy),
		cmocka_unit_test(test_domain_open_args),
		cmocka_unit_test(test_mr_reg),
		cmocka_unit_test(test_mr_bad_args),
		cmocka_unit_test(test_mr_prov_key),
		cmocka_unit_test(test_eq_write_read),
		cmocka_unit_test(test_eq_trywait),
		cmocka_unit_test(test_eq_readerr),
		cmocka_unit_test(test_eq_sread),
		cmocka_unit_test(test_eq_bad_args),
		cmocka_unit_test(test_fixture_env),
	};
	fx_param_defaults(); /* parameters are read once per process */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
