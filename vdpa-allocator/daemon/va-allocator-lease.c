/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "va-allocator-lease"

#include "config.h"

#include "va-allocator-private.h"

#include <glib/gstdio.h>

#include "va-software.h"
#include <string.h>

/* ---- allocate ------------------------------------------------------------ */

static gboolean
check_request (const VaAllocRequest *req, char uuid[VA_UUID_STRING_LEN], char mac[VA_MAC_STRING_LEN], GError **error)
{
  if (!va_uuid_check (req->uuid, uuid, error) || !va_mac_check (req->mac, mac, error))
    return FALSE;
  if (req->network && *req->network && !va_name_is_valid (req->network))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "'%.*s' is not a network name", VA_CUT (req->network, 64));
      return FALSE;
    }
  if (req->pool && *req->pool && !va_name_is_valid (req->pool))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "'%.*s' is not a pool name", VA_CUT (req->pool, 64));
      return FALSE;
    }
  if ((!req->network || !*req->network) && (!req->pool || !*req->pool))
    {
      g_set_error_literal (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "name a network, or a pool inline");
      return FALSE;
    }
  if (req->network && *req->network && req->pool && *req->pool)
    {
      g_set_error_literal (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "name a network or a pool, not both");
      return FALSE;
    }
  if (req->vlan > VA_VLAN_MAX)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "VLAN %u is outside %d..%d", req->vlan, VA_VLAN_MIN, VA_VLAN_MAX);
      return FALSE;
    }
  if (req->queues > VA_QUEUES_MAX)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "%u queues is outside %d..%d", req->queues, VA_QUEUES_MIN, VA_QUEUES_MAX);
      return FALSE;
    }
  if (req->vf && (!*req->vf || strlen (req->vf) > VA_SLOT_MAX))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "'%.*s' is not a VF's PCI address", VA_CUT (req->vf, 64));
      return FALSE;
    }
  if (req->vf_vlan > VA_VLAN_MAX)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "VLAN %u is outside %d..%d", req->vf_vlan, VA_VLAN_MIN, VA_VLAN_MAX);
      return FALSE;
    }
  if (req->form && strcmp (req->form, "hardware") != 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "form '%.*s' is not hardware, the one a caller may ask for",
                   VA_CUT (req->form, 64));
      return FALSE;
    }
  if (req->mtu && (req->mtu < VA_MTU_MIN || req->mtu > VA_MTU_MAX))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "MTU %u is outside %d..%d", req->mtu, VA_MTU_MIN, VA_MTU_MAX);
      return FALSE;
    }
  return TRUE;
}

/* What @req asks for on this host's configuration: its pool, VLAN and
 * queues in @plan; @network is NULL for an inline request. */
static gboolean
resolve (VaAllocator *self, const VaAllocRequest *req, const char *mac, const char **network, VaNicPlan *plan, GError **error)
{
  VaNic nic = { 0 };

  nic.mac = (char *) mac;
  nic.network = (req->network && *req->network) ? (char *) req->network : NULL;
  nic.pool = nic.network ? NULL : (char *) req->pool;
  nic.vlan = nic.network ? 0 : req->vlan;
  nic.queues = req->queues;
  if (!va_nic_resolve (&nic, self->view, plan, error))
    return FALSE;
  if (!plan->pool)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "network '%s' is virtio only: it has nothing to allocate", nic.network);
      return FALSE;
    }
  *network = req->network && *req->network ? req->network : NULL;
  return TRUE;
}

/* A kind=sriov pool's VF is libvirt's pick, reported by the hook at
 * start: never a vDPA device on it, and the VLAN libvirt applied must be
 * the NIC's. A failover NIC's VF (the transient member beside its
 * standby, plugged once the domain runs) is the daemon's pick instead:
 * no vf, and the plug gives libvirt the VF and VLAN of the lease. A
 * kind=vdpa pool takes no VF from outside. */
static gboolean
check_kind (const VaAllocRequest *req, const char *mac, const VaNicPlan *plan, GError **error)
{
  if (plan->kind != VA_POOL_KIND_SRIOV)
    {
      if (!req->vf)
        return TRUE;
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "NIC %s: pool %s is kind vdpa: it takes no VF passed through (%.*s)", mac,
                   plan->pool, VA_CUT (req->vf, 64));
      return FALSE;
    }
  if (!req->vf && plan->failover)
    return TRUE;
  if (!req->vf)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT,
                   "NIC %s: pool %s is kind sriov: libvirt passes its VFs through, and the lease names the VF it chose (option vf)", mac,
                   plan->pool);
      return FALSE;
    }
  if (plan->representor_vlan)
    {
      /* switchdev: mlx5 refuses VF VLANs, the VLAN is ours to apply */
      if (req->vf_vlan == 0)
        return TRUE;
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT,
                   "NIC %s: libvirt put VF %s on VLAN %u, but pool %s tags its representor (switchdev): the VF must carry none", mac,
                   req->vf, req->vf_vlan, plan->pool);
      return FALSE;
    }
  if (req->vf_vlan != plan->vlan)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "NIC %s: libvirt put VF %s on VLAN %u, but the NIC's intent is VLAN %u", mac,
                   req->vf, req->vf_vlan, plan->vlan);
      return FALSE;
    }
  return TRUE;
}

/* A NIC that holds a lease gets it back only for the same intent: a NIC
 * whose metadata moved to another VLAN must never start on the old one. */
static gboolean
same_intent (VaAllocator *self, const VaAllocRequest *req, const char *mac, const VaLease *lease, GError **error)
{
  const char *network = NULL;
  VaNicPlan plan;

  if (!resolve (self, req, mac, &network, &plan, error) || !check_kind (req, mac, &plan, error))
    return FALSE;
  if (req->form && lease->software)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_BUSY, "NIC %s of domain %s holds a software device (%s), and this asks for hardware only", mac,
                   lease->uuid, lease->device);
      return FALSE;
    }
  /* without vf (a failover NIC's): the VF it holds is the daemon's pick */
  if (lease->sriov && req->vf && g_strcmp0 (req->vf, lease->slot) != 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_BUSY, "NIC %s of domain %s holds a lease on VF %s; this names VF %s: release it first", mac,
                   lease->uuid, lease->slot, req->vf);
      return FALSE;
    }
  if (g_strcmp0 (network ? network : "", lease->network) == 0 && g_strcmp0 (plan.pool, lease->pool) == 0 && plan.vlan == lease->vlan
      && (plan.queues == lease->queues || lease->software))
    return TRUE;
  g_set_error (error, VA_ERROR, VA_ERROR_BUSY,
               "NIC %s of domain %s holds a lease on %s%s (pool %s, VLAN %u, %u queue pair(s)); this asks for %s%s (pool %s, VLAN %u, "
               "%u queue pair(s)): release it first",
               mac, lease->uuid, *lease->network ? "network " : "inline", lease->network, lease->pool, lease->vlan, lease->queues,
               network ? "network " : "inline", network ? network : "", plan.pool, plan.vlan, plan.queues);
  return FALSE;
}

void
va_allocator_software_request (VaAllocator *self, const char *mac, guint16 mtu, const VaNicPlan *plan, const VaPoolConfig *pc,
                               VaSoftwareRequest *sreq)
{
  memset (sreq, 0, sizeof *sreq);
  sreq->mac = mac;
  sreq->mtu = mtu ? mtu : pc->mtu;
  sreq->vlan = plan->vlan;
  sreq->bridge = plan->bridge;
  sreq->bridge_kind = plan->bridge_kind;
  sreq->relay_user = self->config->relay_user;
  sreq->relay_memory_mib = self->config->relay_memory_mib;
  sreq->pool = pc;
}

gboolean
va_allocator_resolve_lease (VaAllocator *self, const VaLease *lease, VaNicPlan *plan, GError **error)
{
  VaNic nic = { 0 };

  nic.mac = lease->mac;
  nic.network = *lease->network ? lease->network : NULL;
  nic.pool = nic.network ? NULL : lease->pool;
  nic.vlan = nic.network ? 0 : lease->vlan;
  nic.queues = lease->queues;
  return va_nic_resolve (&nic, self->view, plan, error);
}

/* A software device for a NIC whose pool has no free hardware slot (or
 * none at all: type=software), when the pool offers software slots and
 * the NIC's network has a fallback bridge for its tap. Its lease holds no
 * slot of the pool model: its slot is the device's name. */
static VaLease *
provision_software (VaAllocator *self, const VaAllocRequest *req, const char *uuid, const char *mac, const char *network,
                    const VaNicPlan *plan, const VaPoolConfig *pc, GError **error)
{
  VaSoftwareRequest sreq = { 0 };
  g_autoptr (VaDeviceInfo) dev = NULL;
  g_autoptr (VaLease) lease = NULL;
  guint used = va_allocator_software_leases (self, plan->pool, NULL);

  /* a software device is a lease on its network like any other */
  if (!va_pools_check_quota (self->pools, network, network ? va_allocator_software_leases (self, NULL, network) : 0, plan->pool, error))
    return NULL;
  if (used >= pc->software_slots)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_POOL_EXHAUSTED, "pool '%s': no free hardware slot, and its %u software slot(s) are in use",
                   plan->pool, pc->software_slots);
      return NULL;
    }
  va_allocator_software_request (self, mac, req->mtu, plan, pc, &sreq);
  dev = va_backend_create_software (self->backend, &sreq, error);
  if (!dev)
    {
      g_prefix_error (error, "pool '%s': ", plan->pool);
      return NULL;
    }
  g_info ("NIC %s of domain %s: pool '%s' has no free hardware slot: software device %s on bridge %s, VLAN %u", mac, uuid, plan->pool,
          dev->name, plan->bridge, plan->vlan);
  g_signal_emit (self, va_allocator_signals[SIGNAL_DEVICE_MADE], 0, plan->pool, dev);

  lease = va_lease_new ();
  lease->uuid = g_strdup (uuid);
  lease->domain_name = va_domain_name_display (req->domain_name);
  lease->mac = g_strdup (mac);
  lease->network = g_strdup (network ? network : "");
  lease->pool = g_strdup (plan->pool);
  lease->vlan = plan->vlan;
  lease->slot = g_strdup (dev->slot);
  lease->device = g_strdup (dev->name);
  lease->chardev = g_strdup (dev->chardev);
  lease->port = va_port_path (self->ports_dir, uuid, mac);
  lease->queues = 1; /* VDUSE serves one queue pair */
  lease->software = TRUE;
  if (!va_allocator_make_port_link (self, lease, error))
    {
      va_backend_destroy_software (self->backend, dev->name, NULL);
      return NULL;
    }
  return g_steal_pointer (&lease);
}

/* Whether a NIC that found no free hardware slot (@error) may get a
 * software device instead. */
static gboolean
software_fallback (VaAllocator *self, const VaPoolConfig *pc, const VaNicPlan *plan, const GError *error)
{
  g_autoptr (VaPoolStatus) st = NULL;

  /* the view's one test (va_nic_resolve()): the rewrite shares the
   * domain's memory for the same NICs */
  if (!pc || !plan->software)
    return FALSE;
  if (!g_error_matches (error, VA_ERROR, VA_ERROR_POOL_EXHAUSTED))
    return FALSE;
  /* a network at its quota is refused, not moved to software: the pool
   * has free slots, or provision_software() checks the quota */
  st = va_allocator_get_pool (self, plan->pool, NULL);
  return st && st->free == 0 && !st->draining;
}

/* A passed-through VF's spoofchk and trust, as its network says (an
 * inline NIC: spoofchk on, trust off). */
static gboolean
secure_vf (VaAllocator *self, const char *slot, const VaPoolConfig *pc, const char *network, GError **error)
{
  const VaNetworkConfig *n = network ? va_config_lookup_network (self->config, network) : NULL;

  if (!pc)
    return TRUE;
  return va_backend_secure_vf (self->backend, slot, pc, n ? n->spoofchk : TRUE, n ? n->trust : FALSE, error);
}

/* "match-pf=a,b match-vendor=15b3": the keys of @pc that pick its PFs,
 * for the refusal of a pool that no PF matches. */
char *
va_allocator_pool_match_keys (const VaPoolConfig *pc)
{
  GString *s = g_string_new (NULL);

  if (pc && pc->match_pf)
    {
      g_autofree char *v = g_strjoinv (",", pc->match_pf);
      g_string_append_printf (s, "%smatch-pf=%s", s->len ? " " : "", v);
    }
  if (pc && pc->match_pci)
    {
      g_autofree char *v = g_strjoinv (",", pc->match_pci);
      g_string_append_printf (s, "%smatch-pci=%s", s->len ? " " : "", v);
    }
  if (pc && pc->match_vendor)
    g_string_append_printf (s, "%smatch-vendor=%04x", s->len ? " " : "", pc->match_vendor);
  if (pc && pc->match_device)
    g_string_append_printf (s, "%smatch-device=%04x", s->len ? " " : "", pc->match_device);
  if (!s->len)
    g_string_append (s, "no match key: any PF of its type");
  return g_string_free (s, FALSE);
}

/* A free VF of a kind=sriov pool for a failover member: the pool's pick,
 * passing over a VF that someone holds although no lease does (libvirt's
 * hostdev network gave it to a start in progress, whose start begin has
 * not recorded it yet; or a host driver took it), each marked lost while
 * the next is picked, so that the pick ends within the pool's size. */
static const VaSlot *
pick_vf (VaAllocator *self, const VaPoolRequest *preq, gboolean *existed, GError **error)
{
  g_autoptr (GPtrArray) passed = g_ptr_array_new_with_free_func (g_free);
  const VaSlot *slot;

  for (;;)
    {
      const char *address;

      slot = va_pools_allocate (self->pools, preq, existed, error);
      if (!slot || *existed)
        break;
      address = va_slot_get_address (slot);
      if (va_backend_vf_holder (self->backend, address, NULL) == VA_VF_NOBODY)
        break;
      g_ptr_array_add (passed, g_strdup (address));
      va_pools_release (self->pools, preq->uuid, preq->mac, NULL);
      va_pools_set_slot_lost (self->pools, address, TRUE, NULL);
      slot = NULL;
    }
  for (guint i = 0; i < passed->len; i++)
    va_pools_set_slot_lost (self->pools, g_ptr_array_index (passed, i), FALSE, NULL);
  return slot;
}

static VaLease *
provision (VaAllocator *self, const VaAllocRequest *req, const char *uuid, const char *mac, GError **error)
{
  const char *network = NULL;
  VaNicPlan plan;
  VaPoolRequest preq = { 0 };
  VaDeviceRequest dreq = { 0 };
  const VaPoolConfig *pc;
  const VaSlot *slot;
  gboolean existed = FALSE;
  g_autoptr (VaDeviceInfo) dev = NULL;
  g_autoptr (VaLease) lease = NULL;
  g_autoptr (GError) local = NULL;

  if (!resolve (self, req, mac, &network, &plan, error) || !check_kind (req, mac, &plan, error))
    return NULL;
  pc = va_config_lookup_pool (self->config, plan.pool);

  preq.uuid = uuid;
  preq.mac = mac;
  preq.pool = plan.pool;
  preq.network = network;
  preq.network_others = network ? va_allocator_software_leases (self, NULL, network) : 0;
  preq.numa_node = req->numa_node;
  preq.slot = req->vf;
  slot = plan.kind == VA_POOL_KIND_SRIOV && !req->vf ? pick_vf (self, &preq, &existed, &local)
                                                     : va_pools_allocate (self->pools, &preq, &existed, &local);
  if (!slot && !req->vf && software_fallback (self, pc, &plan, local))
    {
      if (!req->form)
        return provision_software (self, req, uuid, mac, network, &plan, pc, error);
      g_set_error (error, VA_ERROR, VA_ERROR_POOL_EXHAUSTED,
                   "pool '%s' has no free hardware slot, and the NIC is hardware only (a software device was not asked for)", plan.pool);
      return NULL;
    }
  if (!slot)
    {
      VaPoolCounts c;

      g_propagate_error (error, g_steal_pointer (&local));
      if (error && g_error_matches (*error, VA_ERROR, VA_ERROR_POOL_EXHAUSTED) && (!pc || pc->type != VA_POOL_TYPE_SOFTWARE)
          && va_pools_get_counts (self->pools, plan.pool, &c, NULL) && c.pfs == 0)
        {
          /* empty, not full: say which keys matched nothing */
          g_autofree char *keys = va_allocator_pool_match_keys (pc);

          g_clear_error (error);
          g_set_error (error, VA_ERROR, VA_ERROR_POOL_EXHAUSTED,
                       "no PF matches pool %s (%s); 'vdpactl dev list' shows the PFs and why each is in no pool", plan.pool, keys);
        }
      return NULL;
    }

  lease = va_lease_new ();
  lease->uuid = g_strdup (uuid);
  /* informational: any name libvirt accepts, never refused */
  lease->domain_name = va_domain_name_display (req->domain_name);
  lease->mac = g_strdup (mac);
  lease->network = g_strdup (network ? network : "");
  lease->pool = g_strdup (plan.pool);
  lease->vlan = plan.vlan;
  if (plan.kind == VA_POOL_KIND_SRIOV)
    {
      /* libvirt bound the VF and set its MAC and VLAN (or, for a failover
       * member, will at its plug, from this lease): a record only */
      lease->sriov = TRUE;
      lease->slot = g_strdup (va_slot_get_address (slot));
      lease->device = g_strdup ("");
      lease->chardev = g_strdup ("");
      lease->port = g_strdup ("");
      /* fail closed: the guest must not reach the bridge off its VLAN, nor
       * send from another MAC where the eswitch can stop it (libvirt
       * never sets spoofchk) */
      if (va_pool_config_representor_vlan (pc) ? !va_backend_attach_vf (self->backend, lease->slot, pc, mac, plan.vlan, error)
                                               : !secure_vf (self, lease->slot, pc, network, error))
        {
          va_pools_release (self->pools, uuid, mac, NULL);
          g_prefix_error (error, "pool '%s': ", plan.pool);
          return NULL;
        }
      return g_steal_pointer (&lease);
    }

  dreq.slot = va_slot_get_address (slot);
  dreq.pf = va_slot_get_pf (slot);
  dreq.mac = mac;
  dreq.queues = plan.queues;
  dreq.mtu = req->mtu ? req->mtu : (pc ? pc->mtu : 0);
  dreq.vlan = plan.vlan;
  dreq.pool = pc;
  dev = va_backend_create_device (self->backend, &dreq, error);
  if (!dev)
    {
      va_pools_release (self->pools, uuid, mac, NULL);
      g_prefix_error (error, "pool '%s': ", plan.pool);
      return NULL;
    }
  g_debug ("device %s on %s: create %.1f ms, bind %.1f ms, node %.1f ms, vlan %.1f ms", dev->name, dev->slot,
           dev->step_us[VA_DEVICE_STEP_CREATE] / 1e3, dev->step_us[VA_DEVICE_STEP_BIND] / 1e3, dev->step_us[VA_DEVICE_STEP_NODE] / 1e3,
           dev->step_us[VA_DEVICE_STEP_VLAN] / 1e3);
  g_signal_emit (self, va_allocator_signals[SIGNAL_DEVICE_MADE], 0, plan.pool, dev);

  lease->slot = g_strdup (dev->slot);
  lease->device = g_strdup (dev->name);
  lease->chardev = g_strdup (dev->chardev);
  lease->port = va_port_path (self->ports_dir, uuid, mac);
  lease->queues = plan.queues;

  if (!va_allocator_make_port_link (self, lease, error))
    {
      va_backend_destroy_device (self->backend, dev->slot, dev->name, pc, NULL);
      va_pools_release (self->pools, uuid, mac, NULL);
      return NULL;
    }
  return g_steal_pointer (&lease);
}

void
va_allocator_allocate_async (VaAllocator *self, const VaAllocRequest *req, GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr (GTask) task = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *key = NULL;
  char uuid[VA_UUID_STRING_LEN], mac[VA_MAC_STRING_LEN];
  Entry *e;
  VaLease *lease;
  GPtrArray *keys;

  g_return_if_fail (VA_IS_ALLOCATOR (self));
  g_return_if_fail (req != NULL);

  task = g_task_new (self, NULL, callback, user_data);
  g_task_set_source_tag (task, va_allocator_allocate_async);
  if (!check_request (req, uuid, mac, &error))
    {
      g_task_return_error (task, g_steal_pointer (&error));
      return;
    }

  if (req->port)
    {
      g_autofree char *port = va_port_path (self->ports_dir, uuid, mac);

      if (strcmp (req->port, port) != 0)
        {
          g_task_return_new_error (task, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "<source dev='%.*s'/> is not the NIC's port path %s",
                                   VA_CUT (req->port, 200), port);
          return;
        }
    }
  key = va_allocator_make_key (uuid, mac);
  e = va_allocator_lookup_entry (self, key);
  if (e && e->state != ENTRY_RELEASING && !same_intent (self, req, mac, e->lease, &error))
    {
      g_task_return_error (task, g_steal_pointer (&error));
      return;
    }
  if (e)
    {
      switch (e->state)
        {
          case ENTRY_COMMITTED:
            /* idempotent: the same NIC gets its lease back */
            if (!e->broken && !va_allocator_make_port_link (self, e->lease, &error))
              {
                g_task_return_error (task, g_steal_pointer (&error));
                return;
              }
            g_task_return_pointer (task, va_lease_copy (e->lease), (GDestroyNotify) va_lease_free);
            return;
          case ENTRY_PENDING:
            g_ptr_array_add (e->waiters, g_steal_pointer (&task));
            return;
          case ENTRY_RELEASING:
            g_task_return_new_error (task, VA_ERROR, VA_ERROR_TRY_AGAIN, "NIC %s of domain %s is being released", mac, uuid);
            return;
        }
    }

  lease = provision (self, req, uuid, mac, &error);
  if (!lease)
    {
      g_task_return_error (task, g_steal_pointer (&error));
      return;
    }

  e = va_allocator_entry_new (g_steal_pointer (&key), lease, ENTRY_PENDING);
  e->waiters = g_ptr_array_new_with_free_func (g_object_unref);
  g_ptr_array_add (e->waiters, g_steal_pointer (&task));
  va_allocator_insert_entry (self, e);

  keys = g_ptr_array_new_with_free_func (g_free);
  g_ptr_array_add (keys, g_strdup (e->key));
  va_allocator_queue_pending (self, PENDING_INSERT, va_store_queue_insert (self->store, lease), keys, NULL);
}

VaLease *
va_allocator_allocate_finish (VaAllocator *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);

  return g_task_propagate_pointer (G_TASK (result), error);
}

/* ---- release ------------------------------------------------------------- */

/* Whether a process (a guest's QEMU) holds the lease's device open. Then
 * it must not go: the kernel's vdpa DEV_DEL waits until the node is closed
 * (vhost_vdpa_remove), and the daemon with it. */
gboolean
va_allocator_in_use (VaAllocator *self, const Entry *e, GError **error)
{
  /* kind=sriov: libvirt holds the VF while it passes it through (from
   * before QEMU starts until after it stops): a lease given back then
   * would be offered to the next start, and on a switchdev pool its
   * representor would leave the bridge under the running guest */
  if (e->lease->sriov)
    {
      if (va_backend_vf_holder (self->backend, e->lease->slot, NULL) != VA_VF_LIBVIRT)
        return FALSE;
      g_set_error (error, VA_ERROR, VA_ERROR_BUSY,
                   "NIC %s of domain %s: its VF %s is passed through (libvirt holds it): a guest runs on it; stop the domain first",
                   e->lease->mac, e->lease->uuid, e->lease->slot);
      return TRUE;
    }
  if (e->broken || !*e->lease->chardev || !va_backend_device_busy (self->backend, e->lease->chardev))
    return FALSE;
  g_set_error (error, VA_ERROR, VA_ERROR_BUSY, "NIC %s of domain %s: its device %s (%s) is open: a guest runs on it; stop the domain first",
               e->lease->mac, e->lease->uuid, e->lease->device, e->lease->chardev);
  return TRUE;
}

char *
va_allocator_host_held_line (const char *slot, const char *driver)
{
  return g_strdup_printf ("VF %s is bound to host driver %s: in use by the host, not offered", slot, driver ? driver : "(unknown)");
}

void
va_allocator_release_async (VaAllocator *self, const char *in_uuid, const char *in_mac, GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr (GTask) task = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *key = NULL;
  char uuid[VA_UUID_STRING_LEN], mac[VA_MAC_STRING_LEN];
  Entry *e;
  GPtrArray *keys;

  g_return_if_fail (VA_IS_ALLOCATOR (self));

  task = g_task_new (self, NULL, callback, user_data);
  g_task_set_source_tag (task, va_allocator_release_async);
  if (!va_uuid_check (in_uuid, uuid, &error))
    {
      g_task_return_error (task, g_steal_pointer (&error));
      return;
    }
  if (!va_mac_check (in_mac, mac, &error))
    {
      g_task_return_error (task, g_steal_pointer (&error));
      return;
    }

  key = va_allocator_make_key (uuid, mac);
  e = va_allocator_lookup_entry (self, key);
  if (e && e->state == ENTRY_PENDING && !va_allocator_commit_now (self, &error))
    {
      g_task_return_error (task, g_steal_pointer (&error));
      return;
    }
  e = va_allocator_lookup_entry (self, key);
  if (!e)
    {
      /* idempotent; a stale link from before a crash goes too */
      va_allocator_remove_port_link (self, uuid, mac, FALSE);
      g_task_return_boolean (task, TRUE);
      return;
    }
  if (e->state == ENTRY_RELEASING)
    {
      /* a ReleaseDomain settling takes the entry without waiters */
      if (!e->waiters)
        e->waiters = g_ptr_array_new_with_free_func (g_object_unref);
      g_ptr_array_add (e->waiters, g_steal_pointer (&task));
      return;
    }
  if (va_allocator_in_use (self, e, &error))
    {
      g_task_return_error (task, g_steal_pointer (&error));
      return;
    }

  e->state = ENTRY_RELEASING;
  e->waiters = g_ptr_array_new_with_free_func (g_object_unref);
  g_ptr_array_add (e->waiters, g_steal_pointer (&task));
  keys = g_ptr_array_new_with_free_func (g_free);
  g_ptr_array_add (keys, g_steal_pointer (&key));
  va_allocator_queue_pending (self, PENDING_DELETE, va_store_queue_delete (self->store, uuid, mac), keys, NULL);
}

gboolean
va_allocator_release_finish (VaAllocator *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);

  return g_task_propagate_boolean (G_TASK (result), error);
}

static gboolean
has_pending_of (VaAllocator *self, const char *uuid)
{
  GHashTableIter iter;
  Entry *e;

  g_hash_table_iter_init (&iter, self->entries);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &e))
    if (e->state != ENTRY_COMMITTED && strcmp (e->lease->uuid, uuid) == 0)
      return TRUE;
  return FALSE;
}

/* Queues the deletion of every lease of @uuid; NULL task: settled quietly. */
gboolean
va_allocator_queue_release_domain (VaAllocator *self, const char *uuid, GTask *task, GError **error)
{
  GHashTableIter iter;
  Entry *e;
  GPtrArray *keys;

  if (has_pending_of (self, uuid) && !va_allocator_commit_now (self, error))
    return FALSE;
  /* all or nothing: no lease of a domain whose guest still runs */
  g_hash_table_iter_init (&iter, self->entries);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &e))
    if (strcmp (e->lease->uuid, uuid) == 0 && va_allocator_in_use (self, e, error))
      return FALSE;

  keys = g_ptr_array_new_with_free_func (g_free);
  g_hash_table_iter_init (&iter, self->entries);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &e))
    if (strcmp (e->lease->uuid, uuid) == 0)
      {
        e->state = ENTRY_RELEASING;
        g_ptr_array_add (keys, g_strdup (e->key));
      }
  va_allocator_queue_pending (self, PENDING_DELETE_DOMAIN, va_store_queue_delete_domain (self->store, uuid), keys, task);
  return TRUE;
}

void
va_allocator_release_domain_async (VaAllocator *self, const char *in_uuid, GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr (GTask) task = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = NULL;
  char uuid[VA_UUID_STRING_LEN];

  g_return_if_fail (VA_IS_ALLOCATOR (self));

  task = g_task_new (self, NULL, callback, user_data);
  g_task_set_source_tag (task, va_allocator_release_domain_async);
  if (!va_uuid_check (in_uuid, uuid, &error) || !va_allocator_queue_release_domain (self, uuid, task, &error))
    {
      g_task_return_error (task, g_steal_pointer (&error));
      return;
    }
  /* links of leases lost before a crash go with the domain's directory */
  dir = va_port_dir (self->ports_dir, uuid);
  if (g_file_test (dir, G_FILE_TEST_IS_DIR))
    {
      g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
      const char *name;
      while (d && (name = g_dir_read_name (d)))
        {
          g_autofree char *key = va_allocator_make_key (uuid, name);
          if (!g_hash_table_contains (self->entries, key))
            {
              g_autofree char *path = g_build_filename (dir, name, NULL);
              g_unlink (path);
            }
        }
      g_rmdir (dir);
    }
}

gint
va_allocator_release_domain_finish (VaAllocator *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), -1);

  return (gint) g_task_propagate_int (G_TASK (result), error);
}

gint
va_allocator_claim (VaAllocator *self, const char *in_uuid, GError **error)
{
  GHashTableIter iter;
  Entry *e;
  char uuid[VA_UUID_STRING_LEN];
  gint n = 0;

  g_return_val_if_fail (VA_IS_ALLOCATOR (self), -1);
  g_return_val_if_fail (error == NULL || *error == NULL, -1);

  if (!va_uuid_check (in_uuid, uuid, error))
    return -1;
  g_hash_table_iter_init (&iter, self->entries);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &e))
    {
      if (strcmp (e->lease->uuid, uuid) != 0 || e->state == ENTRY_RELEASING)
        continue;
      if (!e->broken && !va_allocator_make_port_link (self, e->lease, error))
        return -1;
      n++;
    }
  return n;
}
