/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The kernel backend's discovery and sysfs writes against umockdev testbeds
 * of ConnectX NICs (tests/kernel/testbeds). Runs with
 * LD_PRELOAD=libumockdev-preload.so.0 so that libudev sees the testbed. */
#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <umockdev.h>
#include <unistd.h>

#include "va-error.h"
#include "va-kernel.h"
#include "va-sysfs.h"
#include "testbed-devlink.h"

#define PF_SYS "/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0"

typedef struct
{
  UMockdevTestbed *bed;
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
  f->bed = umockdev_testbed_new ();
  g_assert_true (umockdev_in_mock_environment ());
  fake_devlink_for (data);
  if (data)
    load (f, data);
  /* a kernel that ships mlx5_vdpa, not loaded: the hint names modprobe */
  testbed_mlx5_modules (umockdev_testbed_get_root_dir (f->bed), TRUE, FALSE);
}

static void
teardown (Fixture *f, gconstpointer data)
{
  g_clear_object (&f->bed);
  va_kernel_set_devlink (NULL);
}

static char *
bed_read (Fixture *f, const char *sys_path)
{
  g_autofree char *path = g_build_filename (umockdev_testbed_get_root_dir (f->bed), sys_path, NULL);
  g_autoptr (GError) error = NULL;
  char *text = NULL;

  g_assert_true (g_file_get_contents (path, &text, NULL, &error));
  return g_strchomp (text);
}

static GPtrArray *
discover_one (void)
{
  g_autoptr (GError) error = NULL;
  GPtrArray *pfs = va_kernel_discover (&error);

  g_assert_no_error (error);
  g_assert_nonnull (pfs);
  g_assert_cmpuint (pfs->len, ==, 1);
  return pfs;
}

static void
test_switchdev (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) pfs = discover_one ();
  VaKernelPf *pf = g_ptr_array_index (pfs, 0);

  g_assert_cmpstr (pf->pci, ==, "0000:3b:00.0");
  g_assert_cmpstr (pf->syspath, ==, PF_SYS);
  g_assert_cmphex (pf->device, ==, 0x101d);
  g_assert_cmpstr (pf->model->name, ==, "ConnectX-6 Dx");
  g_assert_cmpstr (pf->netdev, ==, "enp59s0f0np0");
  g_assert_cmpint (pf->ifindex, ==, 4);
  g_assert_cmpint (pf->numa_node, ==, 1);
  g_assert_cmpstr (pf->operstate, ==, "up");
  g_assert_true (pf->carrier);
  g_assert_cmpstr (pf->switch_id, ==, "00003bfffef6ceb8");
  g_assert_null (pf->reason);
  g_assert_cmpuint (pf->numvfs, ==, 8);
  g_assert_cmpuint (pf->totalvfs, ==, 127);
  g_assert_cmpuint (pf->vfs->len, ==, 8);
  for (guint i = 0; i < 8; i++)
    {
      VaKernelVf *vf = g_ptr_array_index (pf->vfs, i);
      g_autofree char *pci = g_strdup_printf ("0000:3b:%02x.%u", (2 + i) / 8, (2 + i) % 8);
      g_autofree char *netdev = g_strdup_printf ("enp59s0f0np0v%u", i);
      g_autofree char *rep = g_strdup_printf ("enp59s0f0npf0vf%u", i);

      g_assert_cmpuint (vf->index, ==, i);
      g_assert_cmpstr (vf->pci, ==, pci);
      g_assert_cmpstr (vf->netdev, ==, netdev);
      g_assert_cmpstr (vf->representor, ==, rep);
    }
}

static void
test_legacy (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) pfs = discover_one ();
  VaKernelPf *pf = g_ptr_array_index (pfs, 0);

  g_assert_cmpstr (pf->netdev, ==, "enp59s0f0");
  /* mlx5 shows the switch id in legacy mode too: devlink says the mode */
  g_assert_cmpstr (pf->switch_id, ==, "00003bfffef6ceb8");
  g_assert_cmpint (pf->eswitch, ==, VA_KERNEL_ESWITCH_LEGACY);
  g_assert_null (pf->eswitch_error);
  g_assert_cmpstr (pf->devlink_bus, ==, "pci");
  g_assert_cmpstr (pf->devlink_dev, ==, "0000:3b:00.0");
  g_assert_null (pf->reason);
  g_assert_cmpuint (pf->vfs->len, ==, 8);
  for (guint i = 0; i < 8; i++)
    g_assert_null (((VaKernelVf *) g_ptr_array_index (pf->vfs, i))->representor);
}

/* Representors are the netdevs of the PF's own pcivf ports, by vfnum:
 * newer mlx5 derives pfnum from the native port number, so a port of pfnum
 * 1 on PCI function 0 is as good, and phys_port_name is not read for it;
 * an external host's VF 0 is no representor of ours. */
static void
test_representors_from_ports (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) pfs = NULL;
  VaKernelPf *pf;

  fake_devlink.pfnum = 1;
  umockdev_testbed_set_attribute (f->bed, PF_SYS "/net/enp59s0f0npf0vf3", "phys_port_name", "pf1vf3");
  pfs = discover_one ();
  pf = g_ptr_array_index (pfs, 0);
  g_assert_cmpint (pf->eswitch, ==, VA_KERNEL_ESWITCH_SWITCHDEV);
  g_assert_cmpstr (pf->netdev, ==, "enp59s0f0np0");
  for (guint i = 0; i < 8; i++)
    {
      g_autofree char *rep = g_strdup_printf ("enp59s0f0npf0vf%u", i);
      g_assert_cmpstr (((VaKernelVf *) g_ptr_array_index (pf->vfs, i))->representor, ==, rep);
    }
}

/* Capability per VF is its management device pci/<VF>: one without it has
 * the reason; no vdpa family at all says nothing (DEV_NEW names the
 * module). */
static void
test_vf_without_mgmtdev (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) pfs = NULL;
  g_autoptr (GPtrArray) again = NULL;
  VaKernelPf *pf;

  fake_devlink.no_mgmtdev = "0000:3b:00.3";
  pfs = discover_one ();
  pf = g_ptr_array_index (pfs, 0);
  g_assert_null (((VaKernelVf *) g_ptr_array_index (pf->vfs, 0))->reason);
  g_assert_cmpstr (((VaKernelVf *) g_ptr_array_index (pf->vfs, 1))->reason, ==,
                   "VF 0000:3b:00.3 has no vdpa management device: is mlx5_vdpa loaded? (modprobe mlx5_vdpa)");
  g_assert_null (pf->reason);

  fake_devlink.no_vdpa = TRUE;
  again = discover_one ();
  pf = g_ptr_array_index (again, 0);
  g_assert_null (((VaKernelVf *) g_ptr_array_index (pf->vfs, 1))->reason);
}

/* The reason says what to do, by what the kernel shows (issue 29): a
 * kernel that never built mlx5_vdpa (Debian's: CONFIG_MLX5_VDPA_NET unset)
 * is named with the way out, not "is mlx5_vdpa loaded?"; a loaded
 * mlx5_vdpa that offers nothing points at the firmware and the build. */
static void
test_vf_reason_by_kernel (Fixture *f, gconstpointer data)
{
  const char *root = umockdev_testbed_get_root_dir (f->bed);
  struct utsname u;
  g_autofree char *want = NULL;
  const char *states[][2] = { { "0", "0" }, { "1", "1" } };

  g_assert_cmpint (uname (&u), ==, 0);
  fake_devlink.no_mgmtdev = "0000:3b:00.3";
  for (guint i = 0; i < G_N_ELEMENTS (states); i++)
    {
      g_autoptr (GPtrArray) pfs = NULL;
      const char *reason;

      testbed_mlx5_modules (root, states[i][0][0] == '1', states[i][1][0] == '1');
      pfs = discover_one ();
      reason = ((VaKernelVf *) g_ptr_array_index (((VaKernelPf *) g_ptr_array_index (pfs, 0))->vfs, 1))->reason;
      if (i == 0)
        {
          want = g_strdup_printf ("VF 0000:3b:00.3 has no vdpa management device: kernel %s has no mlx5_vdpa "
                                  "(CONFIG_MLX5_VDPA_NET unset, as in Debian's kernels): install "
                                  "vdpa-allocator-mlx5-dkms (Debian's 6.12 kernels) or boot a kernel built with it; "
                                  "see connectx-hosts.md",
                                  u.release);
          g_assert_cmpstr (reason, ==, want);
        }
      else
        g_assert_cmpstr (reason, ==,
                         "VF 0000:3b:00.3 has no vdpa management device: mlx5_vdpa is loaded but offers none (the VF not on "
                         "mlx5_core, firmware without vDPA, or mlx5_core and mlx5_vdpa from different builds: after "
                         "installing vdpa-allocator-mlx5-dkms, reload mlx5_core or reboot)");
    }
}

/* No devlink answer: the mode is unknown, with the reason, and no
 * representor is guessed from sysfs names. */
static void
test_no_devlink (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) pfs = NULL;
  VaKernelPf *pf;

  fake_devlink.mode = VA_KERNEL_ESWITCH_UNKNOWN;
  pfs = discover_one ();
  pf = g_ptr_array_index (pfs, 0);
  g_assert_cmpint (pf->eswitch, ==, VA_KERNEL_ESWITCH_UNKNOWN);
  g_assert_cmpstr (pf->eswitch_error, ==,
                   "the kernel has no devlink netlink family (module devlink not loaded, or kernel built without it)");
  g_assert_cmpstr (pf->netdev, ==, "enp59s0f0np0");
  g_assert_null (((VaKernelVf *) g_ptr_array_index (pf->vfs, 0))->representor);
}

static void
test_cx5_reason (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) pfs = discover_one ();
  VaKernelPf *pf = g_ptr_array_index (pfs, 0);

  g_assert_cmpstr (pf->pci, ==, "0000:5e:00.0");
  g_assert_cmphex (pf->device, ==, 0x1017);
  g_assert_cmpint (pf->numa_node, ==, 0);
  g_assert_cmpuint (pf->vfs->len, ==, 0);
  g_assert_cmpstr (pf->reason, ==,
                   "ConnectX-5 (15b3:1017) cannot carry vDPA: mlx5_vdpa needs the virtio queue object, which ConnectX-5 lacks");
  /* the metrics' fixed word beside the text */
  g_assert_cmpstr (va_pf_health_to_string (pf->code), ==, "unsupported");
}

#define IGB_NET "/sys/devices/pci0000:00/0000:00:02.0/0000:01:00.0/net/enp1s0"

/* Another vendor's SR-IOV PF (igb): found by its sriov_totalvfs, no
 * ConnectX, so no vDPA, but it serves passthrough; no devlink instance,
 * so legacy only. */
static void
test_igb (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) pfs = discover_one ();
  VaKernelPf *pf = g_ptr_array_index (pfs, 0);
  g_autoptr (GPtrArray) again = NULL;

  g_assert_cmpstr (pf->pci, ==, "0000:01:00.0");
  g_assert_cmphex (pf->vendor, ==, 0x8086);
  g_assert_cmphex (pf->device, ==, 0x10c9);
  g_assert_false (va_kernel_pf_is_connectx (pf));
  g_assert_cmpstr (pf->netdev, ==, "enp1s0");
  g_assert_true (pf->admin_up);
  g_assert_cmpuint (pf->totalvfs, ==, 7);
  g_assert_cmpuint (pf->vfs->len, ==, 2);
  g_assert_cmpstr (((VaKernelVf *) g_ptr_array_index (pf->vfs, 0))->pci, ==, "0000:01:10.0");
  g_assert_cmpstr (((VaKernelVf *) g_ptr_array_index (pf->vfs, 1))->pci, ==, "0000:01:10.2");
  g_assert_null (((VaKernelVf *) g_ptr_array_index (pf->vfs, 0))->reason);
  g_assert_cmpint (pf->eswitch, ==, VA_KERNEL_ESWITCH_UNKNOWN);
  g_assert_true (pf->no_devlink);
  g_assert_cmpstr (pf->reason, ==, "8086:10c9 is no ConnectX and cannot carry vDPA: only kind=sriov pools take it");
  g_assert_cmpint (pf->code, ==, VA_PF_HEALTH_UNSUPPORTED);
  g_assert_null (pf->sriov_reason);
  g_assert_cmpint (pf->sriov_code, ==, VA_PF_HEALTH_OK);

  /* down: prepare_pf sets it up; until then discovery says so */
  umockdev_testbed_set_attribute (f->bed, IGB_NET, "flags", "0x1002");
  umockdev_testbed_set_attribute (f->bed, IGB_NET, "operstate", "down");
  again = discover_one ();
  pf = g_ptr_array_index (again, 0);
  g_assert_false (pf->admin_up);
  g_assert_cmpstr (pf->sriov_reason, ==, "link down on enp1s0 (administratively down)");
  g_assert_cmpint (pf->sriov_code, ==, VA_PF_HEALTH_LINK_DOWN);
}

/* The driver a VF is bound to: what tells a kind=sriov pool's VF that
 * libvirt passes through (vfio-pci) or the host holds (igbvf) from one
 * on no driver, which alone reconciliation may reset (issue 25, 6). */
static void
test_igb_vf_driver (Fixture *f, gconstpointer data)
{
  g_autofree char *pf = va_kernel_pci_driver ("0000:01:00.0");
  g_autofree char *vf = va_kernel_pci_driver ("0000:01:10.0");
  g_autofree char *link
    = g_build_filename (umockdev_testbed_get_root_dir (f->bed), "sys/devices/pci0000:00/0000:00:02.0/0000:01:10.2/driver", NULL);
  g_autofree char *bound = NULL;

  g_assert_cmpstr (pf, ==, "igb");
  g_assert_null (vf);
  g_assert_cmpint (symlink ("../../../../bus/pci/drivers/igbvf", link), ==, 0);
  bound = va_kernel_pci_driver ("0000:01:10.2");
  g_assert_cmpstr (bound, ==, "igbvf");
}

/* A VF shows no sriov_totalvfs, and a PF without SR-IOV is no PF here. */
static void
test_igb_no_sriov (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) pfs = NULL;

  umockdev_testbed_set_attribute (f->bed, "/sys/devices/pci0000:00/0000:00:02.0/0000:01:00.0", "sriov_totalvfs", "0");
  pfs = va_kernel_discover (&error);
  g_assert_no_error (error);
  g_assert_cmpuint (pfs->len, ==, 0);
}

static void
test_two_nics (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) pfs = NULL;

  load (f, "cx5.umockdev");
  pfs = va_kernel_discover (&error);
  g_assert_no_error (error);
  /* sorted by PCI address */
  g_assert_cmpuint (pfs->len, ==, 2);
  g_assert_cmpstr (((VaKernelPf *) g_ptr_array_index (pfs, 0))->pci, ==, "0000:3b:00.0");
  g_assert_cmpstr (((VaKernelPf *) g_ptr_array_index (pfs, 1))->pci, ==, "0000:5e:00.0");
}

static void
test_model_table (void)
{
  /* ConnectX-5, -5 Ex, -6, -6 Dx, -6 Lx, -7, -8, BlueField-2, -3, -4
   * (mlx5_core's pci table) */
  const guint16 pfs[] = { 0x1017, 0x1019, 0x101b, 0x101d, 0x101f, 0x1021, 0x1023, 0xa2d6, 0xa2dc, 0xa2df };
  const guint16 vfs[] = { 0x1018, 0x101a, 0x101c, 0x101e };

  for (guint i = 0; i < G_N_ELEMENTS (pfs); i++)
    {
      g_assert_false (va_kernel_model_lookup (pfs[i])->is_vf);
      /* only ConnectX-5 is known not to: the management device decides */
      g_assert_true (va_kernel_model_lookup (pfs[i])->vdpa == (pfs[i] > 0x101a));
    }
  for (guint i = 0; i < G_N_ELEMENTS (vfs); i++)
    g_assert_true (va_kernel_model_lookup (vfs[i])->is_vf);
  g_assert_false (va_kernel_model_lookup (0x1017)->vdpa);
  g_assert_true (va_kernel_model_lookup (0x101b)->vdpa);
  g_assert_true (va_kernel_model_lookup (0x101d)->vdpa);
  g_assert_true (va_kernel_model_lookup (0x1021)->vdpa);
  g_assert_null (va_kernel_model_lookup (0x1003)); /* ConnectX-3 */
}

/* A FIFO in place of sriov_numvfs plays the kernel: it answers the
 * backend's read with the current count, then records each value the
 * backend writes, in order. Blocking opens keep the two in step. */
typedef struct
{
  const char *path;
  const char *current;
  gsize writes; /* bytes the backend is expected to write */
  GString *seen;
} Kernel;

/* umockdev's preload holds a lock across open(2), which the backend's
 * blocking open of the FIFO keeps: the thread goes to the kernel directly. */
static int
raw_open (const char *path, int flags)
{
  return (int) syscall (SYS_openat, AT_FDCWD, path, flags | O_CLOEXEC);
}

static gpointer
kernel_thread (gpointer data)
{
  Kernel *k = data;
  int fd = raw_open (k->path, O_WRONLY);

  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (write (fd, k->current, strlen (k->current)), ==, (gssize) strlen (k->current));
  close (fd);
  /* a write may land in the same open as the one before: count bytes */
  while (k->seen->len < k->writes)
    {
      char buf[64];
      ssize_t n;

      fd = raw_open (k->path, O_RDONLY);
      g_assert_cmpint (fd, >=, 0);
      while ((n = read (fd, buf, sizeof buf)) > 0)
        g_string_append_len (k->seen, buf, n);
      close (fd);
    }
  return NULL;
}

static void
test_numvfs_through_zero (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) pfs = discover_one ();
  VaKernelPf *pf = g_ptr_array_index (pfs, 0);
  g_autoptr (GError) error = NULL;
  g_autofree char *file = g_build_filename (umockdev_testbed_get_root_dir (f->bed), PF_SYS, "sriov_numvfs", NULL);
  Kernel k = { file, "8\n", 2, g_string_new (NULL) };
  GThread *t;

  /* same count: nothing written */
  g_assert_true (va_kernel_set_numvfs (pf, 8, &error));
  g_assert_no_error (error);

  /* 8 → 4: the kernel takes no change between non-zero counts */
  g_assert_cmpint (g_unlink (file), ==, 0);
  g_assert_cmpint (mkfifo (file, 0644), ==, 0);
  t = g_thread_new ("kernel", kernel_thread, &k);
  g_assert_true (va_kernel_set_numvfs (pf, 4, &error));
  g_assert_no_error (error);
  g_thread_join (t);
  /* "0" then "4", each one write(2) */
  g_assert_cmpstr (k.seen->str, ==, "04");
  g_string_free (k.seen, TRUE);
}

static void
test_numvfs_from_zero_and_limits (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) pfs = discover_one ();
  VaKernelPf *pf = g_ptr_array_index (pfs, 0);
  g_autoptr (GError) error = NULL;
  g_autofree char *value = NULL;

  umockdev_testbed_set_attribute (f->bed, PF_SYS, "sriov_numvfs", "0");
  g_assert_true (va_kernel_set_numvfs (pf, 6, &error));
  g_assert_no_error (error);
  value = bed_read (f, PF_SYS "/sriov_numvfs");
  g_assert_cmpstr (value, ==, "6");

  g_assert_false (va_kernel_set_numvfs (pf, 200, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED);
  g_assert_cmpstr (error->message, ==, "PF 0000:3b:00.0: cannot make 200 VFs: sriov_totalvfs is 127");
  g_clear_error (&error);

  g_assert_true (va_kernel_set_vf_autoprobe (pf, TRUE, &error));
  g_free (value);
  value = bed_read (f, PF_SYS "/sriov_drivers_autoprobe");
  g_assert_cmpstr (value, ==, "1");
}

static void
test_numvfs_refused_under_vdpa (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) pfs = discover_one ();
  VaKernelPf *pf = g_ptr_array_index (pfs, 0);
  g_autoptr (GError) error = NULL;
  g_autofree char *value = NULL;

  g_assert_false (va_kernel_set_numvfs (pf, 4, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_BUSY);
  g_assert_cmpstr (error->message, ==,
                   "PF 0000:3b:00.0: refusing to change sriov_numvfs from 2 to 4: vdpa device va-0000:3b:00.2 sits on VF 0000:3b:00.2");
  value = bed_read (f, PF_SYS "/sriov_numvfs");
  g_assert_cmpstr (value, ==, "2");
}

static void
test_vdpa_bind_and_node (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) names = NULL;
  g_autofree char *node = NULL;
  g_autofree char *parent = NULL;
  g_autofree char *value = NULL;
  g_autofree char *probe = NULL;
  g_autofree char *bus = g_build_filename (umockdev_testbed_get_sys_dir (f->bed), "bus", "vdpa", NULL);
  g_autofree char *probe_file = g_build_filename (bus, "drivers_probe", NULL);
  g_autofree char *autoprobe_file = g_build_filename (bus, "drivers_autoprobe", NULL);
  g_autofree char *driver_dir = g_build_filename (bus, "drivers", "vhost_vdpa", NULL);

  names = va_kernel_vdpa_devices (&error);
  g_assert_no_error (error);
  g_assert_cmpuint (names->len, ==, 2);
  g_assert_cmpstr (g_ptr_array_index (names, 0), ==, "va-0000:3b:00.2");
  g_assert_cmpstr (g_ptr_array_index (names, 1), ==, "va-0000:3b:00.3");

  parent = va_kernel_vdpa_slot ("va-0000:3b:00.3", &error);
  g_assert_cmpstr (parent, ==, "0000:3b:00.3");

  /* the bound one has its node */
  node = va_kernel_vhost_node ("va-0000:3b:00.2", &error);
  g_assert_no_error (error);
  g_assert_cmpstr (node, ==, g_build_filename (umockdev_testbed_get_root_dir (f->bed), "dev", "vhost-vdpa-0", NULL));
  g_clear_pointer (&node, g_free);

  /* the unbound one: none yet, said so */
  node = va_kernel_vhost_node ("va-0000:3b:00.3", &error);
  g_assert_null (node);
  g_assert_cmpstr (error->message, ==, "vdpa device va-0000:3b:00.3: no vhost-vdpa node: not bound to vhost_vdpa");
  g_clear_error (&error);

  /* the bus files the kernel has and a testbed lacks */
  g_assert_cmpint (g_mkdir_with_parents (bus, 0755), ==, 0);
  g_assert_true (g_file_set_contents (probe_file, "", 0, NULL));
  g_assert_true (g_file_set_contents (autoprobe_file, "1", 1, NULL));

  g_assert_true (va_kernel_vdpa_autoprobe (FALSE, &error));
  g_assert_no_error (error);
  /* a vhost_vdpa driver registered on the bus */
  g_assert_cmpint (g_mkdir_with_parents (driver_dir, 0755), ==, 0);
  g_assert_true (va_kernel_bind_vhost_vdpa ("va-0000:3b:00.3", &error));
  g_assert_no_error (error);
  value = bed_read (f, "/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.3/va-0000:3b:00.3/driver_override");
  g_assert_cmpstr (value, ==, "vhost_vdpa");
  probe = bed_read (f, "/sys/bus/vdpa/drivers_probe");
  g_assert_cmpstr (probe, ==, "va-0000:3b:00.3");
  g_free (value);
  value = bed_read (f, "/sys/bus/vdpa/drivers_autoprobe");
  g_assert_cmpstr (value, ==, "0");

  g_assert_false (va_kernel_bind_vhost_vdpa ("va-ghost", &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_NOT_FOUND);
  g_assert_cmpstr (error->message, ==, "vdpa device va-ghost: not on the vdpa bus");
}

static void
test_node_access (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *node = va_kernel_vhost_node ("va-0000:3b:00.2", &error);
  struct stat st;

  g_assert_no_error (error);
  g_assert_true (va_kernel_set_node_access (node, "1234", 0660, &error));
  g_assert_no_error (error);
  g_assert_cmpint (stat (node, &st), ==, 0);
  g_assert_cmpuint (st.st_gid, ==, 1234);
  g_assert_cmpuint (st.st_mode & 07777, ==, 0660);

  g_assert_false (va_kernel_set_node_access (node, "no-such-group-here", 0660, &error));
  g_assert_cmpstr (strstr (error->message, ": group"), ==, ": group 'no-such-group-here' does not exist on this host");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
#define ADD(path, bed, fn) g_test_add (path, Fixture, bed, setup, fn, teardown)
  g_test_add_func ("/kernel/model-table", test_model_table);
  ADD ("/kernel/discover/cx6dx-switchdev", "cx6dx-switchdev.umockdev", test_switchdev);
  ADD ("/kernel/discover/cx6dx-legacy", "cx6dx-legacy.umockdev", test_legacy);
  ADD ("/kernel/discover/representors-from-devlink-ports", "cx6dx-switchdev.umockdev", test_representors_from_ports);
  ADD ("/kernel/discover/vf-without-mgmtdev", "cx6dx-switchdev.umockdev", test_vf_without_mgmtdev);
  ADD ("/kernel/discover/vf-reason-by-kernel", "cx6dx-switchdev.umockdev", test_vf_reason_by_kernel);
  ADD ("/kernel/discover/no-devlink-no-guess", "cx6dx-switchdev.umockdev", test_no_devlink);
  ADD ("/kernel/discover/cx5-cannot-carry-vdpa", "cx5.umockdev", test_cx5_reason);
  ADD ("/kernel/discover/two-nics-sorted", "cx6dx-switchdev.umockdev", test_two_nics);
  ADD ("/kernel/discover/igb-sriov-only", "igb-legacy.umockdev", test_igb);
  ADD ("/kernel/discover/igb-without-sriov", "igb-legacy.umockdev", test_igb_no_sriov);
  ADD ("/kernel/sriov/igb-vf-driver", "igb-legacy.umockdev", test_igb_vf_driver);
  ADD ("/kernel/sriov/numvfs-through-zero", "cx6dx-switchdev.umockdev", test_numvfs_through_zero);
  ADD ("/kernel/sriov/numvfs-from-zero-and-limits", "cx6dx-switchdev.umockdev", test_numvfs_from_zero_and_limits);
  ADD ("/kernel/sriov/numvfs-refused-under-vdpa", "cx6dx-vdpa.umockdev", test_numvfs_refused_under_vdpa);
  ADD ("/kernel/vdpa/bind-and-node", "cx6dx-vdpa.umockdev", test_vdpa_bind_and_node);
  ADD ("/kernel/vdpa/node-access", "cx6dx-vdpa.umockdev", test_node_access);
  return g_test_run ();
}
