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

#include "va-client.h"
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
  /* the whole of the call's talk with the daemon within [hook] timeout-ms */
  VaClient *client;
  /* what a call that never fails went on without (the metadata: it goes
   * on by UUID; the configuration: the default budget), said once: on the
   * call's own line, or alone at its end */
  GString *note;
  gboolean by_uuid;
  gboolean said;
} Hook;

static void
add_note (Hook *h, const char *note)
{
  if (!h->note)
    h->note = g_string_new (note);
  else
    g_string_append_printf (h->note, "; %s", note);
}

static int G_GNUC_PRINTF (2, 3) fail (Hook *h, const char *fmt, ...)
{
  va_list ap;
  g_autofree char *msg = NULL;

  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  if (h->note && !h->said)
    {
      char *both = g_strdup_printf ("%s (%s)", msg, h->note->str);

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
  g_autofree VaAllocRequest *reqs = g_new0 (VaAllocRequest, nics->len);
  g_autofree const VaNic **sent = g_new0 (const VaNic *, nics->len);
  g_autofree VaLease **leases = NULL;
  g_autofree GError **errors = NULL;
  g_autoptr (GError) error = NULL;
  guint n = 0;
  int rc = 0;
  /* a software device's relay reaches only shared, file-backed memory,
   * which the accelerated form has where one may be made: a domain
   * without it (defined before, or by hand) gets hardware or nothing */
  gboolean shared = va_domain_memory_is_shared (h->domain);
  g_autofree char *ports = va_path_ports (va_path_get (VA_PATH_RUN));
  g_autoptr (VaHostView) view = va_config_to_host_view (h->config, ports);

  for (guint i = 0; i < nics->len; i++)
    {
      const VaNic *nic = g_ptr_array_index (nics, i);
      VaAllocRequest *req = &reqs[n];

      /* a failover standby leases nothing: its VF is leased when it is
       * plugged beside it, once the domain runs */
      if (nic->form != VA_FORM_ACCELERATED || nic->accel_kind != kind || nic->failover)
        continue;
      /* fail closed: a VF we do not know of would run unrecorded */
      if (kind == VA_POOL_KIND_SRIOV && !nic->vf)
        return fail (h, "NIC %s: libvirt shows no VF for it (no <interface type='hostdev'> with a PCI <source> <address>)", nic->mac);
      *req = (VaAllocRequest) VA_ALLOC_REQUEST_INIT;
      req->uuid = va_domain_get_uuid (h->domain);
      req->domain_name = h->name;
      req->mac = nic->mac;
      req->network = nic->network;
      req->pool = nic->pool;
      req->vlan = nic->vlan;
      req->queues = nic->queues;
      if (kind == VA_POOL_KIND_SRIOV)
        {
          req->vf = nic->vf;
          req->vf_vlan = nic->vf_vlan;
        }
      else
        {
          /* QEMU opens what <source dev> names: the daemon refuses a
           * lease whose port path is not that file */
          req->port = nic->source_dev ? nic->source_dev : "";
          req->form = va_client_alloc_form (view, nic, shared);
        }
      sent[n++] = nic;
    }
  /* at prepare the daemon is asked even with nothing to lease, as before */
  if (n == 0 && kind == VA_POOL_KIND_SRIOV)
    return 0;
  leases = g_new0 (VaLease *, MAX (n, 1));
  errors = g_new0 (GError *, MAX (n, 1));
  if (!va_client_allocate_batch (h->client, reqs, n, leases, errors, &error))
    return fail (h, "vdpa-allocatord is unreachable: %s", error->message);
  for (guint i = 0; i < n; i++)
    {
      if (errors[i] && rc == 0 && reqs[i].form && g_error_matches (errors[i], VA_ERROR, VA_ERROR_POOL_EXHAUSTED))
        rc = fail (h,
                   "NIC %s: %s: the domain's memory is not shared and file-backed, which a software vDPA device needs ('vdpactl domain "
                   "accelerate' gives the domain such memory)",
                   sent[i]->mac, errors[i]->message);
      else if (errors[i] && rc == 0)
        rc = fail (h, "NIC %s: %s", sent[i]->mac, errors[i]->message);
      g_clear_error (&errors[i]);
      g_clear_pointer (&leases[i], va_lease_free);
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

  /* Nothing to refuse at stop: say why, and let reconciliation finish it. */
  if (va_client_release_domain (h->client, va_domain_get_uuid (h->domain), &error) < 0)
    fail (h, "leases not released now (reconciliation will): %s", error->message);
  return 0;
}

static int
on_reconnect (Hook *h)
{
  g_autoptr (GError) error = NULL;

  /* A failure here must not make libvirt kill a running guest. */
  if (va_client_claim (h->client, va_domain_get_uuid (h->domain), &error) < 0)
    fail (h, "leases not claimed: %s", error->message);
  /* a NIC that a swap lost when libvirtd went (swap-back-outcome="lost";
   * its <interface> is gone, so the live XML does not parse: a text
   * test): the daemon's swap helper plugs it back once libvirtd runs */
  g_clear_error (&error);
  if (h->xml && (strstr (h->xml, "swap-back-outcome=\"lost\"") || strstr (h->xml, "swap-back-outcome='lost'"))
      && !va_client_swap_back (h->client, va_domain_get_uuid (h->domain), h->name, &error))
    fail (h, "a NIC lost in a swap is not plugged back now: %s", error->message);
  return 0;
}

/* A portable NIC or a failover standby on a Linux bridge: libvirt refuses
 * <vlan> there, so the tap it named joins the NIC's VLAN as untagged PVID and leaves VLAN 1
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

      /* a failover standby is a tap on the bridge too */
      if (nic->form != VA_FORM_PORTABLE && !nic->failover)
        continue;
      /* the resolver's errors name the NIC */
      if (!va_nic_resolve (nic, view, &plan, &error))
        return fail (h, "%s", error->message);
      /* libvirt tags Open vSwitch ports itself */
      if (plan.bridge_kind != VA_BRIDGE_LINUX || !plan.vlan)
        continue;
      if (!nic->target_dev)
        return fail (h, "NIC %s: libvirt named no tap, so VLAN %u cannot be applied", nic->mac, plan.vlan);
      /* fail closed: an untagged NIC would land on the bridge's default VLAN */
      if (!va_nl_bridge_port_vlan (nic->target_dev, plan.vlan, &error))
        return fail (h, "NIC %s: VLAN %u on Linux bridge %s: %s", nic->mac, plan.vlan, plan.bridge, error->message);
    }
  return 0;
}

/* The daemon's rewrite; without it, the portable form from this host's
 * configuration: the one offline policy (va_client_rewrite_domain()). */
static int
on_rewrite (Hook *h)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *out = va_client_rewrite_domain (h->client, h->xml, "saved", NULL, &error);

  if (!out)
    return fail (h, "rewriting for this host: %s", error->message);
  fputs (out, stdout);
  return fflush (stdout) == 0 ? 0 : fail (h, "writing the domain XML: %s", g_strerror (errno));
}

/* QEMU runs (libvirt's qemuProcessFinishStartup): at a start; on the
 * destination of a migration in its Prepare phase, before the state
 * arrives; after a restore, paused until libvirt resumes it. A NIC vdpactl
 * made portable for the move (swap-back="accelerated") gets its
 * accelerated form back from the daemon, and a failover standby without
 * its VF gets one (leased, then plugged beside it), both once the domain
 * runs with no job: libvirtd holds the domain's job while this hook runs,
 * so nothing here may wait for it. Never fails: a failure here would stop
 * the guest. */
static int
on_started (Hook *h)
{
  GPtrArray *nics = va_domain_get_nics (h->domain);
  g_autoptr (GError) error = NULL;
  gboolean any = FALSE;

  for (guint i = 0; i < nics->len; i++)
    {
      const VaNic *nic = g_ptr_array_index (nics, i);

      if (va_nic_swap_back_pending (nic) || (nic->failover && !nic->vf))
        any = TRUE;
    }
  if (!any)
    return 0;
  if (!va_client_swap_back (h->client, va_domain_get_uuid (h->domain), h->name, &error))
    fail (h,
          "no swap back of its portable NICs and no VF beside its failover standbys (they stay portable, or on their standby, on "
          "their VLANs): %s",
          error->message);
  return 0;
}

/* The configuration, under the client's one offline policy: one that
 * cannot be read or parsed fails what may fail with the loader's line (a
 * start would otherwise meet "no network named ..." and a budget that
 * silently went back to its default); the others go on with the default
 * budget and say so. */
static VaConfig *
load_config (Hook *h, VaHookCall call)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *note = NULL;
  VaConfig *config = va_client_load_config (NULL, &error);

  if (config)
    return config;
  if (va_hook_call_may_fail (call))
    {
      fail (h, "the configuration does not load: %s", error->message);
      return NULL;
    }
  note
    = g_strdup_printf ("the configuration does not load, so the default budget of %d ms: %s", VA_HOOK_TIMEOUT_MS_DEFAULT, error->message);
  add_note (h, note);
  return va_config_new_empty ();
}

static const char *
done_words (const Hook *h, VaHookCall call)
{
  switch (call)
    {
      case VA_HOOK_CALL_RECONNECT:
        return h->by_uuid ? "leases claimed by UUID" : "leases claimed";
      case VA_HOOK_CALL_STOPPED:
        return h->by_uuid ? "leases released by UUID" : "leases released";
      case VA_HOOK_CALL_STARTED:
        return "swap back and failover VFs asked for where wanted";
      default:
        return "done";
    }
}

int
va_hook_main (int argc, char **argv)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaDomain) domain = NULL;
  g_autoptr (VaConfig) config = NULL;
  g_autoptr (VaClient) client = NULL;
  g_autoptr (GString) note = NULL;
  g_autofree char *xml = NULL;
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

  call = va_hook_call_lookup (op, sub);
  xml = read_stdin (&len, &error);
  if (xml)
    domain = va_domain_parse (xml, len, &error);
  if (!domain)
    {
      g_autofree char *why = NULL;

      if (call == VA_HOOK_CALL_NONE)
        return 0;
      /* refuse what would start or move a guest */
      if (va_hook_call_may_fail (call))
        return fail (&h, "invalid domain XML: %s", error->message);
      /* what must not fail needs only the UUID: claim or release by it
       * (a live domain's metadata may name a NIC detached since) */
      why = g_strdup_printf ("invalid domain XML: %s", error->message);
      add_note (&h, why);
      note = h.note;
      h.by_uuid = TRUE;
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
  config = load_config (&h, call);
  note = h.note;
  if (!config)
    return 1;
  h.config = config;
  client = va_client_new ((int) config->hook_timeout_ms, TRUE);
  h.client = client;

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
  if (h.note && !h.said)
    fail (&h, "%s", done_words (&h, call));
  return rc;
}
