/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The libvirt hook's second stage: run only for domains that carry
 * vdpa-allocator metadata, for the calls of docs/hook-contract.md. libvirt
 * shows a failing hook's stderr to the user, so every failure is one line
 * naming the domain, the NIC and the reason. */
#define G_LOG_DOMAIN "va-hook"

#include "config.h"

#include "va-hook.h"
#include "va-hook-calls.h"

#include <errno.h>
#include <gio/gio.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "va-bus.h"
#include "va-config.h"
#include "va-domain.h"
#include "va-error.h"
#include "va-netlink.h"
#include "va-paths.h"

typedef struct
{
  const char *name; /* as libvirt passed it */
  VaDomain *domain;
  const char *xml;
  VaConfig *config;
  gint budget_ms;  /* the whole of the call's talk with the daemon: [hook] timeout-ms */
  gint64 deadline; /* monotonic µs */
  GDBusConnection *conn;
  /* why the metadata was not read (a call that never fails goes on by
   * UUID), said once: on the call's own line, or alone at its end */
  const char *note;
  gboolean said;
} Hook;

static int G_GNUC_PRINTF (2, 3) fail (Hook *h, const char *fmt, ...)
{
  va_list ap;
  g_autofree char *msg = NULL;

  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  if (h->note && !h->said)
    {
      char *both = g_strdup_printf ("%s (%s)", msg, h->note);

      g_free (msg);
      msg = both;
    }
  h->said = TRUE;
  g_strdelimit (msg, "\r\n", ' ');
  fprintf (stderr, "vdpa-allocator: domain %s: %s\n", h->name, msg);
  return 1;
}

static char *
read_stdin (gsize *len, GError **error)
{
  g_autoptr (GString) buf = g_string_sized_new (65536);
  char chunk[65536];
  ssize_t n;

  while ((n = read (STDIN_FILENO, chunk, sizeof chunk)) != 0)
    {
      if (n < 0)
        {
          if (errno == EINTR)
            continue;
          g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "reading the domain XML: %s", g_strerror (errno));
          return NULL;
        }
      if (buf->len + n > VA_XML_MAX_SIZE)
        {
          g_set_error (error, VA_ERROR, VA_ERROR_INVALID_XML, "the domain XML is over %d bytes", VA_XML_MAX_SIZE);
          return NULL;
        }
      g_string_append_len (buf, chunk, n);
    }
  *len = buf->len;
  return g_string_free (g_steal_pointer (&buf), FALSE);
}

static gint
remaining_ms (const Hook *h)
{
  gint64 left = (h->deadline - g_get_monotonic_time ()) / 1000;
  return (gint) CLAMP (left, 1, h->budget_ms);
}

/* The system bus within the call's budget (a wedged dbus-daemon must not
 * hold libvirtd's job), once per hook call. */
static gboolean
connect_bus (Hook *h, GError **error)
{
  if (!h->conn)
    h->conn = va_bus_connect (remaining_ms (h), error);
  return h->conn != NULL;
}

static GVariant *
call (Hook *h, const char *method, GVariant *params, const char *reply, GError **error)
{
  if (!connect_bus (h, error))
    {
      if (params)
        g_variant_unref (g_variant_ref_sink (params));
      return NULL;
    }
  return va_bus_call (h->conn, VA_BUS_PATH, VA_BUS_IFACE, method, params, reply, remaining_ms (h), error);
}

typedef struct
{
  const VaNic *nic;
  GVariant *reply;
  GError *error;
  gboolean done;
} Pending;

static void
allocated (GObject *source, GAsyncResult *res, gpointer user_data)
{
  Pending *p = user_data;

  p->reply = g_dbus_connection_call_finish (G_DBUS_CONNECTION (source), res, &p->error);
  p->done = TRUE;
}

/* Allocate for every accelerated NIC of one kind at once: the daemon
 * commits one main-loop turn's requests in one transaction, so a
 * domain's NICs cost one disk flush. kind=vdpa NICs at prepare, before
 * QEMU opens their port; kind=sriov NICs at start, the first call whose
 * XML shows the VF libvirt chose from the hostdev network (at prepare,
 * libvirt 9.0 still shows <interface type='network'>). */
static int
allocate_nics (Hook *h, VaPoolKind kind)
{
  GPtrArray *nics = va_domain_get_nics (h->domain);
  g_autofree Pending *pending = g_new0 (Pending, nics->len);
  g_autoptr (GError) error = NULL;
  guint sent = 0, done = 0;
  int rc = 0;

  for (guint i = 0; i < nics->len; i++)
    {
      const VaNic *nic = g_ptr_array_index (nics, i);

      pending[i].nic = nic;
      if (nic->form != VA_FORM_ACCELERATED || nic->accel_kind != kind)
        continue;
      /* fail closed: a VF we do not know of would run unrecorded */
      if (kind == VA_POOL_KIND_SRIOV && !nic->vf)
        return fail (h, "NIC %s: libvirt shows no VF for it (no <interface type='hostdev'> with a PCI <source> <address>)", nic->mac);
      sent++;
    }
  /* at prepare the daemon is asked even with nothing to lease, as before */
  if (sent == 0 && kind == VA_POOL_KIND_SRIOV)
    return 0;
  if (!connect_bus (h, &error))
    return fail (h, "vdpa-allocatord is unreachable: %s", error->message);

  for (guint i = 0; i < nics->len; i++)
    {
      const VaNic *nic = g_ptr_array_index (nics, i);
      GVariantBuilder opts;

      if (nic->form != VA_FORM_ACCELERATED || nic->accel_kind != kind)
        {
          pending[i].done = TRUE;
          continue;
        }
      g_variant_builder_init (&opts, G_VARIANT_TYPE_VARDICT);
      if (nic->pool)
        g_variant_builder_add (&opts, "{sv}", "pool", g_variant_new_string (nic->pool));
      if (nic->vlan)
        g_variant_builder_add (&opts, "{sv}", "vlan", g_variant_new_uint16 (nic->vlan));
      if (nic->queues)
        g_variant_builder_add (&opts, "{sv}", "queues", g_variant_new_uint16 (nic->queues));
      if (kind == VA_POOL_KIND_SRIOV)
        {
          g_variant_builder_add (&opts, "{sv}", "vf", g_variant_new_string (nic->vf));
          g_variant_builder_add (&opts, "{sv}", "vf_vlan", g_variant_new_uint16 (nic->vf_vlan));
        }
      else
        /* QEMU opens what <source dev> names: the daemon refuses a lease
         * whose port path is not that file */
        g_variant_builder_add (&opts, "{sv}", "port", g_variant_new_string (nic->source_dev ? nic->source_dev : ""));
      g_dbus_connection_call (h->conn, VA_BUS_NAME, VA_BUS_PATH, VA_BUS_IFACE, "Allocate",
                              g_variant_new ("(ssss@a{sv})", va_domain_get_uuid (h->domain), h->name, nic->mac,
                                             nic->network ? nic->network : "", g_variant_builder_end (&opts)),
                              G_VARIANT_TYPE ("(a{sv})"), G_DBUS_CALL_FLAGS_NONE, remaining_ms (h), NULL, allocated, &pending[i]);
    }
  while (done < nics->len)
    {
      done = 0;
      for (guint i = 0; i < nics->len; i++)
        done += pending[i].done;
      if (done < nics->len)
        g_main_context_iteration (NULL, TRUE);
    }
  for (guint i = 0; i < nics->len; i++)
    {
      if (pending[i].error && rc == 0)
        {
          va_bus_explain_error (&pending[i].error, h->budget_ms);
          rc = fail (h, "NIC %s: %s", pending[i].nic->mac, pending[i].error->message);
        }
      g_clear_error (&pending[i].error);
      g_clear_pointer (&pending[i].reply, g_variant_unref);
    }
  return rc;
}

static int
on_prepare (Hook *h)
{
  return allocate_nics (h, VA_POOL_KIND_VDPA);
}

static int
on_stopped (Hook *h)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GVariant) ret = call (h, "ReleaseDomain", g_variant_new ("(s)", va_domain_get_uuid (h->domain)), "(u)", &error);

  /* Nothing to refuse at stop: say why, and let reconciliation finish it. */
  if (!ret)
    fail (h, "leases not released now (reconciliation will): %s", error->message);
  return 0;
}

static int
on_reconnect (Hook *h)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GVariant) ret = call (h, "Claim", g_variant_new ("(s)", va_domain_get_uuid (h->domain)), "(u)", &error);

  /* A failure here must not make libvirt kill a running guest. */
  if (!ret)
    fail (h, "leases not claimed: %s", error->message);
  return 0;
}

/* A portable NIC on a Linux bridge: libvirt refuses <vlan> there, so the
 * tap it named joins the NIC's VLAN as untagged PVID and leaves VLAN 1
 * (bridge vlan add ... pvid untagged; bridge vlan del ... vid 1). */
static int
on_start (Hook *h)
{
  g_autofree char *ports = va_path_ports (va_path_get (VA_PATH_RUN));
  g_autoptr (VaHostView) view = va_config_to_host_view (h->config, ports);
  GPtrArray *nics = va_domain_get_nics (h->domain);

  /* the VFs libvirt chose, before QEMU gets them */
  if (allocate_nics (h, VA_POOL_KIND_SRIOV) != 0)
    return 1;

  for (guint i = 0; i < nics->len; i++)
    {
      const VaNic *nic = g_ptr_array_index (nics, i);
      g_autoptr (GError) error = NULL;
      VaNicPlan plan;

      if (nic->form != VA_FORM_PORTABLE)
        continue;
      if (!va_nic_resolve (nic, view, &plan, &error))
        return fail (h, "NIC %s: %s", nic->mac, error->message);
      /* libvirt tags Open vSwitch ports itself */
      if (plan.bridge_kind != VA_BRIDGE_LINUX || !plan.vlan)
        continue;
      if (!nic->target_dev)
        return fail (h, "NIC %s: libvirt named no tap, so VLAN %u cannot be applied", nic->mac, plan.vlan);
      /* fail closed: an untagged NIC would land on the bridge's default VLAN */
      if (!va_nl_bridge_vlan (nic->target_dev, TRUE, plan.vlan, TRUE, &error)
          || !va_nl_bridge_vlan_del_absent_ok (nic->target_dev, 1, &error))
        return fail (h, "NIC %s: VLAN %u on Linux bridge %s: %s", nic->mac, plan.vlan, plan.bridge, error->message);
    }
  return 0;
}

static int
on_rewrite (Hook *h)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GVariant) ret = call (h, "RewriteDomain", g_variant_new ("(ss)", h->xml, "saved"), "(s)", &error);
  g_autofree char *offline = NULL;
  const char *out;

  if (ret)
    g_variant_get (ret, "(&s)", &out);
  else if (g_error_matches (error, VA_ERROR, VA_ERROR_UNREACHABLE))
    {
      /* No daemon here: nothing can be leased, so the portable form. */
      g_autofree char *ports = va_path_ports (va_path_get (VA_PATH_RUN));
      g_autoptr (VaHostView) view = va_config_to_host_view (h->config, ports);

      g_clear_error (&error);
      offline = va_domain_rewrite_xml (h->xml, -1, view, VA_FORM_PORTABLE, &error);
      if (!offline)
        return fail (h, "rewriting for this host: %s", error->message);
      out = offline;
    }
  else
    return fail (h, "rewriting for this host: %s", error->message);
  fputs (out, stdout);
  return fflush (stdout) == 0 ? 0 : fail (h, "writing the domain XML: %s", g_strerror (errno));
}

/* QEMU runs (libvirt's qemuProcessFinishStartup): on the destination of a
 * migration in its Prepare phase, before the state arrives; after a
 * restore, paused until libvirt resumes it. A NIC vdpactl made portable
 * for the move (swap-back="accelerated") gets its accelerated form back
 * from the daemon, which runs the swap once the domain runs with no job:
 * libvirtd holds the domain's job while this hook runs, so nothing here
 * may wait for it. Never fails: a failure here would stop the guest. */
static int
on_started (Hook *h)
{
  GPtrArray *nics = va_domain_get_nics (h->domain);
  g_autoptr (GError) error = NULL;
  g_autoptr (GVariant) ret = NULL;
  gboolean any = FALSE;

  for (guint i = 0; i < nics->len; i++)
    {
      const VaNic *nic = g_ptr_array_index (nics, i);

      if (nic->swap_back && nic->form == VA_FORM_PORTABLE && !nic->swap_back_outcome)
        any = TRUE;
    }
  if (!any)
    return 0;
  ret = call (h, "SwapBack", g_variant_new ("(ss)", va_domain_get_uuid (h->domain), h->name), "()", &error);
  if (!ret)
    fail (h, "no swap back of its portable NICs (they stay portable on their VLANs): %s", error->message);
  return 0;
}

int
va_hook_main (int argc, char **argv)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaDomain) domain = NULL;
  g_autoptr (VaConfig) config = NULL;
  g_autofree char *xml = NULL;
  g_autofree char *note = NULL;
  Hook h = { 0 };
  VaHookCall call;
  const char *op, *sub;
  gsize len;
  int rc;

  if (argc < 4)
    {
      fprintf (stderr, "vdpa-allocator: usage: %s DOMAIN OPERATION SUB-OPERATION [EXTRA]\n", argv[0]);
      return 1;
    }
  h.name = argv[1];
  op = argv[2];
  sub = argv[3];
  /* an unreadable configuration gives the defaults: the daemon, which
   * refuses it, says why */
  config = va_config_load (va_path_get (VA_PATH_CONFIG), NULL);
  h.config = config ? config : (config = va_config_new_empty ());
  h.budget_ms = (gint) config->hook_timeout_ms;
  h.deadline = g_get_monotonic_time () + (gint64) h.budget_ms * 1000;

  call = va_hook_call_lookup (op, sub);
  xml = read_stdin (&len, &error);
  if (xml)
    domain = va_domain_parse (xml, len, &error);
  if (!domain)
    {
      if (call == VA_HOOK_CALL_NONE)
        return 0;
      /* refuse what would start or move a guest */
      if (va_hook_call_may_fail (call))
        return fail (&h, "invalid domain XML: %s", error->message);
      /* what must not fail needs only the UUID: claim or release by it
       * (a live domain's metadata may name a NIC detached since) */
      note = g_strdup_printf ("invalid domain XML: %s", error->message);
      h.note = note;
      if (xml && call != VA_HOOK_CALL_STARTED)
        domain = va_domain_parse_identity (xml, len, NULL);
      if (!domain || !va_domain_get_uuid (domain))
        {
          fail (&h, "%s",
                call == VA_HOOK_CALL_STARTED     ? "no swap back asked for its portable NICs"
                : call == VA_HOOK_CALL_RECONNECT ? "no lease claimed"
                                                 : "no lease released now (reconciliation will)");
          return 0;
        }
    }
  else if (va_domain_get_nics (domain)->len == 0)
    return 0;
  h.domain = domain;
  h.xml = xml;
  if (!va_domain_get_uuid (domain))
    {
      fail (&h, "the domain XML has no <uuid>");
      return va_hook_call_may_fail (call);
    }

  switch (call)
    {
      case VA_HOOK_CALL_PREPARE:
        rc = on_prepare (&h);
        break;
      case VA_HOOK_CALL_START:
        rc = on_start (&h);
        break;
      case VA_HOOK_CALL_STOPPED:
        rc = on_stopped (&h);
        break;
      case VA_HOOK_CALL_RECONNECT:
        rc = on_reconnect (&h);
        break;
      case VA_HOOK_CALL_REWRITE:
        rc = on_rewrite (&h);
        break;
      case VA_HOOK_CALL_STARTED:
        rc = on_started (&h);
        break;
      case VA_HOOK_CALL_NONE:
      default:
        rc = 0;
        break;
    }
  g_clear_object (&h.conn);
  if (h.note && !h.said)
    fail (&h, "%s", call == VA_HOOK_CALL_RECONNECT ? "leases claimed by UUID" : "leases released by UUID");
  return rc;
}
