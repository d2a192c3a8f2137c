/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "va-hook-calls.h"

#include <string.h>

static const struct
{
  const char *op;
  const char *sub;
  VaHookCall call;
  /* texts one of which a document must hold for the call to have work,
   * or none */
  const char *needles[3];
} calls[] = {
  { "prepare", "begin", VA_HOOK_CALL_PREPARE, { NULL } },
  { "start", "begin", VA_HOOK_CALL_START, { NULL } },
  { "stopped", "end", VA_HOOK_CALL_STOPPED, { NULL } },
  { "release", "end", VA_HOOK_CALL_STOPPED, { NULL } },
  { "reconnect", "begin", VA_HOOK_CALL_RECONNECT, { NULL } },
  { "migrate", "begin", VA_HOOK_CALL_REWRITE, { NULL } },
  { "restore", "begin", VA_HOOK_CALL_REWRITE, { NULL } },
  /* only a NIC marked swap-back="accelerated", or a failover standby
   * (<teaming type='persistent'/>) whose VF is to be plugged, has work
   * here: every start of every marked domain would pay the helper's start
   * otherwise */
  { "started", "begin", VA_HOOK_CALL_STARTED, { "swap-back", "<teaming", NULL } },
};

static int
find (const char *op, const char *sub)
{
  if (!op || !sub)
    return -1;
  for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++)
    if (strcmp (op, calls[i].op) == 0 && strcmp (sub, calls[i].sub) == 0)
      return (int) i;
  return -1;
}

VaHookCall
va_hook_call_lookup (const char *op, const char *sub)
{
  int i = find (op, sub);

  return i < 0 ? VA_HOOK_CALL_NONE : calls[i].call;
}

const char *const *
va_hook_call_needles (const char *op, const char *sub)
{
  int i = find (op, sub);

  return i < 0 || !calls[i].needles[0] ? NULL : calls[i].needles;
}

int
va_hook_call_may_fail (VaHookCall call)
{
  return call == VA_HOOK_CALL_PREPARE || call == VA_HOOK_CALL_START || call == VA_HOOK_CALL_REWRITE;
}
