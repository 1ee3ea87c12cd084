/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_iov.h - the few things the data path does with an iovec: check and
 * sum one from the application, cut a part of one out, copy a flat buffer
 * into one and gather one into a flat buffer.  Leaf helpers: they call
 * nothing of the provider.
 */
#ifndef OPX_IOV_H
#define OPX_IOV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

/* An application's iovec is usable: no NULL base with a length, and a
 * total that does not wrap size_t.  *len: the total. */
static inline bool opx_iov_sum(const struct iovec *iov, size_t cnt, size_t *len)
{
	size_t sum = 0;

	for (size_t i = 0; i < cnt; i++) {
		if (__builtin_expect((!iov[i].iov_base && iov[i].iov_len) ||
					     iov[i].iov_len > SIZE_MAX - sum,
				     0))
			return false;
		sum += iov[i].iov_len;
	}
	*len = sum;
	return true;
}

/* Copy an iovec field by field.  The API's one-buffer calls build theirs
 * on the stack with two 8-byte stores just before; one 16-byte load of
 * both (what a plain struct copy compiles to) cannot be forwarded from
 * two stores and waits for the store buffer to drain, which on the
 * receive path holds stores to lines the sender is reading.  The empty
 * asm keeps the compiler from fusing the two loads again. */
static inline void opx_iov_copy(struct iovec *dst, const struct iovec *src, size_t cnt)
{
	for (size_t i = 0; i < cnt; i++) {
		void *base = src[i].iov_base;
		size_t len = src[i].iov_len;

		__asm__("" : "+r"(base));
		dst[i].iov_base = base;
		dst[i].iov_len = len;
	}
}

static inline size_t opx_iov_total(const struct iovec *iov, size_t cnt)
{
	size_t len = 0;

	for (size_t i = 0; i < cnt; i++)
		len += iov[i].iov_len;
	return len;
}

/* The part [off, off+len) of an iovec as an iovec (at most cnt entries);
 * returns how many entries. */
static inline size_t opx_iov_slice(const struct iovec *iov, size_t cnt, size_t off, size_t len,
				   struct iovec *out)
{
	size_t n = 0;

	for (size_t i = 0; i < cnt && len; i++) {
		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		size_t take = iov[i].iov_len - off;
		if (take > len)
			take = len;
		out[n].iov_base = (uint8_t *)iov[i].iov_base + off;
		out[n].iov_len = take;
		n++;
		len -= take;
		off = 0;
	}
	return n;
}

/* Copy len bytes of src into the iovec from byte off on; returns how
 * many fit. */
static inline size_t opx_iov_copy_to(const struct iovec *iov, size_t cnt, size_t off,
				     const void *src, size_t len)
{
	const uint8_t *s = src;
	size_t done = 0;

	for (size_t i = 0; i < cnt && done < len; i++) {
		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		size_t n = iov[i].iov_len - off;
		if (n > len - done)
			n = len - done;
		memcpy((uint8_t *)iov[i].iov_base + off, s + done, n);
		done += n;
		off = 0;
	}
	return done;
}

/* The whole iovec (len bytes in all) into dst. */
static inline void opx_iov_gather(uint8_t *dst, const struct iovec *iov, size_t cnt, size_t len)
{
	if (cnt == 1) {
		memcpy(dst, iov[0].iov_base, len);
		return;
	}
	for (size_t i = 0; i < cnt; i++) {
		memcpy(dst, iov[i].iov_base, iov[i].iov_len);
		dst += iov[i].iov_len;
	}
}

/* Bytes [off, off+len) of the iovec into dst. */
static inline void opx_iov_gather_at(uint8_t *dst, const struct iovec *iov, size_t cnt,
				     size_t off, size_t len)
{
	for (size_t i = 0; i < cnt && len; i++) {
		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		size_t n = iov[i].iov_len - off;
		if (n > len)
			n = len;
		memcpy(dst, (const uint8_t *)iov[i].iov_base + off, n);
		dst += n;
		len -= n;
		off = 0;
	}
}

#endif /* OPX_IOV_H */
