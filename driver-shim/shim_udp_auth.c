/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shim_udp_auth.c - the udp wire's datagram authentication: what real
 * Omni-Path gets from its wiring (the adapter stamps the sender, user
 * processes cannot forge LIDs or job keys), a software NIC gets from a
 * MAC keyed by a secret only the job's processes hold.
 *
 * The primitive is libsodium's SipHash-2-4 with a 128-bit output
 * (crypto_shorthash_siphashx24), a keyed pseudo-random function built for
 * short inputs: about 60 ns for the 128 bytes of a datagram's two headers
 * on this machine, where a round trip costs microseconds.  It needs no
 * nonce (deterministic: a retransmission of the same bytes carries the
 * same tag), so no nonce can be reused by two senders of one job; replay
 * is the job of the sessions (src_nonce/dst_nonce, covered by the tag)
 * and of the reliability module's packet sequence window.
 *
 * Subkeys come from the job's secret with BLAKE2b (crypto_generichash),
 * one per purpose, so a tag made for one purpose cannot pass for another:
 *   hdr: tag = SipHash128(hdr_key, udp header with mac = 0 || packet header)
 *        (the packet header only in DATA datagrams; control datagrams are
 *        a udp header and nothing else, so they are covered whole);
 *   full: the same input followed by SipHash128(pay_key, payload);
 *   PACK datagrams, in both modes: the udp header followed by
 *        SipHash128(pay_key, everything after it) (their packet headers
 *        are interleaved with the payloads).
 * The udp header names the mode (auth) and the sender's socket address,
 * both covered, so a mode mismatch and a replay from another address are
 * refused before anything else is looked at.
 */
#include <string.h>

#include <sodium.h>

#include "shim_udp.h"

static_assert(crypto_shorthash_siphashx24_BYTES == SHIM_UDP_MAC_BYTES, "mac size");
static_assert(crypto_shorthash_siphashx24_KEYBYTES == sizeof(((struct shim_udp_auth *)0)->hdr_key),
	      "siphash key size");

int shim_udp_auth_init(struct shim_udp_auth *a, int mode, const uint8_t key[SHIM_AUTH_KEY_BYTES])
{
	static const char hdr_ctx[] = "opx udp wire v4 header mac";
	static const char pay_ctx[] = "opx udp wire v4 payload mac";

	memset(a, 0, sizeof(*a));
	a->mode = mode;
	if (mode == SHIM_AUTH_OFF)
		return 0;
	if (sodium_init() < 0)
		return -ENOSYS;
	if (crypto_generichash(a->hdr_key, sizeof(a->hdr_key), (const uint8_t *)hdr_ctx,
			       sizeof(hdr_ctx), key, SHIM_AUTH_KEY_BYTES) ||
	    crypto_generichash(a->pay_key, sizeof(a->pay_key), (const uint8_t *)pay_ctx,
			       sizeof(pay_ctx), key, SHIM_AUTH_KEY_BYTES))
		return -EINVAL;
	return 0;
}

void shim_udp_auth_fini(struct shim_udp_auth *a)
{
	sodium_memzero(a, sizeof(*a));
}

/* The tag of a datagram: uh (its mac field read as 0), the packet header
 * (DATA) and the payload (FULL, and every PACK). */
static void shim_udp_auth_tag(const struct shim_udp_auth *a, const struct shim_udp_hdr *uh,
			      const struct shim_pkt_hdr *ph, const uint8_t *pay, size_t paylen,
			      uint8_t tag[SHIM_UDP_MAC_BYTES])
{
	uint8_t in[sizeof(*uh) + sizeof(*ph) + SHIM_UDP_MAC_BYTES];
	size_t n = sizeof(*uh);

	memcpy(in, uh, sizeof(*uh));
	memset(in + offsetof(struct shim_udp_hdr, mac), 0, SHIM_UDP_MAC_BYTES);
	if (ph) {
		memcpy(in + n, ph, sizeof(*ph));
		n += sizeof(*ph);
	}
	if (a->mode == SHIM_AUTH_FULL || uh->type == SHIM_UDP_PACK) {
		crypto_shorthash_siphashx24(in + n, pay, paylen, a->pay_key);
		n += SHIM_UDP_MAC_BYTES;
	}
	crypto_shorthash_siphashx24(tag, in, n, a->hdr_key);
}

void shim_udp_auth_seal(const struct shim_udp_auth *a, struct shim_udp_hdr *uh,
			const struct shim_pkt_hdr *ph, const uint8_t *pay, size_t paylen)
{
	uh->auth = (uint8_t)((uh->auth & SHIM_UDP_AUTH_PCRC) | (unsigned)a->mode);
	if (a->mode == SHIM_AUTH_OFF) {
		memset(uh->mac, 0, sizeof(uh->mac));
		return;
	}
	shim_udp_auth_tag(a, uh, ph, pay, paylen, uh->mac);
}

bool shim_udp_auth_check(const struct shim_udp_auth *a, const struct shim_udp_hdr *uh,
			 const struct shim_pkt_hdr *ph, const uint8_t *pay, size_t paylen)
{
	uint8_t tag[SHIM_UDP_MAC_BYTES];
	bool ok;

	if ((uh->auth & ~SHIM_UDP_AUTH_PCRC) != (unsigned)a->mode)
		return false;
	if (a->mode == SHIM_AUTH_OFF)
		return true;
	shim_udp_auth_tag(a, uh, ph, pay, paylen, tag);
	ok = crypto_verify_16(tag, uh->mac) == 0;
	sodium_memzero(tag, sizeof(tag));
	return ok;
}
