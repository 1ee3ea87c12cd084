/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_drop.h - packets refused on receipt (opx_drop.c): counted per
 * endpoint by enum opx_drop_reason (opx_tel.h), the first of each reason
 * logged.  Lock held.
 */
#ifndef OPX_DROP_H
#define OPX_DROP_H

#include "opx_ep.h"

/* opx_drop.c: drop accounting */
void opx_drop_proto(struct opx_ep *ep, const char *why); /* counted as OPX_DROP_PROTO */
void opx_drop_note(struct opx_ep *ep, enum opx_drop_reason reason);
const char *opx_drop_name(enum opx_drop_reason reason);
/* Drops of one reason so far (OPX_DROP_MAX: all reasons). Lock held. */
uint64_t opx_drop_count(const struct opx_ep *ep, enum opx_drop_reason reason);

#endif /* OPX_DROP_H */
