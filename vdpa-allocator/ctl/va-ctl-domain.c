/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vdpactl domain: the libvirt side, through libvirt's client API as an
 * ordinary client (never from inside the hook, where calling libvirt would
 * deadlock it). */
#define G_LOG_DOMAIN "va-ctl-domain"

#include "config.h"

#include "va-ctl-private.h"
#include "va-ctl-migrate.h"

#include <gio/gio.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <string.h>

#include "va-bus.h"
#include "va-client.h"
#include "va-config.h"
#include "va-domain.h"
#include "va-error.h"
#include "va-libvirt.h"
#include "va-paths.h"

/* ---- show ---------------------------------------------------------------- */

/* Why the failover standby @nic runs without its VF, as far as this host
 * can tell: its pool's free VFs, from the daemon. */
static char *
standby_why (const VaNic *nic)
{
  g_autoptr (VaHostView) view = va_client_offline_view (NULL, NULL);
  g_autoptr (GVariant) props = NULL;
  g_autofree char *path = NULL;
  VaNicPlan plan;
  guint32 free = 0;

  if (!view || !va_nic_resolve (nic, view, &plan, NULL) || !plan.pool)
    return g_strdup ("no VF plugged");
  path = va_bus_pool_path (plan.pool);
  props = va_client_get_properties (va_client_get_default (), path, NULL);
  if (!props || !g_variant_lookup (props, "Free", "u", &free))
    return g_strdup ("no VF plugged");
  if (free == 0)
    return g_strdup_printf ("no free VF in pool %s", plan.pool);
  return g_strdup_printf ("no VF plugged; pool %s has %u free ('vdpactl domain accelerate --live' plugs one)", plan.pool, free);
}

static int
domain_show (int argc, char **argv, const char *uri)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaDomain) domain = NULL;
  g_autoptr (GVariant) leases = NULL;
  g_autofree char *xml = NULL;
  gboolean json = FALSE;
  g_autoptr (VaLibvirt) lv = NULL;
  GVariantBuilder b, jb;
  GPtrArray *nics;
  int rc = 0;

  if ((rc = va_ctl_parse (&argc, &argv, "DOMAIN - each NIC's intent, form and lease",
                          "Reads the domain from libvirt, on a read-only connection.", NULL, &json, 1, 1)))
    return rc;
  /* read-only: a member of group libvirt without root may read */
  if (!(lv = va_libvirt_open (uri, TRUE, &error)) || !va_libvirt_lookup (lv, argv[1], &error))
    return va_ctl_fail (error);
  xml = virDomainGetXMLDesc (lv->dom, 0);
  if (!xml)
    {
      g_autofree char *msg = va_libvirt_last_error ("reading the domain XML");
      return va_ctl_fail_msg (msg);
    }
  domain = va_domain_parse (xml, -1, &error);
  if (!domain)
    return va_ctl_fail (error);
  leases = va_client_list_leases (va_client_get_default (), NULL);
  g_variant_builder_init (&b, G_VARIANT_TYPE ("aa{sv}"));
  g_variant_builder_init (&jb, G_VARIANT_TYPE ("aa{sv}"));
  nics = va_domain_get_nics (domain);
  for (guint i = 0; i < nics->len; i++)
    {
      const VaNic *nic = g_ptr_array_index (nics, i);
      g_autofree char *intent = NULL;
      const char *device = "", *lease_form = "", *kind = "", *slot = "", *broken = "";
      g_autofree char *lease_text = NULL;
      g_autofree char *standby = NULL;
      GVariantBuilder r, j;

      if (nic->network)
        intent = g_strdup_printf ("network %s", nic->network);
      else
        intent = g_strdup_printf ("pool %s, vlan %u, bridge %s", nic->pool ? nic->pool : "-", nic->vlan, nic->bridge ? nic->bridge : "-");
      if (leases)
        {
          GVariantIter iter;
          GVariant *lease;

          g_variant_iter_init (&iter, leases);
          while ((lease = g_variant_iter_next_value (&iter)))
            {
              const char *uuid = "", *mac = "";
              g_variant_lookup (lease, "uuid", "&s", &uuid);
              g_variant_lookup (lease, "mac", "&s", &mac);
              if (g_strcmp0 (uuid, va_domain_get_uuid (domain)) == 0 && strcmp (mac, nic->mac) == 0)
                {
                  g_variant_lookup (lease, "device", "&s", &device);
                  g_variant_lookup (lease, "kind", "&s", &kind);
                  g_variant_lookup (lease, "slot", "&s", &slot);
                  g_variant_lookup (lease, "broken_reason", "&s", &broken);
                  /* absent from a daemon before the software form */
                  if (!g_variant_lookup (lease, "form", "&s", &lease_form))
                    lease_form = "hardware";
                }
              g_variant_unref (lease);
            }
        }
      g_variant_builder_init (&r, G_VARIANT_TYPE_VARDICT);
      g_variant_builder_add (&r, "{sv}", "mac", g_variant_new_string (nic->mac));
      g_variant_builder_add (&r, "{sv}", "intent", g_variant_new_string (intent));
      g_variant_builder_add (&r, "{sv}", "mode", g_variant_new_string (nic->mode_set ? va_mode_to_string (nic->mode) : ""));
      g_variant_builder_add (&r, "{sv}", "form", g_variant_new_string (va_form_to_string (nic->form)));
      /* a failover standby without its VF: the guest runs on virtio */
      if (nic->failover && !nic->vf)
        standby = standby_why (nic);
      /* a software device's lease says so: the pool had no free VF */
      if (standby)
        lease_text = g_strdup_printf ("%son its failover standby alone: %s", leases && *slot ? "VF leased, " : "", standby);
      else if (nic->failover)
        lease_text = g_strdup_printf ("VF %s beside its failover standby%s", nic->vf, leases && !*slot ? " (not leased)" : "");
      else if (strcmp (kind, "sriov") == 0)
        lease_text = g_strdup_printf ("VF %s", slot);
      else
        lease_text = g_strdup_printf ("%s%s", leases ? device : "(daemon unreachable)",
                                      g_strcmp0 (lease_form, "software") == 0 ? " (software)" : "");
      /* it carries nothing: lease list's words */
      if (*broken)
        {
          g_autofree char *was = g_steal_pointer (&lease_text);
          lease_text = g_strdup_printf ("%s, broken: %s", was, broken);
        }
      g_variant_builder_add (&r, "{sv}", "lease", g_variant_new_string (lease_text));
      g_variant_builder_add_value (&b, g_variant_builder_end (&r));

      /* JSON: the intent's parts, not prose; "" is null */
      g_variant_builder_init (&j, G_VARIANT_TYPE_VARDICT);
      g_variant_builder_add (&j, "{sv}", "mac", g_variant_new_string (nic->mac));
      g_variant_builder_add (&j, "{sv}", "network", g_variant_new_string (nic->network ? nic->network : ""));
      g_variant_builder_add (&j, "{sv}", "pool", g_variant_new_string (nic->pool ? nic->pool : ""));
      g_variant_builder_add (&j, "{sv}", "vlan", nic->vlan ? g_variant_new_uint16 (nic->vlan) : g_variant_new_string (""));
      g_variant_builder_add (&j, "{sv}", "fallback_bridge", g_variant_new_string (nic->bridge ? nic->bridge : ""));
      g_variant_builder_add (&j, "{sv}", "mode", g_variant_new_string (nic->mode_set ? va_mode_to_string (nic->mode) : ""));
      g_variant_builder_add (&j, "{sv}", "form", g_variant_new_string (va_form_to_string (nic->form)));
      g_variant_builder_add (&j, "{sv}", "device", g_variant_new_string (device));
      g_variant_builder_add (&j, "{sv}", "lease_form", g_variant_new_string (lease_form));
      g_variant_builder_add (&j, "{sv}", "broken_reason", g_variant_new_string (broken));
      g_variant_builder_add (&j, "{sv}", "failover", g_variant_new_boolean (nic->failover));
      g_variant_builder_add (&j, "{sv}", "passthrough_vf", g_variant_new_string (nic->vf ? nic->vf : ""));
      g_variant_builder_add (&j, "{sv}", "standby_only", g_variant_new_string (standby ? standby : ""));
      g_variant_builder_add_value (&jb, g_variant_builder_end (&j));
    }
  {
    static const VaCtlColumn cols[] = {
      { "mac", "MAC" }, { "intent", "INTENT" }, { "form", "FORM" }, { "lease", "LEASE", .text = TRUE }, { NULL },
    };
    g_autoptr (GVariant) out = g_variant_ref_sink (g_variant_builder_end (&b));
    g_autoptr (GVariant) jout = g_variant_ref_sink (g_variant_builder_end (&jb));

    if (json)
      {
        g_autoptr (JsonBuilder) jdoc = va_ctl_json_begin ();
        char uuid[VIR_UUID_STRING_BUFLEN];

        virDomainGetUUIDString (lv->dom, uuid);
        json_builder_set_member_name (jdoc, "domain");
        json_builder_add_string_value (jdoc, virDomainGetName (lv->dom));
        json_builder_set_member_name (jdoc, "uuid");
        json_builder_add_string_value (jdoc, uuid);
        json_builder_set_member_name (jdoc, "daemon_reachable");
        json_builder_add_boolean_value (jdoc, leases != NULL);
        va_ctl_json_add_list (jdoc, "nics", jout);
        va_ctl_json_print (jdoc);
      }
    else
      va_ctl_print_table (out, cols, NULL);
  }
  return 0;
}

/* ---- accelerate / portable ----------------------------------------------- */

static int
domain_redefine (int argc, char **argv, const char *uri, VaForm form)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *xml = NULL;
  g_autofree char *out = NULL;
  g_autofree char *config_dir = NULL;
  gboolean live = FALSE, json = FALSE;
  const GOptionEntry entries[] = {
    { "config", 'c', 0, G_OPTION_ARG_FILENAME, &config_dir, "Configuration for an offline rewrite when the daemon is not running", "DIR" },
    { "live", 'l', 0, G_OPTION_ARG_NONE, &live,
      "Swap the running domain's NICs through hot-plug instead (same MAC, VLAN and PCI slot; leases of this host)", NULL },
    { NULL },
  };
  g_autoptr (VaLibvirt) lv = NULL;
  virDomainPtr defined;
  int rc;

  if ((rc = va_ctl_parse (&argc, &argv,
                          form == VA_FORM_ACCELERATED ? "DOMAIN - redefine a domain with accelerated NICs"
                                                      : "DOMAIN - redefine a domain with portable (virtio) NICs",
                          "Rewrites the persistent definition through libvirt; a running domain gets it at its next start.\n"
                          "With --live, swaps the running domain's NICs instead, one at a time: unplug, then plug the\n"
                          "other form in the same slot (what 'vdpactl domain migrate' does, and after it, on the\n"
                          "destination, 'accelerate --live'). -j (with --live) prints the report as JSON.",
                          entries, &json, 1, 1)))
    return rc;
  if (json && !live)
    return va_ctl_usage ("-j needs --live (the definition's rewrite prints nothing)");
  if (!(lv = va_libvirt_open (uri, FALSE, &error)) || !va_libvirt_lookup (lv, argv[1], &error))
    return va_ctl_fail (error);
  if (live)
    return va_ctl_domain_swap_live (lv, form, json);
  if (!virDomainIsPersistent (lv->dom))
    {
      return va_ctl_fail_msg ("the domain is transient: there is no definition to rewrite");
    }
  xml = virDomainGetXMLDesc (lv->dom, VIR_DOMAIN_XML_INACTIVE | VIR_DOMAIN_XML_SECURE);
  if (!xml)
    {
      g_autofree char *msg = va_libvirt_last_error ("reading the definition");
      return va_ctl_fail_msg (msg);
    }

  {
    g_autoptr (VaDomain) d = va_domain_parse (xml, -1, &error);

    if (!d)
      return va_ctl_fail (error);
    if (va_domain_get_nics (d)->len == 0)
      {
        g_autofree char *msg = g_strdup_printf ("domain %s marks no NIC in its vdpa:nics metadata: there is nothing to make %s, and "
                                                "it was not redefined (see vdpactl(8), DESCRIPTION)",
                                                argv[1], va_form_to_string (form));
        return va_ctl_fail_msg (msg);
      }
  }
  /* the daemon knows this host's capacity; offline, assume room */
  out = va_client_rewrite_domain (va_client_get_default (), xml, va_form_to_string (form), config_dir, &error);
  if (!out)
    return va_ctl_fail (error);
  defined = virDomainDefineXML (lv->conn, out);
  if (!defined)
    {
      g_autofree char *msg = va_libvirt_last_error ("libvirt refused the rewritten definition");
      return va_ctl_fail_msg (msg);
    }
  g_print ("domain %s redefined with %s NICs%s\n", argv[1], va_form_to_string (form),
           virDomainIsActive (lv->dom) == 1 ? "; it takes effect at the next start" : "");
  virDomainFree (defined);
  return 0;
}

/* ---- attach / detach (libvirt calls no hook for hot-plug) ---------------- */

static gboolean
update_metadata (VaLibvirt *lv, unsigned int scopes, const char *mac, const char *network, GError **error)
{
  const unsigned int each[] = { VIR_DOMAIN_AFFECT_LIVE, VIR_DOMAIN_AFFECT_CONFIG };

  for (guint i = 0; i < G_N_ELEMENTS (each); i++)
    {
      g_autofree char *updated = NULL;
      char *current;

      if (!(scopes & each[i]))
        continue;
      /* none yet is an error from libvirt, and fine here */
      current = virDomainGetMetadata (lv->dom, VIR_DOMAIN_METADATA_ELEMENT, VA_XML_NS, each[i]);
      updated = va_metadata_update (current, mac, network, error);
      free (current);
      if (!updated)
        return FALSE;
      if (virDomainSetMetadata (lv->dom, VIR_DOMAIN_METADATA_ELEMENT, updated, "vdpa", VA_XML_NS, each[i]) < 0)
        {
          g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "updating the domain's vdpa metadata: %s", virGetLastErrorMessage ());
          return FALSE;
        }
    }
  return TRUE;
}

static unsigned int
scopes_of (VaLibvirt *lv, gboolean persistent, GError **error)
{
  unsigned int scopes = 0;

  if (virDomainIsActive (lv->dom) == 1)
    scopes |= VIR_DOMAIN_AFFECT_LIVE;
  if (persistent)
    scopes |= VIR_DOMAIN_AFFECT_CONFIG;
  if (!scopes)
    g_set_error_literal (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT,
                         "the domain is not running: --persistent changes its definition instead");
  return scopes;
}

static int
domain_attach (int argc, char **argv, const char *uri)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaLease) lease = NULL;
  g_autoptr (VaDomain) domain = NULL;
  g_autofree char *network = NULL, *mac_arg = NULL, *xml = NULL, *iface = NULL;
  gboolean persistent = FALSE;
  const GOptionEntry entries[] = {
    { "network", 'n', 0, G_OPTION_ARG_STRING, &network, "The configured network of the new NIC (required)", "NETWORK" },
    { "mac", 'm', 0, G_OPTION_ARG_STRING, &mac_arg, "Its MAC address (default: a new 52:54:00 one)", "MAC" },
    { "persistent", 'p', 0, G_OPTION_ARG_NONE, &persistent, "Also add it to the domain's definition", NULL },
    { NULL },
  };
  char uuid[VIR_UUID_STRING_BUFLEN], mac[VA_MAC_STRING_LEN];
  unsigned int scopes;
  g_autoptr (VaLibvirt) lv = NULL;
  int rc;

  if ((rc = va_ctl_parse (&argc, &argv, "DOMAIN - hot-plug an accelerated NIC",
                          "Allocates a vDPA device, attaches it through libvirt and records the NIC in the domain's\n"
                          "metadata. A failed attach releases what it allocated.",
                          entries, NULL, 1, 1)))
    return rc;
  if (!network)
    return va_ctl_usage ("--network is required");
  if (mac_arg && !va_mac_check (mac_arg, mac, &error))
    {
      g_prefix_error (&error, "--mac: ");
      return va_ctl_usage (error->message);
    }
  if (!(lv = va_libvirt_open (uri, FALSE, &error)) || !va_libvirt_lookup (lv, argv[1], &error)
      || !(scopes = scopes_of (lv, persistent, &error)))
    return va_ctl_fail (error);
  virDomainGetUUIDString (lv->dom, uuid);
  xml = virDomainGetXMLDesc (lv->dom, 0);
  domain = xml ? va_domain_parse (xml, -1, NULL) : NULL;
  if (!mac_arg)
    {
      /* a locally administered prefix libvirt uses too, not yet in use */
      for (;;)
        {
          g_autofree char *taken = NULL;

          g_snprintf (mac, sizeof mac, "52:54:00:%02x:%02x:%02x", g_random_int_range (0, 256), g_random_int_range (0, 256),
                      g_random_int_range (0, 256));
          taken = domain ? va_domain_interface_xml (domain, mac, NULL) : NULL;
          if (!taken)
            break;
        }
    }
  else if (domain && (iface = va_domain_interface_xml (domain, mac, NULL)))
    {
      return va_ctl_fail_msg ("the domain has an interface with that MAC already");
    }

  g_free (iface);
  if (scopes & VIR_DOMAIN_AFFECT_LIVE)
    {
      VaAllocRequest req = VA_ALLOC_REQUEST_INIT;

      req.uuid = uuid;
      req.domain_name = virDomainGetName (lv->dom);
      req.mac = mac;
      req.network = network;
      /* a software device's relay reaches only shared, file-backed memory,
       * and a running guest's memory stays as it started */
      {
        VaNic nic = { .mac = mac, .network = network };

        req.form = va_client_alloc_form (NULL, &nic, domain && va_domain_memory_is_shared (domain));
      }
      lease = va_client_allocate (va_client_get_default (), &req, &error);
      if (!lease && req.form && g_error_matches (error, VA_ERROR, VA_ERROR_POOL_EXHAUSTED))
        {
          g_autofree char *msg = g_strdup_printf (
            "%s: the running domain's memory is not shared and file-backed, which a software vDPA device needs", error->message);
          return va_ctl_fail_msg (msg);
        }
      if (!lease)
        return va_ctl_fail (error);
      iface = g_strdup_printf ("<interface type='vdpa'><mac address='%s'/><source dev='%s'/><model type='virtio'/>"
                               "<driver queues='%u'/></interface>",
                               mac, lease->port, lease->queues);
    }
  else
    {
      /* the definition only: the hook leases the device at the next start */
      g_autofree char *ports = va_path_ports (va_path_get (VA_PATH_RUN));
      g_autofree char *path = NULL;
      char canon[VA_UUID_STRING_LEN];

      va_uuid_normalize (uuid, canon);
      path = va_port_path (ports, canon, mac);
      iface = g_strdup_printf ("<interface type='vdpa'><mac address='%s'/><source dev='%s'/><model type='virtio'/></interface>", mac, path);
    }
  if (virDomainAttachDeviceFlags (lv->dom, iface, scopes) < 0)
    {
      g_autofree char *msg = va_libvirt_last_error ("libvirt refused the attach");
      g_autoptr (GError) rel_error = NULL;
      gboolean released = lease && va_client_release (va_client_get_default (), uuid, mac, &rel_error);
      /* QEMU 7.2 keeps a refused hot-plug's vhost-vdpa fd until it exits */
      g_autofree char *line = g_strdup_printf ("%s%s", msg,
                                               !lease     ? ""
                                               : released ? "; the lease was released"
                                               : g_error_matches (rel_error, VA_ERROR, VA_ERROR_BUSY)
                                                 ? "; QEMU still holds the device, so its lease stays until the domain stops"
                                                 : "; the lease could not be released");
      return va_ctl_fail_msg (line);
    }
  if (!update_metadata (lv, scopes, mac, network, &error))
    {
      return va_ctl_fail (error);
    }
  g_print ("attached NIC %s on network %s to %s\n", mac, network, argv[1]);
  return 0;
}

static int
domain_detach (int argc, char **argv, const char *uri)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaDomain) domain = NULL;
  g_autofree char *mac_arg = NULL, *xml = NULL, *iface = NULL;
  gboolean persistent = FALSE;
  const GOptionEntry entries[] = {
    { "mac", 'm', 0, G_OPTION_ARG_STRING, &mac_arg, "The NIC's MAC address (required)", "MAC" },
    { "persistent", 'p', 0, G_OPTION_ARG_NONE, &persistent, "Also remove it from the domain's definition", NULL },
    { NULL },
  };
  char uuid[VIR_UUID_STRING_BUFLEN], mac[VA_MAC_STRING_LEN];
  unsigned int scopes;
  gboolean released;
  g_autoptr (VaLibvirt) lv = NULL;
  int rc;

  if ((rc = va_ctl_parse (&argc, &argv, "DOMAIN - hot-unplug a NIC and release its lease",
                          "Detaches the NIC through libvirt, releases its lease and drops it from the metadata.", entries, NULL, 1, 1)))
    return rc;
  if (!mac_arg)
    return va_ctl_usage ("--mac is required");
  if (!va_mac_check (mac_arg, mac, &error))
    {
      g_prefix_error (&error, "--mac: ");
      return va_ctl_usage (error->message);
    }
  if (!(lv = va_libvirt_open (uri, FALSE, &error)) || !va_libvirt_lookup (lv, argv[1], &error)
      || !(scopes = scopes_of (lv, persistent, &error)))
    return va_ctl_fail (error);
  virDomainGetUUIDString (lv->dom, uuid);
  xml = virDomainGetXMLDesc (lv->dom, (scopes & VIR_DOMAIN_AFFECT_LIVE) ? 0 : VIR_DOMAIN_XML_INACTIVE);
  domain = xml ? va_domain_parse (xml, -1, &error) : NULL;
  iface = domain ? va_domain_interface_xml (domain, mac, &error) : NULL;
  if (!iface)
    {
      return error ? va_ctl_fail (error) : va_ctl_fail_msg ("cannot read the domain from libvirt");
    }
  if (virDomainDetachDeviceFlags (lv->dom, iface, scopes) < 0)
    {
      g_autofree char *msg = va_libvirt_last_error ("libvirt refused the detach");
      return va_ctl_fail_msg (msg);
    }
  released = va_client_release (va_client_get_default (), uuid, mac, &error);
  if (!released && g_error_matches (error, VA_ERROR, VA_ERROR_BUSY))
    {
      /* libvirt has asked; the guest ejects the NIC when it will */
      return va_ctl_fail_msg ("detach requested, but the guest has not let go of the NIC yet: its lease stays until 'vdpactl release' "
                              "once it has, or until the domain stops");
    }
  if (!released)
    {
      g_prefix_error (&error, "detached, but the lease was not released (it goes when the domain stops, or with 'vdpactl release'): ");
      return va_ctl_fail (error);
    }
  if (!update_metadata (lv, scopes, mac, NULL, &error))
    {
      return va_ctl_fail (error);
    }
  g_print ("detached NIC %s from %s\n", mac, argv[1]);
  return 0;
}

int
va_ctl_cmd_domain (int argc, char **argv)
{
  /* before the subcommand or after it, as virsh takes it: vdpactl's
   * global options (va-ctl.c) */
  const char *uri = va_ctl_global_connect ();
  int rc;

  if (argc < 2)
    return va_ctl_usage ("no domain command given; see 'vdpactl domain --help'");
  if (strcmp (argv[1], "--help") == 0 || strcmp (argv[1], "-h") == 0)
    {
      g_print ("Usage: vdpactl domain [--connect URI] show|accelerate|portable DOMAIN\n"
               "       vdpactl domain [--connect URI] attach DOMAIN --network NET [--mac MAC] [--persistent]\n"
               "       vdpactl domain [--connect URI] detach DOMAIN --mac MAC [--persistent]\n"
               "       vdpactl domain [--connect URI] accelerate|portable --live DOMAIN\n"
               "       vdpactl domain [--connect URI] migrate DOMAIN DEST-URI [--live] [--persistent] [--undefine-source]\n"
               "                                      [--timeout S] [--swap]\n"
               "       vdpactl domain [--connect URI] save DOMAIN FILE | managedsave DOMAIN\n"
               "       vdpactl domain [--connect URI] restore FILE | restore --managed DOMAIN\n\n"
               "Through libvirt (default qemu:///system): show each NIC's intent, form and lease;\n"
               "redefine the domain with its NICs in the accelerated or portable form; or hot-plug an\n"
               "accelerated NIC (libvirt calls no hook for that) and unplug it again; migrate, save or\n"
               "restore a running domain, its accelerated NICs swapped to the portable form while QEMU\n"
               "cannot move a vhost-vdpa netdev.\n");
      return 0;
    }
  {
    /* --help then says "vdpactl domain show" */
    g_autofree char *prgname = g_strdup_printf ("vdpactl domain %.*s", VA_CUT (argv[1], 32));
    g_set_prgname (prgname);
  }
  if (strcmp (argv[1], "show") == 0)
    return domain_show (argc - 1, argv + 1, uri);
  if (strcmp (argv[1], "accelerate") == 0)
    return domain_redefine (argc - 1, argv + 1, uri, VA_FORM_ACCELERATED);
  if (strcmp (argv[1], "portable") == 0)
    return domain_redefine (argc - 1, argv + 1, uri, VA_FORM_PORTABLE);
  if (strcmp (argv[1], "attach") == 0)
    return domain_attach (argc - 1, argv + 1, uri);
  if (strcmp (argv[1], "detach") == 0)
    return domain_detach (argc - 1, argv + 1, uri);
  if ((rc = va_ctl_domain_move (argc - 1, argv + 1, uri)) >= 0)
    return rc;
  g_printerr ("vdpactl: unknown domain command '%.*s'; use show, accelerate, portable, attach, detach, migrate, save, managedsave or "
              "restore\n",
              VA_CUT (argv[1], 64));
  return VA_CTL_EXIT_USAGE;
}
