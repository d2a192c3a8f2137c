/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The live swap of a running domain's NICs between their accelerated and
 * portable forms (same MAC, VLAN and PCI slot) through libvirt's hot-plug,
 * the leases of this host's daemon made or released over its bus: one home
 * for vdpactl (accelerate|portable --live, migrate, save, restore) and for
 * vdpa-allocator-libvirt-swap, which the daemon runs on the host a domain
 * moved to. */
#define G_LOG_DOMAIN "va-swap"

#include "config.h"

#include "va-swap.h"

#include <errno.h>
#include <fcntl.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <string.h>
#include <unistd.h>

#include "va-bus.h"
#include "va-client.h"
#include "va-error.h"
#include "va-netlink.h"
#include "va-precheck.h"

/* The daemon through the process's one client (va-client.h): a lease or
 * a rewrite may wait for its disk. */
#define CLIENT (va_client_get_default ())

static const char *const path_names[] = { "as-is", "native", "swap" };

static char *progress_prefix;
static gint64 progress_since;

void
va_swap_set_progress (const char *prefix)
{
  g_free (progress_prefix);
  progress_prefix = g_strdup (prefix);
  progress_since = g_get_monotonic_time ();
}

void
va_swap_progress (const char *fmt, ...)
{
  va_list ap;
  g_autofree char *text = NULL;

  if (!progress_prefix)
    return;
  va_start (ap, fmt);
  text = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_printerr ("%s[%5.1f s] %s\n", progress_prefix, (g_get_monotonic_time () - progress_since) / (double) G_USEC_PER_SEC, text);
}

const char *
va_swap_path_name (VaSwapPath path)
{
  return (guint) path < G_N_ELEMENTS (path_names) ? path_names[path] : "as-is";
}

void
va_swap_nic_free (VaSwapNic *n)
{
  g_free (n->mac);
  g_free (n->network);
  g_free (n->note);
  g_free (n->dest_note);
  g_free (n->vf);
  g_free (n);
}

VaSwapNic *
va_swap_nic (GPtrArray *nics, const VaNic *nic)
{
  VaSwapNic *n;

  for (guint i = 0; i < nics->len; i++)
    {
      n = g_ptr_array_index (nics, i);
      if (strcmp (n->mac, nic->mac) == 0)
        return n;
    }
  n = g_new0 (VaSwapNic, 1);
  n->mac = g_strdup (nic->mac);
  n->network = g_strdup (nic->network);
  n->before = n->after = nic->form;
  n->failover = nic->failover;
  n->vf = nic->failover ? g_strdup (nic->vf) : NULL;
  n->unplug_s = n->plug_s = n->offline_s = n->unaccelerated_s = -1;
  g_ptr_array_add (nics, n);
  return n;
}

gboolean
va_swap_set_marker (VaLibvirt *lv, const char *mac, gboolean on, const char *outcome, GError **error)
{
  g_autofree char *current = virDomainGetMetadata (lv->dom, VIR_DOMAIN_METADATA_ELEMENT, VA_XML_NS, VIR_DOMAIN_AFFECT_LIVE);
  g_autofree char *updated = NULL;

  if (!current)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "reading the metadata: %s", virGetLastErrorMessage ());
      return FALSE;
    }
  if (!(updated = va_metadata_set_swap_back (current, mac, on, outcome, error)))
    return FALSE;
  if (virDomainSetMetadata (lv->dom, VIR_DOMAIN_METADATA_ELEMENT, updated, "vdpa", VA_XML_NS, VIR_DOMAIN_AFFECT_LIVE) < 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "writing the metadata: %s", virGetLastErrorMessage ());
      return FALSE;
    }
  return TRUE;
}

/* A failure is a note, never a reason to undo a swap that worked. */
static void
mark_swap_back (VaLibvirt *lv, VaSwapNic *n, gboolean on)
{
  g_autoptr (GError) error = NULL;

  if (!va_swap_set_marker (lv, n->mac, on, NULL, &error))
    va_swap_note (n, "the swap-back marker was not %s (%s)", on ? "set" : "dropped", error->message);
}

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

void
va_swap_note (VaSwapNic *n, const char *fmt, ...)
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

VaDomain *
va_swap_live_domain (VaLibvirt *lv, GError **error)
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
 * pools' room); for the portable form, without the daemon, offline by the
 * one policy (va_client_rewrite_domain()). The accelerated form needs the
 * daemon: its NICs need leases. */
static VaDomain *
rewritten (VaLibvirt *lv, VaForm form, GError **error)
{
  g_autofree char *xml = virDomainGetXMLDesc (lv->dom, 0);
  g_autofree char *out = NULL;

  if (!xml)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "reading the live domain XML: %s", virGetLastErrorMessage ());
      return NULL;
    }
  if (form == VA_FORM_PORTABLE)
    out = va_client_rewrite_domain (CLIENT, xml, va_form_to_string (form), NULL, error);
  else
    out = va_client_rewrite (CLIENT, xml, va_form_to_string (form), error);
  if (!out)
    return NULL;
  return va_domain_parse (out, -1, error);
}

/* libvirt dropped the connection (libvirtd restarted or crashed): a new
 * one to the same URI and domain, tried for @timeout seconds. */
static gboolean
reconnect (VaLibvirt *lv, double timeout)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) (timeout * G_USEC_PER_SEC);
  char uuid[VIR_UUID_STRING_BUFLEN];

  if (virDomainGetUUIDString (lv->dom, uuid) < 0)
    return FALSE;
  for (;;)
    {
      g_autoptr (VaLibvirt) fresh = va_libvirt_open (lv->uri, FALSE, NULL);

      if (fresh && va_libvirt_lookup (fresh, uuid, NULL))
        {
          virConnectPtr conn = lv->conn;
          virDomainPtr dom = lv->dom;

          lv->conn = fresh->conn;
          lv->dom = fresh->dom;
          fresh->conn = conn; /* closed with @fresh */
          fresh->dom = dom;
          va_swap_progress ("libvirt answers again");
          return TRUE;
        }
      if (g_get_monotonic_time () > deadline)
        return FALSE;
      g_usleep (200 * 1000);
    }
}

/* Tests only (tests/libvirt/test_hook_libvirt.py): with
 * VDPA_ALLOCATOR_TEST_PAUSE_AFTER_UNPLUG naming a FIFO, a swap waits
 * between a NIC's unplug and its plug until a byte is written there, so
 * that a test can stop libvirtd at that point and nowhere else. */
static void
test_pause_after_unplug (void)
{
  const char *fifo = g_getenv ("VDPA_ALLOCATOR_TEST_PAUSE_AFTER_UNPLUG");
  char c;
  int fd;

  if (!fifo || !*fifo || (fd = open (fifo, O_RDONLY | O_CLOEXEC)) < 0)
    return;
  while (read (fd, &c, 1) < 0 && errno == EINTR)
    ;
  close (fd);
}

/* Polls the live XML until the interface with @mac is gone (libvirt
 * removes it on QEMU's DEVICE_DELETED, once the guest let go). Not through
 * va_domain_parse(): a metadata NIC without its interface is an error
 * there. libvirt writes <mac address='...'/> just so. */
static gboolean
wait_unplugged (VaLibvirt *lv, const char *mac, double timeout, gboolean *gone, GError **error)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) (timeout * G_USEC_PER_SEC);
  g_autofree char *needle = g_strdup_printf ("<mac address='%s'/>", mac);

  for (;;)
    {
      g_autofree char *xml = virDomainGetXMLDesc (lv->dom, 0);

      if (xml && !strstr (xml, needle))
        return TRUE;
      if (!xml && virConnectIsAlive (lv->conn) != 1
          && !reconnect (lv, MAX (0, deadline - g_get_monotonic_time ()) / (double) G_USEC_PER_SEC))
        {
          /* QEMU may have ejected it since: a restarted libvirtd drops it */
          *gone = TRUE;
          g_set_error (error, VA_ERROR, VA_ERROR_UNREACHABLE,
                       "libvirt stopped answering while the guest was to eject NIC %s, and did not come back within %.0f s: the "
                       "NIC may be unplugged",
                       mac, timeout);
          return FALSE;
        }
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
  g_autoptr (VaDomain) live = va_swap_live_domain (lv, error);
  g_autoptr (VaHostView) view = NULL;
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
  /* a failover standby is a tap on the bridge too */
  if (!nic || (nic->form != VA_FORM_PORTABLE && !nic->failover))
    return TRUE;
  view = va_client_offline_view (NULL, &local);
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

/* What runs between the unplug and the plug (va_swap_promote(): the
 * lease moves); FALSE plugs @old again instead of @new. */
typedef gboolean (*Between) (gpointer data, GError **error);

/* Unplugs @old, waits for the guest to let go, runs @between (NULL:
 * nothing), plugs @new in the slot (@new names the same MAC and PCI
 * address). On a refused plug, plugs @old again: the NIC is never left
 * without a form. */
static gboolean
swap_iface_between (VaLibvirt *lv, const char *mac, const char *old, const char *new, VaSwapNic *n, Between between, gpointer data,
                    GError **error)
{
  gint64 t0 = g_get_monotonic_time (), t1;

  n->unplug_at = t0;
  va_swap_progress ("NIC %s: unplugging it; waiting (at most %.0f s) for the guest to let go", mac, unplug_timeout ());
  if (virDomainDetachDeviceFlags (lv->dom, old, VIR_DOMAIN_AFFECT_LIVE) < 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "libvirt refused the unplug: %s", virGetLastErrorMessage ());
      return FALSE;
    }
  if (!wait_unplugged (lv, mac, unplug_timeout (), &n->lost, error))
    return FALSE; /* still plugged in its old form, unless libvirt went */
  t1 = g_get_monotonic_time ();
  n->unplug_s = (t1 - t0) / (double) G_USEC_PER_SEC;
  va_swap_progress ("NIC %s: the guest let go after %.1f s; plugging the other form", mac, n->unplug_s);
  test_pause_after_unplug ();
  if (between)
    {
      g_autoptr (GError) local = NULL;

      if (!between (data, &local))
        {
          if (virDomainAttachDeviceFlags (lv->dom, old, VIR_DOMAIN_AFFECT_LIVE) < 0)
            {
              n->lost = TRUE;
              g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "%s; and libvirt refused the old form again: %s; the NIC is unplugged",
                           local->message, virGetLastErrorMessage ());
            }
          else
            g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "%s; the NIC was plugged again as it was", local->message);
          n->offline_s = (g_get_monotonic_time () - t0) / (double) G_USEC_PER_SEC;
          announce (lv);
          return FALSE;
        }
    }
  if (virDomainAttachDeviceFlags (lv->dom, new, VIR_DOMAIN_AFFECT_LIVE) < 0)
    {
      g_autofree char *msg = g_strdup (virGetLastErrorMessage ());
      g_autofree char *again = NULL;
      g_autoptr (GError) vlan_error = NULL;

      /* libvirtd restarted or crashed between the unplug and the plug:
       * the old form goes back through the next one */
      if (virConnectIsAlive (lv->conn) != 1)
        {
          g_autofree char *was = g_steal_pointer (&msg);

          msg = g_strdup_printf ("libvirt went between the unplug and the plug: %s", was);
          if (!reconnect (lv, unplug_timeout ()))
            again = g_strdup_printf ("libvirt did not come back within %.0f s", unplug_timeout ());
        }
      if (again)
        ;
      else if (virDomainAttachDeviceFlags (lv->dom, old, VIR_DOMAIN_AFFECT_LIVE) < 0)
        again = g_strdup (virGetLastErrorMessage ());
      if (again)
        {
          n->lost = TRUE;
          g_set_error (error, VA_ERROR, VA_ERROR_FAILED,
                       "libvirt refused the new form (%s), and the old one again: %s; the NIC is unplugged", msg, again);
        }
      else if (!apply_vlan (lv, mac, &vlan_error))
        {
          n->lost = TRUE;
          g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "libvirt refused the plug (%s); the NIC was plugged again as it was, but %s", msg,
                       vlan_error->message);
        }
      else
        g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "libvirt refused the plug (%s); the NIC was plugged again as it was", msg);
      n->offline_s = (g_get_monotonic_time () - t0) / (double) G_USEC_PER_SEC;
      announce (lv);
      return FALSE;
    }
  if (!apply_vlan (lv, mac, error))
    {
      n->lost = TRUE; /* unplugged again: it must not be on another VLAN */
      return FALSE;
    }
  n->plug_s = (g_get_monotonic_time () - t1) / (double) G_USEC_PER_SEC;
  n->offline_s = (g_get_monotonic_time () - t0) / (double) G_USEC_PER_SEC;
  va_swap_progress ("NIC %s: plugged, %.1f s without it", mac, n->offline_s);
  announce (lv);
  return TRUE;
}

static gboolean
swap_iface (VaLibvirt *lv, const char *mac, const char *old, const char *new, VaSwapNic *n, GError **error)
{
  return swap_iface_between (lv, mac, old, new, n, NULL, NULL, error);
}

/* @n's NIC is in no form: the swap unplugged it and no plug followed
 * (libvirt failed in between). Its lease is given back (no device of it is
 * plugged; a swap to the accelerated form takes a fresh one), and it is
 * marked swap-back-outcome="lost" in the live metadata, where
 * va_swap_replug_lost() finds it. */
static void
mark_lost (VaLibvirt *lv, VaSwapNic *n, const char *uuid, const char *why)
{
  g_autoptr (GError) rel_error = NULL;
  g_autoptr (GError) mark_error = NULL;

  n->outcome = "lost";
  va_swap_note (n, "lost: unplugged from the running guest and not plugged back (%s)", why);
  if (va_client_release (CLIENT, uuid, n->mac, &rel_error))
    va_swap_note (n, "its lease was released");
  else if (!g_error_matches (rel_error, VA_ERROR, VA_ERROR_NOT_FOUND))
    va_swap_note (n, "its lease was not released (%s)", rel_error->message);
  if (virConnectIsAlive (lv->conn) == 1 && va_swap_set_marker (lv, n->mac, TRUE, "lost", &mark_error))
    n->lost_marked = TRUE;
  else
    va_swap_note (n, "not marked lost in the live metadata (%s)", mark_error ? mark_error->message : "libvirt does not answer");
}

gboolean
va_swap_replug_lost (VaLibvirt *lv, GHashTable *replugged, GError **error)
{
  g_autofree char *meta = virDomainGetMetadata (lv->dom, VIR_DOMAIN_METADATA_ELEMENT, VA_XML_NS, VIR_DOMAIN_AFFECT_LIVE);
  g_autofree char *live = NULL, *persistent = NULL, *port = NULL;
  g_autoptr (VaDomain) port_dom = NULL;
  g_auto (GStrv) lost = NULL;

  g_return_val_if_fail (lv != NULL && replugged != NULL, FALSE);

  /* cheap before the parse: most domains have lost nothing */
  if (!meta || !strstr (meta, "lost"))
    return TRUE;
  if (!(lost = va_metadata_lost_macs (meta, error)))
    return FALSE;
  if (!lost[0])
    return TRUE;
  if (!(live = virDomainGetXMLDesc (lv->dom, 0)))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "reading the live domain XML: %s", virGetLastErrorMessage ());
      return FALSE;
    }
  if (virDomainIsPersistent (lv->dom) != 1 || !(persistent = virDomainGetXMLDesc (lv->dom, VIR_DOMAIN_XML_INACTIVE)))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_FAILED,
                   "NIC %s, lost in an earlier swap, cannot be plugged back: the domain has no persistent definition to take it from "
                   "(virsh attach-interface --live)",
                   lost[0]);
      return FALSE;
    }
  if (!(port = va_client_rewrite_domain (CLIENT, persistent, va_form_to_string (VA_FORM_PORTABLE), NULL, error))
      || !(port_dom = va_domain_parse (port, -1, error)))
    {
      g_prefix_error (error, "plugging back NIC %s, lost in an earlier swap: the persistent definition: ", lost[0]);
      return FALSE;
    }
  for (guint i = 0; lost[i]; i++)
    {
      g_autofree char *needle = g_strdup_printf ("<mac address='%s'/>", lost[i]);
      g_autofree char *iface = NULL;
      g_autoptr (GError) local = NULL;

      /* someone plugged it back by hand: only the mark goes */
      if (!strstr (live, needle))
        {
          if (!(iface = va_domain_interface_xml (port_dom, lost[i], error)))
            {
              g_prefix_error (error, "plugging back NIC %s, lost in an earlier swap: ", lost[i]);
              return FALSE;
            }
          if (virDomainAttachDeviceFlags (lv->dom, iface, VIR_DOMAIN_AFFECT_LIVE) < 0)
            {
              g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "plugging back NIC %s, lost in an earlier swap: libvirt refused: %s", lost[i],
                           virGetLastErrorMessage ());
              return FALSE;
            }
          if (!apply_vlan (lv, lost[i], error))
            {
              g_prefix_error (error, "plugging back NIC %s, lost in an earlier swap: ", lost[i]);
              return FALSE;
            }
          va_swap_progress ("NIC %s: plugged back in its portable form (lost in an earlier swap)", lost[i]);
          g_hash_table_add (replugged, g_strdup (lost[i]));
        }
      /* portable now, and to be accelerated as the swap that lost it was
       * to end, here or by the daemon's resume */
      if (!va_swap_set_marker (lv, lost[i], TRUE, NULL, &local))
        g_warning ("NIC %s: plugged back, but still marked lost: %s", lost[i], local->message);
    }
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

/* ---- failover: the VF beside a virtio standby --------------------------- */

/* Polls the live XML until the transient member aliased @alias is gone
 * (the standby keeps the MAC, so the MAC says nothing here). */
static gboolean
wait_member_gone (VaLibvirt *lv, const char *alias, double timeout)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) (timeout * G_USEC_PER_SEC);
  g_autofree char *needle = g_strdup_printf ("<alias name='%s'/>", alias);

  for (;;)
    {
      g_autofree char *xml = virDomainGetXMLDesc (lv->dom, 0);

      if (xml && !strstr (xml, needle))
        return TRUE;
      if (g_get_monotonic_time () > deadline)
        return FALSE;
      g_usleep (20 * 1000);
    }
}

/* Gives back the lease of a member that is not (or no longer) plugged,
 * and says so in @n's note. */
static void
release_member_lease (VaSwapNic *n, const char *uuid)
{
  g_autoptr (GError) rel_error = NULL;

  if (va_client_release (CLIENT, uuid, n->mac, &rel_error) || g_error_matches (rel_error, VA_ERROR, VA_ERROR_NOT_FOUND))
    va_swap_note (n, "its VF lease was released");
  else
    va_swap_note (n, "its VF lease was not released (%s); the domain's stop releases it", rel_error->message);
}

/* The transient member of the failover standby @nic of @live: a VF of
 * its pool leased by the daemon (its pick: spoofchk set in legacy mode,
 * the representor on the VLAN in switchdev, before the guest can use
 * it), then plugged (LIVE) as va_domain_failover_member_xml() builds it.
 * No free VF, or a refused plug: the lease is released and the guest goes
 * on on its standby, which @n says (outcome "no-room", "busy" or
 * "refused"). */
static void
plug_member (VaLibvirt *lv, VaDomain *live, const VaNic *nic, VaSwapNic *n, const char *uuid)
{
  g_autoptr (VaHostView) view = NULL;
  g_autoptr (VaLease) lease = NULL;
  g_autoptr (GError) nic_error = NULL;
  g_autofree char *member = NULL;
  VaAllocRequest req = VA_ALLOC_REQUEST_INIT;
  gint64 t0 = g_get_monotonic_time ();

  n->path = VA_SWAP_PATH_SWAP;
  req.uuid = uuid;
  req.domain_name = virDomainGetName (lv->dom);
  req.mac = nic->mac;
  req.network = nic->network;
  if (!(lease = va_client_allocate (CLIENT, &req, &nic_error)))
    {
      n->outcome = g_error_matches (nic_error, VA_ERROR, VA_ERROR_POOL_EXHAUSTED) ? "no-room"
                   : g_error_matches (nic_error, VA_ERROR, VA_ERROR_TRY_AGAIN)    ? "busy"
                                                                                  : "refused";
      va_swap_note (n, "on its virtio standby alone: %s (%s)", strcmp (n->outcome, "no-room") == 0 ? "no free VF" : "no VF leased",
                    nic_error->message);
      return;
    }
  if (!(view = va_client_offline_view (NULL, &nic_error))
      || !(member = va_domain_failover_member_xml (live, view, nic->mac, lease->slot, &nic_error)))
    {
      n->outcome = "refused";
      va_swap_note (n, "on its virtio standby alone: the VF's member: %s", nic_error->message);
      release_member_lease (n, uuid);
      return;
    }
  va_swap_progress ("NIC %s: plugging VF %s beside its virtio standby", nic->mac, lease->slot);
  if (virDomainAttachDeviceFlags (lv->dom, member, VIR_DOMAIN_AFFECT_LIVE) < 0)
    {
      n->outcome = "refused";
      va_swap_note (n, "on its virtio standby alone: libvirt refused VF %s: %s", lease->slot, virGetLastErrorMessage ());
      release_member_lease (n, uuid);
      return;
    }
  g_free (n->vf);
  n->vf = g_strdup (lease->slot);
  n->plug_s = (g_get_monotonic_time () - t0) / (double) G_USEC_PER_SEC;
  va_swap_progress ("NIC %s: VF %s plugged in %.1f s", nic->mac, lease->slot, n->plug_s);
}

/* The member of the failover standby @nic detached by its alias (the
 * guest's failover driver goes on on the standby), then its lease
 * released. FALSE when libvirt refuses or the guest keeps it. */
static gboolean
unplug_member (VaLibvirt *lv, const VaNic *nic, VaSwapNic *n, const char *uuid, GError **error)
{
  g_autofree char *alias = va_member_alias (nic->mac);

  va_swap_progress ("NIC %s: unplugging VF %s (%s)", nic->mac, nic->vf, alias);
  if (virDomainDetachDeviceAlias (lv->dom, alias, VIR_DOMAIN_AFFECT_LIVE) < 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "libvirt refused to unplug VF %s (%s): %s", nic->vf, alias, virGetLastErrorMessage ());
      return FALSE;
    }
  if (!wait_member_gone (lv, alias, unplug_timeout ()))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_BUSY, "the guest has not let VF %s go within %.0f s (libvirt keeps the unplug pending)",
                   nic->vf, unplug_timeout ());
      return FALSE;
    }
  g_clear_pointer (&n->vf, g_free);
  release_member_lease (n, uuid);
  return TRUE;
}

gboolean
va_swap_to_portable (VaLibvirt *lv, GPtrArray *report, gboolean for_move, GError **error)
{
  g_autoptr (VaDomain) live = NULL, port = NULL;
  char uuid[VIR_UUID_STRING_BUFLEN];
  GPtrArray *nics;
  gboolean any = FALSE;

  if (!(live = va_swap_live_domain (lv, error)))
    return FALSE;
  nics = va_domain_get_nics (live);
  for (guint i = 0; i < nics->len; i++)
    {
      const VaNic *nic = g_ptr_array_index (nics, i);
      VaSwapNic *n = va_swap_nic (report, nic);

      /* QEMU unplugs a failover pair's VF at the move by itself (and
       * plugs it back if the move fails), the guest going on on its
       * standby; the destination plugs a VF of its own. The lease stays
       * while QEMU holds the VF: the domain's stop here gives it back */
      if (for_move && nic->failover)
        {
          n->path = VA_SWAP_PATH_NATIVE;
          va_swap_note (n, "failover: no swap; QEMU unplugs %s%s for the move and the guest goes on on its virtio standby",
                        nic->vf ? "VF " : "its VF", nic->vf ? nic->vf : "");
          continue;
        }
      if (nic->form == VA_FORM_ACCELERATED)
        any = TRUE;
    }
  if (!any)
    return TRUE;
  if (!domain_running (lv, error) || !(port = rewritten (lv, VA_FORM_PORTABLE, error)))
    return FALSE;
  virDomainGetUUIDString (lv->dom, uuid);
  for (guint i = 0; i < nics->len; i++)
    {
      const VaNic *nic = g_ptr_array_index (nics, i);
      VaSwapNic *n = va_swap_nic (report, nic);
      g_autofree char *old = NULL, *new = NULL;
      g_autoptr (GError) rel_error = NULL;

      if (nic->form != VA_FORM_ACCELERATED || (for_move && nic->failover))
        continue;
      n->path = VA_SWAP_PATH_SWAP;
      if (!(old = va_domain_interface_xml (live, nic->mac, error)) || !(new = va_domain_interface_xml (port, nic->mac, error)))
        return FALSE;
      /* a standby's VF first: the portable NIC takes over its MAC */
      if (nic->failover && nic->vf && !unplug_member (lv, nic, n, uuid, error))
        {
          g_prefix_error (error, "NIC %s: ", nic->mac);
          return FALSE;
        }
      if (!swap_iface (lv, nic->mac, old, new, n, error))
        {
          if (n->lost)
            mark_lost (lv, n, uuid, (*error)->message);
          g_prefix_error (error, "NIC %s: ", nic->mac);
          return FALSE;
        }
      n->after = VA_FORM_PORTABLE;
      n->failover = FALSE;
      if (for_move)
        mark_swap_back (lv, n, TRUE);
      /* a standby's lease went with its VF, if it had one */
      if (!va_client_release (CLIENT, uuid, nic->mac, &rel_error)
          && !(nic->failover && g_error_matches (rel_error, VA_ERROR, VA_ERROR_NOT_FOUND)))
        va_swap_note (n, "its lease was not released (%s)", rel_error->message);
    }
  return TRUE;
}

/* Whether @nic's mode (inline, or its network's in this host's
 * configuration) allows the accelerated form; TRUE when unknown. */
static gboolean
nic_may_accelerate (const VaNic *nic)
{
  g_autoptr (VaHostView) view = NULL;
  VaNicPlan plan;

  if (nic->mode_set)
    return nic->mode != VA_MODE_VIRTIO;
  view = va_client_offline_view (NULL, NULL);
  return !view || !va_nic_resolve (nic, view, &plan, NULL) || plan.mode != VA_MODE_VIRTIO;
}

/* The live swap of a portable NIC to @new; FALSE when libvirt did not
 * take it, its outcome said in @n (lost, or refused and still portable:
 * libvirt's words, "no free VF" among them). */
static gboolean
swap_portable_or_say (VaLibvirt *lv, const char *old, const char *new, VaSwapNic *n, const char *mac, const char *uuid)
{
  g_autoptr (GError) error = NULL;

  n->path = VA_SWAP_PATH_SWAP;
  if (swap_iface (lv, mac, old, new, n, &error))
    return TRUE;
  if (n->lost)
    mark_lost (lv, n, uuid, error->message);
  else
    {
      n->outcome = "refused";
      va_swap_note (n, "stays portable: %s", error->message);
    }
  return FALSE;
}

/* The VF form of a plain kind=sriov NIC: the daemon leases a VF only once
 * libvirt chose it (Allocate with vf, as the hook does at start), so the
 * hostdev-network form is plugged first, the VF and the VLAN libvirt
 * applied are read from the live XML, and the lease is taken on them (in
 * switchdev mode the daemon puts the VLAN on the VF's representor then;
 * until it does, the representor is in no bridge and the VF reaches
 * nothing). Refused, the NIC is swapped back to its portable form. FALSE
 * only when the domain cannot be read; the NIC's outcome is in @n. */
static gboolean
swap_to_vf (VaLibvirt *lv, VaDomain *live, VaDomain *accel, const VaNic *nic, VaSwapNic *n, const char *uuid, GError **error)
{
  g_autofree char *old = NULL, *new = NULL, *plugged_xml = NULL;
  g_autoptr (VaDomain) now = NULL;
  g_autoptr (VaLease) lease = NULL;
  g_autoptr (GError) nic_error = NULL;
  g_autoptr (GError) back_error = NULL;
  VaAllocRequest req = VA_ALLOC_REQUEST_INIT;
  const VaNic *plugged = NULL;
  GPtrArray *nics;

  if (!(old = va_domain_interface_xml (live, nic->mac, error)) || !(new = va_domain_interface_xml (accel, nic->mac, error)))
    return FALSE;
  if (!swap_portable_or_say (lv, old, new, n, nic->mac, uuid))
    return TRUE;
  if ((now = va_swap_live_domain (lv, &nic_error)))
    {
      nics = va_domain_get_nics (now);
      for (guint i = 0; i < nics->len; i++)
        if (strcmp (((const VaNic *) g_ptr_array_index (nics, i))->mac, nic->mac) == 0)
          plugged = g_ptr_array_index (nics, i);
      if (!plugged || !plugged->vf)
        g_set_error_literal (&nic_error, VA_ERROR, VA_ERROR_FAILED,
                             "libvirt shows no VF for it (no <interface type='hostdev'> with a PCI <source> <address>)");
      else
        {
          req.uuid = uuid;
          req.domain_name = virDomainGetName (lv->dom);
          req.mac = nic->mac;
          req.network = nic->network;
          req.vf = plugged->vf;
          req.vf_vlan = plugged->vf_vlan;
          lease = va_client_allocate (CLIENT, &req, &nic_error);
        }
    }
  if (lease)
    {
      n->after = VA_FORM_ACCELERATED;
      if (nic->swap_back)
        mark_swap_back (lv, n, FALSE);
      return TRUE;
    }
  /* unplug the VF again: it must not run unrecorded, nor unfiltered */
  n->outcome = g_error_matches (nic_error, VA_ERROR, VA_ERROR_POOL_EXHAUSTED) ? "no-room" : "refused";
  plugged_xml = now ? va_domain_interface_xml (now, nic->mac, NULL) : NULL;
  if (plugged_xml && swap_iface (lv, nic->mac, plugged_xml, old, n, &back_error))
    va_swap_note (n, "stays portable: the daemon refused the VF libvirt chose (%s)", nic_error->message);
  else if (n->lost)
    mark_lost (lv, n, uuid, back_error->message);
  else
    {
      n->after = VA_FORM_ACCELERATED;
      va_swap_note (n, "the daemon refused the VF libvirt chose (%s), and it could not be unplugged again: %s", nic_error->message,
                    back_error ? back_error->message : "its live XML cannot be read");
    }
  return TRUE;
}

/* A portable NIC of a failover network to its virtio standby (the same
 * tap on the same bridge and VLAN, with <teaming type='persistent'/> and
 * its alias, which QEMU takes only at a plug), then its VF plugged beside
 * it. Refused, the NIC stays portable. FALSE only when the domain cannot
 * be read; the NIC's outcome is in @n. */
static gboolean
swap_to_standby (VaLibvirt *lv, VaDomain *live, VaDomain *accel, const VaNic *nic, VaSwapNic *n, const char *uuid, GError **error)
{
  g_autofree char *old = NULL, *new = NULL;
  g_autoptr (VaDomain) now = NULL;
  GPtrArray *nics;

  if (!(old = va_domain_interface_xml (live, nic->mac, error)) || !(new = va_domain_interface_xml (accel, nic->mac, error)))
    return FALSE;
  if (!swap_portable_or_say (lv, old, new, n, nic->mac, uuid))
    return TRUE;
  n->after = VA_FORM_ACCELERATED;
  n->failover = TRUE;
  if (nic->swap_back)
    mark_swap_back (lv, n, FALSE);
  if (!(now = va_swap_live_domain (lv, error)))
    return FALSE;
  nics = va_domain_get_nics (now);
  for (guint i = 0; i < nics->len; i++)
    {
      const VaNic *standby = g_ptr_array_index (nics, i);

      if (strcmp (standby->mac, nic->mac) == 0)
        plug_member (lv, now, standby, n, uuid);
    }
  return TRUE;
}

/* Every portable NIC whose pool here has room to the accelerated form, a
 * fresh lease each; where that fails, the NIC stays portable. @only: the
 * MACs to consider, or NULL for all. Fails only when the domain cannot be
 * read: a NIC that stays portable is a note. */
gboolean
va_swap_to_accelerated (VaLibvirt *lv, GPtrArray *report, GHashTable *only, GError **error)
{
  g_autoptr (VaDomain) live = NULL, accel = NULL;
  g_autoptr (GError) local = NULL;
  g_autoptr (GHashTable) replugged = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  char uuid[VIR_UUID_STRING_BUFLEN];
  GPtrArray *nics, *wanted;
  gboolean shared, running;

  /* a NIC an earlier swap lost is plugged back first, and swapped on
   * with the others */
  if (!va_swap_replug_lost (lv, replugged, error) || !(live = va_swap_live_domain (lv, error)))
    return FALSE;
  /* a running guest's memory stays as it started: without shared,
   * file-backed memory a software device's relay would reach none of it */
  shared = va_domain_memory_is_shared (live);
  nics = va_domain_get_nics (live);
  for (guint i = 0; i < nics->len; i++)
    {
      const VaNic *nic = g_ptr_array_index (nics, i);
      VaSwapNic *n = va_swap_nic (report, nic);

      if (g_hash_table_contains (replugged, nic->mac))
        {
          /* lost by this very operation (a roll back's replug): no more */
          n->lost = n->lost_marked = FALSE;
          va_swap_note (n, "plugged back in its portable form (lost in an earlier swap)");
          if (only)
            g_hash_table_add (only, g_strdup (nic->mac));
        }
    }
  virDomainGetUUIDString (lv->dom, uuid);
  running = domain_running (lv, &local);
  /* a standby the domain started or moved here with, or one whose VF
   * went (a failed plug, a detach): its VF first, which needs no rewrite
   * (another NIC's refused one must not keep it on virtio) */
  for (guint i = 0; running && i < nics->len; i++)
    {
      const VaNic *nic = g_ptr_array_index (nics, i);

      if (nic->failover && !nic->vf && (!only || g_hash_table_contains (only, nic->mac)))
        plug_member (lv, live, nic, va_swap_nic (report, nic), uuid);
    }
  if (!running || !(accel = rewritten (lv, VA_FORM_ACCELERATED, &local)))
    {
      for (guint i = 0; i < nics->len; i++)
        {
          const VaNic *nic = g_ptr_array_index (nics, i);
          VaSwapNic *n = va_swap_nic (report, nic);

          if (only && !g_hash_table_contains (only, nic->mac))
            continue;
          if (nic->failover && !nic->vf && !running)
            va_swap_note (n, "on its virtio standby alone: %s", local->message);
          else if (nic->form != VA_FORM_PORTABLE || !nic_may_accelerate (nic))
            continue;
          else
            va_swap_note (n, "stays portable: %s", local->message);
          n->outcome = g_error_matches (local, VA_ERROR, VA_ERROR_TRY_AGAIN) ? "busy" : "refused";
        }
      return TRUE;
    }
  wanted = va_domain_get_nics (accel);
  for (guint i = 0; i < nics->len; i++)
    {
      const VaNic *nic = g_ptr_array_index (nics, i);
      const VaNic *want = g_ptr_array_index (wanted, i);
      VaSwapNic *n = va_swap_nic (report, nic);
      g_autofree char *old = NULL, *new = NULL;
      g_autoptr (VaLease) lease = NULL;
      g_autoptr (GError) nic_error = NULL;
      VaAllocRequest req = VA_ALLOC_REQUEST_INIT;

      /* a standby's VF went in above */
      if ((only && !g_hash_table_contains (only, nic->mac)) || nic->form != VA_FORM_PORTABLE)
        continue;
      if (want->form != VA_FORM_ACCELERATED)
        {
          /* the text the daemon sends back does not say why */
          if (nic_may_accelerate (nic))
            {
              va_swap_note (n, "stays portable: its pool has no room on this host");
              n->outcome = "no-room";
            }
          continue;
        }
      if (!nic->network)
        {
          va_swap_note (n, "stays portable: an inline intent has no network to lease on");
          n->outcome = "refused";
          continue;
        }
      /* the portable NIC to its virtio standby, then its VF beside it */
      if (want->failover)
        {
          if (!swap_to_standby (lv, live, accel, nic, n, uuid, error))
            return FALSE;
          continue;
        }
      if (want->accel_kind == VA_POOL_KIND_SRIOV)
        {
          if (!swap_to_vf (lv, live, accel, nic, n, uuid, error))
            return FALSE;
          continue;
        }
      req.uuid = uuid;
      req.domain_name = virDomainGetName (lv->dom);
      req.mac = nic->mac;
      req.network = nic->network;
      req.form = va_client_alloc_form (NULL, nic, shared);
      lease = va_client_allocate (CLIENT, &req, &nic_error);
      if (!lease)
        {
          if (req.form && g_error_matches (nic_error, VA_ERROR, VA_ERROR_POOL_EXHAUSTED))
            va_swap_note (n,
                          "stays portable: hardware only, as the running domain's memory is not shared and file-backed, which a software "
                          "vDPA device needs (%s)",
                          nic_error->message);
          else
            va_swap_note (n, "stays portable: no lease (%s)", nic_error->message);
          n->outcome = g_error_matches (nic_error, VA_ERROR, VA_ERROR_POOL_EXHAUSTED) ? "no-room"
                       : g_error_matches (nic_error, VA_ERROR, VA_ERROR_TRY_AGAIN)    ? "busy"
                                                                                      : "refused";
          continue;
        }
      if (!(old = va_domain_interface_xml (live, nic->mac, error)) || !(new = va_domain_interface_xml (accel, nic->mac, error)))
        return FALSE;
      n->path = VA_SWAP_PATH_SWAP;
      if (swap_iface (lv, nic->mac, old, new, n, &nic_error))
        {
          n->after = VA_FORM_ACCELERATED;
          if (nic->swap_back)
            mark_swap_back (lv, n, FALSE);
          continue;
        }
      if (n->lost)
        {
          mark_lost (lv, n, uuid, nic_error->message);
          continue;
        }
      {
        g_autoptr (GError) rel_error = NULL;
        gboolean released = va_client_release (CLIENT, uuid, nic->mac, &rel_error);

        n->outcome = "refused";
        va_swap_note (n, "stays portable: %s%s", nic_error->message,
                      released ? "; the lease was released"
                      : g_error_matches (rel_error, VA_ERROR, VA_ERROR_BUSY)
                        ? "; QEMU holds the device, so its lease stays until the domain stops"
                        : "; the lease could not be released");
      }
    }
  return TRUE;
}

/* After a failure on this host: accelerated again where it was before. */
void
va_swap_roll_back (VaLibvirt *lv, GPtrArray *nics)
{
  g_autoptr (GHashTable) only = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr (GError) error = NULL;
  gboolean lost = FALSE;

  for (guint i = 0; i < nics->len; i++)
    {
      VaSwapNic *n = g_ptr_array_index (nics, i);
      if (n->path == VA_SWAP_PATH_SWAP && n->after == VA_FORM_PORTABLE)
        g_hash_table_add (only, g_strdup (n->mac));
      /* plugged back (and so in @only) where it was marked */
      lost = lost || n->lost_marked;
    }
  if ((g_hash_table_size (only) == 0 && !lost) || virDomainIsActive (lv->dom) != 1)
    return;
  if (!va_swap_to_accelerated (lv, nics, only, &error))
    for (guint i = 0; i < nics->len; i++)
      {
        VaSwapNic *n = g_ptr_array_index (nics, i);
        if (g_hash_table_contains (only, n->mac))
          va_swap_note (n, "stays portable: %s", error->message);
      }
}

/* ---- promotion: a software device's NIC onto hardware -------------------- */

typedef struct
{
  const char *uuid;
  const char *domain_name;
  const char *mac;
  const char *network;
  VaSwapNic *n;
  char *device; /* the hardware device leased, once it is */
} Promotion;

/* The NIC is off its software device: that lease goes, a hardware one
 * comes on the same port path (which the unchanged <interface> names).
 * Without a free hardware slot, a software device again. */
static gboolean
promote_between (gpointer data, GError **error)
{
  Promotion *p = data;
  VaAllocRequest req = VA_ALLOC_REQUEST_INIT;
  g_autoptr (VaLease) lease = NULL;
  g_autoptr (VaLease) back = NULL;
  g_autoptr (GError) local = NULL;
  g_autoptr (GError) again = NULL;

  /* QEMU closes the device as libvirt removes the interface: a moment */
  for (guint i = 0;; i++)
    {
      g_clear_error (&local);
      if (va_client_release (CLIENT, p->uuid, p->mac, &local) || g_error_matches (local, VA_ERROR, VA_ERROR_NOT_FOUND))
        break;
      if (!g_error_matches (local, VA_ERROR, VA_ERROR_BUSY) || i >= 50)
        {
          g_propagate_prefixed_error (error, g_steal_pointer (&local), "its software lease was not released: ");
          return FALSE;
        }
      g_usleep (100 * 1000);
    }
  req.uuid = p->uuid;
  req.domain_name = p->domain_name;
  req.mac = p->mac;
  req.network = p->network;
  req.form = "hardware";
  lease = va_client_allocate (CLIENT, &req, &local);
  if (lease)
    {
      p->device = g_strdup (lease->device);
      return TRUE;
    }
  p->n->outcome = g_error_matches (local, VA_ERROR, VA_ERROR_POOL_EXHAUSTED) ? "no-room" : "refused";
  /* its software device again (or hardware, should one have freed) */
  req.form = NULL;
  back = va_client_allocate (CLIENT, &req, &again);
  if (!back)
    g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "no hardware lease (%s), and no lease again (%s)", local->message, again->message);
  else
    g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "no hardware lease (%s); on %s device %s again", local->message,
                 back->software ? "software" : "hardware", back->device);
  return FALSE;
}

gboolean
va_swap_promote (VaLibvirt *lv, GPtrArray *report, const char *mac, GError **error)
{
  g_autoptr (VaDomain) live = NULL;
  g_autoptr (GVariant) leases = NULL;
  g_autofree char *old = NULL;
  g_autoptr (GError) local = NULL;
  char uuid[VIR_UUID_STRING_BUFLEN];
  const VaNic *nic = NULL;
  const char *form = NULL, *pool = "";
  Promotion p = { 0 };
  VaSwapNic *n;
  GPtrArray *nics;
  GVariantIter iter;
  GVariant *lease;

  if (!(live = va_swap_live_domain (lv, error)) || !domain_running (lv, error))
    return FALSE;
  nics = va_domain_get_nics (live);
  for (guint i = 0; i < nics->len; i++)
    if (strcmp (((const VaNic *) g_ptr_array_index (nics, i))->mac, mac) == 0)
      nic = g_ptr_array_index (nics, i);
  if (!nic)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_NOT_FOUND, "the domain marks no NIC %s", mac);
      return FALSE;
    }
  n = va_swap_nic (report, nic);
  virDomainGetUUIDString (lv->dom, uuid);
  if (!(leases = va_client_list_leases (CLIENT, error)))
    return FALSE;
  g_variant_iter_init (&iter, leases);
  while ((lease = g_variant_iter_next_value (&iter)))
    {
      const char *u = "", *m = "";

      g_variant_lookup (lease, "uuid", "&s", &u);
      g_variant_lookup (lease, "mac", "&s", &m);
      if (g_ascii_strcasecmp (u, uuid) == 0 && g_ascii_strcasecmp (m, mac) == 0)
        {
          if (!g_variant_lookup (lease, "form", "&s", &form))
            form = "hardware";
          g_variant_lookup (lease, "pool", "&s", &pool);
        }
      g_variant_unref (lease);
    }
  if (nic->form != VA_FORM_ACCELERATED || nic->failover || g_strcmp0 (form, "software") != 0)
    {
      va_swap_note (n, "not on a software device: nothing to promote");
      n->outcome = "refused";
      return TRUE;
    }
  /* no stall for nothing: a pool without a free hardware slot now */
  {
    g_autofree char *path = va_bus_pool_path (pool);
    g_autoptr (GVariant) props = va_client_get_properties (CLIENT, path, error);
    guint32 free_slots = 0;

    if (!props)
      return FALSE;
    g_variant_lookup (props, "Free", "u", &free_slots);
    if (free_slots == 0)
      {
        va_swap_note (n, "stays on its software device: pool %s has no free hardware slot", pool);
        n->outcome = "no-room";
        return TRUE;
      }
  }
  if (!(old = va_domain_interface_xml (live, mac, error)))
    return FALSE;
  p.uuid = uuid;
  p.domain_name = virDomainGetName (lv->dom);
  p.mac = nic->mac;
  p.network = nic->network;
  p.n = n;
  n->path = VA_SWAP_PATH_SWAP;
  /* the same <interface>: its port path is the lease's, whichever device */
  if (swap_iface_between (lv, nic->mac, old, old, n, promote_between, &p, &local))
    {
      va_swap_note (n, "promoted: on hardware device %s", p.device);
      g_free (p.device);
      return TRUE;
    }
  g_free (p.device);
  if (!n->outcome)
    n->outcome = "refused";
  if (n->lost)
    mark_lost (lv, n, uuid, local->message);
  else
    va_swap_note (n, "not promoted: %s", local->message);
  return TRUE;
}
