/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vdpa-allocator-relay: serves one VDUSE virtio-net device from a tap (the
 * software vDPA device of issue 28). The daemon (or a test) creates the
 * VDUSE device and the tap and hands their fds over:
 *
 *   vdpa-allocator-relay --device-fd=3 --tap-fd=4 [--user=USER]
 *                        [--max-memory=MIB] [--verbose]
 *
 * or, for the lab and by hand (root, before dropping to --user):
 *
 *   vdpa-allocator-relay --device=/dev/vduse/NAME --tap=TAPNAME ...
 *
 * It then drops privileges (--user, when started as root), bounds its
 * memory, loads its seccomp filter, and runs until SIGTERM, SIGINT or
 * SIGHUP, or until the device is broken or its fd hangs up; exit status 0
 * then, 1 on a failure, 2 on a usage error. The creator deletes the vdpa
 * device, stops the relay, then destroys the VDUSE device
 * (VDUSE_DESTROY_DEV fails with EBUSY while the relay holds it open:
 * drivers/vdpa/vdpa_user/vduse_dev.c, vduse_destroy_dev). */
#define G_LOG_DOMAIN "vdpa-allocator-relay"

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "config.h"
#include "va-error.h"
#include "va-relay-dev.h"
#include "va-relay-sandbox.h"

static volatile sig_atomic_t stop;
static gboolean verbose;

static void
on_signal (int sig)
{
  stop = 1;
}

/* one line per message on stderr with write(2) only: what the seccomp
 * filter allows (GLib's default writer may open a socket to journald) */
static GLogWriterOutput
writer (GLogLevelFlags level, const GLogField *fields, gsize n_fields, gpointer user_data)
{
  const char *message = NULL, *domain = NULL;
  for (gsize i = 0; i < n_fields; i++)
    if (g_str_equal (fields[i].key, "MESSAGE"))
      message = fields[i].value;
    else if (g_str_equal (fields[i].key, "GLIB_DOMAIN"))
      domain = fields[i].value;
  /* --verbose, or G_MESSAGES_DEBUG naming the domain in the daemon's
   * environment, which the relay inherits */
  if ((level & G_LOG_LEVEL_DEBUG) && !verbose && g_log_writer_default_would_drop (level, domain))
    return G_LOG_WRITER_HANDLED;
  const char *prefix = (level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL)) ? "<3>"
                       : (level & G_LOG_LEVEL_WARNING)                      ? "<4>"
                       : (level & G_LOG_LEVEL_DEBUG)                        ? "<7>"
                                                                            : "<6>";
  char line[1024];
  int n = g_snprintf (line, sizeof line, "%s%s: %s\n", prefix, domain ? domain : "relay", message ? message : "");
  if (n > 0)
    {
      gsize len = MIN ((gsize) n, sizeof line - 1);
      if (write (STDERR_FILENO, line, len) < 0)
        return G_LOG_WRITER_UNHANDLED;
    }
  return G_LOG_WRITER_HANDLED;
}

static int
open_tap (const char *name, GError **error)
{
  int fd = open ("/dev/net/tun", O_RDWR | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "/dev/net/tun: %s", strerror (errno));
      return -1;
    }
  /* no IFF_VNET_HDR: the relay writes and strips the header itself */
  struct ifreq ifr = { .ifr_flags = IFF_TAP | IFF_NO_PI };
  g_strlcpy (ifr.ifr_name, name, IFNAMSIZ);
  if (ioctl (fd, TUNSETIFF, &ifr) < 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "tap %s: %s", name, strerror (errno));
      close (fd);
      return -1;
    }
  return fd;
}

static gboolean
check_fd (int fd, const char *what, GError **error)
{
  if (fd < 0 || fcntl (fd, F_GETFD) < 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "%s %d is not an open file descriptor", what, fd);
      return FALSE;
    }
  return TRUE;
}

int
main (int argc, char **argv)
{
  int dev_fd = -1, tap_fd = -1, max_mib = 64;
  g_autofree char *device = NULL, *tap = NULL, *user = NULL;
  gboolean no_sandbox = FALSE;
  GOptionEntry entries[] = {
    { "device-fd", 0, 0, G_OPTION_ARG_INT, &dev_fd, "The VDUSE device, open (/dev/vduse/NAME)", "FD" },
    { "tap-fd", 0, 0, G_OPTION_ARG_INT, &tap_fd, "The tap, open with IFF_TAP|IFF_NO_PI, no IFF_VNET_HDR", "FD" },
    { "device", 0, 0, G_OPTION_ARG_FILENAME, &device, "Open the VDUSE device at PATH instead", "PATH" },
    { "tap", 0, 0, G_OPTION_ARG_STRING, &tap, "Open or create the tap NAME instead (root)", "NAME" },
    { "user", 0, 0, G_OPTION_ARG_STRING, &user, "Run as USER (when started as root)", "USER" },
    { "max-memory", 0, 0, G_OPTION_ARG_INT, &max_mib, "Bound the relay's own memory (default 64)", "MIB" },
    { "no-sandbox", 0, 0, G_OPTION_ARG_NONE, &no_sandbox, "No seccomp filter, no limits (debugging, valgrind)", NULL },
    { "verbose", 'v', 0, G_OPTION_ARG_NONE, &verbose, "Log each message from the device", NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) ctx = g_option_context_new ("- serve a VDUSE virtio-net device from a tap");
  g_autoptr (GError) error = NULL;

  g_log_set_writer_func (writer, NULL, NULL);
  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    {
      g_printerr ("vdpa-allocator-relay: %s\n", error->message);
      return 2;
    }
  if ((dev_fd >= 0) == (device != NULL) || (tap_fd >= 0) == (tap != NULL) || max_mib < 8 || max_mib > 4096)
    {
      g_printerr ("vdpa-allocator-relay: give one of --device-fd and --device, one of --tap-fd and --tap, "
                  "and --max-memory from 8 to 4096\n");
      return 2;
    }
  if (device != NULL)
    {
      dev_fd = open (device, O_RDWR | O_CLOEXEC | O_NONBLOCK);
      if (dev_fd < 0)
        {
          g_printerr ("vdpa-allocator-relay: %s: %s\n", device, strerror (errno));
          return 1;
        }
    }
  if (tap != NULL)
    tap_fd = open_tap (tap, &error);
  if (tap_fd < 0 && error != NULL)
    goto fail;
  if (!check_fd (dev_fd, "--device-fd", &error) || !check_fd (tap_fd, "--tap-fd", &error))
    goto fail;

  struct sigaction sa = { .sa_handler = on_signal };
  sigaction (SIGTERM, &sa, NULL);
  sigaction (SIGINT, &sa, NULL);
  sigaction (SIGHUP, &sa, NULL);
  signal (SIGPIPE, SIG_IGN);

  if (!va_relay_drop_privileges (user, &error))
    goto fail;
  /* valgrind refuses RLIMIT_NOFILE (it keeps fds of its own above it) and
   * runs no seccomp-filtered program: --no-sandbox is for it */
  if (!no_sandbox && (!va_relay_limit_memory ((guint64) max_mib << 20, &error) || !va_relay_seccomp (&error)))
    goto fail;
  g_message ("serving the device (fd %d) on the tap (fd %d)%s", dev_fd, tap_fd, no_sandbox ? ", no sandbox" : "");
  if (!va_relay_dev_run (dev_fd, tap_fd, &stop, &error))
    goto fail;
  close (dev_fd);
  close (tap_fd);
  return 0;

fail:
  g_warning ("%s", error->message);
  return 1;
}
