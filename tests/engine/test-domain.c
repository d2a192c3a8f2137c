/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The small pieces of the intent engine that the daemon reuses on D-Bus
 * arguments: MAC and UUID syntax, the cheap metadata pre-check, port paths. */
#include <glib.h>

#include "va-domain.h"
#include "va-error.h"

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

/* What the hook's calls that never fail read of a domain whose metadata
 * does not parse (a vdpa:nic without its <interface>, queues="0"): the
 * name and UUID only; what is not XML is still refused. */
static void
test_parse_identity (void)
{
  const char *bad = "<domain><name>vm1</name><uuid>6f1e2a3b4c5d4e6f8a9b0c1d2e3f4a5b</uuid><metadata>"
                    "<vdpa:nics xmlns:vdpa='http://vdpa-allocator.org/xmlns/domain/1.0'>"
                    "<vdpa:nic mac='52:54:00:00:00:01' pool='accel' queues='0'/></vdpa:nics></metadata></domain>";
  g_autoptr (GError) error = NULL;
  g_autoptr (VaDomain) d = va_domain_parse (bad, -1, &error);

  g_assert_null (d);
  g_assert_nonnull (error);
  g_clear_error (&error);
  d = va_domain_parse_identity (bad, -1, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (va_domain_get_name (d), ==, "vm1");
  g_assert_cmpstr (va_domain_get_uuid (d), ==, "6f1e2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b");
  g_assert_cmpuint (va_domain_get_nics (d)->len, ==, 0);
  g_clear_pointer (&d, va_domain_free);
  d = va_domain_parse_identity ("<domain><name>vm1</name><uuid>x</uuid>", -1, &error);
  g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_XML);
  g_assert_null (d);
}

/* libxml2 would build every node of a 16 MiB document of small elements
 * (hundreds of MB) and check attributes in quadratic time: both are
 * refused before it parses. */
static void
test_parse_bounds (void)
{
  g_autoptr (GString) doc = g_string_new ("<domain>");
  g_autoptr (GError) error = NULL;
  g_autoptr (VaDomain) domain = NULL;

  for (guint i = 0; i < VA_XML_MAX_NODES; i++)
    g_string_append (doc, "<a/>");
  g_string_append (doc, "</domain>");
  domain = va_domain_parse (doc->str, doc->len, &error);
  g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_XML);
  g_assert_cmpstr (error->message, ==, "document has more than 200000 elements and other nodes");
  g_assert_null (domain);
  g_clear_error (&error);

  /* markup inside comments, CDATA and quoted values counts for nothing */
  g_string_assign (doc, "<domain><!-- <a b='1' c='2'> --><![CDATA[<x y='=' z='='>]]><e f='a=b=c'/></domain>");
  domain = va_domain_parse (doc->str, doc->len, &error);
  g_assert_no_error (error);
  g_assert_nonnull (domain);
}

static void
test_utf8_prefix (void)
{
  /* "a" then two-byte characters: byte 4 falls inside the second */
  const char *s = "a\xc3\xa4\xc3\xa4\xc3\xa4";

  g_assert_cmpint (va_utf8_prefix (s, 64), ==, 7);
  g_assert_cmpint (va_utf8_prefix (s, 4), ==, 3);
  g_assert_cmpint (va_utf8_prefix (s, 3), ==, 3);
  g_assert_cmpint (va_utf8_prefix (s, 0), ==, 0);
  /* stops before invalid bytes too */
  g_assert_cmpint (va_utf8_prefix ("ab\xff\xfe"
                                   "cd",
                                   64),
                   ==, 2);
  g_assert_cmpint (va_utf8_prefix (NULL, 64), ==, 6);
}

static void
test_port_path (void)
{
  g_autofree char *p = va_port_path ("/run/vdpa-allocator/ports", "6f1e2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b", "52:54:00:6b:3c:58");

  g_assert_cmpstr (p, ==, "/run/vdpa-allocator/ports/6f1e2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b/52:54:00:6b:3c:58");
}

static void
test_metadata_update (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *added = va_metadata_update (NULL, "52:54:00:00:00:0A", "vpc2", &error);
  g_autofree char *kept = NULL;
  g_autofree char *removed = NULL;
  g_autofree char *bad = NULL;

  g_assert_no_error (error);
  g_assert_cmpstr (added, ==, "<nics><nic mac=\"52:54:00:00:00:0a\" network=\"vpc2\"/></nics>");
  /* as libvirt hands it back: no namespace; inline intent kept as written */
  kept = va_metadata_update ("<nics>\n  <nic mac=\"52:54:00:00:00:01\" vlan=\"5\" bridge=\"br&amp;0\"/>\n"
                             "  <nic mac=\"52:54:00:00:00:0a\" network=\"old\"/>\n</nics>",
                             "52:54:00:00:00:0a", "vpc2", &error);
  g_assert_no_error (error);
  g_assert_cmpstr (kept, ==,
                   "<nics><nic mac=\"52:54:00:00:00:01\" vlan=\"5\" bridge=\"br&amp;0\"/>"
                   "<nic mac=\"52:54:00:00:00:0a\" network=\"vpc2\"/></nics>");
  removed = va_metadata_update (kept, "52:54:00:00:00:01", NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (removed, ==, "<nics><nic mac=\"52:54:00:00:00:0a\" network=\"vpc2\"/></nics>");
  bad = va_metadata_update ("<other/>", "52:54:00:00:00:01", "x", &error);
  g_assert_null (bad);
  g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_XML);
  g_clear_error (&error);
  g_assert_null (va_metadata_update ("<!DOCTYPE x [<!ENTITY a 'b'>]><nics/>", "52:54:00:00:00:01", "x", &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_XML);
  g_clear_error (&error);
  g_assert_null (va_metadata_update (NULL, "52:54:00:00:00:01", "../x", &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT);
}

/* What the accelerated rewrite changed in <memoryBacking> is recorded on
 * vdpa:nics: a NIC added, removed or marked through libvirt's metadata
 * API keeps the record, or the portable form could not take it back. */
static void
test_metadata_keeps_shared_memory (void)
{
  g_autoptr (GError) error = NULL;
  const char *cur = "<nics shared-memory=\"source access\"><nic mac=\"52:54:00:00:00:01\" network=\"vpc2\"/></nics>";
  g_autofree char *added = va_metadata_update (cur, "52:54:00:00:00:02", "lab", &error);
  g_autofree char *marked = NULL, *bogus = NULL;

  g_assert_no_error (error);
  g_assert_cmpstr (added, ==,
                   "<nics shared-memory=\"source access\"><nic mac=\"52:54:00:00:00:01\" network=\"vpc2\"/>"
                   "<nic mac=\"52:54:00:00:00:02\" network=\"lab\"/></nics>");
  marked = va_metadata_set_swap_back (cur, "52:54:00:00:00:01", TRUE, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (
    marked, ==, "<nics shared-memory=\"source access\"><nic mac=\"52:54:00:00:00:01\" network=\"vpc2\" swap-back=\"accelerated\"/></nics>");
  /* what no rewrite writes is not carried over */
  bogus = va_metadata_update ("<nics shared-memory=\"access&quot;/&gt;\"/>", "52:54:00:00:00:01", "vpc2", &error);
  g_assert_no_error (error);
  g_assert_cmpstr (bogus, ==, "<nics><nic mac=\"52:54:00:00:00:01\" network=\"vpc2\"/></nics>");
}

/* Whether a running domain's memory is what a software device's relay
 * reaches: shared and file-backed, no private NUMA cell. */
static void
test_memory_is_shared (void)
{
  static const struct
  {
    const char *memory;
    gboolean shared;
  } cases[] = {
    { "", FALSE },
    { "<memoryBacking><source type='memfd'/><access mode='shared'/></memoryBacking>", TRUE },
    { "<memoryBacking><hugepages/><access mode='shared'/></memoryBacking>", TRUE },
    { "<memoryBacking><source type='file'/><access mode='shared'/></memoryBacking>", TRUE },
    { "<memoryBacking><hugepages/></memoryBacking>", FALSE },
    { "<memoryBacking><source type='memfd'/></memoryBacking>", FALSE },
    { "<memoryBacking><source type='memfd'/><access mode='private'/></memoryBacking>", FALSE },
    { "<memoryBacking><source type='anonymous'/><access mode='shared'/></memoryBacking>", FALSE },
    { "<memoryBacking><access mode='shared'/></memoryBacking>", FALSE },
    { "<memoryBacking><source type='memfd'/><access mode='shared'/></memoryBacking>"
      "<cpu><numa><cell id='0' memory='1' memAccess='private'/></numa></cpu>",
      FALSE },
    { "<memoryBacking><source type='memfd'/></memoryBacking>"
      "<cpu><numa><cell id='0' memory='1' memAccess='shared'/><cell id='1' memory='1' memAccess='shared'/></numa></cpu>",
      TRUE },
    { "<memoryBacking><source type='memfd'/></memoryBacking>"
      "<cpu><numa><cell id='0' memory='1' memAccess='shared'/><cell id='1' memory='1'/></numa></cpu>",
      FALSE },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autofree char *xml = g_strdup_printf ("<domain><name>m</name>%s</domain>", cases[i].memory);
      g_autoptr (VaDomain) d = va_domain_parse (xml, -1, &error);

      g_assert_no_error (error);
      g_assert_cmpint (va_domain_memory_is_shared (d), ==, cases[i].shared);
    }
}

/* The swap-back marker set, given an outcome, and dropped with it; the
 * other NICs and attributes as they were. */
static void
test_metadata_swap_back (void)
{
  g_autoptr (GError) error = NULL;
  const char *cur
    = "<nics><nic mac=\"52:54:00:00:00:01\" network=\"vpc2\"/><nic mac=\"52:54:00:00:00:02\" vlan=\"5\" bridge=\"br0\"/></nics>";
  g_autofree char *on = va_metadata_set_swap_back (cur, "52:54:00:00:00:01", TRUE, NULL, &error);
  g_autofree char *outcome = NULL;
  g_autofree char *off = NULL;

  g_assert_no_error (error);
  g_assert_cmpstr (on, ==,
                   "<nics><nic mac=\"52:54:00:00:00:01\" network=\"vpc2\" swap-back=\"accelerated\"/>"
                   "<nic mac=\"52:54:00:00:00:02\" vlan=\"5\" bridge=\"br0\"/></nics>");
  outcome = va_metadata_set_swap_back (on, "52:54:00:00:00:01", TRUE, "no-room", &error);
  g_assert_no_error (error);
  g_assert_cmpstr (outcome, ==,
                   "<nics><nic mac=\"52:54:00:00:00:01\" network=\"vpc2\" swap-back=\"accelerated\" swap-back-outcome=\"no-room\"/>"
                   "<nic mac=\"52:54:00:00:00:02\" vlan=\"5\" bridge=\"br0\"/></nics>");
  off = va_metadata_set_swap_back (outcome, "52:54:00:00:00:01", FALSE, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (off, ==, cur);
  g_assert_null (va_metadata_set_swap_back (cur, "52:54:00:00:00:03", TRUE, NULL, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_NOT_FOUND);
  g_clear_error (&error);
  g_assert_null (va_metadata_set_swap_back (cur, "52:54:00:00:00:01", TRUE, "maybe", &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT);
}

/* A NIC a swap lost (issue 25, 5) is found from the metadata alone, its
 * MAC normalized; the others are not. */
static void
test_metadata_lost_macs (void)
{
  g_autoptr (GError) error = NULL;
  g_auto (GStrv) none = NULL;
  g_auto (GStrv) lost = va_metadata_lost_macs ("<nics><nic mac=\"52:54:00:00:00:01\" network=\"vpc2\"/>"
                                               "<nic mac=\"52:54:00:00:00:0A\" network=\"vpc2\" swap-back=\"accelerated\" "
                                               "swap-back-outcome=\"lost\"/><nic mac=\"52:54:00:00:00:03\" swap-back=\"accelerated\" "
                                               "swap-back-outcome=\"refused\"/></nics>",
                                               &error);
  g_autofree char *marked = NULL;

  g_assert_no_error (error);
  g_assert_cmpuint (g_strv_length (lost), ==, 1);
  g_assert_cmpstr (lost[0], ==, "52:54:00:00:00:0a");
  none = va_metadata_lost_macs ("<nics/>", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (g_strv_length (none), ==, 0);
  g_assert_null (va_metadata_lost_macs ("<other/>", &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_XML);
  g_clear_error (&error);
  /* the outcome is one va_metadata_set_swap_back() writes */
  marked = va_metadata_set_swap_back ("<nics><nic mac=\"52:54:00:00:00:01\"/></nics>", "52:54:00:00:00:01", TRUE, "lost", &error);
  g_assert_no_error (error);
  g_assert_cmpstr (marked, ==, "<nics><nic mac=\"52:54:00:00:00:01\" swap-back=\"accelerated\" swap-back-outcome=\"lost\"/></nics>");
}

/* A swap back refused for a transient reason ("busy": the daemon was at
 * a bound) is tried again by the next started begin and the daemon's
 * resume; "no-room" and "refused" are final (issue 25, 4). */
static void
test_swap_back_pending (void)
{
  static const struct
  {
    const char *outcome;
    gboolean pending;
  } cases[] = { { NULL, TRUE }, { "busy", TRUE }, { "refused", FALSE }, { "no-room", FALSE }, { "lost", FALSE } };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autofree char *attr = cases[i].outcome ? g_strdup_printf (" swap-back-outcome='%s'", cases[i].outcome) : g_strdup ("");
      g_autofree char *xml = g_strdup_printf (
        "<domain><uuid>4dea22b3-1d52-d8f3-2516-782e98ab3fa0</uuid><metadata><vdpa:nics "
        "xmlns:vdpa='http://vdpa-allocator.org/xmlns/domain/1.0'><vdpa:nic mac='52:54:00:00:00:01' vlan='5' bridge='br0' "
        "swap-back='accelerated'%s/></vdpa:nics></metadata><devices><interface type='bridge'><mac address='52:54:00:00:00:01'/>"
        "<source bridge='br0'/></interface></devices></domain>",
        attr);
      g_autoptr (VaDomain) d = va_domain_parse (xml, -1, &error);

      g_assert_no_error (error);
      g_assert_cmpint (va_nic_swap_back_pending (g_ptr_array_index (va_domain_get_nics (d), 0)), ==, cases[i].pending);
    }
}

static void
test_interface_xml (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaDomain) d = va_domain_parse ("<domain><devices><interface type='bridge'><mac address='52:54:00:00:00:01'/>"
                                            "<source bridge='br0'/></interface></devices></domain>",
                                            -1, &error);
  g_autofree char *xml = va_domain_interface_xml (d, "52:54:00:00:00:01", &error);

  g_assert_no_error (error);
  g_assert_cmpstr (xml, ==, "<interface type=\"bridge\"><mac address=\"52:54:00:00:00:01\"/><source bridge=\"br0\"/></interface>");
  g_assert_null (va_domain_interface_xml (d, "52:54:00:00:00:02", &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_NOT_FOUND);
}

/* Restore and incoming migration: a NIC saved on a tap must not come back
 * on vhost-vdpa (QEMU refuses the load); a vDPA NIC comes back on vDPA
 * where there is room, else on the network's bridge. */
static void
test_rewrite_saved (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaHostView) view = va_host_view_new ("/run/p");
  VaNetwork net = { (char *) "auto", VA_MODE_AUTO, (char *) "accel", 10, (char *) "br0", VA_BRIDGE_LINUX };
  const char *xml = "<domain><name>d</name><uuid>6f1e2a3b4c5d4e6f8a9b0c1d2e3f4a5b</uuid><metadata>"
                    "<v:nics xmlns:v='" VA_XML_NS "'><v:nic mac='52:54:00:00:00:01' network='auto'/>"
                    "<v:nic mac='52:54:00:00:00:02' network='auto'/></v:nics></metadata><devices>"
                    "<interface type='vdpa'><mac address='52:54:00:00:00:01'/><source dev='/run/p/x'/></interface>"
                    "<interface type='bridge'><mac address='52:54:00:00:00:02'/><source bridge='br0'/></interface>"
                    "</devices></domain>";
  g_autoptr (VaDomain) d = NULL;
  g_autoptr (VaDomain) full = NULL;
  VaNic *a, *b;

  va_host_view_add_network (view, &net);
  va_host_view_add_pool (view, "accel", 1, 8);
  d = va_domain_parse (xml, -1, &error);
  g_assert_no_error (error);
  g_assert_true (va_domain_rewrite_saved (d, view, &error));
  g_assert_no_error (error);
  a = g_ptr_array_index (va_domain_get_nics (d), 0);
  b = g_ptr_array_index (va_domain_get_nics (d), 1);
  g_assert_cmpint (a->form, ==, VA_FORM_ACCELERATED);
  g_assert_cmpint (b->form, ==, VA_FORM_PORTABLE); /* room, but saved on a tap */
  g_assert_false (b->fallback);

  /* no room: the vDPA NIC falls back */
  va_host_view_set_pool_free (view, "accel", 0, NULL);
  full = va_domain_parse (xml, -1, &error);
  g_assert_true (va_domain_rewrite_saved (full, view, &error));
  g_assert_no_error (error);
  a = g_ptr_array_index (va_domain_get_nics (full), 0);
  g_assert_cmpint (a->form, ==, VA_FORM_PORTABLE);
  g_assert_true (a->fallback);
}

/* What the hook and vdpactl read off a document: an sriov NIC is
 * accelerated as defined (on our hostdev network) and as libvirt shows it
 * live (type='hostdev'), and its plan has the pool's kind and no queues. */
static void
test_sriov_forms (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaHostView) view = va_host_view_new ("/run/p");
  VaNetwork net = { (char *) "sr", VA_MODE_SRIOV, (char *) "cx5", 2334, NULL, VA_BRIDGE_LINUX };
  const char *xml = "<domain><name>d</name><metadata>"
                    "<v:nics xmlns:v='" VA_XML_NS "'><v:nic mac='52:54:00:00:00:01' network='sr'/>"
                    "<v:nic mac='52:54:00:00:00:02' network='sr'/><v:nic mac='52:54:00:00:00:03' network='sr'/>"
                    "<v:nic mac='52:54:00:00:00:04' network='sr'/></v:nics></metadata><devices>"
                    "<interface type='network'><mac address='52:54:00:00:00:01'/><source network='vdpa-allocator-cx5'/></interface>"
                    "<interface type='hostdev' managed='yes'><mac address='52:54:00:00:00:02'/><driver name='vfio'/>"
                    "<source><address type='pci' domain='0x0000' bus='0x3b' slot='0x02' function='0x1'/></source></interface>"
                    "<interface type='network'><mac address='52:54:00:00:00:03'/><source network='default'/></interface>"
                    "<interface type='vdpa'><mac address='52:54:00:00:00:04'/><source dev='/run/p/x'/></interface>"
                    "</devices></domain>";
  g_autoptr (VaDomain) d = NULL;
  g_autofree char *name = va_sriov_network_name ("cx5");
  g_autofree char *out = NULL;
  GPtrArray *nics;
  VaNicPlan plan;

  g_assert_cmpstr (name, ==, "vdpa-allocator-cx5");
  va_host_view_add_network (view, &net);
  va_host_view_add_pool (view, "cx5", 0, -1);
  g_assert_true (va_host_view_set_pool_kind (view, "cx5", VA_POOL_KIND_SRIOV, &error));
  d = va_domain_parse (xml, -1, &error);
  g_assert_no_error (error);
  nics = va_domain_get_nics (d);
  g_assert_cmpint (((VaNic *) nics->pdata[0])->form, ==, VA_FORM_ACCELERATED);
  g_assert_cmpint (((VaNic *) nics->pdata[0])->accel_kind, ==, VA_POOL_KIND_SRIOV);
  g_assert_null (((VaNic *) nics->pdata[0])->source_dev);
  g_assert_cmpint (((VaNic *) nics->pdata[1])->form, ==, VA_FORM_ACCELERATED);
  g_assert_cmpint (((VaNic *) nics->pdata[1])->accel_kind, ==, VA_POOL_KIND_SRIOV);
  g_assert_cmpint (((VaNic *) nics->pdata[2])->form, ==, VA_FORM_PORTABLE);
  g_assert_cmpint (((VaNic *) nics->pdata[3])->form, ==, VA_FORM_ACCELERATED);
  g_assert_cmpint (((VaNic *) nics->pdata[3])->accel_kind, ==, VA_POOL_KIND_VDPA);
  g_assert_true (va_nic_resolve (nics->pdata[0], view, &plan, &error));
  g_assert_cmpint (plan.mode, ==, VA_MODE_SRIOV);
  g_assert_cmpint (plan.kind, ==, VA_POOL_KIND_SRIOV);
  g_assert_cmpuint (plan.queues, ==, 0);
  g_assert_cmpuint (plan.vlan, ==, 2334);

  /* no <uuid>: a VF needs no port path, so every NIC becomes one */
  g_assert_true (va_domain_rewrite (d, view, VA_FORM_ACCELERATED, &error));
  g_assert_no_error (error);
  for (guint i = 0; i < nics->len; i++)
    g_assert_cmpint (((VaNic *) nics->pdata[i])->accel_kind, ==, VA_POOL_KIND_SRIOV);
  out = va_domain_to_string (d, NULL);
  g_assert_null (strstr (out, "hostdev"));
  g_assert_null (strstr (out, "vfio"));
  g_assert_null (strstr (out, "/run/p"));
}

static char *
rewrite_text (const char *xml, const VaHostView *view, VaForm form)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaDomain) d = va_domain_parse (xml, -1, &error);

  g_assert_no_error (error);
  g_assert_true (va_domain_rewrite (d, view, form, &error));
  g_assert_no_error (error);
  return va_domain_to_string (d, NULL);
}

/* Found by fuzz-rewrite: text that is not white space before an element
 * the rewrite removes. The first pass left two text nodes, which a save
 * and parse merge into one; the second pass must still indent <vlan> as
 * the first did, and the way back must give the same bytes. */
static void
test_rewrite_stray_text (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaHostView) view = va_host_view_new ("/run/p");
  VaNetwork net = { (char *) "sr", VA_MODE_SRIOV, (char *) "cx5", 2334, (char *) "br3", VA_BRIDGE_LINUX };
  const char *xml = "<domain>\n  <name>d</name>\n  <uuid>6f1e2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b</uuid>\n  <metadata>\n"
                    "    <v:nics xmlns:v='" VA_XML_NS "'><v:nic mac='52:54:00:00:00:02' network='sr'/></v:nics>\n"
                    "  </metadata>\n  <devices>\n"
                    "    <interface type='hostdev' managed='yes'>\n"
                    "      <mac address='52:54:00:00:00:02'/>\n"
                    "   )   <driver name='vfio'/>\n"
                    "      <source>\n"
                    "        <address type='pci' domain='0x0000' bus='0x3b' slot='0x02' function='0x1'/>\n"
                    "      </source>\n"
                    "      <vlan>\n        <tag id='2334'/>\n      </vlan>\n"
                    "    </interface>\n  </devices>\n</domain>\n";
  g_autofree char *a = NULL, *aa = NULL, *p = NULL, *pa = NULL;

  va_host_view_add_network (view, &net);
  va_host_view_add_pool (view, "cx5", 0, -1);
  g_assert_true (va_host_view_set_pool_kind (view, "cx5", VA_POOL_KIND_SRIOV, &error));
  a = rewrite_text (xml, view, VA_FORM_ACCELERATED);
  g_assert_nonnull (strstr (a, "<source network=\"vdpa-allocator-cx5\"/>\n      <vlan>\n        <tag id=\"2334\"/>\n      </vlan>"));
  aa = rewrite_text (a, view, VA_FORM_ACCELERATED);
  g_assert_cmpstr (aa, ==, a);
  p = rewrite_text (a, view, VA_FORM_PORTABLE);
  pa = rewrite_text (p, view, VA_FORM_ACCELERATED);
  g_assert_cmpstr (pa, ==, a);
}

/* A started domain's NIC of a hostdev network: the VF libvirt chose and
 * the VLAN it applied, as the hook reports them at start begin. */
static const VaNic *
live_nic (const char *iface, VaDomain **out)
{
  g_autofree char *xml = g_strdup_printf ("<domain><name>d</name><uuid>6f1e2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b</uuid><metadata>"
                                          "<vdpa:nics xmlns:vdpa='http://vdpa-allocator.org/xmlns/domain/1.0'>"
                                          "<vdpa:nic mac='52:54:00:00:00:01' network='n'/></vdpa:nics></metadata>"
                                          "<devices>%s</devices></domain>",
                                          iface);
  g_autoptr (GError) error = NULL;

  *out = va_domain_parse (xml, -1, &error);
  g_assert_no_error (error);
  return g_ptr_array_index (va_domain_get_nics (*out), 0);
}

static void
test_live_vf (void)
{
  g_autoptr (VaDomain) a = NULL, b = NULL, c = NULL, d = NULL, e = NULL;
  const VaNic *nic;

  nic = live_nic ("<interface type='hostdev' managed='yes'><mac address='52:54:00:00:00:01'/><source><address type='pci' "
                  "domain='0x0000' bus='0x01' slot='0x10' function='0x2'/></source><vlan><tag id='2334'/></vlan></interface>",
                  &a);
  g_assert_cmpstr (nic->vf, ==, "0000:01:10.2");
  g_assert_cmpuint (nic->vf_vlan, ==, 2334);
  g_assert_cmpint (nic->accel_kind, ==, VA_POOL_KIND_SRIOV);
  /* no <vlan>: none applied */
  nic = live_nic ("<interface type='hostdev'><mac address='52:54:00:00:00:01'/><source><address type='pci' domain='0x0001' "
                  "bus='0x3c' slot='0x00' function='0x1'/></source></interface>",
                  &b);
  g_assert_cmpstr (nic->vf, ==, "0001:3c:00.1");
  g_assert_cmpuint (nic->vf_vlan, ==, 0);
  /* two tags (a trunk) are no VF VLAN */
  nic = live_nic ("<interface type='hostdev'><mac address='52:54:00:00:00:01'/><source><address type='pci' domain='0x0000' "
                  "bus='0x01' slot='0x10' function='0x0'/></source><vlan trunk='yes'><tag id='10'/><tag id='20'/></vlan></interface>",
                  &c);
  g_assert_cmpuint (nic->vf_vlan, ==, G_MAXUINT16);
  /* the defined form (prepare begin) and a USB or partial address name no VF */
  nic = live_nic ("<interface type='network'><mac address='52:54:00:00:00:01'/><source network='vdpa-allocator-p'/></interface>", &d);
  g_assert_null (nic->vf);
  nic = live_nic ("<interface type='hostdev'><mac address='52:54:00:00:00:01'/><source><address type='pci' bus='0x01' slot='0x10' "
                  "function='0x0'/></source></interface>",
                  &e);
  g_assert_null (nic->vf);
}

/* Issue 27, point 5: a network with failover=true. Its NIC's accelerated
 * form is the virtio standby (whatever the pool's room: the VF comes at
 * run time), refused on a machine without PCI Express; the transient
 * member, built for the daemon's plug, names the standby's alias; a live
 * domain with both members parses, the VF read off the member. */
#define FO_DOMAIN                                                                                                                          \
  "<domain><name>d</name><uuid>6f1e2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b</uuid><metadata>"                                                      \
  "<vdpa:nics xmlns:vdpa='http://vdpa-allocator.org/xmlns/domain/1.0'>"                                                                    \
  "<vdpa:nic mac='52:54:00:00:00:01' network='fo'/></vdpa:nics></metadata>"                                                                \
  "<os><type arch='x86_64' machine='%s'>hvm</type></os><devices>"                                                                          \
  "<interface type='network'><mac address='52:54:00:00:00:01'/><source network='default'/><model type='virtio'/></interface>%s"            \
  "</devices></domain>"

static VaHostView *
failover_view (void)
{
  g_autoptr (GError) error = NULL;
  VaNetwork net = { .name = "fo", .mode = VA_MODE_SRIOV, .pool = "cx5", .vlan = 2334, .bridge = "br0", .failover = TRUE };
  VaHostView *view = va_host_view_new ("/run/p");

  va_host_view_add_network (view, &net);
  va_host_view_add_pool (view, "cx5", 0, 0); /* full: the standby needs no slot */
  g_assert_true (va_host_view_set_pool_kind (view, "cx5", VA_POOL_KIND_SRIOV, &error));
  return view;
}

static void
test_failover_form (void)
{
  g_autoptr (VaHostView) view = failover_view ();
  g_autoptr (GError) error = NULL;
  g_autoptr (VaDomain) d = NULL;
  g_autoptr (VaDomain) live = NULL;
  g_autofree char *xml = g_strdup_printf (FO_DOMAIN, "pc-q35-7.2", "");
  g_autofree char *accel = NULL, *portable = NULL, *member = NULL, *live_xml = NULL, *iface = NULL;
  const VaNic *nic;
  VaNicPlan plan;

  d = va_domain_parse (xml, -1, &error);
  g_assert_no_error (error);
  nic = g_ptr_array_index (va_domain_get_nics (d), 0);
  g_assert_true (va_nic_resolve (nic, view, &plan, &error));
  g_assert_true (plan.failover);
  g_assert_true (va_domain_rewrite (d, view, VA_FORM_ACCELERATED, &error));
  g_assert_no_error (error);
  g_assert_cmpint (nic->form, ==, VA_FORM_ACCELERATED);
  g_assert_cmpint (nic->accel_kind, ==, VA_POOL_KIND_SRIOV);
  g_assert_true (nic->failover);
  g_assert_false (nic->fallback);
  g_assert_cmpstr (nic->alias, ==, "ua-vdpa-525400000001");
  accel = va_domain_to_string (d, NULL);
  g_assert_nonnull (strstr (accel, "<interface type=\"bridge\"><mac address=\"52:54:00:00:00:01\"/><source bridge=\"br0\"/>"
                                   "<model type=\"virtio\"/><teaming type=\"persistent\"/><alias name=\"ua-vdpa-525400000001\"/>"
                                   "</interface>"));
  g_assert_nonnull (strstr (accel, "standby-alias=\"ua-vdpa-525400000001\""));

  /* the transient member, for the daemon's plug: legacy eswitch, so
   * libvirt sets the VF's VLAN */
  member = va_domain_failover_member_xml (d, view, "52:54:00:00:00:01", "0000:3c:00.1", &error);
  g_assert_no_error (error);
  g_assert_cmpstr (member, ==,
                   "<interface type='hostdev' managed='yes'>\n"
                   "  <mac address='52:54:00:00:00:01'/>\n"
                   "  <source>\n"
                   "    <address type='pci' domain='0x0000' bus='0x3c' slot='0x00' function='0x1'/>\n"
                   "  </source>\n"
                   "  <vlan>\n"
                   "    <tag id='2334'/>\n"
                   "  </vlan>\n"
                   "  <teaming type='transient' persistent='ua-vdpa-525400000001'/>\n"
                   "  <alias name='ua-vdpa-vf-525400000001'/>\n"
                   "</interface>\n");
  g_clear_pointer (&member, g_free);
  /* switchdev: the representor carries the VLAN, libvirt none */
  g_assert_true (va_host_view_set_pool_representor_vlan (view, "cx5", TRUE, &error));
  member = va_domain_failover_member_xml (d, view, "52:54:00:00:00:01", "0000:3c:00.1", &error);
  g_assert_no_error (error);
  g_assert_null (strstr (member, "<vlan>"));
  g_clear_pointer (&member, g_free);
  g_assert_null (va_domain_failover_member_xml (d, view, "52:54:00:00:00:01", "0000:3c:00", &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_null (va_domain_failover_member_xml (d, view, "52:54:00:00:00:02", "0000:3c:00.1", &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_NOT_FOUND);
  g_clear_error (&error);

  /* the running domain shows both members with one MAC: the NIC is the
   * standby, its VF the member's */
  {
    /* the standby as the rewrite made it, the member after it */
    g_autofree char *standby_doc = g_strdup (accel);
    char *end = strstr (standby_doc, "</devices>");

    *end = '\0';
    live_xml = g_strconcat (standby_doc,
                            "<interface type='hostdev' managed='yes'><mac address='52:54:00:00:00:01'/><source><address type='pci' "
                            "domain='0x0000' bus='0x3c' slot='0x00' function='0x1'/></source><vlan><tag id='2334'/></vlan>"
                            "<teaming type='transient' persistent='ua-vdpa-525400000001'/></interface></devices></domain>",
                            NULL);
  }
  live = va_domain_parse (live_xml, -1, &error);
  g_assert_no_error (error);
  nic = g_ptr_array_index (va_domain_get_nics (live), 0);
  g_assert_true (nic->failover);
  g_assert_cmpstr (nic->vf, ==, "0000:3c:00.1");
  g_assert_cmpuint (nic->vf_vlan, ==, 2334);
  iface = va_domain_interface_xml (live, "52:54:00:00:00:01", &error);
  g_assert_no_error (error);
  g_assert_nonnull (strstr (iface, "persistent"));
  g_assert_null (strstr (iface, "transient"));

  /* portable: a plain virtio NIC, what the failover form added gone */
  g_assert_true (va_domain_rewrite (d, view, VA_FORM_PORTABLE, &error));
  g_assert_no_error (error);
  nic = g_ptr_array_index (va_domain_get_nics (d), 0);
  g_assert_false (nic->failover);
  g_assert_null (nic->standby_alias);
  portable = va_domain_to_string (d, NULL);
  g_assert_null (strstr (portable, "teaming"));
  g_assert_null (strstr (portable, "alias"));
  g_assert_nonnull (strstr (portable, "<interface type=\"bridge\"><mac address=\"52:54:00:00:00:01\"/><source bridge=\"br0\"/>"
                                      "<model type=\"virtio\"/></interface>"));
  /* and a portable NIC has no member to build */
  g_assert_null (va_domain_failover_member_xml (d, view, "52:54:00:00:00:01", "0000:3c:00.1", &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT);
}

static void
test_failover_needs_pcie (void)
{
  g_autoptr (VaHostView) view = failover_view ();
  const char *machines[] = { "pc-i440fx-7.2", "pc", "isapc", NULL };

  for (guint i = 0; i < G_N_ELEMENTS (machines); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autofree char *xml = machines[i] ? g_strdup_printf (FO_DOMAIN, machines[i], "") : NULL;
      g_autoptr (VaDomain) d = NULL;

      if (!xml)
        {
          /* no machine: libvirt picks pc */
          g_autofree char *with = g_strdup_printf (FO_DOMAIN, "X", "");
          g_auto (GStrv) parts = g_strsplit (with, " machine='X'", 2);
          xml = g_strjoinv ("", parts);
        }
      d = va_domain_parse (xml, -1, &error);
      g_assert_no_error (error);
      g_assert_false (va_domain_rewrite (d, view, VA_FORM_ACCELERATED, &error));
      g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT);
      g_assert_nonnull (strstr (error->message, "asks for failover"));
      g_assert_null (strchr (error->message, '\n'));
      /* the document is untouched, and the portable form still works */
      g_clear_error (&error);
      g_assert_true (va_domain_rewrite (d, view, VA_FORM_PORTABLE, &error));
      g_assert_no_error (error);
    }
  {
    g_autoptr (GError) error = NULL;
    g_autofree char *xml = g_strdup_printf (FO_DOMAIN, "q35", "");
    g_autoptr (VaDomain) d = va_domain_parse (xml, -1, &error);

    g_assert_true (va_domain_rewrite (d, view, VA_FORM_ACCELERATED, &error));
    g_assert_no_error (error);
  }
}

static void
test_standby_alias (void)
{
  g_autofree char *a = va_standby_alias ("52:54:00:6B:3C:58");
  g_autofree char *m = va_member_alias ("52:54:00:6b:3c:58");

  g_assert_cmpstr (a, ==, "ua-vdpa-5254006b3c58");
  g_assert_cmpstr (m, ==, "ua-vdpa-vf-5254006b3c58");
  g_assert_null (va_standby_alias ("01:00:5e:00:00:01"));
  g_assert_true (va_user_alias_is_valid ("ua-web_1"));
  g_assert_false (va_user_alias_is_valid ("net0"));
  g_assert_false (va_user_alias_is_valid ("ua-"));
  g_assert_false (va_user_alias_is_valid ("ua-a'b"));
  g_assert_false (va_user_alias_is_valid (NULL));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/domain/mac-syntax", test_mac);
  g_test_add_func ("/domain/swap-back-pending", test_swap_back_pending);
  g_test_add_func ("/domain/uuid-syntax", test_uuid);
  g_test_add_func ("/domain/metadata-precheck", test_precheck);
  g_test_add_func ("/domain/plain-domain-has-no-nics", test_plain_domain_has_no_nics);
  g_test_add_func ("/domain/parse-bounds", test_parse_bounds);
  g_test_add_func ("/domain/parse-identity", test_parse_identity);
  g_test_add_func ("/domain/utf8-prefix", test_utf8_prefix);
  g_test_add_func ("/domain/port-path", test_port_path);
  g_test_add_func ("/domain/metadata-update", test_metadata_update);
  g_test_add_func ("/domain/metadata-swap-back", test_metadata_swap_back);
  g_test_add_func ("/domain/metadata-lost-macs", test_metadata_lost_macs);
  g_test_add_func ("/domain/metadata-keeps-shared-memory", test_metadata_keeps_shared_memory);
  g_test_add_func ("/domain/memory-is-shared", test_memory_is_shared);
  g_test_add_func ("/domain/interface-xml", test_interface_xml);
  g_test_add_func ("/domain/rewrite-saved", test_rewrite_saved);
  g_test_add_func ("/domain/rewrite-stray-text", test_rewrite_stray_text);
  g_test_add_func ("/domain/sriov-forms", test_sriov_forms);
  g_test_add_func ("/domain/live-vf", test_live_vf);
  g_test_add_func ("/domain/failover-form", test_failover_form);
  g_test_add_func ("/domain/failover-needs-pcie", test_failover_needs_pcie);
  g_test_add_func ("/domain/standby-alias", test_standby_alias);
  return g_test_run ();
}
