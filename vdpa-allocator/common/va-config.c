/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "va-config"

#include "va-config.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "va-error.h"

#define MAIN_FILE "vdpa-allocator.conf"

typedef struct
{
  char *value;
  const char *file; /* interned */
} Entry;

typedef struct
{
  char *name;
  const char *file; /* where the group first appeared */
  GPtrArray *keys;  /* char*, first-seen order */
  GHashTable *entries;
} Group;

static void
entry_free (Entry *e)
{
  g_free (e->value);
  g_free (e);
}

static void
group_free (Group *g)
{
  g_free (g->name);
  g_ptr_array_unref (g->keys);
  g_hash_table_unref (g->entries);
  g_free (g);
}

static void
pool_config_free (VaPoolConfig *p)
{
  g_free (p->name);
  g_strfreev (p->match_pf);
  g_strfreev (p->match_pci);
  g_free (p->uplink_bridge);
  g_free (p->vlan_network);
  g_free (p->device_group);
  g_free (p);
}

static void
network_config_free (VaNetworkConfig *n)
{
  g_free (n->net.name);
  g_free (n->net.pool);
  g_free (n->net.bridge);
  g_free (n);
}

VaConfig *
va_config_new_empty (void)
{
  VaConfig *self = g_new0 (VaConfig, 1);

  self->files = g_ptr_array_new_with_free_func (g_free);
  self->pools = g_ptr_array_new_with_free_func ((GDestroyNotify) pool_config_free);
  self->networks = g_ptr_array_new_with_free_func ((GDestroyNotify) network_config_free);
  self->hook_timeout_ms = VA_HOOK_TIMEOUT_MS_DEFAULT;
  self->swap_back_timeout_s = VA_SWAP_BACK_TIMEOUT_S_DEFAULT;
  self->relay_user = g_strdup ("nobody");
  self->relay_memory_mib = VA_RELAY_MEMORY_MIB_DEFAULT;
  return self;
}

void
va_config_free (VaConfig *self)
{
  if (!self)
    return;
  g_free (self->dir);
  g_ptr_array_unref (self->files);
  g_ptr_array_unref (self->pools);
  g_ptr_array_unref (self->networks);
  g_strfreev (self->sim_unhealthy);
  g_free (self->relay_user);
  g_free (self);
}

VA_ENUM_IMPL (va_eswitch_mode, VaEswitchMode,
              VA_ESWITCH_LAST, [VA_ESWITCH_UNCHANGED] = "unchanged", [VA_ESWITCH_LEGACY] = "legacy", [VA_ESWITCH_SWITCHDEV] = "switchdev")

VA_ENUM_IMPL (va_pool_type, VaPoolType, VA_POOL_TYPE_LAST, [VA_POOL_TYPE_CONNECTX] = "connectx", [VA_POOL_TYPE_VDUSE_TEST] = "vduse-test",
              [VA_POOL_TYPE_NETDEVSIM_TEST] = "netdevsim-test", [VA_POOL_TYPE_SOFTWARE] = "software")

VA_ENUM_IMPL (va_vlan_method, VaVlanMethod, VA_VLAN_METHOD_LAST, [VA_VLAN_METHOD_NONE] = "none", [VA_VLAN_METHOD_VST] = "vst",
              [VA_VLAN_METHOD_BRIDGE] = "bridge", [VA_VLAN_METHOD_OVS] = "ovs")

/* GKeyFile knows only whole-line comments; the documented examples put
 * "# ..." after values too, and no value of ours contains '#'. */
static char *
strip_inline_comment (char *value)
{
  for (char *p = value; *p; p++)
    if (*p == '#' && (p == value || g_ascii_isspace (p[-1])))
      {
        *p = '\0';
        break;
      }
  return g_strstrip (value);
}

/* GKeyFile merges a group written twice in one file and keeps the last of
 * a repeated key: refuse both, with the line. Overriding between files
 * stays what conf.d is for. */
static gboolean
check_repeats (const char *path, const char *data, gsize len, GError **error)
{
  g_autoptr (GHashTable) seen = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autofree char *group = NULL;
  const char *p = data, *end = data + len;
  guint line = 0;

  while (p < end)
    {
      const char *eol = memchr (p, '\n', end - p);
      g_autofree char *text = g_strstrip (g_strndup (p, (eol ? eol : end) - p));
      char *sep;

      line++;
      p = eol ? eol + 1 : end;
      if (!*text || *text == '#')
        continue;
      if (*text == '[' && (sep = strchr (text, ']')))
        {
          g_free (group);
          group = g_strndup (text + 1, sep - text - 1);
          if (!g_hash_table_add (seen, g_strconcat ("[", group, "]", NULL)))
            {
              g_set_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG, "%s:%u: [%.*s] is written twice in this file", path, line,
                           VA_CUT (group, 64));
              return FALSE;
            }
        }
      else if (group && (sep = strchr (text, '=')))
        {
          *sep = '\0';
          g_strchomp (text);
          if (!g_hash_table_add (seen, g_strconcat (group, "\n", text, NULL)))
            {
              g_set_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG, "%s:%u: [%.*s] %.*s is set twice in this file", path, line,
                           VA_CUT (group, 64), VA_CUT (text, 64));
              return FALSE;
            }
        }
    }
  return TRUE;
}

/* The line GKeyFile refuses in @data, which it does not say: the
 * shortest run of whole lines it refuses ends there (a binary search,
 * since the refusal of a line does not depend on those after it). */
static guint
first_bad_line (const char *data, gsize len)
{
  g_autoptr (GArray) ends = g_array_new (FALSE, FALSE, sizeof (gsize));
  guint lo = 1, hi;

  for (gsize i = 0; i < len; i++)
    if (data[i] == '\n')
      g_array_append_val (ends, (gsize){ i + 1 });
  if (len > 0 && data[len - 1] != '\n')
    g_array_append_val (ends, len);
  hi = MAX (ends->len, 1);
  while (lo < hi)
    {
      guint mid = lo + (hi - lo) / 2;
      g_autoptr (GKeyFile) kf = g_key_file_new ();

      if (g_key_file_load_from_data (kf, data, g_array_index (ends, gsize, mid - 1), G_KEY_FILE_NONE, NULL))
        lo = mid + 1;
      else
        hi = mid;
    }
  return lo;
}

/* Line @n of @data, as our refusal of it: GKeyFile's words ("Key file
 * contains line ... which is not a key-value pair, group, or comment")
 * name no line and no fix; @glib's are the last resort. */
static char *
bad_line_words (const char *data, gsize len, guint n, const char *glib)
{
  const char *p = data, *end = data + len;
  gboolean grouped = FALSE;
  g_autofree char *text = NULL;
  g_autofree char *shown = NULL;

  for (guint line = 1; p < end; line++)
    {
      const char *eol = memchr (p, '\n', end - p);
      g_autofree char *t = g_strstrip (g_strndup (p, (eol ? eol : end) - p));

      p = eol ? eol + 1 : end;
      if (line == n)
        {
          text = g_steal_pointer (&t);
          break;
        }
      if (*t == '[')
        grouped = TRUE;
    }
  if (!text)
    return g_strdup (glib);
  shown = g_utf8_make_valid (text, -1);
  if (*text == '[')
    return g_strdup_printf ("'%.*s' is not a group header: write [NAME] alone on its line", VA_CUT (shown, 64));
  if (!grouped)
    return g_strdup_printf ("'%.*s' comes before any [group]: every key belongs to a group, such as [network NAME]", VA_CUT (shown, 64));
  if (!strchr (text, '='))
    return g_strdup_printf ("'%.*s' is neither key=value, a [group] nor a # comment", VA_CUT (shown, 64));
  return g_strdup_printf ("'%.*s' is not a key=value line this file can have (%s)", VA_CUT (shown, 64), glib);
}

static gboolean
merge_file (GHashTable *groups, GPtrArray *order, const char *path, GError **error)
{
  g_autoptr (GKeyFile) kf = g_key_file_new ();
  g_autoptr (GError) local = NULL;
  g_autofree char *data = NULL;
  g_auto (GStrv) group_names = NULL;
  gsize len;
  struct stat st;
  const char *file = g_intern_string (path);

  if (stat (path, &st) < 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG, "%s: %s", path, g_strerror (errno));
      return FALSE;
    }
  if (!S_ISREG (st.st_mode))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG, "%s: not a regular file", path);
      return FALSE;
    }
  if (st.st_size > VA_CONFIG_MAX_FILE_SIZE)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG, "%s: %lld bytes, over the limit of %d", path, (long long) st.st_size,
                   VA_CONFIG_MAX_FILE_SIZE);
      return FALSE;
    }
  if (!g_file_get_contents (path, &data, &len, &local))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG, "%s", local->message);
      return FALSE;
    }
  if (len > VA_CONFIG_MAX_FILE_SIZE)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG, "%s: over the limit of %d bytes", path, VA_CONFIG_MAX_FILE_SIZE);
      return FALSE;
    }
  if (!check_repeats (path, data, len, error))
    return FALSE;
  if (!g_key_file_load_from_data (kf, data, len, G_KEY_FILE_NONE, &local))
    {
      guint line = first_bad_line (data, len);
      g_autofree char *words = bad_line_words (data, len, line, local->message);

      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG, "%s:%u: %s", path, line, words);
      return FALSE;
    }

  group_names = g_key_file_get_groups (kf, NULL);
  for (guint i = 0; group_names[i]; i++)
    {
      Group *g = g_hash_table_lookup (groups, group_names[i]);
      g_auto (GStrv) keys = g_key_file_get_keys (kf, group_names[i], NULL, NULL);

      if (!g)
        {
          if (order->len >= VA_CONFIG_MAX_GROUPS)
            {
              g_set_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG, "%s: more than %d groups", path, VA_CONFIG_MAX_GROUPS);
              return FALSE;
            }
          g = g_new0 (Group, 1);
          g->name = g_strdup (group_names[i]);
          g->file = file;
          g->keys = g_ptr_array_new_with_free_func (g_free);
          g->entries = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) entry_free);
          g_hash_table_insert (groups, g->name, g);
          g_ptr_array_add (order, g);
        }
      for (guint k = 0; keys && keys[k]; k++)
        {
          Entry *e = g_new0 (Entry, 1);
          char *value = g_key_file_get_string (kf, group_names[i], keys[k], &local);

          if (!value)
            {
              g_free (e);
              g_set_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG, "%s: [%s] %s: %s", path, group_names[i], keys[k], local->message);
              return FALSE;
            }
          e->value = strip_inline_comment (value);
          e->file = file;
          if (!g_hash_table_contains (g->entries, keys[k]))
            g_ptr_array_add (g->keys, g_strdup (keys[k]));
          g_hash_table_replace (g->entries, g_strdup (keys[k]), e);
        }
    }
  return TRUE;
}

typedef struct
{
  const Group *group;
  const char *key;
  const Entry *entry;
} Item;

static gboolean G_GNUC_PRINTF (3, 4) item_error (const Item *it, GError **error, const char *fmt, ...)
{
  va_list ap;
  g_autofree char *msg = NULL;

  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_set_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG, "%s: [%s] %s: %s", it->entry->file, it->group->name, it->key, msg);
  return FALSE;
}

static gboolean
item_uint (const Item *it, guint min, guint max, guint *out, GError **error)
{
  guint64 v;

  if (!g_ascii_string_to_unsigned (it->entry->value, 10, min, max, &v, NULL))
    return item_error (it, error, "'%.*s' is not a number from %u to %u", VA_CUT (it->entry->value, 64), min, max);
  *out = (guint) v;
  return TRUE;
}

static gboolean
item_hex16 (const Item *it, guint16 *out, GError **error)
{
  const char *v = it->entry->value;
  guint64 n;

  if (g_str_has_prefix (v, "0x"))
    v += 2;
  if (!g_ascii_string_to_unsigned (v, 16, 1, 0xffff, &n, NULL))
    return item_error (it, error, "'%.*s' is not a 16-bit hexadecimal id", VA_CUT (it->entry->value, 64));
  *out = (guint16) n;
  return TRUE;
}

static gboolean
item_name (const Item *it, char **out, GError **error)
{
  if (!va_name_is_valid (it->entry->value))
    return item_error (it, error, "'%.*s' is not a name of 1 to %d letters, digits, '-', '_' or '.'", VA_CUT (it->entry->value, 64),
                       VA_NAME_MAX);
  g_free (*out);
  *out = g_strdup (it->entry->value);
  return TRUE;
}

static gboolean
item_ifname (const Item *it, char **out, GError **error)
{
  if (!va_ifname_is_valid (it->entry->value))
    return item_error (it, error, "'%.*s' is not a network interface name", VA_CUT (it->entry->value, 64));
  g_free (*out);
  *out = g_strdup (it->entry->value);
  return TRUE;
}

static gboolean
item_list (const Item *it, gboolean (*valid) (const char *), const char *what, char ***out, GError **error)
{
  g_auto (GStrv) parts = g_strsplit_set (it->entry->value, ",; ", 256);
  g_autoptr (GPtrArray) list = g_ptr_array_new_with_free_func (g_free);

  for (guint i = 0; parts[i]; i++)
    {
      if (!*parts[i])
        continue;
      if (!valid (parts[i]))
        return item_error (it, error, "'%.*s' is not %s", VA_CUT (parts[i], 64), what);
      /* PCI addresses compare in lower case; interface names as written */
      g_ptr_array_add (list, valid == va_pci_address_is_valid ? g_ascii_strdown (parts[i], -1) : g_strdup (parts[i]));
    }
  if (list->len == 0)
    return item_error (it, error, "empty list");
  g_ptr_array_add (list, NULL);
  g_strfreev (*out);
  *out = (char **) g_ptr_array_free (g_steal_pointer (&list), FALSE);
  return TRUE;
}

/* A user or group name as useradd(8) takes it, or a number. */
static gboolean
item_account (const Item *it, const char *what, char **out, GError **error)
{
  const char *v = it->entry->value;
  gsize len = strlen (v);

  if (len == 0 || len > 32 || v[0] == '-')
    return item_error (it, error, "'%.*s' is not a %s name or number", VA_CUT (v, 64), what);
  for (gsize i = 0; i < len; i++)
    if (!g_ascii_isalnum (v[i]) && v[i] != '_' && v[i] != '-' && v[i] != '.')
      return item_error (it, error, "'%.*s' is not a %s name or number", VA_CUT (v, 64), what);
  g_free (*out);
  *out = g_strdup (v);
  return TRUE;
}

static gboolean
item_group (const Item *it, char **out, GError **error)
{
  return item_account (it, "group", out, error);
}

static gboolean
item_mode (const Item *it, guint *out, GError **error)
{
  guint64 v;

  if (!g_ascii_string_to_unsigned (it->entry->value, 8, 0, 0777, &v, NULL))
    return item_error (it, error, "'%.*s' is not an octal mode from 0 to 0777", VA_CUT (it->entry->value, 64));
  /* a vhost-vdpa node drives the NIC's queues: never for every user */
  if (v & 0007)
    return item_error (it, error, "'%.*s' gives other users access to the device; at most group access (like 0660)",
                       VA_CUT (it->entry->value, 64));
  *out = (guint) v;
  return TRUE;
}

/* A VDUSE pool has one PF and devices whose MAC, MTU and queues the
 * userspace server fixed: what would choose or shape VFs means nothing. */
static gboolean
check_vduse_pool (const Group *g, const VaPoolConfig *p, GError **error)
{
  const char *bad = NULL;

  if (p->match_pf || p->match_pci || p->match_vendor || p->match_device)
    bad = "match-* keys (the pool takes the VDUSE devices named va-*)";
  else if (p->vfs)
    bad = "vfs";
  else if (p->eswitch != VA_ESWITCH_UNCHANGED)
    bad = "eswitch";
  else if (p->vlan_method == VA_VLAN_METHOD_VST)
    bad = "vlan-method=vst (there is no PF to tag)";
  else if (p->mtu)
    bad = "mtu (VDUSE devices refuse it)";
  else if (p->max_vqp != 1)
    bad = "max-vqp other than 1 (VDUSE devices refuse it)";
  if (bad)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG, "%s: [%s] type: vduse-test takes no %s", g->file, g->name, bad);
      return FALSE;
    }
  return TRUE;
}

/* Software devices (issue 28) are VDUSE virtio-net devices: one queue
 * pair, kind vdpa; a type=software pool has no PF to select or shape. */
static gboolean
check_software_pool (const Group *g, const VaPoolConfig *p, GError **error)
{
  const char *bad = NULL;

  if (p->kind == VA_POOL_KIND_SRIOV)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG,
                   "%s: [%s] software-slots: a kind=sriov pool passes VFs through, and a software device is no VF", g->file, g->name);
      return FALSE;
    }
  if (p->type != VA_POOL_TYPE_SOFTWARE)
    return TRUE;
  if (!p->software_slots)
    bad = "software-slots 0 (it has no other slots): give it software-slots=N";
  else if (p->match_pf || p->match_pci || p->match_vendor || p->match_device)
    bad = "match-* keys (it takes no PF)";
  else if (p->vfs)
    bad = "vfs";
  else if (p->eswitch != VA_ESWITCH_UNCHANGED)
    bad = "eswitch";
  else if (p->vlan_method != VA_VLAN_METHOD_NONE)
    bad = "vlan-method (a software device's tap joins the network's fallback bridge in the NIC's VLAN)";
  else if (p->max_vqp != 1)
    bad = "max-vqp other than 1 (VDUSE serves one queue pair)";
  if (bad)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG, "%s: [%s] type: software takes no %s", g->file, g->name, bad);
      return FALSE;
    }
  return TRUE;
}

/* A kind=sriov pool hands whole VFs to guests: the keys that shape
 * vDPA devices and their /dev/vhost-vdpa nodes mean nothing there. */
static gboolean
check_sriov_pool (const Group *g, const VaPoolConfig *p, GError **error)
{
  static const char *const vdpa_only[] = { "max-vqp", "device-group", "device-mode" };

  if (p->type != VA_POOL_TYPE_CONNECTX)
    {
      Item it = { g, "kind", g_hash_table_lookup (g->entries, "kind") };
      return item_error (&it, error, "sriov passes PCI VFs through, and a %s pool has none", va_pool_type_to_string (p->type));
    }
  for (guint i = 0; i < G_N_ELEMENTS (vdpa_only); i++)
    {
      Item it = { g, vdpa_only[i], g_hash_table_lookup (g->entries, vdpa_only[i]) };

      if (it.entry)
        return item_error (&it, error, "for vDPA devices only: a kind=sriov pool passes whole VFs through");
    }
  return TRUE;
}

static gboolean
parse_pool (const Group *g, const char *name, VaPoolConfig *p, GError **error)
{
  p->name = g_strdup (name);
  p->max_vqp = 1;
  p->vlan_method = VA_VLAN_METHOD_NONE;
  p->device_group = g_strdup ("kvm");
  p->device_mode = 0660;

  for (guint i = 0; i < g->keys->len; i++)
    {
      const char *key = g_ptr_array_index (g->keys, i);
      Item it = { g, key, g_hash_table_lookup (g->entries, key) };
      const char *v = it.entry->value;
      guint n = 0; /* item_uint sets it before use; -O3 cannot see that */

      if (strcmp (key, "type") == 0)
        {
          if (!va_pool_type_from_string (v, &p->type))
            return item_error (&it, error, "'%.*s' is not connectx, software, vduse-test or netdevsim-test", VA_CUT (v, 64));
        }
      else if (strcmp (key, "kind") == 0)
        {
          if (!va_pool_kind_from_string (v, &p->kind))
            return item_error (&it, error, "'%.*s' is not vdpa or sriov", VA_CUT (v, 64));
        }
      else if (strcmp (key, "match-pf") == 0)
        {
          if (!item_list (&it, va_ifname_is_valid, "a network interface name", &p->match_pf, error))
            return FALSE;
        }
      else if (strcmp (key, "match-pci") == 0)
        {
          if (!item_list (&it, va_pci_address_is_valid, "a PCI address like 0000:b3:00.1", &p->match_pci, error))
            return FALSE;
        }
      else if (strcmp (key, "match-vendor") == 0)
        {
          if (!item_hex16 (&it, &p->match_vendor, error))
            return FALSE;
        }
      else if (strcmp (key, "match-device") == 0)
        {
          if (!item_hex16 (&it, &p->match_device, error))
            return FALSE;
        }
      else if (strcmp (key, "vfs") == 0)
        {
          if (!item_uint (&it, 0, 1024, &p->vfs, error))
            return FALSE;
        }
      else if (strcmp (key, "eswitch") == 0)
        {
          /* "unchanged" is the default, not a value to write */
          if (!va_eswitch_mode_from_string (v, &p->eswitch) || p->eswitch == VA_ESWITCH_UNCHANGED)
            return item_error (&it, error, "'%.*s' is not legacy or switchdev", VA_CUT (v, 64));
        }
      else if (strcmp (key, "vlan-method") == 0)
        {
          if (!va_vlan_method_from_string (v, &p->vlan_method))
            return item_error (&it, error, "'%.*s' is not vst, bridge, ovs or none", VA_CUT (v, 64));
        }
      else if (strcmp (key, "uplink-bridge") == 0)
        {
          if (!item_ifname (&it, &p->uplink_bridge, error))
            return FALSE;
        }
      else if (strcmp (key, "max-vqp") == 0)
        {
          if (!item_uint (&it, 1, VA_QUEUES_MAX, &p->max_vqp, error))
            return FALSE;
        }
      else if (strcmp (key, "mtu") == 0)
        {
          if (!item_uint (&it, VA_MTU_MIN, VA_MTU_MAX, &p->mtu, error))
            return FALSE;
          if (p->mtu < VA_MTU_VDPA_MIN)
            return item_error (&it, error,
                               "%u is below %u: libvirt gives a vdpa NIC's guest no MTU (it refuses <mtu> there), so the guest sends "
                               "%u-byte frames, which the VF would drop",
                               p->mtu, VA_MTU_VDPA_MIN, VA_MTU_VDPA_MIN);
        }
      else if (strcmp (key, "device-group") == 0)
        {
          if (!item_group (&it, &p->device_group, error))
            return FALSE;
        }
      else if (strcmp (key, "device-mode") == 0)
        {
          if (!item_mode (&it, &p->device_mode, error))
            return FALSE;
        }
      else if (strcmp (key, "low-watermark") == 0)
        {
          if (!item_uint (&it, 0, 65535, &n, error))
            return FALSE;
          p->low_watermark = n;
        }
      else if (strcmp (key, "software-slots") == 0)
        {
          if (!item_uint (&it, 0, VA_SOFTWARE_SLOTS_MAX, &p->software_slots, error))
            return FALSE;
        }
      else
        return item_error (&it, error, "unknown key");
    }

  if (p->kind == VA_POOL_KIND_SRIOV && !check_sriov_pool (g, p, error))
    return FALSE;
  if (p->type == VA_POOL_TYPE_VDUSE_TEST && !check_vduse_pool (g, p, error))
    return FALSE;
  if ((p->type == VA_POOL_TYPE_SOFTWARE || p->software_slots) && !check_software_pool (g, p, error))
    return FALSE;
  if (p->type == VA_POOL_TYPE_NETDEVSIM_TEST && (p->match_pci || p->match_vendor || p->match_device))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG,
                   "%s: [%s] type: netdevsim-test takes PFs by match-pf only (netdevsim devices have no PCI address)", g->file, g->name);
      return FALSE;
    }
  if ((p->vlan_method == VA_VLAN_METHOD_BRIDGE || p->vlan_method == VA_VLAN_METHOD_OVS) && !p->uplink_bridge)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG, "%s: [%s] vlan-method: %s needs uplink-bridge", g->file, g->name,
                   va_vlan_method_to_string (p->vlan_method));
      return FALSE;
    }
  if (p->vlan_method == VA_VLAN_METHOD_VST && p->eswitch == VA_ESWITCH_SWITCHDEV)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG,
                   "%s: [%s] vlan-method: vst sets the VLAN on the PF, which works only with eswitch=legacy", g->file, g->name);
      return FALSE;
    }
  return TRUE;
}

static gboolean
parse_network (const Group *g, const char *name, VaNetworkConfig *n, GError **error)
{
  gboolean mode_set = FALSE;

  n->net.name = g_strdup (name);
  n->spoofchk = TRUE; /* safe defaults: the guest keeps the MAC it was given */
  n->trust = FALSE;
  for (guint i = 0; i < g->keys->len; i++)
    {
      const char *key = g_ptr_array_index (g->keys, i);
      Item it = { g, key, g_hash_table_lookup (g->entries, key) };
      const char *v = it.entry->value;
      guint u = 0; /* as n in parse_pool */

      if (strcmp (key, "mode") == 0)
        {
          if (!va_mode_from_string (v, &n->net.mode))
            return item_error (&it, error, "'%.*s' is not vdpa, sriov, virtio or auto", VA_CUT (v, 64));
          mode_set = TRUE;
        }
      else if (strcmp (key, "pool") == 0)
        {
          if (!item_name (&it, &n->net.pool, error))
            return FALSE;
        }
      else if (strcmp (key, "vlan") == 0)
        {
          if (!item_uint (&it, 1, VA_VLAN_MAX, &u, error))
            return FALSE;
          n->net.vlan = u;
        }
      else if (strcmp (key, "fallback-bridge") == 0)
        {
          if (!item_ifname (&it, &n->net.bridge, error))
            return FALSE;
        }
      else if (strcmp (key, "fallback-bridge-type") == 0)
        {
          if (!va_bridge_kind_from_string (v, &n->net.bridge_kind))
            return item_error (&it, error, "'%.*s' is not linux or ovs", VA_CUT (v, 64));
        }
      else if (strcmp (key, "quota") == 0)
        {
          if (!item_uint (&it, 1, 1u << 20, &n->quota, error))
            return FALSE;
        }
      else if (strcmp (key, "spoofchk") == 0 || strcmp (key, "trust") == 0 || strcmp (key, "failover") == 0 || strcmp (key, "promote") == 0)
        {
          gboolean *out = key[0] == 's' ? &n->spoofchk : key[0] == 't' ? &n->trust : key[0] == 'p' ? &n->promote : &n->net.failover;

          if (g_strcmp0 (it.entry->value, "true") == 0)
            *out = TRUE;
          else if (g_strcmp0 (it.entry->value, "false") == 0)
            *out = FALSE;
          else
            return item_error (&it, error, "'%.*s' is not true or false", VA_CUT (it.entry->value, 64));
        }
      else
        return item_error (&it, error, "unknown key");
    }

  if (!mode_set)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG, "%s: [%s] mode: missing (vdpa, sriov, virtio or auto)", g->file, g->name);
      return FALSE;
    }
  if (n->net.mode != VA_MODE_VIRTIO && !n->net.pool)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG, "%s: [%s] pool: missing, and mode=%s needs one", g->file, g->name,
                   va_mode_to_string (n->net.mode));
      return FALSE;
    }
  if (n->net.mode == VA_MODE_VIRTIO && n->net.pool)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG, "%s: [%s] pool: mode=virtio uses no pool", g->file, g->name);
      return FALSE;
    }
  /* vdpa and sriov may go without one: accelerated or nothing */
  if ((n->net.mode == VA_MODE_VIRTIO || n->net.mode == VA_MODE_AUTO) && !n->net.bridge)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG, "%s: [%s] fallback-bridge: missing, and mode=%s needs one", g->file, g->name,
                   va_mode_to_string (n->net.mode));
      return FALSE;
    }
  /* failover pairs a passed-through VF with a virtio standby: no VF in
   * the other modes (auto would be failover's own "VF while one is free,
   * else virtio", decided once at start instead of at run time), and no
   * standby without a bridge to put it on */
  if (n->net.failover && n->net.mode != VA_MODE_SRIOV)
    {
      Item it = { g, "failover", g_hash_table_lookup (g->entries, "failover") };
      return item_error (&it, error, "pairs a passed-through VF with a virtio standby: mode=sriov only, and this network is mode=%s",
                         va_mode_to_string (n->net.mode));
    }
  if (n->net.failover && !n->net.bridge)
    {
      Item it = { g, "failover", g_hash_table_lookup (g->entries, "failover") };
      return item_error (&it, error, "the virtio standby goes on fallback-bridge, which this network lacks");
    }
  return TRUE;
}

static gboolean
parse_hook (VaConfig *self, const Group *g, GError **error)
{
  for (guint i = 0; i < g->keys->len; i++)
    {
      const char *key = g_ptr_array_index (g->keys, i);
      Item it = { g, key, g_hash_table_lookup (g->entries, key) };

      if (strcmp (key, "swap-back-timeout-s") == 0)
        {
          if (!item_uint (&it, 1, VA_SWAP_BACK_TIMEOUT_S_MAX, &self->swap_back_timeout_s, error))
            return FALSE;
          continue;
        }
      if (strcmp (key, "timeout-ms") != 0)
        return item_error (&it, error, "unknown key");
      if (!item_uint (&it, VA_HOOK_TIMEOUT_MS_MIN, VA_HOOK_TIMEOUT_MS_MAX, &self->hook_timeout_ms, error))
        return FALSE;
    }
  return TRUE;
}

/* [relay]: the relays of software devices (issue 28), which serve a
 * hostile guest's rings and so never run as root. */
static gboolean
parse_relay (VaConfig *self, const Group *g, GError **error)
{
  for (guint i = 0; i < g->keys->len; i++)
    {
      const char *key = g_ptr_array_index (g->keys, i);
      Item it = { g, key, g_hash_table_lookup (g->entries, key) };

      if (strcmp (key, "user") == 0)
        {
          if (!item_account (&it, "user", &self->relay_user, error))
            return FALSE;
          if (strcmp (self->relay_user, "root") == 0 || strspn (self->relay_user, "0") == strlen (self->relay_user))
            return item_error (&it, error, "a relay serves a guest's rings: never as root");
        }
      else if (strcmp (key, "max-memory-mib") == 0)
        {
          if (!item_uint (&it, 16, 4096, &self->relay_memory_mib, error))
            return FALSE;
        }
      else
        return item_error (&it, error, "unknown key");
    }
  return TRUE;
}

static gboolean
parse_simulate (VaConfig *self, const Group *g, GError **error)
{
  self->simulate = TRUE;
  self->sim_pfs = 1;
  self->sim_vfs = 8;
  self->sim_numa_nodes = 1;
  for (guint i = 0; i < g->keys->len; i++)
    {
      const char *key = g_ptr_array_index (g->keys, i);
      Item it = { g, key, g_hash_table_lookup (g->entries, key) };

      if (strcmp (key, "pfs") == 0)
        {
          if (!item_uint (&it, 1, 64, &self->sim_pfs, error))
            return FALSE;
        }
      else if (strcmp (key, "vfs") == 0)
        {
          if (!item_uint (&it, 1, 1024, &self->sim_vfs, error))
            return FALSE;
        }
      else if (strcmp (key, "numa-nodes") == 0)
        {
          if (!item_uint (&it, 1, 64, &self->sim_numa_nodes, error))
            return FALSE;
        }
      else if (strcmp (key, "unhealthy-pfs") == 0)
        {
          if (!item_list (&it, va_ifname_is_valid, "a network interface name", &self->sim_unhealthy, error))
            return FALSE;
        }
      else
        return item_error (&it, error, "unknown key");
    }
  return TRUE;
}

static gint
cmp_pool (gconstpointer a, gconstpointer b)
{
  return strcmp ((*(VaPoolConfig **) a)->name, (*(VaPoolConfig **) b)->name);
}

static gint
cmp_network (gconstpointer a, gconstpointer b)
{
  return strcmp ((*(VaNetworkConfig **) a)->net.name, (*(VaNetworkConfig **) b)->net.name);
}

static gint
cmp_str (gconstpointer a, gconstpointer b)
{
  return strcmp (*(char **) a, *(char **) b);
}

static gboolean
list_files (const char *dir, GPtrArray *files, GError **error)
{
  g_autofree char *main_file = g_build_filename (dir, MAIN_FILE, NULL);
  g_autofree char *dropins = g_build_filename (dir, "conf.d", NULL);
  g_autoptr (GPtrArray) extra = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GDir) d = NULL;
  g_autoptr (GError) local = NULL;
  const char *name;

  struct stat st;

  /* absent is fine; present but unreadable is an error, never "empty" */
  if (stat (main_file, &st) == 0)
    g_ptr_array_add (files, g_steal_pointer (&main_file));
  else if (errno != ENOENT)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG, "%s: %s", main_file, g_strerror (errno));
      return FALSE;
    }
  if (stat (dropins, &st) < 0)
    {
      if (errno == ENOENT)
        return TRUE;
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG, "%s: %s", dropins, g_strerror (errno));
      return FALSE;
    }
  if (!S_ISDIR (st.st_mode))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG, "%s: not a directory", dropins);
      return FALSE;
    }
  d = g_dir_open (dropins, 0, &local);
  if (!d)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG, "%s: %s", dropins, local->message);
      return FALSE;
    }
  while ((name = g_dir_read_name (d)))
    {
      if (!g_str_has_suffix (name, ".conf") || name[0] == '.')
        continue;
      if (extra->len >= VA_CONFIG_MAX_FILES)
        {
          g_set_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG, "%s: more than %d files", dropins, VA_CONFIG_MAX_FILES);
          return FALSE;
        }
      g_ptr_array_add (extra, g_build_filename (dropins, name, NULL));
    }
  g_ptr_array_sort (extra, cmp_str);
  for (guint i = 0; i < extra->len; i++)
    g_ptr_array_add (files, g_strdup (g_ptr_array_index (extra, i)));
  return TRUE;
}

VaConfig *
va_config_load (const char *dir, GError **error)
{
  g_autoptr (VaConfig) self = NULL;
  g_autoptr (GHashTable) groups = NULL;
  g_autoptr (GPtrArray) order = NULL;
  struct stat st;

  g_return_val_if_fail (dir != NULL, NULL);

  self = va_config_new_empty ();
  groups = g_hash_table_new (g_str_hash, g_str_equal);
  order = g_ptr_array_new_with_free_func ((GDestroyNotify) group_free);
  if (stat (dir, &st) < 0)
    {
      if (errno == ENOENT)
        g_set_error (error, VA_ERROR, VA_ERROR_NOT_FOUND, "configuration directory %s does not exist", dir);
      else
        g_set_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG, "configuration directory %s: %s", dir, g_strerror (errno));
      return NULL;
    }
  if (!S_ISDIR (st.st_mode))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG, "configuration directory %s: not a directory", dir);
      return NULL;
    }
  self->dir = g_strdup (dir);
  if (!list_files (dir, self->files, error))
    return NULL;
  for (guint i = 0; i < self->files->len; i++)
    if (!merge_file (groups, order, g_ptr_array_index (self->files, i), error))
      return NULL;

  for (guint i = 0; i < order->len; i++)
    {
      const Group *g = g_ptr_array_index (order, i);

      if (g_str_has_prefix (g->name, "pool "))
        {
          VaPoolConfig *p = g_new0 (VaPoolConfig, 1);
          g_ptr_array_add (self->pools, p);
          if (!va_name_is_valid (g->name + 5))
            {
              g_set_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG, "%s: [%s]: '%.*s' is not a valid pool name", g->file, g->name,
                           VA_CUT (g->name + 5, 64));
              return NULL;
            }
          if (!parse_pool (g, g->name + 5, p, error))
            return NULL;
        }
      else if (g_str_has_prefix (g->name, "network "))
        {
          VaNetworkConfig *n = g_new0 (VaNetworkConfig, 1);
          g_ptr_array_add (self->networks, n);
          if (!va_name_is_valid (g->name + 8))
            {
              g_set_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG, "%s: [%s]: '%.*s' is not a valid network name", g->file, g->name,
                           VA_CUT (g->name + 8, 64));
              return NULL;
            }
          if (!parse_network (g, g->name + 8, n, error))
            return NULL;
        }
      else if (strcmp (g->name, "simulate") == 0)
        {
          if (!parse_simulate (self, g, error))
            return NULL;
        }
      else if (strcmp (g->name, "hook") == 0)
        {
          if (!parse_hook (self, g, error))
            return NULL;
        }
      else if (strcmp (g->name, "relay") == 0)
        {
          if (!parse_relay (self, g, error))
            return NULL;
        }
      else
        {
          g_set_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG,
                       "%s: [%.*s]: unknown group (pool NAME, network NAME, hook, relay or simulate)", g->file, VA_CUT (g->name, 64));
          return NULL;
        }
    }

  g_ptr_array_sort (self->pools, cmp_pool);
  g_ptr_array_sort (self->networks, cmp_network);

  for (guint i = 0; i < self->networks->len; i++)
    {
      const VaNetworkConfig *n = g_ptr_array_index (self->networks, i);
      g_autofree char *group_name = g_strdup_printf ("network %s", n->net.name);
      const Group *g = g_hash_table_lookup (groups, group_name);
      const Entry *e = g_hash_table_lookup (g->entries, "pool");
      const VaPoolConfig *p = n->net.pool ? va_config_lookup_pool (self, n->net.pool) : NULL;
      VaPoolKind want;

      if (n->net.pool && !p)
        {
          g_set_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG, "%s: [%s] pool: no pool named '%s'", e->file, g->name, n->net.pool);
          return NULL;
        }
      /* promotion moves a software device's NIC onto a hardware one of
       * the same pool: a pool that has both */
      if (n->promote && (!p || p->kind != VA_POOL_KIND_VDPA || p->type == VA_POOL_TYPE_SOFTWARE || !p->software_slots))
        {
          const Entry *v = g_hash_table_lookup (g->entries, "promote");

          g_set_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG,
                       "%s: [%s] promote: moves NICs from software vDPA devices onto hardware ones of the same pool, and %s%s%s", v->file,
                       g->name, !p ? "this network has no pool" : "pool '", p ? n->net.pool : "",
                       !p                                 ? ""
                       : p->kind != VA_POOL_KIND_VDPA     ? "' is not kind=vdpa"
                       : p->type == VA_POOL_TYPE_SOFTWARE ? "' has no hardware (type=software)"
                                                          : "' makes no software devices (software-slots=)");
          return NULL;
        }
      /* auto takes either kind; vdpa and sriov only their own */
      want = n->net.mode == VA_MODE_SRIOV ? VA_POOL_KIND_SRIOV : VA_POOL_KIND_VDPA;
      if (p && (n->net.mode == VA_MODE_VDPA || n->net.mode == VA_MODE_SRIOV) && p->kind != want)
        {
          g_set_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG, "%s: [%s] pool: mode=%s needs a pool of kind %s, and '%s' is kind %s",
                       e->file, g->name, va_mode_to_string (n->net.mode), va_pool_kind_to_string (want), n->net.pool,
                       va_pool_kind_to_string (p->kind));
          return NULL;
        }
      if (p && n->net.vlan && !p->vlan_network)
        {
          VaPoolConfig *mp = (VaPoolConfig *) p;

          mp->vlan_network = g_strdup (n->net.name);
          mp->vlan_network_vlan = n->net.vlan;
        }
      /* mlx5 refuses a non-zero VF VLAN through the PF in switchdev mode
       * (esw/legacy.c, mlx5_eswitch_set_vport_vlan: EOPNOTSUPP): libvirt's
       * <vlan> would fail every start */
      if (p && n->net.vlan && p->kind == VA_POOL_KIND_SRIOV && p->eswitch == VA_ESWITCH_SWITCHDEV && p->vlan_method != VA_VLAN_METHOD_BRIDGE
          && p->vlan_method != VA_VLAN_METHOD_OVS)
        {
          const Entry *v = g_hash_table_lookup (g->entries, "vlan");

          g_set_error (error, VA_ERROR, VA_ERROR_INVALID_CONFIG,
                       "%s: [%s] vlan: pool '%s' is kind=sriov with eswitch=switchdev, where the PF takes no VF VLAN: give it "
                       "vlan-method=bridge or ovs (and uplink-bridge)",
                       v ? v->file : g->file, g->name, p->name);
          return NULL;
        }
    }
  return g_steal_pointer (&self);
}

const VaPoolConfig *
va_config_lookup_pool (const VaConfig *self, const char *name)
{
  g_return_val_if_fail (self != NULL, NULL);
  g_return_val_if_fail (name != NULL, NULL);

  for (guint i = 0; i < self->pools->len; i++)
    {
      const VaPoolConfig *p = g_ptr_array_index (self->pools, i);
      if (strcmp (p->name, name) == 0)
        return p;
    }
  return NULL;
}

const VaNetworkConfig *
va_config_lookup_network (const VaConfig *self, const char *name)
{
  g_return_val_if_fail (self != NULL, NULL);
  g_return_val_if_fail (name != NULL, NULL);

  for (guint i = 0; i < self->networks->len; i++)
    {
      const VaNetworkConfig *n = g_ptr_array_index (self->networks, i);
      if (strcmp (n->net.name, name) == 0)
        return n;
    }
  return NULL;
}

VaHostView *
va_config_to_host_view (const VaConfig *self, const char *port_root)
{
  VaHostView *view;

  g_return_val_if_fail (self != NULL, NULL);
  g_return_val_if_fail (port_root != NULL, NULL);

  view = va_host_view_new (port_root);
  for (guint i = 0; i < self->pools->len; i++)
    {
      const VaPoolConfig *p = g_ptr_array_index (self->pools, i);
      va_host_view_add_pool (view, p->name, p->kind == VA_POOL_KIND_SRIOV ? 0 : p->max_vqp, -1);
      va_host_view_set_pool_kind (view, p->name, p->kind, NULL);
      va_host_view_set_pool_representor_vlan (
        view, p->name, p->kind == VA_POOL_KIND_SRIOV && (p->vlan_method == VA_VLAN_METHOD_BRIDGE || p->vlan_method == VA_VLAN_METHOD_OVS),
        NULL);
      /* type=software needs software-slots too: this is its one test */
      va_host_view_set_pool_software (view, p->name, p->software_slots > 0, NULL);
    }
  for (guint i = 0; i < self->networks->len; i++)
    {
      const VaNetworkConfig *n = g_ptr_array_index (self->networks, i);
      va_host_view_add_network (view, &n->net);
    }
  return view;
}
