/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "va-lease"

#include "va-lease.h"

#include <stddef.h>
#include <string.h>

#include "va-error.h"
#include "va-ids.h"

VaLease *
va_lease_new (void)
{
  return g_new0 (VaLease, 1);
}

VaLease *
va_lease_copy (const VaLease *lease)
{
  VaLease *copy;

  g_return_val_if_fail (lease != NULL, NULL);

  copy = g_new0 (VaLease, 1);
  copy->uuid = g_strdup (lease->uuid);
  copy->domain_name = g_strdup (lease->domain_name);
  copy->mac = g_strdup (lease->mac);
  copy->network = g_strdup (lease->network);
  copy->pool = g_strdup (lease->pool);
  copy->slot = g_strdup (lease->slot);
  copy->device = g_strdup (lease->device);
  copy->chardev = g_strdup (lease->chardev);
  copy->port = g_strdup (lease->port);
  copy->vlan = lease->vlan;
  copy->queues = lease->queues;
  copy->created = lease->created;
  copy->sriov = lease->sriov;
  copy->software = lease->software;
  return copy;
}

void
va_lease_free (VaLease *lease)
{
  if (!lease)
    return;
  g_free (lease->uuid);
  g_free (lease->domain_name);
  g_free (lease->mac);
  g_free (lease->network);
  g_free (lease->pool);
  g_free (lease->slot);
  g_free (lease->device);
  g_free (lease->chardev);
  g_free (lease->port);
  g_free (lease);
}

gboolean
va_lease_equal (const VaLease *a, const VaLease *b)
{
  g_return_val_if_fail (a != NULL && b != NULL, FALSE);

  return g_strcmp0 (a->uuid, b->uuid) == 0 && g_strcmp0 (a->domain_name, b->domain_name) == 0 && g_strcmp0 (a->mac, b->mac) == 0
         && g_strcmp0 (a->network, b->network) == 0 && g_strcmp0 (a->pool, b->pool) == 0 && g_strcmp0 (a->slot, b->slot) == 0
         && g_strcmp0 (a->device, b->device) == 0 && g_strcmp0 (a->chardev, b->chardev) == 0 && g_strcmp0 (a->port, b->port) == 0
         && a->vlan == b->vlan && a->queues == b->queues && a->created == b->created && !a->sriov == !b->sriov
         && !a->software == !b->software;
}

/* ---- checks -------------------------------------------------------------- */

/* Printable ASCII of at most @max bytes; empty allowed unless @required. */
static gboolean
check_string (const char *field, const char *value, gsize max, gboolean required, GError **error)
{
  gsize len;

  if (!value)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "lease field %s is missing", field);
      return FALSE;
    }
  len = strlen (value);
  if (required && len == 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "lease field %s is empty", field);
      return FALSE;
    }
  if (len > max)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT,
                   "lease field %s is %" G_GSIZE_FORMAT " bytes long, more than %" G_GSIZE_FORMAT, field, len, max);
      return FALSE;
    }
  for (const char *c = value; *c; c++)
    if (!g_ascii_isprint (*c))
      {
        g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "lease field %s holds a non-printable or non-ASCII byte", field);
        return FALSE;
      }
  return TRUE;
}

static gboolean
check_path (const char *field, const char *value, GError **error)
{
  if (!check_string (field, value, VA_PATH_MAX, FALSE, error))
    return FALSE;
  if (*value && *value != '/')
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "lease field %s is not an absolute path: %s", field, value);
      return FALSE;
    }
  return TRUE;
}

/* va-ids' checks, and the canonical form they give: the store keys on it. */
static gboolean
check_id (const char *field, const char *value, const char *canon, GError **error)
{
  if (strcmp (value, canon) != 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "lease field %s is not in canonical lower case: %.*s", field,
                   VA_CUT (value, 64));
      return FALSE;
    }
  return TRUE;
}

gboolean
va_lease_check_key (const char *uuid, const char *mac, GError **error)
{
  char canon_uuid[VA_UUID_STRING_LEN], canon_mac[VA_MAC_STRING_LEN];

  if (!va_uuid_check (uuid, canon_uuid, error))
    {
      g_prefix_error (error, "lease field uuid: ");
      return FALSE;
    }
  if (!check_id ("uuid", uuid, canon_uuid, error))
    return FALSE;
  if (mac && !va_mac_check (mac, canon_mac, error))
    {
      g_prefix_error (error, "lease field mac: ");
      return FALSE;
    }
  return !mac || check_id ("mac", mac, canon_mac, error);
}

gboolean
va_lease_validate (const VaLease *lease, GError **error)
{
  g_return_val_if_fail (lease != NULL, FALSE);

  if (!lease->mac)
    {
      g_set_error_literal (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "lease field mac is missing");
      return FALSE;
    }
  if (!va_lease_check_key (lease->uuid, lease->mac, error))
    return FALSE;
  if (!lease->domain_name)
    {
      g_set_error_literal (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "lease field domain_name is missing");
      return FALSE;
    }
  /* any name libvirt accepts, in the form va_domain_name_display() gives */
  if (!va_domain_name_is_display (lease->domain_name))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT,
                   "lease field domain_name is not a domain name's display form (UTF-8 of at most %d bytes, control characters "
                   "escaped)",
                   VA_DOMAIN_NAME_MAX);
      return FALSE;
    }
  if (!check_string ("network", lease->network, VA_NAME_MAX, FALSE, error) || !check_string ("pool", lease->pool, VA_NAME_MAX, TRUE, error)
      || !check_string ("slot", lease->slot, VA_SLOT_MAX, TRUE, error) || !check_string ("device", lease->device, VA_NAME_MAX, FALSE, error)
      || !check_path ("chardev", lease->chardev, error) || !check_path ("port", lease->port, error))
    return FALSE;
  if (*lease->network && !va_name_is_valid (lease->network))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "lease field network is not a valid name: %s", lease->network);
      return FALSE;
    }
  if (!va_name_is_valid (lease->pool))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "lease field pool is not a valid name: %s", lease->pool);
      return FALSE;
    }
  if (lease->vlan > VA_VLAN_MAX)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "lease field vlan is %u, more than %u", lease->vlan, VA_VLAN_MAX);
      return FALSE;
    }
  if (lease->sriov && (*lease->device || *lease->chardev || *lease->port || lease->queues))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT,
                   "a lease of kind sriov has no device, chardev, port or queues of ours: libvirt passes its VF through");
      return FALSE;
    }
  if (lease->sriov && lease->software)
    {
      g_set_error_literal (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "a lease of kind sriov has no software form: it is a VF");
      return FALSE;
    }
  if (!lease->sriov && (lease->queues < VA_QUEUES_MIN || lease->queues > VA_QUEUES_MAX))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "lease field queues is %u, not within %u..%u", lease->queues, VA_QUEUES_MIN,
                   VA_QUEUES_MAX);
      return FALSE;
    }
  if (lease->created < 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "lease field created is negative");
      return FALSE;
    }
  return TRUE;
}

/* ---- on the bus ---------------------------------------------------------- */

/* Every key of the record, its type and its field: the one spelling of a
 * lease on the bus. "kind" is the sriov flag, "form" the software flag. */
static const struct
{
  const char *key;
  char type; /* 's', 'q', 't', 'k' for kind, 'f' for form */
  gsize offset;
} lease_keys[] = {
  { "uuid", 's', G_STRUCT_OFFSET (VaLease, uuid) },     { "domain_name", 's', G_STRUCT_OFFSET (VaLease, domain_name) },
  { "mac", 's', G_STRUCT_OFFSET (VaLease, mac) },       { "network", 's', G_STRUCT_OFFSET (VaLease, network) },
  { "pool", 's', G_STRUCT_OFFSET (VaLease, pool) },     { "slot", 's', G_STRUCT_OFFSET (VaLease, slot) },
  { "device", 's', G_STRUCT_OFFSET (VaLease, device) }, { "chardev", 's', G_STRUCT_OFFSET (VaLease, chardev) },
  { "port", 's', G_STRUCT_OFFSET (VaLease, port) },     { "vlan", 'q', G_STRUCT_OFFSET (VaLease, vlan) },
  { "queues", 'q', G_STRUCT_OFFSET (VaLease, queues) }, { "created", 't', G_STRUCT_OFFSET (VaLease, created) },
  { "kind", 'k', G_STRUCT_OFFSET (VaLease, sriov) },    { "form", 'f', G_STRUCT_OFFSET (VaLease, software) },
};

#define FIELD(lease, type, offset) ((type *) ((char *) (lease) + (offset)))

/* The keys as variants, made once and shared (a variant is immutable, its
 * count atomic: the workers that answer ListLeases use them too). */
static GVariant *const *
key_variants (void)
{
  static GVariant **keys;

  if (g_once_init_enter (&keys))
    {
      GVariant **made = g_new (GVariant *, G_N_ELEMENTS (lease_keys));

      for (guint i = 0; i < G_N_ELEMENTS (lease_keys); i++)
        made[i] = g_variant_ref_sink (g_variant_new_string (lease_keys[i].key));
      g_once_init_leave (&keys, made);
    }
  return keys;
}

GVariant *
va_lease_to_variant (const VaLease *lease)
{
  GVariant *const *keys = key_variants ();
  GVariant *entries[G_N_ELEMENTS (lease_keys)];

  g_return_val_if_fail (lease != NULL, NULL);

  /* the entries made directly from the shared keys, not through a
   * builder's format strings: each Allocate and lease signal builds one
   * (this halved its cost) */
  for (guint i = 0; i < G_N_ELEMENTS (lease_keys); i++)
    {
      gsize off = lease_keys[i].offset;
      GVariant *v = NULL;

      switch (lease_keys[i].type)
        {
          case 's':
            {
              const char *s = *FIELD (lease, char *const, off);
              v = g_variant_new_string (s ? s : "");
              break;
            }
          case 'q':
            v = g_variant_new_uint16 (*FIELD (lease, const guint16, off));
            break;
          case 't':
            v = g_variant_new_uint64 ((guint64) *FIELD (lease, const gint64, off));
            break;
          case 'k':
            v = g_variant_new_string (VA_LEASE_KIND (lease));
            break;
          case 'f':
            v = g_variant_new_string (VA_LEASE_FORM (lease));
            break;
          default:
            g_assert_not_reached ();
        }
      entries[i] = g_variant_new_dict_entry (keys[i], g_variant_new_variant (v));
    }
  return g_variant_new_array (G_VARIANT_TYPE ("{sv}"), entries, G_N_ELEMENTS (entries));
}

VaLease *
va_lease_from_variant (GVariant *dict, GError **error)
{
  g_autoptr (VaLease) lease = va_lease_new ();

  g_return_val_if_fail (dict != NULL && g_variant_is_of_type (dict, G_VARIANT_TYPE_VARDICT), NULL);

  for (guint i = 0; i < G_N_ELEMENTS (lease_keys); i++)
    {
      const char *key = lease_keys[i].key;
      gsize off = lease_keys[i].offset;
      const char *want = lease_keys[i].type == 'k' || lease_keys[i].type == 'f' ? "s" : (char[]){ lease_keys[i].type, '\0' };
      g_autoptr (GVariant) v = g_variant_lookup_value (dict, key, NULL);

      /* a daemon from before the software form sends none: hardware */
      if (!v && lease_keys[i].type == 'f')
        continue;
      if (!v)
        {
          g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "lease field %s is missing", key);
          return NULL;
        }
      if (!g_variant_is_of_type (v, G_VARIANT_TYPE (want)))
        {
          g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "lease field %s must be of type %s, not %s", key, want,
                       g_variant_get_type_string (v));
          return NULL;
        }
      switch (lease_keys[i].type)
        {
          case 's':
            *FIELD (lease, char *, off) = g_variant_dup_string (v, NULL);
            break;
          case 'q':
            *FIELD (lease, guint16, off) = g_variant_get_uint16 (v);
            break;
          case 't':
            if (g_variant_get_uint64 (v) > G_MAXINT64)
              {
                g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "lease field %s is out of range", key);
                return NULL;
              }
            *FIELD (lease, gint64, off) = (gint64) g_variant_get_uint64 (v);
            break;
          case 'k':
            {
              const char *kind = g_variant_get_string (v, NULL);

              if (strcmp (kind, "sriov") != 0 && strcmp (kind, "vdpa") != 0)
                {
                  g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "lease field kind is '%.*s', not vdpa or sriov",
                               VA_CUT (kind, 64));
                  return NULL;
                }
              lease->sriov = strcmp (kind, "sriov") == 0;
              break;
            }
          case 'f':
            {
              const char *form = g_variant_get_string (v, NULL);

              if (strcmp (form, "software") != 0 && strcmp (form, "hardware") != 0)
                {
                  g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "lease field form is '%.*s', not hardware or software",
                               VA_CUT (form, 64));
                  return NULL;
                }
              lease->software = strcmp (form, "software") == 0;
              break;
            }
          default:
            g_assert_not_reached ();
        }
    }
  if (!va_lease_validate (lease, error))
    return NULL;
  return g_steal_pointer (&lease);
}
