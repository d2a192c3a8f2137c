/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "va-enum"

#include "va-enum.h"

const char *
va_enum_to_string (const char *const *names, guint n, int value)
{
  g_return_val_if_fail (names != NULL, NULL);

  if (value < 0 || (guint) value >= n)
    return NULL;
  return names[value];
}

int
va_enum_from_string (const char *const *names, guint n, const char *str)
{
  g_return_val_if_fail (names != NULL, -1);

  /* NULL is a string in no table, as an absent attribute is */
  if (!str)
    return -1;
  for (guint i = 0; i < n; i++)
    if (names[i] && g_str_equal (str, names[i]))
      return (int) i;
  return -1;
}
