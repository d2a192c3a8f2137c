/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* One table per enum, read in both directions (libvirt's VIR_ENUM_IMPL):
 *
 *   VA_ENUM_DECL (va_mode, VaMode)            in the header
 *   VA_ENUM_IMPL (va_mode, VaMode, VA_MODE_LAST,
 *                 [VA_MODE_VDPA] = "vdpa", ...) in the source
 *
 * gives va_mode_to_string() (NULL for a value outside the table) and
 * va_mode_from_string() (FALSE for a string not in it). */
#define VA_ENUM_DECL(name, type)                                                                                                           \
  const char *name##_to_string (type value);                                                                                               \
  gboolean name##_from_string (const char *str, type *value);

#define VA_ENUM_IMPL(name, type, last, ...)                                                                                                \
  static const char *const name##_names[] = { __VA_ARGS__ };                                                                               \
  G_STATIC_ASSERT (G_N_ELEMENTS (name##_names) == (last));                                                                                 \
  const char *name##_to_string (type value)                                                                                                \
  {                                                                                                                                        \
    return va_enum_to_string (name##_names, G_N_ELEMENTS (name##_names), (int) value);                                                     \
  }                                                                                                                                        \
  gboolean name##_from_string (const char *str, type *value)                                                                               \
  {                                                                                                                                        \
    int i;                                                                                                                                 \
                                                                                                                                           \
    g_return_val_if_fail (value != NULL, FALSE);                                                                                           \
    i = va_enum_from_string (name##_names, G_N_ELEMENTS (name##_names), str);                                                              \
    if (i < 0)                                                                                                                             \
      return FALSE;                                                                                                                        \
    *value = (type) i;                                                                                                                     \
    return TRUE;                                                                                                                           \
  }

const char *va_enum_to_string (const char *const *names, guint n, int value);
int va_enum_from_string (const char *const *names, guint n, const char *str);

G_END_DECLS
