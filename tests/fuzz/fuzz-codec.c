/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target: what a D-Bus caller controls, through the codecs the
 * daemon decodes it with. The input is a GVariant in its serialized form,
 * read both as Allocate's arguments "(ssssa{sv})" and as a lease "a{sv}"
 * (what a client decodes from the daemon); a decoded lease must encode and
 * decode to itself. Run by tests/fuzz/run-fuzz.sh. */
#define G_LOG_DOMAIN "fuzz-codec"

#include <glib.h>
#include <stddef.h>
#include <stdint.h>

#include "va-alloc-request.h"
#include "va-lease.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  g_autoptr (GBytes) bytes = g_bytes_new (data, size);
  g_autoptr (GVariant) args = g_variant_ref_sink (g_variant_new_from_bytes (G_VARIANT_TYPE ("(ssssa{sv})"), bytes, FALSE));
  g_autoptr (GVariant) dict = g_variant_ref_sink (g_variant_new_from_bytes (G_VARIANT_TYPE_VARDICT, bytes, FALSE));
  VaAllocRequest req = VA_ALLOC_REQUEST_INIT;
  g_autoptr (VaLease) lease = NULL;

  /* GDBus hands the daemon only normal-form values */
  if (g_variant_is_normal_form (args))
    (void) va_alloc_request_from_variant (args, &req, NULL);
  if (g_variant_is_normal_form (dict) && (lease = va_lease_from_variant (dict, NULL)))
    {
      g_autoptr (GVariant) again = g_variant_ref_sink (va_lease_to_variant (lease));
      g_autoptr (VaLease) back = va_lease_from_variant (again, NULL);

      g_assert (back && va_lease_equal (lease, back));
    }
  return 0;
}
