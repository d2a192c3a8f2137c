/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once
/* devlink for the testbed tests: the build machines' kernel has no devlink
 * family, and the eswitch mode and representors are no sysfs fact, so the
 * tests answer in its place (va_kernel_set_devlink) with what netdevsim's
 * replies carry (tests/kernel/netlink/devlink-*-reply.hex, parsed by
 * test-netlink): a physical port, one pcivf port per VF of PF
 * pci/0000:3b:00.0 with pfnum 0, vfnum N and the testbed's representor
 * netdev, and an external host's pcivf port (a BlueField's) that is no
 * representor of ours. The real drivers answer in the lab tier
 * (tests/lab/lab-simdrivers.sh, test_lab_sim.py). */
#include <glib/gstdio.h>
#include <linux/devlink.h>
#include <sys/utsname.h>

#include "va-error.h"
#include "va-kernel.h"
#include "va-netlink.h"
#include "va-sysfs.h"

typedef struct
{
  VaKernelEswitch mode; /* UNKNOWN: no devlink family, as on the build machines */
  guint vfs;            /* pcivf ports listed in switchdev mode */
  int pfnum;
  guint sets;             /* ESWITCH_SET calls */
  gboolean no_vdpa;       /* no vdpa family */
  const char *no_mgmtdev; /* a VF without its management device */
  gboolean no_mgmtdevs;   /* none at all: mlx5_vdpa not loaded */
  gboolean last_set_switchdev;
  gboolean not_manager; /* ESWITCH_GET's EOPNOTSUPP: a BlueField's host PF in DPU mode */
  GString *vf_calls;    /* the VF settings sent through the PF, a line each */
  guint8 vf_mac[6];     /* what vf_get answers */
  guint16 vf_vlan;
  gboolean flags_ignored; /* the driver reads back spoofchk off, trust on */
} FakeDevlink;

static FakeDevlink fake_devlink;

/* VFs FIRST.. FIRST+N-1 of the testbed's PF 0000:3b:00.0 (its virtfnN
 * links) with no driver, as a kind=sriov pool's preparation leaves them
 * (sriov_drivers_autoprobe 0): a VF on a host driver is the host's, not a
 * slot (issue 25, point 6). */
static inline void
testbed_unbind_vfs (const char *root, guint first, guint n)
{
  for (guint i = first; i < first + n; i++)
    {
      g_autofree char *virtfn = g_strdup_printf ("%s/sys/bus/pci/devices/0000:3b:00.0/virtfn%u", root, i);
      g_autofree char *target = g_file_read_link (virtfn, NULL);
      g_autofree char *vf = target ? g_path_get_basename (target) : NULL;
      g_autofree char *link = vf ? g_strdup_printf ("%s/sys/bus/pci/devices/%s/driver", root, vf) : NULL;

      g_assert_nonnull (link);
      g_unlink (link);
    }
}

/* The running kernel's modules.dep in the testbed (va_path_get
 * (VA_PATH_MODULES)/RELEASE), naming mlx5_vdpa where @ships (a kernel
 * built with CONFIG_MLX5_VDPA_NET; depmod's line form, as in
 * /lib/modules/RELEASE/modules.dep) and only mlx5_core where not, as in
 * Debian's 6.12 kernels; @loaded adds /sys/module/mlx5_vdpa. */
static inline void
testbed_mlx5_modules (const char *root, gboolean ships, gboolean loaded)
{
  struct utsname u;
  g_autofree char *dir = NULL;
  g_autofree char *dep = NULL;
  g_autofree char *mod = g_build_filename (root, "sys", "module", "mlx5_vdpa", NULL);
  const char *core = "kernel/drivers/net/ethernet/mellanox/mlx5/core/mlx5_core.ko.xz: kernel/net/psample/psample.ko.xz\n";
  const char *vdpa = "kernel/drivers/vdpa/mlx5/mlx5_vdpa.ko.xz: kernel/drivers/vdpa/vdpa.ko.xz "
                     "kernel/drivers/net/ethernet/mellanox/mlx5/core/mlx5_core.ko.xz\n";
  g_autofree char *text = g_strconcat (core, ships ? vdpa : "", NULL);

  g_assert_cmpint (uname (&u), ==, 0);
  dir = g_build_filename (root, "lib", "modules", u.release, NULL);
  g_assert_cmpint (g_mkdir_with_parents (dir, 0755), ==, 0);
  dep = g_build_filename (dir, "modules.dep", NULL);
  g_assert_true (g_file_set_contents (dep, text, -1, NULL));
  if (loaded)
    g_assert_cmpint (g_mkdir_with_parents (mod, 0755), ==, 0);
  else
    g_rmdir (mod);
}

static gboolean
fake_no_family (GError **error)
{
  g_set_error (error, VA_ERROR, VA_ERROR_NOT_FOUND,
               "the kernel has no devlink netlink family (module devlink not loaded, or kernel built without it)");
  return FALSE;
}

static gboolean
fake_eswitch_get (const char *bus, const char *dev, gboolean *switchdev, GError **error)
{
  /* igb registers no devlink instance: the kernel's ENODEV, as va_nl_eswitch_get words it */
  if (g_str_has_prefix (dev, "0000:01:"))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_NOT_FOUND,
                   "devlink %s/%s: reading the eswitch mode: %s has no devlink instance (its driver offers legacy SR-IOV only)", bus, dev,
                   dev);
      return FALSE;
    }
  if (fake_devlink.mode == VA_KERNEL_ESWITCH_UNKNOWN)
    return fake_no_family (error);
  /* as va_nl_eswitch_get words mlx5's EOPNOTSUPP
   * (eswitch_offloads.c, mlx5_devlink_eswitch_get) */
  if (fake_devlink.not_manager)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PERMISSION_DENIED,
                   "devlink %s/%s: reading the eswitch mode: %s is not its eswitch manager (EOPNOTSUPP: a BlueField in DPU mode, "
                   "whose Arm side owns the eswitch)",
                   bus, dev, dev);
      return FALSE;
    }
  g_assert_cmpstr (bus, ==, "pci");
  *switchdev = fake_devlink.mode == VA_KERNEL_ESWITCH_SWITCHDEV;
  return TRUE;
}

static gboolean
fake_eswitch_set (const char *bus, const char *dev, gboolean switchdev, GError **error)
{
  if (fake_devlink.mode == VA_KERNEL_ESWITCH_UNKNOWN)
    return fake_no_family (error);
  g_assert_cmpstr (bus, ==, "pci");
  g_assert_cmpstr (dev, ==, "0000:3b:00.0");
  fake_devlink.sets++;
  fake_devlink.last_set_switchdev = switchdev;
  fake_devlink.mode = switchdev ? VA_KERNEL_ESWITCH_SWITCHDEV : VA_KERNEL_ESWITCH_LEGACY;
  return TRUE;
}

static VaDevlinkPort *
fake_port (guint32 index, guint16 flavour, int pfnum, int vfnum, gboolean external, const char *netdev)
{
  VaDevlinkPort *p = g_new0 (VaDevlinkPort, 1);

  p->bus = g_strdup ("pci");
  p->dev = g_strdup ("0000:3b:00.0");
  p->index = index;
  p->flavour = flavour;
  p->pfnum = pfnum;
  p->vfnum = vfnum;
  p->external = external;
  p->netdev = g_strdup (netdev);
  return p;
}

static GPtrArray *
fake_ports (GError **error)
{
  GPtrArray *ports;

  if (fake_devlink.mode == VA_KERNEL_ESWITCH_UNKNOWN)
    {
      fake_no_family (error);
      return NULL;
    }
  ports = g_ptr_array_new_with_free_func ((GDestroyNotify) va_devlink_port_free);
  g_ptr_array_add (ports, fake_port (65535, DEVLINK_PORT_FLAVOUR_PHYSICAL, 0, -1, FALSE, "enp59s0f0np0"));
  if (fake_devlink.mode != VA_KERNEL_ESWITCH_SWITCHDEV)
    return ports;
  /* an external controller's VF 0 first: never VF 0's representor */
  g_ptr_array_add (ports, fake_port (200, DEVLINK_PORT_FLAVOUR_PCI_VF, 0, 0, TRUE, "ext0"));
  for (guint i = 0; i < fake_devlink.vfs; i++)
    {
      g_autofree char *rep = g_strdup_printf ("enp59s0f0npf0vf%u", i);
      g_ptr_array_add (ports, fake_port (1 + i, DEVLINK_PORT_FLAVOUR_PCI_VF, fake_devlink.pfnum, (int) i, FALSE, rep));
    }
  return ports;
}

/* pci/<VF> for the VFs of bus 3b, as mlx5_vdpa registers them (and
 * vdpa-mgmtdev-reply.hex carries one) */
static GPtrArray *
fake_mgmtdevs (GError **error)
{
  GPtrArray *out;

  if (fake_devlink.no_vdpa)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_NOT_FOUND, "the kernel has no vdpa netlink family");
      return NULL;
    }
  out = g_ptr_array_new_with_free_func ((GDestroyNotify) va_vdpa_mgmtdev_free);
  for (guint i = 0; i < 8; i++)
    {
      VaVdpaMgmtdev *m = g_new0 (VaVdpaMgmtdev, 1);

      m->bus = g_strdup ("pci");
      m->dev = g_strdup_printf ("0000:3b:%02x.%u", (2 + i) / 8, (2 + i) % 8);
      if (fake_devlink.no_mgmtdevs || g_strcmp0 (m->dev, fake_devlink.no_mgmtdev) == 0)
        va_vdpa_mgmtdev_free (m);
      else
        g_ptr_array_add (out, m);
    }
  return out;
}

static gboolean
fake_vf_get (const char *pf, guint32 vf, guint8 mac[6], guint16 *vlan, GError **error)
{
  memcpy (mac, fake_devlink.vf_mac, 6);
  *vlan = fake_devlink.vf_vlan;
  return TRUE;
}

static gboolean
fake_vf_set (const char *pf, guint32 vf, const guint8 mac[6], guint16 vlan, gboolean flags, GError **error)
{
  g_string_append_printf (fake_devlink.vf_calls, "%s vf %u mac %02x:%02x:%02x:%02x:%02x:%02x vlan %u%s\n", pf, vf, mac[0], mac[1], mac[2],
                          mac[3], mac[4], mac[5], vlan, flags ? " spoofchk on trust off" : "");
  return TRUE;
}

static gboolean
fake_vf_set_flags (const char *pf, guint32 vf, gboolean spoofchk, gboolean trust, GError **error)
{
  g_string_append_printf (fake_devlink.vf_calls, "%s vf %u spoofchk %s trust %s\n", pf, vf, spoofchk ? "on" : "off", trust ? "on" : "off");
  if (fake_devlink.flags_ignored)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED,
                   "PF %s VF %u: setting spoofchk %s, trust %s: read back spoofchk off, trust on", pf, vf, spoofchk ? "on" : "off",
                   trust ? "on" : "off");
      return FALSE;
    }
  return TRUE;
}

/* what the kernel does on driver/unbind, as far as the daemon reads it:
 * the VF's driver link goes */
static gboolean
fake_vf_unbind (const char *vf, GError **error)
{
  g_autofree char *dir = g_strdup_printf ("/sys/bus/pci/devices/%s/driver", vf);
  g_autofree char *link = va_sysfs_path (dir);

  g_string_append_printf (fake_devlink.vf_calls, "%s unbind\n", vf);
  g_assert_cmpint (g_unlink (link), ==, 0);
  return TRUE;
}

static const VaKernelDevlink fake_devlink_ops
  = { fake_eswitch_get, fake_eswitch_set, fake_ports, fake_mgmtdevs, fake_vf_get, fake_vf_set, fake_vf_set_flags, fake_vf_unbind };

/* The mode a testbed's name says; the PF's VFs as its pcivf ports. */
static void
fake_devlink_for (const char *testbed)
{
  if (fake_devlink.vf_calls)
    g_string_free (fake_devlink.vf_calls, TRUE);
  memset (&fake_devlink, 0, sizeof fake_devlink);
  fake_devlink.vf_calls = g_string_new (NULL);
  fake_devlink.vfs = 8;
  if (testbed && strstr (testbed, "legacy"))
    fake_devlink.mode = VA_KERNEL_ESWITCH_LEGACY;
  else if (testbed && strstr (testbed, "cx6dx"))
    fake_devlink.mode = VA_KERNEL_ESWITCH_SWITCHDEV;
  va_kernel_set_devlink (&fake_devlink_ops);
}
