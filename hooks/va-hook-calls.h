/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The hook calls that have work (docs/hook-contract.md), for the
 * dispatcher, which links libc alone, and the helper: one table, so that a
 * call added for one is never skipped by the other. */
typedef enum
{
  VA_HOOK_CALL_NONE,
  VA_HOOK_CALL_PREPARE,   /* prepare begin: lease accelerated NICs */
  VA_HOOK_CALL_START,     /* start begin: Linux-bridge VLANs on the taps */
  VA_HOOK_CALL_STOPPED,   /* stopped end, release end: give leases back */
  VA_HOOK_CALL_RECONNECT, /* reconnect begin: claim leases again */
  VA_HOOK_CALL_REWRITE,   /* migrate begin, restore begin: rewrite for this host */
  VA_HOOK_CALL_STARTED,   /* started begin: ask for the swap back of NICs portable for a move, and the VFs of failover standbys */
} VaHookCall;

VaHookCall va_hook_call_lookup (const char *op, const char *sub);
/* The texts (NULL-terminated) one of which a domain's XML must contain
 * for the call to have work (the dispatcher runs no helper without one),
 * or NULL for any marked domain. */
const char *const *va_hook_call_needles (const char *op, const char *sub);
/* Whether the call may fail: libvirt kills a running guest whose
 * reconnect hook fails and stops one whose started hook fails, and a
 * failed stop or release undoes nothing. Those exit 0 whatever happens
 * (one line on stderr); only the calls that start or move a guest refuse. */
int va_hook_call_may_fail (VaHookCall call);
