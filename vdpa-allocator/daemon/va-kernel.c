/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* ConnectX discovery with libudev and the sysfs steps of provisioning. The
 * kernel facts (docs/kernel-facts.md): VFs hang off their PF as virtfnN;
 * the eswitch mode is devlink's ESWITCH_GET (a PF shows a phys_switch_id in
 * legacy mode too); in switchdev mode each VF has a representor, the netdev
 * of the PF's devlink port of flavour pcivf with its vfnum; a vdpa device
 * made on a VF is a child of the VF's PCI device on the vdpa bus, and once
 * bound to vhost_vdpa has a vhost-vdpa-N child whose node devtmpfs makes
 * root:root 0600. */
#define G_LOG_DOMAIN "va-kernel"

#include "va-kernel.h"

#include <errno.h>
#include <grp.h>
#include <libudev.h>
#include <linux/devlink.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "va-config.h"
#include "va-error.h"
#include "va-netlink.h"
#include "va-paths.h"
#include "va-sysfs.h"

#define MLX_VENDOR 0x15b3

typedef struct udev Udev;
typedef struct udev_enumerate UdevEnumerate;
typedef struct udev_device UdevDevice;

static void
udev_device_free (UdevDevice *d)
{
  udev_device_unref (d);
}

static void
udev_free (Udev *u)
{
  udev_unref (u);
}

static void
udev_enumerate_free (UdevEnumerate *e)
{
  udev_enumerate_unref (e);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (Udev, udev_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (UdevEnumerate, udev_enumerate_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (UdevDevice, udev_device_free)

/* PCI ids from the kernel's mlx5_core pci table
 * (drivers/net/ethernet/mellanox/mlx5/core/main.c, mlx5_core_pci_table,
 * Linux 6.1 and 6.12), the one home of the ConnectX ids: the udev rules
 * mark every 15b3 PF that can make VFs (tests/udev/check-rules.py holds
 * the two together). The table says only what a model can do for vDPA:
 * every 15b3 PF with sriov_totalvfs > 0, in the table or not, is a
 * candidate for kind=sriov pools. Whether a VF carries vDPA is its
 * management device pci/<VF> (mlx5_vdpa registers one where the firmware
 * offers the virtio queue object). ConnectX-4, ConnectX-4 Lx, ConnectX-5
 * and BlueField (its ConnectX-5) lack it; the rest are "vdpa" here and the
 * management device decides (plain ConnectX-6, ConnectX-6 Lx, ConnectX-9
 * and -10: not verified on hardware). */
static const VaKernelModel models[] = {
  { 0x1013, "ConnectX-4", FALSE, FALSE },
  { 0x1014, "ConnectX-4 VF", TRUE, FALSE },
  { 0x1015, "ConnectX-4 Lx", FALSE, FALSE },
  { 0x1016, "ConnectX-4 Lx VF", TRUE, FALSE },
  { 0x1017, "ConnectX-5", FALSE, FALSE },
  { 0x1018, "ConnectX-5 VF", TRUE, FALSE },
  { 0x1019, "ConnectX-5 Ex", FALSE, FALSE },
  { 0x101a, "ConnectX-5 Ex VF", TRUE, FALSE },
  { 0x101b, "ConnectX-6", FALSE, TRUE },
  { 0x101c, "ConnectX-6 VF", TRUE, TRUE },
  { 0x101d, "ConnectX-6 Dx", FALSE, TRUE },
  { 0x101e, "ConnectX family VF (ConnectX-6 Dx, ConnectX-6 Lx, ConnectX-7, ConnectX-8, BlueField-2/3/4)", TRUE, TRUE },
  { 0x101f, "ConnectX-6 Lx", FALSE, TRUE },
  { 0x1021, "ConnectX-7", FALSE, TRUE },
  { 0x1023, "ConnectX-8", FALSE, TRUE },
  { 0x1025, "ConnectX-9", FALSE, TRUE },
  { 0x1027, "ConnectX-10", FALSE, TRUE },
  { 0xa2d2, "BlueField (ConnectX-5)", FALSE, FALSE },
  { 0xa2d3, "BlueField VF", TRUE, FALSE },
  { 0xa2d6, "BlueField-2 (ConnectX-6 Dx)", FALSE, TRUE },
  { 0xa2dc, "BlueField-3 (ConnectX-7)", FALSE, TRUE },
  { 0xa2df, "BlueField-4 (ConnectX-8)", FALSE, TRUE },
};

static gboolean
kernel_vf_set (const char *pf, guint32 vf, const guint8 mac[6], guint16 vlan, gboolean flags, GError **error)
{
  return flags ? va_nl_vf_set (pf, vf, mac, vlan, TRUE, FALSE, error) : va_nl_vf_set_mac_vlan (pf, vf, mac, vlan, error);
}

static gboolean
kernel_vf_unbind (const char *vf, GError **error)
{
  g_autofree char *path = g_strdup_printf ("/sys/bus/pci/devices/%s/driver/unbind", vf);

  return va_sysfs_write (path, vf, error);
}

static const VaKernelDevlink kernel_devlink = { va_nl_eswitch_get, va_nl_eswitch_set, va_nl_devlink_ports, va_nl_vdpa_mgmtdevs,
                                                va_nl_vf_get,      kernel_vf_set,     va_nl_vf_set_flags,  kernel_vf_unbind };
static const VaKernelDevlink *devlink = &kernel_devlink;

void
va_kernel_set_devlink (const VaKernelDevlink *ops)
{
  devlink = ops ? ops : &kernel_devlink;
}

gboolean
va_kernel_eswitch_get (const VaKernelPf *pf, gboolean *switchdev, GError **error)
{
  g_return_val_if_fail (pf != NULL && pf->devlink_bus != NULL, FALSE);

  return devlink->eswitch_get (pf->devlink_bus, pf->devlink_dev, switchdev, error);
}

gboolean
va_kernel_eswitch_set (const VaKernelPf *pf, gboolean switchdev, GError **error)
{
  g_return_val_if_fail (pf != NULL && pf->devlink_bus != NULL, FALSE);

  return devlink->eswitch_set (pf->devlink_bus, pf->devlink_dev, switchdev, error);
}

gboolean
va_kernel_vf_get (const char *pf, guint32 vf, guint8 mac[6], guint16 *vlan, GError **error)
{
  return devlink->vf_get (pf, vf, mac, vlan, error);
}

gboolean
va_kernel_vf_set (const char *pf, guint32 vf, const guint8 mac[6], guint16 vlan, gboolean flags, GError **error)
{
  return devlink->vf_set (pf, vf, mac, vlan, flags, error);
}

gboolean
va_kernel_vf_set_flags (const char *pf, guint32 vf, gboolean spoofchk, gboolean trust, GError **error)
{
  return devlink->vf_set_flags (pf, vf, spoofchk, trust, error);
}

gboolean
va_kernel_pf_takes_vf_settings (const VaKernelPf *pf)
{
  g_return_val_if_fail (pf != NULL, FALSE);

  /* an unreadable mode is tried: the driver refuses what it does not
   * take, and the lease fails closed */
  return pf->eswitch != VA_KERNEL_ESWITCH_SWITCHDEV && !pf->not_manager;
}

/* drivers/net/ethernet/mellanox/mlx5/core/Kconfig: MLX5_CLS_ACT depends
 * on NET_TC_SKB_EXT, which Debian's 6.12 kernels leave unset, so their
 * mlx5 offloads no TC rule (en_tc.c is not built); MLX5_BRIDGE, the
 * bridge offload, is set. */
VaKernelTc
va_kernel_mlx5_tc_offload (void)
{
  struct utsname u;
  g_autofree char *path = NULL;
  g_autofree char *text = NULL;

  if (uname (&u) < 0)
    return VA_KERNEL_TC_UNKNOWN;
  path = g_strdup_printf ("%s/config-%s", va_path_get (VA_PATH_BOOT), u.release);
  if (!g_file_get_contents (path, &text, NULL, NULL))
    return VA_KERNEL_TC_UNKNOWN;
  if (strstr (text, "\nCONFIG_MLX5_CLS_ACT=y\n"))
    return VA_KERNEL_TC_OFFLOAD;
  return VA_KERNEL_TC_NONE;
}

const VaKernelModel *
va_kernel_model_lookup (guint16 device)
{
  for (guint i = 0; i < G_N_ELEMENTS (models); i++)
    if (models[i].device == device)
      return &models[i];
  return NULL;
}

static void
vf_free (VaKernelVf *vf)
{
  g_free (vf->pci);
  g_free (vf->netdev);
  g_free (vf->reason);
  g_free (vf->representor);
  g_free (vf);
}

void
va_kernel_pf_free (VaKernelPf *pf)
{
  if (!pf)
    return;
  g_free (pf->pci);
  g_free (pf->syspath);
  g_free (pf->netdev);
  g_free (pf->operstate);
  g_free (pf->switch_id);
  g_free (pf->devlink_bus);
  g_free (pf->devlink_dev);
  g_free (pf->eswitch_error);
  g_clear_pointer (&pf->vfs, g_ptr_array_unref);
  g_free (pf->reason);
  g_free (pf->sriov_reason);
  g_free (pf);
}

static gboolean
attr_hex16 (struct udev_device *d, const char *attr, guint16 *out)
{
  const char *v = udev_device_get_sysattr_value (d, attr);
  guint64 n;

  if (!v || !g_str_has_prefix (v, "0x") || !g_ascii_string_to_unsigned (v + 2, 16, 0, 0xffff, &n, NULL))
    return FALSE;
  *out = (guint16) n;
  return TRUE;
}

static gint64
attr_int (struct udev_device *d, const char *attr, gint64 fallback)
{
  const char *v = udev_device_get_sysattr_value (d, attr);
  gint64 n;

  if (!v || !g_ascii_string_to_signed (v, 10, G_MININT32, G_MAXINT32, &n, NULL))
    return fallback;
  return n;
}

static char *
attr_dup (struct udev_device *d, const char *attr)
{
  const char *v = udev_device_get_sysattr_value (d, attr);
  return v ? g_strchomp (g_strdup (v)) : NULL;
}

/* The net children of @parent: its own netdev and, on a switchdev PF, the
 * representors. */
static GPtrArray *
net_children (struct udev *udev, struct udev_device *parent)
{
  g_autoptr (UdevEnumerate) e = udev_enumerate_new (udev);
  GPtrArray *out = g_ptr_array_new_with_free_func ((GDestroyNotify) udev_device_free);
  struct udev_list_entry *entry;

  udev_enumerate_add_match_subsystem (e, "net");
  udev_enumerate_add_match_parent (e, parent);
  udev_enumerate_scan_devices (e);
  udev_list_entry_foreach (entry, udev_enumerate_get_list_entry (e))
  {
    struct udev_device *d = udev_device_new_from_syspath (udev, udev_list_entry_get_name (entry));
    if (d)
      g_ptr_array_add (out, d);
  }
  return out;
}

static gboolean
is_representor_name (const char *port, guint *pf, guint *vf)
{
  char tail;

  return port && sscanf (port, "pf%uvf%u%c", pf, vf, &tail) == 2;
}

/* The devlink port dump, asked once per discovery and only when a PF is
 * in switchdev mode. */
typedef struct
{
  gboolean asked;
  GPtrArray *ports; /* VaDevlinkPort*; NULL when the dump failed */
  char *error;
  gboolean mgmt_asked;
  GPtrArray *mgmtdevs; /* VaVdpaMgmtdev*; NULL when the dump failed (no vdpa family: DEV_NEW will say so) */
  char *mlx5_hint;     /* mlx5_vdpa_hint (), asked once */
} PortDump;

static void
port_dump_clear (PortDump *d)
{
  g_clear_pointer (&d->ports, g_ptr_array_unref);
  g_clear_pointer (&d->error, g_free);
  g_clear_pointer (&d->mgmtdevs, g_ptr_array_unref);
  g_clear_pointer (&d->mlx5_hint, g_free);
  d->asked = d->mgmt_asked = FALSE;
}

#define MLX5_VDPA_KO "mlx5_vdpa.ko" /* then .xz, .zst or nothing */

/* Whether the running kernel ships mlx5_vdpa: its modules.dep names the
 * module (depmod writes one line per module, "kernel/.../mlx5_vdpa.ko[.xz]:
 * deps"), read with a bound. */
static gboolean
kernel_ships_mlx5_vdpa (const char *release)
{
  g_autofree char *dep = g_build_filename (va_path_get (VA_PATH_MODULES), release, "modules.dep", NULL);
  g_autoptr (GMappedFile) map = g_mapped_file_new (dep, FALSE, NULL);
  const char *p, *end;

  if (!map || g_mapped_file_get_length (map) > 64 * 1024 * 1024)
    return FALSE;
  p = g_mapped_file_get_contents (map);
  end = p + g_mapped_file_get_length (map);
  while (p && p < end)
    {
      const char *nl = memchr (p, '\n', end - p);
      const char *colon = memchr (p, ':', (nl ? nl : end) - p);

      /* the module's own path ends at the colon, after its last '/' */
      if (colon)
        {
          const char *slash = g_strrstr_len (p, colon - p, "/");
          const char *name = slash ? slash + 1 : p;

          if ((size_t) (colon - name) >= strlen (MLX5_VDPA_KO) && strncmp (name, MLX5_VDPA_KO, strlen (MLX5_VDPA_KO)) == 0)
            return TRUE;
        }
      p = nl ? nl + 1 : NULL;
    }
  return FALSE;
}

/* What an operator does about a ConnectX VF without its management device,
 * by what the kernel shows: mlx5_vdpa loaded (its /sys/module entry),
 * shipped but not loaded, or not shipped at all. mlx5_core creates the
 * "vnet" auxiliary device mlx5_vdpa binds to only when built with
 * CONFIG_MLX5_VDPA_NET (drivers/net/ethernet/mellanox/mlx5/core/dev.c,
 * mlx5_vnet_supported() in 6.12), and Debian's 6.1 and 6.12 kernels set neither. */
static char *
mlx5_vdpa_hint (void)
{
  g_autofree char *loaded = g_build_filename (va_path_get (VA_PATH_SYSFS), "module", "mlx5_vdpa", NULL);
  struct utsname u;
  const char *release = uname (&u) == 0 ? u.release : "?";

  if (g_file_test (loaded, G_FILE_TEST_IS_DIR))
    return g_strdup ("mlx5_vdpa is loaded but offers none (the VF not on mlx5_core, firmware without vDPA, or "
                     "mlx5_core and mlx5_vdpa from different builds: after installing vdpa-allocator-mlx5-dkms, "
                     "reload mlx5_core or reboot)");
  if (kernel_ships_mlx5_vdpa (release))
    return g_strdup ("is mlx5_vdpa loaded? (modprobe mlx5_vdpa)");
  return g_strdup_printf ("kernel %s has no mlx5_vdpa (CONFIG_MLX5_VDPA_NET unset, as in Debian's kernels): "
                          "install vdpa-allocator-mlx5-dkms (Debian's 6.12 kernels) or boot a kernel built with "
                          "it; see connectx-hosts.md",
                          release);
}

/* Why @vf cannot carry vDPA by the management-device dump, or NULL: a
 * ConnectX VF needs pci/<VF> (mlx5_core bound to it, mlx5_vdpa loaded, the
 * firmware's vnet support), a netdevsim VF vdpa_sim_net's vdpasim_net. */
static char *
vf_reason (PortDump *d, const VaKernelVf *vf, gboolean sim)
{
  if (!d->mgmt_asked)
    {
      d->mgmt_asked = TRUE;
      d->mgmtdevs = devlink->mgmtdevs (NULL);
    }
  if (!d->mgmtdevs)
    return NULL;
  for (guint i = 0; i < d->mgmtdevs->len; i++)
    {
      const VaVdpaMgmtdev *m = g_ptr_array_index (d->mgmtdevs, i);

      if (sim ? (!m->bus && g_strcmp0 (m->dev, VA_KERNEL_NETDEVSIM_MGMTDEV) == 0)
              : (g_strcmp0 (m->bus, "pci") == 0 && g_strcmp0 (m->dev, vf->pci) == 0))
        return NULL;
    }
  if (sim)
    return g_strdup_printf ("VF %s has no vdpa management device: is vdpa_sim_net loaded?", vf->pci);
  if (!d->mlx5_hint)
    d->mlx5_hint = mlx5_vdpa_hint ();
  return g_strdup_printf ("VF %s has no vdpa management device: %s", vf->pci, d->mlx5_hint);
}

static GPtrArray *
port_dump_get (PortDump *d, char **error)
{
  if (!d->asked)
    {
      g_autoptr (GError) local = NULL;

      d->asked = TRUE;
      d->ports = devlink->ports (&local);
      if (!d->ports)
        d->error = g_strdup (local->message);
    }
  if (!d->ports)
    *error = g_strdup (d->error);
  return d->ports;
}

/* The eswitch mode, and in switchdev mode the representors by VF number:
 * the netdevs of the instance's own (not external) pcivf ports. */
static GHashTable *
read_eswitch (VaKernelPf *pf, PortDump *dump)
{
  GHashTable *reps = g_hash_table_new_full (g_direct_hash, g_direct_equal, NULL, g_free);
  g_autoptr (GError) local = NULL;
  g_autofree char *err = NULL;
  gboolean switchdev = FALSE;
  GPtrArray *ports;

  if (!devlink->eswitch_get (pf->devlink_bus, pf->devlink_dev, &switchdev, &local))
    {
      pf->eswitch = VA_KERNEL_ESWITCH_UNKNOWN;
      pf->eswitch_error = g_strdup (local->message);
      /* no devlink family, or no instance for the PF (igb): no eswitch
       * mode to set, the PF is legacy SR-IOV only */
      pf->no_devlink = local->code == VA_ERROR_NOT_FOUND;
      pf->not_manager = local->code == VA_ERROR_PERMISSION_DENIED;
      return reps;
    }
  pf->eswitch = switchdev ? VA_KERNEL_ESWITCH_SWITCHDEV : VA_KERNEL_ESWITCH_LEGACY;
  if (!switchdev)
    return reps;
  ports = port_dump_get (dump, &err);
  if (!ports)
    {
      pf->eswitch_error = g_steal_pointer (&err);
      return reps;
    }
  for (guint i = 0; i < ports->len; i++)
    {
      const VaDevlinkPort *p = g_ptr_array_index (ports, i);

      if (g_strcmp0 (p->bus, pf->devlink_bus) == 0 && g_strcmp0 (p->dev, pf->devlink_dev) == 0 && p->flavour == DEVLINK_PORT_FLAVOUR_PCI_VF
          && !p->external && p->vfnum >= 0 && p->netdev)
        g_hash_table_insert (reps, GINT_TO_POINTER (p->vfnum), g_strdup (p->netdev));
    }
  return reps;
}

static const VaKernelModel vduse_model = { 0, "VDUSE (test)", FALSE, TRUE };
/* another vendor's SR-IOV PF (igb, ixgbe, ice...): VF passthrough only */
static const VaKernelModel sriov_model = { 0, "SR-IOV NIC", FALSE, FALSE };
/* a 15b3 PF with VFs that the table does not name (a newer card, or one
 * mlx5_core binds by its class): VF passthrough only, until the table
 * says what it can do for vDPA */
static const VaKernelModel mlx_other_model = { 0, "ConnectX (model not in the table)", FALSE, FALSE };
static const VaKernelModel netdevsim_model = { 0, "netdevsim (test)", FALSE, TRUE };

static VaKernelPf *
read_pf (struct udev *udev, struct udev_device *d, const VaKernelModel *model, PortDump *dump)
{
  gboolean sim = model == &netdevsim_model;
  g_autoptr (VaKernelPf) pf = g_new0 (VaKernelPf, 1);
  g_autoptr (GPtrArray) nets = net_children (udev, d);
  g_autoptr (GHashTable) reps = NULL;
  g_autoptr (GHashTable) rep_names = g_hash_table_new (g_str_hash, g_str_equal);
  GHashTableIter iter;
  gpointer value;

  pf->pci = g_strdup (udev_device_get_sysname (d));
  pf->syspath = g_strdup (udev_device_get_syspath (d));
  pf->vendor = MLX_VENDOR;
  pf->device = model->device;
  if (model == &sriov_model || model == &mlx_other_model)
    {
      attr_hex16 (d, "vendor", &pf->vendor);
      attr_hex16 (d, "device", &pf->device);
    }
  pf->model = model;
  pf->numa_node = (int) attr_int (d, "numa_node", -1);
  pf->numvfs = (guint) MAX (attr_int (d, "sriov_numvfs", 0), 0);
  pf->totalvfs = (guint) MAX (attr_int (d, "sriov_totalvfs", 0), 0);
  pf->vfs = g_ptr_array_new_with_free_func ((GDestroyNotify) vf_free);
  pf->devlink_bus = g_strdup (sim ? "netdevsim" : "pci");
  pf->devlink_dev = g_strdup (pf->pci);
  /* every PF's mode: a kind=sriov pool may ask one of a ConnectX-5 too */
  reps = read_eswitch (pf, dump);
  g_hash_table_iter_init (&iter, reps);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    g_hash_table_add (rep_names, value);

  /* the uplink: the one net child that is no representor (by devlink; by
   * its port name where devlink did not answer) */
  for (guint i = 0; i < nets->len; i++)
    {
      struct udev_device *n = g_ptr_array_index (nets, i);
      g_autofree char *port = attr_dup (n, "phys_port_name");
      guint p, v;

      if (pf->netdev || g_hash_table_contains (rep_names, udev_device_get_sysname (n)) || is_representor_name (port, &p, &v))
        continue;
      pf->netdev = g_strdup (udev_device_get_sysname (n));
      pf->ifindex = (int) attr_int (n, "ifindex", 0);
      {
        /* net/core/net-sysfs.c shows dev->flags as %#x: IFF_UP is 0x1 */
        const char *flags = udev_device_get_sysattr_value (n, "flags");
        pf->admin_up = flags && (g_ascii_strtoull (flags, NULL, 16) & 0x1);
      }
      pf->operstate = attr_dup (n, "operstate");
      pf->carrier = attr_int (n, "carrier", 0) == 1;
      pf->switch_id = attr_dup (n, "phys_switch_id");
    }

  if (sim)
    {
      /* no sriov_totalvfs: the limit is debugfs' max_vfs
       * (drivers/net/netdevsim/bus.c); its VFs are no devices, so a slot
       * is named after the PF and the VF number */
      g_autofree char *max = g_strdup_printf ("/sys/kernel/debug/netdevsim/%s/max_vfs", pf->pci);
      gint64 n = 0;

      if (!udev_device_get_sysattr_value (d, "sriov_totalvfs") && va_sysfs_read_int (max, &n, NULL))
        pf->totalvfs = (guint) MAX (n, 0);
      for (guint i = 0; i < pf->numvfs; i++)
        {
          VaKernelVf *vf = g_new0 (VaKernelVf, 1);

          vf->index = i;
          vf->pci = g_strdup_printf ("%sv%u", pf->pci, i);
          vf->representor = g_strdup (g_hash_table_lookup (reps, GINT_TO_POINTER ((int) i)));
          vf->reason = vf_reason (dump, vf, TRUE);
          g_ptr_array_add (pf->vfs, vf);
        }
    }
  for (guint i = 0; !sim && i < pf->numvfs; i++)
    {
      g_autofree char *link_name = g_strdup_printf ("%s/virtfn%u", pf->syspath, i);
      g_autofree char *link = va_sysfs_path (link_name);
      g_autofree char *target = g_file_read_link (link, NULL);
      g_autoptr (UdevDevice) vd = NULL;
      VaKernelVf *vf;

      if (!target)
        continue; /* the kernel is still making it */
      vf = g_new0 (VaKernelVf, 1);
      vf->index = i;
      vf->pci = g_path_get_basename (target);
      vf->representor = g_strdup (g_hash_table_lookup (reps, GINT_TO_POINTER ((int) i)));
      vd = udev_device_new_from_subsystem_sysname (udev, "pci", vf->pci);
      if (vd)
        {
          g_autoptr (GPtrArray) vnets = net_children (udev, vd);
          if (vnets->len)
            vf->netdev = g_strdup (udev_device_get_sysname (g_ptr_array_index (vnets, 0)));
        }
      if (model->vdpa)
        vf->reason = vf_reason (dump, vf, FALSE);
      g_ptr_array_add (pf->vfs, vf);
    }

  /* passthrough needs SR-IOV and a PF netdev to set the VFs' MAC and
   * VLAN on; its link is set up by prepare_pf (libvirt refuses a VF of a
   * PF that is not up) */
  if (!pf->totalvfs)
    {
      pf->sriov_code = VA_PF_HEALTH_NO_SRIOV;
      pf->sriov_reason = g_strdup ("no SR-IOV: sriov_totalvfs is 0");
    }
  else if (!pf->netdev)
    {
      pf->sriov_code = VA_PF_HEALTH_NO_NETDEV;
      pf->sriov_reason = g_strdup ("no netdev: no driver bound to the PF");
    }
  else if (pf->admin_up && (g_strcmp0 (pf->operstate, "up") != 0 || !pf->carrier))
    {
      pf->sriov_code = VA_PF_HEALTH_LINK_DOWN;
      pf->sriov_reason = g_strdup_printf ("link down on %s (operstate %s, carrier %s)", pf->netdev,
                                          pf->operstate ? pf->operstate : "unknown", pf->carrier ? "on" : "off");
    }
  else if (!pf->admin_up)
    {
      pf->sriov_code = VA_PF_HEALTH_LINK_DOWN;
      pf->sriov_reason = g_strdup_printf ("link down on %s (administratively down)", pf->netdev);
    }

  if (model == &sriov_model)
    {
      pf->code = VA_PF_HEALTH_UNSUPPORTED;
      pf->reason
        = g_strdup_printf ("%04x:%04x is no ConnectX and cannot carry vDPA: only kind=sriov pools take it", pf->vendor, pf->device);
    }
  else if (model == &mlx_other_model)
    {
      pf->code = VA_PF_HEALTH_UNSUPPORTED;
      pf->reason = g_strdup_printf ("15b3:%04x is no ConnectX model known to carry vDPA: only kind=sriov pools take it", pf->device);
    }
  else if (!model->vdpa)
    {
      pf->code = VA_PF_HEALTH_UNSUPPORTED;
      pf->reason = g_strdup_printf ("%s (15b3:%04x) cannot carry vDPA: mlx5_vdpa needs the virtio queue object, which %s lacks",
                                    model->name, model->device, model->name);
    }
  else if (!pf->netdev)
    {
      pf->code = VA_PF_HEALTH_NO_NETDEV;
      pf->reason = g_strdup (sim ? "no netdev" : "no netdev: mlx5_core is not bound to the PF");
    }
  /* netdevsim reports no link state: operstate unknown, carrier on */
  else if ((g_strcmp0 (pf->operstate, "up") != 0 && !(sim && g_strcmp0 (pf->operstate, "unknown") == 0)) || !pf->carrier)
    {
      pf->code = VA_PF_HEALTH_LINK_DOWN;
      pf->reason = g_strdup_printf ("link down on %s (operstate %s, carrier %s)", pf->netdev, pf->operstate ? pf->operstate : "unknown",
                                    pf->carrier ? "on" : "off");
    }
  return g_steal_pointer (&pf);
}

gboolean
va_kernel_pf_is_netdevsim (const VaKernelPf *pf)
{
  g_return_val_if_fail (pf != NULL, FALSE);

  return pf->model == &netdevsim_model;
}

gboolean
va_kernel_pf_is_connectx (const VaKernelPf *pf)
{
  g_return_val_if_fail (pf != NULL, FALSE);

  return pf->model != &sriov_model;
}

gboolean
va_kernel_pf_is_vduse (const VaKernelPf *pf)
{
  g_return_val_if_fail (pf != NULL, FALSE);

  return pf->model == &vduse_model;
}

static int
cmp_name (gconstpointer a, gconstpointer b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

/* NULL while the vduse module is not loaded (no "control" device). */
static VaKernelPf *
discover_vduse (struct udev *udev)
{
  g_autoptr (UdevEnumerate) e = udev_enumerate_new (udev);
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (VaKernelPf) pf = NULL;
  struct udev_list_entry *entry;
  gboolean loaded = FALSE;

  udev_enumerate_add_match_subsystem (e, "vduse");
  udev_enumerate_scan_devices (e);
  udev_list_entry_foreach (entry, udev_enumerate_get_list_entry (e))
  {
    g_autofree char *name = g_path_get_basename (udev_list_entry_get_name (entry));

    loaded = loaded || strcmp (name, "control") == 0;
    /* only the devices the test pool may take: never another user's */
    if (g_str_has_prefix (name, "va-") && name[3])
      g_ptr_array_add (names, g_steal_pointer (&name));
  }
  if (!loaded)
    return NULL;
  g_ptr_array_sort (names, cmp_name);
  pf = g_new0 (VaKernelPf, 1);
  pf->pci = g_strdup (VA_KERNEL_VDUSE_PF);
  pf->syspath = g_strdup ("/sys/devices/virtual/vduse");
  pf->model = &vduse_model;
  pf->numa_node = -1;
  pf->numvfs = names->len;
  pf->totalvfs = names->len;
  pf->vfs = g_ptr_array_new_with_free_func ((GDestroyNotify) vf_free);
  for (guint i = 0; i < names->len; i++)
    {
      const char *slot = (const char *) g_ptr_array_index (names, i) + 3;
      g_autoptr (UdevDevice) rep = udev_device_new_from_subsystem_sysname (udev, "net", slot);
      VaKernelVf *vf = g_new0 (VaKernelVf, 1);

      vf->pci = g_strdup (slot);
      vf->index = i;
      vf->representor = rep ? g_strdup (slot) : NULL;
      g_ptr_array_add (pf->vfs, vf);
    }
  return g_steal_pointer (&pf);
}

static int
cmp_pf (gconstpointer a, gconstpointer b)
{
  const VaKernelPf *x = *(VaKernelPf *const *) a, *y = *(VaKernelPf *const *) b;
  return strcmp (x->pci, y->pci);
}

GPtrArray *
va_kernel_discover (GError **error)
{
  g_autoptr (Udev) udev = udev_new ();
  g_autoptr (UdevEnumerate) e = NULL;
  g_autoptr (GPtrArray) pfs = g_ptr_array_new_with_free_func ((GDestroyNotify) va_kernel_pf_free);
  struct udev_list_entry *entry;
  PortDump dump = { 0 };
  VaKernelPf *vduse;
  int r;

  if (!udev)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "discovering ConnectX PFs: libudev: %s", g_strerror (errno));
      return NULL;
    }
  e = udev_enumerate_new (udev);
  udev_enumerate_add_match_subsystem (e, "pci");
  udev_enumerate_add_match_sysattr (e, "vendor", "0x15b3");
  r = udev_enumerate_scan_devices (e);
  if (r < 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "discovering ConnectX PFs: scanning PCI devices: %s", g_strerror (-r));
      return NULL;
    }
  udev_list_entry_foreach (entry, udev_enumerate_get_list_entry (e))
  {
    g_autoptr (UdevDevice) d = udev_device_new_from_syspath (udev, udev_list_entry_get_name (entry));
    const VaKernelModel *model;
    guint16 device;

    if (!d || !attr_hex16 (d, "device", &device))
      continue;
    model = va_kernel_model_lookup (device);
    if (model && model->is_vf)
      continue;
    /* mlx5_core binds more ids than the table names; a VF shows no
     * sriov_totalvfs (drivers/pci/iov.c makes it on PFs only) */
    if (!model && attr_int (d, "sriov_totalvfs", 0) > 0)
      model = &mlx_other_model;
    if (!model)
      continue;
    g_ptr_array_add (pfs, read_pf (udev, d, model, &dump));
  }
  /* other vendors' SR-IOV PFs (kind=sriov pools): a network function
   * (class 0x02) that can make VFs; a VF itself shows no sriov_totalvfs */
  g_clear_pointer (&e, udev_enumerate_unref);
  e = udev_enumerate_new (udev);
  udev_enumerate_add_match_subsystem (e, "pci");
  udev_enumerate_add_match_sysattr (e, "sriov_totalvfs", NULL);
  udev_enumerate_scan_devices (e);
  udev_list_entry_foreach (entry, udev_enumerate_get_list_entry (e))
  {
    g_autoptr (UdevDevice) d = udev_device_new_from_syspath (udev, udev_list_entry_get_name (entry));
    guint16 vendor;
    const char *class;

    if (!d || !attr_hex16 (d, "vendor", &vendor) || vendor == MLX_VENDOR)
      continue;
    class = udev_device_get_sysattr_value (d, "class");
    if (!class || !g_str_has_prefix (class, "0x02") || attr_int (d, "sriov_totalvfs", 0) <= 0)
      continue;
    g_ptr_array_add (pfs, read_pf (udev, d, &sriov_model, &dump));
  }
  /* the kernel's netdevsim devices (netdevsim-test pools) */
  g_clear_pointer (&e, udev_enumerate_unref);
  e = udev_enumerate_new (udev);
  udev_enumerate_add_match_subsystem (e, "netdevsim");
  udev_enumerate_scan_devices (e);
  udev_list_entry_foreach (entry, udev_enumerate_get_list_entry (e))
  {
    g_autoptr (UdevDevice) d = udev_device_new_from_syspath (udev, udev_list_entry_get_name (entry));

    if (d && g_str_has_prefix (udev_device_get_sysname (d), "netdevsim"))
      g_ptr_array_add (pfs, read_pf (udev, d, &netdevsim_model, &dump));
  }
  port_dump_clear (&dump);
  g_ptr_array_sort (pfs, cmp_pf);
  vduse = discover_vduse (udev);
  if (vduse)
    g_ptr_array_add (pfs, vduse);
  return g_steal_pointer (&pfs);
}

/* A sysfs device directory of the vdpa bus. */
static gboolean
is_vdpa_dir (const char *dir)
{
  g_autofree char *subsys = g_build_filename (dir, "subsystem", NULL);
  g_autofree char *target = g_file_read_link (subsys, NULL);
  g_autofree char *uevent = NULL;
  g_autofree char *text = NULL;

  if (target)
    return g_str_has_suffix (target, "/vdpa");
  /* a testbed records the subsystem in uevent rather than a link */
  uevent = g_build_filename (dir, "uevent", NULL);
  return g_file_get_contents (uevent, &text, NULL, NULL) && strstr (text, "SUBSYSTEM=vdpa\n");
}

char *
va_kernel_vf_vdpa_device (const char *vf_syspath)
{
  g_autofree char *real = NULL;
  g_autoptr (GDir) dir = NULL;
  const char *name;

  g_return_val_if_fail (vf_syspath != NULL, NULL);

  real = va_sysfs_path (vf_syspath);
  dir = g_dir_open (real, 0, NULL);
  /* mlx5_vdpa parents the device on the VF's own PCI device
   * (drivers/vdpa/mlx5/net/mlx5_vnet.c, vdpa_alloc_device's parent is the
   * mlx5 core device's): a direct child; an auxiliary mlx5_core.vnet.N is
   * looked into as well */
  while (dir && (name = g_dir_read_name (dir)))
    {
      g_autofree char *child = g_build_filename (real, name, NULL);
      g_autoptr (GDir) sub = NULL;
      const char *grandchild;

      if (is_vdpa_dir (child))
        return g_strdup (name);
      if (!g_str_has_prefix (name, "mlx5_core.vnet."))
        continue;
      sub = g_dir_open (child, 0, NULL);
      while (sub && (grandchild = g_dir_read_name (sub)))
        {
          g_autofree char *path = g_build_filename (child, grandchild, NULL);

          if (is_vdpa_dir (path))
            return g_strdup (grandchild);
        }
    }
  return NULL;
}

char *
va_kernel_pf_vf_vdpa (const VaKernelPf *pf, const VaKernelVf *vf)
{
  g_return_val_if_fail (pf != NULL && vf != NULL, NULL);

  if (va_kernel_pf_is_netdevsim (pf))
    {
      g_autofree char *name = g_strdup_printf ("va-%s", vf->pci);
      g_autofree char *path = g_build_filename ("/sys/bus/vdpa/devices", name, NULL);
      g_autofree char *real = va_sysfs_path (path);

      return g_file_test (real, G_FILE_TEST_EXISTS) ? g_steal_pointer (&name) : NULL;
    }
  else
    {
      g_autofree char *parent = g_path_get_dirname (pf->syspath);
      g_autofree char *vfp = g_build_filename (parent, vf->pci, NULL);

      return va_kernel_vf_vdpa_device (vfp);
    }
}

gboolean
va_kernel_set_numvfs (const VaKernelPf *pf, guint count, GError **error)
{
  g_autofree char *path = NULL;
  g_autofree char *value = g_strdup_printf ("%u", count);
  g_autoptr (GError) local = NULL;
  gint64 now;

  g_return_val_if_fail (pf != NULL, FALSE);

  path = g_build_filename (pf->syspath, "sriov_numvfs", NULL);
  if (count > pf->totalvfs)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "PF %s: cannot make %u VFs: sriov_totalvfs is %u", pf->pci, count,
                   pf->totalvfs);
      return FALSE;
    }
  if (!va_sysfs_read_int (path, &now, &local))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "PF %s: %s", pf->pci, local->message);
      return FALSE;
    }
  if (now == count)
    return TRUE;
  /* every VF goes when the count changes: never one a vdpa device uses */
  for (guint i = 0; i < pf->vfs->len; i++)
    {
      g_autofree char *vdpa = va_kernel_pf_vf_vdpa (pf, g_ptr_array_index (pf->vfs, i));

      if (vdpa)
        {
          g_set_error (error, VA_ERROR, VA_ERROR_BUSY,
                       "PF %s: refusing to change sriov_numvfs from %" G_GINT64_FORMAT " to %u: vdpa device %s sits on VF %s", pf->pci, now,
                       count, vdpa, ((VaKernelVf *) g_ptr_array_index (pf->vfs, i))->pci);
          return FALSE;
        }
    }
  /* the kernel refuses a change from one non-zero count to another */
  if (now != 0 && count != 0 && !va_sysfs_write (path, "0", &local))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "PF %s: removing its VFs: %s", pf->pci, local->message);
      return FALSE;
    }
  if (!va_sysfs_write (path, value, &local))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "PF %s: setting %u VFs: %s", pf->pci, count, local->message);
      return FALSE;
    }
  return TRUE;
}

char *
va_kernel_pci_driver (const char *pci)
{
  g_autofree char *devs = NULL;
  g_autofree char *link = NULL;
  g_autofree char *target = NULL;

  g_return_val_if_fail (pci != NULL, NULL);

  devs = va_sysfs_path ("/sys/bus/pci/devices");
  link = g_strdup_printf ("%s/%s/driver", devs, pci);
  target = g_file_read_link (link, NULL);
  return target ? g_path_get_basename (target) : NULL;
}

int
va_kernel_vf_ifindex (const VaKernelPf *pf, const VaKernelVf *vf)
{
  g_autofree char *parent = NULL;
  g_autofree char *path = NULL;
  gint64 ifindex = 0;

  g_return_val_if_fail (pf != NULL && vf != NULL, 0);

  if (!vf->netdev)
    return 0;
  parent = g_path_get_dirname (pf->syspath);
  path = g_build_filename (parent, vf->pci, "net", vf->netdev, "ifindex", NULL);
  return va_sysfs_read_int (path, &ifindex, NULL) && ifindex > 0 ? (int) ifindex : 0;
}

gboolean
va_kernel_vf_unbind (const char *vf, GError **error)
{
  g_autoptr (GError) local = NULL;

  g_return_val_if_fail (vf != NULL, FALSE);

  if (!devlink->vf_unbind (vf, &local))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "VF %s: unbinding its host driver: %s", vf, local->message);
      return FALSE;
    }
  return TRUE;
}

gboolean
va_kernel_set_vf_autoprobe (const VaKernelPf *pf, gboolean on, GError **error)
{
  g_autofree char *path = NULL;
  g_autoptr (GError) local = NULL;

  g_return_val_if_fail (pf != NULL, FALSE);

  path = g_build_filename (pf->syspath, "sriov_drivers_autoprobe", NULL);
  if (!va_sysfs_write (path, on ? "1" : "0", &local))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "PF %s: VF driver autoprobe: %s", pf->pci, local->message);
      return FALSE;
    }
  return TRUE;
}

gboolean
va_kernel_vdpa_autoprobe (gboolean on, GError **error)
{
  g_autoptr (GError) local = NULL;

  if (!va_sysfs_write ("/sys/bus/vdpa/drivers_autoprobe", on ? "1" : "0", &local))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "vdpa bus: turning driver autoprobe %s: %s", on ? "on" : "off",
                   local->message);
      return FALSE;
    }
  return TRUE;
}

static char *
vdpa_syspath (const char *name, GError **error)
{
  g_autoptr (Udev) udev = udev_new ();
  g_autoptr (UdevDevice) d = NULL;

  if (!name || !*name || strchr (name, '/') || name[0] == '.')
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "'%s' is no vdpa device name", name ? name : "");
      return NULL;
    }
  d = udev ? udev_device_new_from_subsystem_sysname (udev, "vdpa", name) : NULL;
  if (!d)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_NOT_FOUND, "vdpa device %s: not on the vdpa bus", name);
      return NULL;
    }
  return g_strdup (udev_device_get_syspath (d));
}

gboolean
va_kernel_bind_vhost_vdpa (const char *name, GError **error)
{
  g_autofree char *syspath = NULL;
  g_autofree char *override = NULL;
  g_autofree char *driver = NULL;
  g_autoptr (GError) local = NULL;

  g_return_val_if_fail (name != NULL, FALSE);

  syspath = vdpa_syspath (name, error);
  if (!syspath)
    return FALSE;
  driver = va_sysfs_path ("/sys/bus/vdpa/drivers/vhost_vdpa");
  if (!g_file_test (driver, G_FILE_TEST_IS_DIR))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED,
                   "vdpa device %s: binding to vhost_vdpa: the vhost_vdpa module is not loaded (modprobe vhost_vdpa)", name);
      return FALSE;
    }
  override = g_build_filename (syspath, "driver_override", NULL);
  if (!va_sysfs_write (override, "vhost_vdpa", &local))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "vdpa device %s: driver_override: %s", name, local->message);
      return FALSE;
    }
  if (!va_sysfs_write ("/sys/bus/vdpa/drivers_probe", name, &local))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "vdpa device %s: binding to vhost_vdpa: %s", name, local->message);
      return FALSE;
    }
  return TRUE;
}

char *
va_kernel_vhost_node (const char *name, GError **error)
{
  g_autofree char *syspath = NULL;
  g_autofree char *real = NULL;
  g_autoptr (GDir) dir = NULL;
  const char *child;

  g_return_val_if_fail (name != NULL, NULL);

  syspath = vdpa_syspath (name, error);
  if (!syspath)
    return NULL;
  real = va_sysfs_path (syspath);
  dir = g_dir_open (real, 0, NULL);
  while (dir && (child = g_dir_read_name (dir)))
    if (g_str_has_prefix (child, "vhost-vdpa-"))
      return g_build_filename (va_path_get (VA_PATH_DEV), child, NULL);
  g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "vdpa device %s: no vhost-vdpa node: not bound to vhost_vdpa", name);
  return NULL;
}

char *
va_kernel_vdpa_slot (const char *name, GError **error)
{
  g_autofree char *syspath = NULL;
  g_auto (GStrv) parts = NULL;

  g_return_val_if_fail (name != NULL, NULL);

  syspath = vdpa_syspath (name, error);
  if (!syspath)
    return NULL;
  /* the nearest PCI address up the path: the VF under the auxiliary
   * device; or .../vduse/va-SLOT/va-SLOT */
  parts = g_strsplit (syspath, "/", -1);
  for (int i = (int) g_strv_length (parts) - 1; i >= 0; i--)
    {
      if (va_pci_address_is_valid (parts[i]))
        return g_strdup (parts[i]);
      if (i > 0 && strcmp (parts[i - 1], "vduse") == 0 && g_str_has_prefix (parts[i], "va-") && parts[i][3])
        return g_strdup (parts[i] + 3);
      /* vdpa_sim parents its devices on nothing: /sys/devices/va-SLOT */
      if (i > 0 && strcmp (parts[i - 1], "devices") == 0 && g_str_has_prefix (parts[i], "va-netdevsim"))
        return g_strdup (parts[i] + 3);
    }
  g_set_error (error, VA_ERROR, VA_ERROR_NOT_FOUND, "vdpa device %s: not on a PCI device or a VDUSE device", name);
  return NULL;
}

GPtrArray *
va_kernel_vdpa_devices (GError **error)
{
  g_autoptr (Udev) udev = udev_new ();
  g_autoptr (UdevEnumerate) e = NULL;
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  struct udev_list_entry *entry;

  if (!udev)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "listing vdpa devices: libudev: %s", g_strerror (errno));
      return NULL;
    }
  e = udev_enumerate_new (udev);
  udev_enumerate_add_match_subsystem (e, "vdpa");
  udev_enumerate_scan_devices (e);
  udev_list_entry_foreach (entry, udev_enumerate_get_list_entry (e))
    g_ptr_array_add (names, g_path_get_basename (udev_list_entry_get_name (entry)));
  g_ptr_array_sort (names, cmp_name);
  return g_steal_pointer (&names);
}

gboolean
va_kernel_set_node_access (const char *node, const char *group, guint mode, GError **error)
{
  struct group *gr;
  gid_t gid;
  guint64 n;

  g_return_val_if_fail (node != NULL, FALSE);
  g_return_val_if_fail (group != NULL, FALSE);

  gr = getgrnam (group);
  if (gr)
    gid = gr->gr_gid;
  else if (g_ascii_string_to_unsigned (group, 10, 0, G_MAXUINT32 - 1, &n, NULL))
    gid = (gid_t) n;
  else
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "%s: group '%s' does not exist on this host", node, group);
      return FALSE;
    }
  /* group first, then mode: the node is never open to a wrong group */
  if (chown (node, (uid_t) -1, gid) < 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "%s: setting group %s: %s", node, group, g_strerror (errno));
      return FALSE;
    }
  if (chmod (node, (mode_t) mode) < 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "%s: setting mode %04o: %s", node, mode, g_strerror (errno));
      return FALSE;
    }
  return TRUE;
}
