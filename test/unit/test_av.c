/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_av.c - address vector: insert / lookup / remove / straddr for
 * TABLE and MAP, argument validation, growth, the reverse (source) map
 * and close while bound.
 *
 * The fabric and domain come from the provider itself (fixture.h), so
 * the test needs no installed module.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fixture.h"
#include "opx.h"
#include "opx_av.h"

static struct fi_info *g_info;
static struct fid_fabric *g_fabric;
static struct fid_domain *g_domain;

static struct fx_env g_env;

static int group_setup(void **state)
{
	int ret;

	(void)state;
	ret = fx_open_domain(&g_env, NULL);
	if (ret) {
		fprintf(stderr, "fabric/domain: %d\n", ret);
		return -1;
	}
	g_info = g_env.info;
	g_fabric = g_env.fabric;
	g_domain = g_env.domain;
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	fx_close(&g_env);
	return 0;
}

static struct shim_addr mkaddr(uint16_t lid, uint16_t ctx, uint16_t unit, uint32_t nonce)
{
	struct shim_addr a;

	memset(&a, 0, sizeof(a));
	a.host_id = 0x1234abcdULL;
	a.lid = lid;
	a.ctx = ctx;
	a.unit = unit;
	a.nonce = nonce;
	a.pid = 42;
	return a;
}

static struct fid_av *open_av(enum fi_av_type type, size_t count)
{
	struct fi_av_attr attr = {.type = type, .count = count};
	struct fid_av *av = NULL;

	assert_int_equal(fi_av_open(g_domain, &attr, &av, NULL), 0);
	assert_non_null(av);
	return av;
}

static struct opx_av *opx_of(struct fid_av *av)
{
	return OPX_CONTAINER_OF(av, struct opx_av, av_fid);
}

/* The data path's lookups, with the domain lock they expect (a debug
 * build asserts it). */
static fi_addr_t av_src(struct opx_av *av, uint16_t lid, uint16_t ctx)
{
	fi_addr_t fa;

	opx_lock_acquire(&av->domain->lock);
	fa = opx_av_src_locked(av, lid, ctx);
	opx_lock_release(&av->domain->lock);
	return fa;
}

static int av_peer(struct opx_av *av, fi_addr_t addr, struct shim_peer **peer)
{
	int ret;

	opx_lock_acquire(&av->domain->lock);
	ret = opx_av_peer_locked(av, addr, peer);
	opx_lock_release(&av->domain->lock);
	return ret;
}

static void check_basic(enum fi_av_type type)
{
	struct fid_av *av = open_av(type, 0);
	struct shim_addr in[3] = {mkaddr(1, 0, 0, 7), mkaddr(1, 1, 0, 8), mkaddr(2, 5, 1, 9)};
	struct shim_addr out;
	fi_addr_t fa[3];
	size_t len;

	assert_int_equal(fi_av_insert(av, in, 3, fa, 0, NULL), 3);
	for (int i = 0; i < 3; i++) {
		assert_int_not_equal(fa[i], FI_ADDR_NOTAVAIL);
		len = sizeof(out);
		memset(&out, 0, sizeof(out));
		assert_int_equal(fi_av_lookup(av, fa[i], &out, &len), 0);
		assert_int_equal(len, sizeof(struct shim_addr));
		assert_memory_equal(&out, &in[i], sizeof(out));
	}
	if (type == FI_AV_TABLE) {
		/* man fi_av: table indices are assigned in order from 0 */
		assert_int_equal(fa[0], 0);
		assert_int_equal(fa[1], 1);
		assert_int_equal(fa[2], 2);
	}

	/* truncated lookup: copies what fits, reports the full size */
	len = 8;
	memset(&out, 0xee, sizeof(out));
	assert_int_equal(fi_av_lookup(av, fa[2], &out, &len), 0);
	assert_int_equal(len, sizeof(struct shim_addr));
	assert_memory_equal(&out, &in[2], 8);
	assert_int_equal(((uint8_t *)&out)[8], 0xee);

	assert_int_equal(fi_av_remove(av, &fa[1], 1, 0), 0);
	len = sizeof(out);
	assert_int_equal(fi_av_lookup(av, fa[1], &out, &len), -FI_EINVAL);
	assert_int_equal(fi_av_remove(av, &fa[1], 1, 0), -FI_EINVAL);
	assert_int_equal(fi_av_remove(av, &fa[0], 1, FI_MORE), -FI_EBADFLAGS);
	/* the others are untouched */
	len = sizeof(out);
	assert_int_equal(fi_av_lookup(av, fa[0], &out, &len), 0);
	assert_int_equal(fi_av_lookup(av, fa[2], &out, &len), 0);

	/* an index never handed out */
	len = sizeof(out);
	assert_int_equal(fi_av_lookup(av, 1000, &out, &len), -FI_EINVAL);
	assert_int_equal(fi_av_lookup(av, FI_ADDR_NOTAVAIL, &out, &len), -FI_EINVAL);
	fi_addr_t bad = 77;
	assert_int_equal(fi_av_remove(av, &bad, 1, 0), -FI_EINVAL);
	assert_int_equal(fi_av_lookup(av, fa[0], NULL, NULL), -FI_EINVAL);

	/* a failed multi-remove removes nothing */
	fi_addr_t two[2] = {fa[0], 999};
	assert_int_equal(fi_av_remove(av, two, 2, 0), -FI_EINVAL);
	len = sizeof(out);
	assert_int_equal(fi_av_lookup(av, fa[0], &out, &len), 0);

	assert_int_equal(fi_close(&av->fid), 0);
}

static void test_av_table_basic(void **state)
{
	(void)state;
	check_basic(FI_AV_TABLE);
}

static void test_av_map_basic(void **state)
{
	struct fid_av *av = open_av(FI_AV_MAP, 0);
	struct shim_addr a = mkaddr(3, 3, 0, 1);

	(void)state;
	/* MAP values are not predictable: fi_addr is required */
	assert_int_equal(fi_av_insert(av, &a, 1, NULL, 0, NULL), -FI_EINVAL);
	assert_int_equal(fi_close(&av->fid), 0);
	check_basic(FI_AV_MAP);
}

static void test_av_table_null_fi_addr(void **state)
{
	struct fid_av *av = open_av(FI_AV_TABLE, 0);
	struct shim_addr a[2] = {mkaddr(4, 1, 0, 1), mkaddr(4, 2, 0, 1)};
	struct shim_addr out;
	size_t len = sizeof(out);

	(void)state;
	assert_int_equal(fi_av_insert(av, a, 2, NULL, 0, NULL), 2);
	assert_int_equal(fi_av_lookup(av, 1, &out, &len), 0);
	assert_memory_equal(&out, &a[1], sizeof(out));
	assert_int_equal(fi_av_insert(av, a, 0, NULL, 0, NULL), 0);
	assert_int_equal(fi_av_insert(av, NULL, 1, NULL, 0, NULL), -FI_EINVAL);
	assert_int_equal(fi_av_insert(av, a, 1, NULL, FI_AV_USER_ID, NULL), -FI_EBADFLAGS);
	/* no such service */
	assert_int_equal(fi_av_insertsvc(av, "node", "svc", NULL, 0, NULL), -FI_EADDRNOTAVAIL);
	assert_int_equal(fi_close(&av->fid), 0);
}

static void test_av_invalid_addrs(void **state)
{
	struct fid_av *av = open_av(FI_AV_TABLE, 0);
	struct shim_addr in[5] = {
		mkaddr(1, 0, 0, 1),
		mkaddr(0, 0, 0, 1),                   /* lid 0 */
		mkaddr(1, SHIM_MAX_CTXTS, 0, 1),      /* ctx out of range */
		mkaddr(1, 2, SHIM_MAX_UNITS, 1),      /* unit out of range */
		mkaddr(1, SHIM_MAX_CTXTS - 1, 0, 1),
	};
	fi_addr_t fa[5];
	int err[5];

	(void)state;
	memset(err, 0x55, sizeof(err));
	assert_int_equal(fi_av_insert(av, in, 5, fa, FI_SYNC_ERR, err), 2);
	assert_int_equal(fa[0], 0);
	assert_int_equal(fa[1], FI_ADDR_NOTAVAIL);
	assert_int_equal(fa[2], FI_ADDR_NOTAVAIL);
	assert_int_equal(fa[3], FI_ADDR_NOTAVAIL);
	assert_int_equal(fa[4], 1);
	assert_int_equal(err[0], 0);
	assert_int_equal(err[1], FI_EINVAL);
	assert_int_equal(err[2], FI_EINVAL);
	assert_int_equal(err[3], FI_EINVAL);
	assert_int_equal(err[4], 0);
	/* FI_SYNC_ERR needs the status array */
	assert_int_equal(fi_av_insert(av, in, 1, fa, FI_SYNC_ERR, NULL), -FI_EINVAL);
	assert_int_equal(fi_close(&av->fid), 0);
}

static void test_av_open_attr(void **state)
{
	struct fi_av_attr attr;
	struct fid_av *av = NULL;

	(void)state;
	assert_int_equal(fi_av_open(g_domain, NULL, &av, NULL), -FI_EINVAL);

	memset(&attr, 0, sizeof(attr));
	attr.type = FI_AV_UNSPEC;
	assert_int_equal(fi_av_open(g_domain, &attr, &av, NULL), 0);
	assert_int_equal(attr.type, FI_AV_TABLE); /* the provider's pick is reported */
	assert_int_equal(fi_close(&av->fid), 0);

	memset(&attr, 0, sizeof(attr));
	attr.type = FI_AV_TABLE;
	attr.name = "shared";
	assert_int_equal(fi_av_open(g_domain, &attr, &av, NULL), -FI_ENOSYS);

	memset(&attr, 0, sizeof(attr));
	attr.type = FI_AV_TABLE;
	attr.flags = FI_EVENT;
	assert_int_equal(fi_av_open(g_domain, &attr, &av, NULL), -FI_ENOSYS);

	attr.flags = FI_READ;
	assert_int_equal(fi_av_open(g_domain, &attr, &av, NULL), -FI_EINVAL);

	attr.flags = FI_MORE;
	assert_int_equal(fi_av_open(g_domain, &attr, &av, NULL), -FI_EBADFLAGS);

	/* receive context bits (fi_rx_addr, test_sep): up to 16 */
	attr.flags = 0;
	attr.rx_ctx_bits = 4;
	assert_int_equal(fi_av_open(g_domain, &attr, &av, NULL), 0);
	assert_int_equal(fi_close(&av->fid), 0);
	attr.rx_ctx_bits = 17;
	assert_int_equal(fi_av_open(g_domain, &attr, &av, NULL), -FI_EINVAL);
	attr.rx_ctx_bits = -1;
	assert_int_equal(fi_av_open(g_domain, &attr, &av, NULL), -FI_EINVAL);

	memset(&attr, 0, sizeof(attr));
	attr.type = (enum fi_av_type)99;
	assert_int_equal(fi_av_open(g_domain, &attr, &av, NULL), -FI_EINVAL);

	memset(&attr, 0, sizeof(attr));
	attr.type = FI_AV_MAP;
	attr.flags = FI_SYMMETRIC; /* a hint: accepted */
	assert_int_equal(fi_av_open(g_domain, &attr, &av, NULL), 0);
	assert_int_equal(fi_av_bind(av, &g_domain->fid, 0), -FI_ENOSYS);
	assert_int_equal(fi_close(&av->fid), 0);
}

/* Thousands of inserts, one by one and in a batch, from a tiny size hint:
 * the table and reverse map grow and every address stays where it was. */
static void test_av_growth(void **state)
{
	enum { N = 5000 };
	struct fid_av *av = open_av(FI_AV_TABLE, 4);
	struct opx_av *oav = opx_of(av);
	struct shim_addr *in = calloc(2 * N, sizeof(*in));
	fi_addr_t *fa = calloc(2 * N, sizeof(*fa));

	(void)state;
	assert_non_null(in);
	assert_non_null(fa);
	for (int i = 0; i < 2 * N; i++)
		in[i] = mkaddr((uint16_t)(1 + i / 200), (uint16_t)(i % 200), 0, (uint32_t)i);
	for (int i = 0; i < N; i++)
		assert_int_equal(fi_av_insert(av, &in[i], 1, &fa[i], 0, NULL), 1);
	assert_int_equal(fi_av_insert(av, &in[N], N, &fa[N], FI_MORE, NULL), N);

	for (int i = 0; i < 2 * N; i++) {
		struct shim_addr out;
		size_t len = sizeof(out);

		assert_int_equal(fa[i], (fi_addr_t)i);
		assert_int_equal(fi_av_lookup(av, fa[i], &out, &len), 0);
		assert_memory_equal(&out, &in[i], sizeof(out));
		assert_int_equal(av_src(oav, in[i].lid, in[i].ctx), fa[i]);
	}
	free(in);
	free(fa);
	assert_int_equal(fi_close(&av->fid), 0);
}

/* The reverse map: latest insert wins, removal falls back to an older
 * live entry with the same (lid, ctx), then NOTAVAIL. */
static void test_av_reverse_map(void **state)
{
	struct fid_av *av = open_av(FI_AV_MAP, 0);
	struct opx_av *oav = opx_of(av);
	struct shim_addr a = mkaddr(9, 4, 0, 100);
	struct shim_addr b = mkaddr(9, 4, 0, 200); /* same context, restarted */
	struct shim_addr c = mkaddr(9, 5, 0, 300);
	fi_addr_t fa, fb, fc;

	(void)state;
	assert_int_equal(av_src(oav, 9, 4), FI_ADDR_NOTAVAIL);
	assert_int_equal(fi_av_insert(av, &a, 1, &fa, 0, NULL), 1);
	assert_int_equal(av_src(oav, 9, 4), fa);
	assert_int_equal(fi_av_insert(av, &b, 1, &fb, 0, NULL), 1);
	assert_int_equal(fi_av_insert(av, &c, 1, &fc, 0, NULL), 1);
	assert_int_equal(av_src(oav, 9, 4), fb);
	assert_int_equal(av_src(oav, 9, 5), fc);
	assert_int_equal(av_src(oav, 9, 6), FI_ADDR_NOTAVAIL);
	assert_int_equal(av_src(oav, 0xffff, 0xffff), FI_ADDR_NOTAVAIL);

	assert_int_equal(fi_av_remove(av, &fb, 1, 0), 0);
	assert_int_equal(av_src(oav, 9, 4), fa);
	assert_int_equal(fi_av_remove(av, &fa, 1, 0), 0);
	assert_int_equal(av_src(oav, 9, 4), FI_ADDR_NOTAVAIL);
	assert_int_equal(av_src(oav, 9, 5), fc);
	assert_int_equal(fi_av_remove(av, &fc, 1, 0), 0);
	assert_int_equal(av_src(oav, 9, 5), FI_ADDR_NOTAVAIL);
	assert_int_equal(fi_close(&av->fid), 0);
}

/* Remove every third entry of a large AV and check that every other
 * source lookup still finds its entry (probe chains stay intact). */
static void test_av_reverse_map_remove_many(void **state)
{
	enum { N = 3000 };
	struct fid_av *av = open_av(FI_AV_TABLE, 0);
	struct opx_av *oav = opx_of(av);
	struct shim_addr *in = calloc(N, sizeof(*in));

	(void)state;
	assert_non_null(in);
	for (int i = 0; i < N; i++)
		in[i] = mkaddr((uint16_t)(1 + i % 37), (uint16_t)(i / 37), 0, 1);
	assert_int_equal(fi_av_insert(av, in, N, NULL, 0, NULL), N);
	for (fi_addr_t i = 0; i < N; i += 3)
		assert_int_equal(fi_av_remove(av, &i, 1, 0), 0);
	for (int i = 0; i < N; i++) {
		fi_addr_t want = (i % 3 == 0) ? FI_ADDR_NOTAVAIL : (fi_addr_t)i;
		assert_int_equal(av_src(oav, in[i].lid, in[i].ctx), want);
	}
	free(in);
	assert_int_equal(fi_close(&av->fid), 0);
}

static void test_av_straddr(void **state)
{
	struct fid_av *av = open_av(FI_AV_TABLE, 0);
	struct shim_addr a = mkaddr(17, 3, 1, 0xbeef);
	char full[128], small[8];
	size_t len = sizeof(full);
	size_t need;

	(void)state;
	assert_ptr_equal(fi_av_straddr(av, &a, full, &len), full);
	assert_string_equal(full, "opx://1234abcd/17:3:1/beef");
	need = strlen(full) + 1;
	assert_int_equal(len, need);

	/* too small: truncated, NUL-terminated, len says what is needed */
	len = sizeof(small);
	memset(small, 'x', sizeof(small));
	assert_ptr_equal(fi_av_straddr(av, &a, small, &len), small);
	assert_int_equal(len, need);
	assert_int_equal(small[sizeof(small) - 1], '\0');
	assert_memory_equal(small, full, sizeof(small) - 1);

	/* zero-length buffer: only the size */
	len = 0;
	assert_ptr_equal(fi_av_straddr(av, &a, small, &len), small);
	assert_int_equal(len, need);

	assert_null(fi_av_straddr(av, NULL, full, &len));
	assert_null(fi_av_straddr(av, &a, full, NULL));
	assert_int_equal(fi_close(&av->fid), 0);
}

static void test_av_peer_invalid(void **state)
{
	struct fid_av *av = open_av(FI_AV_TABLE, 0);
	struct opx_av *oav = opx_of(av);
	struct shim_addr a = mkaddr(1, 200, 0, 1);
	struct shim_peer *peer = NULL;
	fi_addr_t fa;

	(void)state;
	assert_int_equal(av_peer(oav, 0, &peer), -FI_EINVAL);
	assert_int_equal(av_peer(oav, FI_ADDR_NOTAVAIL, &peer), -FI_EINVAL);
	assert_int_equal(fi_av_insert(av, &a, 1, &fa, 0, NULL), 1);
	assert_int_equal(fi_av_remove(av, &fa, 1, 0), 0);
	assert_int_equal(av_peer(oav, fa, &peer), -FI_EINVAL);
	assert_null(peer);
	assert_int_equal(fi_close(&av->fid), 0);
}

/* An AV with a bound endpoint cannot close.  With a real endpoint when
 * one can be opened here, else by holding the reference the endpoint's
 * bind would take. */
static void test_av_close_busy(void **state)
{
	struct fid_av *av = open_av(FI_AV_TABLE, 0);
	struct fid_ep *ep = NULL;

	(void)state;
	if (fi_endpoint(g_domain, g_info, &ep, NULL) == 0) {
		assert_int_equal(fi_ep_bind(ep, &av->fid, 0), 0);
		assert_int_equal(fi_close(&av->fid), -FI_EBUSY);
		assert_int_equal(fi_close(&ep->fid), 0);
	} else {
		atomic_fetch_add(&opx_of(av)->refcnt, 1);
		assert_int_equal(fi_close(&av->fid), -FI_EBUSY);
		atomic_fetch_sub(&opx_of(av)->refcnt, 1);
	}
	assert_int_equal(fi_close(&av->fid), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_av_table_basic),
		cmocka_unit_test(test_av_map_basic),
		cmocka_unit_test(test_av_table_null_fi_addr),
		cmocka_unit_test(test_av_invalid_addrs),
		cmocka_unit_test(test_av_open_attr),
		cmocka_unit_test(test_av_growth),
		cmocka_unit_test(test_av_reverse_map),
		cmocka_unit_test(test_av_reverse_map_remove_many),
		cmocka_unit_test(test_av_straddr),
		cmocka_unit_test(test_av_peer_invalid),
		cmocka_unit_test(test_av_close_busy),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
