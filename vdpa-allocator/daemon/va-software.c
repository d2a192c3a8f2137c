/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The software vDPA device's parts (issue 28): VDUSE, the tap, the relay.
 * Kernel facts: docs/kernel-facts.md, "The software vDPA relay". The order
 * of teardown is the kernel's: the vdpa device first (the caller), then the
 * relay (VDUSE_DESTROY_DEV fails with EBUSY while /dev/vduse/NAME is
 * open), then VDUSE_DESTROY_DEV; the tap goes with the relay's fd. */
#define G_LOG_DOMAIN "va-software"

#include "va-software.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <linux/vduse.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ids.h>
#include <linux/virtio_net.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "va-error.h"
#include "va-ids.h"
#include "va-netlink.h"
#include "va-paths.h"

#define DEVICE_PREFIX "vasw-"
#define TAP_PREFIX "vs"
/* VDUSE_VQ_SETUP's max_size, the largest ring a driver may set: vhost_vdpa
 * refuses a larger VHOST_SET_VRING_NUM (6.12, drivers/vhost/vdpa.c:
 * vq_num_max), and QEMU then runs the NIC without vhost, its packets
 * dropped. 1024 is QEMU's VIRTQUEUE_MAX_SIZE */
#define QUEUE_SIZE 1024
#define NUM_VQS 2 /* one receive, one transmit queue: no control queue */
/* how long a node from devtmpfs, a busy device and a relay's exit may take */
#define WAIT_STEPS 100
#define WAIT_STEP_US 20000

char *
va_software_device_name (const char *mac)
{
  g_autofree char *d = va_mac_digits (mac);

  return d ? g_strconcat (DEVICE_PREFIX, d, NULL) : NULL;
}

char *
va_software_tap_name (const char *mac)
{
  g_autofree char *d = va_mac_digits (mac);

  return d ? g_strconcat (TAP_PREFIX, d, NULL) : NULL;
}

gboolean
va_software_is_device_name (const char *name)
{
  return name && g_str_has_prefix (name, DEVICE_PREFIX);
}

const char *
va_software_unavailable (void)
{
  g_autofree char *control = g_build_filename (va_path_get (VA_PATH_DEV), "vduse", "control", NULL);

  if (g_file_test (control, G_FILE_TEST_EXISTS))
    return NULL;
  return "this kernel has no VDUSE loaded (/dev/vduse/control is missing; Debian 12's 6.1 kernel has none, 6.12 has it: modprobe "
         "vduse, then restart the daemon, whose unit allows VDUSE only when it was loaded first)";
}

static int
open_control (const char *who, GError **error)
{
  guint64 version = VDUSE_API_VERSION;
  int ctl = open ("/dev/vduse/control", O_RDWR | O_CLOEXEC);

  if (ctl < 0)
    {
      int e = errno;
      g_set_error (error, VA_ERROR, e == ENOENT ? VA_ERROR_NOT_FOUND : VA_ERROR_PROVISIONING_FAILED, "%s: /dev/vduse/control: %s%s", who,
                   g_strerror (e),
                   e == ENOENT  ? " (load the vduse module: modprobe vduse)"
                   : e == EPERM ? " (the daemon's unit allows VDUSE only if vduse was loaded before it started: restart it)"
                                : "");
      return -1;
    }
  if (ioctl (ctl, VDUSE_SET_API_VERSION, &version) < 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "%s: VDUSE_SET_API_VERSION %" G_GUINT64_FORMAT ": %s", who, version,
                   g_strerror (errno));
      close (ctl);
      return -1;
    }
  return ctl;
}

static gboolean
destroy_on (int ctl, const char *name, int *err)
{
  char buf[VDUSE_NAME_MAX] = { 0 };

  g_strlcpy (buf, name, sizeof buf);
  if (ioctl (ctl, VDUSE_DESTROY_DEV, buf) == 0 || errno == EINVAL)
    return TRUE; /* EINVAL: no such device */
  *err = errno;
  return FALSE;
}

int
va_software_vduse_create (const char *name, const guint8 mac[6], guint16 mtu, GError **error)
{
  g_autofree char *who = NULL;
  g_autofree char *path = NULL;
  g_autofree struct vduse_dev_config *cfg = NULL;
  struct virtio_net_config net = { 0 };
  int ctl, fd = -1, err = 0;

  g_return_val_if_fail (name != NULL && strlen (name) < VDUSE_NAME_MAX, -1);

  who = g_strdup_printf ("software device %s", name);
  if ((ctl = open_control (who, error)) < 0)
    return -1;
  cfg = g_malloc0 (sizeof *cfg + sizeof net);
  memcpy (net.mac, mac, 6);
  net.status = VIRTIO_NET_S_LINK_UP;
  net.max_virtqueue_pairs = 1;
  net.mtu = mtu ? mtu : 1500;
  g_strlcpy (cfg->name, name, sizeof cfg->name);
  cfg->device_id = VIRTIO_ID_NET;
  cfg->features = (1ULL << VIRTIO_F_VERSION_1) | (1ULL << VIRTIO_F_ACCESS_PLATFORM) | (1ULL << VIRTIO_NET_F_MAC)
                  | (1ULL << VIRTIO_NET_F_STATUS) | (1ULL << VIRTIO_NET_F_MTU);
  cfg->vq_num = NUM_VQS;
  cfg->vq_align = 4096;
  cfg->config_size = sizeof net;
  memcpy (cfg->config, &net, sizeof net);
  if (ioctl (ctl, VDUSE_CREATE_DEV, cfg) < 0)
    {
      err = errno;
      g_set_error (error, VA_ERROR, err == EEXIST ? VA_ERROR_BUSY : VA_ERROR_PROVISIONING_FAILED, "%s: VDUSE_CREATE_DEV: %s%s", who,
                   g_strerror (err), err == EEXIST ? " (another NIC with this MAC, or an orphan)" : "");
      close (ctl);
      return -1;
    }

  /* the node comes from devtmpfs; udev may still be at it */
  path = g_strdup_printf ("/dev/vduse/%s", name);
  for (guint i = 0; i < WAIT_STEPS && fd < 0; i++)
    {
      fd = open (path, O_RDWR | O_CLOEXEC | O_NONBLOCK);
      if (fd < 0 && errno != ENOENT)
        break;
      if (fd < 0)
        g_usleep (WAIT_STEP_US);
    }
  if (fd < 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "%s: opening %s: %s", who, path, g_strerror (errno));
      destroy_on (ctl, name, &err);
      close (ctl);
      return -1;
    }
  for (guint i = 0; i < NUM_VQS; i++)
    {
      struct vduse_vq_config vq = { .index = i, .max_size = QUEUE_SIZE };

      if (ioctl (fd, VDUSE_VQ_SETUP, &vq) < 0)
        {
          g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "%s: VDUSE_VQ_SETUP of queue %u: %s", who, i, g_strerror (errno));
          close (fd);
          destroy_on (ctl, name, &err);
          close (ctl);
          return -1;
        }
    }
  close (ctl);
  return fd;
}

int
va_software_vduse_open (const char *name, GError **error)
{
  g_autofree char *path = g_strdup_printf ("/dev/vduse/%s", name);
  int fd = open (path, O_RDWR | O_CLOEXEC | O_NONBLOCK);

  if (fd < 0)
    {
      int e = errno;
      /* vduse_dev_open: -EBUSY while connected */
      g_set_error (error, VA_ERROR,
                   e == ENOENT  ? VA_ERROR_NOT_FOUND
                   : e == EBUSY ? VA_ERROR_BUSY
                                : VA_ERROR_PROVISIONING_FAILED,
                   "software device %s: opening %s: %s", name, path, g_strerror (e));
    }
  return fd;
}

gboolean
va_software_vduse_destroy (const char *name, GError **error)
{
  g_autofree char *who = g_strdup_printf ("software device %s", name);
  g_autoptr (GError) local = NULL;
  int ctl, err = 0;

  if ((ctl = open_control (who, &local)) < 0)
    {
      /* no VDUSE at all: no device of it either */
      if (local->code == VA_ERROR_NOT_FOUND)
        return TRUE;
      g_propagate_error (error, g_steal_pointer (&local));
      return FALSE;
    }
  for (guint i = 0; i < WAIT_STEPS; i++)
    {
      if (destroy_on (ctl, name, &err))
        {
          close (ctl);
          return TRUE;
        }
      if (err != EBUSY)
        break;
      g_usleep (WAIT_STEP_US);
    }
  close (ctl);
  g_set_error (error, VA_ERROR, err == EBUSY ? VA_ERROR_BUSY : VA_ERROR_PROVISIONING_FAILED, "%s: VDUSE_DESTROY_DEV: %s%s", who,
               g_strerror (err), err == EBUSY ? " (a vdpa device sits on it, or a process holds /dev/vduse/NAME open)" : "");
  return FALSE;
}

int
va_software_tap_open (const char *name, GError **error)
{
  struct ifreq ifr = { .ifr_flags = IFF_TAP | IFF_NO_PI };
  int fd;

  g_return_val_if_fail (name != NULL && strlen (name) < IFNAMSIZ, -1);

  fd = open ("/dev/net/tun", O_RDWR | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "tap %s: /dev/net/tun: %s", name, g_strerror (errno));
      return -1;
    }
  g_strlcpy (ifr.ifr_name, name, IFNAMSIZ);
  if (ioctl (fd, TUNSETIFF, &ifr) < 0)
    {
      g_set_error (error, VA_ERROR, errno == EBUSY ? VA_ERROR_BUSY : VA_ERROR_PROVISIONING_FAILED, "tap %s: TUNSETIFF: %s", name,
                   g_strerror (errno));
      close (fd);
      return -1;
    }
  return fd;
}

gboolean
va_software_tap_join (const char *tap, const char *bridge, VaBridgeKind kind, guint16 vlan, GError **error)
{
  g_autoptr (GError) local = NULL;

  g_return_val_if_fail (tap != NULL && bridge != NULL, FALSE);

  if (kind != VA_BRIDGE_LINUX)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED,
                   "tap %s: fallback bridge %s is Open vSwitch, and software devices join Linux bridges only so far", tap, bridge);
      return FALSE;
    }
  /* fail closed: an untagged port would land on the bridge's default VLAN */
  if (!va_nl_link_set_master (tap, bridge, &local) || (vlan && !va_nl_bridge_port_vlan (tap, vlan, &local))
      || !va_nl_link_set_up (tap, &local))
    {
      g_set_error (error, local->domain, local->code, "tap %s on Linux bridge %s, VLAN %u: %s", tap, bridge, vlan, local->message);
      return FALSE;
    }
  return TRUE;
}

GSubprocess *
va_software_relay_start (const char *name, int dev_fd, int tap_fd, const char *user, guint mib, GError **error)
{
  g_autoptr (GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDIN_INHERIT);
  g_autofree char *relay = va_path_libexec ("vdpa-allocator-relay");
  g_autofree char *user_arg = g_strdup_printf ("--user=%s", user ? user : "nobody");
  g_autofree char *mem_arg = g_strdup_printf ("--max-memory=%u", mib);
  const char *argv[] = { relay, "--device-fd=3", "--tap-fd=4", user_arg, mem_arg, NULL };
  g_autoptr (GError) local = NULL;
  GSubprocess *p;

  /* the launcher owns the fds from here: closed in this process after the
   * spawn, so that only the relay holds the device and the tap */
  g_subprocess_launcher_take_fd (launcher, dev_fd, 3);
  g_subprocess_launcher_take_fd (launcher, tap_fd, 4);
  p = g_subprocess_launcher_spawnv (launcher, argv, &local);
  if (!p)
    g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "software device %s: starting its relay %s: %s", name, relay,
                 local->message);
  return p;
}

void
va_software_relay_stop (GSubprocess *relay)
{
  g_return_if_fail (G_IS_SUBPROCESS (relay));

  /* the identifier is NULL once GLib's worker has reaped it */
  if (!g_subprocess_get_identifier (relay))
    return;
  g_subprocess_send_signal (relay, SIGTERM);
  for (guint i = 0; i < WAIT_STEPS && g_subprocess_get_identifier (relay); i++)
    g_usleep (WAIT_STEP_US);
  if (g_subprocess_get_identifier (relay))
    {
      g_warning ("relay %s did not stop on SIGTERM within %u ms: killed", g_subprocess_get_identifier (relay),
                 WAIT_STEPS * WAIT_STEP_US / 1000);
      g_subprocess_force_exit (relay);
      /* a signal may be refused (a daemon without CAP_KILL, the relay
       * being another user): never wait for ever */
      for (guint i = 0; i < WAIT_STEPS && g_subprocess_get_identifier (relay); i++)
        g_usleep (WAIT_STEP_US);
      if (g_subprocess_get_identifier (relay))
        {
          g_warning ("relay %s did not stop on SIGKILL either (is CAP_KILL in the daemon's bounding set?): left running",
                     g_subprocess_get_identifier (relay));
          return;
        }
    }
  g_subprocess_wait (relay, NULL, NULL);
}

/* The pids whose fds include @path. */
static GArray *
holders (const char *path)
{
  GArray *pids = g_array_new (FALSE, FALSE, sizeof (GPid));
  g_autoptr (GDir) proc = g_dir_open ("/proc", 0, NULL);
  const char *pid;

  while (proc && (pid = g_dir_read_name (proc)))
    {
      g_autofree char *fddir = NULL;
      g_autoptr (GDir) fds = NULL;
      const char *fd;
      guint64 n;

      if (!g_ascii_string_to_unsigned (pid, 10, 1, G_MAXINT, &n, NULL) || (GPid) n == getpid ())
        continue;
      fddir = g_strdup_printf ("/proc/%s/fd", pid);
      fds = g_dir_open (fddir, 0, NULL);
      while (fds && (fd = g_dir_read_name (fds)))
        {
          g_autofree char *link = g_build_filename (fddir, fd, NULL);
          g_autofree char *target = g_file_read_link (link, NULL);

          if (g_strcmp0 (target, path) == 0)
            {
              GPid p = (GPid) n;
              g_array_append_val (pids, p);
              break;
            }
        }
    }
  return pids;
}

guint
va_software_relay_stop_stray (const char *name)
{
  g_autofree char *path = g_strdup_printf ("/dev/vduse/%s", name);
  g_autoptr (GArray) pids = holders (path);

  for (guint i = 0; i < pids->len; i++)
    {
      GPid pid = g_array_index (pids, GPid, i);
      gboolean gone = FALSE;

      kill (pid, SIGTERM);
      for (guint k = 0; k < WAIT_STEPS && !gone; k++)
        {
          gone = kill (pid, 0) < 0 && errno == ESRCH;
          if (!gone)
            g_usleep (WAIT_STEP_US);
        }
      if (!gone)
        {
          g_warning ("software device %s: process %d holding it did not stop on SIGTERM: killed", name, (int) pid);
          kill (pid, SIGKILL);
        }
    }
  return pids->len;
}
