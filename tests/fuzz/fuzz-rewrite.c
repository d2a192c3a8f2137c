/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target for the domain-XML intent engine: parse, rewrite to
 * either form, serialize; and, after every successful rewrite, the
 * invariants the engine promises (libvirt-xml/va-domain.h):
 *
 *  - the output parses again;
 *  - a second rewrite to the same form gives the very same bytes;
 *  - with unlimited capacity, accelerated -> portable -> accelerated gives
 *    the same bytes as the first accelerated form;
 *  - a rewrite that fails leaves the document as it was;
 *  - va_domain_rewrite_xml () agrees with parse + rewrite + to_string.
 *
 * A broken invariant abort()s, so libFuzzer keeps the input.
 *
 * Input: an optional leading selector byte, then the document. The first
 * byte is taken as the selector only when it cannot start an XML document
 * (not '<', not white space, not a UTF-8 BOM), so plain XML seeds work as
 * they are. Selector bit 0 picks the form, bits 1-3 the capacity profile. */
#include <libxml/parser.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "va-domain.h"
#include "va-error.h"

int LLVMFuzzerInitialize (int *argc, char ***argv);
int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

#define N_PROFILES 8

/* Free slots of pool-a, pool-b and pool-c per capacity profile; profile 0
 * is unlimited (free < 0). */
static const gint64 profiles[N_PROFILES][3] = {
  { -1, -1, -1 }, { 0, 0, 0 }, { 1, 0, 2 }, { 1, 1, 1 }, { 2, 1, 0 }, { 0, 3, -1 }, { 3, -1, 1 }, { 64, 64, 64 },
};

static VaHostView *views[N_PROFILES];

static void
add_network (VaHostView *view, const char *name, VaMode mode, const char *pool, guint16 vlan, const char *bridge, VaBridgeKind kind)
{
  VaNetwork net = {
    .name = (char *) name,
    .mode = mode,
    .pool = (char *) pool,
    .vlan = vlan,
    .bridge = (char *) bridge,
    .bridge_kind = kind,
  };

  va_host_view_add_network (view, &net);
}

static VaHostView *
make_view (const gint64 free_slots[3])
{
  VaHostView *view = va_host_view_new ("/run/vdpa-allocator/ports");

  /* vdpa without fallback, vdpa with an OVS fallback */
  add_network (view, "vpc1", VA_MODE_VDPA, "pool-a", 100, NULL, VA_BRIDGE_LINUX);
  add_network (view, "vpc2", VA_MODE_VDPA, "pool-b", 2334, "br-ovs0", VA_BRIDGE_OVS);
  /* virtio on a Linux bridge (tagged and untagged) and on an OVS bridge */
  add_network (view, "lan", VA_MODE_VIRTIO, NULL, 0, "br0", VA_BRIDGE_LINUX);
  add_network (view, "vpc-std", VA_MODE_VIRTIO, NULL, 2200, "br_bond0", VA_BRIDGE_LINUX);
  add_network (view, "ovsnet", VA_MODE_VIRTIO, NULL, 300, "ovsbr1", VA_BRIDGE_OVS);
  /* auto on both bridge kinds */
  add_network (view, "mixed", VA_MODE_AUTO, "pool-a", 42, "br1", VA_BRIDGE_LINUX);
  add_network (view, "auto-ovs", VA_MODE_AUTO, "pool-c", 0, "ovsbr2", VA_BRIDGE_OVS);
  /* a network whose pool the host does not have */
  add_network (view, "ghost", VA_MODE_VDPA, "pool-missing", 7, "br2", VA_BRIDGE_LINUX);
  /* VFs passed through: with a Linux fallback, without one, and auto on OVS */
  add_network (view, "sr", VA_MODE_SRIOV, "pool-d", 2334, "br3", VA_BRIDGE_LINUX);
  add_network (view, "sr-only", VA_MODE_SRIOV, "pool-d", 3000, NULL, VA_BRIDGE_LINUX);
  add_network (view, "sr-auto", VA_MODE_AUTO, "pool-d", 0, "ovsbr3", VA_BRIDGE_OVS);

  va_host_view_add_pool (view, "pool-a", 4, free_slots[0]);
  va_host_view_add_pool (view, "pool-b", 8, free_slots[1]);
  va_host_view_add_pool (view, "pool-c", 0, free_slots[2]);
  va_host_view_add_pool (view, "pool-d", 0, free_slots[1]);
  va_host_view_set_pool_kind (view, "pool-d", VA_POOL_KIND_SRIOV, NULL);
  /* software slots (issue 28): vpc2 and auto-ovs NICs make the
   * accelerated form share the domain's memory */
  va_host_view_set_pool_software (view, "pool-b", TRUE, NULL);
  va_host_view_set_pool_software (view, "pool-c", TRUE, NULL);
  return view;
}

static void
silence_xml (void *ctx, const char *msg, ...)
{
}

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  xmlInitParser ();
  xmlSetGenericErrorFunc (NULL, silence_xml);
  for (guint i = 0; i < N_PROFILES; i++)
    views[i] = make_view (profiles[i]);
  return 0;
}

static G_NORETURN void
broken (const char *what, const char *a, gsize alen, const char *b, gsize blen)
{
  fprintf (stderr, "INVARIANT BROKEN: %s\n", what);
  if (a)
    fprintf (stderr, "--- first (%zu bytes):\n%.*s\n", (size_t) alen, (int) alen, a);
  if (b)
    fprintf (stderr, "--- second (%zu bytes):\n%.*s\n", (size_t) blen, (int) blen, b);
  abort ();
}

static gboolean
same (const char *a, gsize alen, const char *b, gsize blen)
{
  return alen == blen && memcmp (a, b, alen) == 0;
}

/* Parses @xml, which the engine itself wrote, and rewrites it to @form.
 * Returns NULL with @error set when the rewrite refuses; aborts when the
 * engine's own output does not parse. */
static char *
reparse_rewrite (const char *xml, gsize len, const VaHostView *view, VaForm form, gsize *out_len, GError **error)
{
  g_autoptr (GError) local = NULL;
  g_autoptr (VaDomain) domain = va_domain_parse (xml, len, &local);

  if (!domain)
    {
      fprintf (stderr, "error: %s\n", local->message);
      broken ("the engine's output does not parse again", xml, len, NULL, 0);
    }
  if (!va_domain_rewrite (domain, view, form, error))
    return NULL;
  return va_domain_to_string (domain, out_len);
}

static void
check_invariants (const char *out, gsize out_len, guint profile, VaForm form)
{
  const VaHostView *view = views[profile];
  g_autoptr (GError) error = NULL;
  g_autofree char *again = NULL;
  g_autofree char *accel = NULL;
  g_autofree char *portable = NULL;
  g_autofree char *back = NULL;
  gsize again_len = 0, accel_len = 0, portable_len = 0, back_len = 0;

  /* idempotence: the same host view makes the same decisions */
  again = reparse_rewrite (out, out_len, view, form, &again_len, &error);
  if (!again)
    {
      fprintf (stderr, "error: %s\n", error->message);
      broken ("a second rewrite to the same form fails", out, out_len, NULL, 0);
    }
  if (!same (out, out_len, again, again_len))
    broken ("a second rewrite to the same form changes the document", out, out_len, again, again_len);

  if (profiles[profile][0] >= 0 || profiles[profile][1] >= 0 || profiles[profile][2] >= 0)
    return;

  /* reversibility, with unlimited capacity */
  if (form == VA_FORM_ACCELERATED)
    {
      accel = g_strndup (out, out_len);
      accel_len = out_len;
    }
  else
    {
      accel = reparse_rewrite (out, out_len, view, VA_FORM_ACCELERATED, &accel_len, &error);
      if (!accel)
        return; /* e.g. no <uuid>: the document has no accelerated form */
    }
  portable = reparse_rewrite (accel, accel_len, view, VA_FORM_PORTABLE, &portable_len, &error);
  if (!portable)
    return; /* e.g. a vdpa NIC without fallback: no portable form */
  back = reparse_rewrite (portable, portable_len, view, VA_FORM_ACCELERATED, &back_len, &error);
  if (!back)
    {
      fprintf (stderr, "error: %s\n", error->message);
      broken ("accelerated -> portable -> accelerated fails on the way back", accel, accel_len, portable, portable_len);
    }
  if (!same (accel, accel_len, back, back_len))
    broken ("accelerated -> portable -> accelerated changes the document", accel, accel_len, back, back_len);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  const char *xml = (const char *) data;
  gsize len = size;
  guint8 selector = 0;
  guint profile;
  VaForm form;
  g_autoptr (GError) error = NULL;
  g_autoptr (GError) xml_error = NULL;
  g_autoptr (VaDomain) domain = NULL;
  g_autofree char *before = NULL;
  g_autofree char *out = NULL;
  g_autofree char *one_step = NULL;
  gsize before_len = 0, out_len = 0;

  if (len > 0 && data[0] != '<' && data[0] != 0xEF && !g_ascii_isspace (data[0]))
    {
      selector = data[0];
      xml++;
      len--;
    }
  form = (selector & 1) ? VA_FORM_PORTABLE : VA_FORM_ACCELERATED;
  profile = (selector >> 1) % N_PROFILES;

  /* the pre-check must never hide a document the parser finds intent in */
  domain = va_domain_parse (xml, len, &error);
  if (!domain)
    return 0;
  if (va_domain_get_nics (domain)->len > 0 && !va_domain_text_may_have_intent (xml, len))
    broken ("va_domain_text_may_have_intent () misses the intent", xml, len, NULL, 0);

  before = va_domain_to_string (domain, &before_len);
  if (!va_domain_rewrite (domain, views[profile], form, &error))
    {
      gsize after_len = 0;
      g_autofree char *after = va_domain_to_string (domain, &after_len);

      g_assert (error != NULL);
      if (!same (before, before_len, after, after_len))
        broken ("a failed rewrite changed the document", before, before_len, after, after_len);
      return 0;
    }
  g_assert (error == NULL);
  out = va_domain_to_string (domain, &out_len);

  one_step = va_domain_rewrite_xml (xml, len, views[profile], form, &xml_error);
  if (!one_step)
    {
      fprintf (stderr, "error: %s\n", xml_error->message);
      broken ("va_domain_rewrite_xml () fails where parse + rewrite succeed", out, out_len, NULL, 0);
    }
  if (!same (out, out_len, one_step, strlen (one_step)))
    broken ("va_domain_rewrite_xml () and parse + rewrite + to_string differ", out, out_len, one_step, strlen (one_step));

  check_invariants (out, out_len, profile, form);
  return 0;
}
