/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The simulated ConnectX-6 Dx. It stands in for what only the hardware has
 * (VFs, vDPA devices, their char nodes), so that the daemon, the CLI and the
 * hook run for real on machines without one. Its devices are files under
 * RUN/sim: dev/vhost-vdpa-N (the char node) and vdpa/<name> (a link naming
 * the slot and MAC of what was made),
 * so they outlive a daemon crash exactly as kernel devices would. */
#define G_LOG_DOMAIN "va-backend-sim"

#define _GNU_SOURCE /* F_SETLEASE */
#include "va-backend.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "va-error.h"
#include "va-software.h"

#define SIM_VENDOR 0x15b3
#define SIM_PF_DEVICE 0x101d /* ConnectX-6 Dx */

struct _VaBackendSim
{
  VaBackend parent;
  char *root; /* RUN/sim */
  char *dev_dir;
  char *vdpa_dir;
  guint pfs;
  guint vfs;
  guint numa_nodes;
  char **unhealthy;
  GHashTable *slot_index;    /* VF address → global index + 1 */
  GFileMonitor *relay_watch; /* RUN/sim/relay: its NAME.stalled files */
  GHashTable *stalled_said;  /* device name → the words "software-stalled" last said */
};

G_DECLARE_FINAL_TYPE (VaBackendSim, va_backend_sim, VA, BACKEND_SIM, VaBackend)
G_DEFINE_TYPE (VaBackendSim, va_backend_sim, VA_TYPE_BACKEND)

static char *
pf_name (guint i)
{
  return g_strdup_printf ("sim%u", i);
}

static char *
vf_address (guint pf, guint vf)
{
  /* PF i is domain i; its VFs sit on the buses after the PF's own. */
  return g_strdup_printf ("%04x:%02x:%02x.%u", pf, 0x3c + vf / 256, (vf % 256) / 8, vf % 8);
}

static GPtrArray *
sim_discover (VaBackend *backend, GError **error)
{
  VaBackendSim *self = VA_BACKEND_SIM (backend);
  GPtrArray *pfs = g_ptr_array_new_with_free_func ((GDestroyNotify) va_pf_info_free);

  for (guint i = 0; i < self->pfs; i++)
    {
      VaPfInfo *pf = g_new0 (VaPfInfo, 1);

      pf->name = pf_name (i);
      pf->pci = g_strdup_printf ("%04x:3b:00.0", i);
      pf->vendor = SIM_VENDOR;
      pf->device = SIM_PF_DEVICE;
      pf->model = g_strdup ("ConnectX-6 Dx (simulated)");
      pf->numa_node = (int) (i % self->numa_nodes);
      pf->healthy = !(self->unhealthy && g_strv_contains ((const char *const *) self->unhealthy, pf->name));
      if (!pf->healthy)
        {
          pf->health_reason = g_strdup ("link down (simulated)");
          pf->health_code = VA_PF_HEALTH_LINK_DOWN;
        }
      /* a simulated ConnectX-6 Dx serves either kind */
      pf->sriov_reason = g_strdup (pf->health_reason);
      pf->sriov_code = pf->health_code;
      pf->vfs = g_ptr_array_new_full (self->vfs, g_free);
      for (guint k = 0; k < self->vfs; k++)
        g_ptr_array_add (pf->vfs, vf_address (i, k));
      g_ptr_array_add (pfs, pf);
    }
  return pfs;
}

static gboolean
sim_prepare_pf (VaBackend *backend, VaPfInfo *pf, const VaPoolConfig *pool, GError **error)
{
  /* The simulated PF comes with its VFs made and in the right mode. */
  return TRUE;
}

static char *
device_record (VaBackendSim *self, const char *name)
{
  return g_build_filename (self->vdpa_dir, name, NULL);
}

/* A device's record is a symbolic link, vdpaN -> SLOT/MAC: made at once
 * by symlink(2), and small enough to live in the inode, so that making and
 * removing devices frees no blocks (on a file system mounted with discard,
 * freeing blocks costs a synchronous trim). */
static VaDeviceInfo *
sim_create_device (VaBackend *backend, const VaDeviceRequest *req, GError **error)
{
  VaBackendSim *self = VA_BACKEND_SIM (backend);
  guint index = GPOINTER_TO_UINT (g_hash_table_lookup (self->slot_index, req->slot));
  g_autoptr (VaDeviceInfo) dev = g_new0 (VaDeviceInfo, 1);
  g_autofree char *record = NULL;
  g_autofree char *target = NULL;
  int fd;

  if (index == 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "%s: no such VF on the simulated NIC", req->slot);
      return NULL;
    }
  index--;
  dev->name = g_strdup_printf ("vdpa%u", index);
  dev->slot = g_strdup (req->slot);
  dev->chardev = g_strdup_printf ("%s/vhost-vdpa-%u", self->dev_dir, index);

  /* The node first, then the record: a crash in between leaves a node
   * without a record, which nothing lists and the next create reuses. */
  fd = open (dev->chardev, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "%s: creating %s: %s", req->slot, dev->chardev, g_strerror (errno));
      return NULL;
    }
  close (fd);

  record = device_record (self, dev->name);
  target = g_strdup_printf ("%s/%s", req->slot, req->mac);
  if (symlink (target, record) < 0 && errno == EEXIST)
    {
      /* a record a crash left: this create owns the device now */
      g_unlink (record);
      if (symlink (target, record) == 0)
        errno = 0;
    }
  if (errno && !g_file_test (record, G_FILE_TEST_IS_SYMLINK))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "%s: recording %s: %s", req->slot, record, g_strerror (errno));
      return NULL;
    }
  return g_steal_pointer (&dev);
}

/* A software device (issue 28) on the simulated host: its node a plain
 * file named for it, no record (the simulated NIC's devices are listed
 * from their records, and a software device is none of them). */
static char *
software_node (VaBackendSim *self, const char *name)
{
  return g_strdup_printf ("%s/vhost-vdpa-%s", self->dev_dir, name);
}

static VaDeviceInfo *
sim_create_software (VaBackend *backend, const VaSoftwareRequest *req, GError **error)
{
  VaBackendSim *self = VA_BACKEND_SIM (backend);
  g_autofree char *name = va_software_device_name (req->mac);
  g_autoptr (VaDeviceInfo) dev = NULL;
  int fd;

  if (!name)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "software device: '%s' is no MAC address", req->mac);
      return NULL;
    }
  dev = g_new0 (VaDeviceInfo, 1);
  dev->chardev = software_node (self, name);
  fd = open (dev->chardev, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    {
      g_set_error (error, VA_ERROR, errno == EEXIST ? VA_ERROR_BUSY : VA_ERROR_PROVISIONING_FAILED, "software device %s: creating %s: %s",
                   name, dev->chardev, g_strerror (errno));
      return NULL;
    }
  close (fd);
  dev->name = g_strdup (name);
  dev->slot = g_steal_pointer (&name);
  return g_steal_pointer (&dev);
}

/* A simulated relay given up on: RUN/sim/relay/NAME.stalled holds why
 * (tests write it, as the kernel backend's relay dies too often); serving
 * the device again or destroying it takes it away. */
static char *
stalled_file (VaBackendSim *self, const char *name)
{
  return g_strdup_printf ("%s/relay/%s.stalled", self->root, name);
}

static char *
sim_software_stalled (VaBackend *backend, const char *name)
{
  g_autofree char *path = NULL;
  char *why = NULL;

  if (!va_software_is_device_name (name))
    return NULL;
  path = stalled_file (VA_BACKEND_SIM (backend), name);
  return g_file_get_contents (path, &why, NULL, NULL) ? g_strchomp (why) : NULL;
}

/* Served again or gone: what "software-stalled" said is forgotten. */
static void
stall_ended (VaBackendSim *self, const char *name)
{
  g_autofree char *path = stalled_file (self, name);

  g_unlink (path);
  g_hash_table_remove (self->stalled_said, name);
}

/* A NAME.stalled file written (or rewritten with new words): the relay
 * given up on, as the kernel backend's relay_stall() says it, once. */
static void
on_relay_dir_changed (GFileMonitor *monitor, GFile *file, GFile *other, GFileMonitorEvent event, gpointer user_data)
{
  VaBackendSim *self = user_data;
  g_autofree char *base = NULL;
  g_autofree char *why = NULL;
  const char *said;

  if (event == G_FILE_MONITOR_EVENT_MOVED_IN || event == G_FILE_MONITOR_EVENT_RENAMED)
    file = other ? other : file;
  base = g_file_get_basename (file);
  if (!base || !g_str_has_suffix (base, ".stalled"))
    return;
  base[strlen (base) - strlen (".stalled")] = '\0';
  if (!va_software_is_device_name (base))
    return;
  why = sim_software_stalled (VA_BACKEND (self), base);
  said = g_hash_table_lookup (self->stalled_said, base);
  if (!why || !*why)
    {
      if (event == G_FILE_MONITOR_EVENT_DELETED || event == G_FILE_MONITOR_EVENT_MOVED_OUT)
        g_hash_table_remove (self->stalled_said, base);
      return;
    }
  if (g_strcmp0 (said, why) == 0)
    return;
  g_hash_table_insert (self->stalled_said, g_strdup (base), g_strdup (why));
  g_signal_emit_by_name (self, "software-stalled", base, why);
}

/* a node of before is served as it is, by a relay started again */
static VaDeviceInfo *
sim_resume_software (VaBackend *backend, const VaSoftwareRequest *req, gboolean *made, GError **error)
{
  VaBackendSim *self = VA_BACKEND_SIM (backend);
  g_autofree char *name = va_software_device_name (req->mac);
  g_autofree char *node = NULL;
  VaDeviceInfo *dev;

  *made = FALSE;
  node = name ? software_node (self, name) : NULL;
  if (!node || !g_file_test (node, G_FILE_TEST_EXISTS))
    {
      *made = TRUE;
      return sim_create_software (backend, req, error);
    }
  stall_ended (self, name);
  dev = g_new0 (VaDeviceInfo, 1);
  dev->chardev = g_steal_pointer (&node);
  dev->name = g_strdup (name);
  dev->slot = g_steal_pointer (&name);
  return dev;
}

static GPtrArray *
sim_list_software (VaBackend *backend, GError **error)
{
  VaBackendSim *self = VA_BACKEND_SIM (backend);
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GDir) dir = g_dir_open (self->dev_dir, 0, NULL);
  const char *f;

  while (dir && (f = g_dir_read_name (dir)) && names->len < VA_SOFTWARE_MAX_DEVICES)
    if (g_str_has_prefix (f, "vhost-vdpa-") && va_software_is_device_name (f + strlen ("vhost-vdpa-")))
      g_ptr_array_add (names, g_strdup (f + strlen ("vhost-vdpa-")));
  return g_steal_pointer (&names);
}

static gboolean
unlink_if_there (const char *path, GError **error)
{
  if (g_unlink (path) < 0 && errno != ENOENT)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "removing %s: %s", path, g_strerror (errno));
      return FALSE;
    }
  return TRUE;
}

static gboolean
sim_destroy_device (VaBackend *backend, const char *slot, const char *name, const VaPoolConfig *pool, GError **error)
{
  VaBackendSim *self = VA_BACKEND_SIM (backend);
  g_autofree char *record = NULL;
  g_autofree char *chardev = NULL;
  const char *digits;

  if (!name || !g_str_has_prefix (name, "vdpa") || strchr (name, '/'))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "%s: '%s' is no simulated vdpa device", slot, name);
      return FALSE;
    }
  digits = name + 4;
  record = device_record (self, name);
  chardev = g_strdup_printf ("%s/vhost-vdpa-%s", self->dev_dir, digits);
  /* The record last: while it exists the device is listed, and a retry can
   * finish the job. */
  return unlink_if_there (chardev, error) && unlink_if_there (record, error);
}

static gboolean
sim_destroy_software (VaBackend *backend, const char *name, GError **error)
{
  VaBackendSim *self = VA_BACKEND_SIM (backend);
  g_autofree char *node = NULL;
  g_autofree char *stalled = NULL;

  if (!va_software_is_device_name (name) || strchr (name, '/'))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "'%s' is no software device", name);
      return FALSE;
    }
  node = software_node (self, name);
  stalled = stalled_file (self, name);
  g_hash_table_remove (self->stalled_said, name);
  return unlink_if_there (node, error) && unlink_if_there (stalled, error);
}

static GPtrArray *
sim_list_devices (VaBackend *backend, GError **error)
{
  VaBackendSim *self = VA_BACKEND_SIM (backend);
  g_autoptr (GPtrArray) devs = g_ptr_array_new_with_free_func ((GDestroyNotify) va_device_info_free);
  g_autoptr (GDir) dir = NULL;
  g_autoptr (GError) local = NULL;
  const char *name;

  dir = g_dir_open (self->vdpa_dir, 0, &local);
  if (!dir)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "%s", local->message);
      return NULL;
    }
  while ((name = g_dir_read_name (dir)))
    {
      g_autofree char *record = device_record (self, name);
      g_autofree char *target = g_file_read_link (record, NULL);
      const char *slash = target ? strchr (target, '/') : NULL;
      VaDeviceInfo *dev;

      if (!slash || !g_str_has_prefix (name, "vdpa") || !g_ascii_isdigit (name[4]))
        continue;
      dev = g_new0 (VaDeviceInfo, 1);
      dev->name = g_strdup (name);
      dev->slot = g_strndup (target, slash - target);
      dev->chardev = g_strdup_printf ("%s/vhost-vdpa-%s", self->dev_dir, name + 4);
      g_ptr_array_add (devs, dev);
    }
  return g_steal_pointer (&devs);
}

/* Open elsewhere, as a guest holds a kernel node. A write lease is granted
 * only on a file no one else has open: one fcntl rather than a walk of
 * every process's descriptors, which halves the release rate. Should an
 * open come while the lease is held, its break is signalled to us: with
 * SIGURG, which is ignored by default, rather than SIGIO, which kills. */
static gboolean
sim_device_busy (VaBackend *backend, const char *chardev)
{
  int fd = open (chardev, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  int r, err;

  if (fd < 0)
    return FALSE; /* no node: nobody holds it */
  r = fcntl (fd, F_SETSIG, SIGURG) == 0 ? fcntl (fd, F_SETLEASE, F_WRLCK) : -1;
  err = errno;
  if (r == 0)
    fcntl (fd, F_SETLEASE, F_UNLCK);
  close (fd);
  if (r == 0)
    return FALSE;
  if (err == EAGAIN || err == EBUSY)
    return TRUE;
  return va_chardev_held_open (chardev); /* no leases on this file system */
}

/* Who holds a simulated VF: RUN/sim/vf/SLOT.held stands for libvirt
 * passing it through, RUN/sim/vf/SLOT.driver (the driver's name) for a
 * host driver bound to it. Tests write them. */
static VaVfHolder
sim_vf_holder (VaBackend *backend, const char *slot, char **driver)
{
  VaBackendSim *self = VA_BACKEND_SIM (backend);
  g_autofree char *state = g_build_filename (self->root, "vf", slot, NULL);
  g_autofree char *held = g_strconcat (state, ".held", NULL);
  g_autofree char *drvfile = g_strconcat (state, ".driver", NULL);
  g_autofree char *drv = NULL;

  if (g_file_test (held, G_FILE_TEST_EXISTS))
    return VA_VF_LIBVIRT;
  if (!g_file_get_contents (drvfile, &drv, NULL, NULL))
    return VA_VF_NOBODY;
  g_strstrip (drv);
  if (strcmp (drv, "vfio-pci") == 0)
    return VA_VF_LIBVIRT;
  if (driver)
    *driver = g_steal_pointer (&drv);
  return VA_VF_HOST;
}

/* A simulated VF's MAC and VLAN: RUN/sim/vf/SLOT holds "VLAN MAC" when
 * they are set (absent: none). Tests write it. */
static gboolean
sim_repair_vf (VaBackend *backend, const char *slot, const char *pf, char **repaired, GError **error)
{
  VaBackendSim *self = VA_BACKEND_SIM (backend);
  g_autofree char *state = g_build_filename (self->root, "vf", slot, NULL);
  g_autofree char *was = NULL;

  if (sim_vf_holder (backend, slot, NULL) != VA_VF_NOBODY || !g_file_get_contents (state, &was, NULL, NULL))
    return TRUE;
  if (g_unlink (state) < 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "VF %s: resetting: %s", slot, g_strerror (errno));
      return FALSE;
    }
  g_strchomp (was);
  *repaired = g_strdup_printf ("VF %s (%s): no lease, left with VLAN and MAC %s: reset", slot, pf, was);
  return TRUE;
}

/* A representor's VLAN: RUN/sim/rep/SLOT holds "VLAN MAC" while it is on
 * the pool's bridge; RUN/sim/rep/SLOT.fail makes the next attach fail, as
 * a bridge or OVS that refuses would. */
static gboolean
sim_attach_vf (VaBackend *backend, const char *slot, const VaPoolConfig *pool, const char *mac, guint16 vlan, GError **error)
{
  VaBackendSim *self = VA_BACKEND_SIM (backend);
  g_autofree char *dir = g_build_filename (self->root, "rep", NULL);
  g_autofree char *path = g_build_filename (dir, slot, NULL);
  g_autofree char *fail = g_strconcat (path, ".fail", NULL);
  g_autofree char *text = g_strdup_printf ("%u %s\n", vlan, mac);

  if (g_file_test (fail, G_FILE_TEST_EXISTS))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED,
                   "VF %s: adding its representor to bridge %s with VLAN %u: refused (simulated)", slot,
                   pool->uplink_bridge ? pool->uplink_bridge : "", vlan);
      return FALSE;
    }
  g_mkdir_with_parents (dir, 0755);
  return g_file_set_contents (path, text, -1, error);
}

static gboolean
sim_detach_vf (VaBackend *backend, const char *slot, const VaPoolConfig *pool, GError **error)
{
  VaBackendSim *self = VA_BACKEND_SIM (backend);
  g_autofree char *path = g_build_filename (self->root, "rep", slot, NULL);

  g_unlink (path);
  return TRUE;
}

static void
va_backend_sim_finalize (GObject *object)
{
  VaBackendSim *self = VA_BACKEND_SIM (object);

  g_free (self->root);
  g_free (self->dev_dir);
  g_free (self->vdpa_dir);
  g_strfreev (self->unhealthy);
  g_clear_pointer (&self->slot_index, g_hash_table_unref);
  if (self->relay_watch)
    g_signal_handlers_disconnect_by_data (self->relay_watch, self);
  g_clear_object (&self->relay_watch);
  g_clear_pointer (&self->stalled_said, g_hash_table_unref);
  G_OBJECT_CLASS (va_backend_sim_parent_class)->finalize (object);
}

static void
va_backend_sim_class_init (VaBackendSimClass *klass)
{
  VaBackendClass *backend_class = VA_BACKEND_CLASS (klass);

  G_OBJECT_CLASS (klass)->finalize = va_backend_sim_finalize;
  backend_class->name = "sim";
  backend_class->discover = sim_discover;
  backend_class->prepare_pf = sim_prepare_pf;
  backend_class->create_device = sim_create_device;
  backend_class->destroy_device = sim_destroy_device;
  backend_class->list_devices = sim_list_devices;
  backend_class->device_busy = sim_device_busy;
  backend_class->repair_vf = sim_repair_vf;
  backend_class->vf_holder = sim_vf_holder;
  backend_class->attach_vf = sim_attach_vf;
  backend_class->detach_vf = sim_detach_vf;
  backend_class->create_software = sim_create_software;
  backend_class->destroy_software = sim_destroy_software;
  backend_class->resume_software = sim_resume_software;
  backend_class->list_software = sim_list_software;
  backend_class->software_stalled = sim_software_stalled;
}

static void
va_backend_sim_init (VaBackendSim *self)
{
  self->slot_index = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  self->stalled_said = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
}

VaBackend *
va_backend_sim_new (const VaConfig *config, const char *run_dir, GError **error)
{
  g_autoptr (VaBackendSim) self = NULL;

  g_return_val_if_fail (config != NULL, NULL);
  g_return_val_if_fail (run_dir != NULL, NULL);

  self = g_object_new (va_backend_sim_get_type (), NULL);
  self->pfs = config->sim_pfs ? config->sim_pfs : 1;
  self->vfs = config->sim_vfs ? config->sim_vfs : 8;
  self->numa_nodes = config->sim_numa_nodes ? config->sim_numa_nodes : 1;
  self->unhealthy = g_strdupv (config->sim_unhealthy);
  self->root = g_build_filename (run_dir, "sim", NULL);
  self->dev_dir = g_build_filename (self->root, "dev", NULL);
  self->vdpa_dir = g_build_filename (self->root, "vdpa", NULL);
  for (const char *dir = self->dev_dir; dir; dir = (dir == self->dev_dir) ? self->vdpa_dir : NULL)
    if (g_mkdir_with_parents (dir, 0700) < 0)
      {
        g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "creating %s: %s", dir, g_strerror (errno));
        return NULL;
      }
  /* the relays' stand-in: tests write NAME.stalled there */
  {
    g_autofree char *relay_dir = g_build_filename (self->root, "relay", NULL);
    g_autoptr (GFile) dir = g_file_new_for_path (relay_dir);

    if (g_mkdir_with_parents (relay_dir, 0755) < 0)
      {
        g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "creating %s: %s", relay_dir, g_strerror (errno));
        return NULL;
      }
    self->relay_watch = g_file_monitor_directory (dir, G_FILE_MONITOR_WATCH_MOVES, NULL, error);
    if (!self->relay_watch)
      return NULL;
    g_signal_connect (self->relay_watch, "changed", G_CALLBACK (on_relay_dir_changed), self);
  }

  for (guint i = 0; i < self->pfs; i++)
    for (guint k = 0; k < self->vfs; k++)
      g_hash_table_insert (self->slot_index, vf_address (i, k), GUINT_TO_POINTER (i * self->vfs + k + 1));
  return VA_BACKEND (g_steal_pointer (&self));
}
