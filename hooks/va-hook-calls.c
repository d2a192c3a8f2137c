/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "va-hook-calls.h"

#include <string.h>

static const struct
{
  const char *op;
  const char *sub;
  VaHookCall call;
} calls[] = {
  { "prepare", "begin", VA_HOOK_CALL_PREPARE },     { "start", "begin", VA_HOOK_CALL_START },
  { "stopped", "end", VA_HOOK_CALL_STOPPED },       { "release", "end", VA_HOOK_CALL_STOPPED },
  { "reconnect", "begin", VA_HOOK_CALL_RECONNECT }, { "migrate", "begin", VA_HOOK_CALL_REWRITE },
  { "restore", "begin", VA_HOOK_CALL_REWRITE },     { "started", "begin", VA_HOOK_CALL_STARTED },
};

VaHookCall
va_hook_call_lookup (const char *op, const char *sub)
{
  if (!op || !sub)
    return VA_HOOK_CALL_NONE;
  for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++)
    if (strcmp (op, calls[i].op) == 0 && strcmp (sub, calls[i].sub) == 0)
      return calls[i].call;
  return VA_HOOK_CALL_NONE;
}
