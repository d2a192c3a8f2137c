/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The kernel backend (va-backend-kernel.c) through the provisioning seam,
 * against the umockdev testbeds of tests/kernel/testbeds. Netlink is the
 * real kernel's: on this machine it has no vdpa family, which is what the
 * create test asserts. Runs with LD_PRELOAD=libumockdev-preload.so.0. */
#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <umockdev.h>
#include <unistd.h>

#include "va-backend-kernel.h"
#include "va-error.h"
#include "va-kernel.h"
#include "va-sysfs.h"
#include "testbed-devlink.h"

#define PF_SYS "/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0"
#define VDPA0_SYS "/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.2/va-0000:3b:00.2"

typedef struct
{
  UMockdevTestbed *bed;
  VaConfig *config;
  VaBackend *backend;
  VaPoolConfig pool;
  char *tmp;
} Fixture;

static void
load (Fixture *f, const char *name)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *path = g_build_filename (g_getenv ("VA_SRCDIR"), "tests", "kernel", "testbeds", name, NULL);
  gboolean ok = umockdev_testbed_add_from_file (f->bed, path, &error);

  g_assert_no_error (error);
  g_assert_true (ok);
}

static void
setup (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *bus = NULL;
  g_autofree char *probe = NULL;
  g_autofree char *autoprobe = NULL;
  g_autofree char *driver = NULL;

  f->bed = umockdev_testbed_new ();
  g_assert_true (umockdev_in_mock_environment ());
  fake_devlink_for (data);
  if (data)
    load (f, data);
  /* a kernel that ships mlx5_vdpa, not loaded: the hint names modprobe */
  testbed_mlx5_modules (umockdev_testbed_get_root_dir (f->bed), TRUE, FALSE);
  /* the vdpa bus files the kernel has and a testbed lacks */
  bus = g_build_filename (umockdev_testbed_get_sys_dir (f->bed), "bus", "vdpa", NULL);
  g_assert_cmpint (g_mkdir_with_parents (bus, 0755), ==, 0);
  probe = g_build_filename (bus, "drivers_probe", NULL);
  autoprobe = g_build_filename (bus, "drivers_autoprobe", NULL);
  g_assert_true (g_file_set_contents (probe, "", 0, NULL));
  g_assert_true (g_file_set_contents (autoprobe, "1", 1, NULL));
  driver = g_build_filename (bus, "drivers", "vhost_vdpa", NULL);
  g_assert_cmpint (g_mkdir_with_parents (driver, 0755), ==, 0);

  f->tmp = g_dir_make_tmp ("va-backend-kernel-XXXXXX", &error);
  g_assert_no_error (error);
  f->config = va_config_new_empty ();
  f->backend = va_backend_kernel_new (f->config, f->tmp, &error);
  g_assert_no_error (error);
  f->pool.name = (char *) "accel";
  f->pool.match_vendor = 0x15b3;
  f->pool.device_group = (char *) "1234";
  f->pool.device_mode = 0640;
}

static void
teardown (Fixture *f, gconstpointer data)
{
  g_clear_object (&f->backend);
  va_config_free (f->config);
  g_rmdir (f->tmp);
  g_free (f->tmp);
  g_clear_object (&f->bed);
  va_kernel_set_devlink (NULL);
}

static char *
bed_read (Fixture *f, const char *sys_path)
{
  g_autofree char *path = g_build_filename (umockdev_testbed_get_root_dir (f->bed), sys_path, NULL);
  char *text = NULL;

  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  return g_strchomp (text);
}

static GPtrArray *
discover (Fixture *f)
{
  g_autoptr (GError) error = NULL;
  GPtrArray *pfs = va_backend_discover (f->backend, &error);

  g_assert_no_error (error);
  g_assert_nonnull (pfs);
  return pfs;
}

static void
test_discover (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) pfs = discover (f);
  VaPfInfo *pf;

  g_assert_cmpstr (va_backend_get_name (f->backend), ==, "kernel");
  g_assert_cmpuint (pfs->len, ==, 1);
  pf = g_ptr_array_index (pfs, 0);
  g_assert_cmpstr (pf->name, ==, "enp59s0f0np0");
  g_assert_cmpstr (pf->pci, ==, "0000:3b:00.0");
  g_assert_cmphex (pf->vendor, ==, 0x15b3);
  g_assert_cmphex (pf->device, ==, 0x101d);
  g_assert_cmpint (pf->numa_node, ==, 1);
  g_assert_true (pf->healthy);
  g_assert_null (pf->health_reason);
  g_assert_cmpuint (pf->vfs->len, ==, 8);
  for (guint i = 0; i < 8; i++)
    {
      g_autofree char *pci = g_strdup_printf ("0000:3b:%02x.%u", (2 + i) / 8, (2 + i) % 8);
      g_assert_cmpstr (g_ptr_array_index (pf->vfs, i), ==, pci);
    }

  /* what vdpactl dev list shows of it: the model, the eswitch mode devlink
   * reports, each VF's vdpa management device */
  g_assert_cmpstr (pf->model, ==, "ConnectX-6 Dx");
  g_assert_cmpstr (pf->eswitch, ==, fake_devlink.mode == VA_KERNEL_ESWITCH_SWITCHDEV ? "switchdev" : "legacy");
  {
    g_autofree char *m0 = va_pf_info_vf_mgmtdev (pf, 0);
    g_assert_cmpstr (m0, ==, "pci/0000:3b:00.2");
  }

  /* the pool's selectors take it, or not, and the key that does not */
  g_assert_true (va_pool_config_matches (&f->pool, pf));
  f->pool.match_vendor = 0;
  f->pool.match_pf = (char *[]){ (char *) "enp59s0f0np0", NULL };
  g_assert_true (va_pool_config_matches (&f->pool, pf));
  f->pool.match_pf = (char *[]){ (char *) "enp94s0f0", (char *) "enp94s0f1", NULL };
  g_assert_false (va_pool_config_matches (&f->pool, pf));
  {
    g_autofree char *why = va_pool_config_mismatch (&f->pool, pf);
    g_assert_cmpstr (why, ==, "match-pf=enp94s0f0,enp94s0f1");
  }
  f->pool.match_pf = NULL;
  f->pool.match_device = 0x1017;
  g_assert_false (va_pool_config_matches (&f->pool, pf));
  {
    g_autofree char *why = va_pool_config_mismatch (&f->pool, pf);
    g_assert_cmpstr (why, ==, "match-device=1017");
  }
}

/* A VF without its vdpa management device comes with its reason, for the
 * allocator, which keeps that slot from leases. */
static void
test_discover_vf_reasons (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) pfs = NULL;
  VaPfInfo *pf;

  fake_devlink.no_mgmtdev = "0000:3b:00.3";
  pfs = discover (f);
  pf = g_ptr_array_index (pfs, 0);
  g_assert_true (pf->healthy);
  g_assert_nonnull (pf->vf_reasons);
  g_assert_cmpuint (pf->vf_reasons->len, ==, pf->vfs->len);
  g_assert_null (g_ptr_array_index (pf->vf_reasons, 0));
  g_assert_cmpstr (g_ptr_array_index (pf->vf_reasons, 1), ==,
                   "VF 0000:3b:00.3 has no vdpa management device: is mlx5_vdpa loaded? (modprobe mlx5_vdpa)");
  {
    /* and vdpactl dev list names none for it */
    g_autofree char *m0 = va_pf_info_vf_mgmtdev (pf, 0);
    g_autofree char *m1 = va_pf_info_vf_mgmtdev (pf, 1);
    g_assert_cmpstr (m0, ==, "pci/0000:3b:00.2");
    g_assert_null (m1);
  }
  g_clear_pointer (&pfs, g_ptr_array_unref);

  /* every VF has one: no reasons at all */
  fake_devlink.no_mgmtdev = NULL;
  pfs = discover (f);
  g_assert_null (((VaPfInfo *) g_ptr_array_index (pfs, 0))->vf_reasons);
}

static void
test_discover_cx5 (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) pfs = NULL;
  g_autoptr (GError) error = NULL;
  VaPfInfo *pf;

  load (f, "cx5.umockdev");
  pfs = discover (f);
  g_assert_cmpuint (pfs->len, ==, 2);
  pf = g_ptr_array_index (pfs, 1);
  g_assert_cmpstr (pf->name, ==, "enp94s0f0");
  g_assert_false (pf->healthy);
  g_assert_cmpstr (pf->health_reason, ==,
                   "ConnectX-5 (15b3:1017) cannot carry vDPA: mlx5_vdpa needs the virtio queue object, which ConnectX-5 lacks");
  /* nothing is made on it, and that is no error: its reason shows */
  f->pool.vfs = 4;
  g_assert_true (va_backend_prepare_pf (f->backend, pf, &f->pool, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (pf->vfs->len, ==, 0);
}

static void
test_prepare_unchanged (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) pfs = discover (f);
  VaPfInfo *pf = g_ptr_array_index (pfs, 0);
  g_autoptr (GError) error = NULL;
  g_autofree char *numvfs = NULL;

  /* already what the pool asks: nothing written */
  f->pool.vfs = 8;
  f->pool.eswitch = VA_ESWITCH_SWITCHDEV;
  g_assert_true (va_backend_prepare_pf (f->backend, pf, &f->pool, &error));
  g_assert_no_error (error);
  numvfs = bed_read (f, PF_SYS "/sriov_numvfs");
  g_assert_cmpstr (numvfs, ==, "8");
  g_assert_cmpuint (pf->vfs->len, ==, 8);
}

static void
test_prepare_makes_vfs (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) pfs = NULL;
  VaPfInfo *pf;
  g_autoptr (GError) error = NULL;
  g_autofree char *numvfs = NULL;
  g_autofree char *autoprobe = NULL;

  umockdev_testbed_set_attribute (f->bed, PF_SYS, "sriov_numvfs", "0");
  umockdev_testbed_set_attribute (f->bed, PF_SYS, "sriov_drivers_autoprobe", "0");
  pfs = discover (f);
  pf = g_ptr_array_index (pfs, 0);
  g_assert_cmpuint (pf->vfs->len, ==, 0);

  f->pool.vfs = 6;
  g_assert_true (va_backend_prepare_pf (f->backend, pf, &f->pool, &error));
  g_assert_no_error (error);
  numvfs = bed_read (f, PF_SYS "/sriov_numvfs");
  g_assert_cmpstr (numvfs, ==, "6");
  /* VFs bind mlx5_core, whose vnet device is the vdpa management device */
  autoprobe = bed_read (f, PF_SYS "/sriov_drivers_autoprobe");
  g_assert_cmpstr (autoprobe, ==, "1");
  /* the VFs made are the slots the pool gets */
  g_assert_cmpuint (pf->vfs->len, ==, 6);
  g_assert_cmpstr (g_ptr_array_index (pf->vfs, 5), ==, "0000:3b:00.7");
}

static void
test_prepare_mode_change (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) pfs = discover (f);
  VaPfInfo *pf = g_ptr_array_index (pfs, 0);
  g_autoptr (GError) error = NULL;
  g_autofree char *numvfs = NULL;

  /* legacy → switchdev with 8 VFs: the VFs go first, then devlink, which
   * went away since discovery; the PF is left without VFs and the error
   * says where it stopped */
  fake_devlink.mode = VA_KERNEL_ESWITCH_UNKNOWN;
  f->pool.vfs = 8;
  f->pool.eswitch = VA_ESWITCH_SWITCHDEV;
  g_assert_false (va_backend_prepare_pf (f->backend, pf, &f->pool, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED);
  g_assert_cmpstr (error->message, ==,
                   "PF 0000:3b:00.0: setting eswitch mode switchdev: the kernel has no devlink netlink family (module devlink not "
                   "loaded, or kernel built without it)");
  numvfs = bed_read (f, PF_SYS "/sriov_numvfs");
  g_assert_cmpstr (numvfs, ==, "0");
}

/* Issue 17: a legacy PF shows a phys_switch_id too. With eswitch=legacy
 * and the VFs it has, a start changes nothing (it used to take the switch
 * id for switchdev and drop the VFs to 0 under running guests). */
static void
test_prepare_legacy_kept (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) pfs = discover (f);
  VaPfInfo *pf = g_ptr_array_index (pfs, 0);
  g_autoptr (GError) error = NULL;
  g_autofree char *numvfs = NULL;

  umockdev_testbed_set_attribute (f->bed, PF_SYS, "sriov_numvfs", "8");
  f->pool.vfs = 8;
  f->pool.eswitch = VA_ESWITCH_LEGACY;
  g_assert_true (va_backend_prepare_pf (f->backend, pf, &f->pool, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (fake_devlink.sets, ==, 0);
  numvfs = bed_read (f, PF_SYS "/sriov_numvfs");
  g_assert_cmpstr (numvfs, ==, "8");
  g_assert_cmpuint (pf->vfs->len, ==, 8);
}

/* With eswitch=switchdev a legacy-booted PF is switched: VFs to 0, mode
 * set on its devlink instance, VFs made again. */
static void
test_prepare_switches_legacy_pf (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) pfs = discover (f);
  VaPfInfo *pf = g_ptr_array_index (pfs, 0);
  g_autoptr (GError) error = NULL;
  g_autofree char *numvfs = NULL;

  f->pool.vfs = 8;
  f->pool.eswitch = VA_ESWITCH_SWITCHDEV;
  g_assert_true (va_backend_prepare_pf (f->backend, pf, &f->pool, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (fake_devlink.sets, ==, 1);
  g_assert_true (fake_devlink.last_set_switchdev);
  numvfs = bed_read (f, PF_SYS "/sriov_numvfs");
  g_assert_cmpstr (numvfs, ==, "8");
}

/* The mode cannot be read: neither the VFs nor the mode are touched. */
static void
test_prepare_mode_unknown (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) pfs = NULL;
  VaPfInfo *pf;
  g_autoptr (GError) error = NULL;
  g_autofree char *numvfs = NULL;

  fake_devlink.mode = VA_KERNEL_ESWITCH_UNKNOWN;
  pfs = discover (f);
  pf = g_ptr_array_index (pfs, 0);
  f->pool.vfs = 4;
  f->pool.eswitch = VA_ESWITCH_LEGACY;
  g_assert_false (va_backend_prepare_pf (f->backend, pf, &f->pool, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED);
  g_assert_cmpstr (error->message, ==,
                   "PF 0000:3b:00.0: eswitch=legacy, but its mode cannot be read, so its VFs and mode stay as they are: the kernel has "
                   "no devlink netlink family (module devlink not loaded, or kernel built without it)");
  numvfs = bed_read (f, PF_SYS "/sriov_numvfs");
  g_assert_cmpstr (numvfs, ==, "8");
}

#define IGB_SYS "/sys/devices/pci0000:00/0000:00:02.0/0000:01:00.0"

/* Another vendor's SR-IOV PF: only a kind=sriov pool takes it, and its
 * health for that pool is its link, not vDPA's reasons. */
static void
test_discover_igb (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) pfs = discover (f);
  VaPfInfo *pf;

  g_assert_cmpuint (pfs->len, ==, 1);
  pf = g_ptr_array_index (pfs, 0);
  g_assert_cmpstr (pf->name, ==, "enp1s0");
  g_assert_true (pf->sriov_only);
  g_assert_false (pf->healthy);
  g_assert_null (pf->sriov_reason);
  g_assert_cmpuint (pf->vfs->len, ==, 2);
  g_assert_null (pf->vf_reasons);

  f->pool.match_vendor = 0x8086;
  g_assert_false (va_pool_config_matches (&f->pool, pf));
  f->pool.kind = VA_POOL_KIND_SRIOV;
  g_assert_true (va_pool_config_matches (&f->pool, pf));
}

#define CX4LX_SYS "/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0"

/* A ConnectX-4 Lx: mlx5_core binds it, it cannot carry vDPA, and a
 * kind=sriov pool takes it with its VFs as slots (README offers it first
 * for kind=sriov). */
static void
test_discover_cx4lx (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) pfs = discover (f);
  g_autoptr (GError) error = NULL;
  g_autofree char *autoprobe = NULL;
  VaPfInfo *pf;

  g_assert_cmpuint (pfs->len, ==, 1);
  pf = g_ptr_array_index (pfs, 0);
  g_assert_cmpstr (pf->name, ==, "enp59s0f0np0");
  g_assert_cmphex (pf->vendor, ==, 0x15b3);
  g_assert_cmphex (pf->device, ==, 0x1015);
  g_assert_false (pf->healthy);
  g_assert_cmpstr (pf->health_reason, ==,
                   "ConnectX-4 Lx (15b3:1015) cannot carry vDPA: mlx5_vdpa needs the virtio queue object, which ConnectX-4 Lx lacks");
  g_assert_null (pf->sriov_reason);
  g_assert_cmpuint (pf->vfs->len, ==, 4);

  f->pool.kind = VA_POOL_KIND_SRIOV;
  f->pool.match_vendor = 0;
  f->pool.match_device = 0x1015;
  g_assert_true (va_pool_config_matches (&f->pool, pf));
  f->pool.eswitch = VA_ESWITCH_LEGACY;
  g_assert_true (va_backend_prepare_pf (f->backend, pf, &f->pool, &error));
  g_assert_no_error (error);
  autoprobe = bed_read (f, CX4LX_SYS "/sriov_drivers_autoprobe");
  g_assert_cmpstr (autoprobe, ==, "0");
  g_assert_cmpuint (pf->vfs->len, ==, 4);
  g_assert_cmpstr (g_ptr_array_index (pf->vfs, 3), ==, "0000:3b:00.5");
  g_assert_null (pf->vf_reasons);
  g_assert_null (pf->sriov_reason);
}

/* A 15b3 PF with VFs that the model table does not name (a card newer
 * than the table) is still a kind=sriov candidate; its VFs are not PFs. */
static void
test_discover_mlx_unknown (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) pfs = NULL;
  VaPfInfo *pf;

  umockdev_testbed_set_attribute (f->bed, CX4LX_SYS, "device", "0x1029");
  pfs = discover (f);
  g_assert_cmpuint (pfs->len, ==, 1);
  pf = g_ptr_array_index (pfs, 0);
  g_assert_cmphex (pf->device, ==, 0x1029);
  g_assert_false (pf->healthy);
  g_assert_cmpstr (pf->health_reason, ==, "15b3:1029 is no ConnectX model known to carry vDPA: only kind=sriov pools take it");
  g_assert_null (pf->sriov_reason);
  g_assert_cmpuint (pf->vfs->len, ==, 4);
  f->pool.kind = VA_POOL_KIND_SRIOV;
  g_assert_true (va_pool_config_matches (&f->pool, pf));
}

/* kind=sriov on igb: legacy is all it has, so eswitch=legacy is no error;
 * VF driver autoprobe goes off (libvirt binds vfio-pci itself); the VFs
 * are the slots, with no vdpa reasons. */
static void
test_prepare_sriov_igb (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) pfs = discover (f);
  VaPfInfo *pf = g_ptr_array_index (pfs, 0);
  g_autoptr (GError) error = NULL;
  g_autofree char *autoprobe = NULL;
  g_autofree char *numvfs = NULL;

  f->pool.kind = VA_POOL_KIND_SRIOV;
  f->pool.match_vendor = 0x8086;
  f->pool.vfs = 2;
  f->pool.eswitch = VA_ESWITCH_LEGACY;
  g_assert_true (va_backend_prepare_pf (f->backend, pf, &f->pool, &error));
  g_assert_no_error (error);
  autoprobe = bed_read (f, IGB_SYS "/sriov_drivers_autoprobe");
  g_assert_cmpstr (autoprobe, ==, "0");
  numvfs = bed_read (f, IGB_SYS "/sriov_numvfs");
  g_assert_cmpstr (numvfs, ==, "2");
  g_assert_cmpuint (pf->vfs->len, ==, 2);
  g_assert_cmpstr (g_ptr_array_index (pf->vfs, 1), ==, "0000:01:10.2");
  g_assert_null (pf->vf_reasons);
  g_assert_null (pf->sriov_reason);

  /* fewer VFs: through 0, as the kernel asks */
  f->pool.vfs = 1;
  g_assert_true (va_backend_prepare_pf (f->backend, pf, &f->pool, &error));
  g_assert_no_error (error);
  g_free (numvfs);
  numvfs = bed_read (f, IGB_SYS "/sriov_numvfs");
  g_assert_cmpstr (numvfs, ==, "1");
  g_assert_cmpuint (pf->vfs->len, ==, 1);
}

static void
test_prepare_sriov_igb_switchdev (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) pfs = discover (f);
  VaPfInfo *pf = g_ptr_array_index (pfs, 0);
  g_autoptr (GError) error = NULL;
  g_autofree char *numvfs = NULL;

  f->pool.kind = VA_POOL_KIND_SRIOV;
  f->pool.vfs = 4;
  f->pool.eswitch = VA_ESWITCH_SWITCHDEV;
  g_assert_false (va_backend_prepare_pf (f->backend, pf, &f->pool, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED);
  g_assert_cmpstr (error->message, ==,
                   "PF 0000:01:00.0: eswitch=switchdev, but devlink pci/0000:01:00.0: reading the eswitch mode: 0000:01:00.0 has no "
                   "devlink instance (its driver offers legacy SR-IOV only)");
  numvfs = bed_read (f, IGB_SYS "/sriov_numvfs");
  g_assert_cmpstr (numvfs, ==, "2");
}

static void
test_prepare_sriov_refused_with_leases (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) pfs = discover (f);
  VaPfInfo *pf = g_ptr_array_index (pfs, 0);
  g_autoptr (GError) error = NULL;
  g_autofree char *numvfs = NULL;
  g_autofree char *autoprobe = NULL;

  pf->leases = 1;
  f->pool.kind = VA_POOL_KIND_SRIOV;
  f->pool.vfs = 7;
  g_assert_false (va_backend_prepare_pf (f->backend, pf, &f->pool, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_BUSY);
  g_assert_cmpstr (error->message, ==, "PF 0000:01:00.0: refusing to change sriov_numvfs from 2 to 7: 1 lease(s) on its VFs");
  numvfs = bed_read (f, IGB_SYS "/sriov_numvfs");
  g_assert_cmpstr (numvfs, ==, "2");
  /* nothing touched */
  autoprobe = bed_read (f, IGB_SYS "/sriov_drivers_autoprobe");
  g_assert_cmpstr (autoprobe, ==, "1");
}

/* A ConnectX in a kind=sriov pool: its VFs bind no mlx5_core (no vDPA
 * wanted), unlike a vdpa pool's (test_prepare_makes_vfs). */
static void
test_prepare_sriov_connectx (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) pfs = NULL;
  VaPfInfo *pf;
  g_autoptr (GError) error = NULL;
  g_autofree char *autoprobe = NULL;

  umockdev_testbed_set_attribute (f->bed, PF_SYS, "sriov_numvfs", "0");
  pfs = discover (f);
  pf = g_ptr_array_index (pfs, 0);
  f->pool.kind = VA_POOL_KIND_SRIOV;
  f->pool.vfs = 6;
  f->pool.eswitch = VA_ESWITCH_LEGACY;
  g_assert_true (va_backend_prepare_pf (f->backend, pf, &f->pool, &error));
  g_assert_no_error (error);
  autoprobe = bed_read (f, PF_SYS "/sriov_drivers_autoprobe");
  g_assert_cmpstr (autoprobe, ==, "0");
  g_assert_cmpuint (pf->vfs->len, ==, 6);
  g_assert_null (pf->vf_reasons);
  g_assert_cmpuint (fake_devlink.sets, ==, 0);
}

/* A PF already in switchdev (eswitch unset in the pool) takes no VF VLAN
 * through the PF: a kind=sriov pool whose network has a VLAN and whose
 * VLAN method is none would fail every start in libvirt, and a vst pool
 * every lease; both are refused at preparation with one line. */
static void
test_prepare_vlan_on_switchdev (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) pfs = discover (f);
  VaPfInfo *pf = g_ptr_array_index (pfs, 0);
  g_autoptr (GError) error = NULL;

  f->pool.kind = VA_POOL_KIND_SRIOV;
  f->pool.vlan_network = (char *) "tenant";
  f->pool.vlan_network_vlan = 100;
  g_assert_false (va_backend_prepare_pf (f->backend, pf, &f->pool, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED);
  g_assert_cmpstr (error->message, ==,
                   "PF 0000:3b:00.0 is in eswitch mode switchdev and takes no VF VLAN, but network tenant's VLAN 100 goes to libvirt's "
                   "<vlan>: set vlan-method=bridge or ovs with uplink-bridge in [pool accel], or eswitch=legacy");
  g_clear_error (&error);

  /* the representor carries it */
  f->pool.vlan_method = VA_VLAN_METHOD_BRIDGE;
  f->pool.uplink_bridge = (char *) "br-up";
  g_assert_true (va_backend_prepare_pf (f->backend, pf, &f->pool, &error));
  g_assert_no_error (error);

  /* no VLAN anywhere: libvirt's VLAN 0 is taken ("compatibility with libvirt") */
  f->pool.vlan_method = VA_VLAN_METHOD_NONE;
  f->pool.vlan_network_vlan = 0;
  g_assert_true (va_backend_prepare_pf (f->backend, pf, &f->pool, &error));
  g_assert_no_error (error);

  /* a vdpa pool's vst on the same PF */
  f->pool.kind = VA_POOL_KIND_VDPA;
  f->pool.vlan_method = VA_VLAN_METHOD_VST;
  g_assert_false (va_backend_prepare_pf (f->backend, pf, &f->pool, &error));
  g_assert_cmpstr (error->message, ==,
                   "PF 0000:3b:00.0 is in eswitch mode switchdev and takes no VF VLAN, but vlan-method=vst: set vlan-method=bridge or ovs "
                   "with uplink-bridge in [pool accel], or eswitch=legacy");
}

/* A BlueField's host PF in DPU mode is not its eswitch manager: devlink's
 * ESWITCH_GET answers EOPNOTSUPP, and a VF VLAN through it EPERM. */
static void
test_prepare_vlan_dpu_mode (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) pfs = NULL;
  VaPfInfo *pf;
  g_autoptr (GError) error = NULL;

  fake_devlink.not_manager = TRUE;
  pfs = discover (f);
  pf = g_ptr_array_index (pfs, 0);
  f->pool.kind = VA_POOL_KIND_SRIOV;
  f->pool.vlan_method = VA_VLAN_METHOD_VST;
  g_assert_false (va_backend_prepare_pf (f->backend, pf, &f->pool, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED);
  g_assert_cmpstr (error->message, ==,
                   "PF 0000:3b:00.0 is not its eswitch manager (a BlueField in DPU mode) and takes no VF VLAN, but vlan-method=vst: tag "
                   "on the Arm side's representor and give the pool's networks no vlan, or put the card in NIC mode");
  g_clear_error (&error);
  /* untagged passthrough works there */
  f->pool.vlan_method = VA_VLAN_METHOD_NONE;
  g_assert_true (va_backend_prepare_pf (f->backend, pf, &f->pool, &error));
  g_assert_no_error (error);
}

/* A PF whose pool changed from kind=sriov to kind=vdpa: its VFs were made
 * without a driver; preparing it for vdpa turns autoprobe on and makes
 * them again (refused while leases sit on them). And back. */
static void
test_prepare_autoprobe_follows_kind (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) pfs = NULL;
  VaPfInfo *pf;
  g_autoptr (GError) error = NULL;
  g_autofree char *autoprobe = NULL;
  g_autofree char *numvfs = NULL;

  umockdev_testbed_set_attribute (f->bed, PF_SYS, "sriov_drivers_autoprobe", "0");
  /* VF 0 made without a driver: no netdev */
  umockdev_testbed_remove_device (f->bed, "/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.2/net/enp59s0f0v0");
  pfs = discover (f);
  pf = g_ptr_array_index (pfs, 0);

  pf->leases = 1;
  g_assert_false (va_backend_prepare_pf (f->backend, pf, &f->pool, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_BUSY);
  g_assert_cmpstr (error->message, ==,
                   "PF 0000:3b:00.0: refusing to change its VFs' driver (made without one, for a kind=sriov pool): 1 lease(s) on its VFs");
  g_clear_error (&error);
  autoprobe = bed_read (f, PF_SYS "/sriov_drivers_autoprobe");
  g_assert_cmpstr (autoprobe, ==, "0");

  pf->leases = 0;
  g_assert_true (va_backend_prepare_pf (f->backend, pf, &f->pool, &error));
  g_assert_no_error (error);
  g_free (autoprobe);
  autoprobe = bed_read (f, PF_SYS "/sriov_drivers_autoprobe");
  g_assert_cmpstr (autoprobe, ==, "1");
  numvfs = bed_read (f, PF_SYS "/sriov_numvfs");
  g_assert_cmpstr (numvfs, ==, "8");

  /* back to kind=sriov: off again, without a VF count in the pool */
  f->pool.kind = VA_POOL_KIND_SRIOV;
  g_assert_true (va_backend_prepare_pf (f->backend, pf, &f->pool, &error));
  g_assert_no_error (error);
  g_free (autoprobe);
  autoprobe = bed_read (f, PF_SYS "/sriov_drivers_autoprobe");
  g_assert_cmpstr (autoprobe, ==, "0");
}

/* A passed-through VF in legacy mode: spoofchk and trust through the PF
 * as the network says; a driver that does not keep them fails the lease. */
static void
test_secure_vf_legacy (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) pfs = discover (f);
  g_autoptr (GError) error = NULL;

  f->pool.kind = VA_POOL_KIND_SRIOV;
  g_assert_true (va_backend_secure_vf (f->backend, "0000:3b:00.3", &f->pool, TRUE, FALSE, &error));
  g_assert_no_error (error);
  g_assert_true (va_backend_secure_vf (f->backend, "0000:3b:00.4", &f->pool, FALSE, TRUE, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (fake_devlink.vf_calls->str, ==, "enp59s0f0 vf 1 spoofchk on trust off\nenp59s0f0 vf 2 spoofchk off trust on\n");

  fake_devlink.flags_ignored = TRUE;
  g_assert_false (va_backend_secure_vf (f->backend, "0000:3b:00.3", &f->pool, TRUE, FALSE, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED);
}

/* In switchdev mode, and on a host PF in DPU mode, mlx5 refuses spoofchk
 * and trust (esw/legacy.c): nothing is sent, and repair_vf resets only
 * the MAC and VLAN there. */
static void
test_secure_vf_switchdev (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) pfs = discover (f);
  g_autoptr (GError) error = NULL;
  g_autofree char *repaired = NULL;

  f->pool.kind = VA_POOL_KIND_SRIOV;
  g_assert_true (va_backend_secure_vf (f->backend, "0000:3b:00.3", &f->pool, TRUE, FALSE, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (fake_devlink.vf_calls->str, ==, "");

  /* a VF on no driver: one on mlx5_core is the host's, never reset */
  testbed_unbind_vfs (umockdev_testbed_get_root_dir (f->bed), 1, 1);
  fake_devlink.vf_vlan = 100;
  fake_devlink.vf_mac[5] = 0x42;
  g_assert_true (va_backend_repair_vf (f->backend, "0000:3b:00.3", "enp59s0f0np0", &repaired, &error));
  g_assert_no_error (error);
  g_assert_nonnull (repaired);
  g_assert_cmpstr (fake_devlink.vf_calls->str, ==, "enp59s0f0np0 vf 1 mac 00:00:00:00:00:00 vlan 0\n");
}

static void
test_repair_vf_legacy (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) pfs = discover (f);
  g_autoptr (GError) error = NULL;
  g_autofree char *repaired = NULL;

  /* a VF on no driver: one on mlx5_core is the host's, never reset */
  testbed_unbind_vfs (umockdev_testbed_get_root_dir (f->bed), 1, 1);
  fake_devlink.vf_vlan = 100;
  g_assert_true (va_backend_repair_vf (f->backend, "0000:3b:00.3", "enp59s0f0", &repaired, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (repaired, ==, "VF 0000:3b:00.3 (enp59s0f0 vf 1): no lease, left with VLAN 100 and MAC 00:00:00:00:00:00: reset");
  g_assert_cmpstr (fake_devlink.vf_calls->str, ==, "enp59s0f0 vf 1 mac 00:00:00:00:00:00 vlan 0 spoofchk on trust off\n");
}

/* Debian's 6.12 kernels build mlx5 without TC offload (MLX5_CLS_ACT needs
 * NET_TC_SKB_EXT): the ovs method's warning says the traffic crosses the
 * CPU there, whatever Open vSwitch's hw-offload says. */
static void
test_ovs_warning_no_tc (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) pfs = discover (f);
  struct utsname u;
  g_autofree char *boot = g_build_filename (umockdev_testbed_get_root_dir (f->bed), "boot", NULL);
  g_autofree char *config = NULL;
  g_autofree char *warning = NULL;
  const char *pcis[] = { "0000:3b:00.0", NULL };

  g_assert_cmpint (uname (&u), ==, 0);
  config = g_strdup_printf ("%s/config-%s", boot, u.release);
  g_assert_cmpint (g_mkdir_with_parents (boot, 0755), ==, 0);
  g_assert_true (g_file_set_contents (config, "CONFIG_MLX5_ESWITCH=y\nCONFIG_MLX5_BRIDGE=y\n# CONFIG_MLX5_CLS_ACT is not set\n", -1, NULL));
  f->pool.vlan_method = VA_VLAN_METHOD_OVS;
  f->pool.uplink_bridge = (char *) "br-up";
  warning = va_backend_pool_warning (f->backend, &f->pool, pcis);
  g_assert_cmpstr (warning, ==,
                   "vlan-method=ovs: this kernel's mlx5 offloads no TC rule (CONFIG_MLX5_CLS_ACT is not set, as in Debian's 6.12 kernels), "
                   "so the VFs' traffic crosses the host's CPU in Open vSwitch whatever hw-offload says: use vlan-method=bridge, which "
                   "this kernel offloads (CONFIG_MLX5_BRIDGE)");
  g_clear_pointer (&warning, g_free);

  /* with it, the warning is Open vSwitch's own setting (not read here) */
  g_assert_true (g_file_set_contents (config, "CONFIG_MLX5_BRIDGE=y\nCONFIG_MLX5_CLS_ACT=y\n", -1, NULL));
  warning = va_backend_pool_warning (f->backend, &f->pool, pcis);
  g_assert_null (strstr (warning ? warning : "", "CONFIG_MLX5_CLS_ACT"));
  g_unlink (config);
}

/* Issue 28, item 5: a pool that offers software slots on a kernel without
 * VDUSE says so (the pool's warning: at start, in the journal and in
 * vdpactl's pool and status), and says nothing once /dev/vduse/control is
 * there (drivers/vdpa/vdpa_user/vduse_dev.c makes it at module load). */
static void
test_software_warning_no_vduse (Fixture *f, gconstpointer data)
{
  g_autofree char *dir = g_build_filename (umockdev_testbed_get_root_dir (f->bed), "dev", "vduse", NULL);
  g_autofree char *control = g_build_filename (dir, "control", NULL);
  g_autofree char *warning = NULL;
  const char *pcis[] = { NULL };

  f->pool.software_slots = 4;
  warning = va_backend_pool_warning (f->backend, &f->pool, pcis);
  g_assert_nonnull (warning);
  g_assert_true (g_str_has_prefix (warning, "software-slots=4: this kernel has no VDUSE loaded (/dev/vduse/control is missing;"));
  g_assert_true (g_str_has_suffix (warning, "a NIC past the pool's hardware slots is refused"));
  g_clear_pointer (&warning, g_free);

  g_assert_cmpint (g_mkdir_with_parents (dir, 0755), ==, 0);
  g_assert_true (g_file_set_contents (control, "", 0, NULL));
  warning = va_backend_pool_warning (f->backend, &f->pool, pcis);
  g_assert_null (warning);
  g_unlink (control);
}

/* Leases on a PF's VFs (a restart with guests running): no VF count or
 * eswitch change, whatever the configuration asks. */
static void
test_prepare_refused_with_leases (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) pfs = discover (f);
  VaPfInfo *pf = g_ptr_array_index (pfs, 0);
  g_autoptr (GError) error = NULL;
  g_autofree char *numvfs = NULL;

  pf->leases = 2;
  f->pool.vfs = 4;
  f->pool.eswitch = VA_ESWITCH_SWITCHDEV;
  g_assert_false (va_backend_prepare_pf (f->backend, pf, &f->pool, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_BUSY);
  g_assert_cmpstr (error->message, ==,
                   "PF 0000:3b:00.0: refusing to change its eswitch mode to switchdev and sriov_numvfs from 8 to 4: 2 lease(s) on its VFs");
  g_assert_cmpuint (fake_devlink.sets, ==, 0);
  numvfs = bed_read (f, PF_SYS "/sriov_numvfs");
  g_assert_cmpstr (numvfs, ==, "8");
}

static void
test_prepare_refused_under_vdpa (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) pfs = discover (f);
  VaPfInfo *pf = g_ptr_array_index (pfs, 0);
  g_autoptr (GError) error = NULL;

  f->pool.vfs = 4;
  g_assert_false (va_backend_prepare_pf (f->backend, pf, &f->pool, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_BUSY);
  g_assert_cmpstr (error->message, ==,
                   "PF 0000:3b:00.0: refusing to change sriov_numvfs from 2 to 4: vdpa device va-0000:3b:00.2 sits on VF 0000:3b:00.2");
}

static VaDeviceRequest
request (Fixture *f, const char *slot, guint16 vlan)
{
  VaDeviceRequest req = { slot, "enp59s0f0np0", "52:54:00:12:34:56", 4, 1500, vlan, &f->pool };
  return req;
}

static void
test_create_no_vdpa_family (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) pfs = discover (f);
  g_autoptr (GError) error = NULL;
  VaDeviceRequest req = request (f, "0000:3b:00.2", 0);
  g_autofree char *name = va_backend_kernel_device_name ("0000:3b:00.2");

  g_assert_cmpstr (name, ==, "va-0000:3b:00.2");
  g_assert_null (va_backend_create_device (f->backend, &req, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_NOT_FOUND);
  g_assert_cmpstr (error->message, ==,
                   "vdpa device va-0000:3b:00.2 on VF 0000:3b:00.2: the kernel has no vdpa netlink family (module vdpa not loaded, or "
                   "kernel built without it)");
  g_clear_error (&error);

  req.slot = "0000:99:00.1";
  g_assert_null (va_backend_create_device (f->backend, &req, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_NOT_FOUND);
  g_assert_cmpstr (error->message, ==, "VF 0000:99:00.1: not a VF of any ConnectX PF on this host");
  g_clear_error (&error);

  req.slot = "0000:3b:00.3";
  req.mac = "52:54:00:12:34";
  g_assert_null (va_backend_create_device (f->backend, &req, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (error->message, ==, "vdpa device va-0000:3b:00.3 on VF 0000:3b:00.3: '52:54:00:12:34' is no MAC address");
}

static void
test_create_on_busy_vf (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  VaDeviceRequest req = request (f, "0000:3b:00.2", 0);

  g_assert_null (va_backend_create_device (f->backend, &req, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_BUSY);
  g_assert_cmpstr (error->message, ==,
                   "vdpa device va-0000:3b:00.2 on VF 0000:3b:00.2: the VF already carries vdpa device va-0000:3b:00.2 "
                   "(reconciliation removes orphans)");
}

static void
test_attach_binds_and_sets_node (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  VaDeviceRequest req = request (f, "0000:3b:00.2", 0);
  g_autoptr (VaDeviceInfo) dev = NULL;
  g_autofree char *override = NULL;
  g_autofree char *probe = NULL;
  g_autofree char *node = g_build_filename (umockdev_testbed_get_root_dir (f->bed), "dev", "vhost-vdpa-0", NULL);
  g_autofree char *access_path = NULL;
  g_autofree char *access = NULL;
  struct stat st;

  dev = va_backend_kernel_attach (f->backend, &req, "va-0000:3b:00.2", &error);
  g_assert_no_error (error);
  g_assert_cmpstr (dev->name, ==, "va-0000:3b:00.2");
  g_assert_cmpstr (dev->slot, ==, "0000:3b:00.2");
  g_assert_cmpstr (dev->chardev, ==, node);
  /* race-free bind: driver_override, then drivers_probe */
  override = bed_read (f, VDPA0_SYS "/driver_override");
  g_assert_cmpstr (override, ==, "vhost_vdpa");
  probe = bed_read (f, "/sys/bus/vdpa/drivers_probe");
  g_assert_cmpstr (probe, ==, "va-0000:3b:00.2");
  /* the pool's group and mode */
  g_assert_cmpint (stat (node, &st), ==, 0);
  g_assert_cmpuint (st.st_gid, ==, 1234);
  g_assert_cmpuint (st.st_mode & 07777, ==, 0640);
  /* what the udev rule reads at the bind */
  access_path = g_build_filename (f->tmp, "nodes", "va-0000:3b:00.2", NULL);
  g_assert_true (g_file_get_contents (access_path, &access, NULL, NULL));
  g_assert_cmpstr (access, ==, "1234 0640\n");
  g_unlink (access_path);
}

static void
test_attach_unbound_has_no_node (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  VaDeviceRequest req = request (f, "0000:3b:00.3", 0);

  /* the testbed binds nothing: the node never shows, and the error says so */
  g_assert_null (va_backend_kernel_attach (f->backend, &req, "va-0000:3b:00.3", &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED);
  g_assert_cmpstr (error->message, ==, "vdpa device va-0000:3b:00.3: no vhost-vdpa node: not bound to vhost_vdpa");
}

static void
test_attach_vlan_methods (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  VaDeviceRequest req = request (f, "0000:3b:00.2", 2334);
  g_autofree char *bin = g_build_filename (f->tmp, "bin", NULL);
  g_autofree char *fake = g_build_filename (bin, "ovs-vsctl", NULL);
  g_autofree char *log = g_build_filename (f->tmp, "ovs.log", NULL);
  g_autofree char *script = g_strdup_printf ("#!/bin/sh\necho \"$*\" >> %s\n", log);
  g_autofree char *old_path = g_strdup (g_getenv ("PATH"));
  g_autofree char *args = NULL;
  g_autoptr (VaDeviceInfo) dev = NULL;

  /* vst: rtnetlink on the PF, which this machine does not have */
  f->pool.vlan_method = VA_VLAN_METHOD_VST;
  g_assert_null (va_backend_kernel_attach (f->backend, &req, "va-0000:3b:00.2", &error));
  g_assert_cmpstr (error->message, ==,
                   "PF enp59s0f0np0 VF 0: setting MAC, VLAN 2334, spoofchk on, trust off: no network interface enp59s0f0np0");
  g_clear_error (&error);

  /* bridge: the representor into the uplink bridge first */
  f->pool.vlan_method = VA_VLAN_METHOD_BRIDGE;
  f->pool.uplink_bridge = (char *) "br-up";
  g_assert_null (va_backend_kernel_attach (f->backend, &req, "va-0000:3b:00.2", &error));
  g_assert_cmpstr (error->message, ==, "port enp59s0f0npf0vf0: joining bridge br-up: no network interface enp59s0f0npf0vf0");
  g_clear_error (&error);

  /* ovs without Open vSwitch */
  f->pool.vlan_method = VA_VLAN_METHOD_OVS;
  g_setenv ("PATH", "/nonexistent", TRUE);
  g_assert_null (va_backend_kernel_attach (f->backend, &req, "va-0000:3b:00.2", &error));
  g_assert_cmpstr (error->message, ==,
                   "vdpa device va-0000:3b:00.2 on VF 0000:3b:00.2: adding representor enp59s0f0npf0vf0 to OVS bridge br-up with tag "
                   "2334: ovs-vsctl is not installed (vlan-method=ovs needs Open vSwitch: apt install openvswitch-switch)");
  g_clear_error (&error);

  /* ovs: the real ovs-vsctl's command line, as libvirt runs it; then the
   * representor's link up, which OVS leaves alone (and which this machine,
   * without the representor, refuses) */
  g_assert_cmpint (g_mkdir (bin, 0755), ==, 0);
  g_assert_true (g_file_set_contents (fake, script, -1, NULL));
  g_assert_cmpint (g_chmod (fake, 0755), ==, 0);
  g_setenv ("PATH", bin, TRUE);
  dev = va_backend_kernel_attach (f->backend, &req, "va-0000:3b:00.2", &error);
  g_assert_null (dev);
  g_assert_cmpstr (error->message, ==,
                   "vdpa device va-0000:3b:00.2 on VF 0000:3b:00.2: port enp59s0f0npf0vf0: setting it up: no network interface "
                   "enp59s0f0npf0vf0");
  g_clear_error (&error);
  g_assert_true (va_backend_destroy_device (f->backend, "0000:3b:00.2", "va-gone", &f->pool, &error));
  g_assert_no_error (error);
  g_setenv ("PATH", old_path, TRUE);
  g_assert_true (g_file_get_contents (log, &args, NULL, NULL));
  g_assert_cmpstr (args, ==,
                   "--timeout=5 -- --may-exist add-port br-up enp59s0f0npf0vf0 tag=2334 -- set Port enp59s0f0npf0vf0 tag=2334\n"
                   "--timeout=5 -- --if-exists del-port br-up enp59s0f0npf0vf0\n");
  g_unlink (log);
  g_unlink (fake);
  g_rmdir (bin);
}

static void
test_list_devices (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) devs = va_backend_list_devices (f->backend, &error);
  g_autofree char *node = g_build_filename (umockdev_testbed_get_root_dir (f->bed), "dev", "vhost-vdpa-0", NULL);
  VaDeviceInfo *d;

  g_assert_no_error (error);
  g_assert_cmpuint (devs->len, ==, 2);
  d = g_ptr_array_index (devs, 0);
  g_assert_cmpstr (d->name, ==, "va-0000:3b:00.2");
  g_assert_cmpstr (d->slot, ==, "0000:3b:00.2");
  g_assert_cmpstr (d->chardev, ==, node);
  /* made but never bound (a crash between DEV_NEW and the bind): no node */
  d = g_ptr_array_index (devs, 1);
  g_assert_cmpstr (d->name, ==, "va-0000:3b:00.3");
  g_assert_cmpstr (d->slot, ==, "0000:3b:00.3");
  g_assert_cmpstr (d->chardev, ==, "");
  g_assert_false (va_backend_device_busy (f->backend, d->chardev));
  g_assert_false (va_backend_device_busy (f->backend, node));
}

static void
test_list_skips_foreign (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) devs = NULL;
  g_autoptr (GPtrArray) names = NULL;

  /* a device an operator made by hand is never the backend's to remove */
  umockdev_testbed_add_device (f->bed, "vdpa", "vdpa0", NULL, NULL, NULL);
  names = va_kernel_vdpa_devices (&error);
  g_assert_no_error (error);
  g_assert_cmpuint (names->len, ==, 3);
  devs = va_backend_list_devices (f->backend, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (devs->len, ==, 2);
}

static void
test_destroy (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;

  /* gone already: no error, and nothing asked of the kernel */
  g_assert_true (va_backend_destroy_device (f->backend, "0000:3b:00.2", "va-gone", &f->pool, &error));
  g_assert_no_error (error);
  g_assert_true (va_backend_destroy_device (f->backend, "0000:99:00.1", "va-0000:99:00.1", NULL, &error));
  g_assert_no_error (error);

  /* present: DEV_DEL, which this kernel cannot take */
  g_assert_false (va_backend_destroy_device (f->backend, "0000:3b:00.2", "va-0000:3b:00.2", &f->pool, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED);
  g_assert_cmpstr (error->message, ==,
                   "vdpa device va-0000:3b:00.2 on VF 0000:3b:00.2: deleting it: the kernel has no vdpa netlink family (module vdpa not "
                   "loaded, or kernel built without it)");
}

/* The VDUSE test pool (pool type vduse-test): VDUSE devices va-SLOT as its
 * slots, under a PF that only such pools take. The devices here are what
 * tests/lab/vduse-net makes on the lab host's real kernel, where the lab
 * tier runs the same code for real. */
#define VDUSE_BED                                                                                                                          \
  "P: /devices/virtual/vduse/control\nE: SUBSYSTEM=vduse\n\n"                                                                              \
  "P: /devices/virtual/vduse/va-vduse1\nE: SUBSYSTEM=vduse\n\n"                                                                            \
  "P: /devices/virtual/vduse/va-vduse0\nE: SUBSYSTEM=vduse\n\n"                                                                            \
  "P: /devices/virtual/vduse/blk0\nE: SUBSYSTEM=vduse\n\n"                                                                                 \
  "P: /devices/virtual/vduse/va-vduse0/va-vduse0\nE: SUBSYSTEM=vdpa\n\n"                                                                   \
  "P: /devices/virtual/net/vduse1\nE: SUBSYSTEM=net\nE: INTERFACE=vduse1\nA: ifindex=9\n\n"

static void
test_vduse_pool (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) pfs = NULL;
  g_autoptr (GPtrArray) devs = NULL;
  g_autoptr (GPtrArray) kpfs = NULL;
  VaPoolConfig vduse_pool = { .name = (char *) "lab", .type = VA_POOL_TYPE_VDUSE_TEST };
  VaPfInfo *cx, *pf;
  VaKernelPf *kpf;
  VaDeviceRequest req = request (f, "vduse0", 0);
  gboolean ok;

  /* no vduse module: no such PF */
  pfs = discover (f);
  g_assert_cmpuint (pfs->len, ==, 1);
  g_clear_pointer (&pfs, g_ptr_array_unref);

  ok = umockdev_testbed_add_from_string (f->bed, VDUSE_BED, &error);
  g_assert_no_error (error);
  g_assert_true (ok);
  pfs = discover (f);
  g_assert_cmpuint (pfs->len, ==, 2);
  cx = g_ptr_array_index (pfs, 0);
  pf = g_ptr_array_index (pfs, 1);
  g_assert_cmpstr (pf->name, ==, "vduse");
  g_assert_cmpstr (pf->pci, ==, "vduse");
  g_assert_true (pf->vduse_test);
  g_assert_false (cx->vduse_test);
  g_assert_true (pf->healthy);
  g_assert_cmpint (pf->numa_node, ==, -1);
  /* only the va-* devices, sorted; never another user's (blk0) */
  g_assert_cmpuint (pf->vfs->len, ==, 2);
  g_assert_cmpstr (g_ptr_array_index (pf->vfs, 0), ==, "vduse0");
  g_assert_cmpstr (g_ptr_array_index (pf->vfs, 1), ==, "vduse1");
  {
    g_autofree char *m = va_pf_info_vf_mgmtdev (pf, 0);
    g_autofree char *why = va_pool_config_mismatch (&f->pool, pf);
    g_assert_cmpstr (m, ==, "vduse");
    g_assert_cmpstr (why, ==, "the VDUSE test PF: only a type=vduse-test pool takes it");
  }

  /* only a vduse-test pool takes it, and it takes nothing else */
  g_assert_true (va_pool_config_matches (&vduse_pool, pf));
  g_assert_false (va_pool_config_matches (&vduse_pool, cx));
  g_assert_false (va_pool_config_matches (&f->pool, pf));
  f->pool.match_vendor = 0;
  f->pool.match_pf = (char *[]){ (char *) "vduse", NULL };
  g_assert_false (va_pool_config_matches (&f->pool, pf));

  /* a netdev named like the slot stands in for its representor */
  kpfs = va_kernel_discover (&error);
  g_assert_no_error (error);
  kpf = g_ptr_array_index (kpfs, 1);
  g_assert_true (va_kernel_pf_is_vduse (kpf));
  g_assert_null (((VaKernelVf *) g_ptr_array_index (kpf->vfs, 0))->representor);
  g_assert_cmpstr (((VaKernelVf *) g_ptr_array_index (kpf->vfs, 1))->representor, ==, "vduse1");

  /* nothing to prepare: the servers made the devices */
  g_assert_true (va_backend_prepare_pf (f->backend, pf, &vduse_pool, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (pf->vfs->len, ==, 2);

  /* a VDUSE device's vdpa device names its slot */
  devs = va_backend_list_devices (f->backend, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (devs->len, ==, 1);
  g_assert_cmpstr (((VaDeviceInfo *) g_ptr_array_index (devs, 0))->name, ==, "va-vduse0");
  g_assert_cmpstr (((VaDeviceInfo *) g_ptr_array_index (devs, 0))->slot, ==, "vduse0");

  /* the slot carries its device already */
  req.pool = &vduse_pool;
  g_assert_null (va_backend_create_device (f->backend, &req, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_BUSY);
  g_assert_cmpstr (
    error->message, ==,
    "vdpa device va-vduse0 on VDUSE slot vduse0: the VF already carries vdpa device va-vduse0 (reconciliation removes orphans)");
  g_clear_error (&error);
  /* the free one reaches DEV_NEW, which this kernel cannot take */
  req.slot = "vduse1";
  g_assert_null (va_backend_create_device (f->backend, &req, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_NOT_FOUND);
  g_assert_cmpstr (
    error->message, ==,
    "vdpa device va-vduse1 on VDUSE slot vduse1: the kernel has no vdpa netlink family (module vdpa not loaded, or kernel built "
    "without it)");
}

static void
test_bind_needs_vhost_vdpa (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *driver = g_build_filename (umockdev_testbed_get_sys_dir (f->bed), "bus", "vdpa", "drivers", "vhost_vdpa", NULL);
  g_autofree char *probe = NULL;
  VaDeviceRequest req = request (f, "0000:3b:00.3", 0);

  /* the kernel would take the probe and bind nothing */
  g_assert_cmpint (g_rmdir (driver), ==, 0);
  g_assert_null (va_backend_kernel_attach (f->backend, &req, "va-0000:3b:00.3", &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED);
  g_assert_cmpstr (error->message, ==,
                   "vdpa device va-0000:3b:00.3: binding to vhost_vdpa: the vhost_vdpa module is not loaded (modprobe vhost_vdpa)");
  probe = bed_read (f, "/sys/bus/vdpa/drivers_probe");
  g_assert_cmpstr (probe, ==, "");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
#define ADD(path, bed, fn) g_test_add (path, Fixture, bed, setup, fn, teardown)
  ADD ("/backend-kernel/discover/pfs-and-slots", "cx6dx-switchdev.umockdev", test_discover);
  ADD ("/backend-kernel/discover/vf-reasons", "cx6dx-switchdev.umockdev", test_discover_vf_reasons);
  ADD ("/backend-kernel/discover/cx5-reason", "cx6dx-switchdev.umockdev", test_discover_cx5);
  ADD ("/backend-kernel/prepare/unchanged", "cx6dx-switchdev.umockdev", test_prepare_unchanged);
  ADD ("/backend-kernel/prepare/makes-vfs", "cx6dx-legacy.umockdev", test_prepare_makes_vfs);
  ADD ("/backend-kernel/prepare/mode-change-vfs-first", "cx6dx-legacy.umockdev", test_prepare_mode_change);
  ADD ("/backend-kernel/prepare/legacy-pf-kept", "cx6dx-legacy.umockdev", test_prepare_legacy_kept);
  ADD ("/backend-kernel/prepare/legacy-pf-switched", "cx6dx-legacy.umockdev", test_prepare_switches_legacy_pf);
  ADD ("/backend-kernel/prepare/mode-unknown-untouched", "cx6dx-legacy.umockdev", test_prepare_mode_unknown);
  ADD ("/backend-kernel/prepare/refused-with-leases", "cx6dx-legacy.umockdev", test_prepare_refused_with_leases);
  ADD ("/backend-kernel/prepare/refused-under-vdpa", "cx6dx-vdpa.umockdev", test_prepare_refused_under_vdpa);
  ADD ("/backend-kernel/discover/cx4lx-sriov", "cx4lx-legacy.umockdev", test_discover_cx4lx);
  ADD ("/backend-kernel/discover/mlx-unknown-sriov", "cx4lx-legacy.umockdev", test_discover_mlx_unknown);
  ADD ("/backend-kernel/discover/igb-sriov-only", "igb-legacy.umockdev", test_discover_igb);
  ADD ("/backend-kernel/prepare-sriov/igb", "igb-legacy.umockdev", test_prepare_sriov_igb);
  ADD ("/backend-kernel/prepare-sriov/igb-no-switchdev", "igb-legacy.umockdev", test_prepare_sriov_igb_switchdev);
  ADD ("/backend-kernel/prepare-sriov/refused-with-leases", "igb-legacy.umockdev", test_prepare_sriov_refused_with_leases);
  ADD ("/backend-kernel/prepare-sriov/connectx-no-vf-driver", "cx6dx-legacy.umockdev", test_prepare_sriov_connectx);
  ADD ("/backend-kernel/prepare/vlan-on-switchdev", "cx6dx-switchdev.umockdev", test_prepare_vlan_on_switchdev);
  ADD ("/backend-kernel/prepare/vlan-dpu-mode", "cx6dx-legacy.umockdev", test_prepare_vlan_dpu_mode);
  ADD ("/backend-kernel/prepare/autoprobe-follows-kind", "cx6dx-legacy.umockdev", test_prepare_autoprobe_follows_kind);
  ADD ("/backend-kernel/secure-vf/legacy", "cx6dx-legacy.umockdev", test_secure_vf_legacy);
  ADD ("/backend-kernel/secure-vf/switchdev-nothing-sent", "cx6dx-switchdev.umockdev", test_secure_vf_switchdev);
  ADD ("/backend-kernel/repair-vf/legacy", "cx6dx-legacy.umockdev", test_repair_vf_legacy);
  ADD ("/backend-kernel/pool-warning/ovs-without-tc-offload", "cx6dx-switchdev.umockdev", test_ovs_warning_no_tc);
  ADD ("/backend-kernel/pool-warning/software-without-vduse", "cx6dx-switchdev.umockdev", test_software_warning_no_vduse);
  ADD ("/backend-kernel/create/no-vdpa-family", "cx6dx-switchdev.umockdev", test_create_no_vdpa_family);
  ADD ("/backend-kernel/create/busy-vf", "cx6dx-vdpa.umockdev", test_create_on_busy_vf);
  ADD ("/backend-kernel/attach/bind-node-access", "cx6dx-vdpa.umockdev", test_attach_binds_and_sets_node);
  ADD ("/backend-kernel/attach/unbound-no-node", "cx6dx-vdpa.umockdev", test_attach_unbound_has_no_node);
  ADD ("/backend-kernel/attach/vlan-methods", "cx6dx-vdpa.umockdev", test_attach_vlan_methods);
  ADD ("/backend-kernel/list/devices-with-parents", "cx6dx-vdpa.umockdev", test_list_devices);
  ADD ("/backend-kernel/list/skips-foreign", "cx6dx-vdpa.umockdev", test_list_skips_foreign);
  ADD ("/backend-kernel/destroy", "cx6dx-vdpa.umockdev", test_destroy);
  ADD ("/backend-kernel/vduse-test/pool", "cx6dx-switchdev.umockdev", test_vduse_pool);
  ADD ("/backend-kernel/attach/needs-vhost-vdpa", "cx6dx-vdpa.umockdev", test_bind_needs_vhost_vdpa);
  return g_test_run ();
}
