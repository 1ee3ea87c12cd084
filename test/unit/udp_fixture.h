/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * udp_fixture.h - what the udp wire suites (test_udp: exchange, receive
 * modes, sleeping, path MTU, fuzzing, faults, unload, GSO; test_udp_batch:
 * UDP_GRO runs and PACK datagrams) share: a device on the udp wire over
 * loopback with two receive contexts a and b and a peer of b, packets
 * with a payload pattern checked on arrival, and the clock.
 */
#ifndef OPX_TEST_UDP_FIXTURE_H
#define OPX_TEST_UDP_FIXTURE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../../driver-shim/shim_internal.h"
#include "../../driver-shim/shim_udp.h"

#define T_JKEY 0x5a5a

struct t_pair {
	struct shim_dev *dev;
	struct shim_ctx *a, *b;
	struct shim_addr addr_b;
	struct shim_peer *to_b;
};

/* t_pair_open: without UDP_GRO (one datagram per receive buffer) */
extern bool t_no_gro;
/* Packing (PACK datagrams) only where a test asks for it: the others
 * check datagram by datagram and never flush. */
extern bool t_pack;
/* t_pair_open: no CRC of payloads (FI_OPX_UDP_CRC=0) */
extern bool t_no_crc;

/* CLOCK_MONOTONIC in seconds. */
double t_now(void);
/* A udp device on loopback (job key T_JKEY, fault injection as fault
 * says, or none), contexts a and b with their sockets, and to_b, a's
 * peer of b; fails the test on error. */
void t_pair_open(struct t_pair *t, const struct shim_fault *fault);
void t_pair_close(struct t_pair *t);
/* Byte i of the payload of packet seq. */
uint8_t t_pat(uint32_t seq, uint32_t i);
/* The payload length of packet seq: inline sizes, one block, full packets. */
uint32_t t_len(const struct shim_peer *p, uint32_t seq);
/* Publish packet seq (payload t_pat, len bytes) into the peer. */
int t_send_len(struct shim_peer *p, uint32_t seq, uint32_t len);
/* t_send_len of t_len(p, seq) bytes. */
int t_send(struct shim_peer *p, uint32_t seq);
/* A received DATA packet's payload is its pattern (fails the test if not). */
void t_check(const struct shim_udp_pkt *pkt);
/* Receive on b until n packets or the deadline; returns the count. */
int t_recv_all(struct t_pair *t, int n, uint32_t *psns, double secs);

#endif /* OPX_TEST_UDP_FIXTURE_H */
