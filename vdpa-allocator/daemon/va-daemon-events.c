/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "va-events"

#include "config.h"

#include "va-daemon-events.h"

#include <stdarg.h>
#include <string.h>

/* journald's priorities, as GLib maps its levels */
static const char *
priority (GLogLevelFlags level)
{
  if (level & G_LOG_LEVEL_ERROR)
    return "3";
  if (level & (G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING))
    return "4";
  if (level & G_LOG_LEVEL_MESSAGE)
    return "5";
  if (level & G_LOG_LEVEL_INFO)
    return "6";
  return "7";
}

#define MAX_FIELDS 24

char *
va_event_one_line (const char *text)
{
  char *t = g_strstrip (g_strdup (text ? text : ""));

  g_strdelimit (t, "\r\n", ';');
  return t;
}

void
va_event_full (const char *domain, GLogLevelFlags level, const char *message_id, const VaLease *lease, const char *const *fields,
               const char *fmt, ...)
{
  GLogField f[MAX_FIELDS];
  g_autofree char *message = NULL;
  char vlan[8];
  gsize n = 0;
  va_list ap;

  g_return_if_fail (message_id != NULL && fmt != NULL);

  va_start (ap, fmt);
  message = g_strdup_vprintf (fmt, ap);
  va_end (ap);

#define ADD(k, v)                                                                                                                          \
  do                                                                                                                                       \
    {                                                                                                                                      \
      f[n].key = (k);                                                                                                                      \
      f[n].value = (v);                                                                                                                    \
      f[n].length = -1;                                                                                                                    \
      n++;                                                                                                                                 \
    }                                                                                                                                      \
  while (0)

  ADD ("MESSAGE_ID", message_id);
  ADD ("PRIORITY", priority (level));
  ADD ("GLIB_DOMAIN", domain);
  ADD ("MESSAGE", message);
  if (lease)
    {
      g_snprintf (vlan, sizeof vlan, "%u", lease->vlan);
      ADD ("VA_POOL", lease->pool);
      ADD ("VA_DOMAIN_UUID", lease->uuid);
      if (lease->domain_name && *lease->domain_name)
        ADD ("VA_DOMAIN_NAME", lease->domain_name);
      ADD ("VA_MAC", lease->mac);
      ADD ("VA_VLAN", vlan);
      ADD ("VA_SLOT", lease->slot);
      ADD ("VA_FORM", VA_LEASE_FORM (lease));
      if (lease->network && *lease->network)
        ADD ("VA_NETWORK", lease->network);
    }
  for (guint i = 0; fields && fields[i] && fields[i + 1] && n < MAX_FIELDS; i += 2)
    ADD (fields[i], fields[i + 1]);
#undef ADD
  g_log_structured_array (level, f, n);
}

static void
on_pf_event (VaAllocator *alloc, const char *pool, const char *pf, const char *message, gpointer user_data)
{
  g_autoptr (GPtrArray) pfs = NULL;
  const VaPfStatus *st = NULL;
  const char *fields[] = { "VA_POOL", pool, "VA_PF", pf, NULL, NULL, NULL, NULL, NULL, NULL, NULL };

  if (!*pf)
    {
      /* no PF: discovery itself failed */
      g_warning ("%s", message);
      return;
    }
  pfs = va_allocator_list_pfs (alloc);
  for (guint i = 0; i < pfs->len && !st; i++)
    if (strcmp (((VaPfStatus *) g_ptr_array_index (pfs, i))->name, pf) == 0
        && strcmp (((VaPfStatus *) g_ptr_array_index (pfs, i))->pool, pool) == 0)
      st = g_ptr_array_index (pfs, i);
  if (st)
    {
      fields[4] = "VA_PCI";
      fields[5] = st->pci;
      fields[6] = "VA_HEALTHY";
      fields[7] = st->healthy ? "1" : "0";
      if (!st->healthy)
        {
          fields[8] = "VA_REASON";
          fields[9] = st->health_reason;
        }
    }
  va_event (st && !st->healthy ? G_LOG_LEVEL_WARNING : G_LOG_LEVEL_MESSAGE, VA_EVENT_PF_HEALTH, NULL, fields, "%s", message);
}

static void
on_pool_warning (VaAllocator *alloc, const char *pool, const char *warning, gpointer user_data)
{
  const char *fields[] = { "VA_POOL", pool, "VA_WARNING", warning, NULL };

  if (*warning)
    va_event (G_LOG_LEVEL_WARNING, VA_EVENT_POOL_WARNING, NULL, fields, "pool %s: %s", pool, warning);
  else
    va_event (G_LOG_LEVEL_MESSAGE, VA_EVENT_POOL_WARNING, NULL, fields, "pool %s has no warning now", pool);
}

static void
on_lease_added (VaAllocator *alloc, VaLease *lease, gpointer user_data)
{
  va_event (G_LOG_LEVEL_MESSAGE, VA_EVENT_ALLOCATE, lease, NULL, "allocated slot %s of pool %s to domain %s (%s) NIC %s, VLAN %u: %s%s",
            lease->slot, lease->pool, lease->uuid, *lease->domain_name ? lease->domain_name : "unnamed", lease->mac, lease->vlan,
            lease->chardev, lease->software ? " (a software device: the pool had no free hardware slot)" : "");
}

static void
on_lease_removed (VaAllocator *alloc, VaLease *lease, gpointer user_data)
{
  va_event (G_LOG_LEVEL_MESSAGE, VA_EVENT_RELEASE, lease, NULL, "released slot %s of pool %s from domain %s (%s) NIC %s", lease->slot,
            lease->pool, lease->uuid, *lease->domain_name ? lease->domain_name : "unnamed", lease->mac);
}

static void
on_lease_broken (VaAllocator *alloc, VaLease *lease, const char *reason, gpointer user_data)
{
  const char *fields[] = { "VA_REASON", reason, NULL };

  va_event (G_LOG_LEVEL_WARNING, VA_EVENT_LEASE_BROKEN, lease, fields, "lease of domain %s (%s) NIC %s on slot %s is broken: %s",
            lease->uuid, *lease->domain_name ? lease->domain_name : "unnamed", lease->mac, lease->slot, reason);
}

static void
on_lease_repaired (VaAllocator *alloc, VaLease *lease, gpointer user_data)
{
  g_message ("lease of domain %s (%s) NIC %s on slot %s is whole again: device %s, %s", lease->uuid,
             *lease->domain_name ? lease->domain_name : "unnamed", lease->mac, lease->slot, lease->device, lease->chardev);
}

static void
on_low_watermark (VaAllocator *alloc, const char *pool, guint free, gpointer user_data)
{
  char n[16];
  const char *fields[] = { "VA_POOL", pool, "VA_FREE", n, NULL };

  g_snprintf (n, sizeof n, "%u", free);
  va_event (G_LOG_LEVEL_WARNING, VA_EVENT_LOW_WATERMARK, NULL, fields, "pool %s is below its low watermark: %u slot(s) free", pool, free);
}

void
va_events_connect (VaAllocator *alloc)
{
  g_return_if_fail (VA_IS_ALLOCATOR (alloc));

  g_signal_connect (alloc, "pf-event", G_CALLBACK (on_pf_event), NULL);
  g_signal_connect (alloc, "pool-warning", G_CALLBACK (on_pool_warning), NULL);
  g_signal_connect (alloc, "lease-broken", G_CALLBACK (on_lease_broken), NULL);
  g_signal_connect (alloc, "lease-repaired", G_CALLBACK (on_lease_repaired), NULL);
  g_signal_connect (alloc, "lease-added", G_CALLBACK (on_lease_added), NULL);
  g_signal_connect (alloc, "lease-removed", G_CALLBACK (on_lease_removed), NULL);
  g_signal_connect (alloc, "low-watermark", G_CALLBACK (on_low_watermark), NULL);
}
