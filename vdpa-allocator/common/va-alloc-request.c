/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "va-alloc-request"

#include "va-alloc-request.h"

#include <string.h>

#include "va-error.h"
#include "va-ids.h"

/* Allocate's options: key, type, field, and the bounds of a number. A
 * number's bounds say what the daemon takes; vf_vlan and numa_node are
 * left to the allocator (0 and < 0 mean none). */
typedef struct
{
  const char *key;
  const char *type; /* "s", "q" or "i" */
  gsize offset;
  gint64 min, max;
  gssize with; /* >= 0: sent only with the string option at this offset (vf_vlan's 0 says "none") */
} Option;

static const Option options[] = {
  { "pool", "s", G_STRUCT_OFFSET (VaAllocRequest, pool), 0, 0, -1 },
  { "vlan", "q", G_STRUCT_OFFSET (VaAllocRequest, vlan), VA_VLAN_MIN, VA_VLAN_MAX, -1 },
  { "queues", "q", G_STRUCT_OFFSET (VaAllocRequest, queues), VA_QUEUES_MIN, VA_QUEUES_MAX, -1 },
  { "mtu", "q", G_STRUCT_OFFSET (VaAllocRequest, mtu), VA_MTU_MIN, VA_MTU_MAX, -1 },
  { "numa_node", "i", G_STRUCT_OFFSET (VaAllocRequest, numa_node), G_MININT32, G_MAXINT32, -1 },
  { "port", "s", G_STRUCT_OFFSET (VaAllocRequest, port), 0, 0, -1 },
  { "vf", "s", G_STRUCT_OFFSET (VaAllocRequest, vf), 0, 0, -1 },
  { "vf_vlan", "q", G_STRUCT_OFFSET (VaAllocRequest, vf_vlan), 0, G_MAXUINT16, G_STRUCT_OFFSET (VaAllocRequest, vf) },
  { "form", "s", G_STRUCT_OFFSET (VaAllocRequest, form), 0, 0, -1 },
};

#define FIELD(req, type, offset) ((type *) ((char *) (req) + (offset)))

static const Option *
lookup (const char *key)
{
  for (guint i = 0; i < G_N_ELEMENTS (options); i++)
    if (strcmp (options[i].key, key) == 0)
      return &options[i];
  return NULL;
}

/* Whether @o is set in @req, so sent. */
static gboolean
is_set (const VaAllocRequest *req, const Option *o)
{
  if (o->with >= 0)
    return *FIELD (req, const char *const, o->with) != NULL;
  switch (o->type[0])
    {
      case 's':
        return *FIELD (req, const char *const, o->offset) != NULL;
      case 'q':
        return *FIELD (req, const guint16, o->offset) != 0;
      case 'i':
        return *FIELD (req, const int, o->offset) >= 0;
      default:
        g_assert_not_reached ();
    }
}

GVariant *
va_alloc_request_options_to_variant (const VaAllocRequest *req)
{
  GVariantBuilder b;

  g_return_val_if_fail (req != NULL, NULL);

  g_variant_builder_init (&b, G_VARIANT_TYPE_VARDICT);
  for (guint i = 0; i < G_N_ELEMENTS (options); i++)
    {
      const Option *o = &options[i];
      GVariant *v;

      if (!is_set (req, o))
        continue;
      switch (o->type[0])
        {
          case 's':
            v = g_variant_new_string (*FIELD (req, const char *const, o->offset));
            break;
          case 'q':
            v = g_variant_new_uint16 (*FIELD (req, const guint16, o->offset));
            break;
          case 'i':
            v = g_variant_new_int32 (*FIELD (req, const int, o->offset));
            break;
          default:
            g_assert_not_reached ();
        }
      g_variant_builder_add (&b, "{sv}", o->key, v);
    }
  return g_variant_builder_end (&b);
}

GVariant *
va_alloc_request_to_variant (const VaAllocRequest *req)
{
  g_autofree char *name = NULL;

  g_return_val_if_fail (req != NULL, NULL);
  g_return_val_if_fail (req->uuid != NULL && req->mac != NULL, NULL);

  /* a bus string is UTF-8: any other name goes in its display form (the
   * daemon stores that form of any name) */
  name = va_domain_name_display (req->domain_name);
  return g_variant_new ("(ssss@a{sv})", req->uuid, name, req->mac, req->network ? req->network : "",
                        va_alloc_request_options_to_variant (req));
}

gboolean
va_alloc_request_options_from_variant (GVariant *dict, VaAllocRequest *req, GError **error)
{
  GVariantIter iter;
  const char *key;
  GVariant *value;

  g_return_val_if_fail (dict != NULL && g_variant_is_of_type (dict, G_VARIANT_TYPE_VARDICT), FALSE);
  g_return_val_if_fail (req != NULL, FALSE);

  g_variant_iter_init (&iter, dict);
  while (g_variant_iter_next (&iter, "{&sv}", &key, &value))
    {
      g_autoptr (GVariant) v = value;
      const Option *o = lookup (key);
      gint64 n;

      if (!o)
        {
          g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "unknown option '%.*s'", VA_CUT (key, 64));
          return FALSE;
        }
      if (!g_variant_is_of_type (v, G_VARIANT_TYPE (o->type)))
        {
          g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "option '%s' must be of type %s, not %s", key, o->type,
                       g_variant_get_type_string (v));
          return FALSE;
        }
      if (o->type[0] == 's')
        {
          /* borrowed: valid while @dict lives */
          *FIELD (req, const char *, o->offset) = g_variant_get_string (v, NULL);
          continue;
        }
      n = o->type[0] == 'q' ? g_variant_get_uint16 (v) : g_variant_get_int32 (v);
      /* present means set: 0 is no default here */
      if (n < o->min || n > o->max)
        {
          g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT,
                       "option '%s' is %" G_GINT64_FORMAT ", outside %" G_GINT64_FORMAT "..%" G_GINT64_FORMAT, key, n, o->min, o->max);
          return FALSE;
        }
      if (o->type[0] == 'q')
        *FIELD (req, guint16, o->offset) = (guint16) n;
      else
        *FIELD (req, int, o->offset) = (int) n;
    }
  return TRUE;
}

gboolean
va_alloc_request_from_variant (GVariant *params, VaAllocRequest *req, GError **error)
{
  g_autoptr (GVariant) dict = NULL;

  g_return_val_if_fail (params != NULL && req != NULL, FALSE);

  if (!g_variant_is_of_type (params, G_VARIANT_TYPE ("(ssssa{sv})")))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "the arguments must be of type (ssssa{sv}), not %s",
                   g_variant_get_type_string (params));
      return FALSE;
    }
  g_variant_get (params, "(&s&s&s&s@a{sv})", &req->uuid, &req->domain_name, &req->mac, &req->network, &dict);
  /* the strings of @dict live as long as @params, which holds it */
  return va_alloc_request_options_from_variant (dict, req, error);
}
