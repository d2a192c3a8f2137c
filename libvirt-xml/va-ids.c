/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "va-ids"

#include "va-ids.h"

#include <string.h>

#include "va-error.h"

gboolean
va_uuid_normalize (const char *uuid, char out[VA_UUID_STRING_LEN])
{
  static const guint dashes[] = { 8, 13, 18, 23 };
  char hex[33];
  guint n = 0;
  gsize len;

  g_return_val_if_fail (uuid != NULL, FALSE);
  g_return_val_if_fail (out != NULL, FALSE);

  len = strlen (uuid);

  /* As libvirt: 32 hex digits, either bare or in the 8-4-4-4-12 form. */
  if (len == 36)
    {
      for (guint i = 0; i < G_N_ELEMENTS (dashes); i++)
        if (uuid[dashes[i]] != '-')
          return FALSE;
    }
  else if (len != 32)
    return FALSE;
  for (const char *c = uuid; *c; c++)
    {
      if (*c == '-' && len == 36)
        continue;
      if (!g_ascii_isxdigit (*c) || n >= 32)
        return FALSE;
      hex[n++] = g_ascii_tolower (*c);
    }
  if (n != 32)
    return FALSE;
  hex[32] = '\0';
  g_snprintf (out, VA_UUID_STRING_LEN, "%.8s-%.4s-%.4s-%.4s-%.12s", hex, hex + 8, hex + 12, hex + 16, hex + 20);
  return TRUE;
}

gboolean
va_mac_normalize (const char *mac, char out[VA_MAC_STRING_LEN])
{
  guint8 first;

  g_return_val_if_fail (mac != NULL, FALSE);
  g_return_val_if_fail (out != NULL, FALSE);

  if (strlen (mac) != 17)
    return FALSE;
  for (guint i = 0; i < 17; i++)
    {
      if (i % 3 == 2)
        {
          if (mac[i] != ':')
            return FALSE;
          out[i] = ':';
        }
      else
        {
          if (!g_ascii_isxdigit (mac[i]))
            return FALSE;
          out[i] = g_ascii_tolower (mac[i]);
        }
    }
  out[17] = '\0';
  first = (g_ascii_xdigit_value (out[0]) << 4) | g_ascii_xdigit_value (out[1]);
  /* libvirt refuses multicast addresses; an all-zero one is no address */
  if ((first & 1) || strcmp (out, "00:00:00:00:00:00") == 0)
    return FALSE;
  return TRUE;
}

gboolean
va_uuid_check (const char *uuid, char out[VA_UUID_STRING_LEN], GError **error)
{
  if (uuid && va_uuid_normalize (uuid, out))
    return TRUE;
  g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "'%.*s' is not a domain UUID", VA_CUT (uuid ? uuid : "", 64));
  return FALSE;
}

gboolean
va_mac_check (const char *mac, char out[VA_MAC_STRING_LEN], GError **error)
{
  if (mac && va_mac_normalize (mac, out))
    return TRUE;
  g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "'%.*s' is not a unicast MAC address", VA_CUT (mac ? mac : "", 64));
  return FALSE;
}

gboolean
va_name_is_valid (const char *name)
{
  gsize len;

  g_return_val_if_fail (name != NULL, FALSE);

  len = strlen (name);
  if (len == 0 || len > VA_NAME_MAX)
    return FALSE;
  for (const char *c = name; *c; c++)
    if (!g_ascii_isalnum (*c) && *c != '-' && *c != '_' && *c != '.')
      return FALSE;
  return TRUE;
}

/* Characters a terminal, a log line or a table would act on rather than
 * show: C0, DEL and C1, bidi and other format characters, line and
 * paragraph separators. */
static gboolean
name_char_escaped (gunichar c)
{
  GUnicodeType t = g_unichar_type (c);

  return t == G_UNICODE_CONTROL || t == G_UNICODE_FORMAT || t == G_UNICODE_LINE_SEPARATOR || t == G_UNICODE_PARAGRAPH_SEPARATOR
         || t == G_UNICODE_SURROGATE;
}

gboolean
va_domain_name_is_display (const char *name)
{
  const char *end;

  g_return_val_if_fail (name != NULL, FALSE);

  if (strlen (name) > VA_DOMAIN_NAME_MAX || !g_utf8_validate (name, -1, &end))
    return FALSE;
  for (const char *p = name; *p; p = g_utf8_next_char (p))
    if (name_char_escaped (g_utf8_get_char (p)))
      return FALSE;
  return TRUE;
}

char *
va_domain_name_display (const char *name)
{
  /* room for the "..." of a cut */
  const gsize keep = VA_DOMAIN_NAME_MAX - 3;
  g_autoptr (GString) out = NULL;
  gsize whole = 0; /* the longest prefix of whole pieces within @keep */
  gsize in_len;

  if (!name)
    return g_strdup ("");
  if (va_domain_name_is_display (name))
    return g_strdup (name);
  in_len = strlen (name);
  out = g_string_sized_new (MIN (in_len, (gsize) VA_DOMAIN_NAME_MAX) + 8);
  for (const char *p = name; *p;)
    {
      gunichar c = g_utf8_get_char_validated (p, (gssize) (in_len - (gsize) (p - name)));

      if (c == (gunichar) -1 || c == (gunichar) -2)
        {
          g_string_append_printf (out, "\\x%02x", (guint) (guchar) *p);
          p++;
        }
      else
        {
          const char *next = g_utf8_next_char (p);

          if (c == '\t')
            g_string_append (out, "\\t");
          else if (c == '\n')
            g_string_append (out, "\\n");
          else if (c == '\r')
            g_string_append (out, "\\r");
          else if (c < 0x80 && name_char_escaped (c))
            g_string_append_printf (out, "\\x%02x", (guint) c);
          else if (name_char_escaped (c))
            g_string_append_printf (out, "\\u%04X", (guint) c);
          else
            g_string_append_len (out, p, next - p);
          p = next;
        }
      if (out->len <= keep)
        whole = out->len;
      else if (out->len > VA_DOMAIN_NAME_MAX)
        break;
    }
  if (out->len > VA_DOMAIN_NAME_MAX)
    {
      g_string_truncate (out, whole);
      g_string_append (out, "...");
    }
  return g_string_free (g_steal_pointer (&out), FALSE);
}

char *
va_sriov_network_name (const char *pool)
{
  g_return_val_if_fail (pool != NULL, NULL);

  return g_strconcat (VA_SRIOV_NETWORK_PREFIX, pool, NULL);
}

char *
va_mac_digits (const char *mac)
{
  char norm[VA_MAC_STRING_LEN];
  GString *out;

  if (!mac || !va_mac_normalize (mac, norm))
    return NULL;
  out = g_string_sized_new (12);
  for (const char *p = norm; *p; p++)
    if (*p != ':')
      g_string_append_c (out, *p);
  return g_string_free (out, FALSE);
}

static char *
alias_of (const char *prefix, const char *mac)
{
  g_autofree char *digits = va_mac_digits (mac);

  return digits ? g_strconcat (prefix, digits, NULL) : NULL;
}

char *
va_standby_alias (const char *mac)
{
  g_return_val_if_fail (mac != NULL, NULL);

  return alias_of (VA_STANDBY_ALIAS_PREFIX, mac);
}

char *
va_member_alias (const char *mac)
{
  g_return_val_if_fail (mac != NULL, NULL);

  return alias_of (VA_MEMBER_ALIAS_PREFIX, mac);
}

gboolean
va_user_alias_is_valid (const char *alias)
{
  gsize len;

  if (!alias || !g_str_has_prefix (alias, "ua-"))
    return FALSE;
  len = strlen (alias);
  if (len <= 3 || len > VA_USER_ALIAS_MAX)
    return FALSE;
  for (const char *p = alias + 3; *p; p++)
    if (!g_ascii_isalnum (*p) && *p != '-' && *p != '_')
      return FALSE;
  return TRUE;
}

gboolean
va_ifname_is_valid (const char *name)
{
  gsize len;

  g_return_val_if_fail (name != NULL, FALSE);

  len = strlen (name);
  /* The kernel's rules: IFNAMSIZ, no '/', ':' or white space, not . or .. */
  if (len == 0 || len > VA_IFNAME_MAX || strcmp (name, ".") == 0 || strcmp (name, "..") == 0)
    return FALSE;
  for (const char *c = name; *c; c++)
    if (*c == '/' || *c == ':' || g_ascii_isspace (*c) || !g_ascii_isprint (*c))
      return FALSE;
  return TRUE;
}

gboolean
va_pci_address_is_valid (const char *s)
{
  g_return_val_if_fail (s != NULL, FALSE);

  /* dddd:bb:dd.f */
  if (strlen (s) != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.')
    return FALSE;
  for (guint i = 0; i < 12; i++)
    if (i != 4 && i != 7 && i != 10 && !g_ascii_isxdigit (s[i]))
      return FALSE;
  return s[11] >= '0' && s[11] <= '7';
}
