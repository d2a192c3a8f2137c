/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "va-events"

#include "config.h"

#include "va-events.h"

#include <stdarg.h>

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
      if (lease->network && *lease->network)
        ADD ("VA_NETWORK", lease->network);
    }
  for (guint i = 0; fields && fields[i] && fields[i + 1] && n < MAX_FIELDS; i += 2)
    ADD (fields[i], fields[i + 1]);
#undef ADD
  g_log_structured_array (level, f, n);
}
