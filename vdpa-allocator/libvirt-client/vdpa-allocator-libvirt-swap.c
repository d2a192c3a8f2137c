/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The swap back of a domain that moved to this host, and the VFs of its
 * failover standbys: vdpa-allocatord runs it when the hook's "started
 * begin" says a domain came with NICs marked swap-back="accelerated"
 * (portable for the move), or runs with a failover standby that has no VF
 * beside it (at a start, a restore, a migration in). The hook cannot call
 * libvirt (libvirtd waits for it) and the daemon keeps libvirt's client
 * library out of its process, so this helper does it: it waits until the
 * domain runs with no job (the incoming migration finished), then swaps
 * each marked NIC to its accelerated form with a lease of this host's
 * daemon, with the code 'vdpactl domain accelerate --live' runs. Where the
 * pool has no room or the swap fails, the NIC stays portable in its slot on
 * its VLAN and swap-back-outcome says why.
 *
 * A standby gets a VF of its pool, the daemon's pick, plugged beside it as
 * the transient member (va_swap_to_accelerated()); with no free VF the
 * guest runs on the standby.
 *
 * Output: one line per NIC tried, "MAC accelerated", "MAC accelerated
 * on VF PCI" (a standby and its VF), "MAC portable OUTCOME: note" or "MAC
 * standby OUTCOME: note" (on its standby alone). Exit status 0: every NIC
 * tried accelerated, or none to try; 3: some stay portable or on their
 * standby; 1: the domain never ran without a job within --wait, or libvirt
 * failed (one line on stderr).
 *
 * --promote MAC instead moves the running domain's NIC MAC from its
 * software vDPA device onto a free hardware one (va_swap_promote(): the
 * same-slot swap), for a network with promote=true when a hardware slot
 * frees; it prints "MAC promoted: NOTE" (exit 0) or "MAC OUTCOME: NOTE"
 * (exit 3: still on software, or lost).
 *
 * --pending instead lists the running domains with a NIC still marked and
 * not tried, or a failover standby without its VF ("UUID NAME" per line,
 * at most PENDING_MAX): those whose swap back a stop or a crash of the
 * daemon cut short, or whose start it missed, for its next start. */
#define G_LOG_DOMAIN "vdpa-allocator-libvirt-swap"

#include "config.h"

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "va-error.h"
#include "va-domain.h"
#include "va-libvirt.h"
#include "va-precheck.h"
#include "va-swap.h"

#define PENDING_MAX 1024

/* SIGTERM (the daemon's bound) stops the helper between two NICs, never
 * between a NIC's unplug and its plug: a NIC is never left without a form */
static volatile sig_atomic_t stopping;

static void
on_term (int sig)
{
  stopping = 1;
}

/* Until the domain runs with no job: on the destination of a migration it
 * is paused (PAUSED_MIGRATION) under libvirt's incoming job until Finish
 * resumes it; after a restore libvirt resumes it at the end of its job. */
static gboolean
wait_ready (VaLibvirt *lv, double wait_s, GError **error)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) (wait_s * G_USEC_PER_SEC);
  int state = 0, reason = 0;

  for (;;)
    {
      virDomainJobInfo job = { 0 };

      if (virDomainGetState (lv->dom, &state, &reason, 0) < 0)
        {
          g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "reading the domain's state: %s", virGetLastErrorMessage ());
          return FALSE;
        }
      if (state == VIR_DOMAIN_SHUTOFF)
        {
          g_set_error_literal (error, VA_ERROR, VA_ERROR_FAILED, "the domain stopped (the incoming migration failed?)");
          return FALSE;
        }
      if (state == VIR_DOMAIN_RUNNING && virDomainGetJobInfo (lv->dom, &job) == 0 && job.type == VIR_DOMAIN_JOB_NONE)
        return TRUE;
      if (stopping)
        {
          /* the daemon's bound or its stop */
          g_set_error (error, VA_ERROR, VA_ERROR_BUSY, "stopped by SIGTERM before the domain ran without a job (state %d, reason %d)",
                       state, reason);
          return FALSE;
        }
      if (g_get_monotonic_time () > deadline)
        {
          g_set_error (error, VA_ERROR, VA_ERROR_BUSY, "the domain did not run without a job within %.0f s (state %d, reason %d)", wait_s,
                       state, reason);
          return FALSE;
        }
      g_usleep (100 * 1000);
    }
}

/* The MACs of @live's NICs marked for a swap back and not tried yet, and
 * of its failover standbys without their VF (@standbys: or not). */
static void
add_pending (VaDomain *live, GHashTable *only, gboolean standbys)
{
  GPtrArray *nics = va_domain_get_nics (live);

  for (guint i = 0; i < nics->len; i++)
    {
      const VaNic *nic = g_ptr_array_index (nics, i);

      /* a final outcome: tried before (a second started begin, a
       * reconnect); "busy" is tried again */
      if (va_nic_swap_back_pending (nic) || (standbys && nic->failover && !nic->vf))
        g_hash_table_add (only, g_strdup (nic->mac));
    }
}

static int
list_pending (const char *uri)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaLibvirt) lv = va_libvirt_open (uri, TRUE, &error);
  virDomainPtr *doms = NULL;
  int n, listed = 0;

  if (!lv)
    {
      fprintf (stderr, "%s\n", error->message);
      return 1;
    }
  n = virConnectListAllDomains (lv->conn, &doms, VIR_CONNECT_LIST_DOMAINS_ACTIVE);
  if (n < 0)
    {
      fprintf (stderr, "listing the running domains: %s\n", virGetLastErrorMessage ());
      return 1;
    }
  for (int i = 0; i < n; i++)
    {
      g_autofree char *xml = virDomainGetXMLDesc (doms[i], 0);
      g_autoptr (VaDomain) live = NULL;
      g_autoptr (GHashTable) only = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
      char uuid[VIR_UUID_STRING_BUFLEN];

      /* cheap before the parse: most domains have no mark and no
       * failover standby */
      if (xml && (strstr (xml, "swap-back") || strstr (xml, "<teaming")) && (live = va_domain_parse (xml, -1, NULL)))
        add_pending (live, only, TRUE);
      /* a NIC a swap lost (no <interface>: the parse refuses the domain) */
      if (xml && strstr (xml, "swap-back-outcome") && g_hash_table_size (only) == 0)
        {
          g_autofree char *meta = virDomainGetMetadata (doms[i], VIR_DOMAIN_METADATA_ELEMENT, VA_XML_NS, VIR_DOMAIN_AFFECT_LIVE);
          g_auto (GStrv) lost = meta ? va_metadata_lost_macs (meta, NULL) : NULL;

          for (guint k = 0; lost && lost[k]; k++)
            g_hash_table_add (only, g_strdup (lost[k]));
        }
      if (g_hash_table_size (only) > 0 && listed < PENDING_MAX && virDomainGetUUIDString (doms[i], uuid) == 0)
        {
          printf ("%s %s\n", uuid, virDomainGetName (doms[i]));
          listed++;
        }
      virDomainFree (doms[i]);
    }
  free (doms);
  return fflush (stdout) == 0 ? 0 : 1;
}

int
main (int argc, char **argv)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaLibvirt) lv = NULL;
  g_autoptr (VaDomain) live = NULL;
  g_autoptr (GHashTable) only = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr (GHashTable) replugged = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr (GPtrArray) report = g_ptr_array_new_with_free_func ((GDestroyNotify) va_swap_nic_free);
  g_autoptr (GOptionContext) ctx = g_option_context_new ("UUID - swap a domain's marked NICs back to their accelerated form");
  g_autofree char *uri = NULL;
  double wait_s = 300;
  gboolean pending = FALSE;
  g_autofree char *promote = NULL;
  const GOptionEntry entries[] = {
    { "pending", 0, 0, G_OPTION_ARG_NONE, &pending, "List the running domains whose marked NICs were not tried", NULL },
    { "promote", 0, 0, G_OPTION_ARG_STRING, &promote, "Move the NIC MAC from its software vDPA device onto a hardware one", "MAC" },
    { "uri", 0, 0, G_OPTION_ARG_STRING, &uri, "libvirt's URI (default: $VDPA_ALLOCATOR_LIBVIRT_URI, else qemu:///system)", "URI" },
    { "wait", 0, 0, G_OPTION_ARG_DOUBLE, &wait_s, "Wait at most S seconds for the domain to run with no job", "S" },
    { NULL },
  };
  int rc = 0;

  {
    struct sigaction sa = { .sa_handler = on_term };

    sigemptyset (&sa.sa_mask);
    sigaction (SIGTERM, &sa, NULL);
  }
  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!g_option_context_parse (ctx, &argc, &argv, &error) || argc != (pending ? 1 : 2) || wait_s <= 0)
    {
      fprintf (stderr, "usage: %s [--uri URI] [--wait S] [--promote MAC] UUID | [--uri URI] --pending%s%s\n", g_get_prgname (),
               error ? ": " : "", error ? error->message : "");
      return 2;
    }
  if (pending)
    return list_pending (uri);
  if (promote)
    {
      char mac[VA_MAC_STRING_LEN];
      VaSwapNic *n;

      if (!va_mac_normalize (promote, mac))
        {
          fprintf (stderr, "--promote: '%s' is no MAC address\n", promote);
          return 2;
        }
      if (!(lv = va_libvirt_open (uri, FALSE, &error)) || !va_libvirt_lookup (lv, argv[1], &error) || !wait_ready (lv, wait_s, &error)
          || !va_swap_promote (lv, report, mac, &error))
        {
          fprintf (stderr, "%s\n", error->message);
          return 1;
        }
      n = report->len ? g_ptr_array_index (report, 0) : NULL;
      for (guint i = 0; i < report->len; i++)
        if (strcmp (((VaSwapNic *) g_ptr_array_index (report, i))->mac, mac) == 0)
          n = g_ptr_array_index (report, i);
      if (!n || n->outcome)
        {
          printf ("%s %s: %s\n", mac, n ? n->outcome : "refused", n && n->note ? n->note : "no reason given");
          return fflush (stdout) == 0 ? 3 : 1;
        }
      printf ("%s promoted (%.1f s without it): %s\n", mac, n->offline_s, n->note ? n->note : "");
      return fflush (stdout) == 0 ? 0 : 1;
    }
  /* a NIC a swap lost is plugged back first, and marked for the swap back */
  if (!(lv = va_libvirt_open (uri, FALSE, &error)) || !va_libvirt_lookup (lv, argv[1], &error) || !wait_ready (lv, wait_s, &error)
      || !va_swap_replug_lost (lv, replugged, &error) || !(live = va_swap_live_domain (lv, &error)))
    {
      fprintf (stderr, "%s\n", error->message);
      return 1;
    }
  add_pending (live, only, TRUE);
  if (g_hash_table_size (only) == 0)
    return 0;
  {
    /* one NIC at a time, so that a SIGTERM takes effect between two */
    GHashTableIter iter;
    gpointer mac;

    g_hash_table_iter_init (&iter, only);
    while (g_hash_table_iter_next (&iter, &mac, NULL))
      {
        g_autoptr (GHashTable) one = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);

        /* the NICs not reached stay marked without an outcome: the
         * daemon's next start, or the domain's next move, tries them */
        if (stopping)
          break;
        g_hash_table_add (one, g_strdup (mac));
        if (!va_swap_to_accelerated (lv, report, one, &error))
          {
            fprintf (stderr, "%s\n", error->message);
            return 1;
          }
      }
  }
  for (guint i = 0; i < report->len; i++)
    {
      VaSwapNic *n = g_ptr_array_index (report, i);
      g_autoptr (GError) mark_error = NULL;
      const char *outcome = n->outcome ? n->outcome : "refused";

      if (!g_hash_table_contains (only, n->mac))
        continue;
      if (n->after == VA_FORM_ACCELERATED && n->failover && !n->vf)
        {
          /* the standby is the accelerated form: nothing to mark */
          rc = 3;
          printf ("%s standby %s: %s\n", n->mac, outcome, n->note ? n->note : "no reason given");
          continue;
        }
      if (n->after == VA_FORM_ACCELERATED)
        {
          if (n->vf)
            printf ("%s accelerated on VF %s\n", n->mac, n->vf);
          else
            printf ("%s accelerated\n", n->mac);
          continue;
        }
      rc = 3;
      if (!va_swap_set_marker (lv, n->mac, TRUE, outcome, &mark_error))
        va_swap_note (n, "swap-back-outcome not written (%s)", mark_error->message);
      printf ("%s portable %s: %s\n", n->mac, outcome, n->note ? n->note : "no reason given");
    }
  return fflush (stdout) == 0 ? rc : 1;
}
