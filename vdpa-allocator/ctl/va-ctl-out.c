/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What vdpactl prints when it is done: aligned columns and records, one
 * JSON scheme for every -j output (docs/schemas/), and one exit status per
 * kind of failure, with D-Bus's errors told in our own words. */
#define G_LOG_DOMAIN "va-ctl-out"

#include "config.h"

#include "va-ctl-private.h"

#include <libsmartcols.h>
#include <string.h>

#include "va-error.h"
#include "va-ids.h"

/* ---- exit statuses ------------------------------------------------------- */

static void
print_line (const char *msg)
{
  /* a message that quotes GDBus's own prefix (an error we do not know)
   * loses it: the operator reads our words and the error's name */
  const char *p = g_str_has_prefix (msg, "GDBus.Error:") ? msg + strlen ("GDBus.Error:") : msg;

  g_printerr ("vdpactl: %s\n", p);
}

/* The daemon's polkit refusal names its D-Bus method ("not authorized:
 * ReleaseDomain needs root or the polkit action A"); the operator typed a
 * command: "not authorized: 'vdpactl release' needs root or ...". FALSE
 * when @msg is not in that form. */
static gboolean
say_denied (const char *msg)
{
  static const char needs[] = " needs root or the polkit action ";
  const char *at = strstr (msg, needs);
  const char *method = at;

  if (!at)
    return FALSE;
  while (method > msg && g_ascii_isalpha (method[-1]))
    method--;
  if (method == at || !g_ascii_isupper (*method) || (method > msg && method[-1] != ' '))
    return FALSE;
  g_printerr ("vdpactl: %.*s'%s'%s\n", (int) (method - msg), msg, g_get_prgname () ? g_get_prgname () : "vdpactl", at);
  return TRUE;
}

int
va_ctl_fail (const GError *error)
{
  g_return_val_if_fail (error != NULL, VA_CTL_EXIT_FAILED);

  if (error->domain == VA_ERROR)
    {
      if (error->code == VA_ERROR_PERMISSION_DENIED && say_denied (error->message))
        return VA_CTL_EXIT_DENIED;
      print_line (error->message);
      if (error->code == VA_ERROR_UNREACHABLE)
        return VA_CTL_EXIT_UNREACHABLE;
      if (error->code == VA_ERROR_PERMISSION_DENIED)
        return VA_CTL_EXIT_DENIED;
      return VA_CTL_EXIT_FAILED;
    }
  if (error->domain == G_OPTION_ERROR)
    {
      print_line (error->message);
      return VA_CTL_EXIT_USAGE;
    }
  if (error->domain == G_DBUS_ERROR)
    switch (error->code)
      {
        case G_DBUS_ERROR_ACCESS_DENIED:
        case G_DBUS_ERROR_AUTH_FAILED:
          /* dbus-daemon's own refusal, before the daemon or polkit saw it */
          print_line ("the system bus's policy refused the call; see org.vdpa_allocator.Allocator1.conf in dbus-1/system.d");
          return VA_CTL_EXIT_DENIED;
        /* no owner of our name, no reply, a timeout: va_bus_explain_error()
         * made those VA_ERROR_UNREACHABLE, in its words */
        case G_DBUS_ERROR_TIMED_OUT:
        case G_DBUS_ERROR_DISCONNECTED:
        case G_DBUS_ERROR_NO_SERVER:
          print_line ("vdpa-allocatord did not answer");
          return VA_CTL_EXIT_UNREACHABLE;
        case G_DBUS_ERROR_UNKNOWN_METHOD:
        case G_DBUS_ERROR_UNKNOWN_OBJECT:
        case G_DBUS_ERROR_UNKNOWN_INTERFACE:
        case G_DBUS_ERROR_UNKNOWN_PROPERTY:
        case G_DBUS_ERROR_INVALID_ARGS:
        case G_DBUS_ERROR_INVALID_SIGNATURE:
        case G_DBUS_ERROR_NOT_SUPPORTED:
          print_line ("vdpa-allocatord did not understand the call: is it the same version as vdpactl " VA_VERSION "?");
          return VA_CTL_EXIT_FAILED;
        case G_DBUS_ERROR_LIMITS_EXCEEDED:
          print_line ("the system bus refused the call: a limit of its configuration was reached");
          return VA_CTL_EXIT_FAILED;
        default:
          {
            g_autofree char *line = g_strdup_printf ("the system bus refused the call (D-Bus error %d): %s", error->code, error->message);
            print_line (line);
            return VA_CTL_EXIT_FAILED;
          }
      }
  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_DBUS_ERROR))
    {
      /* a name GDBus has no code for, from whoever owns our name */
      g_autofree char *line = g_strdup_printf ("the daemon gave an error vdpactl does not know: %s", error->message);
      print_line (line);
      return VA_CTL_EXIT_FAILED;
    }
  print_line (error->message);
  return VA_CTL_EXIT_FAILED;
}

int
va_ctl_fail_msg (const char *msg)
{
  print_line (msg);
  return VA_CTL_EXIT_FAILED;
}

int
va_ctl_usage (const char *msg)
{
  print_line (msg);
  return VA_CTL_EXIT_USAGE;
}

/* ---- JSON ---------------------------------------------------------------- */

/* Keys the daemon's records spell otherwise; everything else is only
 * lowered from CamelCase (the pool properties). */
static const struct
{
  const char *from, *to;
} renames[] = {
  { "slot", "mgmtdev" },
  { "libvirt", "libvirt_reachable" },
  { "bridge_type", "fallback_bridge_type" },
};

char *
va_ctl_json_key (const char *key)
{
  GString *s = g_string_sized_new (strlen (key) + 4);

  for (guint i = 0; i < G_N_ELEMENTS (renames); i++)
    if (strcmp (key, renames[i].from) == 0)
      {
        g_string_append (s, renames[i].to);
        return g_string_free (s, FALSE);
      }
  for (const char *p = key; *p; p++)
    {
      if (g_ascii_isupper (*p) && p != key)
        g_string_append_c (s, '_');
      g_string_append_c (s, g_ascii_tolower (*p));
    }
  return g_string_free (s, FALSE);
}

static void
add_value (JsonBuilder *b, const char *key, GVariant *v)
{
  if (g_variant_is_of_type (v, G_VARIANT_TYPE_VARIANT))
    {
      g_autoptr (GVariant) inner = g_variant_get_variant (v);
      add_value (b, key, inner);
      return;
    }
  if (g_variant_is_of_type (v, G_VARIANT_TYPE_STRING) || g_variant_is_of_type (v, G_VARIANT_TYPE_OBJECT_PATH))
    {
      const char *s = g_variant_get_string (v, NULL);

      if (!*s)
        json_builder_add_null_value (b);
      else if (key && strcmp (key, "slot") == 0 && va_pci_address_is_valid (s))
        {
          /* as iproute2's vdpa -j names the VF: its bus, then its address */
          g_autofree char *dev = g_strconcat ("pci/", s, NULL);
          json_builder_add_string_value (b, dev);
        }
      else
        json_builder_add_string_value (b, s);
      return;
    }
  if (g_variant_is_of_type (v, G_VARIANT_TYPE_BOOLEAN))
    json_builder_add_boolean_value (b, g_variant_get_boolean (v));
  else if (g_variant_is_of_type (v, G_VARIANT_TYPE_BYTE))
    json_builder_add_int_value (b, g_variant_get_byte (v));
  else if (g_variant_is_of_type (v, G_VARIANT_TYPE_UINT16))
    json_builder_add_int_value (b, g_variant_get_uint16 (v));
  else if (g_variant_is_of_type (v, G_VARIANT_TYPE_INT16))
    json_builder_add_int_value (b, g_variant_get_int16 (v));
  else if (g_variant_is_of_type (v, G_VARIANT_TYPE_UINT32))
    json_builder_add_int_value (b, g_variant_get_uint32 (v));
  else if (g_variant_is_of_type (v, G_VARIANT_TYPE_INT32))
    json_builder_add_int_value (b, g_variant_get_int32 (v));
  else if (g_variant_is_of_type (v, G_VARIANT_TYPE_UINT64))
    json_builder_add_int_value (b, (gint64) MIN (g_variant_get_uint64 (v), (guint64) G_MAXINT64));
  else if (g_variant_is_of_type (v, G_VARIANT_TYPE_INT64))
    json_builder_add_int_value (b, g_variant_get_int64 (v));
  else if (g_variant_is_of_type (v, G_VARIANT_TYPE_DOUBLE))
    json_builder_add_double_value (b, g_variant_get_double (v));
  else if (g_variant_is_of_type (v, G_VARIANT_TYPE_VARDICT))
    {
      json_builder_begin_object (b);
      va_ctl_json_add_members (b, v);
      json_builder_end_object (b);
    }
  else if (g_variant_is_of_type (v, G_VARIANT_TYPE_ARRAY))
    {
      GVariantIter iter;
      GVariant *child;

      json_builder_begin_array (b);
      g_variant_iter_init (&iter, v);
      while ((child = g_variant_iter_next_value (&iter)))
        {
          add_value (b, NULL, child);
          g_variant_unref (child);
        }
      json_builder_end_array (b);
    }
  else
    json_builder_add_value (b, json_gvariant_serialize (v));
}

static int
cmp_names (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

void
va_ctl_json_add_members (JsonBuilder *b, GVariant *record)
{
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GHashTable) keys = g_hash_table_new (g_str_hash, g_str_equal);
  GVariantIter iter;
  const char *key;
  GVariant *value;

  /* the members in the order of their JSON names: one order whatever
   * order the daemon's dictionary had */
  g_variant_iter_init (&iter, record);
  while (g_variant_iter_next (&iter, "{&sv}", &key, &value))
    {
      char *name = va_ctl_json_key (key);

      g_ptr_array_add (names, name);
      g_hash_table_insert (keys, name, (gpointer) key);
      g_variant_unref (value);
    }
  g_ptr_array_sort (names, cmp_names);
  for (guint i = 0; i < names->len; i++)
    {
      const char *name = g_ptr_array_index (names, i);
      const char *k = g_hash_table_lookup (keys, name);
      g_autoptr (GVariant) v = g_variant_lookup_value (record, k, NULL);

      json_builder_set_member_name (b, name);
      add_value (b, k, v);
    }
}

void
va_ctl_json_add_list (JsonBuilder *b, const char *member, GVariant *records)
{
  json_builder_set_member_name (b, member);
  add_value (b, NULL, records);
}

JsonBuilder *
va_ctl_json_begin (void)
{
  JsonBuilder *b = json_builder_new ();

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "version");
  json_builder_add_int_value (b, VA_CTL_JSON_VERSION);
  return b;
}

void
va_ctl_json_print (JsonBuilder *b)
{
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  g_autoptr (JsonNode) root = NULL;
  g_autofree char *text = NULL;

  json_builder_end_object (b);
  root = json_builder_get_root (b);
  json_generator_set_pretty (gen, TRUE);
  json_generator_set_root (gen, root);
  text = json_generator_to_data (gen, NULL);
  g_print ("%s\n", text);
}

void
va_ctl_print_json_record (GVariant *record)
{
  g_autoptr (JsonBuilder) b = va_ctl_json_begin ();

  va_ctl_json_add_members (b, record);
  va_ctl_json_print (b);
}

void
va_ctl_print_json_list (const char *member, GVariant *records)
{
  g_autoptr (JsonBuilder) b = va_ctl_json_begin ();

  va_ctl_json_add_list (b, member, records);
  va_ctl_json_print (b);
}

/* ---- tables and records ------------------------------------------------- */

/* What a record's key means, in words; the others are their own words
 * (CamelCase and snake_case as lower-case words). */
static const struct
{
  const char *key, *words;
} labels[] = {
  { "HealthReason", "health reason" },
  { "VlanMethod", "VLAN method" },
  { "domain_name", "domain" },
  { "uuid", "domain UUID" },
  { "mac", "MAC" },
  { "vlan", "VLAN" },
  { "slot", "slot (VF)" },
  { "chardev", "device node" },
  { "port", "port path" },
  { "created", "leased since" },
  { "sriov", "VF passed through" },
  { "broken_reason", "broken because" },
  { "released", "leases released" },
  { "orphans", "devices removed (no lease)" },
  { "busy", "devices kept (held open)" },
  { "missing", "devices re-made (were gone)" },
  { "stale_links", "port links removed (stale)" },
  { "repaired", "VFs reset" },
  { "libvirt", "libvirt answered" },
  { "libvirt_error", "libvirt error" },
  { "MaxVqp", "max queue pairs" },
  { "Mtu", "MTU" },
  { "NumaNodes", "NUMA nodes" },
  { "Pfs", "PFs" },
};

static char *
key_words (const char *key)
{
  GString *s;

  for (guint i = 0; i < G_N_ELEMENTS (labels); i++)
    if (strcmp (key, labels[i].key) == 0)
      return g_strdup (labels[i].words);
  s = g_string_sized_new (strlen (key) + 4);
  for (const char *p = key; *p; p++)
    {
      if (*p == '_' || (g_ascii_isupper (*p) && p != key))
        g_string_append_c (s, ' ');
      if (*p != '_')
        g_string_append_c (s, g_ascii_tolower (*p));
    }
  return g_string_free (s, FALSE);
}

/* A time the daemon sends as seconds since the epoch, as the operator's
 * local ISO 8601. */
static char *
local_time (gint64 t)
{
  g_autoptr (GDateTime) dt = t > 0 ? g_date_time_new_from_unix_local (t) : NULL;

  return dt ? g_date_time_format (dt, "%Y-%m-%dT%H:%M:%S%:z") : g_strdup ("-");
}

static gboolean
is_time_key (const char *key)
{
  return key && strcmp (key, "created") == 0;
}

static char *value_text (GVariant *v);

/* @v of @key as the operator reads it: a time as local ISO 8601. */
static char *
field_text (const char *key, GVariant *v)
{
  if (v && is_time_key (key) && g_variant_is_of_type (v, G_VARIANT_TYPE_INT64))
    return local_time (g_variant_get_int64 (v));
  if (v && is_time_key (key) && g_variant_is_of_type (v, G_VARIANT_TYPE_UINT64))
    return local_time ((gint64) MIN (g_variant_get_uint64 (v), (guint64) G_MAXINT64));
  return value_text (v);
}

static char *
value_text (GVariant *v)
{
  if (!v)
    return g_strdup ("-");
  if (g_variant_is_of_type (v, G_VARIANT_TYPE_STRING) || g_variant_is_of_type (v, G_VARIANT_TYPE_OBJECT_PATH))
    {
      const char *s = g_variant_get_string (v, NULL);
      return g_strdup (*s ? s : "-");
    }
  if (g_variant_is_of_type (v, G_VARIANT_TYPE_BOOLEAN))
    return g_strdup (g_variant_get_boolean (v) ? "yes" : "no");
  if (g_variant_is_of_type (v, G_VARIANT_TYPE_STRING_ARRAY))
    {
      g_autofree const char **strv = g_variant_get_strv (v, NULL);
      return strv[0] ? g_strjoinv (",", (char **) strv) : g_strdup ("-");
    }
  return g_variant_print (v, FALSE);
}

static char *table_output;
static gboolean table_no_headers;

void
va_ctl_table_options (const char *output, gboolean no_headers)
{
  g_free (table_output);
  table_output = g_strdup (output);
  table_no_headers = no_headers;
}

/* @all's columns that -o named, in its order; all of them without -o.
 * NULL with @error for a title @all does not have. */
static VaCtlColumn *
pick_columns (const VaCtlColumn *all, GError **error)
{
  g_autoptr (GArray) out = g_array_new (TRUE, TRUE, sizeof (VaCtlColumn));
  g_auto (GStrv) want = table_output ? g_strsplit (table_output, ",", 64) : NULL;

  if (!want)
    {
      for (guint i = 0; all[i].key; i++)
        if (!all[i].extra)
          g_array_append_val (out, all[i]);
      return (VaCtlColumn *) g_array_free (g_steal_pointer (&out), FALSE);
    }
  for (guint w = 0; want[w]; w++)
    {
      guint i;

      for (i = 0; all[i].key; i++)
        if (g_ascii_strcasecmp (g_strstrip (want[w]), all[i].title) == 0)
          break;
      if (!all[i].key)
        {
          g_autoptr (GString) titles = g_string_new (NULL);

          for (i = 0; all[i].key; i++)
            g_string_append_printf (titles, "%s%s", i ? "," : "", all[i].title);
          g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "-o: no column '%.*s'; the columns: %s", VA_CUT (want[w], 32),
                       titles->str);
          return NULL;
        }
      g_array_append_val (out, all[i]);
    }
  return (VaCtlColumn *) g_array_free (g_steal_pointer (&out), FALSE);
}

int
va_ctl_table_check (const VaCtlColumn *cols)
{
  g_autoptr (GError) error = NULL;
  g_autofree VaCtlColumn *picked = pick_columns (cols, &error);

  return picked ? 0 : va_ctl_fail (error);
}

/* @records: aa{sv}. libsmartcols, as lsblk and findmnt: on a terminal the
 * text columns are cut to its width (names never), and anything
 * unprintable in a value is shown escaped, never sent to the terminal. */
void
va_ctl_print_table (GVariant *records, const VaCtlColumn *all, const char *json_member)
{
  gsize n = g_variant_n_children (records);
  guint ncols = 0;
  g_autofree VaCtlColumn *cols = NULL;
  struct libscols_table *tb;

  if (json_member)
    return va_ctl_print_json_list (json_member, records);
  cols = pick_columns (all, NULL);
  if (!cols)
    return; /* va_ctl_table_check() said why */
  tb = scols_new_table ();
  scols_table_set_column_separator (tb, "  ");
  scols_table_enable_noheadings (tb, table_no_headers);
  for (; cols[ncols].key; ncols++)
    scols_table_new_column (tb, cols[ncols].title, 0, cols[ncols].text ? SCOLS_FL_TRUNC : 0);
  for (gsize r = 0; r < n; r++)
    {
      g_autoptr (GVariant) rec = g_variant_get_child_value (records, r);
      struct libscols_line *line = scols_table_new_line (tb, NULL);

      for (guint c = 0; c < ncols; c++)
        {
          g_autoptr (GVariant) v = g_variant_lookup_value (rec, cols[c].key, NULL);

          /* the line takes the string */
          scols_line_refer_data (line, c, field_text (cols[c].key, v));
        }
    }
  fflush (stdout); /* after what g_print() said before the table */
  scols_print_table (tb);
  scols_unref_table (tb);
}

void
va_ctl_print_record (GVariant *rec, gboolean json)
{
  GVariantIter iter;
  const char *key;
  GVariant *value;
  gsize w = 0;

  if (json)
    return va_ctl_print_json_record (rec);
  g_variant_iter_init (&iter, rec);
  while (g_variant_iter_next (&iter, "{&sv}", &key, &value))
    {
      g_autofree char *words = key_words (key);
      w = MAX (w, strlen (words));
      g_variant_unref (value);
    }
  g_variant_iter_init (&iter, rec);
  while (g_variant_iter_next (&iter, "{&sv}", &key, &value))
    {
      g_autoptr (GVariant) v = value;
      g_autofree char *words = key_words (key);
      g_autofree char *text = field_text (key, v);

      g_print ("%-*s  %s\n", (int) w + 1, words, text);
    }
}

GVariant *
va_ctl_record_complete (GVariant *rec, const char *const *nulls, const char *const *falses)
{
  GVariantBuilder b;
  GVariantIter iter;
  GVariant *entry;

  g_variant_builder_init (&b, G_VARIANT_TYPE_VARDICT);
  g_variant_iter_init (&iter, rec);
  while ((entry = g_variant_iter_next_value (&iter)))
    {
      g_variant_builder_add_value (&b, entry);
      g_variant_unref (entry);
    }
  for (guint i = 0; nulls && nulls[i]; i++)
    {
      g_autoptr (GVariant) had = g_variant_lookup_value (rec, nulls[i], NULL);
      if (!had)
        g_variant_builder_add (&b, "{sv}", nulls[i], g_variant_new_string (""));
    }
  for (guint i = 0; falses && falses[i]; i++)
    {
      g_autoptr (GVariant) had = g_variant_lookup_value (rec, falses[i], NULL);
      if (!had)
        g_variant_builder_add (&b, "{sv}", falses[i], g_variant_new_boolean (FALSE));
    }
  return g_variant_ref_sink (g_variant_builder_end (&b));
}
