/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * atomic_ref.h - the reference model of the atomic operations that
 * test/unit/test_atomic.c and test/integration/opx_rma_subtests.c check
 * opx against: element values (target, operand, compare) small enough
 * that every datatype represents them exactly, which op x datatype x call
 * libfabric's man page allows, each op's result computed in int64, and
 * how an element is stored and compared.  Written independently of the
 * provider (element sizes included), header only.
 */
#ifndef OPX_TEST_ATOMIC_REF_H
#define OPX_TEST_ATOMIC_REF_H

#include <complex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <rdma/fi_atomic.h>

#define NEL 3

/* Element values: target, operand, compare. */
static const int64_t V_D[NEL] = {6, 2, 0};
static const int64_t V_S[NEL] = {3, 7, 5};
static const int64_t V_C[NEL] = {6, 1, 0};

static inline bool is_cplx(int dt)
{
	return dt == FI_FLOAT_COMPLEX || dt == FI_DOUBLE_COMPLEX || dt == FI_LONG_DOUBLE_COMPLEX;
}

static inline bool is_int(int dt)
{
	return dt <= FI_UINT64 || dt == FI_INT128 || dt == FI_UINT128;
}

/* The man page's table, written independently of the provider's: kind 0
 * fi_atomic, 1 fi_fetch_atomic, 2 fi_compare_atomic. */
static inline bool ref_valid(int kind, int op, int dt)
{
	if (kind == 0 && !(op <= FI_BXOR || op == FI_ATOMIC_WRITE))
		return false;
	if (kind == 1 && op > FI_ATOMIC_WRITE)
		return false;
	if (kind == 2 && (op < FI_CSWAP || op > FI_MSWAP))
		return false;
	if (op == FI_BOR || op == FI_BAND || op == FI_BXOR || op == FI_MSWAP)
		return is_int(dt);
	if (op == FI_MIN || op == FI_MAX || (op >= FI_CSWAP_LE && op <= FI_CSWAP_GT))
		return !is_cplx(dt);
	return true;
}

/* The target's new value after op on target d, operand s, compare c. */
static inline int64_t ref_op(int op, int64_t d, int64_t s, int64_t c)
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

/* The size of one element of datatype dt (0: not a datatype). */
static inline size_t ref_size(int dt)
{
	switch (dt) {
	case FI_INT8: case FI_UINT8: return 1;
	case FI_INT16: case FI_UINT16: return 2;
	case FI_INT32: case FI_UINT32: case FI_FLOAT: return 4;
	case FI_INT64: case FI_UINT64: case FI_DOUBLE: case FI_FLOAT_COMPLEX: return 8;
	case FI_INT128: case FI_UINT128: return 16;
	case FI_LONG_DOUBLE: return sizeof(long double);
	case FI_DOUBLE_COMPLEX: return sizeof(double complex);
	case FI_LONG_DOUBLE_COMPLEX: return sizeof(long double complex);
	default: return 0;
	}
}

/* Store v as element i of buf (an array of datatype dt). */
static inline void ref_put(int dt, void *buf, int i, int64_t v)
{
	uint8_t *p = (uint8_t *)buf + (size_t)i * ref_size(dt);
#define REF_PUT(T) do { T x = (T)v; memcpy(p, &x, sizeof(x)); } while (0)
	switch (dt) {
	case FI_INT8: REF_PUT(int8_t); break;
	case FI_UINT8: REF_PUT(uint8_t); break;
	case FI_INT16: REF_PUT(int16_t); break;
	case FI_UINT16: REF_PUT(uint16_t); break;
	case FI_INT32: REF_PUT(int32_t); break;
	case FI_UINT32: REF_PUT(uint32_t); break;
	case FI_INT64: REF_PUT(int64_t); break;
	case FI_UINT64: REF_PUT(uint64_t); break;
	case FI_INT128: REF_PUT(__int128); break;
	case FI_UINT128: REF_PUT(unsigned __int128); break;
	case FI_FLOAT: REF_PUT(float); break;
	case FI_DOUBLE: REF_PUT(double); break;
	case FI_LONG_DOUBLE: REF_PUT(long double); break;
	case FI_FLOAT_COMPLEX: REF_PUT(float complex); break;
	case FI_DOUBLE_COMPLEX: REF_PUT(double complex); break;
	case FI_LONG_DOUBLE_COMPLEX: REF_PUT(long double complex); break;
	}
#undef REF_PUT
}

/* Compare element i of buf with v, exactly (imaginary part 0). */
static inline bool ref_same(int dt, const void *buf, int i, int64_t v)
{
	uint8_t want[32] = {0}, got[32] = {0};
	size_t sz = ref_size(dt);

	ref_put(dt, want, 0, v);
	memcpy(got, (const uint8_t *)buf + (size_t)i * sz, sz);
	if (dt == FI_LONG_DOUBLE) {
		/* x87 long double has 6 padding bytes: compare values */
		long double a, b;
		memcpy(&a, want, sizeof(a));
		memcpy(&b, got, sizeof(b));
		return a == b;
	}
	if (dt == FI_LONG_DOUBLE_COMPLEX) {
		long double complex a, b;
		memcpy(&a, want, sizeof(a));
		memcpy(&b, got, sizeof(b));
		return a == b;
	}
	return memcmp(want, got, sz) == 0;
}

#endif
