/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vdpactl domain migrate|save|managedsave|restore and accelerate|portable
 * --live: a running domain's accelerated NICs swapped for their portable
 * form (virtio, same MAC, VLAN and PCI slot) while QEMU cannot move or save
 * a vhost-vdpa netdev, and back (the swap itself: libvirt-client/va-swap.c).
 * libvirt through its client API only; the daemon of this host through its
 * bus. A destination's daemon is out of reach: it swaps the NICs marked
 * swap-back="accelerated" back itself (vdpa-allocator-libvirt-swap), and
 * migrate watches the result through the destination's libvirt. */
#define G_LOG_DOMAIN "va-ctl-migrate"

#include "config.h"

#include "va-ctl-private.h"
#include "va-ctl-migrate.h"

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <string.h>
#include <unistd.h>

#include "va-client.h"
#include "va-config.h"
#include "va-domain.h"
#include "va-error.h"
#include "va-libvirt.h"
#include "va-swap.h"
#include "va-paths.h"

typedef struct
{
  const char *operation;
  char *destination;
  GPtrArray *nics; /* VaSwapNic* */
  GStrv blockers;  /* NULL: not known */
  gboolean done;
  /* done, but NICs it was to change are left as they were: each NIC's
   * form_after and note say which (exit status 5) */
  guint left;
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

/* Progress lines for an operator at a terminal: not with -j, not into a
 * pipe or a file (va_swap_progress()). */
static void
progress_on (gboolean json)
{
  if (!json && isatty (STDERR_FILENO))
    va_swap_set_progress ("vdpactl: ");
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
  int rc = !r->done ? VA_CTL_EXIT_FAILED : r->left ? VA_CTL_EXIT_PARTIAL : VA_CTL_EXIT_OK;
  const char *name = virDomainGetName (lv->dom);
  guint lost = 0;

  /* a NIC the guest lost is a failure, whatever else was done */
  for (guint i = 0; i < r->nics->len; i++)
    if (((VaSwapNic *) g_ptr_array_index (r->nics, i))->lost)
      lost++;
  if (lost)
    rc = VA_CTL_EXIT_FAILED;

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
      json_builder_add_boolean_value (b, r->done && !r->left && !lost);
      json_builder_set_member_name (b, "partial");
      json_builder_add_boolean_value (b, r->done && r->left && !lost);
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
          VaSwapNic *n = g_ptr_array_index (r->nics, i);
          GVariantBuilder j;

          g_variant_builder_init (&j, G_VARIANT_TYPE_VARDICT);
          g_variant_builder_add (&j, "{sv}", "mac", g_variant_new_string (n->mac));
          g_variant_builder_add (&j, "{sv}", "network", g_variant_new_string (n->network ? n->network : ""));
          g_variant_builder_add (&j, "{sv}", "path", g_variant_new_string (va_swap_path_name (n->path)));
          g_variant_builder_add (&j, "{sv}", "form_before", g_variant_new_string (va_form_to_string (n->before)));
          g_variant_builder_add (&j, "{sv}", "form_after", g_variant_new_string (va_form_to_string (n->after)));
          g_variant_builder_add (&j, "{sv}", "unplug_ms", maybe_ms (n->unplug_s));
          g_variant_builder_add (&j, "{sv}", "plug_ms", maybe_ms (n->plug_s));
          g_variant_builder_add (&j, "{sv}", "offline_ms", maybe_ms (n->offline_s));
          g_variant_builder_add (&j, "{sv}", "note", g_variant_new_string (n->note ? n->note : ""));
          g_variant_builder_add (&j, "{sv}", "lost", g_variant_new_boolean (n->lost));
          g_variant_builder_add (&j, "{sv}", "destination_form",
                                 g_variant_new_string (n->dest_known ? va_form_to_string (n->dest_form) : ""));
          g_variant_builder_add (&j, "{sv}", "unaccelerated_ms", maybe_ms (n->dest_known ? n->unaccelerated_s : -1));
          g_variant_builder_add (&j, "{sv}", "destination_note", g_variant_new_string (n->dest_note ? n->dest_note : ""));
          g_variant_builder_add (&j, "{sv}", "failover", g_variant_new_boolean (n->failover));
          g_variant_builder_add (&j, "{sv}", "failover_vf", g_variant_new_string (n->vf ? n->vf : ""));
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
          VaSwapNic *n = g_ptr_array_index (r->nics, i);

          g_print ("NIC %s (%s): path %s, %s", n->mac, n->network ? n->network : "inline intent", va_swap_path_name (n->path),
                   va_form_to_string (n->before));
          if (n->after != n->before)
            g_print (" -> %s", va_form_to_string (n->after));
          if (n->failover && n->after == VA_FORM_ACCELERATED)
            g_print (n->vf ? " (failover standby and VF %s)" : " (failover standby alone, no VF)", n->vf);
          if (n->offline_s >= 0 && n->plug_s >= 0)
            g_print ("; unplug %.2f s, plug %.2f s, %.2f s without the NIC", n->unplug_s, n->plug_s, n->offline_s);
          else if (n->offline_s >= 0)
            g_print ("; unplug %.2f s, plug refused, %.2f s without the NIC", n->unplug_s, n->offline_s);
          if (n->note)
            g_print ("; %s", n->note);
          if (n->dest_note)
            g_print ("; %s", n->dest_note);
          g_print ("\n");
        }
      if (r->done && !r->left && !lost)
        {
          g_print ("domain %s: %s done", name, r->operation);
          if (r->destination)
            g_print (" (to %s)", r->destination);
          if (r->downtime_ms >= 0)
            g_print ("; migration downtime %" G_GINT64_FORMAT " ms", r->downtime_ms);
          g_print ("\n");
        }
    }
  for (guint i = 0; i < r->nics->len; i++)
    {
      VaSwapNic *n = g_ptr_array_index (r->nics, i);

      if (n->lost)
        g_printerr ("vdpactl: domain %s: NIC %s is lost: the guest runs without it (%s); %s\n", name, n->mac,
                    n->lost_marked ? "marked so in its live metadata" : "not marked: libvirt did not answer",
                    n->lost_marked ? "'vdpactl domain accelerate --live' plugs it back from the persistent definition, as do libvirtd's "
                                     "next reconnect and the daemon's next start"
                                   : "once libvirt answers, plug it back with 'virsh attach-device --live' from the persistent "
                                     "definition's <interface>");
    }
  if (r->error)
    g_printerr ("vdpactl: %s\n", r->error);
  else if (lost)
    ;
  else if (r->done && r->left)
    g_printerr ("vdpactl: domain %s: %s done in part: %u of its NICs %s as %s (the report says why)\n", name, r->operation, r->left,
                r->left == 1 ? "stays" : "stay",
                r->operation[0] == 'p' ? "accelerated" : "portable, or on its failover standby without a VF");
  return rc;
}

/* ---- migrate ----------------------------------------------------------- */

/* The path each accelerated NIC takes, said before anything is tried. */
static void
mark_swaps (Report *r)
{
  for (guint i = 0; i < r->nics->len; i++)
    {
      VaSwapNic *n = g_ptr_array_index (r->nics, i);
      if (n->before == VA_FORM_ACCELERATED)
        n->path = VA_SWAP_PATH_SWAP;
    }
}

/* Readies the domain's NICs for a move (migrate, save; @what names it in
 * an error): QEMU's blockers decide, or --swap (@swap_always), and
 * blockers QEMU does not tell mean the swap. With none, libvirt moves
 * every NIC as it is (path native); else each accelerated NIC is swapped
 * to its portable form first. Each NIC's path is set in r->nics before
 * anything is tried. FALSE: r->error says why, and what was swapped is
 * rolled back. */
static gboolean
prepare_move (VaLibvirt *lv, Report *r, gboolean swap_always, const char *what)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GError) qmp_error = NULL;
  g_autoptr (VaDomain) d = va_swap_live_domain (lv, &error);
  GPtrArray *nics;

  if (!d)
    {
      r->error = g_strdup (error->message);
      return FALSE;
    }
  nics = va_domain_get_nics (d);
  for (guint i = 0; i < nics->len; i++)
    va_swap_nic (r->nics, g_ptr_array_index (nics, i));
  r->blockers = migration_blockers (lv, &qmp_error);
  if (!r->blockers)
    g_debug ("no blockers known: %s", qmp_error->message);
  if (r->blockers && !r->blockers[0] && !swap_always)
    {
      for (guint i = 0; i < r->nics->len; i++)
        {
          VaSwapNic *n = g_ptr_array_index (r->nics, i);
          if (n->before == VA_FORM_ACCELERATED)
            n->path = VA_SWAP_PATH_NATIVE;
        }
      return TRUE;
    }
  mark_swaps (r);
  if (!va_swap_to_portable (lv, r->nics, TRUE, &error))
    {
      r->error = g_strdup_printf ("before the %s: %s", what, error->message);
      va_swap_roll_back (lv, r->nics);
      return FALSE;
    }
  return TRUE;
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
      /* every 2 s: libvirt's job percentage, for the progress line */
      gint64 tick = g_get_monotonic_time () + 2 * G_USEC_PER_SEC;
      gboolean by_deadline = timeout > 0 && !aborted && deadline <= tick;

      if (g_cond_wait_until (&job.cond, &job.lock, by_deadline ? deadline : tick) || job.finished)
        continue;
      g_mutex_unlock (&job.lock);
      if (by_deadline)
        {
          virDomainAbortJob (lv->dom);
          aborted = TRUE;
        }
      else
        {
          virDomainJobInfo info;

          if (virDomainGetJobInfo (lv->dom, &info) == 0 && info.dataTotal > 0)
            va_swap_progress ("migrating to %s: %.0f%% of the memory sent", uri,
                              100.0 * (double) info.dataProcessed / (double) info.dataTotal);
        }
      g_mutex_lock (&job.lock);
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

/* After the migration: B's own daemon swaps each marked NIC back (the
 * hook's started begin asks it). Polls B's live XML until no NIC waits for
 * that any more (accelerated, or swap-back-outcome written) or @timeout_s
 * passed, and notes for each such NIC its form there and how long it was
 * without acceleration: from its unplug here, or for a NIC portable
 * already, from @since (the migration's end). */
static void
watch_swap_back (VaLibvirt *dest, Report *r, int timeout_s, gint64 since)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_s * G_USEC_PER_SEC;

  for (;;)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (VaDomain) d = va_swap_live_domain (dest, &error);
      gint64 now = g_get_monotonic_time ();
      gboolean last = now >= deadline;
      guint pending = 0;
      GPtrArray *nics;

      /* a NIC between its unplug and its plug there is in the metadata
       * only: the swap back is under way */
      if (!d && !last && g_error_matches (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT))
        {
          g_usleep (200 * 1000);
          continue;
        }
      if (!d)
        {
          for (guint i = 0; i < r->nics->len; i++)
            {
              VaSwapNic *n = g_ptr_array_index (r->nics, i);
              if (n->path == VA_SWAP_PATH_SWAP && !n->dest_note)
                n->dest_note = g_strdup_printf ("its form on the destination is not known: %s", error->message);
            }
          return;
        }
      nics = va_domain_get_nics (d);
      for (guint i = 0; i < nics->len; i++)
        {
          const VaNic *nic = g_ptr_array_index (nics, i);
          VaSwapNic *n = va_swap_nic (r->nics, nic);
          gint64 start = n->unplug_at ? n->unplug_at : since;

          if (n->dest_note || !(nic->swap_back || (n->path == VA_SWAP_PATH_SWAP && n->after == VA_FORM_PORTABLE)))
            continue;
          n->dest_known = TRUE;
          n->dest_form = nic->form;
          n->unaccelerated_s = (now - start) / (double) G_USEC_PER_SEC;
          n->settled = nic->form == VA_FORM_ACCELERATED || nic->swap_back_outcome;
          if (nic->form == VA_FORM_ACCELERATED)
            n->dest_note = g_strdup_printf ("accelerated again on the destination, %.2f s without acceleration", n->unaccelerated_s);
          else if (g_strcmp0 (nic->swap_back_outcome, "busy") == 0)
            n->dest_note = g_strdup ("stays portable on its VLAN on the destination for now: its daemon was busy for the whole budget; "
                                     "it tries again at its next start, or 'vdpactl domain accelerate --live' there does it by hand");
          else if (g_strcmp0 (nic->swap_back_outcome, "no-room") == 0)
            n->dest_note = g_strdup ("stays portable on its VLAN on the destination: no room in its pool there");
          else if (nic->swap_back_outcome)
            n->dest_note = g_strdup ("stays portable on its VLAN on the destination: the swap back there failed (its daemon's journal "
                                     "says why)");
          else if (last)
            n->dest_note = g_strdup_printf ("still portable on its VLAN on the destination after %d s (its daemon may still swap it "
                                            "back; 'vdpactl domain accelerate --live' there does it by hand)",
                                            timeout_s);
          else
            pending++;
        }
      if (pending == 0)
        return;
      g_usleep (200 * 1000);
    }
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
  int timeout = 0, swap_back_timeout = 30;
  const GOptionEntry entries[] = {
    { "live", 'l', 0, G_OPTION_ARG_NONE, &live, "Migrate while the guest runs (else it is paused meanwhile)", NULL },
    { "persistent", 'p', 0, G_OPTION_ARG_NONE, &persistent, "Define the domain on the destination", NULL },
    { "undefine-source", 'u', 0, G_OPTION_ARG_NONE, &undefine, "Undefine it on this host afterwards", NULL },
    { "timeout", 't', 0, G_OPTION_ARG_INT, &timeout, "Abort the migration if it has not completed after S seconds", "S" },
    { "swap", 's', 0, G_OPTION_ARG_NONE, &swap_always, "Swap accelerated NICs to portable even if QEMU reports no blocker", NULL },
    { "swap-back-timeout", 'b', 0, G_OPTION_ARG_INT, &swap_back_timeout,
      "Wait at most S seconds (default 30) for the destination to swap the NICs back", "S" },
    { NULL },
  };
  Report r = { .operation = "migrate", .downtime_ms = -1 };
  unsigned int flags = VIR_MIGRATE_PEER2PEER;
  int rc;

  if ((rc = va_ctl_parse (&argc, &argv, "DOMAIN DEST-URI - migrate a domain, swapping its accelerated NICs while QEMU cannot move them",
                          "Reads QEMU's migration blockers; with none, libvirt migrates every NIC as it is. Else each\n"
                          "accelerated NIC is swapped to its portable form (same MAC, VLAN and PCI slot) and its lease\n"
                          "released before libvirt migrates the domain peer to peer to DEST-URI (a libvirt URI as the\n"
                          "source's libvirtd reaches it). Each swapped NIC is marked swap-back=\"accelerated\": the\n"
                          "destination's daemon swaps it back where its pool has room (its hook asks it), and this\n"
                          "command watches that through DEST-URI for --swap-back-timeout seconds. A failure leaves\n"
                          "the domain here, its NICs accelerated again where they can be.",
                          entries, &json, 2, 2)))
    return rc;
  if (timeout < 0)
    return va_ctl_usage ("--timeout must be 0 or more seconds");
  if (swap_back_timeout < 0 || swap_back_timeout > 3600)
    return va_ctl_usage ("--swap-back-timeout must be 0 to 3600 seconds");
  if (!(lv = va_libvirt_open (uri, FALSE, &error)) || !va_libvirt_lookup (lv, argv[1], &error))
    return va_ctl_fail (error);
  if (virDomainIsActive (lv->dom) != 1)
    return va_ctl_fail_msg ("the domain is not running");
  progress_on (json);
  if (live)
    flags |= VIR_MIGRATE_LIVE;
  if (persistent)
    flags |= VIR_MIGRATE_PERSIST_DEST;
  if (undefine)
    flags |= VIR_MIGRATE_UNDEFINE_SOURCE;
  r.destination = g_strdup (argv[2]);
  r.nics = g_ptr_array_new_with_free_func ((GDestroyNotify) va_swap_nic_free);
  if (!prepare_move (lv, &r, swap_always, "migration"))
    goto out;

  va_swap_progress ("migrating to %s", argv[2]);
  if (!migrate_with_timeout (lv, argv[2], flags, timeout, &error))
    {
      r.error = g_strdup (error->message);
      va_swap_roll_back (lv, r.nics);
      goto out;
    }
  r.done = TRUE;
  {
    /* the destination's view: its completed job has the downtime, its
     * live XML the form each NIC ended in */
    g_autoptr (GError) dest_error = NULL;
    g_autoptr (VaLibvirt) dest = va_libvirt_open (argv[2], TRUE, &dest_error);
    char uuid[VIR_UUID_STRING_BUFLEN];
    gint64 since = g_get_monotonic_time ();

    virDomainGetUUIDString (lv->dom, uuid);
    if (dest && va_libvirt_lookup (dest, uuid, &dest_error))
      {
        r.downtime_ms = completed_downtime (dest->dom);
        watch_swap_back (dest, &r, swap_back_timeout, since);
      }
    else
      for (guint i = 0; i < r.nics->len; i++)
        {
          VaSwapNic *n = g_ptr_array_index (r.nics, i);
          if (n->path == VA_SWAP_PATH_SWAP && n->after == VA_FORM_PORTABLE)
            n->dest_note = g_strdup_printf ("its form on the destination is not known: %s", dest_error->message);
        }
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
  gboolean json = FALSE, swap_always = FALSE;
  const GOptionEntry entries[] = {
    { "swap", 's', 0, G_OPTION_ARG_NONE, &swap_always, "Swap accelerated NICs to portable even if QEMU reports no blocker", NULL },
    { NULL },
  };
  Report r = { .operation = managed ? "managedsave" : "save", .downtime_ms = -1 };
  int rc, ok;

  if ((rc = va_ctl_parse (&argc, &argv,
                          managed ? "DOMAIN - managed save of a domain, swapping its accelerated NICs while QEMU cannot save them"
                                  : "DOMAIN FILE - save a domain to FILE, swapping its accelerated NICs while QEMU cannot save them",
                          managed ? "Reads QEMU's migration blockers; with none, libvirt's managed save keeps every NIC as it\n"
                                    "is. Else each accelerated NIC goes portable (same MAC, VLAN and PCI slot) and its lease is\n"
                                    "released first. 'vdpactl domain restore --managed DOMAIN' starts it again and swaps its\n"
                                    "NICs back."
                                  : "Reads QEMU's migration blockers; with none, libvirt saves the domain with every NIC as it\n"
                                    "is. Else each accelerated NIC goes portable (same MAC, VLAN and PCI slot) and its lease is\n"
                                    "released first. 'vdpactl domain restore FILE' restores it and swaps its NICs back.",
                          entries, &json, managed ? 1 : 2, managed ? 1 : 2)))
    return rc;
  if (!(lv = va_libvirt_open (uri, FALSE, &error)) || !va_libvirt_lookup (lv, argv[1], &error))
    return va_ctl_fail (error);
  if (virDomainIsActive (lv->dom) != 1)
    return va_ctl_fail_msg ("the domain is not running");
  progress_on (json);
  r.nics = g_ptr_array_new_with_free_func ((GDestroyNotify) va_swap_nic_free);
  if (!prepare_move (lv, &r, swap_always, "save"))
    goto out;
  va_swap_progress ("saving the domain%s%s", managed ? " (managed save)" : " to ", managed ? "" : argv[2]);
  ok = managed ? virDomainManagedSave (lv->dom, 0) : virDomainSaveFlags (lv->dom, argv[2], NULL, 0);
  if (ok == 0)
    va_swap_progress ("saved");
  if (ok < 0)
    {
      r.error = g_strdup_printf ("libvirt: the save failed: %s", virGetLastErrorMessage ());
      va_swap_roll_back (lv, r.nics);
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
  int swap_back_timeout = 30;
  const GOptionEntry entries[] = {
    { "managed", 'm', 0, G_OPTION_ARG_NONE, &managed, "The argument is a domain with a managed save image", NULL },
    { "swap-back-timeout", 'b', 0, G_OPTION_ARG_INT, &swap_back_timeout,
      "Wait at most S seconds (default 30) for the daemon's own swap back of NICs saved portable", "S" },
    { NULL },
  };
  Report r = { .operation = "restore", .downtime_ms = -1 };
  int rc;

  if ((rc = va_ctl_parse (&argc, &argv, "FILE|--managed DOMAIN - restore a saved domain, then swap its NICs back",
                          "Restores the domain from FILE (or starts DOMAIN from its managed save image), then swaps each\n"
                          "portable NIC whose pool has room on this host to the accelerated form, with a fresh lease.\n"
                          "NICs 'vdpactl domain save' marked swap-back=\"accelerated\" the daemon swaps back itself (the\n"
                          "hook asks it): this waits for that, at most --swap-back-timeout seconds, and swaps the others.",
                          entries, &json, 1, 1)))
    return rc;
  if (swap_back_timeout < 0 || swap_back_timeout > 3600)
    return va_ctl_usage ("--swap-back-timeout must be 0 to 3600 seconds");
  if (!(lv = va_libvirt_open (uri, FALSE, &error)))
    return va_ctl_fail (error);
  progress_on (json);
  va_swap_progress ("restoring %s", argv[1]);
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
  r.nics = g_ptr_array_new_with_free_func ((GDestroyNotify) va_swap_nic_free);
  va_swap_progress ("restored; waiting at most %d s for the daemon's swap back of the NICs a swap marked", swap_back_timeout);
  watch_swap_back (lv, &r, swap_back_timeout, g_get_monotonic_time ());
  {
    /* Only the NICs a swap marked (save, migrate) go back, and the
     * daemon's helper swaps them (the hook asks it): two swaps of one NIC
     * at once would share its lease (the lab tier saw that). A portable
     * NIC without the marker is portable by the operator's choice and
     * stays so. Here the destination is this host: what the daemon
     * swapped back is this restore's swap. */
    g_autoptr (VaDomain) d = va_swap_live_domain (lv, &error);
    GPtrArray *nics = d ? va_domain_get_nics (d) : NULL;

    if (!d)
      {
        r.error = g_strdup_printf ("restored, but %s", error->message);
        goto out;
      }
    for (guint i = 0; i < nics->len; i++)
      {
        const VaNic *nic = g_ptr_array_index (nics, i);
        VaSwapNic *n = va_swap_nic (r.nics, nic);

        if (n->dest_known && n->dest_form == VA_FORM_ACCELERATED)
          {
            n->path = VA_SWAP_PATH_SWAP;
            n->after = VA_FORM_ACCELERATED;
          }
        /* saved as it was (vdpactl save's native path, or virsh save)
         * and leased again by the restore's hook */
        else if (nic->form == VA_FORM_ACCELERATED)
          n->path = VA_SWAP_PATH_NATIVE;
        else if (nic->form == VA_FORM_PORTABLE && nic->swap_back)
          {
            r.left++;
            if (!n->settled && !n->dest_note)
              va_swap_note (n, "left to the daemon's swap back, unfinished after --swap-back-timeout %d s", swap_back_timeout);
          }
        else if (nic->form == VA_FORM_PORTABLE)
          va_swap_note (n, "portable, and not marked by a swap: left as it is ('vdpactl domain accelerate --live' swaps it)");
      }
  }
  r.done = TRUE;
out:
  rc = report_print (lv, &r, json);
  report_clear (&r);
  return rc;
}

/* ---- accelerate|portable --live ---------------------------------------- */

/* The MACs of the domain's NICs whose lease is on a software device, or
 * NULL when the daemon does not say. */
static char **
software_macs (VaLibvirt *lv)
{
  g_autoptr (GVariant) leases = va_client_list_leases (va_client_get_default (), NULL);
  g_autoptr (GPtrArray) out = g_ptr_array_new_with_free_func (g_free);
  char uuid[VIR_UUID_STRING_BUFLEN];
  GVariantIter iter;
  GVariant *lease;

  if (!leases || virDomainGetUUIDString (lv->dom, uuid) < 0)
    return NULL;
  g_variant_iter_init (&iter, leases);
  while ((lease = g_variant_iter_next_value (&iter)))
    {
      const char *u = "", *m = "", *f = "";

      g_variant_lookup (lease, "uuid", "&s", &u);
      g_variant_lookup (lease, "mac", "&s", &m);
      g_variant_lookup (lease, "form", "&s", &f);
      if (g_ascii_strcasecmp (u, uuid) == 0 && strcmp (f, "software") == 0)
        g_ptr_array_add (out, g_strdup (m));
      g_variant_unref (lease);
    }
  g_ptr_array_add (out, NULL);
  return (char **) g_ptr_array_free (g_steal_pointer (&out), FALSE);
}

int
va_ctl_domain_swap_live (VaLibvirt *lv, VaForm form, gboolean json)
{
  g_autoptr (GError) error = NULL;
  Report r = { .operation = form == VA_FORM_ACCELERATED ? "accelerate" : "portable", .downtime_ms = -1 };
  gboolean ok;
  int rc;

  g_autoptr (GHashTable) replugged = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);

  if (virDomainIsActive (lv->dom) != 1)
    return va_ctl_fail_msg ("the domain is not running: --live swaps a running domain's NICs");
  /* a NIC an earlier swap lost has no <interface>, so the live domain
   * parses only once it is plugged back */
  if (form == VA_FORM_ACCELERATED && !va_swap_replug_lost (lv, replugged, &error))
    return va_ctl_fail (error);
  {
    g_autoptr (VaDomain) d = va_swap_live_domain (lv, &error);

    if (!d)
      return va_ctl_fail (error);
    if (va_domain_get_nics (d)->len == 0)
      {
        g_autofree char *msg = g_strdup_printf ("domain %s marks no NIC in its vdpa:nics metadata: there is nothing to swap (see "
                                                "vdpactl(8), DESCRIPTION)",
                                                virDomainGetName (lv->dom));
        return va_ctl_fail_msg (msg);
      }
  }
  progress_on (json);
  r.nics = g_ptr_array_new_with_free_func ((GDestroyNotify) va_swap_nic_free);
  ok = form == VA_FORM_ACCELERATED ? va_swap_to_accelerated (lv, r.nics, NULL, &error) : va_swap_to_portable (lv, r.nics, FALSE, &error);
  /* a NIC on a software device goes onto hardware where its pool has a
   * free slot (issue 28: promotion) */
  if (ok && form == VA_FORM_ACCELERATED)
    {
      g_auto (GStrv) software = software_macs (lv);

      for (guint i = 0; ok && software && software[i]; i++)
        ok = va_swap_promote (lv, r.nics, software[i], &error);
    }
  if (!ok)
    {
      r.error = g_strdup (error->message);
      if (form == VA_FORM_PORTABLE)
        va_swap_roll_back (lv, r.nics);
    }
  else
    r.done = TRUE;
  for (guint i = 0; i < r.nics->len; i++)
    {
      VaSwapNic *n = g_ptr_array_index (r.nics, i);

      if (g_hash_table_contains (replugged, n->mac))
        va_swap_note (n, "plugged back in its portable form first (lost in an earlier swap)");
    }
  for (guint i = 0; r.done && i < r.nics->len; i++)
    {
      /* a NIC the swap was for that stays as it was; a NIC of mode
       * virtio is not one */
      VaSwapNic *n = g_ptr_array_index (r.nics, i);
      /* a failover standby without its VF is not accelerated either */
      if ((n->after != form || (n->failover && !n->vf && form == VA_FORM_ACCELERATED)) && n->outcome)
        r.left++;
    }
  rc = report_print (lv, &r, json);
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
