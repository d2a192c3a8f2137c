/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The kernel backend: what an operator would type on a ConnectX-6 Dx host,
 * done with libudev and sysfs (va-kernel.c) and netlink (va-netlink.c).
 *
 * Per PF (prepare_pf): the eswitch mode first, then sriov_numvfs, since
 * mlx5 cannot change the mode of a PF that has VFs: a mode change goes
 * through 0 VFs and remakes them. Per lease (create_device): DEV_NEW on the
 * VF's management device pci/<VF>, named va-<VF> so that a restarted daemon
 * knows its own devices; bound to vhost_vdpa with driver_override and
 * drivers_probe while the vdpa bus autoprobe is off, so that no other vdpa
 * driver (virtio_vdpa) can take it first; its vhost-vdpa-N node given the
 * pool's group and mode; then the pool's VLAN method. Every error is one line
 * naming the device and the step.
 *
 * After start, a libudev monitor on the "pci" and "net" subsystems follows
 * ConnectX devices (the ID_VDPA_ALLOCATOR property the udev rules set, or
 * vendor 15b3), and on "vduse" the VDUSE test pool's devices, on the
 * thread-default main context of the backend's creation; so does an
 * rtnetlink link monitor for the PFs' link state, since a carrier change
 * sends no uevent. A burst of events (a PF and its netdev and VFs appear
 * together) is followed, once it settles, by one "pfs-changed". */
#define G_LOG_DOMAIN "va-backend-kernel"

#include "va-backend-kernel.h"

#include <errno.h>
#include <glib-unix.h>
#include <glib/gstdio.h>
#include <libudev.h>
#include <stdio.h>
#include <net/if.h>
#include <string.h>

#include "va-error.h"
#include "va-kernel.h"
#include "va-netlink.h"
#include "va-software.h"
#include "va-sysfs.h"

struct _VaBackendKernel
{
  VaBackend parent;
  char *run_dir;
  GPtrArray *pfs; /* VaKernelPf*, from the last discovery */
  struct udev *udev;
  struct udev_monitor *monitor;
  GMainContext *context;
  GSource *monitor_source;
  GSource *settle_source; /* pending "pfs-changed", while a burst goes on */
  VaNlMonitor *links;
  GSource *links_source;
  GHashTable *relays;          /* software device name → Relay* */
  GMainContext *relay_context; /* where relays' exits and restarts run */
};

G_DECLARE_FINAL_TYPE (VaBackendKernel, va_backend_kernel, VA, BACKEND_KERNEL, VaBackend)
G_DEFINE_TYPE (VaBackendKernel, va_backend_kernel, VA_TYPE_BACKEND)

#define VDPA_AUTOPROBE "/sys/bus/vdpa/drivers_autoprobe"
/* How long the uevents of one change take to settle: a PF's pci uevent
 * comes before its netdev's, and its VFs' after both. */
#define SETTLE_MS 100

char *
va_backend_kernel_device_name (const char *slot)
{
  g_return_val_if_fail (slot != NULL, NULL);

  return g_strdup_printf ("va-%s", slot);
}

static gboolean
rediscover (VaBackendKernel *self, GError **error)
{
  GPtrArray *pfs = va_kernel_discover (error);

  if (!pfs)
    return FALSE;
  g_clear_pointer (&self->pfs, g_ptr_array_unref);
  self->pfs = pfs;
  return TRUE;
}

static VaKernelPf *
lookup_pf (VaBackendKernel *self, const char *pci)
{
  for (guint i = 0; self->pfs && i < self->pfs->len; i++)
    {
      VaKernelPf *pf = g_ptr_array_index (self->pfs, i);
      if (strcmp (pf->pci, pci) == 0)
        return pf;
    }
  return NULL;
}

static VaKernelPf *
lookup_pf_by_netdev (VaBackendKernel *self, const char *netdev)
{
  for (guint i = 0; self->pfs && i < self->pfs->len; i++)
    {
      VaKernelPf *pf = g_ptr_array_index (self->pfs, i);
      if (g_strcmp0 (pf->netdev, netdev) == 0)
        return pf;
    }
  return NULL;
}

static gboolean
lookup_vf_once (VaBackendKernel *self, const char *slot, VaKernelPf **pf_out, VaKernelVf **vf_out)
{
  for (guint i = 0; self->pfs && i < self->pfs->len; i++)
    {
      VaKernelPf *pf = g_ptr_array_index (self->pfs, i);

      for (guint k = 0; k < pf->vfs->len; k++)
        {
          VaKernelVf *vf = g_ptr_array_index (pf->vfs, k);
          if (strcmp (vf->pci, slot) == 0)
            {
              *pf_out = pf;
              *vf_out = vf;
              return TRUE;
            }
        }
    }
  return FALSE;
}

/* The PF and VF of @slot, looking again when the last discovery had no
 * such VF (representors appear after their VFs). */
static gboolean
lookup_vf (VaBackendKernel *self, const char *slot, VaKernelPf **pf, VaKernelVf **vf, GError **error)
{
  g_autoptr (GError) local = NULL;

  if (lookup_vf_once (self, slot, pf, vf))
    return TRUE;
  if (!rediscover (self, &local))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "VF %s: %s", slot, local->message);
      return FALSE;
    }
  if (lookup_vf_once (self, slot, pf, vf))
    return TRUE;
  g_set_error (error, VA_ERROR, VA_ERROR_NOT_FOUND, "VF %s: not a VF of any ConnectX PF on this host", slot);
  return FALSE;
}

/* The slots, and beside them why each cannot carry vDPA (NULL when none
 * has a reason). */
static GPtrArray *
vf_addresses (const VaKernelPf *kpf, GPtrArray **reasons)
{
  GPtrArray *vfs = g_ptr_array_new_full (kpf->vfs->len, g_free);
  gboolean any = FALSE;

  g_clear_pointer (reasons, g_ptr_array_unref);
  *reasons = g_ptr_array_new_full (kpf->vfs->len, g_free);
  for (guint k = 0; k < kpf->vfs->len; k++)
    {
      const VaKernelVf *vf = g_ptr_array_index (kpf->vfs, k);

      g_ptr_array_add (vfs, g_strdup (vf->pci));
      g_ptr_array_add (*reasons, g_strdup (vf->reason));
      any = any || vf->reason;
    }
  if (!any)
    g_clear_pointer (reasons, g_ptr_array_unref);
  return vfs;
}

/* The eswitch mode as devlink names it, or NULL when not known. */
static const char *
eswitch_name (const VaKernelPf *kpf)
{
  switch (kpf->eswitch)
    {
      case VA_KERNEL_ESWITCH_LEGACY:
        return "legacy";
      case VA_KERNEL_ESWITCH_SWITCHDEV:
        return "switchdev";
      default:
        return NULL;
    }
}

static GPtrArray *
kernel_discover (VaBackend *backend, GError **error)
{
  VaBackendKernel *self = VA_BACKEND_KERNEL (backend);
  GPtrArray *out;

  if (!rediscover (self, error))
    return NULL;
  out = g_ptr_array_new_with_free_func ((GDestroyNotify) va_pf_info_free);
  for (guint i = 0; i < self->pfs->len; i++)
    {
      const VaKernelPf *kpf = g_ptr_array_index (self->pfs, i);
      VaPfInfo *pf = g_new0 (VaPfInfo, 1);

      /* pools select PFs by netdev name; one without a netdev is still
       * listed, by address, so that its reason shows */
      pf->name = g_strdup (kpf->netdev ? kpf->netdev : kpf->pci);
      pf->pci = g_strdup (kpf->pci);
      pf->vendor = kpf->vendor;
      pf->device = kpf->device;
      pf->numa_node = kpf->numa_node;
      pf->healthy = kpf->reason == NULL;
      pf->health_reason = g_strdup (kpf->reason);
      pf->health_code = kpf->code;
      pf->vfs = vf_addresses (kpf, &pf->vf_reasons);
      pf->vduse_test = va_kernel_pf_is_vduse (kpf);
      pf->netdevsim_test = va_kernel_pf_is_netdevsim (kpf);
      pf->sriov_only = !va_kernel_pf_is_connectx (kpf);
      pf->sriov_reason = g_strdup (kpf->sriov_reason);
      pf->sriov_code = kpf->sriov_code;
      pf->eswitch_seen = 1 + (int) kpf->eswitch + (kpf->not_manager ? 10 : 0);
      pf->model = g_strdup (kpf->model ? kpf->model->name : NULL);
      pf->eswitch = g_strdup (eswitch_name (kpf));
      g_ptr_array_add (out, pf);
    }
  return out;
}

/* Why the VF count or eswitch mode of @kpf must not change now, or NULL:
 * leases on its VFs, or a vdpa device on one (sriov_numvfs=0 would block
 * in vhost_vdpa_remove while QEMU holds the node). */
static char *
change_refused (const VaKernelPf *kpf, const VaPfInfo *pf)
{
  for (guint i = 0; i < kpf->vfs->len; i++)
    {
      const VaKernelVf *vf = g_ptr_array_index (kpf->vfs, i);
      g_autofree char *vdpa = va_kernel_pf_vf_vdpa (kpf, vf);

      if (vdpa)
        return g_strdup_printf ("vdpa device %s sits on VF %s", vdpa, vf->pci);
    }
  if (pf->leases)
    return g_strdup_printf ("%u lease(s) on its VFs", pf->leases);
  return NULL;
}

/* The change both kinds of pool make to a PF whose eswitch mode or VF
 * count differs from the pool's: refused while anything sits on its VFs,
 * else the VFs go first (mlx5 refuses a mode change while VFs exist, and
 * netdevsim drops to legacy when they go in switchdev mode), then the mode
 * is read again and set where it differs. The caller makes the new VFs. */
static gboolean
change_pf (VaKernelPf *kpf, const VaPfInfo *pf, const VaPoolConfig *pool, gboolean change_mode, guint want_vfs, gboolean reprobe,
           GError **error)
{
  gboolean want_switchdev = pool->eswitch == VA_ESWITCH_SWITCHDEV;
  g_autoptr (GString) change = g_string_new (NULL);
  g_autoptr (GError) local = NULL;
  g_autofree char *busy = NULL;

  if (change_mode)
    g_string_append_printf (change, "its eswitch mode to %s", va_eswitch_mode_to_string (pool->eswitch));
  if (want_vfs != kpf->numvfs)
    g_string_append_printf (change, "%ssriov_numvfs from %u to %u", change->len ? " and " : "", kpf->numvfs, want_vfs);
  if (reprobe)
    g_string_append_printf (change, "%sits VFs' driver (made without one, for a kind=sriov pool)", change->len ? " and " : "");
  if ((busy = change_refused (kpf, pf)))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_BUSY, "PF %s: refusing to change %s: %s", kpf->pci, change->str, busy);
      return FALSE;
    }
  if (kpf->numvfs && !va_kernel_set_numvfs (kpf, 0, &local))
    {
      g_set_error (error, local->domain, local->code, "PF %s: removing its VFs to change %s: %s", kpf->pci, change->str, local->message);
      return FALSE;
    }
  /* a mode that cannot be read (a PF without devlink: legacy only) is left */
  if (pool->eswitch != VA_ESWITCH_UNCHANGED && kpf->eswitch != VA_KERNEL_ESWITCH_UNKNOWN)
    {
      gboolean now_switchdev = FALSE;

      /* read again: removing the VFs may have changed it */
      if (!va_kernel_eswitch_get (kpf, &now_switchdev, &local)
          || (now_switchdev != want_switchdev && !va_kernel_eswitch_set (kpf, want_switchdev, &local)))
        {
          g_set_error (error, VA_ERROR, local->code == VA_ERROR_NOT_FOUND ? VA_ERROR_PROVISIONING_FAILED : local->code,
                       "PF %s: setting eswitch mode %s: %s", kpf->pci, va_eswitch_mode_to_string (pool->eswitch), local->message);
          return FALSE;
        }
    }
  return TRUE;
}

static gboolean prepare_sriov (VaBackendKernel *self, VaKernelPf *kpf, VaPfInfo *pf, const VaPoolConfig *pool, GError **error);
static gboolean refresh_pf (VaBackendKernel *self, VaPfInfo *pf, gboolean sriov, GError **error);

static gboolean prepare_vdpa (VaBackendKernel *self, VaKernelPf *kpf, VaPfInfo *pf, const VaPoolConfig *pool, GError **error);
static gboolean make_vfs (VaBackendKernel *self, VaKernelPf *kpf, VaPfInfo *pf, guint want_vfs, GError **error);

/* Where the pool's VLAN goes, against the PF's eswitch as read now (never
 * as configured: a PF may be in switchdev with eswitch unset). libvirt's
 * <vlan> for a kind=sriov pool's VF, and vlan-method=vst, set the VLAN
 * through the PF (ndo_set_vf_vlan), which mlx5 takes only in legacy mode
 * and only on its eswitch manager
 * (drivers/net/ethernet/mellanox/mlx5/core/esw/legacy.c,
 * mlx5_eswitch_set_vport_vlan, Linux 6.1 and 6.12: EOPNOTSUPP in switchdev
 * for a non-zero VLAN, EPERM where mlx5_esw_allowed fails). One line that
 * says what to set, or NULL. */
static char *
vlan_place_refused (const VaKernelPf *kpf, const VaPoolConfig *pool)
{
  g_autofree char *what = NULL;

  if (pool->vlan_method == VA_VLAN_METHOD_VST)
    what = g_strdup ("vlan-method=vst");
  else if (pool->kind == VA_POOL_KIND_SRIOV && pool->vlan_method == VA_VLAN_METHOD_NONE && pool->vlan_network_vlan)
    what = g_strdup_printf ("network %s's VLAN %u goes to libvirt's <vlan>", pool->vlan_network, pool->vlan_network_vlan);
  else
    return NULL;
  if (kpf->not_manager)
    return g_strdup_printf ("PF %s is not its eswitch manager (a BlueField in DPU mode) and takes no VF VLAN, but %s: tag on the Arm "
                            "side's representor and give the pool's networks no vlan, or put the card in NIC mode",
                            kpf->pci, what);
  if (kpf->eswitch == VA_KERNEL_ESWITCH_SWITCHDEV)
    return g_strdup_printf ("PF %s is in eswitch mode switchdev and takes no VF VLAN, but %s: set vlan-method=bridge or ovs with "
                            "uplink-bridge in [pool %s], or eswitch=legacy",
                            kpf->pci, what, pool->name);
  return NULL;
}

/* The daemon's record of the VFs it took as a kind=vdpa pool's slots on a
 * PF: RUN_DIR/vdpa-vfs/PCI, a line "VF IFINDEX" per VF then bound to
 * mlx5_core with its vdpa management device, IFINDEX its netdev's. A VF on
 * mlx5_core is the host's to a kind=sriov pool (issue 25, point 6), so
 * when the PF moves to one, only the VFs this record names, still on the
 * same binding (the same netdev: a rebind makes a new ifindex, and a
 * netdev moved into a container leaves the host's sysfs), are let go of.
 * It lives in the run directory, as long as the VFs themselves: a reboot
 * drops both. */
#define VDPA_VFS_RECORD_MAX 65536

static char *
vdpa_vfs_record (VaBackendKernel *self, const char *pf)
{
  return g_build_filename (self->run_dir, "vdpa-vfs", pf, NULL);
}

/* After a kind=vdpa preparation: every VF of @kpf that is a vdpa slot now.
 * A failure is a log line: the record only spares an operator an unbind
 * later. */
static void
record_vdpa_vfs (VaBackendKernel *self, const VaKernelPf *kpf)
{
  g_autofree char *path = vdpa_vfs_record (self, kpf->pci);
  g_autofree char *dir = g_path_get_dirname (path);
  g_autoptr (GString) text = g_string_new (NULL);
  g_autoptr (GError) local = NULL;

  for (guint i = 0; i < kpf->vfs->len; i++)
    {
      const VaKernelVf *vf = g_ptr_array_index (kpf->vfs, i);
      g_autofree char *driver = va_kernel_pci_driver (vf->pci);
      int ifindex = va_kernel_vf_ifindex (kpf, vf);

      if (!vf->reason && ifindex && g_strcmp0 (driver, "mlx5_core") == 0)
        g_string_append_printf (text, "%s %d\n", vf->pci, ifindex);
    }
  if (text->len == 0)
    g_unlink (path);
  else if (g_mkdir_with_parents (dir, 0700) != 0
           || !g_file_set_contents_full (path, text->str, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0600, &local))
    g_warning ("PF %s: recording its kind=vdpa VFs in %s: %s", kpf->pci, path, local ? local->message : g_strerror (errno));
}

/* A kind=sriov preparation of a PF that served a kind=vdpa pool (autoprobe
 * is off already): each VF that record_vdpa_vfs() named, on the same
 * binding of mlx5_core and with no vdpa device on it, is unbound, as a
 * kind=sriov pool makes its VFs; any other VF on a host driver stays the
 * host's. The VFs left (a vdpa device on one) stay in the record for the
 * next preparation. */
static gboolean
release_vdpa_vfs (VaBackendKernel *self, const VaKernelPf *kpf, GError **error)
{
  g_autofree char *path = vdpa_vfs_record (self, kpf->pci);
  g_autofree char *text = NULL;
  g_autoptr (GString) kept = g_string_new (NULL);
  g_auto (GStrv) lines = NULL;
  gsize len = 0;

  if (!g_file_get_contents (path, &text, &len, NULL))
    return TRUE;
  /* ours, but bounded all the same */
  lines = g_strsplit (len <= VDPA_VFS_RECORD_MAX ? text : "", "\n", 1024);
  for (guint i = 0; lines[i]; i++)
    {
      g_auto (GStrv) f = g_strsplit (lines[i], " ", 3);
      gint64 recorded = 0;

      if (g_strv_length (f) != 2 || !g_ascii_string_to_signed (f[1], 10, 1, G_MAXINT32, &recorded, NULL))
        continue;
      for (guint k = 0; k < kpf->vfs->len; k++)
        {
          const VaKernelVf *vf = g_ptr_array_index (kpf->vfs, k);
          g_autofree char *driver = NULL;
          g_autofree char *vdpa = NULL;

          if (strcmp (vf->pci, f[0]) != 0)
            continue;
          driver = va_kernel_pci_driver (vf->pci);
          if (g_strcmp0 (driver, "mlx5_core") != 0 || va_kernel_vf_ifindex (kpf, vf) != recorded)
            break; /* unbound already, or bound again by someone: not ours */
          if ((vdpa = va_kernel_pf_vf_vdpa (kpf, vf)))
            {
              g_string_append_printf (kept, "%s\n", lines[i]);
              break;
            }
          if (!va_kernel_vf_unbind (vf->pci, error))
            return FALSE;
          g_message ("PF %s: VF %s let go of mlx5_core, which bound it for a kind=vdpa pool: a kind=sriov pool passes it through", kpf->pci,
                     vf->pci);
          break;
        }
    }
  if (kept->len == 0)
    g_unlink (path);
  else
    g_file_set_contents_full (path, kept->str, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0600, NULL);
  return TRUE;
}

static gboolean
kernel_prepare_pf (VaBackend *backend, VaPfInfo *pf, const VaPoolConfig *pool, GError **error)
{
  VaBackendKernel *self = VA_BACKEND_KERNEL (backend);
  VaKernelPf *kpf = lookup_pf (self, pf->pci);
  g_autofree char *refused = NULL;

  if (!kpf)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_NOT_FOUND, "PF %s: gone since discovery", pf->pci);
      return FALSE;
    }
  if (!(pool->kind == VA_POOL_KIND_SRIOV ? prepare_sriov (self, kpf, pf, pool, error) : prepare_vdpa (self, kpf, pf, pool, error)))
    return FALSE;
  /* the mode as it is now, after any change: a rediscovery may have
   * replaced the PF's record */
  kpf = lookup_pf (self, pf->pci);
  if (kpf && pool->kind == VA_POOL_KIND_VDPA && kpf->model->vdpa && !va_kernel_pf_is_vduse (kpf) && !va_kernel_pf_is_netdevsim (kpf))
    record_vdpa_vfs (self, kpf);
  if (kpf && (refused = vlan_place_refused (kpf, pool)))
    {
      g_set_error_literal (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, refused);
      return FALSE;
    }
  return TRUE;
}

static gboolean
prepare_vdpa (VaBackendKernel *self, VaKernelPf *kpf, VaPfInfo *pf, const VaPoolConfig *pool, GError **error)
{
  gboolean change_mode, want_switchdev;
  guint want_vfs;

  if (!kpf->model->vdpa)
    return TRUE; /* discovery gave the reason; nothing to make on it */
  if (va_kernel_pf_is_vduse (kpf))
    return TRUE; /* its servers made its devices */

  want_switchdev = pool->eswitch == VA_ESWITCH_SWITCHDEV;
  if (pool->eswitch != VA_ESWITCH_UNCHANGED && kpf->eswitch == VA_KERNEL_ESWITCH_UNKNOWN)
    {
      /* never guess from phys_switch_id: a legacy PF has one too */
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED,
                   "PF %s: eswitch=%s, but its mode cannot be read, so its VFs and mode stay as they are: %s", kpf->pci,
                   va_eswitch_mode_to_string (pool->eswitch), kpf->eswitch_error);
      return FALSE;
    }
  change_mode = pool->eswitch != VA_ESWITCH_UNCHANGED && want_switchdev != (kpf->eswitch == VA_KERNEL_ESWITCH_SWITCHDEV);
  want_vfs = pool->vfs ? pool->vfs : kpf->numvfs;
  /* the VFs must bind mlx5_core: its vnet auxiliary device is the vdpa
   * management device. A PF that served a kind=sriov pool has
   * sriov_drivers_autoprobe 0 and VFs without a driver: whenever the PF
   * is prepared, not only when VFs are made, autoprobe follows the kind,
   * and such VFs are made again so that mlx5_core probes them. */
  if (!va_kernel_pf_is_netdevsim (kpf))
    {
      g_autofree char *path = g_build_filename (kpf->syspath, "sriov_drivers_autoprobe", NULL);
      g_autofree char *autoprobe = va_sysfs_read (path, NULL);

      gboolean driverless = FALSE;

      for (guint i = 0; i < kpf->vfs->len; i++)
        driverless = driverless || !((VaKernelVf *) g_ptr_array_index (kpf->vfs, i))->netdev;
      if (g_strcmp0 (autoprobe, "0") == 0 && !va_kernel_set_vf_autoprobe (kpf, TRUE, error))
        return FALSE;
      /* VFs bound by hand are left as they are */
      if (g_strcmp0 (autoprobe, "0") == 0 && driverless)
        {
          if (!change_pf (kpf, pf, pool, change_mode, want_vfs, TRUE, error))
            {
              /* refused (leases on them): autoprobe as it was, so that
               * the next try sees the same */
              va_kernel_set_vf_autoprobe (kpf, FALSE, NULL);
              return FALSE;
            }
          return make_vfs (self, kpf, pf, want_vfs, error);
        }
    }
  if (!change_mode && want_vfs == kpf->numvfs)
    return TRUE;
  if (!change_pf (kpf, pf, pool, change_mode, want_vfs, FALSE, error))
    return FALSE;
  if (want_vfs && !va_kernel_pf_is_netdevsim (kpf) && !va_kernel_set_vf_autoprobe (kpf, TRUE, error))
    return FALSE;
  return make_vfs (self, kpf, pf, want_vfs, error);
}

/* After change_pf: the pool's VFs, which are its slots. */
static gboolean
make_vfs (VaBackendKernel *self, VaKernelPf *kpf, VaPfInfo *pf, guint want_vfs, GError **error)
{
  if (want_vfs && !va_kernel_set_numvfs (kpf, want_vfs, error))
    return FALSE;

  /* the VFs just made are the pool's slots */
  return refresh_pf (self, pf, FALSE, error);
}

/* The PF's VFs after a change, as the pool's slots; for a kind=sriov
 * pool, with its passthrough health. */
static gboolean
refresh_pf (VaBackendKernel *self, VaPfInfo *pf, gboolean sriov, GError **error)
{
  g_autoptr (GError) local = NULL;
  VaKernelPf *kpf;

  if (!rediscover (self, &local))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "PF %s: after setting it up: %s", pf->pci, local->message);
      return FALSE;
    }
  kpf = lookup_pf (self, pf->pci);
  if (!kpf)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_NOT_FOUND, "PF %s: gone while setting it up", pf->pci);
      return FALSE;
    }
  g_ptr_array_unref (pf->vfs);
  pf->vfs = vf_addresses (kpf, &pf->vf_reasons);
  g_free (pf->eswitch);
  pf->eswitch = g_strdup (eswitch_name (kpf));
  if (sriov)
    {
      g_clear_pointer (&pf->vf_reasons, g_ptr_array_unref);
      g_free (pf->sriov_reason);
      pf->sriov_reason = g_strdup (kpf->sriov_reason);
      pf->sriov_code = kpf->sriov_code;
    }
  return TRUE;
}

/* A kind=sriov pool's PF: its VFs are passed through whole, so none needs
 * a driver on the host (sriov_drivers_autoprobe 0 before they are made:
 * libvirt's managed hostdev binds vfio-pci itself and, with no host driver
 * to give the VF back to, restores its admin MAC and VLAN exactly), and
 * the PF's link must be up (libvirt refuses to set a VF of a PF that is
 * not online). A PF without devlink (igb) is legacy SR-IOV only: no error
 * unless the pool asks eswitch=switchdev. */
static gboolean
prepare_sriov (VaBackendKernel *self, VaKernelPf *kpf, VaPfInfo *pf, const VaPoolConfig *pool, GError **error)
{
  g_autoptr (GError) local = NULL;
  gboolean want_switchdev = pool->eswitch == VA_ESWITCH_SWITCHDEV;
  gboolean change_mode = FALSE;
  guint want_vfs = pool->vfs ? pool->vfs : kpf->numvfs;
  guint have_vfs = kpf->numvfs;
  g_autofree char *autoprobe_path = NULL;
  g_autofree char *autoprobe = NULL;

  if (va_kernel_pf_is_vduse (kpf) || va_kernel_pf_is_netdevsim (kpf))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "PF %s: a test PF has no PCI VFs to pass through", kpf->pci);
      return FALSE;
    }
  if (!kpf->totalvfs)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "PF %s: no SR-IOV: sriov_totalvfs is 0", kpf->pci);
      return FALSE;
    }
  if (pool->eswitch != VA_ESWITCH_UNCHANGED && kpf->eswitch == VA_KERNEL_ESWITCH_UNKNOWN)
    {
      if (kpf->no_devlink && !want_switchdev)
        ; /* legacy is all it has */
      else if (kpf->no_devlink)
        {
          g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "PF %s: eswitch=switchdev, but %s", kpf->pci, kpf->eswitch_error);
          return FALSE;
        }
      else
        {
          g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED,
                       "PF %s: eswitch=%s, but its mode cannot be read, so its VFs and mode stay as they are: %s", kpf->pci,
                       va_eswitch_mode_to_string (pool->eswitch), kpf->eswitch_error);
          return FALSE;
        }
    }
  else if (pool->eswitch != VA_ESWITCH_UNCHANGED)
    change_mode = want_switchdev != (kpf->eswitch == VA_KERNEL_ESWITCH_SWITCHDEV);

  if (change_mode || want_vfs != have_vfs)
    {
      if (!change_pf (kpf, pf, pool, change_mode, want_vfs, FALSE, error))
        return FALSE;
      have_vfs = 0;
    }
  /* before the VFs exist: a host driver that probed one would hold it
   * until libvirt unbinds it, and take it back after */
  autoprobe_path = g_build_filename (kpf->syspath, "sriov_drivers_autoprobe", NULL);
  autoprobe = va_sysfs_read (autoprobe_path, NULL);
  if (g_strcmp0 (autoprobe, "0") != 0 && !va_kernel_set_vf_autoprobe (kpf, FALSE, error))
    return FALSE;
  if (want_vfs != have_vfs && !va_kernel_set_numvfs (kpf, want_vfs, error))
    return FALSE;
  /* VFs made just now have no driver; older ones that a kind=vdpa pool of
   * ours had on mlx5_core are let go of */
  if (have_vfs && !release_vdpa_vfs (self, kpf, error))
    return FALSE;
  if (!have_vfs)
    {
      g_autofree char *record = vdpa_vfs_record (self, kpf->pci);

      g_unlink (record);
    }
  if (!kpf->netdev)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "PF %s: no netdev: no driver bound to the PF", kpf->pci);
      return FALSE;
    }
  if (!kpf->admin_up && !va_nl_link_set_up (kpf->netdev, &local))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "PF %s: %s", kpf->pci, local->message);
      return FALSE;
    }
  return refresh_pf (self, pf, TRUE, error);
}

static gboolean
parse_mac (const char *text, guint8 mac[6])
{
  unsigned b[6];
  char tail;

  if (!text || sscanf (text, "%2x:%2x:%2x:%2x:%2x:%2x%c", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &tail) != 6)
    return FALSE;
  for (guint i = 0; i < 6; i++)
    mac[i] = (guint8) b[i];
  return TRUE;
}

static gboolean
ovs_vsctl (const char *who, const char *step, const char *const *args, GError **error)
{
  g_autofree char *prog = g_find_program_in_path ("ovs-vsctl");
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_autofree char *err = NULL;
  g_autoptr (GError) local = NULL;
  int status;

  if (!prog)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED,
                   "%s: %s: ovs-vsctl is not installed (vlan-method=ovs needs Open vSwitch: apt install openvswitch-switch)", who, step);
      return FALSE;
    }
  g_ptr_array_add (argv, prog);
  g_ptr_array_add (argv, (gpointer) "--timeout=5");
  for (guint i = 0; args[i]; i++)
    g_ptr_array_add (argv, (gpointer) args[i]);
  g_ptr_array_add (argv, NULL);
  if (!g_spawn_sync (NULL, (char **) argv->pdata, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL, &err, &status, &local))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "%s: %s: running ovs-vsctl: %s", who, step, local->message);
      return FALSE;
    }
  if (!g_spawn_check_wait_status (status, NULL))
    {
      g_strdelimit (g_strstrip (err), "\n", ' ');
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "%s: %s: ovs-vsctl failed: %s", who, step, *err ? err : "no message");
      return FALSE;
    }
  return TRUE;
}

static const char *
need_representor (const VaKernelPf *pf, const VaKernelVf *vf, const char *who, const char *method, GError **error)
{
  if (vf->representor)
    return vf->representor;
  if (pf->eswitch_error)
    g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "%s: vlan-method=%s: VF %s has no representor: %s", who, method, vf->pci,
                 pf->eswitch_error);
  else if (pf->eswitch == VA_KERNEL_ESWITCH_SWITCHDEV)
    g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED,
                 "%s: vlan-method=%s: VF %s has no representor: devlink lists no pcivf port with its number", who, method, vf->pci);
  else
    g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED,
                 "%s: vlan-method=%s: VF %s has no representor: the PF's eswitch is not in switchdev mode", who, method, vf->pci);
  return NULL;
}

static gboolean
prefixed (GError **error, GError *local, const char *who)
{
  g_set_error (error, local->domain, local->code, "%s: %s", who, local->message);
  return FALSE;
}

/* The bridge's vlan_default_pvid (net/bridge/br_sysfs_br.c), or NULL with
 * the error. */
static guint16 *
bridge_default_pvid (const char *bridge, const char *who, GError **error)
{
  g_autofree char *path = g_strdup_printf ("/sys/class/net/%s/bridge/default_pvid", bridge);
  g_autoptr (GError) local = NULL;
  gint64 n;
  guint16 *out;

  if (!va_sysfs_read_int (path, &n, &local) || n < 0 || n > VA_VLAN_MAX)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "%s: bridge %s: reading its default_pvid: %s", who, bridge,
                   local ? local->message : "out of range");
      return NULL;
    }
  out = g_new (guint16, 1);
  *out = (guint16) n;
  return out;
}

static gboolean
apply_vlan (const VaKernelPf *pf, const VaKernelVf *vf, const VaPoolConfig *pool, const guint8 mac[6], guint16 vlan, const char *who,
            GError **error)
{
  g_autoptr (GError) local = NULL;
  g_autofree guint16 *pvid = NULL;
  const char *rep;

  switch (pool ? pool->vlan_method : VA_VLAN_METHOD_NONE)
    {
      case VA_VLAN_METHOD_NONE:
        return TRUE;
      case VA_VLAN_METHOD_VST:
        if (!pf->netdev)
          {
            g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "%s: vlan-method=vst: PF %s has no netdev", who, pf->pci);
            return FALSE;
          }
        /* the VF's MAC pinned and spoof-checked, its trust off: the guest
         * cannot leave the VLAN the PF tags */
        return va_nl_vf_set (pf->netdev, vf->index, mac, vlan, TRUE, FALSE, error);
      case VA_VLAN_METHOD_BRIDGE:
        if (!(rep = need_representor (pf, vf, who, "bridge", error)))
          return FALSE;
        if (!va_nl_link_set_master (rep, pool->uplink_bridge, error))
          return FALSE;
        /* joining made the port an untagged member of the bridge's
         * default_pvid, which need not be 1 (0: none) */
        if (!(pvid = bridge_default_pvid (pool->uplink_bridge, who, error)))
          return FALSE;
        if (*pvid && *pvid != vlan && !va_nl_bridge_vlan_del_absent_ok (rep, *pvid, error))
          return FALSE;
        return !vlan || va_nl_bridge_vlan (rep, TRUE, vlan, TRUE, error);
      case VA_VLAN_METHOD_OVS:
        {
          g_autofree char *tag = g_strdup_printf ("tag=%u", vlan);
          g_autofree char *step
            = g_strdup_printf ("adding representor %s to OVS bridge %s with tag %u", vf->representor, pool->uplink_bridge, vlan);
          /* as libvirt does; "set" too, since --may-exist leaves an
           * existing port's columns alone */
          const char *tagged[] = {
            "--", "--may-exist", "add-port", pool->uplink_bridge, vf->representor, tag, "--", "set", "Port", vf->representor, tag, NULL
          };
          const char *untagged[] = { "--", "--may-exist", "add-port", pool->uplink_bridge, vf->representor,
                                     "--", "clear",       "Port",     vf->representor,     "tag",
                                     NULL };

          if (!need_representor (pf, vf, who, "ovs", error))
            return FALSE;
          if (!ovs_vsctl (who, step, vlan ? tagged : untagged, error))
            return FALSE;
          /* OVS leaves its ports' links as they are; a down representor
           * passes nothing (the bridge method's join sets it up) */
          if (!va_nl_link_set_up (vf->representor, &local))
            return prefixed (error, local, who);
          return TRUE;
        }
    }
  g_return_val_if_reached (FALSE);
}

static gboolean
reset_vlan (const VaKernelPf *pf, const VaKernelVf *vf, const VaPoolConfig *pool, const char *who, GError **error)
{
  static const guint8 zero_mac[6] = { 0 };

  switch (pool ? pool->vlan_method : VA_VLAN_METHOD_NONE)
    {
      case VA_VLAN_METHOD_NONE:
        return TRUE;
      case VA_VLAN_METHOD_VST:
        return !pf->netdev || va_nl_vf_set (pf->netdev, vf->index, zero_mac, 0, FALSE, FALSE, error);
      case VA_VLAN_METHOD_BRIDGE:
        /* leaving the bridge drops every VLAN of the port */
        return !vf->representor || va_nl_link_set_master (vf->representor, NULL, error);
      case VA_VLAN_METHOD_OVS:
        {
          g_autofree char *step = g_strdup_printf ("removing representor %s from OVS bridge %s", vf->representor, pool->uplink_bridge);
          const char *args[] = { "--", "--if-exists", "del-port", pool->uplink_bridge, vf->representor, NULL };

          return !vf->representor || ovs_vsctl (who, step, args, error);
        }
    }
  g_return_val_if_reached (FALSE);
}

/* How errors name a device: VF slots are PCI addresses, VDUSE slots not. */
static char *
device_who (const char *name, const char *slot)
{
  gboolean vf = va_pci_address_is_valid (slot) || g_str_has_prefix (slot, "netdevsim");

  return g_strdup_printf ("vdpa device %s on %s %s", name, vf ? "VF" : "VDUSE slot", slot);
}

/* RUN/nodes/<device>: "GROUP MODE" for the udev rule of
 * udev-rules/90-vdpa-allocator.rules, which sets them on the node at the
 * bind as the backend does after it. */
static char *
access_file (VaBackendKernel *self, const char *name)
{
  return g_build_filename (self->run_dir, "nodes", name, NULL);
}

static gboolean
write_access_file (VaBackendKernel *self, const char *name, const char *group, guint mode, const char *who, GError **error)
{
  g_autofree char *path = access_file (self, name);
  g_autofree char *dir = g_path_get_dirname (path);
  g_autofree char *text = g_strdup_printf ("%s %04o\n", group, mode);
  g_autoptr (GError) local = NULL;

  if (g_mkdir_with_parents (dir, 0755) < 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "%s: creating %s: %s", who, dir, g_strerror (errno));
      return FALSE;
    }
  if (!g_file_set_contents_full (path, text, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0644, &local))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "%s: %s", who, local->message);
      return FALSE;
    }
  return TRUE;
}

/* Records a step that began at @start; returns now, the next one's start. */
static gint64
step_done (VaDeviceInfo *dev, VaDeviceStep step, gint64 start)
{
  gint64 now = g_get_monotonic_time ();

  dev->step_us[step] = MAX (now - start, 1);
  return now;
}

/* vdpa device @name bound to vhost_vdpa, its node given @pool's group and
 * mode (its access file first, for the udev rule); the steps timed into
 * @dev from *@t, which ends as the last step's end. */
static gboolean
bind_node (VaBackendKernel *self, const char *name, const VaPoolConfig *pool, const char *who, VaDeviceInfo *dev, gint64 *t, GError **error)
{
  const char *group = pool && pool->device_group ? pool->device_group : "kvm";
  guint mode = pool && pool->device_mode ? pool->device_mode : 0660;
  g_autoptr (GError) local = NULL;

  if (!write_access_file (self, name, group, mode, who, error))
    return FALSE;
  if (!va_kernel_bind_vhost_vdpa (name, error))
    return FALSE;
  *t = step_done (dev, VA_DEVICE_STEP_BIND, *t);
  dev->chardev = va_kernel_vhost_node (name, error);
  if (!dev->chardev)
    return FALSE;
  if (!va_kernel_set_node_access (dev->chardev, group, mode, &local))
    return prefixed (error, local, who);
  *t = step_done (dev, VA_DEVICE_STEP_NODE, *t);
  return TRUE;
}

VaDeviceInfo *
va_backend_kernel_attach (VaBackend *backend, const VaDeviceRequest *req, const char *name, GError **error)
{
  VaBackendKernel *self;
  g_autofree char *who = NULL;
  g_autoptr (VaDeviceInfo) dev = NULL;
  VaKernelPf *pf;
  VaKernelVf *vf;
  guint8 mac[6];
  gint64 t;

  g_return_val_if_fail (VA_IS_BACKEND_KERNEL (backend), NULL);
  g_return_val_if_fail (req != NULL && req->slot != NULL, NULL);
  g_return_val_if_fail (name != NULL, NULL);

  self = VA_BACKEND_KERNEL (backend);
  who = device_who (name, req->slot);
  dev = g_new0 (VaDeviceInfo, 1);
  if (!lookup_vf (self, req->slot, &pf, &vf, error))
    return NULL;
  if (!parse_mac (req->mac, mac))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "%s: '%s' is no MAC address", who, req->mac ? req->mac : "");
      return NULL;
    }
  t = g_get_monotonic_time ();
  if (!bind_node (self, name, req->pool, who, dev, &t, error))
    return NULL;
  if (!apply_vlan (pf, vf, req->pool, mac, req->vlan, who, error))
    return NULL;
  step_done (dev, VA_DEVICE_STEP_VLAN, t);
  dev->name = g_strdup (name);
  dev->slot = g_strdup (req->slot);
  return g_steal_pointer (&dev);
}

static gboolean
vdpa_present (const char *name)
{
  g_autoptr (GPtrArray) names = va_kernel_vdpa_devices (NULL);

  for (guint i = 0; names && i < names->len; i++)
    if (strcmp (g_ptr_array_index (names, i), name) == 0)
      return TRUE;
  return FALSE;
}

static VaDeviceInfo *
kernel_create_device (VaBackend *backend, const VaDeviceRequest *req, GError **error)
{
  VaBackendKernel *self = VA_BACKEND_KERNEL (backend);
  g_autofree char *name = va_backend_kernel_device_name (req->slot);
  g_autofree char *who = device_who (name, req->slot);
  g_autofree char *vfpath = NULL;
  g_autofree char *existing = NULL;
  g_autofree char *autoprobe = NULL;
  g_autoptr (GError) local = NULL;
  VaDeviceInfo *dev;
  VaKernelPf *pf;
  VaKernelVf *vf;
  guint8 mac[6];
  guint16 family;
  gboolean made;
  gint64 t, made_at;

  if (!lookup_vf (self, req->slot, &pf, &vf, error))
    return NULL;
  if (!parse_mac (req->mac, mac))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "%s: '%s' is no MAC address", who, req->mac ? req->mac : "");
      return NULL;
    }
  if (va_kernel_pf_is_vduse (pf))
    existing = vdpa_present (name) ? g_strdup (name) : NULL;
  else
    existing = va_kernel_pf_vf_vdpa (pf, vf);
  if (existing)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_BUSY, "%s: the VF already carries vdpa device %s (reconciliation removes orphans)", who,
                   existing);
      return NULL;
    }
  /* the family first: its absence is the likeliest failure on a new host,
   * and says which module to load */
  if (!va_nl_genl_family ("vdpa", "vdpa", &family, &local))
    {
      prefixed (error, local, who);
      return NULL;
    }
  autoprobe = va_sysfs_read (VDPA_AUTOPROBE, NULL);
  if (g_strcmp0 (autoprobe, "0") != 0 && !va_kernel_vdpa_autoprobe (FALSE, &local))
    {
      prefixed (error, local, who);
      return NULL;
    }
  /* VDUSE: the device's server fixed its MAC, MTU and queues */
  t = g_get_monotonic_time ();
  if (va_kernel_pf_is_vduse (pf))
    made = va_nl_vdpa_dev_new (NULL, "vduse", name, NULL, 0, 0, error);
  else if (va_kernel_pf_is_netdevsim (pf))
    /* vdpa_sim_net takes MAC and MTU; max_vqp only when asked for more
     * than one pair, so that the kernel's refusal of it shows */
    made = va_nl_vdpa_dev_new (NULL, VA_KERNEL_NETDEVSIM_MGMTDEV, name, mac, req->queues > 1 ? req->queues : 0, req->mtu, error);
  else
    made = va_nl_vdpa_dev_new ("pci", req->slot, name, mac, req->queues, req->mtu, error);
  made_at = g_get_monotonic_time ();
  if (!made)
    dev = NULL;
  else if (!(dev = va_backend_kernel_attach (backend, req, name, error)))
    va_nl_vdpa_dev_del (name, NULL); /* not half made; the error says why */
  else
    dev->step_us[VA_DEVICE_STEP_CREATE] = MAX (made_at - t, 1);
  /* back as it was, for vdpa devices others make */
  if (g_strcmp0 (autoprobe, "0") != 0)
    va_kernel_vdpa_autoprobe (TRUE, NULL);
  return dev;
}

static gboolean
kernel_destroy_device (VaBackend *backend, const char *slot, const char *name, const VaPoolConfig *pool, GError **error)
{
  VaBackendKernel *self = VA_BACKEND_KERNEL (backend);
  g_autofree char *who = device_who (name, slot);
  g_autoptr (GError) local = NULL;
  g_autofree char *access = access_file (self, name);
  VaKernelPf *pf;
  VaKernelVf *vf;

  /* the device first: the VF keeps its VLAN while a guest can still send */
  if (vdpa_present (name) && !va_nl_vdpa_dev_del (name, &local))
    {
      /* a missing vdpa family does not name the device yet */
      if (local->code == VA_ERROR_NOT_FOUND)
        {
          g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "%s: deleting it: %s", who, local->message);
          return FALSE;
        }
      g_propagate_error (error, g_steal_pointer (&local));
      return FALSE;
    }
  g_unlink (access);
  if (!pool || !lookup_vf (self, slot, &pf, &vf, NULL))
    return TRUE; /* the VF went with its PF: nothing left to reset */
  return reset_vlan (pf, vf, pool, who, error);
}

/* ---- software devices (issue 28) ---------------------------------------- */

/* A relay that dies while its lease lives is started again: the guest's
 * NIC stalls, it is not lost. At most RELAY_RESTARTS in RELAY_WINDOW_S
 * (a relay that dies at once, again and again, is given up on: one line,
 * and the lease says it, until reconcile or release), each after a delay
 * that doubles from RELAY_DELAY_MS. */
#define RELAY_RESTARTS 5
#define RELAY_WINDOW_S 60
#define RELAY_DELAY_MS 100

/* What it takes to serve a software device again: the request's strings
 * copied (the pool's node rules are not needed after the first bind) */
typedef struct
{
  GSubprocess *proc; /* NULL while a restart waits */
  char *name, *mac, *bridge, *user;
  VaBridgeKind bridge_kind;
  guint16 vlan;
  guint memory_mib;
  guint restarts;      /* within the window */
  gint64 window_start; /* monotonic, µs */
  GSource *restart;    /* pending restart */
  char *stalled;       /* why it was given up on, or NULL */
  GWeakRef backend;
} Relay;

static void
relay_free (Relay *r)
{
  if (r->restart)
    g_source_destroy (r->restart);
  g_clear_pointer (&r->restart, g_source_unref);
  g_clear_object (&r->proc);
  g_weak_ref_clear (&r->backend);
  g_free (r->name);
  g_free (r->mac);
  g_free (r->bridge);
  g_free (r->user);
  g_free (r->stalled);
  g_free (r);
}

/* No more restarts: the words the lease says (kernel_software_stalled)
 * until resume_software serves the device again, and "software-stalled"
 * when they are new, for the allocator to say it everywhere. */
static const char *
relay_stall (VaBackendKernel *self, Relay *r, const char *why)
{
  g_autofree char *stalled = g_strdup_printf ("%s; the NIC stalls until its lease is released or vdpactl reconcile runs", why);

  if (g_strcmp0 (r->stalled, stalled) != 0)
    {
      g_free (r->stalled);
      r->stalled = g_steal_pointer (&stalled);
      g_signal_emit_by_name (self, "software-stalled", r->name, r->stalled);
    }
  return r->stalled;
}

/* ... and one line of the log, the same words. */
static void
relay_give_up (VaBackendKernel *self, Relay *r, const char *why)
{
  g_autofree char *line = g_strdup_printf ("software device %s: %s", r->name, why);

  g_warning ("%s", relay_stall (self, r, line));
}

/* Taken out of the table first: its exit, expected, then says nothing. */
static void
stop_relay (VaBackendKernel *self, const char *name)
{
  g_autofree char *key = NULL;
  Relay *r = NULL;

  if (!g_hash_table_steal_extended (self->relays, name, (gpointer *) &key, (gpointer *) &r) || !r->proc)
    {
      /* started before a restart of the daemon: no child of ours */
      if (va_software_relay_stop_stray (name))
        g_info ("software device %s: stopped its relay of before the daemon's restart", name);
    }
  else
    va_software_relay_stop (r->proc);
  if (r)
    relay_free (r);
}

typedef struct
{
  GWeakRef backend;
  char *name;
} RelayWatch;

static void on_relay_exit (GObject *source, GAsyncResult *result, gpointer user_data);

/* The device's fd and a new tap (the old one went with the relay that
 * held it), joined to the bridge in the NIC's VLAN, and the relay on
 * them. The relay takes the queues up where it finds them. */
static gboolean
relay_launch (VaBackendKernel *self, Relay *r, GError **error)
{
  g_autofree char *tap = va_software_tap_name (r->mac);
  g_autofree char *who = g_strdup_printf ("software device %s", r->name);
  g_autoptr (GError) local = NULL;
  RelayWatch *watch;
  int dev_fd, tap_fd;

  if ((dev_fd = va_software_vduse_open (r->name, error)) < 0)
    return FALSE;
  /* a tap left by a relay that is going: gone within the stop's bound */
  for (guint i = 0; i < 50 && if_nametoindex (tap) != 0; i++)
    g_usleep (20 * 1000);
  if ((tap_fd = va_software_tap_open (tap, &local)) < 0 || !va_software_tap_join (tap, r->bridge, r->bridge_kind, r->vlan, &local))
    {
      if (tap_fd >= 0)
        close (tap_fd);
      close (dev_fd);
      return prefixed (error, local, who);
    }
  g_clear_object (&r->proc);
  r->proc = va_software_relay_start (r->name, dev_fd, tap_fd, r->user, r->memory_mib, error);
  if (!r->proc)
    return FALSE;
  watch = g_new0 (RelayWatch, 1);
  g_weak_ref_init (&watch->backend, self);
  watch->name = g_strdup (r->name);
  g_subprocess_wait_async (r->proc, NULL, on_relay_exit, watch);
  return TRUE;
}

static gboolean
on_relay_restart (gpointer user_data)
{
  Relay *r = user_data;
  g_autoptr (VaBackendKernel) self = g_weak_ref_get (&r->backend);
  g_autoptr (GError) error = NULL;

  g_clear_pointer (&r->restart, g_source_unref);
  if (!self)
    return G_SOURCE_REMOVE;
  if (relay_launch (self, r, &error))
    g_message ("software device %s: its relay started again (%u of %u within %u s)", r->name, r->restarts, RELAY_RESTARTS, RELAY_WINDOW_S);
  else
    {
      g_autofree char *why = g_strdup_printf ("starting its relay again: %s", error->message);

      relay_give_up (self, r, why);
    }
  return G_SOURCE_REMOVE;
}

/* A relay that exits while its device is still ours (it crashed, or its
 * device broke): one line, and it is started again within bounds. */
static void
on_relay_exit (GObject *source, GAsyncResult *result, gpointer user_data)
{
  RelayWatch *w = user_data;
  g_autoptr (VaBackendKernel) self = g_weak_ref_get (&w->backend);
  g_autofree char *name = w->name;
  GSubprocess *proc = G_SUBPROCESS (source);
  g_autofree char *how = NULL;
  gint64 now = g_get_monotonic_time ();
  Relay *r;

  g_weak_ref_clear (&w->backend);
  g_free (w);
  g_subprocess_wait_finish (proc, result, NULL);
  /* a relay stopped on purpose is out of the table already */
  r = self ? g_hash_table_lookup (self->relays, name) : NULL;
  if (!r || r->proc != proc)
    return;
  how = g_subprocess_get_if_signaled (proc) ? g_strdup_printf ("was killed by signal %d", g_subprocess_get_term_sig (proc))
                                            : g_strdup_printf ("exited with status %d", g_subprocess_get_exit_status (proc));
  g_clear_object (&r->proc);
  if (now - r->window_start > (gint64) RELAY_WINDOW_S * G_USEC_PER_SEC)
    {
      r->window_start = now;
      r->restarts = 0;
    }
  if (r->restarts >= RELAY_RESTARTS)
    {
      g_autofree char *why
        = g_strdup_printf ("its relay %s, %u times within %u s: not started again", how, r->restarts + 1, RELAY_WINDOW_S);

      relay_give_up (self, r, why);
      return;
    }
  g_warning ("software device %s: its relay %s: starting it again (the guest's NIC stalls meanwhile)", name, how);
  r->restart = g_timeout_source_new (RELAY_DELAY_MS << r->restarts);
  r->restarts++;
  g_source_set_callback (r->restart, on_relay_restart, r, NULL);
  g_source_attach (r->restart, self->relay_context);
}

/* A new entry for @req's device in the table. */
static Relay *
relay_add (VaBackendKernel *self, const char *name, const VaSoftwareRequest *req)
{
  Relay *r = g_new0 (Relay, 1);

  r->name = g_strdup (name);
  r->mac = g_strdup (req->mac);
  r->bridge = g_strdup (req->bridge);
  r->user = g_strdup (req->relay_user);
  r->bridge_kind = req->bridge_kind;
  r->vlan = req->vlan;
  r->memory_mib = req->relay_memory_mib;
  r->window_start = g_get_monotonic_time ();
  g_weak_ref_init (&r->backend, self);
  g_hash_table_replace (self->relays, g_strdup (name), r);
  return r;
}

/* The relay runs before DEV_NEW: the kernel asks the device (its status,
 * its config) while it adds it, and waits 30 s for each answer. */
static VaDeviceInfo *
kernel_create_software (VaBackend *backend, const VaSoftwareRequest *req, GError **error)
{
  VaBackendKernel *self = VA_BACKEND_KERNEL (backend);
  g_autofree char *name = va_software_device_name (req->mac);
  g_autofree char *who = NULL;
  g_autofree char *autoprobe = NULL;
  g_autoptr (VaDeviceInfo) dev = NULL;
  g_autoptr (GError) local = NULL;
  guint8 mac[6];
  guint16 family;
  int dev_fd;
  gboolean made;
  gint64 t;

  if (!name || !parse_mac (req->mac, mac))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "software device: '%s' is no MAC address", req->mac);
      return NULL;
    }
  who = g_strdup_printf ("software device %s", name);
  if (vdpa_present (name) || g_hash_table_contains (self->relays, name))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_BUSY, "%s: exists already (another NIC with MAC %s, or an orphan)", who, req->mac);
      return NULL;
    }
  if (!va_nl_genl_family ("vdpa", "vdpa", &family, &local))
    {
      prefixed (error, local, who);
      return NULL;
    }
  dev = g_new0 (VaDeviceInfo, 1);
  t = g_get_monotonic_time ();
  if ((dev_fd = va_software_vduse_create (name, mac, req->mtu, error)) < 0)
    return NULL;
  /* the relay opens it again: the one fd that serves it */
  close (dev_fd);
  if (!relay_launch (self, relay_add (self, name, req), error))
    {
      stop_relay (self, name);
      va_software_vduse_destroy (name, NULL);
      return NULL;
    }
  t = step_done (dev, VA_DEVICE_STEP_VLAN, t);

  autoprobe = va_sysfs_read (VDPA_AUTOPROBE, NULL);
  if (g_strcmp0 (autoprobe, "0") != 0 && !va_kernel_vdpa_autoprobe (FALSE, &local))
    {
      stop_relay (self, name);
      va_software_vduse_destroy (name, NULL);
      prefixed (error, local, who);
      return NULL;
    }
  made = va_nl_vdpa_dev_new (NULL, "vduse", name, NULL, 0, 0, error);
  t = step_done (dev, VA_DEVICE_STEP_CREATE, t);
  if (made && !bind_node (self, name, req->pool, who, dev, &t, error))
    {
      va_nl_vdpa_dev_del (name, NULL);
      made = FALSE;
    }
  if (g_strcmp0 (autoprobe, "0") != 0)
    va_kernel_vdpa_autoprobe (TRUE, NULL);
  if (!made)
    {
      g_autofree char *access = access_file (self, name);

      g_unlink (access);
      stop_relay (self, name);
      va_software_vduse_destroy (name, NULL);
      if (error && *error && !g_str_has_prefix ((*error)->message, who))
        g_prefix_error (error, "%s: ", who);
      return NULL;
    }
  dev->name = g_strdup (name);
  dev->slot = g_strdup (name);
  return g_steal_pointer (&dev);
}

static gboolean
kernel_destroy_software (VaBackend *backend, const char *name, GError **error)
{
  VaBackendKernel *self = VA_BACKEND_KERNEL (backend);
  g_autofree char *who = g_strdup_printf ("software device %s", name);
  g_autofree char *access = access_file (self, name);
  g_autoptr (GError) local = NULL;

  /* the kernel's order: vdpa device, relay, VDUSE device */
  if (vdpa_present (name) && !va_nl_vdpa_dev_del (name, &local))
    return prefixed (error, local, who);
  g_unlink (access);
  stop_relay (self, name);
  return va_software_vduse_destroy (name, error);
}

/* Served by a relay of this daemon again: after a restart of the daemon
 * the relay of before (no child of this one) is stopped and a new one
 * takes the queues up (a stall of the guest's NIC, no loss); a device
 * that is gone (a reboot) or half made (a crash before its vdpa device) is
 * made anew. The chardev is "" while another driver than vhost_vdpa has
 * the device. */
static VaDeviceInfo *
kernel_resume_software (VaBackend *backend, const VaSoftwareRequest *req, gboolean *made, GError **error)
{
  VaBackendKernel *self = VA_BACKEND_KERNEL (backend);
  g_autofree char *name = va_software_device_name (req->mac);
  g_autofree char *chardev = NULL;
  g_autoptr (VaDeviceInfo) dev = NULL;
  Relay *r;

  *made = FALSE;
  if (!name)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "software device: '%s' is no MAC address", req->mac);
      return NULL;
    }
  if (!vdpa_present (name))
    {
      stop_relay (self, name);
      va_software_vduse_destroy (name, NULL);
      *made = TRUE;
      return kernel_create_software (backend, req, error);
    }
  r = g_hash_table_lookup (self->relays, name);
  if (!r || !(r->proc || r->restart))
    {
      g_autoptr (GError) local = NULL;

      if (r && r->stalled)
        g_message ("software device %s: its relay, given up on, is started again", name);
      else if (va_software_relay_stop_stray (name))
        g_message ("software device %s: its relay of before the daemon's restart stopped; this daemon's takes its queues up", name);
      r = relay_add (self, name, req);
      if (!relay_launch (self, r, &local))
        {
          g_prefix_error (&local, "software device %s: serving it again: ", name);
          /* the caller says it; the lease says it until the next try */
          relay_stall (self, r, local->message);
          g_propagate_error (error, g_steal_pointer (&local));
          return NULL;
        }
    }
  /* none while another driver has it (the lab binds virtio_vdpa) */
  chardev = va_kernel_vhost_node (name, NULL);
  dev = g_new0 (VaDeviceInfo, 1);
  dev->name = g_strdup (name);
  dev->slot = g_steal_pointer (&name);
  dev->chardev = chardev ? g_steal_pointer (&chardev) : g_strdup ("");
  return g_steal_pointer (&dev);
}

/* drivers/vdpa/vdpa_user/vduse_dev.c (6.12): each device is a node of
 * class "vduse" named as it was created, beside "control" */
#define VDUSE_CLASS "/sys/class/vduse"

static char *
kernel_software_stalled (VaBackend *backend, const char *name)
{
  Relay *r = g_hash_table_lookup (VA_BACKEND_KERNEL (backend)->relays, name);

  return r && r->stalled ? g_strdup (r->stalled) : NULL;
}

static GPtrArray *
kernel_list_software (VaBackend *backend, GError **error)
{
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GError) local = NULL;
  g_autoptr (GDir) dir = g_dir_open (VDUSE_CLASS, 0, &local);
  const char *name;

  /* no class: vduse is not loaded, so there are none */
  if (!dir)
    return g_steal_pointer (&names);
  while ((name = g_dir_read_name (dir)) && names->len < VA_SOFTWARE_MAX_DEVICES)
    if (va_software_is_device_name (name))
      g_ptr_array_add (names, g_strdup (name));
  return g_steal_pointer (&names);
}

static GPtrArray *
kernel_list_devices (VaBackend *backend, GError **error)
{
  g_autoptr (GPtrArray) names = va_kernel_vdpa_devices (error);
  g_autoptr (GPtrArray) devs = NULL;

  if (!names)
    return NULL;
  devs = g_ptr_array_new_with_free_func ((GDestroyNotify) va_device_info_free);
  for (guint i = 0; i < names->len; i++)
    {
      const char *name = g_ptr_array_index (names, i);
      g_autofree char *slot = NULL;
      VaDeviceInfo *dev;

      /* only the devices this backend names: never one an operator made */
      if (!g_str_has_prefix (name, "va-"))
        continue;
      slot = va_kernel_vdpa_slot (name, NULL);
      if (!slot)
        continue;
      dev = g_new0 (VaDeviceInfo, 1);
      dev->name = g_strdup (name);
      dev->slot = g_steal_pointer (&slot);
      /* a device not bound to vhost_vdpa (a crash between DEV_NEW and the
       * bind) has no node: "" */
      dev->chardev = va_kernel_vhost_node (name, NULL);
      if (!dev->chardev)
        dev->chardev = g_strdup ("");
      g_ptr_array_add (devs, dev);
    }
  return g_steal_pointer (&devs);
}

/* Open vSwitch's other_config:hw-offload, "" when unset, or NULL with
 * the reason in @why. */
static char *
ovs_hw_offload (char **why)
{
  g_autofree char *prog = g_find_program_in_path ("ovs-vsctl");
  const char *argv[] = { prog, "--timeout=5", "--if-exists", "get", "Open_vSwitch", ".", "other_config:hw-offload", NULL };
  g_autofree char *out = NULL, *err = NULL;
  g_autoptr (GError) local = NULL;
  int status;

  if (!prog)
    {
      *why = g_strdup ("ovs-vsctl is not installed");
      return NULL;
    }
  if (!g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err, &status, &local))
    {
      *why = g_strdup (local->message);
      return NULL;
    }
  if (!g_spawn_check_wait_status (status, NULL))
    {
      g_strdelimit (g_strstrip (err), "\n", ' ');
      *why = g_strdup_printf ("ovs-vsctl failed: %.*s", VA_CUT (*err ? err : "no message", 200));
      return NULL;
    }
  /* ovs-vsctl quotes a string value: "true" */
  g_strstrip (out);
  if (out[0] == '"' && strlen (out) >= 2 && out[strlen (out) - 1] == '"')
    return g_strndup (out + 1, strlen (out) - 2);
  return g_steal_pointer (&out);
}

/* The bridge @netdev is a port of, or NULL. */
static char *
bridge_of (const char *netdev)
{
  g_autofree char *link = g_strdup_printf ("/sys/class/net/%s/master", netdev);
  g_autofree char *target = g_file_read_link (link, NULL);

  return target ? g_path_get_basename (target) : NULL;
}

/* Where libvirt saves a VF's MAC and VLAN while it passes the VF through
 * (virHostdevSaveNetConfig: PF_vfN), before it changes them, and removes
 * the file once it has put them back. */
#define LIBVIRT_HOSTDEVMGR_DIR "/run/libvirt/hostdevmgr"

/* The index of VF @slot on its PF, or -1. */
static int
vf_index (const char *slot)
{
  g_autofree char *pfdir = va_sysfs_path ("/sys/bus/pci/devices");
  g_autofree char *physfn = g_strdup_printf ("%s/%s/physfn", pfdir, slot);
  g_autoptr (GDir) d = g_dir_open (physfn, 0, NULL);
  const char *name;

  while (d && (name = g_dir_read_name (d)))
    {
      g_autofree char *link = NULL;
      g_autofree char *target = NULL;
      g_autofree char *base = NULL;
      guint64 n;

      if (!g_str_has_prefix (name, "virtfn") || !g_ascii_string_to_unsigned (name + 6, 10, 0, G_MAXINT, &n, NULL))
        continue;
      link = g_build_filename (physfn, name, NULL);
      target = g_file_read_link (link, NULL);
      base = target ? g_path_get_basename (target) : NULL;
      if (g_strcmp0 (base, slot) == 0)
        return (int) n;
    }
  return -1;
}

/* libvirt passes the VF through now (its saved state is there from
 * before it changes the VF until after it restores it, and a managed
 * hostdev is on vfio-pci meanwhile); else a host driver holds it (a
 * kind=sriov pool makes its VFs with sriov_drivers_autoprobe 0, so a
 * driver there was bound by someone: a container's VF, a host storage
 * VF); else no one does. */
static VaVfHolder
kernel_vf_holder (VaBackend *backend, const char *slot, char **driver)
{
  g_autofree char *pfdir = va_sysfs_path ("/sys/bus/pci/devices");
  g_autofree char *physfn = g_strdup_printf ("%s/%s/physfn/net", pfdir, slot);
  g_autoptr (GDir) nets = g_dir_open (physfn, 0, NULL);
  g_autofree char *drv = va_kernel_pci_driver (slot);
  const char *pf = nets ? g_dir_read_name (nets) : NULL;
  int vf = vf_index (slot);

  if (pf && vf >= 0)
    {
      g_autofree char *saved = g_strdup_printf ("%s/%s_vf%d", LIBVIRT_HOSTDEVMGR_DIR, pf, vf);

      if (g_file_test (saved, G_FILE_TEST_EXISTS))
        return VA_VF_LIBVIRT;
    }
  if (!drv)
    return VA_VF_NOBODY;
  if (strcmp (drv, "vfio-pci") == 0)
    return VA_VF_LIBVIRT;
  if (driver)
    *driver = g_steal_pointer (&drv);
  return VA_VF_HOST;
}

/* Called for a VF that no one holds (kernel_vf_holder): one left with a
 * VLAN or an administrative MAC is a passthrough whose restore never ran
 * (a crash), and gets both reset. */
static gboolean
kernel_repair_vf (VaBackend *backend, const char *slot, const char *pf, char **repaired, GError **error)
{
  static const guint8 zero[6] = { 0 };
  guint8 mac[6];
  guint16 vlan = 0;
  int vf = vf_index (slot);
  const VaKernelPf *kpf = lookup_pf_by_netdev (VA_BACKEND_KERNEL (backend), pf);

  if (vf < 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_NOT_FOUND, "VF %s: no virtfn link of its PF %s names it", slot, pf);
      return FALSE;
    }
  /* what is not ours to reset: checked again, right before */
  if (kernel_vf_holder (backend, slot, NULL) != VA_VF_NOBODY)
    return TRUE;
  /* a host PF in DPU mode sets nothing of its VFs (EPERM): the Arm side
   * owns them */
  if (kpf && kpf->not_manager)
    return TRUE;
  if (!va_kernel_vf_get (pf, (guint32) vf, mac, &vlan, error))
    return FALSE;
  if (vlan == 0 && memcmp (mac, zero, 6) == 0)
    return TRUE;
  /* spoofchk and trust only where the eswitch takes them: mlx5 in
   * switchdev refuses them after it applied the MAC and VLAN */
  if (!va_kernel_vf_set (pf, (guint32) vf, zero, 0, !kpf || va_kernel_pf_takes_vf_settings (kpf), error))
    return FALSE;
  *repaired = g_strdup_printf ("VF %s (%s vf %d): no lease, left with VLAN %u and MAC %02x:%02x:%02x:%02x:%02x:%02x: reset", slot, pf, vf,
                               vlan, mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]);
  return TRUE;
}

/* A passed-through VF of a kind=sriov pool whose eswitch takes VF settings
 * through the PF (legacy): spoofchk and trust as the network says, read
 * back. In switchdev mode, or on a host PF in DPU mode, nothing is sent:
 * mlx5 refuses both there (esw/legacy.c), and the representor's port (the
 * pool's bridge or OVS port) is what filters. */
static gboolean
kernel_secure_vf (VaBackend *backend, const char *slot, const VaPoolConfig *pool, gboolean spoofchk, gboolean trust, GError **error)
{
  VaBackendKernel *self = VA_BACKEND_KERNEL (backend);
  VaKernelPf *pf;
  VaKernelVf *vf;

  if (!lookup_vf (self, slot, &pf, &vf, error))
    return FALSE;
  if (!va_kernel_pf_takes_vf_settings (pf))
    return TRUE;
  if (!pf->netdev)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "VF %s: PF %s has no netdev to set its spoofchk on", slot, pf->pci);
      return FALSE;
    }
  return va_kernel_vf_set_flags (pf->netdev, vf->index, spoofchk, trust, error);
}

/* A passed-through VF of a switchdev kind=sriov pool: its representor on
 * the pool's bridge with the NIC's VLAN, by the code a vDPA device's VF
 * uses (apply_vlan, reset_vlan). */
static gboolean
kernel_attach_vf (VaBackend *backend, const char *slot, const VaPoolConfig *pool, const char *mac, guint16 vlan, GError **error)
{
  VaBackendKernel *self = VA_BACKEND_KERNEL (backend);
  g_autofree char *who = g_strdup_printf ("VF %s (passed through)", slot);
  VaKernelPf *pf;
  VaKernelVf *vf;
  guint8 m[6];

  if (!lookup_vf (self, slot, &pf, &vf, error))
    return FALSE;
  if (!parse_mac (mac, m))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "%s: '%s' is no MAC address", who, mac);
      return FALSE;
    }
  return apply_vlan (pf, vf, pool, m, vlan, who, error);
}

static gboolean
kernel_detach_vf (VaBackend *backend, const char *slot, const VaPoolConfig *pool, GError **error)
{
  VaBackendKernel *self = VA_BACKEND_KERNEL (backend);
  g_autofree char *who = g_strdup_printf ("VF %s (passed through)", slot);
  VaKernelPf *pf;
  VaKernelVf *vf;

  if (!lookup_vf (self, slot, &pf, &vf, NULL))
    return TRUE; /* gone with its PF: nothing to take out */
  return reset_vlan (pf, vf, pool, who, error);
}

/* Whether any of the PFs @pcis is a ConnectX that mlx5_core drives (not
 * a test PF, not another vendor's). */
static gboolean
mlx5_in (VaBackendKernel *self, const char *const *pcis)
{
  for (guint i = 0; pcis[i]; i++)
    {
      const VaKernelPf *kpf = lookup_pf (self, pcis[i]);

      if (kpf && kpf->vendor == 0x15b3 && va_kernel_pf_is_connectx (kpf) && !va_kernel_pf_is_netdevsim (kpf)
          && !va_kernel_pf_is_vduse (kpf))
        return TRUE;
    }
  return FALSE;
}

static char *
kernel_pool_warning (VaBackend *backend, const VaPoolConfig *pool, const char *const *pcis)
{
  VaBackendKernel *self = VA_BACKEND_KERNEL (backend);

  if (pool->software_slots && va_software_unavailable ())
    return g_strdup_printf ("software-slots=%u: %s: a NIC past the pool's hardware slots is refused", pool->software_slots,
                            va_software_unavailable ());
  if (pool->vlan_method == VA_VLAN_METHOD_OVS && mlx5_in (self, pcis) && va_kernel_mlx5_tc_offload () == VA_KERNEL_TC_NONE)
    return g_strdup ("vlan-method=ovs: this kernel's mlx5 offloads no TC rule (CONFIG_MLX5_CLS_ACT is not set, as in Debian's 6.12 "
                     "kernels), so the VFs' traffic crosses the host's CPU in Open vSwitch whatever hw-offload says: use "
                     "vlan-method=bridge, which this kernel offloads (CONFIG_MLX5_BRIDGE)");
  if (pool->vlan_method == VA_VLAN_METHOD_OVS)
    {
      g_autofree char *why = NULL;
      g_autofree char *offload = ovs_hw_offload (&why);

      if (!offload)
        return g_strdup_printf ("vlan-method=ovs: cannot read Open vSwitch's other_config:hw-offload (%s): the NIC may not carry the "
                                "representors' traffic",
                                why);
      if (strcmp (offload, "true") != 0)
        return g_strdup_printf ("vlan-method=ovs: Open vSwitch's other_config:hw-offload is %s%s%s, so the representors' traffic goes "
                                "through the host's kernel datapath, not the NIC: ovs-vsctl set Open_vSwitch . "
                                "other_config:hw-offload=true, then restart openvswitch-switch",
                                *offload ? "\"" : "", *offload ? offload : "not set", *offload ? "\"" : "");
    }
  if (pool->vlan_method == VA_VLAN_METHOD_BRIDGE && pool->uplink_bridge)
    for (guint i = 0; pcis[i]; i++)
      {
        const VaKernelPf *kpf = lookup_pf (self, pcis[i]);
        g_autofree char *master = NULL;

        if (!kpf || !kpf->netdev || va_kernel_pf_is_vduse (kpf))
          continue;
        /* mlx5 offloads a bridge's forwarding and VLANs to the eswitch
         * for its representor ports; the wire is reached in hardware only
         * when the uplink is a port of the same bridge
         * (Documentation/networking/device_drivers/ethernet/mellanox/mlx5/switchdev.rst) */
        master = bridge_of (kpf->netdev);
        if (g_strcmp0 (master, pool->uplink_bridge) != 0)
          {
            g_autofree char *where = master ? g_strdup_printf ("a port of %s, not of %s", master, pool->uplink_bridge)
                                            : g_strdup_printf ("not a port of %s", pool->uplink_bridge);
            return g_strdup_printf ("vlan-method=bridge: the uplink %s of PF %s is %s, so traffic between its VFs and the wire is not "
                                    "offloaded: ip link set %s master %s",
                                    kpf->netdev, kpf->pci, where, kpf->netdev, pool->uplink_bridge);
          }
      }
  return NULL;
}

static gboolean
kernel_device_busy (VaBackend *backend, const char *chardev)
{
  return chardev && *chardev && va_chardev_held_open (chardev);
}

/* ---- the udev monitor ---------------------------------------------------- */

static gboolean
is_connectx (struct udev_device *d)
{
  const char *v;

  /* the udev rules' mark; on a remove uevent, from the udev database */
  if (g_strcmp0 (udev_device_get_property_value (d, "ID_VDPA_ALLOCATOR"), "1") == 0)
    return TRUE;
  /* in every pci uevent, a remove included, when no rule ran */
  v = udev_device_get_property_value (d, "PCI_ID");
  if (v && g_ascii_strncasecmp (v, "15b3:", 5) == 0)
    return TRUE;
  /* any network function, a remove included (PCI_CLASS is "%04X" of the
   * class code, drivers/pci/pci-driver.c): another vendor's SR-IOV PF or
   * VF, for kind=sriov pools */
  v = udev_device_get_property_value (d, "PCI_CLASS");
  if (v && strlen (v) == 5 && v[0] == '2')
    return TRUE;
  return g_strcmp0 (udev_device_get_sysattr_value (d, "vendor"), "0x15b3") == 0;
}

/* A uevent of a ConnectX PCI function (PF or VF), or of a netdev on one (a
 * PF's uplink whose link changed, a representor). */
static gboolean
is_relevant (struct udev_device *d)
{
  const char *subsystem = udev_device_get_subsystem (d);
  struct udev_device *parent;

  if (g_strcmp0 (subsystem, "pci") == 0)
    return is_connectx (d);
  if (g_strcmp0 (subsystem, "vduse") == 0)
    return TRUE; /* a VDUSE test pool's device came or went */
  /* mlx5_vdpa's management device comes with the VF's auxiliary
   * mlx5_core.vnet.N binding, after the VF's own uevents */
  if (g_strcmp0 (subsystem, "net") != 0 && g_strcmp0 (subsystem, "auxiliary") != 0)
    return FALSE;
  /* a netdev that went with its PCI device has no parent left: the PCI
   * device's own remove uevent tells */
  parent = udev_device_get_parent_with_subsystem_devtype (d, "pci", NULL);
  return parent && is_connectx (parent);
}

static gboolean
on_settled (gpointer user_data)
{
  VaBackendKernel *self = user_data;

  g_clear_pointer (&self->settle_source, g_source_unref);
  g_signal_emit_by_name (self, "pfs-changed");
  return G_SOURCE_REMOVE;
}

static void
changed_soon (VaBackendKernel *self)
{
  if (self->settle_source)
    return;
  self->settle_source = g_timeout_source_new (SETTLE_MS);
  g_source_set_callback (self->settle_source, on_settled, self, NULL);
  g_source_attach (self->settle_source, self->context);
}

static gboolean
on_uevent (int fd, GIOCondition condition, gpointer user_data)
{
  VaBackendKernel *self = user_data;
  struct udev_device *d;
  gboolean hit = FALSE;

  /* the socket is non-blocking: NULL once drained */
  while ((d = udev_monitor_receive_device (self->monitor)))
    {
      hit = hit || is_relevant (d);
      udev_device_unref (d);
    }
  if (hit)
    changed_soon (self);
  return G_SOURCE_CONTINUE;
}

/* A PF's uplink whose link state differs from what discovery saw. Only
 * that: the VF settings the backend itself sends on a PF are link messages
 * too. */
static void
on_link_event (const VaNlLinkEvent *ev, gpointer user_data)
{
  VaBackendKernel *self = user_data;

  for (guint i = 0; self->pfs && i < self->pfs->len; i++)
    {
      const VaKernelPf *pf = g_ptr_array_index (self->pfs, i);

      if (g_strcmp0 (pf->netdev, ev->ifname) != 0)
        continue;
      if (ev->deleted || (ev->oper_up >= 0 && ev->oper_up != (g_strcmp0 (pf->operstate, "up") == 0))
          || (ev->carrier >= 0 && (ev->carrier == 1) != pf->carrier))
        changed_soon (self);
    }
}

/* A carrier change comes with no uevent: only as a link message. */
static gboolean
on_link_message (int fd, GIOCondition condition, gpointer user_data)
{
  VaBackendKernel *self = user_data;

  if (!va_nl_link_monitor_read (self->links, on_link_event, self))
    changed_soon (self); /* some were lost: look at everything again */
  return G_SOURCE_CONTINUE;
}

static gboolean
start_monitor (VaBackendKernel *self, GError **error)
{
  int r;

  self->udev = udev_new ();
  if (!self->udev)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "following udev events: libudev: %s", g_strerror (errno));
      return FALSE;
    }
  self->monitor = udev_monitor_new_from_netlink (self->udev, "udev");
  if (!self->monitor)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "following udev events: opening the udev monitor: %s",
                   g_strerror (errno));
      return FALSE;
    }
  if ((r = udev_monitor_filter_add_match_subsystem_devtype (self->monitor, "pci", NULL)) < 0
      || (r = udev_monitor_filter_add_match_subsystem_devtype (self->monitor, "net", NULL)) < 0
      || (r = udev_monitor_filter_add_match_subsystem_devtype (self->monitor, "vduse", NULL)) < 0
      || (r = udev_monitor_filter_add_match_subsystem_devtype (self->monitor, "auxiliary", NULL)) < 0
      || (r = udev_monitor_enable_receiving (self->monitor)) < 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "following udev events: starting the udev monitor: %s", g_strerror (-r));
      return FALSE;
    }
  self->links = va_nl_link_monitor_new (error);
  if (!self->links)
    return FALSE;
  self->context = g_main_context_ref_thread_default ();
  self->monitor_source = g_unix_fd_source_new (udev_monitor_get_fd (self->monitor), G_IO_IN);
  g_source_set_callback (self->monitor_source, G_SOURCE_FUNC (on_uevent), self, NULL);
  g_source_attach (self->monitor_source, self->context);
  self->links_source = g_unix_fd_source_new (va_nl_link_monitor_get_fd (self->links), G_IO_IN);
  g_source_set_callback (self->links_source, G_SOURCE_FUNC (on_link_message), self, NULL);
  g_source_attach (self->links_source, self->context);
  return TRUE;
}

static void
va_backend_kernel_finalize (GObject *object)
{
  VaBackendKernel *self = VA_BACKEND_KERNEL (object);

  if (self->settle_source)
    g_source_destroy (self->settle_source);
  g_clear_pointer (&self->settle_source, g_source_unref);
  if (self->monitor_source)
    g_source_destroy (self->monitor_source);
  g_clear_pointer (&self->monitor_source, g_source_unref);
  if (self->links_source)
    g_source_destroy (self->links_source);
  g_clear_pointer (&self->links_source, g_source_unref);
  g_clear_pointer (&self->links, va_nl_link_monitor_free);
  g_clear_pointer (&self->context, g_main_context_unref);
  g_clear_pointer (&self->monitor, udev_monitor_unref);
  g_clear_pointer (&self->udev, udev_unref);
  g_free (self->run_dir);
  g_clear_pointer (&self->pfs, g_ptr_array_unref);
  /* the relays outlive the daemon (their devices serve running guests) */
  g_clear_pointer (&self->relays, g_hash_table_unref);
  g_clear_pointer (&self->relay_context, g_main_context_unref);
  G_OBJECT_CLASS (va_backend_kernel_parent_class)->finalize (object);
}

static void
va_backend_kernel_class_init (VaBackendKernelClass *klass)
{
  VaBackendClass *backend_class = VA_BACKEND_CLASS (klass);

  G_OBJECT_CLASS (klass)->finalize = va_backend_kernel_finalize;
  backend_class->name = "kernel";
  backend_class->discover = kernel_discover;
  backend_class->prepare_pf = kernel_prepare_pf;
  backend_class->create_device = kernel_create_device;
  backend_class->destroy_device = kernel_destroy_device;
  backend_class->list_devices = kernel_list_devices;
  backend_class->device_busy = kernel_device_busy;
  backend_class->pool_warning = kernel_pool_warning;
  backend_class->repair_vf = kernel_repair_vf;
  backend_class->vf_holder = kernel_vf_holder;
  backend_class->attach_vf = kernel_attach_vf;
  backend_class->detach_vf = kernel_detach_vf;
  backend_class->create_software = kernel_create_software;
  backend_class->destroy_software = kernel_destroy_software;
  backend_class->resume_software = kernel_resume_software;
  backend_class->list_software = kernel_list_software;
  backend_class->software_stalled = kernel_software_stalled;
  backend_class->secure_vf = kernel_secure_vf;
}

static void
va_backend_kernel_init (VaBackendKernel *self)
{
  self->relays = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) relay_free);
  self->relay_context = g_main_context_ref_thread_default ();
}

VaBackend *
va_backend_kernel_new (const VaConfig *config, const char *run_dir, GError **error)
{
  g_autoptr (VaBackendKernel) self = NULL;

  g_return_val_if_fail (config != NULL, NULL);
  g_return_val_if_fail (run_dir != NULL, NULL);

  self = g_object_new (va_backend_kernel_get_type (), NULL);
  self->run_dir = g_strdup (run_dir);
  if (!start_monitor (self, error))
    return NULL;
  return VA_BACKEND (g_steal_pointer (&self));
}
