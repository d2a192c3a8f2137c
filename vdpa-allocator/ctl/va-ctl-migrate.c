/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vdpactl domain migrate|save|managedsave|restore and accelerate|portable
 * --live: a running domain's accelerated NICs swapped for their portable
 * form (virtio, same MAC, VLAN and PCI slot) while QEMU cannot move or save
 * a vhost-vdpa netdev, and back. libvirt through its client API only; the
 * daemon of this host through its bus (a destination's daemon is out of
 * reach: the swap back there is 'vdpactl domain accelerate --live' run on
 * that host). */
#define G_LOG_DOMAIN "va-ctl-migrate"

#include "config.h"

#include "va-ctl-private.h"
#include "va-ctl-migrate.h"

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <string.h>

#include "va-config.h"
#include "va-domain.h"
#include "va-error.h"
#include "va-libvirt.h"
#include "va-netlink.h"
#include "va-paths.h"

/* how long a guest may take to eject a NIC: ACPI hot-unplug under TCG takes
 * well under a second here, 20 to 40 s under TCG inside the lab's TCG; a
 * guest that ignores it (paused, no ACPI) must not hang vdpactl */
#define UNPLUG_TIMEOUT_S 30.0

static double
unplug_timeout (void)
{
  const char *v = g_getenv ("VDPA_ALLOCATOR_UNPLUG_TIMEOUT");
  char *end = NULL;
  double t = v ? g_ascii_strtod (v, &end) : 0;

  return v && end && *end == '\0' && t > 0 && t <= 3600 ? t : UNPLUG_TIMEOUT_S;
}

typedef enum
{
  PATH_AS_IS,  /* portable or virtio already: moves as it is */
  PATH_NATIVE, /* QEMU reports no blocker: libvirt moves it accelerated */
  PATH_SWAP,   /* swapped to the portable form first */
} NicPath;

static const char *const path_names[] = { "as-is", "native", "swap" };

typedef struct
{
  char *mac;
  char *network;
  VaForm before;
  VaForm after;
  NicPath path;
  char *note;
  double unplug_s; /* < 0: not measured */
  double plug_s;
  double offline_s; /* from the unplug request until the new form is plugged */
} NicReport;

static void
nic_report_free (NicReport *r)
{
  g_free (r->mac);
  g_free (r->network);
  g_free (r->note);
  g_free (r);
}

typedef struct
{
  const char *operation;
  char *destination;
  GPtrArray *nics; /* NicReport* */
  GStrv blockers;  /* NULL: not known */
  gboolean done;
  char *error;
  gint64 downtime_ms; /* < 0: not known */
} Report;

static void
report_clear (Report *r)
{
  g_clear_pointer (&r->nics, g_ptr_array_unref);
  g_clear_pointer (&r->blockers, g_strfreev);
  g_clear_pointer (&r->destination, g_free);
  g_clear_pointer (&r->error, g_free);
}

static NicReport *
report_nic (Report *r, const VaNic *nic)
{
  NicReport *n;

  for (guint i = 0; i < r->nics->len; i++)
    {
      n = g_ptr_array_index (r->nics, i);
      if (strcmp (n->mac, nic->mac) == 0)
        return n;
    }
  n = g_new0 (NicReport, 1);
  n->mac = g_strdup (nic->mac);
  n->network = g_strdup (nic->network);
  n->before = n->after = nic->form;
  n->unplug_s = n->plug_s = n->offline_s = -1;
  g_ptr_array_add (r->nics, n);
  return n;
}

static void nic_note (NicReport *n, const char *fmt, ...) G_GNUC_PRINTF (2, 3);

static void
nic_note (NicReport *n, const char *fmt, ...)
{
  va_list ap;
  g_autofree char *text = NULL;
  char *joined;

  va_start (ap, fmt);
  text = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  joined = n->note ? g_strdup_printf ("%s; %s", n->note, text) : g_strdup (text);
  g_free (n->note);
  n->note = joined;
}

/* ---- libvirt pieces ---------------------------------------------------- */

static VaDomain *
live_domain (VaLibvirt *lv, GError **error)
{
  g_autofree char *xml = virDomainGetXMLDesc (lv->dom, 0);

  if (!xml)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "reading the live domain XML: %s", virGetLastErrorMessage ());
      return NULL;
    }
  return va_domain_parse (xml, -1, error);
}

/* The live XML rewritten to @form by this host's daemon (which knows its
 * pools' room); for the portable form, without the daemon, by this host's
 * configuration. */
static VaDomain *
rewritten (VaLibvirt *lv, VaForm form, GError **error)
{
  g_autofree char *xml = virDomainGetXMLDesc (lv->dom, 0);
  g_autofree char *out = NULL;
  g_autoptr (GVariant) ret = NULL;
  g_autoptr (GError) local = NULL;

  if (!xml)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "reading the live domain XML: %s", virGetLastErrorMessage ());
      return NULL;
    }
  ret = va_ctl_call ("RewriteDomain", g_variant_new ("(ss)", xml, va_form_to_string (form)), "(s)", &local);
  if (ret)
    g_variant_get (ret, "(s)", &out);
  else if (form == VA_FORM_PORTABLE && g_error_matches (local, VA_ERROR, VA_ERROR_UNREACHABLE))
    {
      g_autoptr (VaConfig) config = va_config_load (va_path_get (VA_PATH_CONFIG), error);
      g_autoptr (VaHostView) view = NULL;
      g_autofree char *ports = va_path_ports (va_path_get (VA_PATH_RUN));

      if (!config)
        return NULL;
      view = va_config_to_host_view (config, ports);
      out = va_domain_rewrite_xml (xml, -1, view, form, error);
      if (!out)
        return NULL;
    }
  else
    {
      g_propagate_error (error, g_steal_pointer (&local));
      return NULL;
    }
  return va_domain_parse (out, -1, error);
}

/* Polls the live XML until the interface with @mac is gone (libvirt
 * removes it on QEMU's DEVICE_DELETED, once the guest let go). Not through
 * va_domain_parse(): a metadata NIC without its interface is an error
 * there. libvirt writes <mac address='...'/> just so. */
static gboolean
wait_unplugged (VaLibvirt *lv, const char *mac, double timeout, GError **error)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) (timeout * G_USEC_PER_SEC);
  g_autofree char *needle = g_strdup_printf ("<mac address='%s'/>", mac);

  for (;;)
    {
      g_autofree char *xml = virDomainGetXMLDesc (lv->dom, 0);

      if (xml && !strstr (xml, needle))
        return TRUE;
      if (g_get_monotonic_time () > deadline)
        {
          g_set_error (error, VA_ERROR, VA_ERROR_BUSY,
                       "the guest has not ejected NIC %s within %.0f s (it stays plugged as it was; libvirt keeps the unplug pending)", mac,
                       timeout);
          return FALSE;
        }
      g_usleep (20 * 1000);
    }
}

static void
announce (VaLibvirt *lv)
{
  /* RARPs from every NIC, so that switches learn the MAC's new port */
  g_autofree char *reply
    = va_libvirt_qmp (lv, "{\"execute\":\"announce-self\",\"arguments\":{\"initial\":50,\"max\":550,\"rounds\":10,\"step\":50}}", NULL);
}

/* After a plug: a portable NIC on a Linux bridge joins its VLAN as the
 * hook does at start (libvirt refuses <vlan> there, and runs no hook for
 * hot-plug); on failure it is unplugged again, as an untagged NIC would
 * land on the bridge's default VLAN. Open vSwitch ports libvirt tags. */
static gboolean
apply_vlan (VaLibvirt *lv, const char *mac, GError **error)
{
  g_autoptr (VaDomain) live = live_domain (lv, error);
  g_autoptr (VaConfig) config = NULL;
  g_autoptr (VaHostView) view = NULL;
  g_autofree char *ports = va_path_ports (va_path_get (VA_PATH_RUN));
  g_autoptr (GError) local = NULL;
  const VaNic *nic = NULL;
  GPtrArray *nics;
  VaNicPlan plan;

  if (!live)
    return FALSE;
  nics = va_domain_get_nics (live);
  for (guint i = 0; i < nics->len; i++)
    if (strcmp (((const VaNic *) g_ptr_array_index (nics, i))->mac, mac) == 0)
      nic = g_ptr_array_index (nics, i);
  if (!nic || nic->form != VA_FORM_PORTABLE)
    return TRUE;
  config = va_config_load (va_path_get (VA_PATH_CONFIG), &local);
  if (!config && g_error_matches (local, VA_ERROR, VA_ERROR_NOT_FOUND))
    config = va_config_new_empty ();
  if (config)
    view = va_config_to_host_view (config, ports);
  if (!view || !va_nic_resolve (nic, view, &plan, &local))
    ;
  else if (plan.bridge_kind != VA_BRIDGE_LINUX || !plan.vlan)
    return TRUE;
  else if (!nic->target_dev)
    g_set_error (&local, VA_ERROR, VA_ERROR_FAILED, "libvirt named no tap");
  else if (va_nl_bridge_vlan (nic->target_dev, TRUE, plan.vlan, TRUE, &local)
           && va_nl_bridge_vlan_del_absent_ok (nic->target_dev, 1, &local))
    return TRUE;
  {
    g_autofree char *iface = va_domain_interface_xml (live, mac, NULL);

    if (iface)
      virDomainDetachDeviceFlags (lv->dom, iface, VIR_DOMAIN_AFFECT_LIVE);
    g_set_error (error, VA_ERROR, VA_ERROR_FAILED,
                 "the portable form's VLAN on its Linux bridge: %s; unplugged again, so that it is on "
                 "no other VLAN",
                 local ? local->message : "unknown");
    return FALSE;
  }
}

/* Unplugs @old, waits for the guest to let go, plugs @new in the slot
 * (@new names the same MAC and PCI address). On a refused plug, plugs @old
 * again: the NIC is never left without a form. */
static gboolean
swap_iface (VaLibvirt *lv, const char *mac, const char *old, const char *new, NicReport *n, GError **error)
{
  gint64 t0 = g_get_monotonic_time (), t1;

  if (virDomainDetachDeviceFlags (lv->dom, old, VIR_DOMAIN_AFFECT_LIVE) < 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "libvirt refused the unplug: %s", virGetLastErrorMessage ());
      return FALSE;
    }
  if (!wait_unplugged (lv, mac, unplug_timeout (), error))
    return FALSE; /* still plugged in its old form */
  t1 = g_get_monotonic_time ();
  n->unplug_s = (t1 - t0) / (double) G_USEC_PER_SEC;
  if (virDomainAttachDeviceFlags (lv->dom, new, VIR_DOMAIN_AFFECT_LIVE) < 0)
    {
      g_autofree char *msg = g_strdup (virGetLastErrorMessage ());

      g_autoptr (GError) vlan_error = NULL;

      if (virDomainAttachDeviceFlags (lv->dom, old, VIR_DOMAIN_AFFECT_LIVE) < 0)
        g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "libvirt refused the new form (%s), and the old one again: %s; the NIC is unplugged",
                     msg, virGetLastErrorMessage ());
      else if (!apply_vlan (lv, mac, &vlan_error))
        g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "libvirt refused the plug (%s); the NIC was plugged again as it was, but %s", msg,
                     vlan_error->message);
      else
        g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "libvirt refused the plug (%s); the NIC was plugged again as it was", msg);
      n->offline_s = (g_get_monotonic_time () - t0) / (double) G_USEC_PER_SEC;
      announce (lv);
      return FALSE;
    }
  if (!apply_vlan (lv, mac, error))
    return FALSE;
  n->plug_s = (g_get_monotonic_time () - t1) / (double) G_USEC_PER_SEC;
  n->offline_s = (g_get_monotonic_time () - t0) / (double) G_USEC_PER_SEC;
  announce (lv);
  return TRUE;
}

static gboolean
domain_running (VaLibvirt *lv, GError **error)
{
  int state = 0, reason = 0;

  if (virDomainGetState (lv->dom, &state, &reason, 0) < 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "reading the domain's state: %s", virGetLastErrorMessage ());
      return FALSE;
    }
  if (state != VIR_DOMAIN_RUNNING)
    {
      /* a paused guest cannot eject a NIC: the unplug would wait for it */
      g_set_error_literal (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT,
                           "the domain is not running (a paused guest cannot eject a NIC): resume it first");
      return FALSE;
    }
  return TRUE;
}

/* Every accelerated NIC (or those of @only) to the portable form, each
 * lease released once its NIC is off the device. */
static gboolean
swap_to_portable (VaLibvirt *lv, Report *r, GError **error)
{
  g_autoptr (VaDomain) live = NULL, port = NULL;
  char uuid[VIR_UUID_STRING_BUFLEN];
  GPtrArray *nics;
  gboolean any = FALSE;

  if (!(live = live_domain (lv, error)))
    return FALSE;
  nics = va_domain_get_nics (live);
  for (guint i = 0; i < nics->len; i++)
    if (((const VaNic *) g_ptr_array_index (nics, i))->form == VA_FORM_ACCELERATED)
      any = TRUE;
  for (guint i = 0; i < nics->len; i++)
    report_nic (r, g_ptr_array_index (nics, i));
  if (!any)
    return TRUE;
  if (!domain_running (lv, error) || !(port = rewritten (lv, VA_FORM_PORTABLE, error)))
    return FALSE;
  virDomainGetUUIDString (lv->dom, uuid);
  for (guint i = 0; i < nics->len; i++)
    {
      const VaNic *nic = g_ptr_array_index (nics, i);
      NicReport *n = report_nic (r, nic);
      g_autofree char *old = NULL, *new = NULL;
      g_autoptr (GVariant) released = NULL;
      g_autoptr (GError) rel_error = NULL;

      if (nic->form != VA_FORM_ACCELERATED)
        continue;
      n->path = PATH_SWAP;
      if (!(old = va_domain_interface_xml (live, nic->mac, error)) || !(new = va_domain_interface_xml (port, nic->mac, error)))
        return FALSE;
      if (!swap_iface (lv, nic->mac, old, new, n, error))
        {
          g_prefix_error (error, "NIC %s: ", nic->mac);
          return FALSE;
        }
      n->after = VA_FORM_PORTABLE;
      released = va_ctl_call ("Release", g_variant_new ("(ss)", uuid, nic->mac), "()", &rel_error);
      if (!released)
        nic_note (n, "its lease was not released (%s)", rel_error->message);
    }
  return TRUE;
}

/* Whether @nic's mode (inline, or its network's in this host's
 * configuration) allows the accelerated form; TRUE when unknown. */
static gboolean
nic_may_accelerate (const VaNic *nic)
{
  g_autoptr (VaConfig) config = NULL;
  g_autoptr (VaHostView) view = NULL;
  g_autofree char *ports = NULL;
  VaNicPlan plan;

  if (nic->mode_set)
    return nic->mode != VA_MODE_VIRTIO;
  config = va_config_load (va_path_get (VA_PATH_CONFIG), NULL);
  if (!config)
    return TRUE;
  ports = va_path_ports (va_path_get (VA_PATH_RUN));
  view = va_config_to_host_view (config, ports);
  return !va_nic_resolve (nic, view, &plan, NULL) || plan.mode != VA_MODE_VIRTIO;
}

/* Every portable NIC whose pool here has room to the accelerated form, a
 * fresh lease each; where that fails, the NIC stays portable. @only: the
 * MACs to consider, or NULL for all. Fails only when the domain cannot be
 * read: a NIC that stays portable is a note. */
static gboolean
swap_to_accelerated (VaLibvirt *lv, Report *r, GHashTable *only, GError **error)
{
  g_autoptr (VaDomain) live = NULL, accel = NULL;
  g_autoptr (GError) local = NULL;
  char uuid[VIR_UUID_STRING_BUFLEN];
  GPtrArray *nics, *wanted;

  if (!(live = live_domain (lv, error)))
    return FALSE;
  nics = va_domain_get_nics (live);
  for (guint i = 0; i < nics->len; i++)
    report_nic (r, g_ptr_array_index (nics, i));
  virDomainGetUUIDString (lv->dom, uuid);
  if (!domain_running (lv, &local) || !(accel = rewritten (lv, VA_FORM_ACCELERATED, &local)))
    {
      for (guint i = 0; i < nics->len; i++)
        {
          const VaNic *nic = g_ptr_array_index (nics, i);
          if (nic->form == VA_FORM_PORTABLE && (!only || g_hash_table_contains (only, nic->mac)))
            nic_note (report_nic (r, nic), "stays portable: %s", local->message);
        }
      return TRUE;
    }
  wanted = va_domain_get_nics (accel);
  for (guint i = 0; i < nics->len; i++)
    {
      const VaNic *nic = g_ptr_array_index (nics, i);
      const VaNic *want = g_ptr_array_index (wanted, i);
      NicReport *n = report_nic (r, nic);
      g_autofree char *old = NULL, *new = NULL;
      g_autoptr (GVariant) ret = NULL;
      g_autoptr (GError) nic_error = NULL;

      if (nic->form != VA_FORM_PORTABLE || (only && !g_hash_table_contains (only, nic->mac)))
        continue;
      if (want->form != VA_FORM_ACCELERATED)
        {
          /* the text the daemon sends back does not say why */
          if (nic_may_accelerate (nic))
            nic_note (n, "stays portable: its pool has no room on this host");
          continue;
        }
      if (!nic->network)
        {
          nic_note (n, "stays portable: an inline intent has no network to lease on");
          continue;
        }
      ret = va_ctl_call ("Allocate",
                         g_variant_new ("(ssss@a{sv})", uuid, virDomainGetName (lv->dom), nic->mac, nic->network,
                                        g_variant_new_array (G_VARIANT_TYPE ("{sv}"), NULL, 0)),
                         "(a{sv})", &nic_error);
      if (!ret)
        {
          nic_note (n, "stays portable: no lease (%s)", nic_error->message);
          continue;
        }
      if (!(old = va_domain_interface_xml (live, nic->mac, error)) || !(new = va_domain_interface_xml (accel, nic->mac, error)))
        return FALSE;
      n->path = PATH_SWAP;
      if (swap_iface (lv, nic->mac, old, new, n, &nic_error))
        {
          n->after = VA_FORM_ACCELERATED;
          continue;
        }
      {
        g_autoptr (GError) rel_error = NULL;
        g_autoptr (GVariant) released = va_ctl_call ("Release", g_variant_new ("(ss)", uuid, nic->mac), "()", &rel_error);

        nic_note (n, "stays portable: %s%s", nic_error->message,
                  released ? "; the lease was released"
                  : g_error_matches (rel_error, VA_ERROR, VA_ERROR_BUSY)
                    ? "; QEMU holds the device, so its lease stays until the domain stops"
                    : "; the lease could not be released");
      }
    }
  return TRUE;
}

/* QEMU's migration blockers from query-migrate's blocked-reasons (QEMU 6.0
 * and later list them there; 7.2 has no query-migrationblockers). */
static GStrv
migration_blockers (VaLibvirt *lv, GError **error)
{
  g_autofree char *reply = va_libvirt_qmp (lv, "{\"execute\":\"query-migrate\"}", error);
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GStrvBuilder) b = g_strv_builder_new ();
  JsonObject *root, *ret;
  JsonNode *node;

  if (!reply)
    return NULL;
  if (!json_parser_load_from_data (parser, reply, -1, NULL) || !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "QEMU's reply to query-migrate is no JSON object");
      return NULL;
    }
  root = json_node_get_object (json_parser_get_root (parser));
  node = json_object_get_member (root, "return");
  if (!node || !JSON_NODE_HOLDS_OBJECT (node))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "QEMU refused query-migrate: %.200s", reply);
      return NULL;
    }
  ret = json_node_get_object (node);
  node = json_object_get_member (ret, "blocked-reasons");
  if (node && JSON_NODE_HOLDS_ARRAY (node))
    {
      JsonArray *a = json_node_get_array (node);
      for (guint i = 0; i < json_array_get_length (a); i++)
        if (json_node_get_value_type (json_array_get_element (a, i)) == G_TYPE_STRING)
          g_strv_builder_add (b, json_array_get_string_element (a, i));
    }
  return g_strv_builder_end (b);
}

/* ---- output ------------------------------------------------------------ */

/* milliseconds: a double prints as 37.347999999999999 in JSON */
static GVariant *
maybe_ms (double v)
{
  return v < 0 ? g_variant_new_string ("") : g_variant_new_int64 ((gint64) (v * 1000 + 0.5));
}

static int
report_print (VaLibvirt *lv, Report *r, gboolean json)
{
  int rc = r->done ? VA_CTL_EXIT_OK : VA_CTL_EXIT_FAILED;
  const char *name = virDomainGetName (lv->dom);

  if (json)
    {
      g_autoptr (JsonBuilder) b = va_ctl_json_begin ();
      char uuid[VIR_UUID_STRING_BUFLEN];
      GVariantBuilder nb;
      g_autoptr (GVariant) nics = NULL;

      virDomainGetUUIDString (lv->dom, uuid);
      json_builder_set_member_name (b, "operation");
      json_builder_add_string_value (b, r->operation);
      json_builder_set_member_name (b, "domain");
      json_builder_add_string_value (b, name);
      json_builder_set_member_name (b, "uuid");
      json_builder_add_string_value (b, uuid);
      json_builder_set_member_name (b, "destination");
      if (r->destination)
        json_builder_add_string_value (b, r->destination);
      else
        json_builder_add_null_value (b);
      json_builder_set_member_name (b, "done");
      json_builder_add_boolean_value (b, r->done);
      json_builder_set_member_name (b, "error");
      if (r->error)
        json_builder_add_string_value (b, r->error);
      else
        json_builder_add_null_value (b);
      json_builder_set_member_name (b, "blockers");
      if (r->blockers)
        {
          json_builder_begin_array (b);
          for (char **p = r->blockers; *p; p++)
            json_builder_add_string_value (b, *p);
          json_builder_end_array (b);
        }
      else
        json_builder_add_null_value (b);
      json_builder_set_member_name (b, "downtime_ms");
      if (r->downtime_ms >= 0)
        json_builder_add_int_value (b, r->downtime_ms);
      else
        json_builder_add_null_value (b);
      g_variant_builder_init (&nb, G_VARIANT_TYPE ("aa{sv}"));
      for (guint i = 0; i < r->nics->len; i++)
        {
          NicReport *n = g_ptr_array_index (r->nics, i);
          GVariantBuilder j;

          g_variant_builder_init (&j, G_VARIANT_TYPE_VARDICT);
          g_variant_builder_add (&j, "{sv}", "mac", g_variant_new_string (n->mac));
          g_variant_builder_add (&j, "{sv}", "network", g_variant_new_string (n->network ? n->network : ""));
          g_variant_builder_add (&j, "{sv}", "path", g_variant_new_string (path_names[n->path]));
          g_variant_builder_add (&j, "{sv}", "form_before", g_variant_new_string (va_form_to_string (n->before)));
          g_variant_builder_add (&j, "{sv}", "form_after", g_variant_new_string (va_form_to_string (n->after)));
          g_variant_builder_add (&j, "{sv}", "unplug_ms", maybe_ms (n->unplug_s));
          g_variant_builder_add (&j, "{sv}", "plug_ms", maybe_ms (n->plug_s));
          g_variant_builder_add (&j, "{sv}", "offline_ms", maybe_ms (n->offline_s));
          g_variant_builder_add (&j, "{sv}", "note", g_variant_new_string (n->note ? n->note : ""));
          g_variant_builder_add_value (&nb, g_variant_builder_end (&j));
        }
      nics = g_variant_ref_sink (g_variant_builder_end (&nb));
      va_ctl_json_add_list (b, "nics", nics);
      va_ctl_json_print (b);
    }
  else
    {
      if (r->blockers)
        {
          if (!r->blockers[0])
            g_print ("QEMU reports no migration blocker\n");
          for (char **p = r->blockers; *p; p++)
            g_print ("QEMU migration blocker: %s\n", *p);
        }
      for (guint i = 0; i < r->nics->len; i++)
        {
          NicReport *n = g_ptr_array_index (r->nics, i);

          g_print ("NIC %s (%s): path %s, %s", n->mac, n->network ? n->network : "inline intent", path_names[n->path],
                   va_form_to_string (n->before));
          if (n->after != n->before)
            g_print (" -> %s", va_form_to_string (n->after));
          if (n->offline_s >= 0 && n->plug_s >= 0)
            g_print ("; unplug %.2f s, plug %.2f s, %.2f s without the NIC", n->unplug_s, n->plug_s, n->offline_s);
          else if (n->offline_s >= 0)
            g_print ("; unplug %.2f s, plug refused, %.2f s without the NIC", n->unplug_s, n->offline_s);
          if (n->note)
            g_print ("; %s", n->note);
          g_print ("\n");
        }
      if (r->done)
        {
          g_print ("domain %s: %s done", name, r->operation);
          if (r->destination)
            g_print (" (to %s)", r->destination);
          if (r->downtime_ms >= 0)
            g_print ("; migration downtime %" G_GINT64_FORMAT " ms", r->downtime_ms);
          g_print ("\n");
        }
    }
  if (r->error)
    g_printerr ("vdpactl: %s\n", r->error);
  return rc;
}

/* After a failure on this host: accelerated again where it was before. */
static void
roll_back (VaLibvirt *lv, Report *r)
{
  g_autoptr (GHashTable) only = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (GError) error = NULL;

  for (guint i = 0; i < r->nics->len; i++)
    {
      NicReport *n = g_ptr_array_index (r->nics, i);
      if (n->path == PATH_SWAP && n->after == VA_FORM_PORTABLE)
        g_hash_table_add (only, n->mac);
    }
  if (g_hash_table_size (only) == 0 || virDomainIsActive (lv->dom) != 1)
    return;
  if (!swap_to_accelerated (lv, r, only, &error))
    for (guint i = 0; i < r->nics->len; i++)
      {
        NicReport *n = g_ptr_array_index (r->nics, i);
        if (g_hash_table_contains (only, n->mac))
          nic_note (n, "stays portable: %s", error->message);
      }
}

/* ---- migrate ----------------------------------------------------------- */

/* The path each accelerated NIC takes, said before anything is tried. */
static void
mark_swaps (Report *r)
{
  for (guint i = 0; i < r->nics->len; i++)
    {
      NicReport *n = g_ptr_array_index (r->nics, i);
      if (n->before == VA_FORM_ACCELERATED)
        n->path = PATH_SWAP;
    }
}

typedef struct
{
  virDomainPtr dom;
  const char *uri;
  unsigned int flags;
  GMutex lock;
  GCond cond;
  gboolean finished;
  int rc;
  char *error;
} MigrateJob;

static gpointer
migrate_thread (gpointer data)
{
  MigrateJob *job = data;
  int rc = virDomainMigrateToURI3 (job->dom, job->uri, NULL, 0, job->flags);
  char *msg = rc < 0 ? g_strdup (virGetLastErrorMessage ()) : NULL;

  g_mutex_lock (&job->lock);
  job->rc = rc;
  job->error = msg;
  job->finished = TRUE;
  g_cond_signal (&job->cond);
  g_mutex_unlock (&job->lock);
  return NULL;
}

/* virDomainMigrateToURI3, aborted after @timeout seconds (0: none). */
static gboolean
migrate_with_timeout (VaLibvirt *lv, const char *uri, unsigned int flags, int timeout, GError **error)
{
  MigrateJob job = { .dom = lv->dom, .uri = uri, .flags = flags };
  GThread *thread;
  gboolean aborted = FALSE;
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout * G_USEC_PER_SEC;

  g_mutex_init (&job.lock);
  g_cond_init (&job.cond);
  thread = g_thread_new ("migrate", migrate_thread, &job);
  g_mutex_lock (&job.lock);
  while (!job.finished)
    {
      if (timeout > 0 && !aborted)
        {
          if (!g_cond_wait_until (&job.cond, &job.lock, deadline) && !job.finished)
            {
              g_mutex_unlock (&job.lock);
              virDomainAbortJob (lv->dom);
              aborted = TRUE;
              g_mutex_lock (&job.lock);
            }
        }
      else
        g_cond_wait (&job.cond, &job.lock);
    }
  g_mutex_unlock (&job.lock);
  g_thread_join (thread);
  g_mutex_clear (&job.lock);
  g_cond_clear (&job.cond);
  if (job.rc < 0)
    {
      g_autofree char *why = aborted ? g_strdup_printf (" (aborted after --timeout %d s)", timeout) : g_strdup ("");

      g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "libvirt: the migration failed%s: %s", why, job.error);
      g_free (job.error);
      return FALSE;
    }
  return TRUE;
}

static gint64
completed_downtime (virDomainPtr dom)
{
  virTypedParameterPtr params = NULL;
  int n = 0, type = 0;
  unsigned long long downtime = 0;
  gint64 out = -1;

  if (virDomainGetJobStats (dom, &type, &params, &n, VIR_DOMAIN_JOB_STATS_COMPLETED) == 0)
    {
      if (virTypedParamsGetULLong (params, n, VIR_DOMAIN_JOB_DOWNTIME, &downtime) == 1)
        out = (gint64) downtime;
      virTypedParamsFree (params, n);
    }
  return out;
}

static int
domain_migrate (int argc, char **argv, const char *uri)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaLibvirt) lv = NULL;
  gboolean json = FALSE, live = FALSE, persistent = FALSE, undefine = FALSE, swap_always = FALSE;
  int timeout = 0;
  const GOptionEntry entries[] = {
    { "live", 'l', 0, G_OPTION_ARG_NONE, &live, "Migrate while the guest runs (else it is paused meanwhile)", NULL },
    { "persistent", 'p', 0, G_OPTION_ARG_NONE, &persistent, "Define the domain on the destination", NULL },
    { "undefine-source", 'u', 0, G_OPTION_ARG_NONE, &undefine, "Undefine it on this host afterwards", NULL },
    { "timeout", 't', 0, G_OPTION_ARG_INT, &timeout, "Abort the migration if it has not completed after S seconds", "S" },
    { "swap", 's', 0, G_OPTION_ARG_NONE, &swap_always, "Swap accelerated NICs to portable even if QEMU reports no blocker", NULL },
    { NULL },
  };
  Report r = { .operation = "migrate", .downtime_ms = -1 };
  unsigned int flags = VIR_MIGRATE_PEER2PEER;
  GPtrArray *nics;
  int rc;

  if ((rc = va_ctl_parse (&argc, &argv, "DOMAIN DEST-URI - migrate a domain, swapping its accelerated NICs while QEMU cannot move them",
                          "Reads QEMU's migration blockers; with none, libvirt migrates every NIC as it is. Else each\n"
                          "accelerated NIC is swapped to its portable form (same MAC, VLAN and PCI slot) and its lease\n"
                          "released before libvirt migrates the domain peer to peer to DEST-URI (a libvirt URI as the\n"
                          "source's libvirtd reaches it). On the destination the NICs are portable: run\n"
                          "'vdpactl domain accelerate --live DOMAIN' there for the accelerated form where its pools\n"
                          "have room. A failure leaves the domain here, its NICs accelerated again where they can be.",
                          entries, &json, 2, 2)))
    return rc;
  if (timeout < 0)
    return va_ctl_usage ("--timeout must be 0 or more seconds");
  if (!(lv = va_libvirt_open (uri, FALSE, &error)) || !va_libvirt_lookup (lv, argv[1], &error))
    return va_ctl_fail (error);
  if (virDomainIsActive (lv->dom) != 1)
    return va_ctl_fail_msg ("the domain is not running");
  if (live)
    flags |= VIR_MIGRATE_LIVE;
  if (persistent)
    flags |= VIR_MIGRATE_PERSIST_DEST;
  if (undefine)
    flags |= VIR_MIGRATE_UNDEFINE_SOURCE;
  r.destination = g_strdup (argv[2]);
  r.nics = g_ptr_array_new_with_free_func ((GDestroyNotify) nic_report_free);

  {
    g_autoptr (GError) qmp_error = NULL;
    g_autoptr (VaDomain) d = live_domain (lv, &error);

    if (!d)
      {
        r.error = g_strdup (error->message);
        rc = report_print (lv, &r, json);
        report_clear (&r);
        return rc;
      }
    nics = va_domain_get_nics (d);
    for (guint i = 0; i < nics->len; i++)
      report_nic (&r, g_ptr_array_index (nics, i));
    r.blockers = migration_blockers (lv, &qmp_error);
    if (!r.blockers)
      g_debug ("no blockers known: %s", qmp_error->message);
  }

  if (r.blockers && !r.blockers[0] && !swap_always)
    {
      for (guint i = 0; i < r.nics->len; i++)
        {
          NicReport *n = g_ptr_array_index (r.nics, i);
          if (n->before == VA_FORM_ACCELERATED)
            n->path = PATH_NATIVE;
        }
    }
  else if ((mark_swaps (&r), !swap_to_portable (lv, &r, &error)))
    {
      r.error = g_strdup_printf ("before the migration: %s", error->message);
      roll_back (lv, &r);
      goto out;
    }

  if (!migrate_with_timeout (lv, argv[2], flags, timeout, &error))
    {
      r.error = g_strdup (error->message);
      roll_back (lv, &r);
      goto out;
    }
  r.done = TRUE;
  {
    /* the destination's view: its completed job has the downtime */
    g_autoptr (GError) dest_error = NULL;
    g_autoptr (VaLibvirt) dest = va_libvirt_open (argv[2], TRUE, &dest_error);
    char uuid[VIR_UUID_STRING_BUFLEN];

    virDomainGetUUIDString (lv->dom, uuid);
    if (dest && va_libvirt_lookup (dest, uuid, &dest_error))
      r.downtime_ms = completed_downtime (dest->dom);
  }
  for (guint i = 0; i < r.nics->len; i++)
    {
      NicReport *n = g_ptr_array_index (r.nics, i);
      if (n->path == PATH_SWAP && n->after == VA_FORM_PORTABLE)
        nic_note (n, "portable on the destination: 'vdpactl domain accelerate --live %s' there swaps it back", virDomainGetName (lv->dom));
    }
out:
  rc = report_print (lv, &r, json);
  report_clear (&r);
  return rc;
}

/* ---- save / managedsave / restore -------------------------------------- */

static int
domain_save (int argc, char **argv, const char *uri, gboolean managed)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaLibvirt) lv = NULL;
  gboolean json = FALSE;
  Report r = { .operation = managed ? "managedsave" : "save", .downtime_ms = -1 };
  int rc, ok;

  if ((rc = va_ctl_parse (&argc, &argv,
                          managed ? "DOMAIN - managed save of a domain, its accelerated NICs swapped to portable first"
                                  : "DOMAIN FILE - save a domain to FILE, its accelerated NICs swapped to portable first",
                          managed ? "QEMU cannot save a vhost-vdpa netdev: each accelerated NIC goes portable (same MAC, VLAN\n"
                                    "and PCI slot) and its lease is released; then libvirt's managed save. 'vdpactl domain\n"
                                    "restore --managed DOMAIN' starts it again and swaps its NICs back."
                                  : "QEMU cannot save a vhost-vdpa netdev: each accelerated NIC goes portable (same MAC, VLAN\n"
                                    "and PCI slot) and its lease is released; then libvirt saves the domain. 'vdpactl domain\n"
                                    "restore FILE' restores it and swaps its NICs back.",
                          NULL, &json, managed ? 1 : 2, managed ? 1 : 2)))
    return rc;
  if (!(lv = va_libvirt_open (uri, FALSE, &error)) || !va_libvirt_lookup (lv, argv[1], &error))
    return va_ctl_fail (error);
  if (virDomainIsActive (lv->dom) != 1)
    return va_ctl_fail_msg ("the domain is not running");
  r.nics = g_ptr_array_new_with_free_func ((GDestroyNotify) nic_report_free);
  if (!swap_to_portable (lv, &r, &error))
    {
      r.error = g_strdup_printf ("before the save: %s", error->message);
      roll_back (lv, &r);
      goto out;
    }
  ok = managed ? virDomainManagedSave (lv->dom, 0) : virDomainSaveFlags (lv->dom, argv[2], NULL, 0);
  if (ok < 0)
    {
      r.error = g_strdup_printf ("libvirt: the save failed: %s", virGetLastErrorMessage ());
      roll_back (lv, &r);
      goto out;
    }
  r.done = TRUE;
out:
  rc = report_print (lv, &r, json);
  report_clear (&r);
  return rc;
}

static int
domain_restore (int argc, char **argv, const char *uri)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaLibvirt) lv = NULL;
  gboolean json = FALSE, managed = FALSE;
  const GOptionEntry entries[] = {
    { "managed", 'm', 0, G_OPTION_ARG_NONE, &managed, "The argument is a domain with a managed save image", NULL },
    { NULL },
  };
  Report r = { .operation = "restore", .downtime_ms = -1 };
  int rc;

  if ((rc = va_ctl_parse (&argc, &argv, "FILE|--managed DOMAIN - restore a saved domain, then swap its NICs back",
                          "Restores the domain from FILE (or starts DOMAIN from its managed save image), then swaps each\n"
                          "portable NIC whose pool has room on this host to the accelerated form, with a fresh lease.",
                          entries, &json, 1, 1)))
    return rc;
  if (!(lv = va_libvirt_open (uri, FALSE, &error)))
    return va_ctl_fail (error);
  if (managed)
    {
      if (!va_libvirt_lookup (lv, argv[1], &error))
        return va_ctl_fail (error);
      if (virDomainHasManagedSaveImage (lv->dom, 0) != 1)
        return va_ctl_fail_msg ("the domain has no managed save image");
      if (virDomainCreate (lv->dom) < 0)
        {
          g_autofree char *msg = va_libvirt_last_error ("libvirt: the restore failed");
          return va_ctl_fail_msg (msg);
        }
    }
  else
    {
      g_autofree char *xml = virDomainSaveImageGetXMLDesc (lv->conn, argv[1], 0);
      g_autoptr (VaDomain) d = xml ? va_domain_parse (xml, -1, &error) : NULL;
      const char *id;

      if (!xml)
        {
          g_autofree char *msg = va_libvirt_last_error ("reading the save image");
          return va_ctl_fail_msg (msg);
        }
      if (!d)
        return va_ctl_fail (error);
      if (virDomainRestoreFlags (lv->conn, argv[1], NULL, 0) < 0)
        {
          g_autofree char *msg = va_libvirt_last_error ("libvirt: the restore failed");
          return va_ctl_fail_msg (msg);
        }
      id = va_domain_get_uuid (d) ? va_domain_get_uuid (d) : va_domain_get_name (d);
      if (!id || !va_libvirt_lookup (lv, id, &error))
        return error ? va_ctl_fail (error) : va_ctl_fail_msg ("the save image names no domain");
    }
  r.nics = g_ptr_array_new_with_free_func ((GDestroyNotify) nic_report_free);
  if (!swap_to_accelerated (lv, &r, NULL, &error))
    r.error = g_strdup_printf ("restored, but %s", error->message);
  else
    r.done = TRUE;
  rc = report_print (lv, &r, json);
  report_clear (&r);
  return rc;
}

/* ---- accelerate|portable --live ---------------------------------------- */

int
va_ctl_domain_swap_live (VaLibvirt *lv, VaForm form)
{
  g_autoptr (GError) error = NULL;
  Report r = { .operation = form == VA_FORM_ACCELERATED ? "accelerate" : "portable", .downtime_ms = -1 };
  gboolean ok;
  int rc;

  if (virDomainIsActive (lv->dom) != 1)
    return va_ctl_fail_msg ("the domain is not running: --live swaps a running domain's NICs");
  r.nics = g_ptr_array_new_with_free_func ((GDestroyNotify) nic_report_free);
  ok = form == VA_FORM_ACCELERATED ? swap_to_accelerated (lv, &r, NULL, &error) : swap_to_portable (lv, &r, &error);
  if (!ok)
    {
      r.error = g_strdup (error->message);
      if (form == VA_FORM_PORTABLE)
        roll_back (lv, &r);
    }
  else
    r.done = TRUE;
  rc = report_print (lv, &r, FALSE);
  report_clear (&r);
  return rc;
}

int
va_ctl_domain_move (int argc, char **argv, const char *uri)
{
  if (strcmp (argv[0], "migrate") == 0)
    return domain_migrate (argc, argv, uri);
  if (strcmp (argv[0], "save") == 0)
    return domain_save (argc, argv, uri, FALSE);
  if (strcmp (argv[0], "managedsave") == 0)
    return domain_save (argc, argv, uri, TRUE);
  if (strcmp (argv[0], "restore") == 0)
    return domain_restore (argc, argv, uri);
  return -1;
}
