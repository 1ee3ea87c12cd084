/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_atomic.c - atomic operations: the op x datatype kernels the target
 * runs, and which op is valid on which type, as fi_query_atomic answers
 * (the fi_atomic / fi_fetch_atomic / fi_compare_atomic entry points and
 * the *valid calls are in opx_atomic_api.c, from the same table).
 *
 * The kernels are one function per datatype, each made from the same
 * few per-family case lists (every type, ordered types, integers), so
 * what an op means is written once.  Elements are loaded and stored with
 * memcpy: the target's address need not be aligned, and the compiler
 * still emits plain loads and stores.  Signed integer arithmetic is done
 * in the unsigned type (wrap-around, never undefined behaviour).  The
 * common accumulates on integers, float and double (SUM PROD MIN MAX,
 * the bitwise ops, ATOMIC_READ/WRITE) also have a vectorised kernel, by
 * blocks, that runs a large accumulate at about the speed of memcpy.
 *
 * Which op is valid on which type (the data path and fi_query_atomic use
 * the same table, opx_atomic_valid):
 *   MIN MAX CSWAP_LE/LT/GE/GT      integers and real floating types
 *   SUM PROD LOR LAND LXOR         every type, complex included
 *   ATOMIC_READ ATOMIC_WRITE       every type
 *   CSWAP CSWAP_NE                 every type
 *   BOR BAND BXOR MSWAP            integers
 * fi_atomic takes MIN..BXOR and ATOMIC_WRITE, fi_fetch_atomic those and
 * ATOMIC_READ, fi_compare_atomic CSWAP..MSWAP.
 */
#include <complex.h>
#include <string.h>

#include "opx_ep.h"
#include "opx_rma.h"

typedef __int128 opx_i128;
typedef unsigned __int128 opx_u128;

size_t opx_atomic_dt_size(enum fi_datatype dt)
{
	switch (dt) {
	case FI_INT8: case FI_UINT8: return 1;
	case FI_INT16: case FI_UINT16: return 2;
	case FI_INT32: case FI_UINT32: return 4;
	case FI_INT64: case FI_UINT64: return 8;
	case FI_FLOAT: return sizeof(float);
	case FI_DOUBLE: return sizeof(double);
	case FI_FLOAT_COMPLEX: return sizeof(float complex);
	case FI_DOUBLE_COMPLEX: return sizeof(double complex);
	case FI_LONG_DOUBLE: return sizeof(long double);
	case FI_LONG_DOUBLE_COMPLEX: return sizeof(long double complex);
	case FI_INT128: case FI_UINT128: return 16;
	default: return 0;
	}
}

static bool opx_atomic_dt_int(enum fi_datatype dt)
{
	return (dt >= FI_INT8 && dt <= FI_UINT64) || dt == FI_INT128 || dt == FI_UINT128;
}

static bool opx_atomic_dt_complex(enum fi_datatype dt)
{
	return dt == FI_FLOAT_COMPLEX || dt == FI_DOUBLE_COMPLEX || dt == FI_LONG_DOUBLE_COMPLEX;
}

bool opx_atomic_valid(enum opx_atomic_kind kind, enum fi_op op, enum fi_datatype dt)
{
	if (!opx_atomic_dt_size(dt))
		return false;
	switch (kind) {
	case OPX_AK_WRITE:
		if (!(op <= FI_BXOR || op == FI_ATOMIC_WRITE))
			return false;
		break;
	case OPX_AK_FETCH:
		if (op > FI_ATOMIC_WRITE)
			return false;
		break;
	case OPX_AK_COMPARE:
		if (op < FI_CSWAP || op > FI_MSWAP)
			return false;
		break;
	default:
		return false;
	}
	switch (op) {
	case FI_MIN: case FI_MAX: case FI_CSWAP_LE: case FI_CSWAP_LT: case FI_CSWAP_GE:
	case FI_CSWAP_GT:
		return !opx_atomic_dt_complex(dt);
	case FI_BOR: case FI_BAND: case FI_BXOR: case FI_MSWAP:
		return opx_atomic_dt_int(dt);
	default:
		return true;
	}
}

/* Case lists.  In scope: T d (the target's value, updated in place),
 * T s (operand), T c (compare value), UT (arithmetic type). */
#define OPX_AT_CASES_ALL(T, UT)                                                                    \
	case FI_SUM: d = (T)((UT)d + (UT)s); break;                                                \
	case FI_PROD: d = (T)((UT)d * (UT)s); break;                                               \
	case FI_LOR: d = (T)((d != 0) || (s != 0)); break;                                         \
	case FI_LAND: d = (T)((d != 0) && (s != 0)); break;                                        \
	case FI_LXOR: d = (T)((d != 0) != (s != 0)); break;                                        \
	case FI_ATOMIC_READ: break;                                                                \
	case FI_ATOMIC_WRITE: d = s; break;                                                        \
	case FI_CSWAP: if (c == d) d = s; break;                                                   \
	case FI_CSWAP_NE: if (c != d) d = s; break;

#define OPX_AT_CASES_ORDER                                                                         \
	case FI_MIN: if (s < d) d = s; break;                                                      \
	case FI_MAX: if (s > d) d = s; break;                                                      \
	case FI_CSWAP_LE: if (c <= d) d = s; break;                                                \
	case FI_CSWAP_LT: if (c < d) d = s; break;                                                 \
	case FI_CSWAP_GE: if (c >= d) d = s; break;                                                \
	case FI_CSWAP_GT: if (c > d) d = s; break;

#define OPX_AT_CASES_BITS                                                                          \
	case FI_BOR: d = d | s; break;                                                             \
	case FI_BAND: d = d & s; break;                                                            \
	case FI_BXOR: d = d ^ s; break;                                                            \
	case FI_MSWAP: d = (s & c) | (d & ~c); break;

/* One kernel per type; CASES are the case lists that apply to it. */
#define OPX_AT_KERNEL(name, T, CASES)                                                              \
	static int name(enum fi_op op, uint8_t *dst, const uint8_t *src, const uint8_t *cmp,      \
			uint8_t *res, size_t cnt)                                                  \
	{                                                                                          \
		for (size_t i = 0; i < cnt; i++) {                                                 \
			T d, s = 0, c = 0;                                                         \
			memcpy(&d, dst + i * sizeof(T), sizeof(T));                                \
			if (src)                                                                   \
				memcpy(&s, src + i * sizeof(T), sizeof(T));                        \
			if (cmp)                                                                   \
				memcpy(&c, cmp + i * sizeof(T), sizeof(T));                        \
			if (res)                                                                   \
				memcpy(res + i * sizeof(T), &d, sizeof(T));                        \
			switch (op) {                                                              \
				CASES                                                              \
			default:                                                                   \
				return -FI_EOPNOTSUPP;                                             \
			}                                                                          \
			memcpy(dst + i * sizeof(T), &d, sizeof(T));                                \
		}                                                                                  \
		return 0;                                                                          \
	}

/* The common accumulates (what an application sums, bounds or masks a
 * large array with) have a second, vectorised kernel per type.  The
 * element loop above dispatches on op for every element and cannot be
 * vectorised: a 8 KiB FI_SUM of 32-bit integers took 2.4 us there (3.4
 * GB/s), against 0.6 us here, about memcpy's speed.  Here op is a
 * constant in each instance of the loop, so its switch folds away, and
 * the elements go in blocks of a fixed count through local arrays (gcc
 * at -O2 vectorises only loops whose trip count is a multiple of the
 * vector length; the locals also make aliasing between the target and
 * the operands harmless).  What is left after the last whole block goes
 * through the element loop.  Results are the element loop's, element by
 * element: no reassociation, the same wrap-around integer arithmetic,
 * min and max written the same way.  Old values go to res first (fetch);
 * FI_ATOMIC_READ leaves the target unwritten. */
#define OPX_AT_BLOCK 8 /* 16 was no faster (8 KiB FI_SUM u32) and 11 KB more code */

#define OPX_AT_FAST_ARITH(T, UT)                                                                   \
	case FI_SUM: d[j] = (T)((UT)d[j] + (UT)s[j]); break;                                       \
	case FI_PROD: d[j] = (T)((UT)d[j] * (UT)s[j]); break;                                      \
	case FI_ATOMIC_WRITE: d[j] = s[j]; break;                                                  \
	case FI_MIN: if (s[j] < d[j]) d[j] = s[j]; break;                                          \
	case FI_MAX: if (s[j] > d[j]) d[j] = s[j]; break;

#define OPX_AT_FAST_BITS                                                                           \
	case FI_BOR: d[j] = d[j] | s[j]; break;                                                    \
	case FI_BAND: d[j] = d[j] & s[j]; break;                                                   \
	case FI_BXOR: d[j] = d[j] ^ s[j]; break;

/* One block of OPX_AT_BLOCK elements; always inlined with a constant
 * op. */
#define OPX_AT_BLOCK_FN(name, T, CASES)                                                            \
	static inline __attribute__((always_inline)) void name(enum fi_op op, uint8_t *dst,       \
							       const uint8_t *src, uint8_t *res)  \
	{                                                                                          \
		T d[OPX_AT_BLOCK], s[OPX_AT_BLOCK];                                                \
		memcpy(d, dst, sizeof(d));                                                         \
		if (res)                                                                           \
			memcpy(res, d, sizeof(d));                                                 \
		if (op == FI_ATOMIC_READ)                                                          \
			return;                                                                    \
		memcpy(s, src, sizeof(s));                                                         \
		for (size_t j = 0; j < OPX_AT_BLOCK; j++) {                                        \
			switch (op) {                                                              \
				CASES                                                              \
			default:                                                                   \
				break;                                                             \
			}                                                                          \
		}                                                                                  \
		memcpy(dst, d, sizeof(d));                                                         \
	}

/* Every whole block of the call with op constant (src is NULL only for
 * FI_ATOMIC_READ), the rest through the element loop, any. */
#define OPX_AT_RUN(blk, any, T, OP)                                                                \
	do {                                                                                       \
		size_t i = 0;                                                                      \
		for (; i + OPX_AT_BLOCK <= cnt; i += OPX_AT_BLOCK)                                 \
			blk(OP, dst + i * sizeof(T), src ? src + i * sizeof(T) : NULL,             \
			    res ? res + i * sizeof(T) : NULL);                                     \
		if (i == cnt)                                                                      \
			return 0;                                                                  \
		return any(OP, dst + i * sizeof(T), src ? src + i * sizeof(T) : NULL, NULL,       \
			   res ? res + i * sizeof(T) : NULL, cnt - i);                             \
	} while (0)

/* A type's kernel: the fast ops through its blocks, every other op (and
 * an op the type does not take) through its element loop, any. */
#define OPX_AT_DISPATCH(name, T, any, blk, BITS)                                                   \
	static int name(enum fi_op op, uint8_t *dst, const uint8_t *src, const uint8_t *cmp,      \
			uint8_t *res, size_t cnt)                                                  \
	{                                                                                          \
		switch (op) {                                                                      \
		case FI_SUM: OPX_AT_RUN(blk, any, T, FI_SUM);                                      \
		case FI_PROD: OPX_AT_RUN(blk, any, T, FI_PROD);                                    \
		case FI_MIN: OPX_AT_RUN(blk, any, T, FI_MIN);                                      \
		case FI_MAX: OPX_AT_RUN(blk, any, T, FI_MAX);                                      \
		case FI_ATOMIC_WRITE: OPX_AT_RUN(blk, any, T, FI_ATOMIC_WRITE);                    \
		case FI_ATOMIC_READ: OPX_AT_RUN(blk, any, T, FI_ATOMIC_READ);                      \
		BITS                                                                               \
		default:                                                                           \
			return any(op, dst, src, cmp, res, cnt);                                   \
		}                                                                                  \
	}

#define OPX_AT_DISPATCH_BITS(blk, any, T)                                                          \
	case FI_BOR: OPX_AT_RUN(blk, any, T, FI_BOR);                                              \
	case FI_BAND: OPX_AT_RUN(blk, any, T, FI_BAND);                                            \
	case FI_BXOR: OPX_AT_RUN(blk, any, T, FI_BXOR);

/* Integers: arithmetic in the unsigned type, promoted at least to
 * unsigned int so that u16 * u16 cannot overflow a signed int. */
#define OPX_AT_INT(name, T, UT) OPX_AT_KERNEL(name, T, OPX_AT_CASES_ALL(T, __typeof__(1u * (UT)0)) \
					      OPX_AT_CASES_ORDER OPX_AT_CASES_BITS)
#define OPX_AT_REAL(name, T) OPX_AT_KERNEL(name, T, OPX_AT_CASES_ALL(T, T) OPX_AT_CASES_ORDER)
#define OPX_AT_CPLX(name, T) OPX_AT_KERNEL(name, T, OPX_AT_CASES_ALL(T, T))

/* The types with a fast kernel: name##_any is the element loop. */
#define OPX_AT_INT_FAST(name, T, UT)                                                               \
	OPX_AT_INT(name##_any, T, UT)                                                              \
	OPX_AT_BLOCK_FN(name##_blk, T,                                                             \
			OPX_AT_FAST_ARITH(T, __typeof__(1u * (UT)0)) OPX_AT_FAST_BITS)             \
	OPX_AT_DISPATCH(name, T, name##_any, name##_blk,                                           \
			OPX_AT_DISPATCH_BITS(name##_blk, name##_any, T))
#define OPX_AT_REAL_FAST(name, T)                                                                  \
	OPX_AT_REAL(name##_any, T)                                                                 \
	OPX_AT_BLOCK_FN(name##_blk, T, OPX_AT_FAST_ARITH(T, T))                                    \
	OPX_AT_DISPATCH(name, T, name##_any, name##_blk, )

OPX_AT_INT_FAST(opx_atomic_i8, int8_t, uint8_t)
OPX_AT_INT_FAST(opx_atomic_u8, uint8_t, uint8_t)
OPX_AT_INT_FAST(opx_atomic_i16, int16_t, uint16_t)
OPX_AT_INT_FAST(opx_atomic_u16, uint16_t, uint16_t)
OPX_AT_INT_FAST(opx_atomic_i32, int32_t, uint32_t)
OPX_AT_INT_FAST(opx_atomic_u32, uint32_t, uint32_t)
OPX_AT_INT_FAST(opx_atomic_i64, int64_t, uint64_t)
OPX_AT_INT_FAST(opx_atomic_u64, uint64_t, uint64_t)
OPX_AT_INT(opx_atomic_i128, opx_i128, opx_u128)
OPX_AT_INT(opx_atomic_u128, opx_u128, opx_u128)
OPX_AT_REAL_FAST(opx_atomic_flt, float)
OPX_AT_REAL_FAST(opx_atomic_dbl, double)
OPX_AT_REAL(opx_atomic_ldbl, long double)
OPX_AT_CPLX(opx_atomic_cflt, float complex)
OPX_AT_CPLX(opx_atomic_cdbl, double complex)
OPX_AT_CPLX(opx_atomic_cldbl, long double complex)

int opx_atomic_apply(enum fi_op op, enum fi_datatype dt, void *dst, const void *src,
		     const void *cmp, void *res, size_t cnt)
{
	int (*k)(enum fi_op, uint8_t *, const uint8_t *, const uint8_t *, uint8_t *, size_t);

	switch (dt) {
	case FI_INT8: k = opx_atomic_i8; break;
	case FI_UINT8: k = opx_atomic_u8; break;
	case FI_INT16: k = opx_atomic_i16; break;
	case FI_UINT16: k = opx_atomic_u16; break;
	case FI_INT32: k = opx_atomic_i32; break;
	case FI_UINT32: k = opx_atomic_u32; break;
	case FI_INT64: k = opx_atomic_i64; break;
	case FI_UINT64: k = opx_atomic_u64; break;
	case FI_INT128: k = opx_atomic_i128; break;
	case FI_UINT128: k = opx_atomic_u128; break;
	case FI_FLOAT: k = opx_atomic_flt; break;
	case FI_DOUBLE: k = opx_atomic_dbl; break;
	case FI_LONG_DOUBLE: k = opx_atomic_ldbl; break;
	case FI_FLOAT_COMPLEX: k = opx_atomic_cflt; break;
	case FI_DOUBLE_COMPLEX: k = opx_atomic_cdbl; break;
	case FI_LONG_DOUBLE_COMPLEX: k = opx_atomic_cldbl; break;
	default: return -FI_EOPNOTSUPP;
	}
	return k(op, dst, src, cmp, res, cnt);
}

/* Most elements one request carries: operands (and compare values) must
 * fit one packet of payload, and the fetched values one reply. */
size_t opx_atomic_max_count(enum opx_atomic_kind kind, enum fi_datatype dt)
{
	size_t sz = opx_atomic_dt_size(dt);

	return opx_env.mtu / (sz * (kind == OPX_AK_COMPARE ? 2 : 1));
}

int opx_atomic_query(struct fid_domain *domain, enum fi_datatype dt, enum fi_op op,
		     struct fi_atomic_attr *attr, uint64_t flags)
{
	enum opx_atomic_kind kind = OPX_AK_WRITE;

	if (!domain || !attr)
		return -FI_EINVAL;
	if (flags & ~(FI_FETCH_ATOMIC | FI_COMPARE_ATOMIC))
		return -FI_EBADFLAGS;
	if ((flags & FI_FETCH_ATOMIC) && (flags & FI_COMPARE_ATOMIC))
		return -FI_EOPNOTSUPP;
	if (flags & FI_FETCH_ATOMIC)
		kind = OPX_AK_FETCH;
	else if (flags & FI_COMPARE_ATOMIC)
		kind = OPX_AK_COMPARE;
	if (!opx_atomic_valid(kind, op, dt))
		return -FI_EOPNOTSUPP;
	attr->size = opx_atomic_dt_size(dt);
	attr->count = opx_atomic_max_count(kind, dt);
	return 0;
}
