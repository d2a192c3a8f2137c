/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "va-error"

#include "va-error.h"

#include <string.h>

/* clang-format off */
G_DEFINE_QUARK (va-error-quark, va_error)
/* clang-format on */

static const char *const names[VA_ERROR_LAST] = {
  [VA_ERROR_FAILED] = "Failed",
  [VA_ERROR_INVALID_ARGUMENT] = "InvalidArgument",
  [VA_ERROR_INVALID_XML] = "InvalidXml",
  [VA_ERROR_INVALID_CONFIG] = "InvalidConfig",
  [VA_ERROR_NO_SUCH_NETWORK] = "NoSuchNetwork",
  [VA_ERROR_NO_SUCH_POOL] = "NoSuchPool",
  [VA_ERROR_POOL_EXHAUSTED] = "PoolExhausted",
  [VA_ERROR_PERMISSION_DENIED] = "PermissionDenied",
  [VA_ERROR_PROVISIONING_FAILED] = "ProvisioningFailed",
  [VA_ERROR_NOT_FOUND] = "NotFound",
  [VA_ERROR_BUSY] = "Busy",
  [VA_ERROR_UNREACHABLE] = "Unreachable",
  [VA_ERROR_TRY_AGAIN] = "TryAgain",
};

const char *
va_error_name (VaError code)
{
  g_return_val_if_fail ((guint) code < VA_ERROR_LAST, names[VA_ERROR_FAILED]);
  return names[code];
}

int
va_utf8_prefix (const char *s, int max)
{
  const char *end = NULL;
  const char *p;

  if (!s)
    return (int) strlen ("(null)");
  /* the valid part, then back to the last whole character within @max */
  g_utf8_validate (s, -1, &end);
  p = s + MIN ((gsize) MAX (max, 0), (gsize) (end - s));
  while (p > s && p < end && (*p & 0xc0) == 0x80)
    p--;
  return (int) (p - s);
}
