/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "va-host-view"

#include "va-host-view.h"

#include <string.h>

#include "va-error.h"

typedef struct
{
  char *name;
  guint max_vqp;
  gint64 free;
  VaPoolKind kind;
  gboolean representor_vlan;
  gboolean software;
  char *why_full; /* NULL: none known */
} Pool;

struct _VaHostView
{
  gint ref_count;
  char *port_root;
  GPtrArray *networks; /* VaNetwork*, in insertion order */
  GHashTable *networks_by_name;
  GHashTable *pools; /* name → Pool* */
};

static void
network_free (VaNetwork *n)
{
  g_free (n->name);
  g_free (n->pool);
  g_free (n->bridge);
  g_free (n);
}

static void
pool_free (Pool *p)
{
  g_free (p->name);
  g_free (p->why_full);
  g_free (p);
}

VaHostView *
va_host_view_new (const char *port_root)
{
  VaHostView *self;

  g_return_val_if_fail (port_root != NULL, NULL);
  self = g_new0 (VaHostView, 1);
  self->ref_count = 1;
  self->port_root = g_strdup (port_root);
  self->networks = g_ptr_array_new_with_free_func ((GDestroyNotify) network_free);
  self->networks_by_name = g_hash_table_new (g_str_hash, g_str_equal);
  self->pools = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) pool_free);
  return self;
}

VaHostView *
va_host_view_ref (VaHostView *self)
{
  g_return_val_if_fail (self != NULL, NULL);

  g_atomic_int_inc (&self->ref_count);
  return self;
}

void
va_host_view_unref (VaHostView *self)
{
  if (!self || !g_atomic_int_dec_and_test (&self->ref_count))
    return;
  g_hash_table_unref (self->networks_by_name);
  g_ptr_array_unref (self->networks);
  g_hash_table_unref (self->pools);
  g_free (self->port_root);
  g_free (self);
}

const char *
va_host_view_get_port_root (const VaHostView *self)
{
  g_return_val_if_fail (self != NULL, NULL);

  return self->port_root;
}

void
va_host_view_add_network (VaHostView *self, const VaNetwork *network)
{
  VaNetwork *copy;
  VaNetwork *old;

  g_return_if_fail (self != NULL);
  g_return_if_fail (network != NULL && network->name != NULL);

  copy = g_new0 (VaNetwork, 1);
  *copy = *network;
  copy->name = g_strdup (network->name);
  copy->pool = g_strdup (network->pool);
  copy->bridge = g_strdup (network->bridge);

  old = g_hash_table_lookup (self->networks_by_name, network->name);
  if (old)
    {
      guint idx;
      g_ptr_array_find (self->networks, old, &idx);
      g_hash_table_remove (self->networks_by_name, old->name);
      g_ptr_array_remove_index (self->networks, idx);
    }
  g_ptr_array_add (self->networks, copy);
  g_hash_table_insert (self->networks_by_name, copy->name, copy);
}

const VaNetwork *
va_host_view_lookup_network (const VaHostView *self, const char *name)
{
  g_return_val_if_fail (self != NULL, NULL);
  g_return_val_if_fail (name != NULL, NULL);

  return g_hash_table_lookup (self->networks_by_name, name);
}

void
va_host_view_add_pool (VaHostView *self, const char *name, guint max_vqp, gint64 free)
{
  Pool *p;

  g_return_if_fail (self != NULL);
  g_return_if_fail (name != NULL);

  p = g_new0 (Pool, 1);
  p->name = g_strdup (name);
  p->max_vqp = max_vqp;
  p->free = free;
  g_hash_table_replace (self->pools, p->name, p);
}

gboolean
va_host_view_has_pool (const VaHostView *self, const char *name)
{
  g_return_val_if_fail (self != NULL, FALSE);
  g_return_val_if_fail (name != NULL, FALSE);

  return g_hash_table_contains (self->pools, name);
}

guint
va_host_view_get_pool_max_vqp (const VaHostView *self, const char *name)
{
  Pool *p;

  g_return_val_if_fail (self != NULL, 0);
  g_return_val_if_fail (name != NULL, 0);

  p = g_hash_table_lookup (self->pools, name);
  return p ? p->max_vqp : 0;
}

/* The pool a setter changes, or NULL with VA_ERROR_NO_SUCH_POOL. */
static Pool *
lookup_pool (const VaHostView *self, const char *name, GError **error)
{
  Pool *p = g_hash_table_lookup (self->pools, name);

  if (!p)
    g_set_error (error, VA_ERROR, VA_ERROR_NO_SUCH_POOL, "no pool named '%s'", name);
  return p;
}

gint64
va_host_view_get_pool_free (const VaHostView *self, const char *name)
{
  Pool *p;

  g_return_val_if_fail (self != NULL, 0);
  g_return_val_if_fail (name != NULL, 0);

  p = g_hash_table_lookup (self->pools, name);
  return p ? p->free : 0;
}

gboolean
va_host_view_set_pool_free (VaHostView *self, const char *name, gint64 free, GError **error)
{
  Pool *p;

  g_return_val_if_fail (self != NULL, FALSE);
  g_return_val_if_fail (name != NULL, FALSE);

  p = lookup_pool (self, name, error);
  if (!p)
    return FALSE;
  p->free = free;
  return TRUE;
}

gboolean
va_host_view_set_pool_why_full (VaHostView *self, const char *name, const char *why, GError **error)
{
  Pool *p;

  g_return_val_if_fail (self != NULL, FALSE);
  g_return_val_if_fail (name != NULL, FALSE);

  p = lookup_pool (self, name, error);
  if (!p)
    return FALSE;
  g_free (p->why_full);
  p->why_full = g_strdup (why);
  return TRUE;
}

const char *
va_host_view_get_pool_why_full (const VaHostView *self, const char *name)
{
  Pool *p;

  g_return_val_if_fail (self != NULL, NULL);
  g_return_val_if_fail (name != NULL, NULL);

  p = g_hash_table_lookup (self->pools, name);
  return p ? p->why_full : NULL;
}

gboolean
va_host_view_set_pool_kind (VaHostView *self, const char *name, VaPoolKind kind, GError **error)
{
  Pool *p;

  g_return_val_if_fail (self != NULL, FALSE);
  g_return_val_if_fail (name != NULL, FALSE);
  g_return_val_if_fail ((guint) kind < VA_POOL_KIND_LAST, FALSE);

  p = lookup_pool (self, name, error);
  if (!p)
    return FALSE;
  p->kind = kind;
  return TRUE;
}

VaPoolKind
va_host_view_get_pool_kind (const VaHostView *self, const char *name)
{
  Pool *p;

  g_return_val_if_fail (self != NULL, VA_POOL_KIND_VDPA);
  g_return_val_if_fail (name != NULL, VA_POOL_KIND_VDPA);

  p = g_hash_table_lookup (self->pools, name);
  return p ? p->kind : VA_POOL_KIND_VDPA;
}

gboolean
va_host_view_set_pool_representor_vlan (VaHostView *self, const char *name, gboolean representor_vlan, GError **error)
{
  Pool *p;

  g_return_val_if_fail (self != NULL, FALSE);
  g_return_val_if_fail (name != NULL, FALSE);

  p = lookup_pool (self, name, error);
  if (!p)
    return FALSE;
  p->representor_vlan = representor_vlan;
  return TRUE;
}

gboolean
va_host_view_get_pool_representor_vlan (const VaHostView *self, const char *name)
{
  Pool *p;

  g_return_val_if_fail (self != NULL, FALSE);
  g_return_val_if_fail (name != NULL, FALSE);

  p = g_hash_table_lookup (self->pools, name);
  return p && p->representor_vlan;
}

gboolean
va_host_view_set_pool_software (VaHostView *self, const char *name, gboolean software, GError **error)
{
  Pool *p;

  g_return_val_if_fail (self != NULL, FALSE);
  g_return_val_if_fail (name != NULL, FALSE);

  p = lookup_pool (self, name, error);
  if (!p)
    return FALSE;
  p->software = software;
  return TRUE;
}

gboolean
va_host_view_get_pool_software (const VaHostView *self, const char *name)
{
  Pool *p;

  g_return_val_if_fail (self != NULL, FALSE);
  g_return_val_if_fail (name != NULL, FALSE);

  p = g_hash_table_lookup (self->pools, name);
  return p && p->software;
}

VA_ENUM_IMPL (va_mode, VaMode,
              VA_MODE_LAST, [VA_MODE_VDPA] = "vdpa", [VA_MODE_VIRTIO] = "virtio", [VA_MODE_AUTO] = "auto", [VA_MODE_SRIOV] = "sriov")

VA_ENUM_IMPL (va_pool_kind, VaPoolKind, VA_POOL_KIND_LAST, [VA_POOL_KIND_VDPA] = "vdpa", [VA_POOL_KIND_SRIOV] = "sriov")

VA_ENUM_IMPL (va_bridge_kind, VaBridgeKind, VA_BRIDGE_LAST, [VA_BRIDGE_LINUX] = "linux", [VA_BRIDGE_OVS] = "ovs")

VA_ENUM_IMPL (va_form, VaForm, VA_FORM_LAST, [VA_FORM_ACCELERATED] = "accelerated", [VA_FORM_PORTABLE] = "portable")

char *
va_port_dir (const char *port_root, const char *uuid)
{
  g_return_val_if_fail (port_root != NULL && uuid != NULL, NULL);
  return g_build_filename (port_root, uuid, NULL);
}

char *
va_port_path (const char *port_root, const char *uuid, const char *mac)
{
  g_autofree char *dir = NULL;

  g_return_val_if_fail (port_root != NULL && uuid != NULL && mac != NULL, NULL);
  dir = va_port_dir (port_root, uuid);
  return g_build_filename (dir, mac, NULL);
}

gboolean
va_nic_resolve (const VaNic *nic, const VaHostView *view, VaNicPlan *plan, GError **error)
{
  g_return_val_if_fail (nic != NULL, FALSE);
  g_return_val_if_fail (view != NULL, FALSE);
  g_return_val_if_fail (plan != NULL, FALSE);

  memset (plan, 0, sizeof *plan);

  if (nic->network)
    {
      const VaNetwork *net = va_host_view_lookup_network (view, nic->network);

      if (!net)
        {
          g_set_error (error, VA_ERROR, VA_ERROR_NO_SUCH_NETWORK, "NIC %s: no network named '%s'", nic->mac, nic->network);
          return FALSE;
        }
      plan->mode = net->mode;
      plan->pool = net->pool;
      plan->vlan = net->vlan;
      plan->bridge = net->bridge;
      plan->bridge_kind = net->bridge_kind;

      if (nic->mode_set && nic->mode != net->mode)
        {
          /* A NIC may narrow its network's mode, never widen it. */
          gboolean allowed = (net->mode == VA_MODE_AUTO)
                             || ((net->mode == VA_MODE_VDPA || net->mode == VA_MODE_SRIOV) && nic->mode == VA_MODE_AUTO)
                             || (nic->mode == VA_MODE_VIRTIO && net->bridge);
          if (!allowed)
            {
              g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "NIC %s: network '%s' is mode %s and forbids mode %s", nic->mac,
                           net->name, va_mode_to_string (net->mode), va_mode_to_string (nic->mode));
              return FALSE;
            }
          plan->mode = nic->mode;
        }
    }
  else
    {
      plan->pool = nic->pool;
      plan->vlan = nic->vlan;
      plan->bridge = nic->bridge;
      plan->bridge_kind = nic->bridge_kind_set ? nic->bridge_kind : VA_BRIDGE_LINUX;
      /* an inline pool's kind says what a NIC without a mode asks for */
      if (nic->mode_set)
        plan->mode = nic->mode;
      else if (!nic->pool)
        plan->mode = VA_MODE_VIRTIO;
      else
        plan->mode = va_host_view_get_pool_kind (view, nic->pool) == VA_POOL_KIND_SRIOV ? VA_MODE_SRIOV : VA_MODE_VDPA;
    }

  if (plan->mode == VA_MODE_VIRTIO)
    plan->pool = NULL;
  else if (!plan->pool)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "NIC %s: mode %s needs a pool", nic->mac, va_mode_to_string (plan->mode));
      return FALSE;
    }
  if ((plan->mode == VA_MODE_AUTO || plan->mode == VA_MODE_VIRTIO) && !plan->bridge)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "NIC %s: mode %s needs a bridge", nic->mac, va_mode_to_string (plan->mode));
      return FALSE;
    }

  if (plan->pool)
    {
      guint max_vqp;

      if (!va_host_view_has_pool (view, plan->pool))
        {
          g_set_error (error, VA_ERROR, VA_ERROR_NO_SUCH_POOL, "NIC %s: no pool named '%s'", nic->mac, plan->pool);
          return FALSE;
        }
      plan->kind = va_host_view_get_pool_kind (view, plan->pool);
      if ((plan->mode == VA_MODE_VDPA && plan->kind != VA_POOL_KIND_VDPA)
          || (plan->mode == VA_MODE_SRIOV && plan->kind != VA_POOL_KIND_SRIOV))
        {
          g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "NIC %s: mode %s needs a pool of kind %s, and pool '%s' is kind %s",
                       nic->mac, va_mode_to_string (plan->mode), plan->mode == VA_MODE_SRIOV ? "sriov" : "vdpa", plan->pool,
                       va_pool_kind_to_string (plan->kind));
          return FALSE;
        }
      if (plan->kind == VA_POOL_KIND_SRIOV)
        {
          if (nic->queues)
            {
              g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT,
                           "NIC %s: queues=%u, but pool '%s' is kind sriov: the guest's own VF driver sets a VF's queues", nic->mac,
                           nic->queues, plan->pool);
              return FALSE;
            }
          plan->representor_vlan = va_host_view_get_pool_representor_vlan (view, plan->pool);
          /* a NIC that narrows to auto leaves failover: the plain
           * passthrough form, for a guest without a failover driver */
          if (nic->network && plan->mode == VA_MODE_SRIOV && plan->bridge)
            plan->failover = va_host_view_lookup_network (view, nic->network)->failover;
          return TRUE;
        }
      plan->software = va_host_view_get_pool_software (view, plan->pool) && plan->bridge;
      max_vqp = va_host_view_get_pool_max_vqp (view, plan->pool);
      plan->queues = nic->queues ? nic->queues : MAX (max_vqp, 1);
      if (max_vqp && plan->queues > max_vqp)
        {
          g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "NIC %s: asks for %u queues, pool '%s' allows %u", nic->mac,
                       plan->queues, plan->pool, max_vqp);
          return FALSE;
        }
    }
  else
    plan->queues = nic->queues;
  return TRUE;
}

gboolean
va_swap_back_outcome_is_valid (const char *outcome)
{
  return outcome
         && (strcmp (outcome, "no-room") == 0 || strcmp (outcome, "refused") == 0 || strcmp (outcome, "busy") == 0
             || strcmp (outcome, "lost") == 0);
}

gboolean
va_nic_swap_back_pending (const VaNic *nic)
{
  g_return_val_if_fail (nic != NULL, FALSE);

  return nic->swap_back && nic->form == VA_FORM_PORTABLE && (!nic->swap_back_outcome || strcmp (nic->swap_back_outcome, "busy") == 0);
}
