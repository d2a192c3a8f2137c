/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The small pieces of the intent engine that the daemon reuses on D-Bus
 * arguments: MAC and UUID syntax, the cheap metadata pre-check, port paths. */
#include <glib.h>

#include "va-domain.h"

static void
test_mac (void)
{
  char out[18];

  g_assert_true (va_mac_normalize ("52:54:00:6B:3C:58", out));
  g_assert_cmpstr (out, ==, "52:54:00:6b:3c:58");
  g_assert_false (va_mac_normalize ("01:00:5e:00:00:01", out)); /* multicast */
  g_assert_false (va_mac_normalize ("00:00:00:00:00:00", out));
  g_assert_false (va_mac_normalize ("52:54:00:6b:3c", out));
  g_assert_false (va_mac_normalize ("52:54:00:6b:3c:58:00", out));
  g_assert_false (va_mac_normalize ("52-54-00-6b-3c-58", out));
  g_assert_false (va_mac_normalize ("52:54:00:6b:3c:5g", out));
  g_assert_false (va_mac_normalize ("", out));
}

static void
test_uuid (void)
{
  char out[37];

  g_assert_true (va_uuid_normalize ("6F1E2A3B-4C5D-4E6F-8A9B-0C1D2E3F4A5B", out));
  g_assert_cmpstr (out, ==, "6f1e2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b");
  g_assert_true (va_uuid_normalize ("6f1e2a3b4c5d4e6f8a9b0c1d2e3f4a5b", out));
  g_assert_cmpstr (out, ==, "6f1e2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b");
  g_assert_false (va_uuid_normalize ("6f1e2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5", out));
  g_assert_false (va_uuid_normalize ("6f1e2a3b4-c5d-4e6f-8a9b-0c1d2e3f4a5b", out));
  g_assert_false (va_uuid_normalize ("../../../../etc/passwd-xxxxxxxxxxxxx", out));
  g_assert_false (va_uuid_normalize ("", out));
}

static void
test_precheck (void)
{
  const char with[] = "<domain><metadata><x:nics xmlns:x='" VA_XML_NS "'/></metadata></domain>";
  const char without[] = "<domain><name>plain</name></domain>";

  g_assert_true (va_domain_text_may_have_intent (with, sizeof with - 1));
  g_assert_false (va_domain_text_may_have_intent (without, sizeof without - 1));
}

static void
test_plain_domain_has_no_nics (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaDomain) d = va_domain_parse ("<domain><name>plain</name><uuid>6f1e2a3b4c5d4e6f8a9b0c1d2e3f4a5b</uuid></domain>", -1, &error);

  g_assert_no_error (error);
  g_assert_cmpstr (va_domain_get_name (d), ==, "plain");
  g_assert_cmpstr (va_domain_get_uuid (d), ==, "6f1e2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b");
  g_assert_cmpuint (va_domain_get_nics (d)->len, ==, 0);
}

static void
test_port_path (void)
{
  g_autofree char *p = va_port_path ("/run/vdpa-allocator/ports", "6f1e2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b", "52:54:00:6b:3c:58");

  g_assert_cmpstr (p, ==, "/run/vdpa-allocator/ports/6f1e2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b/52:54:00:6b:3c:58");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/domain/mac-syntax", test_mac);
  g_test_add_func ("/domain/uuid-syntax", test_uuid);
  g_test_add_func ("/domain/metadata-precheck", test_precheck);
  g_test_add_func ("/domain/plain-domain-has-no-nics", test_plain_domain_has_no_nics);
  g_test_add_func ("/domain/port-path", test_port_path);
  return g_test_run ();
}
